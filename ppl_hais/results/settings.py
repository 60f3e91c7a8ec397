"""What one annealing run was, as a typed record: its transition, its sizes, its tuning and
what it spent (:class:`RunSettings`, ``AISResult.settings``).

Example
-------
>>> from ppl_hais.results.settings import RunSettings
>>> s = RunSettings(kernel="hais", num_particles=512, num_steps=250, gradients_per_particle=250.0)
>>> s.replace(num_runs=2).num_runs, s.num_runs
(2, 1)
>>> RunSettings().attrs()["num_runs"]
'1'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["RunSettings"]


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The settings of one annealing run (``AISResult.settings``); the ArviZ output holds each
    given field as a ``hais_<field>`` attribute of the file (:meth:`attrs`).

    Attributes
    ----------
    kernel : str
        The transition's name (``"hais"``, ``"hais_reduced_flips"``, ``"hais_local"``,
        ``"hais+discrete"``, ``"block Gibbs"``, ...).
    num_particles, num_steps : int
        Particles (all runs pooled) and temperatures.
    schedule, step_size, target_accept
        How the temperatures were placed (a name, ``"user"``/``"given"`` for an array), the
        step size (``"auto"``: tuned by the pilot) and the pilot's acceptance target.
    gradients_per_particle, gradients_executed_per_particle : float
        Model gradients a particle's run needed, and those executed under ``vmap`` (where
        every particle pays for the longest trajectory of its group).
    pilot_gradients_per_particle, num_pilot_particles
        The pilot's cost per particle and its population.
    num_devices : int
        Devices the particles were sharded over; ``particles_per_device`` their rows on each.
    discrete_acceptance : float, optional
        The share of steps whose integer-coordinate move was taken (``mixed_kernel``).
    num_reverse_particles, reverse_from
        A reverse run's particles and where they started (``"exact draws"``, ``"own
        particles"``).
    num_chains, chain
        Chains of the call and this result's (None: one chain).
    num_runs, run_particles
        Independent runs pooled into this result (:meth:`~ppl_hais.AISResult.pooled`) and the
        first run's particles (the call's; None: not pooled).
    bias_check : dict, optional
        The bias check's figures and note (:class:`~ppl_hais.estimate.bias.BiasCheck`).
    matrix_products_per_temperature : int, optional
        An RBM's cost per temperature (:mod:`ppl_hais.research.energy`).
    remedy : str, optional
        What the trust checks name when the weights degenerate (default: the annealer's).
    simulated : dict, optional
        The simulated data and parameters of a bidirectional check on simulated data.
    """

    kernel: str = ""
    num_particles: int = 0
    num_steps: int = 0
    schedule: Any = "adaptive"
    step_size: Any = "auto"
    target_accept: float | None = None
    gradients_per_particle: float = 0.0
    gradients_executed_per_particle: float = 0.0
    pilot_gradients_per_particle: float = 0.0
    num_pilot_particles: int = 0
    num_devices: int = 1
    particles_per_device: tuple = ()
    discrete_acceptance: float | None = None
    num_reverse_particles: int | None = None
    reverse_from: str | None = None
    num_chains: int = 1
    chain: int | None = None
    num_runs: int = 1
    run_particles: int | None = None
    bias_check: Mapping | None = None
    matrix_products_per_temperature: int | None = None
    remedy: str | None = None
    simulated: Mapping | None = None

    def replace(self, **changes) -> RunSettings:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def attrs(self) -> dict[str, str]:
        """The given fields as text, for a file's attributes (``simulated`` left out: arrays)."""
        return {f.name: str(getattr(self, f.name)) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None and f.name != "simulated"}  # fmt: skip
