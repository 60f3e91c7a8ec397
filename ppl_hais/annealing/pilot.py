"""The pilot: a short discarded anneal that tunes log(step size) and the diagonal scale as
functions of β and measures the path, frozen before the main run (so Ẑ stays unbiased).

Example
-------
>>> import numpy as np
>>> from ppl_hais.annealing.pilot import PILOT_WARMUP, pilot_schedule
>>> pilot_betas, ref_betas = pilot_schedule(np.linspace(0, 1, 1001), num_steps=100)
>>> len(pilot_betas) - PILOT_WARMUP, float(ref_betas[-1])
(101, 1.0)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..checks import diagnostics
from ..mcmc import fast_random
from ..model.schedules import make_schedule
from ..model.target import AnnealingTarget
from ..results.result import AnnealingError, InitialSupportError
from ..runtime.precision import float64
from .execution import GROUP_PARTICLES, initial_sampler, run
from .kernels import TransitionKernel
from .options import of_keywords

PILOT_WARMUP = 100  # pilot steps at beta = 0 before annealing starts
SUPPORT_DRAWS = 4096  # draws that measure a start's mass outside the model's support



def _smooth(x, window):
    if x.size <= window:
        return np.full_like(x, x.mean())
    kernel = np.ones(window) / window
    padded = np.concatenate(
        [np.full(window // 2, x[0]), x, np.full(window - 1 - window // 2, x[-1])]
    )
    return np.convolve(padded, kernel, mode="valid")


def pilot_schedule(betas, num_steps):
    """The pilot's betas (warm-up at β = 0, then every k-th β) and the βs its step sizes map to.

    The pilot's step n uses β = pilot_betas[n] and records log(step size)[n − 1]; the recorded
    values from index ``PILOT_WARMUP − 1`` on belong to
    ``ref_betas = pilot_betas[PILOT_WARMUP:]``.
    """
    stride = max(1, int(np.ceil((len(betas) - 1) / num_steps)))
    pilot_betas = np.concatenate([np.zeros(PILOT_WARMUP), betas[::stride]])
    if pilot_betas[-1] != 1.0:
        pilot_betas = np.append(pilot_betas, 1.0)
    return pilot_betas, pilot_betas[PILOT_WARMUP:]


class Pilot(NamedTuple):
    """What the pilot measured, as functions of β (linear interpolation between the points)."""

    betas: np.ndarray  # where log_step and log_ratio_sd are given
    log_step: np.ndarray  # smoothed log(step size)
    log_ratio_sd: np.ndarray  # smoothed spread of the log likelihood ratio over particles
    scale: tuple | None  # (betas, log scale per coordinate) by bin, or None (scale 1)
    log_weights: np.ndarray | None = None  # the pilot's final log weights (to compare paths)
    outside: float = float("nan")  # its particles' fraction beyond the start's central 95%

    def gradients_per_particle(self, gradients_per_step) -> int:
        """Model gradients one pilot particle spent: its warm-up steps at β = 0 and its βs."""
        return int((len(self.betas) + PILOT_WARMUP) * gradients_per_step)


def pilot_run(
    rng_key,
    target,
    kernel,
    betas,
    positions,
    *,
    initial_step_size,
    target_accept,
    num_steps=1000,
    adapt_scale=False,
    progress_bar=False,
    desc="pilot",
):
    """A short pilot anneal (its particles are discarded) that tunes log(step size) as a function
    of β toward ``target_accept`` (None: keep ``initial_step_size``), measures the spread of
    the log likelihood ratio along the way and, with ``adapt_scale``, the per-coordinate scale
    of the population (the diagonal preconditioner; see :func:`anneal`).
    """
    pilot_betas, ref_betas = pilot_schedule(betas, num_steps)
    out = run(
        rng_key,
        target,
        kernel,
        pilot_betas,
        np.array([0.0, 1.0]),
        np.full(2, np.log(initial_step_size)),
        positions,
        num_bins=100,
        adapt_target=None if target_accept is None else float(target_accept),
        record=True,
        progress_bar=progress_bar,
        desc=desc,
        adapt_scale=adapt_scale,
    )
    log_steps = np.asarray(out.log_steps)[PILOT_WARMUP - 1 :]
    sd = np.asarray(out.log_ratio_sd)[PILOT_WARMUP - 1 :]
    if not np.all(np.isfinite(log_steps)):
        raise AnnealingError(
            "step-size adaptation diverged (non-finite step size) in the pilot run"
        )
    scale = None
    if adapt_scale:
        scale = (np.asarray(out.scale_betas), np.asarray(out.log_scale))
    return Pilot(
        ref_betas,
        _smooth(log_steps, 11),
        _smooth(np.where(np.isfinite(sd), sd, 0.0), 11),
        scale,
        np.asarray(out.log_weights),
        diagnostics.outside_fraction(out.start_log_initial, out.log_initial),
    )


class PilotOptions(NamedTuple):
    """How a pilot tunes the step size and mass matrix and surveys the path: :func:`ais`'s
    keywords of the same names. The evidence workflow builds one per call and gives it to
    the pilot of every start it tries (their tuning then serves the rungs and the bias
    check), as :class:`~ppl_hais.annealing.kernels.HAISOptions` is for the transition, so an
    option given once reaches all of them."""

    schedule: Any = "adaptive"
    step_size: Any = "auto"
    target_accept: float | None = None
    num_pilot_particles: int = GROUP_PARTICLES
    num_pilot_steps: int = 1000
    adapt_mass_matrix: bool = True

    @classmethod
    def of(cls, options) -> PilotOptions:
        """The fields present in a mapping of keyword arguments; defaults for the rest."""
        return of_keywords(cls, options)


@float64
def survey(
    rng_key,
    target: AnnealingTarget,
    kernel: TransitionKernel,
    *,
    num_steps: int = 1000,
    options: PilotOptions | None = None,
    positions=None,
    progress_bar: bool = False,
    desc: str = "pilot",
) -> Pilot:
    """The pilot :func:`ais` runs before a main run of ``num_steps`` temperatures: a discarded
    anneal that tunes the step size and mass matrix and measures the path (for the adaptive
    schedule), as ``options`` say (default: ``PilotOptions()``). ``positions``: its initial
    particles (default: ``options.num_pilot_particles`` fresh draws). Its final log weights
    tell how hard the path is (the evidence workflow compares initial distributions by them);
    passing it to :func:`ais` as ``pilot=`` reuses it."""
    options = PilotOptions() if options is None else options
    schedule, step_size, target_accept = options.schedule, options.step_size, options.target_accept
    auto = isinstance(step_size, str)
    adaptive = isinstance(schedule, str) and schedule == "adaptive"
    betas = make_schedule(
        "survey" if adaptive else schedule, None if not isinstance(schedule, str) else num_steps
    )
    rng_key = fast_random.check_key(rng_key)
    if positions is None:
        key_sample, rng_key = fast_random.host_split(rng_key)
        positions = initial_sampler(target, int(options.num_pilot_particles))(key_sample)
    if not np.all(np.isfinite(np.asarray(positions))):  # draws outside the model's support
        # (NaN coordinates): no pilot can run; how much of the start lies outside, from
        # SUPPORT_DRAWS fresh draws (what the warning of initial="auto" reports)
        more = np.asarray(initial_sampler(target, SUPPORT_DRAWS)(fast_random.host_fold_in(
            rng_key, 3)))  # fmt: skip
        raise InitialSupportError(int(np.sum(~np.all(np.isfinite(more), axis=-1))), len(more))
    if auto and target_accept is None:
        target_accept = 0.9 if kernel.gradients_per_step > 0 else 0.3
    return pilot_run(
        rng_key,
        target,
        kernel,
        betas,
        positions,
        initial_step_size=kernel.default_step_size if auto else float(step_size),
        target_accept=target_accept if auto else None,
        num_steps=int(options.num_pilot_steps),
        adapt_scale=auto and bool(options.adapt_mass_matrix),
        progress_bar=progress_bar,
        desc=desc,
    )


