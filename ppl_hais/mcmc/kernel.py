"""HMC with reduced momentum flips ([SD12] ch. 6) and look-ahead (LAHMC), as an MCMC sampler.

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

from ..model.target import Potential
from ..runtime.names import LEAPFROG_HINT, refuse_unknown
from . import fast_random, hmc
from .lookahead import FLIPS

__all__ = [
    "UNIFORMS",
    "ReducedFlipInfo",
    "ReducedFlipState",
    "build_kernel",
    "complete",
    "find_reasonable_step_size",
    "init",
    "prepare",
]


UNIFORMS = ("persistent", "fresh")


class ReducedFlipState(NamedTuple):
    """What persists between transitions of one chain."""

    position: Any  # flat x
    momentum: Any  # v ~ N(0, M), kept across transitions
    logdensity: Any  # log p(x)
    logdensity_grad: Any  # ∇ log p(x)
    uniform: Any = 0.0  # s ∈ [−1, 1], the persistent uniform (uniform="persistent"); |s| decides


class ReducedFlipInfo(NamedTuple):
    """Diagnostics of one transition."""

    acceptance_rate: Any  # min(1, p(Lζ)/p(ζ)) of the first trajectory (what warmup targets)
    is_accepted: Any  # moved along some trajectory
    is_flipped: Any  # momentum negated
    lookahead_depth: Any  # trajectory moved along (1..K), 0 if none
    num_gradients: Any  # this chain's gradient evaluations in this transition
    is_divergent: Any  # first proposal non-finite or with energy error beyond ~745


def potential_fn_of(logdensity_fn):
    def potential(x):
        logp, grad = jax.value_and_grad(logdensity_fn)(x)
        return Potential(logp, 0.0, grad, 0.0)

    return potential


def _momentum(rng_key, shape, dtype, inverse_mass, salt):
    r = fast_random.normal(rng_key, shape, salt=salt, dtype=dtype)
    return r if inverse_mass is None else r / jnp.sqrt(inverse_mass)


def init(position, logdensity_fn, rng_key, inverse_mass=None) -> ReducedFlipState:
    """The state at ``position`` (a flat array) with a momentum drawn from N(0, M) and a
    persistent uniform drawn from U(−1, 1)."""
    position = jnp.asarray(position, jnp.result_type(float))
    logp, grad = jax.value_and_grad(logdensity_fn)(position)
    momentum = _momentum(rng_key, position.shape, position.dtype, inverse_mass, salt=7)
    s = 2.0 * fast_random.uniform(rng_key, (), salt=8, dtype=position.dtype) - 1.0
    return ReducedFlipState(position, momentum, logp, grad, s)


def resolve_uniform(uniform, lookahead):
    """``uniform`` checked; None picks ``"persistent"`` for one trajectory, else ``"fresh"``."""
    if uniform is None:
        return "persistent" if int(lookahead) == 1 else "fresh"
    if uniform not in UNIFORMS:
        raise ValueError(f"uniform must be one of {UNIFORMS} or None, got {uniform!r}")
    if uniform == "persistent" and int(lookahead) != 1:
        raise ValueError(
            "uniform='persistent' needs lookahead=1 (the look-ahead rule is proven for a fresh "
            "uniform only); use uniform='fresh' with lookahead > 1"
        )
    return uniform


def prepare(rng_key, state: ReducedFlipState, step_size, refresh, inverse_mass, *,
            num_leapfrog: int = 1, uniform: str = "persistent"):  # fmt: skip
    """The two maps before a move: the partial momentum refresh (keep (1 − refresh)^(nε) of
    its power) and the uniform's update. Returns ``(state, u)`` with u ∈ [0, 1) for the move.

    ``uniform="persistent"`` is Neal's (2020) non-reversible update: s ← s + δ wrapped into
    [−1, 1] with δ = half the momentum power replaced (as BlackJAX's GHMC/MEADS), and u = |s|.
    Rejections then come in runs and acceptances in runs, so the momentum is reversed less
    often; s is rescaled on a move by :func:`complete`.
    """
    dtype = state.position.dtype
    keep = hmc.persistence(jnp.asarray(refresh, dtype), num_leapfrog * step_size)
    noise = fast_random.normal(rng_key, state.momentum.shape, salt=0, dtype=dtype)
    momentum = hmc.partial_refresh(state.momentum, noise, keep, inverse_mass)
    if uniform == "persistent":
        s = jnp.mod(state.uniform + 1.0 + 0.5 * (1.0 - keep), 2.0) - 1.0
        return state._replace(momentum=momentum, uniform=s), jnp.abs(s)
    u = fast_random.uniform(rng_key, (), salt=1, dtype=dtype)
    return state._replace(momentum=momentum), u


def complete(state: ReducedFlipState, out, info, *, uniform: str = "persistent"):
    """The state and info after a move from ``state`` with outcome ``(out, info)``.

    With the persistent uniform, a move to ζ' rescales s ← s·p(ζ)/p(ζ'): the slice level
    |s|·p(ζ) is kept, which is what makes the deterministic decision on (ζ, s) a
    measure-preserving map — for leap / flip / stay as for Metropolis: (ζ, s) goes to (Lζ, s)
    when s·p(ζ) < p(Lζ), else to (Fζ, s) when s·p(ζ) < p(LFζ), else stays, and every point of
    the slice has exactly one preimage.
    """
    position, momentum, potential = out
    s = state.uniform
    if uniform == "persistent":
        s = jnp.where(info.is_accepted, s * jnp.exp(-info.log_ratio), s)
    new = ReducedFlipState(position, momentum, potential.log_initial, potential.grad_initial, s)
    return new, ReducedFlipInfo(
        acceptance_rate=info.acceptance_rate,
        is_accepted=info.is_accepted,
        is_flipped=info.is_flipped,
        lookahead_depth=info.depth,
        num_gradients=info.num_gradients,
        is_divergent=~info.is_finite | (info.acceptance_rate <= 0.0),
    )


def build_kernel(
    num_leapfrog: int = 1,
    lookahead: int = 1,
    flips: str = "reduced",
    uniform: str | None = None,
    **unknown,
):
    """The transition ``kernel(rng_key, state, logdensity_fn, step_size, refresh=0.5,
    inverse_mass=None) -> (state, info)``.

    Parameters
    ----------
    num_leapfrog : int
        Leapfrog steps n per trajectory ([SD12] §6.1.3 uses 1).
    lookahead : int
        K, the trajectories tried before a flip is considered (1: [SD12] ch. 6; >1: LAHMC).
    flips : {"reduced", "standard"}
        ``"reduced"``: flip with P_F = max(0, R(ζ) − R(Fζ)); ``"standard"``: flip on every
        rejection (ordinary persistent-momentum HMC, for comparison).
    uniform : {"persistent", "fresh"} or None
        The uniform that decides leap / flip / stay: Neal's (2020) non-reversibly updated
        one, carried in the state (as BlackJAX's GHMC), or a fresh draw per transition (seed
        001). None: persistent for ``lookahead=1``, fresh otherwise.
    """
    refuse_unknown(unknown, "build_kernel", hints=LEAPFROG_HINT)
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if int(num_leapfrog) < 1 or int(lookahead) < 1:
        raise ValueError("num_leapfrog and lookahead must be at least 1")
    num_leapfrog, lookahead = int(num_leapfrog), int(lookahead)
    uniform = resolve_uniform(uniform, lookahead)

    def kernel(rng_key, state, logdensity_fn, step_size, refresh=0.5, inverse_mass=None):
        # refresh first, with fresh draws; then one leap / flip / stay move
        state, u = prepare(rng_key, state, step_size, refresh, inverse_mass,
                           num_leapfrog=num_leapfrog, uniform=uniform)  # fmt: skip
        out, info = hmc.move(
            u,
            state.position,
            state.momentum,
            Potential(state.logdensity, 0.0, state.logdensity_grad, 0.0),
            potential_fn_of(logdensity_fn),
            1.0,
            step_size,
            num_leapfrog=num_leapfrog,
            lookahead=lookahead,
            flips=flips,
            inverse_mass=inverse_mass,
        )
        return complete(state, out, info, uniform=uniform)

    return kernel


def find_reasonable_step_size(rng_key, state, logdensity_fn, inverse_mass, step_size=0.1):
    """Double or halve ε until one leapfrog step's acceptance crosses ½ (Hoffman & Gelman)."""
    kernel = build_kernel(1, 1, "standard", "fresh")

    def accept(eps):
        fresh = state._replace(
            momentum=_momentum(rng_key, state.position.shape, state.position.dtype, inverse_mass, 3)
        )
        _, info = kernel(rng_key, fresh, logdensity_fn, eps, 1.0, inverse_mass)
        return info.acceptance_rate

    # one loop runs the kernel for ε₀ (i = −1: it sets the direction) and for every ε after, so
    # the program holds the kernel once: run for ε₀ outside and in the loop's condition, it was
    # there three times under vmap (a batched loop evaluates its condition again in its body)
    def body(c):
        eps, i, _, direction = c
        eps = jnp.where(i < 0, eps, eps * direction)
        a = accept(eps)
        return eps, i + 1, a, jnp.where(i < 0, jnp.where(a > 0.5, 2.0, 0.5), direction)

    def cond(c):
        _, i, a, direction = c
        return (i < 0) | ((i < 30) & jnp.where(direction > 1, a > 0.5, a <= 0.5))

    dtype = state.position.dtype
    eps0 = jnp.asarray(step_size, dtype)
    start = (eps0, -1, jnp.zeros((), dtype), jnp.ones((), dtype))
    eps, _, _, _ = jax.lax.while_loop(cond, body, start)
    return eps


