"""Estimator maths, one place for every entry point: log-mean-exp of importance weights, its
standard error, the importance effective sample size, the largest weight's share and the
estimate's fall without the largest weights, pooling of independent runs, and systematic
resampling, and the optimal bridge's fixed point with its relative error (shared by bridge
sampling and the bias check's Bennett acceptance ratio).

``log_mean_exp`` and ``ess`` are traceable (used inside the compiled scans); the rest take
host arrays and return floats.

Example
-------
>>> import numpy as np
>>> from ppl_hais.stats import estimators
>>> log_z, se = estimators.log_mean_exp_se(np.zeros(100))
>>> float(log_z), float(se), round(estimators.importance_ess(np.zeros(100)), 6)
(0.0, 0.0, 100.0)
>>> estimators.pool([0.0, 0.0], [0.1, 0.1])[0]
0.0
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

__all__ = [
    "bridge_fixed_point",
    "bridge_relative_se",
    "chain_ess",
    "disagreement",
    "ess",
    "excess",
    "importance_ess",
    "importance_ess_se",
    "log_mean_exp",
    "log_mean_exp_se",
    "max_relative_weight",
    "pool",
    "split_rhat",
    "systematic",
    "weighted_nonfinite",
]


def log_mean_exp(log_w):
    """log(mean exp(log_w)) over the leading axis, traceable."""
    return jax.scipy.special.logsumexp(log_w, axis=0) - jnp.log(log_w.shape[0])


def ess(log_w):
    """(Σw)² / Σw² of the weights, traceable."""
    lse = jax.scipy.special.logsumexp
    return jnp.exp(2 * lse(log_w) - lse(2 * log_w))


def log_mean_exp_se(log_weights):
    """log(mean w) and its delta-method standard error from log weights.

    With normalized weights W_i = w_i / Σw, Var(log Ẑ) ≈ Var(w) / (P · mean(w)²)
    = (P · ΣW² − 1) / (P − 1). This is the Monte Carlo error of Ẑ when the weights have a
    finite variance; it does not include the (downward, Jensen) bias of log Ẑ, and it cannot
    exceed 1, so it must be read together with :func:`pareto_khat`.
    """
    lw = np.asarray(log_weights, dtype=float)
    p = lw.size
    lse = logsumexp(lw)
    log_z = lse - np.log(p)
    w = np.exp(lw - lse)
    var = max(p * np.sum(w * w) - 1.0, 0.0) / max(p - 1, 1)
    return float(log_z), float(np.sqrt(var))


def importance_ess(log_weights) -> float:
    """(Σw)² / Σw² of the weights; NaN when no weight is finite."""
    lw = np.asarray(log_weights, dtype=float)
    if not np.any(np.isfinite(lw)):
        return float("nan")
    return float(np.exp(2 * logsumexp(lw) - logsumexp(2 * lw)))


def importance_ess_se(log_weights) -> float:
    """The jackknife standard error of :func:`importance_ess` (NaN with fewer than 2 finite
    weights). Large where one weight dominates: leaving it out changes the ESS most.

    >>> round(importance_ess_se(np.zeros(64)), 6)  # equal weights: every subset agrees
    0.0
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    lw = np.where(np.isnan(lw), -np.inf, lw)
    n = lw.size
    if n < 2 or np.sum(np.isfinite(lw)) < 2:
        return float("nan")
    w = np.exp(lw - np.max(lw))
    s1, s2 = np.sum(w), np.sum(w * w)
    loo = (s1 - w) ** 2 / np.maximum(s2 - w * w, np.finfo(float).tiny)  # leave-one-out ESS
    with np.errstate(over="ignore"):  # s2 - w² cancels where one weight dominates: inf
        return float(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))


MIN_RUNS_FOR_SPREAD = 4  # runs whose spread stands in for an infinite SE
EXCESS_TOP = 2  # the excess leaves out this many of the largest weights


def max_relative_weight(log_weights) -> float:
    """P·max W: the largest importance weight over the mean weight (1 for equal weights, P
    for a run collapsed onto one particle; NaN without a finite weight)."""
    lw = np.asarray(log_weights, dtype=float).ravel()
    lw = lw[~np.isnan(lw)]
    if lw.size == 0 or not np.any(np.isfinite(lw)):
        return float("nan")
    top = np.max(lw)
    return float(1.0 / np.mean(np.exp(lw - top)))


