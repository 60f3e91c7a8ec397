"""The result of an annealing run: the estimate, its error bar, the weighted particles.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> result = ph.hais(jax.random.key(0), target, num_particles=64, num_steps=100,
...                  progress_bar=False)
>>> result.warning, result.resample(jax.random.key(1), 10).shape  # particle indices
(False, (10,))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from ..checks.diagnostics import (
    KHAT_UNRELIABLE,
    evidence_checks,
    importance_ess,
    khat_applies,
    lag_correlation,
    log_mean_exp_se,
    pareto_khat,
)
from ..stats.estimators import excess, max_relative_weight, systematic, weighted_nonfinite
from .settings import RunSettings

__all__ = ["AISResult", "AnnealingTrace", "AnnealingError", "InitialSupportError",
           "log_mean_exp_se"]


class AnnealingError(RuntimeError):
    """An annealing run that cannot give an estimate (e.g. every weight is zero)."""


class InitialSupportError(AnnealingError):
    """Draws of the initial distribution where its log density is not finite (``bad`` of
    ``num``): outside the support of the model's density, e.g. a prior drawn without the
    transform that restricts its support (PyMC's ``ordered``)."""

    def __init__(self, bad: int, num: int):
        super().__init__(
            f"{bad} of {num} draws from the initial distribution have a non-finite initial log "
            "density (NaN/inf): the initial distribution's log_density must be finite wherever "
            "it samples. For a model's prior: check its parameters, or a transform that "
            "restricts a variable's support, such as PyMC's ordered, which drawing from the "
            "prior does not apply; initial='auto' or 'laplace' then anneals from a fitted start."
        )
        self.bad, self.num = int(bad), int(num)


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


@dataclass(frozen=True, eq=False)
class AISResult:
    """Estimate of log Z from one annealing run.

    Attributes
    ----------
    log_z : float
        log Ẑ = logsumexp(log w) − log P (+ log Z of the initial distribution).
    log_z_se : float
        Standard error of log Ẑ: the delta-method SE from the spread of the weights
        (``log_z_se_delta``), or ``inf`` when the Pareto k̂ of the weights is ≥ 0.7 (the
        variance of the weights does not exist and no finite error bar can be given).
    ess : float
        Effective sample size (Σw)² / Σw² of the final weights.
    pareto_k : float
        Pareto k̂ of the final importance weights (PSIS, :mod:`ppl_hais.stats.pareto`); NaN below 20
        particles.
    lag : float
        Rank (Spearman) correlation between the final log weights and log f − log q at the
        final particles (:func:`~ppl_hais.checks.diagnostics.lag_correlation`): about 0 when the
        transitions kept up with the annealing, large when the particles lag the target
        (mass they never reached is then missing from the estimate); NaN when not measured.
    outside_initial : float
        Fraction of the final particles outside the initial distribution's central 95%
        (:func:`~ppl_hais.checks.diagnostics.outside_fraction`); the lag check applies from 0.1.
    checks : tuple of str
        The trust checks this estimate failed (see :mod:`ppl_hais.checks.diagnostics`); each was
        raised as an :class:`~ppl_hais.EvidenceWarning`. Empty when all passed.
    log_z_upper : float
        With a reverse run (``bidirectional=True`` or :func:`ppl_hais.bdmc`): the reverse
        estimate, a stochastic upper bound when the reverse run starts from exact posterior
        draws; NaN otherwise. ``bidirectional_gap`` = ``log_z_upper − log_z``.
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
    settings : RunSettings
        The run's settings (:class:`~ppl_hais.results.settings.RunSettings`): its transition,
        sizes, tuning and gradient evaluations per particle.
    """

    log_z: float
    log_z_se: float
    ess: float
    log_weights: np.ndarray
    particles: np.ndarray
    betas: np.ndarray
    trace: AnnealingTrace
    num_nonfinite: int = 0
    settings: RunSettings = RunSettings()
    wall_time: float = float("nan")
    pareto_k: float = float("nan")
    log_z_se_delta: float = float("nan")
    checks: tuple = ()
    log_z_upper: float = float("nan")
    log_z_upper_se: float = float("nan")
    lag: float = float("nan")
    outside_initial: float = float("nan")
    # per particle, for :meth:`pooled`: log f − log q at the end, non-finite proposals
    final_log_ratio: np.ndarray | None = field(default=None, repr=False)
    particle_nonfinite: np.ndarray | None = field(default=None, repr=False)
    log_z_initial: float = 0.0

    @classmethod
    def from_log_weights(
        cls,
        log_weights,
        *,
        particles,
        betas,
        trace,
        num_nonfinite=0,
        particle_nonfinite=None,
        log_z_initial=0.0,
        settings: RunSettings | None = None,
        wall_time=float("nan"),
        reverse_log_weights=None,
        final_log_ratio=None,
        outside=None,
    ):
        """Estimate, error bar and trust checks from the final log weights.

        ``reverse_log_weights``: a reverse run's weights (from the target back to the initial
        distribution); their −log mean exp estimates log Z from above. ``final_log_ratio``:
        log f − log q at the final particles, and ``outside``, the fraction of them outside
        the initial distribution's bulk (:func:`~ppl_hais.checks.diagnostics.outside_fraction`),
        for the lag check. ``particle_nonfinite``: each particle's non-finite proposals (their
        sum replaces ``num_nonfinite``), which the nonfinite check weighs by the final weights.
        """
        settings = RunSettings() if settings is None else settings
        lw = np.asarray(log_weights, dtype=float)
        n_nan = int(np.sum(np.isnan(lw)))
        lw = np.where(np.isnan(lw), -np.inf, lw)
        steps = max(len(np.asarray(betas)) - 1, 1)
        if particle_nonfinite is not None:
            num_nonfinite = int(np.sum(particle_nonfinite))
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
        weighted = None
        if particle_nonfinite is not None:
            weighted = weighted_nonfinite(lw, particle_nonfinite, steps, n_nan)
        ess = importance_ess(lw)
        khat = pareto_khat(lw)
        max_weight = max_relative_weight(lw)
        lag = float("nan") if final_log_ratio is None else lag_correlation(lw, final_log_ratio)
        upper = upper_se = gap = gap_se = None
        if reverse_log_weights is not None:
            rev = np.asarray(reverse_log_weights, dtype=float)
            rev = np.where(np.isnan(rev), -np.inf, rev)
            # E[w_rev] = Z_initial / Z: the reverse estimate of log Z is log Z_initial − log ŵ
            if np.any(np.isfinite(rev)):
                log_inv, upper_se = log_mean_exp_se(rev)
                upper = float(log_z_initial) - log_inv
            else:
                upper, upper_se = float("inf"), float("inf")
            gap, gap_se = upper - (log_z + float(log_z_initial)), float(np.hypot(se, upper_se))
        checks = evidence_checks(
            khat=khat,
            max_weight=max_weight,
            excess=excess(lw),
            ess=ess,
            num_particles=lw.size,
            num_nonfinite=int(num_nonfinite) + n_nan,
            num_evaluations=lw.size * steps,
            nonfinite_weighted=weighted,
            gap=gap,
            gap_se=gap_se,
            lag=lag,
            outside=outside,
            discrete_acceptance=settings.discrete_acceptance,
            remedy=settings.remedy,
        )
        unreliable = khat_applies(khat, max_weight) and not khat < KHAT_UNRELIABLE
        return cls(
            log_z=log_z + float(log_z_initial),
            log_z_se=float("inf") if unreliable else se,
            ess=ess,
            log_weights=lw,
            particles=np.asarray(particles),
            betas=np.asarray(betas),
            trace=trace,
            num_nonfinite=int(num_nonfinite) + n_nan,
            settings=settings,
            wall_time=float(wall_time),
            pareto_k=khat,
            log_z_se_delta=se,
            checks=checks,
            log_z_upper=float("nan") if upper is None else float(upper),
            log_z_upper_se=float("nan") if upper_se is None else float(upper_se),
            lag=lag,
            outside_initial=float("nan") if outside is None else float(outside),
            final_log_ratio=None if final_log_ratio is None else np.asarray(final_log_ratio),
            particle_nonfinite=(None if particle_nonfinite is None
                                else np.asarray(particle_nonfinite)),  # fmt: skip
            log_z_initial=float(log_z_initial),
        )

    @classmethod
    def pooled(cls, runs: Sequence[AISResult]) -> AISResult:
        """One result from independent forward runs over one schedule: their particles and
        weights together, as one run of all their particles would give (its trace: the runs'
        acceptance and step size averaged over their particles, summed ESS, pooled running
        log Ẑ). ``settings.run_particles`` keeps the first run's size (the call's).

        >>> import jax, jax.numpy as jnp, ppl_hais as ph
        >>> t = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
        ...                        initial=ph.Gaussian(jnp.zeros(2), 2.0))
        >>> runs = [ph.hais(jax.random.key(i), t, num_particles=64, num_steps=100,
        ...                 progress_bar=False) for i in range(2)]
        >>> both = ph.AISResult.pooled(runs)
        >>> both.num_particles, both.settings.num_runs, both.log_z_se < runs[0].log_z_se
        (128, 2, True)
        """
        first = runs[0]

        def cat(name):
            parts = [getattr(r, name) for r in runs]
            return None if any(p is None for p in parts) else np.concatenate(parts)

        traces = [r.trace for r in runs]
        size = np.array([r.num_particles for r in runs], float)  # runs may differ in size
        share = (size / size.sum())[:, None]
        trace = AnnealingTrace(
            first.trace.beta,
            np.sum(share * [t.acceptance_rate for t in traces], axis=0),
            np.sum(share * [t.step_size for t in traces], axis=0),
            np.sum([t.ess for t in traces], axis=0),
            logsumexp([t.log_z for t in traces], axis=0, b=share),
        )
        outside = np.array([r.outside_initial for r in runs], float)
        seen = ~np.isnan(outside)
        settings = first.settings.replace(
            num_particles=int(size.sum()), num_runs=sum(r.settings.num_runs for r in runs),
            run_particles=first.settings.run_particles or first.num_particles)  # fmt: skip
        return cls.from_log_weights(
            cat("log_weights"), particles=cat("particles"), betas=first.betas, trace=trace,
            num_nonfinite=sum(r.num_nonfinite for r in runs),
            particle_nonfinite=cat("particle_nonfinite"), log_z_initial=first.log_z_initial,
            settings=settings, wall_time=sum(r.wall_time for r in runs),
            final_log_ratio=cat("final_log_ratio"),
            outside=float(np.average(outside[seen], weights=size[seen])) if seen.any() else None,
        )  # fmt: skip

    @property
    def warning(self) -> bool:
        """True when a trust check failed (an :class:`~ppl_hais.EvidenceWarning` was raised)."""
        return bool(self.checks)

    @property
    def bidirectional_gap(self) -> float:
        """``log_z_upper − log_z`` (NaN without a reverse run)."""
        return float(self.log_z_upper - self.log_z)

    @property
    def acceptance(self):
        return self.trace.acceptance_rate

    @property
    def excess(self) -> float:
        """Nats the estimate falls without its largest weights
        (:func:`ppl_hais.stats.estimators.excess`): how far too high they may have lifted it."""
        return excess(self.log_weights)

    @property
    def num_particles(self) -> int:
        return int(self.log_weights.size)

    @property
    def weights(self):
        """Normalized importance weights."""
        return np.exp(self.log_weights - logsumexp(self.log_weights))

    def resample(self, rng_key=None, num_draws=None):
        """Indices of particles drawn by systematic resampling in proportion to the weights.

        The indices come in increasing order, so copies of one particle sit next to each other:
        an MCMC effective sample size computed from the draws (``az.ess``, NumPyro's ``n_eff``)
        then sees the copies as correlated and falls well below what P shuffled copies of a
        few particles would show. It is still not the importance ESS (a run collapsed onto one
        particle gives a constant chain, for which ArviZ reports P): read ``importance_ess``.
        """
        rng = np.random.default_rng(_seed_from(rng_key))
        n = self.num_particles if num_draws is None else int(num_draws)
        return systematic(self.log_weights, n, rng.random())

    def summary(self) -> str:
        """Plain-text summary: estimate, error bar, ESS, acceptance, cost."""
        s = self.settings
        acc = self.trace.acceptance_rate
        lines = [
            f"log Z = {self.log_z:.4f} ± {self.log_z_se:.4f} (delta-method SE"
            f"{'' if np.isfinite(self.log_z_se) else f' {self.log_z_se_delta:.4f} not valid'})",
            f"  kernel={s.kernel}  particles={self.num_particles}"
            + (f" ({s.num_runs} runs pooled)" if s.num_runs > 1 else "") + "  "
            f"temperatures={len(self.betas) - 1}  schedule={s.schedule}",
            f"  ESS = {self.ess:.1f} of {self.num_particles}  Pareto k = {self.pareto_k:.2f}  "
            f"lag = {self.lag:.2f}  acceptance: mean {np.mean(acc):.3f}, min {np.min(acc):.3f}",
            f"  step size: {np.min(self.trace.step_size):.3g} .. {np.max(self.trace.step_size):.3g}"
            f" ({'tuned by pilot' if s.step_size == 'auto' else 'fixed'})",
            f"  gradients per particle: {s.gradients_per_particle:.0f}"
            f" (executed under vmap: {s.gradients_executed_per_particle:.0f};"
            f" +{s.pilot_gradients_per_particle} pilot)"
            f"  wall time: {self.wall_time:.2f} s",
        ]
        if self.num_nonfinite:
            lines.append(f"  non-finite proposals rejected: {self.num_nonfinite}")
        if np.isfinite(self.log_z_upper):
            lines.append(
                f"  reverse (upper) estimate {self.log_z_upper:.4f}: gap "
                f"{self.bidirectional_gap:.4f} nats"
            )
        if (s.bias_check or {}).get("note"):
            lines.append(f"  NOTE {s.bias_check['note']}")
        for check in self.checks:
            lines.append(f"  WARNING {check}")
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
