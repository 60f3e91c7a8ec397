"""HMC with reduced momentum flips (seed 001 ch. 6) and look-ahead (LAHMC), as an MCMC sampler.

Generalized HMC in the style of Horowitz (1991): every transition first refreshes part of the
momentum, ``v ← sqrt(1 − γ) v + sqrt(γ) M^{1/2} r`` with γ = 1 − (1 − refresh)^(nε), then makes
one leap / flip / stay move (:func:`ppl_hais.lookahead.lookahead_transition`). The momentum
persists, so a trajectory keeps its direction across transitions; every momentum flip sends it
back the way it came, and reduced flips make those reversals rarer. The chain leaves p(x, v)
invariant by global balance (there is no detailed balance to test).

BlackJAX's layout: ``init(position, logdensity_fn, rng_key) -> ReducedFlipState`` and
``build_kernel(...)`` returning ``kernel(rng_key, state, logdensity_fn, step_size, ...)``; the
tunable numbers are call arguments. :func:`sample` runs warmup and sampling for many chains in
one compiled ``lax.scan``.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> logdensity = lambda x: -0.5 * jnp.sum(x**2)
>>> kernel = ph.mcmc.build_kernel(num_steps=1, flips="reduced")
>>> state = ph.mcmc.init(jnp.zeros(3), logdensity, jax.random.key(0))
>>> state, info = kernel(jax.random.key(1), state, logdensity, 0.3)
>>> state.position.shape
(3,)
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import random as fast_random
from .adaptation import adaptation_init, adaptation_schedule, adaptation_update
from .lookahead import FLIPS, lookahead_transition
from .precision import float64
from .progress import close_bar, maybe_tick, open_bar
from .target import Potential

__all__ = [
    "ReducedFlipInfo",
    "ReducedFlipState",
    "MCMCResult",
    "build_kernel",
    "init",
    "sample",
]


class ReducedFlipState(NamedTuple):
    position: Any
    momentum: Any
    logdensity: Any
    logdensity_grad: Any


class ReducedFlipInfo(NamedTuple):
    acceptance_rate: Any  # min(1, p(Lζ)/p(ζ)) of the first trajectory (what warmup targets)
    is_accepted: Any
    is_flipped: Any
    lookahead_depth: Any  # trajectory moved along (1..K), 0 if none
    num_gradients: Any  # this chain's gradient evaluations in this transition
    is_divergent: Any  # first proposal non-finite or with energy error beyond ~745


def _potential_fn(logdensity_fn):
    def potential(x):
        logp, grad = jax.value_and_grad(logdensity_fn)(x)
        return Potential(logp, 0.0, grad, 0.0)

    return potential


def _momentum(rng_key, shape, dtype, inverse_mass, salt):
    r = fast_random.normal(rng_key, shape, salt=salt, dtype=dtype)
    return r if inverse_mass is None else r / jnp.sqrt(inverse_mass)


def init(position, logdensity_fn, rng_key, inverse_mass=None) -> ReducedFlipState:
    """The state at ``position`` (a flat array) with a momentum drawn from N(0, M)."""
    position = jnp.asarray(position, jnp.result_type(float))
    logp, grad = jax.value_and_grad(logdensity_fn)(position)
    momentum = _momentum(rng_key, position.shape, position.dtype, inverse_mass, salt=7)
    return ReducedFlipState(position, momentum, logp, grad)


def build_kernel(num_steps: int = 1, lookahead: int = 1, flips: str = "reduced"):
    """The transition ``kernel(rng_key, state, logdensity_fn, step_size, refresh=0.5,
    inverse_mass=None) -> (state, info)``.

    Parameters
    ----------
    num_steps : int
        Leapfrog steps n per trajectory (seed 001 §6.1.3 uses 1).
    lookahead : int
        K, the trajectories tried before a flip is considered (1: seed 001 ch. 6; >1: LAHMC).
    flips : {"reduced", "standard"}
        ``"reduced"``: flip with P_F = max(0, R(ζ) − R(Fζ)); ``"standard"``: flip on every
        rejection (ordinary persistent-momentum HMC, for comparison).
    """
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if int(num_steps) < 1 or int(lookahead) < 1:
        raise ValueError("num_steps and lookahead must be at least 1")

    def kernel(rng_key, state, logdensity_fn, step_size, refresh=0.5, inverse_mass=None):
        position, momentum, logp, grad = state
        dtype = position.dtype
        # partial refresh: (1 − γ) per transition of simulated time n·ε
        keep = jnp.power(1.0 - jnp.asarray(refresh, dtype), num_steps * step_size)
        noise = _momentum(rng_key, momentum.shape, dtype, inverse_mass, salt=0)
        momentum = jnp.sqrt(keep) * momentum + jnp.sqrt(1.0 - keep) * noise
        u = fast_random.uniform(rng_key, (), salt=1, dtype=dtype)
        (position, momentum, potential), info = lookahead_transition(
            u,
            position,
            momentum,
            Potential(logp, 0.0, grad, 0.0),
            _potential_fn(logdensity_fn),
            1.0,
            step_size,
            num_steps=int(num_steps),
            lookahead=int(lookahead),
            flips=flips,
            inverse_mass=inverse_mass,
        )
        state = ReducedFlipState(position, momentum, potential.log_initial, potential.grad_initial)
        return state, ReducedFlipInfo(
            acceptance_rate=info.acceptance_rate,
            is_accepted=info.is_accepted,
            is_flipped=info.is_flipped,
            lookahead_depth=info.depth,
            num_gradients=info.num_gradients,
            is_divergent=~info.is_finite | (info.acceptance_rate <= 0.0),
        )

    return kernel


def find_reasonable_step_size(rng_key, state, logdensity_fn, inverse_mass, step_size=0.1):
    """Double or halve ε until one leapfrog step's acceptance crosses ½ (Hoffman & Gelman)."""
    kernel = build_kernel(1, 1, "standard")

    def accept(eps):
        fresh = state._replace(
            momentum=_momentum(rng_key, state.position.shape, state.position.dtype, inverse_mass, 3)
        )
        _, info = kernel(rng_key, fresh, logdensity_fn, eps, 1.0, inverse_mass)
        return info.acceptance_rate

    eps0 = jnp.asarray(step_size, state.position.dtype)
    direction = jnp.where(accept(eps0) > 0.5, 2.0, 0.5)

    def cond(c):
        eps, i = c
        a = accept(eps)
        return (i < 30) & jnp.where(direction > 1, a > 0.5, a <= 0.5)

    eps, _ = jax.lax.while_loop(
        lambda c: cond(c), lambda c: (c[0] * direction, c[1] + 1), (eps0, 0)
    )
    return eps


