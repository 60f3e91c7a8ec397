"""Velocity-Verlet leapfrog with cached gradients and reflection off box walls.

One leapfrog step costs one ``potential_and_grad`` at the new position: the gradient at the
start is carried in the state ([HAIS12]'s position-Verlet form needs one more evaluation).
Shared by the HAIS kernel and the reduced-flip HMC kernel.

Example
-------
>>> import jax, jax.numpy as jnp
>>> from ppl_hais.mcmc.integrators import leapfrog
>>> from ppl_hais.model.target import Potential
>>> def potential_fn(x):
...     logp, grad = jax.value_and_grad(lambda y: -0.5 * jnp.sum(y**2))(x)
...     return Potential(logp, 0.0, grad, 0.0)
>>> x, v, pot = leapfrog(potential_fn, jnp.ones(1), jnp.zeros(1), potential_fn(jnp.ones(1)),
...                      1.0, 0.1)
>>> [round(float(x[0]), 5), round(float(v[0]), 5)]
[0.995, -0.09975]
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["reflect", "leapfrog", "kinetic_energy"]


def reflect(position, momentum, box):
    """Fold a position back into ``[lower, upper]``, negating momentum once per wall hit.

    The map is the free flight of a particle between mirrors (unfold the box into a periodic
    line of period 2·width): volume preserving and reversible, so the Metropolis rule needs
    no correction (Neal 2011, §5.1). Any step length is handled exactly.
    """
    if box is None:
        return position, momentum
    lower, upper = (jnp.asarray(b, dtype=position.dtype) for b in box)
    has_lower, has_upper = jnp.isfinite(lower), jnp.isfinite(upper)
    lo = jnp.where(has_lower, lower, 0.0)
    hi = jnp.where(has_upper, upper, 0.0)
    # both walls: position on the unfolded line modulo 2·width
    width = jnp.where(has_lower & has_upper, hi - lo, 1.0)
    t = jnp.mod(position - lo, 2 * width)
    two_pos = jnp.where(t <= width, lo + t, lo + 2 * width - t)
    two_flip = jnp.floor((position - lo) / width).astype(jnp.int32) % 2 == 1
    # one wall
    low_pos, low_flip = lo + jnp.abs(position - lo), position < lo
    up_pos, up_flip = hi - jnp.abs(hi - position), position > hi
    new_position = jnp.where(
        has_lower & has_upper,
        two_pos,
        jnp.where(has_lower, low_pos, jnp.where(has_upper, up_pos, position)),
    )
    flip = jnp.where(
        has_lower & has_upper,
        two_flip,
        jnp.where(has_lower, low_flip, jnp.where(has_upper, up_flip, False)),
    )
    return new_position, jnp.where(flip, -momentum, momentum)


def leapfrog(
    potential_fn,
    position,
    momentum,
    potential,
    beta,
    step_size,
    num_leapfrog=1,
    box=None,
    inverse_mass=None,
):
    """``num_leapfrog`` velocity-Verlet steps on log π_β; returns (position, momentum, potential).

    ``potential`` is the cached :class:`~ppl_hais.model.target.Potential` (with gradients) at
    ``position``; the returned one is at the new position. ``inverse_mass`` is a diagonal
    M⁻¹ (kinetic energy ½ vᵀM⁻¹v); None is the identity.
    """
    for _ in range(num_leapfrog):
        momentum = momentum + 0.5 * step_size * potential.grad(beta)
        velocity = momentum if inverse_mass is None else inverse_mass * momentum
        position, momentum = reflect(position + step_size * velocity, momentum, box)
        potential = potential_fn(position)
        momentum = momentum + 0.5 * step_size * potential.grad(beta)
    return position, momentum, potential


def kinetic_energy(momentum, inverse_mass=None):
    """½ vᵀM⁻¹v for a diagonal inverse mass (None: the identity)."""
    if inverse_mass is None:
        return 0.5 * jnp.sum(momentum**2)
    return 0.5 * jnp.sum(inverse_mass * momentum**2)
