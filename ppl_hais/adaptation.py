"""Warmup for the HMC samplers: dual averaging of the step size and a diagonal mass matrix.

The schedule is Stan's (and NumPyro's): a fast window adapting only the step size, slow windows
of doubling length that also estimate the position variances (M⁻¹ = regularized variance, the
step-size averaging restarted after each), and a final fast window. Pure functions over a
NamedTuple state, so the warmup runs inside one ``lax.scan`` or inside NumPyro's ``fori_collect``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

__all__ = ["AdaptationState", "adaptation_schedule", "adaptation_init", "adaptation_update"]

_GAMMA, _T0, _KAPPA = 0.05, 10.0, 0.75  # Hoffman & Gelman (2014) dual averaging constants


class AdaptationState(NamedTuple):
    log_step_size: Any  # the current (noisy) iterate
    log_step_size_avg: Any  # its running average: the step size after warmup
    mu: Any  # shrinkage point log(10 ε₀)
    h_bar: Any  # running mean of (target − acceptance)
    count: Any  # iterations since the last restart
    inverse_mass: Any  # diagonal M⁻¹ in use
    var_mean: Any  # Welford accumulators of the current slow window
    var_m2: Any
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
        zero,
    )


def adaptation_update(
    state: AdaptationState, acceptance, position, in_slow, ends_window, target_accept
) -> AdaptationState:
    """One warmup iteration: dual averaging toward ``target_accept``, variance accumulation."""
    acceptance = jnp.where(jnp.isfinite(acceptance), acceptance, 0.0)
    t = state.count + 1.0
    w = 1.0 / (t + _T0)
    h_bar = (1.0 - w) * state.h_bar + w * (target_accept - acceptance)
    log_eps = state.mu - jnp.sqrt(t) / _GAMMA * h_bar
    eta = t ** (-_KAPPA)
    log_eps_avg = eta * log_eps + (1.0 - eta) * state.log_step_size_avg
    # Welford over the slow window
    n = state.var_n + jnp.where(in_slow, 1.0, 0.0)
    delta = position - state.var_mean
    mean = jnp.where(in_slow, state.var_mean + delta / jnp.maximum(n, 1.0), state.var_mean)
    m2 = jnp.where(in_slow, state.var_m2 + delta * (position - mean), state.var_m2)
    # at a window's end: regularized variance (Stan), restart the step-size averaging from ε
    var = m2 / jnp.maximum(n - 1.0, 1.0)
    var = (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
    inverse_mass = jnp.where(ends_window, var, state.inverse_mass)
    restart = ends_window
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
        var_n=jnp.where(restart, zero, n),
    )
