"""The result of an annealing run: the estimate, its error bar, the weighted particles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

__all__ = ["AISResult", "AnnealingTrace", "AnnealingError", "log_mean_exp_se"]


class AnnealingError(RuntimeError):
    """An annealing run that cannot give an estimate (e.g. every weight is zero)."""


class AnnealingTrace(NamedTuple):
    """Per-temperature diagnostics, averaged into bins (memory independent of N).

    ``beta`` is the last β of each bin; ``ess`` and ``log_z`` are the weights' effective sample
    size and the running estimate of log Z_β at that β; ``acceptance_rate`` and ``step_size``
    are means over the bin's temperatures and the particles.
    """

    beta: np.ndarray
    acceptance_rate: np.ndarray
    step_size: np.ndarray
    ess: np.ndarray
    log_z: np.ndarray


def log_mean_exp_se(log_weights):
    """log(mean w) and its delta-method standard error from log weights.

    With normalized weights W_i = w_i / Σw, Var(log Ẑ) ≈ Var(w) / (P · mean(w)²)
    = (P · ΣW² − 1) / (P − 1). This is the Monte Carlo error of Ẑ; it does not include the
    (downward, Jensen) bias of log Ẑ at finite annealing length.
    """
    lw = np.asarray(log_weights, dtype=float)
    p = lw.size
    lse = logsumexp(lw)
    log_z = lse - np.log(p)
    w = np.exp(lw - lse)
    var = max(p * np.sum(w * w) - 1.0, 0.0) / max(p - 1, 1)
    return float(log_z), float(np.sqrt(var))


@dataclass(frozen=True, eq=False)
class AISResult:
    """Estimate of log Z from one annealing run.

    Attributes
    ----------
    log_z : float
        log Ẑ = logsumexp(log w) − log P (+ log Z of the initial distribution).
    log_z_se : float
        Delta-method standard error of log Ẑ from the spread of the weights.
    ess : float
        Effective sample size (Σw)² / Σw² of the final weights.
    log_weights : (P,) array
    particles : (P, D) array
        Final positions; with ``log_weights`` they are a weighted sample of the target.
    betas : (N+1,) array
        The schedule.
    trace : AnnealingTrace
        Acceptance rate, step size, ESS and running log Ẑ by temperature bin.
    acceptance : array
        Shortcut for ``trace.acceptance_rate``.
    num_nonfinite : int
        Proposals rejected because a density or gradient was NaN/±inf.
    settings : dict
        The run's settings, including gradient evaluations per particle.
    """

    log_z: float
    log_z_se: float
    ess: float
    log_weights: np.ndarray
    particles: np.ndarray
    betas: np.ndarray
    trace: AnnealingTrace
    num_nonfinite: int = 0
    settings: dict = field(default_factory=dict)
    wall_time: float = float("nan")

    @classmethod
    def from_log_weights(
        cls,
        log_weights,
        *,
        particles,
        betas,
        trace,
        num_nonfinite=0,
        log_z_initial=0.0,
        settings=None,
        wall_time=float("nan"),
    ):
        lw = np.asarray(log_weights, dtype=float)
        n_nan = int(np.sum(np.isnan(lw)))
        lw = np.where(np.isnan(lw), -np.inf, lw)
        if not np.any(np.isfinite(lw)):
            raise AnnealingError(
                f"all {lw.size} importance weights are zero (log weight -inf or NaN: {n_nan} NaN); "
                f"{num_nonfinite} proposals had a non-finite density or gradient. The target's log "
                "density is -inf or NaN wherever the particles went: check that it is finite on "
                "the "
                "support of the initial distribution, and that the initial distribution covers the "
                "target."
            )
        if np.any(lw == np.inf):
            raise AnnealingError("a log weight is +inf: the target density is unbounded (+inf)")
        log_z, se = log_mean_exp_se(lw)
        w = np.exp(lw - logsumexp(lw))
        return cls(
            log_z=log_z + float(log_z_initial),
            log_z_se=se,
            ess=float(1.0 / np.sum(w * w)),
            log_weights=lw,
            particles=np.asarray(particles),
            betas=np.asarray(betas),
            trace=trace,
            num_nonfinite=int(num_nonfinite) + n_nan,
            settings=dict(settings or {}),
            wall_time=float(wall_time),
        )

    @property
    def acceptance(self):
        return self.trace.acceptance_rate

    @property
    def num_particles(self) -> int:
        return int(self.log_weights.size)

    @property
    def weights(self):
        """Normalized importance weights."""
        return np.exp(self.log_weights - logsumexp(self.log_weights))

    def resample(self, rng_key=None, num_draws=None):
        """Indices of particles drawn by systematic resampling in proportion to the weights."""
        rng = np.random.default_rng(_seed_from(rng_key))
        n = self.num_particles if num_draws is None else int(num_draws)
        cdf = np.cumsum(self.weights)
        cdf[-1] = 1.0
        u = (rng.random() + np.arange(n)) / n
        return rng.permutation(np.searchsorted(cdf, u, side="left"))

    def summary(self) -> str:
        """Plain-text summary: estimate, error bar, ESS, acceptance, cost."""
        s = self.settings
        acc = self.trace.acceptance_rate
        lines = [
            f"log Z = {self.log_z:.4f} ± {self.log_z_se:.4f} (delta-method SE)",
            f"  kernel={s.get('kernel')}  particles={self.num_particles}  "
            f"temperatures={len(self.betas) - 1}  schedule={s.get('schedule')}",
            f"  ESS = {self.ess:.1f} of {self.num_particles}  "
            f"acceptance: mean {np.mean(acc):.3f}, min {np.min(acc):.3f}",
            f"  step size: {np.min(self.trace.step_size):.3g} .. {np.max(self.trace.step_size):.3g}"
            f" ({'tuned by pilot' if s.get('step_size') == 'auto' else 'fixed'})",
            f"  gradients per particle: {s.get('gradients_per_particle', 0):.0f}"
            f" (executed under vmap: {s.get('gradients_executed_per_particle', 0):.0f};"
            f" +{s.get('pilot_gradients_per_particle', 0)} pilot)"
            f"  wall time: {self.wall_time:.2f} s",
        ]
        if self.num_nonfinite:
            lines.append(f"  non-finite proposals rejected: {self.num_nonfinite}")
        if self.ess < 0.1 * self.num_particles:
            lines.append(
                "  warning: ESS below 10% of particles; the error bar may understate the error: "
                "increase num_steps"
            )
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def to_arviz(self, rng_key=None, var_name="z"):
        """``InferenceData``: posterior = particles resampled by weight; sample_stats = the rest."""
        from .arviz import from_ais

        idx = self.resample(rng_key)
        return from_ais([self], {var_name: self.particles[idx][None]})


def _seed_from(rng_key):
    if rng_key is None:
        return 0
    if isinstance(rng_key, int | np.integer):
        return int(rng_key)
    import jax

    data = (
        jax.random.key_data(rng_key)
        if hasattr(rng_key, "dtype") and jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key)
        else rng_key
    )
    return [int(x) for x in np.asarray(data).ravel()]
