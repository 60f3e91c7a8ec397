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


def did_you_mean(name: str, known) -> str:
    """" (did you mean 'x'?)" for the closest of ``known`` names, or ""."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def refuse_unknown(kwargs: dict, where: str, known=()) -> None:
    """A TypeError like Python's own for keywords left in ``kwargs``, with the closest of
    ``known`` names suggested."""
    if kwargs:
        name = next(iter(kwargs))
        raise TypeError(
            f"{where}() got an unexpected keyword argument {name!r}{did_you_mean(name, known)}"
        )
