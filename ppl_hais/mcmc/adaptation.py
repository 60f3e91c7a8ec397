"""Warmup for the HMC samplers: dual averaging of the step size and a diagonal mass matrix.

The schedule is Stan's (and NumPyro's): a fast window adapting only the step size, slow windows
of doubling length that also estimate a diagonal inverse mass matrix, and a final fast window.

The inverse mass is sqrt(Var[x] / Var[∇log p]) per coordinate, as in MEADS (Hoffman & Sountsov
2022), not Stan's Var[x]: for a Gaussian it equals the variance exactly however little the
chain has spread, so one-leapfrog samplers (which move slowly along wide directions during
warmup) are not fooled by a window too short to explore them. After each window the step size
is rescaled by max_i sqrt(M⁻¹_old / M⁻¹_new) (the leapfrog stability limit under the new
metric) and the dual averaging restarts from it. The momentum refresh follows MEADS's damping
rule (:func:`damping_refresh`), with λ_max estimated from the population of chains
(:func:`max_eigenvalue`). Pure functions over a NamedTuple state, so the warmup runs inside
one compiled loop or inside NumPyro's ``fori_collect``.

Example
-------
>>> from ppl_hais.mcmc.adaptation import adaptation_schedule
>>> in_slow, ends = adaptation_schedule(1000)
>>> int(ends.sum())  # Stan's windows: 25, 50, 100, 200, 500 draws
5
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

__all__ = [
    "AdaptationState",
    "adaptation_init",
    "adaptation_schedule",
    "adaptation_update",
    "damping_refresh",
    "max_eigenvalue",
]

_GAMMA, _T0, _KAPPA = 0.05, 10.0, 0.75  # Hoffman & Gelman (2014) dual averaging constants
# a coordinate whose gradient's variance over a window is at most this fraction of its mean's
# square had a linear log density there (a Laplace's gradient is exactly ±1/b within an
# orthant: the variance is 0); MEADS's sqrt(Var x / Var ∇) is then unbounded
LINEAR = 1e-6


class AdaptationState(NamedTuple):
    log_step_size: Any  # the current (noisy) iterate
    log_step_size_avg: Any  # its running average: the step size after warmup
    mu: Any  # shrinkage point log(10 ε₀)
    h_bar: Any  # running mean of (target − acceptance)
    count: Any  # iterations since the last restart
    inverse_mass: Any  # diagonal M⁻¹ in use
    var_mean: Any  # Welford accumulators of the current slow window: positions,
    var_m2: Any
    grad_mean: Any  # and gradients
    grad_m2: Any
    var_n: Any


def adaptation_schedule(num_warmup: int, adapt_mass: bool = True):
    """Per-iteration flags ``(in_slow_window, ends_slow_window)`` as boolean arrays.

    Windows as in Stan: 75 iterations of step size only, slow windows 25, 50, 100, … (the last
    stretched to the end), 50 at the end; scaled down to 15% / 75% / 10% below 150 iterations.
    """
    num_warmup = int(num_warmup)
    in_slow = np.zeros(num_warmup, bool)
    ends = np.zeros(num_warmup, bool)
    if not adapt_mass or num_warmup < 20:
        return in_slow, ends
    init, term, base = 75, 50, 25
    if num_warmup < init + term + base:
        init, term = int(0.15 * num_warmup), int(0.1 * num_warmup)
        base = num_warmup - init - term
    start, size, last = init, base, num_warmup - term
    while start < last:
        end = start + size
        if end + 2 * size > last:  # the next window would not fit: stretch this one
            end = last
        in_slow[start:end] = True
        ends[end - 1] = True
        start, size = end, 2 * size
    return in_slow, ends


def adaptation_init(step_size, inverse_mass) -> AdaptationState:
    log_eps = jnp.log(jnp.asarray(step_size, jnp.result_type(float)))
    zero = jnp.zeros_like(log_eps)
    inverse_mass = jnp.asarray(inverse_mass, log_eps.dtype)
    return AdaptationState(
        log_eps,
        log_eps,
        jnp.log(10.0) + log_eps,
        zero,
        zero,
        inverse_mass,
        jnp.zeros_like(inverse_mass),
        jnp.zeros_like(inverse_mass),
        jnp.zeros_like(inverse_mass),
        jnp.zeros_like(inverse_mass),
        zero,
    )


def _welford(mean, m2, n, x, active):
    delta = x - mean
    new_mean = jnp.where(active, mean + delta / jnp.maximum(n, 1.0), mean)
    return new_mean, jnp.where(active, m2 + delta * (x - new_mean), m2)


def adaptation_update(
    state: AdaptationState, acceptance, position, grad, in_slow, ends_window, target_accept
) -> AdaptationState:
    """One warmup iteration: dual averaging toward ``target_accept``, moment accumulation."""
    acceptance = jnp.where(jnp.isfinite(acceptance), acceptance, 0.0)
    t = state.count + 1.0
    w = 1.0 / (t + _T0)
    h_bar = (1.0 - w) * state.h_bar + w * (target_accept - acceptance)
    log_eps = state.mu - jnp.sqrt(t) / _GAMMA * h_bar
    eta = t ** (-_KAPPA)
    log_eps_avg = eta * log_eps + (1.0 - eta) * state.log_step_size_avg
    # Welford over the slow window
    n = state.var_n + jnp.where(in_slow, 1.0, 0.0)
    mean, m2 = _welford(state.var_mean, state.var_m2, n, position, in_slow)
    g_mean, g_m2 = _welford(state.grad_mean, state.grad_m2, n, grad, in_slow)
    # at a window's end: sqrt(Var x / Var ∇), shrunk toward 1e-3 as Stan shrinks its variance
    var_x = m2 / jnp.maximum(n - 1.0, 1.0)
    var_g = g_m2 / jnp.maximum(n - 1.0, 1.0)
    # a gradient that did not vary over the window (a log density linear there: a Laplace
    # prior's orthant, a flat stretch) says nothing of the curvature, and sqrt(Var x / ~0)
    # sent a Laplace's chains to |x| ~ 1e150: Stan's Var x there
    flat = var_g <= LINEAR * g_mean**2
    scale = jnp.where(flat, var_x, jnp.sqrt(var_x / jnp.maximum(var_g, 1e-300)))
    scale = jnp.where(jnp.isfinite(scale) & (scale > 0), scale, 1e-3)
    scale = (n / (n + 5.0)) * scale + 1e-3 * (5.0 / (n + 5.0))
    inverse_mass = jnp.where(ends_window, scale, state.inverse_mass)
    restart = ends_window
    log_eps = jnp.where(
        restart,
        log_eps + 0.5 * jnp.max(jnp.log(state.inverse_mass) - jnp.log(inverse_mass)),
        log_eps,
    )
    zero = jnp.zeros_like(log_eps)
    return AdaptationState(
        log_step_size=log_eps,
        log_step_size_avg=jnp.where(restart, log_eps, log_eps_avg),
        mu=jnp.where(restart, jnp.log(10.0) + log_eps, state.mu),
        h_bar=jnp.where(restart, zero, h_bar),
        count=jnp.where(restart, zero, t),
        inverse_mass=inverse_mass,
        var_mean=jnp.where(restart, jnp.zeros_like(mean), mean),
        var_m2=jnp.where(restart, jnp.zeros_like(m2), m2),
        grad_mean=jnp.where(restart, jnp.zeros_like(g_mean), g_mean),
        grad_m2=jnp.where(restart, jnp.zeros_like(g_m2), g_m2),
        var_n=jnp.where(restart, zero, n),
    )


def max_eigenvalue(rows):
    """MEADS's estimate of the largest eigenvalue of the covariance of the rows of ``rows``
    (n, D), centered here: tr(C²)/tr(C) with tr(C²) from distinct pairs only (unbiased), which
    approximates λ_max well unless many eigenvalues are well above 0 but well below it
    (Hoffman & Sountsov 2022, eq. 7). Needs n ≥ 2."""
    y = rows - jnp.mean(rows, axis=0, keepdims=True)
    n = y.shape[0]
    gram = y @ y.T
    diag = jnp.diag(gram)
    tr = jnp.sum(diag) / n
    tr2 = (jnp.sum(gram**2) - jnp.sum(diag**2)) / (n * (n - 1))
    return jnp.maximum(tr2 / jnp.maximum(tr, 1e-300), 1e-300)


def damping_refresh(log_max_eigenvalue, step_size, count):
    """The momentum refresh per unit simulated time from MEADS's damping rule.

    γ = max(1/sqrt(λ_max), 1/((t + 1) ε)), λ_max of the chains' positions in the whitened
    coordinates the metric defines (the longest scale sets how long a trajectory should run
    before its direction is forgotten; the floor damps hard while warmup starts). GHMC keeps
    exp(−2εγ) of the momentum power per leapfrog step, so the power replaced per unit time
    is 1 − exp(−2γ).
    """
    gamma = jnp.maximum(jnp.exp(-0.5 * log_max_eigenvalue), 1.0 / ((count + 1.0) * step_size))
    return -jnp.expm1(-2.0 * gamma)