def weighted_nonfinite(log_weights, counts, num_steps: int, num_nan: int = 0) -> float:
    """The fraction of proposals with a non-finite density or gradient, each particle's
    ``counts`` over ``num_steps`` weighted by its final importance weight, plus the fraction
    ``num_nan`` of NaN final weights. Particles whose integrator diverged where the path left
    them, with no weight at the end, count for nothing; a NaN region next to where the weight
    lies counts in full.

    >>> round(weighted_nonfinite(np.log([1.0, 1.0, 1e-12]), [0, 10, 100], 100), 6)
    0.05
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    w = np.exp(lw - np.max(lw))
    share = w / w.sum() @ (np.asarray(counts, dtype=float).ravel() / num_steps)
    return float(share + num_nan / lw.size)


def systematic(log_weights, num: int, offset: float) -> np.ndarray:
    """Indices of ``num`` draws by systematic resampling in proportion to exp(``log_weights``):
    the points (``offset`` + i)/``num``, i < ``num``, through the weights' CDF (``offset`` in
    [0, 1); NaN weights count as 0). Increasing, so copies of a particle sit side by side.

    >>> systematic(np.log([0.1, 0.6, 0.3]), 4, 0.5).tolist()
    [1, 1, 1, 2]
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    lw = np.where(np.isnan(lw), -np.inf, lw)
    w = np.exp(lw - np.max(lw))
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    return np.searchsorted(cdf, (offset + np.arange(int(num))) / int(num), side="left")


