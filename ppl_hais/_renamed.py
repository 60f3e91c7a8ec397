"""Old argument spellings, accepted for one release with a FutureWarning naming the new one."""

from __future__ import annotations

import warnings

_UNSET = object()


def renamed(kwargs: dict, old: str, new: str, value):
    """``value`` of the argument ``new``, or the one passed under its old name ``old`` (popped
    from ``kwargs``), with a FutureWarning; both at once is an error."""
    if old not in kwargs:
        return value
    old_value = kwargs.pop(old)
    warnings.warn(
        f"{old}= is now called {new}= (the same meaning); the old name will be removed in the "
        "next release",
        FutureWarning,
        stacklevel=3,
    )
    return old_value


def refuse_unknown(kwargs: dict, where: str) -> None:
    """A TypeError like Python's own for keywords left in ``kwargs``."""
    if kwargs:
        name = next(iter(kwargs))
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
