"""Transition kernels that leave a tempered density π_β invariant ([HAIS12] §2.3, §5.2).

Each kernel is a pair of pure per-particle functions (the scan, :mod:`.scan`, ``vmap``s them):

    init(rng_key, position, target) -> State
    step(rng_key, state, target, beta, step_size, scale=1.0) -> (State, Info)

Every State carries ``potential``, the cached :class:`~ppl_hais.model.target.Potential` at its
position, so the annealing scan reads the weight increment without evaluating anything.
Step sizes are call arguments so that a schedule of step sizes can change them under ``jit``.
``scale`` (a number or one per coordinate) is a diagonal preconditioner: coordinate i moves by
``step_size · scale_i`` times the unit-variance momentum, which is HMC on z/scale; the momentum
stays N(0, I), so the scale may change from one temperature to the next without a correction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..mcmc import fast_random, hmc
from ..mcmc.integrators import reflect
from ..mcmc.lookahead import FLIPS
from .options import of_keywords

__all__ = [
    "HAISOptions",
    "HMCState",
    "RWMState",
    "TransitionInfo",
    "TransitionKernel",
    "hais_kernel",
    "mixed_kernel",
    "resampled_hmc_kernel",
    "random_walk_kernel",
]


class HMCState(NamedTuple):
    position: Any
    momentum: Any
    potential: Any
    noise: Any  # the N(0, I) draws of the next momentum refresh (drawn one step ahead)


class RWMState(NamedTuple):
    position: Any
    potential: Any


class TransitionInfo(NamedTuple):
    acceptance_rate: Any  # Metropolis acceptance probability min(1, exp(ΔH))
    is_accepted: Any
    is_finite: Any  # False when the proposal's density or gradient was NaN/±inf (then rejected)
    num_gradients: Any = 0  # gradient evaluations this step used (a particle's own work)
    discrete_accepted: Any = 0.0  # 1 when mixed_kernel's move of an integer coordinate was taken


@dataclass(frozen=True)
class TransitionKernel:
    """A named (init, step) pair; ``gradients_per_step`` counts gradient evaluations;
    ``discrete``: it moves integer coordinates too (:func:`mixed_kernel`); ``local_steps``:
    each particle scales its step size by its local gradient (:func:`hais_kernel`)."""

    name: str
    init: Callable
    step: Callable
    gradients_per_step: int
    default_step_size: float
    discrete: bool = False
    local_steps: bool = False


def _metropolis(log_accept, key):
    """Accept with probability min(1, exp(log_accept)); NaN and ±inf ratios are rejected."""
    log_accept = jnp.where(jnp.isfinite(log_accept), jnp.minimum(log_accept, 0.0), -jnp.inf)
    u = fast_random.uniform(key, (), salt=1, dtype=log_accept.dtype)
    return jnp.exp(log_accept), jnp.log(u) < log_accept


class HAISOptions(NamedTuple):
    """The HAIS transition's options, one object for every run of a call (pilot, main run,
    ladder rungs), so an option given once reaches all of them."""

    refresh: float = 0.5
    num_leapfrog: int = 1
    lookahead: int = 1
    flips: str = "standard"
    step_size_jitter: float = 0.0
    local_steps: bool = False

    @classmethod
    def of(cls, options) -> HAISOptions:
        """The fields present in a mapping of keyword arguments; defaults for the rest."""
        return of_keywords(cls, options)

    def kernel(self) -> TransitionKernel:
        return hais_kernel(float(self.refresh), int(self.num_leapfrog), int(self.lookahead),
                           str(self.flips), float(self.step_size_jitter),
                           bool(self.local_steps))  # fmt: skip


def hais_kernel(
    refresh: float = 0.5,
    num_leapfrog: int = 1,
    lookahead: int = 1,
    flips: str = "standard",
    step_size_jitter: float = 0.0,
    local_steps: bool = False,
) -> TransitionKernel:
    """The HAIS transition of [HAIS12] §2.3 with persistent, partially refreshed momentum.

    ``num_leapfrog`` velocity-Verlet steps of size ε on π_β, Metropolis accept/reject on
    H = −log π_β(z) + ½|v|², momentum negated on rejection, then the partial refresh
    ``v ← sqrt(1 − γ) v + sqrt(γ) r`` with γ = 1 − (1 − refresh)^(nε) for n leapfrog steps
    (``refresh`` is the fraction of momentum power replaced per unit simulation time; the
    paper's is ½). The momentum carries over from one temperature to the next: that persistence
    is the method's point. ``refresh=1`` resamples the momentum every step (the second
    baseline of [HAIS12] §5.2). The transition is :mod:`ppl_hais.mcmc.hmc`'s, shared with the
    MCMC sampler.

    ``flips="reduced"`` negates the momentum on rejection only with the probability of [SD12]
    eq. 6.11, and ``lookahead=K > 1`` tries up to K trajectories before that (LAHMC); see
    :mod:`ppl_hais.mcmc.lookahead`. Both cost extra gradients only after a rejection.

    ``step_size_jitter=j`` draws each transition's step size uniformly from ε·[1 − j, 1 + j]
    (Stan's ``stepsize_jitter``): a random step size keeps the transition invariant, and the
    short steps it sometimes takes enter regions whose curvature the tuned ε cannot (a
    funnel's neck).

    ``local_steps=True`` gives each particle's transition a step size of its own: ε times
    r(z) = (√D / ‖s ⊙ ∇log π_β(z)‖)^½ (clipped to [0.01, 10]; s the preconditioner) times
    e^{σξ}, ξ ~ N(0, 1), σ = ½: short steps where the density is steep (a funnel's neck),
    long ones where it is flat. The step size is an auxiliary variable drawn given z, so the
    Metropolis ratio gains log q(ε | z′) − log q(ε | z) and the transition keeps π_β
    invariant (plain moves only: ``lookahead=1``, ``flips="standard"``). Measured on Neal's
    funnel from N(0, I).

    Examples
    --------
    >>> import ppl_hais as ph
    >>> kernel = ph.hais_kernel(refresh=0.5)
    >>> kernel.name, kernel.gradients_per_step
    ('hais', 1)
    """
    # one kernel object per setting, however the arguments were spelled: compiled anneals are
    # cached per kernel (program.compiled), so the pilot, the runs and the bias check share
    return _hais_kernel(float(refresh), int(num_leapfrog), int(lookahead), str(flips),
                        float(step_size_jitter), bool(local_steps))  # fmt: skip


LOCAL_EXPONENT = 0.5  # r(z) = (√D / ‖s ⊙ ∇log π_β‖)^LOCAL_EXPONENT
LOCAL_SPREAD = 0.5  # σ of log ε around log(ε_β r(z))
LOCAL_RANGE = (0.01, 10.0)  # r(z) is clipped to this range


def _log_local(grad, dim):
    """log r(z) from the preconditioned gradient at z (``local_steps``)."""
    norm = jnp.sqrt(jnp.sum(grad * grad) + jnp.finfo(grad.dtype).tiny)
    log_r = LOCAL_EXPONENT * (0.5 * jnp.log(dim) - jnp.log(norm))
    return jnp.clip(log_r, np.log(LOCAL_RANGE[0]), np.log(LOCAL_RANGE[1]))


@lru_cache(maxsize=64)
def _hais_kernel(refresh, num_leapfrog, lookahead, flips, step_size_jitter,
                 local_steps) -> TransitionKernel:  # fmt: skip
    if not 0.0 < refresh <= 1.0:
        raise ValueError("refresh (momentum power replaced per unit time) must be in (0, 1]")
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if not 0.0 <= step_size_jitter <= 1.0:
        raise ValueError(f"step_size_jitter must be in [0, 1], got {step_size_jitter!r}")
    plain = lookahead == 1 and flips == "standard"
    if local_steps and not plain:
        raise ValueError("local_steps needs lookahead=1 and flips='standard'")

    def init(rng_key, position, target):
        momentum = fast_random.normal(rng_key, position.shape, salt=7, dtype=position.dtype)
        noise = fast_random.normal(rng_key, position.shape, salt=0, dtype=position.dtype)
        return HMCState(position, momentum, target.potential_and_grad(position), noise)

    def step(rng_key, state, target, beta, step_size, scale=1.0):
        position, momentum, potential, noise = state
        u = fast_random.uniform(rng_key, (), salt=1, dtype=position.dtype)
        if step_size_jitter:  # a static choice: without jitter the draws are as before
            j = fast_random.uniform(rng_key, (), salt=13, dtype=position.dtype)
            step_size = step_size * (1.0 + step_size_jitter * (2.0 * j - 1.0))
        log_aux = None
        if local_steps:  # ε drawn given z: log ε ~ N(log ε_β + log r(z), σ²)
            xi = fast_random.normal(rng_key, (), salt=17, dtype=position.dtype)
            dim = position.shape[-1]
            log_eps = _log_local(potential.grad(beta) * scale, dim) + LOCAL_SPREAD * xi
            step_size = step_size * jnp.exp(log_eps)

            def log_aux(new):  # log q(ε | z′) − log q(ε | z)
                back = (log_eps - _log_local(new.grad(beta) * scale, dim)) / LOCAL_SPREAD
                return 0.5 * xi * xi - 0.5 * back * back

        (position, momentum, potential), info = hmc.move(
            u,
            position,
            momentum,
            potential,
            target.potential_and_grad,
            beta,
            step_size * scale,
            num_leapfrog=num_leapfrog,
            lookahead=lookahead,
            flips=flips,
            box=target.box,
            log_aux=log_aux,
        )
        # with local_steps ε depends on the old position and ξ; given the new position the
        # momentum is independent of both under the invariant law, so keep may use it
        keep = hmc.persistence(refresh, num_leapfrog * step_size)
        momentum = hmc.partial_refresh(momentum, noise, keep)
        # The next refresh's draws, one step ahead: they are independent of the state either
        # way, and drawn here XLA computes them in a fusion of their own. Fused into this
        # momentum update (with the Metropolis selects) the inverse-CDF arithmetic made that
        # fusion look compute-bound to XLA:CPU, which split it into ~13 thread-pool tasks per
        # step: 1.8x slower per step on the 20-D regression (docs/architecture.md).
        noise = fast_random.normal(rng_key, momentum.shape, salt=0, dtype=momentum.dtype)
        out = TransitionInfo(
            info.acceptance_rate, info.is_accepted, info.is_finite, info.num_gradients
        )
        return HMCState(position, momentum, potential, noise), out

    name = "hais" if refresh < 1 else "resampled_hmc"
    if not plain:
        name += f"_{flips}_flips" + (f"_lookahead{lookahead}" if lookahead > 1 else "")
    if step_size_jitter:
        name += f"_jitter{step_size_jitter:g}"
    if local_steps:
        name += "_local"
    return TransitionKernel(name, init, step, num_leapfrog, 0.2, local_steps=bool(local_steps))


@lru_cache(maxsize=64)
def mixed_kernel(
    discrete: tuple, base: TransitionKernel | None = None, max_jump: int = 8
) -> TransitionKernel:
    """HMC-within-Metropolis for a state with integer-valued coordinates: each step moves the
    continuous coordinates by ``base`` (default :func:`hais_kernel`) with the discrete ones
    held fixed, then proposes a move of one discrete coordinate, chosen uniformly, by ±m
    (m = 1 with probability ½, else uniform in 1..``max_jump``: symmetric, so the Metropolis
    ratio is π_β's alone; a proposal outside the support has density 0 and is rejected).
    Both moves leave π_β invariant, so annealing with it keeps Ẑ unbiased. One extra
    gradient per step (the proposal's cached potential).

    ``discrete``: a tuple of booleans, one per coordinate, True where the coordinate is an
    integer (its initial values must be integers; moves keep them so). The continuous move
    sees a zero step on the discrete coordinates, so it never changes them, and its
    acceptance (the one the step-size tuning follows) is the continuous move's.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
    >>> kernel = ph.mixed_kernel((False, True))
    >>> kernel.name
    'hais+discrete'
    """
    mask = np.asarray(discrete, dtype=bool).ravel()
    index = np.flatnonzero(mask)
    if index.size == 0:
        raise ValueError("mixed_kernel needs at least one discrete coordinate")
    if int(max_jump) < 1:
        raise ValueError(f"max_jump must be a positive integer, got {max_jump!r}")
    base = hais_kernel() if base is None else base
    continuous = ~mask
    index_j = jnp.asarray(index)

    def init(rng_key, position, target):
        return base.init(rng_key, position, target)

    def step(rng_key, state, target, beta, step_size, scale=1.0):
        frozen = jnp.where(jnp.asarray(continuous), scale, 0.0)
        state, info = base.step(rng_key, state, target, beta, step_size, frozen)
        dtype = state.position.dtype
        u = fast_random.uniform(rng_key, (5,), salt=11, dtype=dtype)
        j = index_j[jnp.minimum((u[0] * index.size).astype(jnp.int32), index.size - 1)]
        size = jnp.where(u[1] < 0.5, 1.0, 1.0 + jnp.floor(u[2] * max_jump))
        delta = jnp.where(u[3] < 0.5, -size, size).astype(dtype)
        proposal = state.position.at[j].add(delta)
        new_potential = target.potential_and_grad(proposal)
        log_accept = new_potential.log_density(beta) - state.potential.log_density(beta)
        log_accept = jnp.where(jnp.isfinite(log_accept), jnp.minimum(log_accept, 0.0), -jnp.inf)
        accepted = jnp.log(u[4]) < log_accept
        pick = lambda a, b: jnp.where(accepted, a, b)  # noqa: E731
        state = state._replace(
            position=pick(proposal, state.position),
            potential=jax.tree.map(pick, new_potential, state.potential),
        )
        return state, info._replace(
            num_gradients=info.num_gradients + 1, discrete_accepted=accepted.astype(dtype)
        )

    return TransitionKernel(
        f"{base.name}+discrete", init, step, base.gradients_per_step + 1, base.default_step_size,
        discrete=True, local_steps=base.local_steps,
    )


def resampled_hmc_kernel(num_leapfrog: int = 1) -> TransitionKernel:
    """AIS baseline of [HAIS12] §5.2: one leapfrog step, momentum resampled every step."""
    return hais_kernel(refresh=1.0, num_leapfrog=num_leapfrog)


@lru_cache(maxsize=1)
def random_walk_kernel() -> TransitionKernel:
    """AIS baseline of [HAIS12] §5.2: Gaussian random-walk Metropolis (σ = step size, 0.1).

    Proposals leaving the box are reflected back (a symmetric proposal); no gradients.
    """

    def init(rng_key, position, target):
        del rng_key
        return RWMState(position, target.potential(position))

    def step(rng_key, state, target, beta, step_size, scale=1.0):
        position, potential = state
        noise = fast_random.normal(rng_key, position.shape, salt=0, dtype=position.dtype)
        proposal, _ = reflect(position + step_size * scale * noise, noise, target.box)
        new_potential = target.potential(proposal)
        log_accept = new_potential.log_density(beta) - potential.log_density(beta)
        is_finite = jnp.isfinite(log_accept)
        prob, accepted = _metropolis(log_accept, rng_key)
        pick = lambda a, b: jnp.where(accepted, a, b)  # noqa: E731
        return (
            RWMState(pick(proposal, position), jax.tree.map(pick, new_potential, potential)),
            TransitionInfo(prob, accepted, is_finite, 0),
        )

    return TransitionKernel("random_walk", init, step, 0, 0.1)
