"""A failed trust check as a record: its name, the figure it judged, the nats it states the
estimate may be short (too low) or over (too high), and the sentence a warning shows; and
:class:`EvidenceWarning`, which states a result's failed checks together (:func:`warn`).

A :class:`Check` *is* its sentence (a ``str``, so it prints, joins and goes into ArviZ
attributes as the sentence the user reads), rendered once where the check is made, and carries
its fields beside it: code that needs a check's name or figure reads the field, never the prose.

Example
-------
>>> from ppl_hais.checks.record import Check, names
>>> lag = Check("lag", "the final particles still predict their weights", figure=0.31)
>>> lag.name, lag.figure, str(lag)
('lag', 0.31, 'lag: the final particles still predict their weights')
>>> names([lag.in_chain(0), lag.in_chain(1)])
('lag',)
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Sequence

__all__ = ["Check", "EvidenceWarning", "names", "user_stacklevel", "warn"]

_NAN = float("nan")


class Check(str):
    """One failed check. ``name``: what failed (``"pareto_k"``, ``"lag"``, ``"bias"``, ...);
    ``message``: its sentence after the name, with the remedy; ``figure``: the measure it
    judged (k̂, the lag correlation, the gap in nats; NaN where none); ``short``/``over``: the
    nats by which it says the estimate may be too low/too high (NaN where it states none);
    ``chain``: the chain it belongs to where the estimate pools several (None: the estimate)."""

    name: str
    message: str
    figure: float
    short: float
    over: float
    chain: int | None

    def __new__(cls, name: str, message: str, *, figure=_NAN, short=_NAN, over=_NAN,
                chain: int | None = None) -> Check:  # fmt: skip
        text = f"{name}: {message}" if chain is None else f"chain {chain}: {name}: {message}"
        self = super().__new__(cls, text)
        self.name, self.message, self.chain = str(name), str(message), chain
        self.figure, self.short, self.over = (_number(figure), _number(short),
                                              _number(over))  # fmt: skip
        return self

    def in_chain(self, chain: int) -> Check:
        """This check as chain ``chain``'s, in an estimate that pools several."""
        return Check(self.name, self.message, figure=self.figure, short=self.short,
                     over=self.over, chain=int(chain))  # fmt: skip

    def __reduce__(self):
        return _check, (self.name, self.message, self.figure, self.short, self.over, self.chain)


def _check(name, message, figure, short, over, chain) -> Check:
    return Check(name, message, figure=figure, short=short, over=over, chain=chain)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def names(checks) -> tuple[str, ...]:
    """The checks' names, once each, in order (chains' copies of one check count once)."""
    return tuple(dict.fromkeys(c.name for c in checks))


class EvidenceWarning(UserWarning):
    """An evidence estimate whose diagnostics say it cannot be trusted as reported."""


def user_stacklevel() -> int:
    """The stacklevel of the first frame outside ppl_hais (the core or the adapters), so the
    warning points at the user's call, however many of our frames lie between."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package's root
    ours = (here + os.sep, os.path.join(os.path.dirname(here), "adapters") + os.sep)
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(ours):
        frame, level = frame.f_back, level + 1
    return level


def warn(checks: Sequence[str], what: str = "log evidence", stacklevel: int | None = None,
         note: str | None = None) -> None:  # fmt: skip
    """Raise one :class:`EvidenceWarning` listing the failed checks (nothing if none failed),
    then ``note`` (a remedy particular to the model), attributed to the user's call
    (``stacklevel`` overrides)."""
    if checks:
        warnings.warn(
            f"the {what} estimate failed {len(checks)} trust check(s):\n  - "
            + "\n  - ".join(checks) + (f"\nFor this model: {note}" if note else ""),
            EvidenceWarning,
            stacklevel=stacklevel or user_stacklevel(),
        )
