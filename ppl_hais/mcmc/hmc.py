"""The one persistent-momentum HMC transition, shared by the annealer and the MCMC sampler.

A transition is two maps, each leaving p(x, v) ∝ π_β(x)·N(v; 0, M) invariant:

* :func:`move`: ``num_leapfrog`` leapfrog steps, then leap / flip / stay (Metropolis with a
  momentum flip on rejection; reduced flips and look-ahead of :mod:`.lookahead` when asked);
* :func:`partial_refresh`: ``v ← sqrt(keep)·v + sqrt(1 − keep)·M^{1/2} r`` with
  keep = (1 − refresh)^(simulated time) (:func:`persistence`).

The HAIS kernel (:func:`ppl_hais.hais_kernel`) moves, then refreshes with normals drawn one step
ahead and carried in its state; the MCMC kernel (:func:`ppl_hais.mcmc.build_kernel`) refreshes
with fresh normals, then moves. Either order composes the same two invariant maps. β and the
step size are call arguments, so schedules of both run under ``jit``.

Example
-------
>>> import jax, jax.numpy as jnp
>>> from ppl_hais.mcmc import hmc
>>> from ppl_hais.model.target import Potential
>>> def potential_fn(x):
...     logp, grad = jax.value_and_grad(lambda y: -0.5 * jnp.sum(y**2))(x)
...     return Potential(logp, 0.0, grad, 0.0)
>>> x = jnp.ones(2)
>>> (x1, v1, pot1), info = hmc.move(0.5, x, jnp.ones(2), potential_fn(x), potential_fn, 1.0, 0.1)
>>> bool(info.is_accepted), int(info.num_gradients)
(True, 1)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .integrators import kinetic_energy, leapfrog
from .lookahead import FLIPS, MoveInfo, lookahead_transition

__all__ = ["MoveInfo", "move", "partial_refresh", "persistence", "refresh_fraction"]


def persistence(refresh, duration):
    """(1 − refresh)^duration: the fraction of momentum power kept over ``duration`` units of
    simulated time when ``refresh`` of it is replaced per unit time (0 when refresh = 1)."""
    keep = 1.0 - refresh
    return jnp.where(keep > 0, jnp.power(jnp.maximum(keep, 1e-300), duration), 0.0)


def refresh_fraction(power_per_unit_time, step_size):
    """γ such that (1 − γ)^(1/ε) = 1 − power: the momentum power replaced per leapfrog step.

    With the paper's "half the momentum power per unit simulation time", γ = 1 − 0.5^ε.
    """
    return 1.0 - persistence(power_per_unit_time, step_size)


def partial_refresh(momentum, noise, keep, inverse_mass=None):
    """``sqrt(keep)·v + sqrt(1 − keep)·M^{1/2} r`` for N(0, I) draws ``noise``: leaves
    N(0, M) invariant (M diagonal, given by its inverse; None is the identity)."""
    if inverse_mass is not None:
        noise = noise / jnp.sqrt(inverse_mass)
    return jnp.sqrt(keep) * momentum + jnp.sqrt(1.0 - keep) * noise


def _metropolis_move(u, position, momentum, potential, potential_fn, beta, step_size, num_leapfrog,
                     box, inverse_mass, log_aux=None):
    new_position, new_momentum, new_potential = leapfrog(
        potential_fn, position, momentum, potential, beta, step_size, num_leapfrog, box,
        inverse_mass,
    )
    log_ratio = (
        new_potential.log_density(beta)
        - kinetic_energy(new_momentum, inverse_mass)
        - potential.log_density(beta)
        + kinetic_energy(momentum, inverse_mass)
    )
    if log_aux is not None:  # an auxiliary variable drawn given the position (the step size)
        log_ratio = log_ratio + log_aux(new_potential)
    # a NaN/inf density or gradient at the proposal makes log_ratio non-finite (the gradient
    # enters the new momentum): such moves are rejected and counted
    is_finite = jnp.isfinite(log_ratio)
    log_accept = jnp.where(is_finite, jnp.minimum(log_ratio, 0.0), -jnp.inf)
    accepted = jnp.log(u) < log_accept
    pick = lambda a, b: jnp.where(accepted, a, b)  # noqa: E731
    out = (
        pick(new_position, position),
        pick(new_momentum, -momentum),  # negate on rejection
        jax.tree.map(pick, new_potential, potential),
    )
    info = MoveInfo(
        jnp.exp(log_accept),
        accepted,
        ~accepted,
        accepted.astype(jnp.int32),
        jnp.full((), num_leapfrog, jnp.int32),
        is_finite,
        jnp.where(accepted, log_ratio, 0.0),
    )
    return out, info


def move(
    u,
    position,
    momentum,
    potential,
    potential_fn,
    beta,
    step_size,
    *,
    num_leapfrog: int = 1,
    lookahead: int = 1,
    flips: str = "standard",
    box=None,
    inverse_mass=None,
    log_aux=None,
):
    """One leap / flip / stay move at β decided by the uniform ``u``.

    ``potential`` is the cached :class:`~ppl_hais.model.target.Potential` at ``position`` and
    ``potential_fn`` evaluates it elsewhere; ``step_size`` may be one number per coordinate
    (a diagonal preconditioner). With ``lookahead=1, flips="standard"`` this is Metropolis HMC
    (momentum negated on rejection) without the look-ahead loop; otherwise
    :func:`~ppl_hais.mcmc.lookahead.lookahead_transition`. Returns
    ``((position, momentum, potential), MoveInfo)``.

    ``log_aux(new_potential)``: for a step size drawn from a density q(ε | position), the
    term log q(ε | proposal) − log q(ε | position) of the Metropolis ratio (the move is then
    Metropolis on the position, momentum and ε, and ε is drawn afresh for the next move);
    plain moves only.
    """
    if log_aux is not None and (int(lookahead) > 1 or flips != "standard"):
        raise ValueError("a position-dependent step size (log_aux) needs lookahead=1 and "
                         "flips='standard'")
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if int(num_leapfrog) < 1 or int(lookahead) < 1:
        raise ValueError("num_leapfrog and lookahead must be at least 1")
    if int(lookahead) == 1 and flips == "standard":
        return _metropolis_move(
            u, position, momentum, potential, potential_fn, beta, step_size, int(num_leapfrog),
            box, inverse_mass, log_aux,
        )
    out, info = lookahead_transition(
        u,
        position,
        momentum,
        potential,
        potential_fn,
        beta,
        step_size,
        num_leapfrog=int(num_leapfrog),
        lookahead=int(lookahead),
        flips=flips,
        box=box,
        inverse_mass=inverse_mass,
    )
    return out, info
