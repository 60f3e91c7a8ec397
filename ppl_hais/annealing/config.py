"""The one options object of an anneal: :class:`AnnealOptions` holds the transition's
(:class:`~.kernels.HAISOptions`), the pilot's (:class:`~.pilot.PilotOptions`) and the main
run's (:class:`RunOptions`) options, frozen, built once from a call's keywords.

Example
-------
>>> from ppl_hais.annealing.config import AnnealOptions
>>> options = AnnealOptions.of({"num_leapfrog": 2, "schedule": "sigmoid", "num_bins": 50})
>>> options.kernel.num_leapfrog, options.pilot.schedule, options.run.num_bins
(2, 'sigmoid', 50)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .kernels import HAISOptions
from .options import of_keywords
from .pilot import PilotOptions

__all__ = ["AnnealOptions", "RunOptions"]


class RunOptions(NamedTuple):
    """:func:`~ppl_hais.ais`'s options for the main run besides the transition's
    (:class:`~.kernels.HAISOptions`) and the pilot's (:class:`~.pilot.PilotOptions`)."""

    bidirectional: bool = False
    reverse_from: Any = None
    num_bins: int = 100
    devices: Any = None

    @classmethod
    def of(cls, options) -> RunOptions:
        """The fields present in a mapping of keyword arguments; defaults for the rest."""
        return of_keywords(cls, options)


class AnnealOptions(NamedTuple):
    """Every option of an anneal in one frozen object: the transition's, the pilot's and the
    main run's. Built once from a call's keywords (:meth:`of`, one spelling of each) and
    passed down unchanged to every pilot, probe, rung and bias check of the call."""

    kernel: HAISOptions = HAISOptions()
    pilot: PilotOptions = PilotOptions()
    run: RunOptions = RunOptions()

    @classmethod
    def of(cls, keywords) -> AnnealOptions:
        """The options named in a mapping of keyword arguments; defaults for the rest."""
        return cls(HAISOptions.of(keywords), PilotOptions.of(keywords), RunOptions.of(keywords))