def excess(log_weights) -> float:
    """Nats the estimate falls when its ``EXCESS_TOP`` largest weights are left out:
    log Ẑ − log Ẑ₋, the mean weight of all P particles over the mean of the others, over the
    finite log weights (0 when that is no fall; NaN with fewer than 2·``EXCESS_TOP`` of them).

    Weights with an infinite variance make log Ẑ too low on most runs and too high on a few:
    those where a rare, large weight was drawn, and it dominates. Over 400 sets of 512
    lognormal weights (σ = 2.5 and 3; ``tests/test_trust.py``) the fall without the two
    largest covered the error (+ 0.1 nat) of 96 of 99 and 73 of 74 estimates more than 0.1
    nat high; without the largest alone, 83 and 62. On the trust suite's overestimates
    (docs/trust_suite.md) one particle carried 22–71% of the weights and the estimate was
    0.20–0.85 nat high. So it is what a failed weight check states as how far too *high* the
    estimate may be.

    >>> import numpy as np
    >>> round(excess(np.log([1.0] * 98 + [49.0, 49.0])), 3)  # two of 100 carry half the weight
    0.673
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    lw = np.sort(lw[np.isfinite(lw)])
    if lw.size < 2 * EXCESS_TOP:
        return float("nan")
    all_ = logsumexp(lw) - np.log(lw.size)
    rest = logsumexp(lw[:-EXCESS_TOP]) - np.log(lw.size - EXCESS_TOP)
    return float(max(0.0, all_ - rest))


def pool(log_z, se):
    """Pool independent runs of equal size: log of the mean of the Ẑ's, and its variance.

    The variance is the larger of two estimates: the runs' own (delta method on each run's SE
    from its weights) and the runs' spread, Var_c(Ẑ_c/Ẑ)/C. Runs that disagree by more than
    their weights say (heavy-tailed weights, a mode one run missed) widen the error bar. An
    infinite SE (a run whose k̂ says its weights' variance does not exist) is replaced by the
    spread of :data:`MIN_RUNS_FOR_SPREAD` or more runs (an estimate of the pooled Ẑ's
    variance that needs no weights); with fewer runs it stays infinite.
    """
    log_z, se = np.atleast_1d(np.asarray(log_z, float)), np.atleast_1d(np.asarray(se, float))
    c = log_z.size
    est = float(logsumexp(log_z) - np.log(c))
    rel = np.exp(log_z - est)  # Ẑ_c / Ẑ
    with np.errstate(invalid="ignore"):
        var = float(np.sum((rel * se) ** 2) / c**2)
    if np.any(np.isinf(se)):
        if c < MIN_RUNS_FOR_SPREAD:
            return est, float("inf")
        return est, float(np.var(rel, ddof=1) / c)
    if c > 1:
        var = max(var, float(np.var(rel, ddof=1) / c))
    return est, var


def disagreement(log_z, se) -> float:
    """How far independent estimates spread beyond their own error bars: √(spread / own) of the
    Ẑ's relative to their mean (about 1 when they agree; NaN when an SE or estimate is not
    finite, inf when they claim no error at all)."""
    log_z, se = np.asarray(log_z, float), np.asarray(se, float)
    if log_z.size < 2 or not (np.all(np.isfinite(se)) and np.all(np.isfinite(log_z))):
        return float("nan")
    rel = np.exp(log_z - np.max(log_z))
    rel = rel / rel.mean()  # Ẑ_c / Ẑ
    own = np.sum((rel * se) ** 2) / log_z.size**2
    spread = np.var(rel, ddof=1) / log_z.size
    return float(np.sqrt(spread / own)) if own > 0 else float("inf")


def _autocovariance(x):
    """Autocovariance of each row of ``x`` (C, S) at lags 0..S−1 (FFT, biased /S)."""
    s = x.shape[1]
    n = 1 << int(np.ceil(np.log2(2 * s)))
    f = np.fft.rfft(x - x.mean(axis=1, keepdims=True), n, axis=1)
    return np.fft.irfft(f * np.conj(f), n, axis=1)[:, :s] / s


def chain_ess(x) -> float:
    """Effective sample size of MCMC draws ``x`` shaped (chains, draws), counting the chains'
    autocorrelation and their disagreement (the multi-chain estimator of Stan and ArviZ, Geyer's
    initial monotone sequence, without rank normalization); NaN for a constant."""
    x = np.asarray(x, dtype=float)
    x = x[None] if x.ndim == 1 else x
    c, s = x.shape
    if s < 4 or not np.all(np.isfinite(x)):
        return float("nan")
    acov = _autocovariance(x)
    within = float(np.mean(acov[:, 0]) * s / (s - 1))
    var_plus = within * (s - 1) / s + (float(np.var(x.mean(axis=1), ddof=1)) if c > 1 else 0.0)
    if not var_plus > 0:
        return float("nan")
    rho = 1.0 - (within - np.mean(acov, axis=0)) / var_plus
    rho[0] = 1.0
    m = s // 2
    pairs = rho[0 : 2 * m : 2] + rho[1 : 2 * m : 2]
    stop = np.flatnonzero(pairs <= 0)
    pairs = np.minimum.accumulate(pairs[: stop[0] if stop.size else m])
    tau = max(-1.0 + 2.0 * float(np.sum(pairs)), 1.0 / np.log10(c * s))
    return float(c * s / tau)


def split_rhat(x) -> float:
    """Split-R̂ of draws ``x`` shaped (chains, draws): each chain halved, the between-half
    spread over the within-half one (Gelman et al.); near 1 when the chains agree."""
    x = np.asarray(x, dtype=float)
    x = x[None] if x.ndim == 1 else x
    half = x.shape[1] // 2
    if half < 2:
        return float("nan")
    parts = np.concatenate([x[:, :half], x[:, -half:]])
    within = float(np.mean(np.var(parts, axis=1, ddof=1)))
    between = float(np.var(parts.mean(axis=1), ddof=1)) * half
    if not within > 0:
        return float("nan") if not between > 0 else float("inf")
    return float(np.sqrt(((half - 1) / half * within + between / half) / within))


def _log_mean_exp_host(x) -> float:
    return float(logsumexp(x) - np.log(len(x)))


def bridge_fixed_point(l1, l2, s1, s2, start, tol, max_iter):
    """The fixed point of the optimal bridge (Meng & Wong 1996) in logs: l1 = log q − log g at
    the posterior draws, l2 at the proposal draws (both shifted by the same constant). Returns
    the path of log Ẑ (start first) and whether it converged."""
    log_s1, log_s2 = np.log(s1), np.log(s2)
    path = [start]
    log_r = start
    for _ in range(int(max_iter)):
        num = _log_mean_exp_host(l2 - np.logaddexp(log_s1 + l2, log_s2 + log_r))
        den = _log_mean_exp_host(-np.logaddexp(log_s1 + l1, log_s2 + log_r))
        new = num - den
        path.append(new)
        if not np.isfinite(new):
            return np.array(path), False
        if abs(new - log_r) < tol:
            return np.array(path), True
        log_r = new
    return np.array(path), False


def bridge_relative_se(l1, l2, s1, s2, log_z, ess_of) -> float:
    """Frühwirth-Schnatter's (2004) relative error of Ẑ: the proposal term with N₂ independent
    draws, the posterior term with the effective size of its chains' draws (``ess_of``)."""
    p2 = np.exp(np.clip(l2 - log_z, -700, 700))  # q/(Z g) at the proposal draws
    f1 = p2 / (s1 * p2 + s2)
    f2 = 1.0 / (s1 * np.exp(np.clip(l1 - log_z, -700, 700)) + s2)  # g/(s1 q/Z + s2 g), /g
    term1 = np.var(f1, ddof=1) / (len(f1) * np.mean(f1) ** 2)
    n_eff = ess_of(f2)
    n_eff = f2.size if not np.isfinite(n_eff) else min(n_eff, f2.size)
    term2 = np.var(f2, ddof=1) / (n_eff * np.mean(f2) ** 2)
    return float(np.sqrt(term1 + term2))
