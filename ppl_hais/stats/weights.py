"""Statistics of a run's final weights and particles that the trust rules read: the Pareto k̂
of the weights (PSIS), the rank correlation of the weights with the log density ratio (the
lag), and the share of particles that ended outside the start's bulk.

Example
-------
>>> import numpy as np
>>> from ppl_hais.stats.weights import pareto_khat
>>> bool(pareto_khat(np.random.default_rng(0).normal(size=1000)) < 0.5)  # a light tail
True
"""

from __future__ import annotations

import numpy as np

from .pareto import tail_length, tail_shape

__all__ = ["MIN_PARTICLES_KHAT", "lag_correlation", "outside_fraction", "pareto_khat", "ranks"]

MIN_PARTICLES_KHAT = 20  # fewer particles: k̂ is not estimated (NaN)


def lag_correlation(log_weights, log_ratio) -> float:
    """Spearman rank correlation between the final log weights and log f − log q (the log
    density ratio of target and initial distribution) at the final particles.

    A rank correlation, so one particle far out (or a zero weight) cannot dominate it; NaN
    with fewer than 20 particles where both are finite or when either does not vary. Its noise
    is about 1/√P for a run that kept up with the annealing.
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    h = np.asarray(log_ratio, dtype=float).ravel()
    ok = np.isfinite(lw) & np.isfinite(h)
    if ok.sum() < MIN_PARTICLES_KHAT or np.ptp(lw[ok]) == 0 or np.ptp(h[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(ranks(lw[ok]), ranks(h[ok]))[0, 1])


def ranks(x):
    """Ranks 1..n of ``x``, ties given their average rank (scipy's ``rankdata``)."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], xs.size]
    ranks = np.empty(x.size)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def outside_fraction(start_log_initial, final_log_initial) -> float:
    """The fraction of final particles outside the initial distribution's central 95%: whose
    log q lies below the 5% quantile of log q over the initial draws. About 0.05 or less
    when the target lies within the initial distribution (a prior start, a Laplace start);
    large when the annealing carried the particles beyond it (a wider or heavier-tailed
    target). NaN when either is not finite anywhere."""
    q0 = np.asarray(start_log_initial, dtype=float).ravel()
    q1 = np.asarray(final_log_initial, dtype=float).ravel()
    q0, q1 = q0[np.isfinite(q0)], q1[~np.isnan(q1)]
    if q0.size == 0 or q1.size == 0:
        return float("nan")
    return float(np.mean(q1 < np.quantile(q0, 0.05)))


def pareto_khat(log_weights) -> float:
    """Pareto k̂ of the importance weights (PSIS: :func:`ppl_hais.stats.pareto.tail_shape`);
    NaN when it cannot be fitted.

    Non-finite log weights count as zero weights. With fewer than 20 particles the tail cannot
    be fitted (NaN); with fewer than 5 non-zero weights the weights have collapsed (inf). When
    the largest weights are all equal (a likelihood that does not depend on the latents: every
    weight is the same) there is no tail: −inf (ArviZ raises or says inf there). NaN
    too when the tail's first quartile is its minimum (no Pareto-like tail to fit).
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    lw = np.where(np.isnan(lw), -np.inf, lw)
    finite = lw[np.isfinite(lw)]
    if lw.size < MIN_PARTICLES_KHAT:  # the tail fit uses the largest ~3√P weights
        return float("nan")
    if finite.size < 5:  # the weights have collapsed onto a handful of particles
        return float("inf")
    # the fit expects finite input; a zero weight is far below every finite one
    lw = np.where(np.isfinite(lw), lw, finite.min() - 1e3)
    tail = np.sort(lw)[-tail_length(lw.size) - 1 :]
    if np.ptp(tail) <= 1e-12 * max(1.0, abs(tail[-1])):
        return float("-inf")
    with np.errstate(divide="ignore", invalid="ignore"):
        return tail_shape(lw)
