"""HMC with reduced momentum flips (seed 001 ch. 6) and look-ahead (LAHMC), as an MCMC sampler.

Generalized HMC in the style of Horowitz (1991): every transition first refreshes part of the
momentum, ``v ← sqrt(1 − γ) v + sqrt(γ) M^{1/2} r`` with γ = 1 − (1 − refresh)^(nε), then makes
one leap / flip / stay move (:func:`ppl_hais.mcmc.hmc.move`, the transition HAIS uses too).
The momentum persists, so a trajectory keeps its direction across transitions; every momentum
flip sends it back the way it came, and reduced flips make those reversals rarer. The chain
leaves p(x, v) invariant by global balance (there is no detailed balance to test).

BlackJAX's layout: ``init(position, logdensity_fn, rng_key) -> ReducedFlipState`` and
``build_kernel(...)`` returning ``kernel(rng_key, state, logdensity_fn, step_size, ...)``; the
tunable numbers are call arguments. :func:`sample` runs warmup and sampling for many chains in
one compiled ``lax.scan``.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> logdensity = lambda x: -0.5 * jnp.sum(x**2)
>>> kernel = ph.mcmc.build_kernel(num_leapfrog=1, flips="reduced")
>>> state = ph.mcmc.init(jnp.zeros(3), logdensity, jax.random.key(0))
>>> state, info = kernel(jax.random.key(1), state, logdensity, 0.3)
>>> state.position.shape
(3,)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .._renamed import refuse_unknown, renamed
from ..target import Potential
from . import fast_random, hmc
from .lookahead import FLIPS

__all__ = [
    "ReducedFlipInfo",
    "ReducedFlipState",
    "build_kernel",
    "find_reasonable_step_size",
    "init",
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


def build_kernel(
    num_leapfrog: int = 1, lookahead: int = 1, flips: str = "reduced", **renamed_kwargs
):
    """The transition ``kernel(rng_key, state, logdensity_fn, step_size, refresh=0.5,
    inverse_mass=None) -> (state, info)``.

    Parameters
    ----------
    num_leapfrog : int
        Leapfrog steps n per trajectory (seed 001 §6.1.3 uses 1; ``num_steps=``, the old
        name, is accepted for one release).
    lookahead : int
        K, the trajectories tried before a flip is considered (1: seed 001 ch. 6; >1: LAHMC).
    flips : {"reduced", "standard"}
        ``"reduced"``: flip with P_F = max(0, R(ζ) − R(Fζ)); ``"standard"``: flip on every
        rejection (ordinary persistent-momentum HMC, for comparison).
    """
    num_steps = renamed(renamed_kwargs, "num_steps", "num_leapfrog", num_leapfrog)
    refuse_unknown(renamed_kwargs, "build_kernel")
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if int(num_steps) < 1 or int(lookahead) < 1:
        raise ValueError("num_steps and lookahead must be at least 1")
    num_steps, lookahead = int(num_steps), int(lookahead)

    def kernel(rng_key, state, logdensity_fn, step_size, refresh=0.5, inverse_mass=None):
        position, momentum, logp, grad = state
        dtype = position.dtype
        # refresh first, with fresh draws: keep (1 − refresh)^(nε) of the momentum power
        keep = hmc.persistence(jnp.asarray(refresh, dtype), num_steps * step_size)
        noise = fast_random.normal(rng_key, momentum.shape, salt=0, dtype=dtype)
        momentum = hmc.partial_refresh(momentum, noise, keep, inverse_mass)
        u = fast_random.uniform(rng_key, (), salt=1, dtype=dtype)
        (position, momentum, potential), info = hmc.move(
            u,
            position,
            momentum,
            Potential(logp, 0.0, grad, 0.0),
            _potential_fn(logdensity_fn),
            1.0,
            step_size,
            num_steps=num_steps,
            lookahead=lookahead,
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