class MCMCResult(NamedTuple):
    """Draws and per-draw statistics of :func:`sample`, arrays with leading (chain, draw)."""

    samples: Any  # (chains, draws, D)
    stats: dict  # acceptance_rate, is_accepted, is_flipped, lookahead_depth, num_gradients,
    # is_divergent, logdensity: (chains, draws); executed_gradients: (draws,) under vmap
    step_size: Any  # (chains,) after warmup
    inverse_mass: Any  # (chains, D)
    warmup_gradients: Any  # (chains,) this chain's own work
    wall_time: float


@lru_cache(maxsize=16)
def _compiled(
    logdensity_fn,
    num_warmup,
    num_samples,
    num_steps,
    lookahead,
    flips,
    adapt_mass,
    thinning,
    chain_method,
):
    kernel = build_kernel(num_steps, lookahead, flips)
    in_slow, ends = adaptation_schedule(num_warmup, adapt_mass)

    every = max(1, (num_warmup + num_samples) // 100)

    def one_chain(rng_key, position, step_size, refresh, target_accept, run_id):
        k_init, k_eps, k_warm, k_samp = jax.random.split(rng_key, 4)
        dim = position.shape[0]
        inv_mass = jnp.ones(dim, position.dtype)
        state = init(position, logdensity_fn, k_init, inv_mass)
        eps0 = jnp.where(
            step_size > 0,
            step_size,
            find_reasonable_step_size(k_eps, state, logdensity_fn, inv_mass),
        )
        adapt = adaptation_init(eps0, inv_mass)

        def warm(carry, xs):
            state, adapt, grads = carry
            i, slow, end = xs
            maybe_tick(run_id, i, every)
            key = jax.random.fold_in(k_warm, i)
            state, info = kernel(
                key,
                state,
                logdensity_fn,
                jnp.exp(adapt.log_step_size),
                refresh,
                adapt.inverse_mass,
            )
            adapt = adaptation_update(
                adapt,
                info.acceptance_rate,
                state.position,
                state.logdensity_grad,
                slow,
                end,
                target_accept,
            )
            return (state, adapt, grads + info.num_gradients), None

        if num_warmup > 0:
            xs = (jnp.arange(num_warmup), jnp.asarray(in_slow), jnp.asarray(ends))
            (state, adapt, warm_grads), _ = jax.lax.scan(warm, (state, adapt, 0), xs)
            eps = jnp.exp(adapt.log_step_size_avg)
        else:
            warm_grads, eps = 0, eps0
        inv_mass = adapt.inverse_mass

        def draw(state, i):
            maybe_tick(run_id, num_warmup + i, every)

            def one(state, j):
                key = jax.random.fold_in(k_samp, i * thinning + j)
                return kernel(key, state, logdensity_fn, eps, refresh, inv_mass)

            state, infos = jax.lax.scan(one, state, jnp.arange(thinning))
            info = jax.tree.map(lambda a: a[-1], infos)._replace(
                num_gradients=jnp.sum(infos.num_gradients),
                is_flipped=jnp.any(infos.is_flipped),
                is_divergent=jnp.any(infos.is_divergent),
            )
            return state, (state.position, state.logdensity, info)

        state, (xs, logp, info) = jax.lax.scan(draw, state, jnp.arange(num_samples))
        return xs, logp, info, eps, inv_mass, warm_grads

    if chain_method == "vectorized":
        return jax.jit(jax.vmap(one_chain, (0, 0, None, None, None, None)))
    return jax.jit(lambda *a: jax.lax.map(lambda kp: one_chain(*kp, *a[2:]), (a[0], a[1])))


@float64
def sample(
    rng_key,
    logdensity_fn,
    initial_positions,
    *,
    num_warmup: int = 1000,
    num_samples: int = 1000,
    step_size=None,
    num_steps: int = 1,
    lookahead: int = 1,
    flips: str = "reduced",
    refresh: float = 0.5,
    target_accept: float = 0.9,
    adapt_mass: bool = True,
    thinning: int = 1,
    chain_method: str = "vectorized",
    progress_bar: bool = True,
) -> MCMCResult:
    """Warmup and sampling for several chains in one compiled call.

    Parameters
    ----------
    rng_key : jax.random key
    logdensity_fn : callable
        ``x -> log p(x)`` on flat vectors (up to a constant).
    initial_positions : array (chains, D)
    num_warmup, num_samples : int
        Warmup tunes the step size (dual averaging toward ``target_accept``) and, with
        ``adapt_mass``, a diagonal mass matrix (Stan's windows); its draws are discarded.
    step_size : float, optional
        Initial step size (default: found by doubling/halving).
    num_steps, lookahead, flips : see :func:`build_kernel`.
    refresh : float
        Fraction of momentum power replaced per unit simulated time (seed 001: ½).
    thinning : int
        Keep every ``thinning``-th transition.
    chain_method : {"vectorized", "sequential"}
        ``vmap`` over chains (every chain waits for the slowest look-ahead) or ``lax.map``
        (each chain does only its own work).
    progress_bar : bool
        Show a progress bar (iterations of the slowest chain).

    Returns
    -------
    MCMCResult
    """

    rng_key = fast_random.check_key(rng_key)
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if chain_method not in ("vectorized", "sequential"):
        raise ValueError("chain_method must be 'vectorized' or 'sequential'")
    if not 0.0 < refresh <= 1.0:
        raise ValueError("refresh must be in (0, 1]")
    if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
        raise ValueError(f"step_size must be a positive number or None, got {step_size!r}")
    x0 = jnp.asarray(initial_positions, jnp.result_type(float))
    if x0.ndim != 2 or x0.shape[0] == 0:
        raise ValueError(
            f"initial_positions must have shape (chains, D) with chains ≥ 1, got {x0.shape}"
        )
    logp0 = jax.vmap(logdensity_fn)(x0)
    if not bool(jnp.all(jnp.isfinite(logp0))):
        raise ValueError("the log density is not finite at every initial position")
    fn = _compiled(
        logdensity_fn,
        int(num_warmup),
        int(num_samples),
        int(num_steps),
        int(lookahead),
        flips,
        bool(adapt_mass),
        int(thinning),
        chain_method,
    )
    keys = jax.random.split(rng_key, x0.shape[0])
    start = time.perf_counter()
    run_id = open_bar(num_warmup + num_samples, "reduced-flip HMC") if progress_bar else 0
    try:
        xs, logp, info, eps, inv_mass, warm_grads = fn(
            keys,
            x0,
            jnp.asarray(step_size or 0.0),
            jnp.asarray(refresh),
            jnp.asarray(target_accept),
            run_id,
        )
        jax.block_until_ready(xs)
    finally:
        if progress_bar:
            close_bar(run_id)
    wall = time.perf_counter() - start
    stats = {name: np.asarray(v) for name, v in info._asdict().items()}
    stats["logdensity"] = np.asarray(logp)
    if chain_method == "vectorized":
        stats["executed_gradients"] = stats["num_gradients"].max(axis=0)
    return MCMCResult(
        np.asarray(xs), stats, np.asarray(eps), np.asarray(inv_mass), np.asarray(warm_grads), wall
    )
