"""Pareto k̂ of importance weights: the shape of a generalized Pareto distribution fitted to the
largest weights, as Pareto-smoothed importance sampling estimates it (Vehtari, Simpson,
Gelman, Yao & Gabry 2024, "Pareto smoothed importance sampling", JMLR 25(72), §3; the fit is
Zhang & Stephens 2009's empirical Bayes estimate with PSIS's weak prior on k).

Our own, in numpy alone: ArviZ's PSIS imported ``arviz_stats`` with scipy.stats and
xarray-einstats inside a user's first call (1.3 s of a 3 s first call), and ArviZ
0.x and 1.x cut the tail at different lengths (68 and 67 of 512 weights), so one run's k̂
differed between the two stacks; now both get ArviZ 1.x's. ``tests/test_pareto.py`` pins it
to both ArviZ versions' k̂ at their own tail lengths.

Example
-------
>>> import numpy as np
>>> from ppl_hais.stats.pareto import tail_shape
>>> rng = np.random.default_rng(0)
>>> log_weights = np.log(rng.pareto(1 / 0.7, 20_000) + 1)  # weights with a k = 0.7 tail
>>> round(tail_shape(log_weights), 1)  # its sampling spread here: about 0.05
0.7
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_gpd", "tail_length", "tail_shape"]

PRIOR_K = 10  # the weak prior on k: as many pseudo-observations at k = ½ (PSIS, §3)
PRIOR_B = 3  # the spread of Zhang & Stephens' grid over θ


def tail_length(num_weights: int) -> int:
    """How many of the largest weights the tail fit uses: ⌊3√S⌋ above 225 weights, ⌊S/5⌋ below
    (PSIS with relative efficiency 1, as ArviZ 1.x cuts it; ArviZ 0.x and ``loo`` round up,
    one weight more at S = 512): the trust checks' thresholds were calibrated on ArviZ 1.x's
    k̂."""
    if num_weights > 225:
        return int(np.floor(3.0 * np.sqrt(num_weights)))
    return int(np.floor(num_weights / 5.0))


def fit_gpd(excess) -> tuple[float, float]:
    """(k, σ) of a generalized Pareto distribution fitted to ``excess`` (sorted ascending,
    positive: the tail's values above the threshold) by Zhang & Stephens' posterior mean over a
    grid of θ = −k/σ, then k shrunk toward ½ by ``PRIOR_K`` pseudo-observations. NaN when the
    first quartile equals the minimum (no Pareto-like tail to fit)."""
    x = np.asarray(excess, dtype=float)
    n = x.size
    quartile = x[int(n / 4 + 0.5) - 1]
    if not quartile > x[0]:
        return float("nan"), float("nan")
    m = 30 + int(np.sqrt(n))
    theta = 1.0 / x[-1] + (1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))) / (PRIOR_B * quartile)
    k = np.mean(np.log1p(-theta[:, None] * x), axis=1)  # −(ZS's k) at each θ
    profile = n * (np.log(-theta / k) - k - 1.0)  # the profile log likelihood of θ
    weight = np.exp(profile - profile.max())
    weight /= weight.sum()
    keep = weight >= 10 * np.finfo(float).eps  # drop θs of negligible weight, as PSIS does
    weight, theta = weight[keep] / weight[keep].sum(), theta[keep]
    theta_mean = float(np.sum(theta * weight))
    k_mean = float(np.mean(np.log1p(-theta_mean * x)))
    # θ → 0 is the exponential tail: k → 0, σ → the mean excess
    sigma = -k_mean / theta_mean if theta_mean != 0 else float(np.mean(x))
    k_post = (n * k_mean + PRIOR_K * 0.5) / (n + PRIOR_K)
    return (float("inf"), float("nan")) if np.isnan(k_post) else (k_post, sigma)


def tail_shape(log_weights, length: int | None = None) -> float:
    """Pareto k̂ of finite ``log_weights``: the shape fitted to the ``length`` (default
    :func:`tail_length`) largest weights' excess over the next one, on the scale of the largest
    weight (so the exponentials cannot overflow)."""
    lw = np.sort(np.asarray(log_weights, dtype=float).ravel())
    length = tail_length(lw.size) if length is None else int(length)
    w = np.exp(lw[-length - 1 :] - lw[-1])
    return fit_gpd(w[1:] - w[0])[0]
