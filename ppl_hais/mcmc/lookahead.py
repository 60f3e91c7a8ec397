"""The reject branch of HMC with reduced momentum flips and look-ahead (seed 001 ch. 6; LAHMC).

A state ζ = (x, v) with joint density p(ζ) ∝ π(x)·exp(−½vᵀM⁻¹v); L is ``num_steps`` leapfrog
steps, F negates the momentum. One uniform r decides among K + 2 outcomes:

* move to L^a ζ (a = 1..K) with probability π_a(ζ), the look-ahead rule of Sohl-Dickstein,
  Mudigonda & DeWeese (2014):

      π_a(ζ) = min[ 1 − Σ_{b<a} π_b(ζ),  p(L^a ζ)/p(ζ) · (1 − Σ_{b<a} π_b(F L^a ζ)) ],

  which balances ζ → L^a ζ against F L^a ζ → F ζ (F L^a is an involution);
* otherwise flip the momentum with probability P_F(ζ), otherwise stay.

Write R(ζ) = 1 − Σ_a π_a(ζ) for the probability of no move. The flows into and out of ζ balance
(global, not detailed balance; seed 001 eq. 6.4–6.6) iff P_F(ζ) − P_F(Fζ) = R(ζ) − R(Fζ).
``flips="standard"`` takes P_F = R (every rejection flips: ordinary HMC when K = 1, LAHMC
otherwise). ``flips="reduced"`` takes the smallest choice, P_F(ζ) = max(0, R(ζ) − R(Fζ)); for
K = 1 that is seed 001 eq. 6.11, max(0, min(1, p(LFζ)/p(ζ)) − min(1, p(Lζ)/p(ζ))).

With C(ζ) = 1 − R(ζ) the flip test is r < C(Fζ) given r ≥ C(ζ), so the backward trajectories
(from Fζ) are only integrated after every forward one was rejected, and can stop as soon as
C(Fζ) exceeds r. Everything runs in one ``lax.while_loop`` that integrates one more trajectory
per iteration: unbatched it does only the work the outcome needs; under ``vmap`` every lane runs
as many iterations as the slowest lane (the info's ``num_gradients`` counts a lane's own work).

Example
-------
>>> import jax.numpy as jnp
>>> from ppl_hais.mcmc.lookahead import flip_probability, leap_probabilities
>>> [round(float(p), 4) for p in leap_probabilities(jnp.array([0.0, -1.0]))]  # min(1, e^-1)
[0.3679]
>>> round(float(flip_probability(jnp.array([0.0, -1.0]), jnp.array([0.0, -0.5]))), 4)
0.2387
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .integrators import kinetic_energy, leapfrog

__all__ = [
    "FLIPS",
    "MoveInfo",
    "leap_probabilities",
    "lookahead_transition",
    "flip_probability",
]

FLIPS = ("reduced", "standard")
_MAX_LOG_RATIO = 50.0  # caps p(ζ')/p(ζ) where it multiplies a probability (keeps 0·∞ out)


class MoveInfo(NamedTuple):
    acceptance_rate: Any  # P_leap = min(1, p(Lζ)/p(ζ)) of the first trajectory
    is_accepted: Any  # moved to some L^a ζ
    is_flipped: Any  # momentum negated
    depth: Any  # a of the trajectory moved along (0: none)
    num_gradients: Any  # gradient evaluations this transition used (this lane's own work)
    is_finite: Any  # False when the first proposal's density or gradient was NaN/±inf


def _pair(log_p, memo, i, j):
    """π(i → j): the probability of moving from point i of a line of states to point j."""
    if (i, j) not in memo:
        s = 1 if j > i else -1
        rest_i = 1.0 - sum((_pair(log_p, memo, i, k) for k in range(i + s, j, s)), 0.0)
        rest_j = 1.0 - sum((_pair(log_p, memo, j, k) for k in range(j - s, i, -s)), 0.0)
        d = log_p[j] - log_p[i]
        d = jnp.where(jnp.isnan(d), -jnp.inf, jnp.minimum(d, _MAX_LOG_RATIO))
        memo[(i, j)] = jnp.clip(jnp.minimum(rest_i, jnp.exp(d) * rest_j), 0.0, 1.0)
    return memo[(i, j)]


def leap_probabilities(log_p):
    """[π_1(ζ), …, π_K(ζ)] from log p at ζ, Lζ, …, L^K ζ (``log_p`` of shape (K + 1,)).

    The states F L^a ζ needed by the recursion lie on the same line (their trajectories run
    back toward ζ), so the K + 1 densities suffice. ``π_a`` uses only ``log_p[:a + 1]``.
    """
    log_p = jnp.where(jnp.isnan(log_p), -jnp.inf, log_p)
    memo = {}
    return jnp.stack([_pair(log_p, memo, 0, a) for a in range(1, log_p.shape[0])])


def flip_probability(log_p_forward, log_p_backward, flips="reduced"):
    """P_F(ζ) from log p along ζ, Lζ, …, L^Kζ and along Fζ, LFζ, …, L^K Fζ (for tests)."""
    c_forward = jnp.sum(leap_probabilities(log_p_forward))
    if flips == "standard":
        return 1.0 - c_forward
    return jnp.maximum(0.0, jnp.sum(leap_probabilities(log_p_backward)) - c_forward)


def lookahead_transition(
    u,
    position,
    momentum,
    potential,
    potential_fn,
    beta,
    step_size,
    *,
    num_steps: int = 1,
    lookahead: int = 1,
    flips: str = "reduced",
    box=None,
    inverse_mass=None,
):
    """One leap / flip / stay transition decided by the uniform ``u``.

    ``potential`` is the cached :class:`~ppl_hais.target.Potential` at ``position``; the joint
    log density at β is ``potential.log_density(beta) − ½vᵀM⁻¹v``. Returns
    ``((position, momentum, potential), MoveInfo)``.
    """
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    K = int(lookahead)
    if K < 1:
        raise ValueError("lookahead must be at least 1")
    reduced = flips == "reduced"
    dtype = jnp.result_type(position)

    def log_joint(pot, mom):
        return pot.log_density(beta) - kinetic_energy(mom, inverse_mass)

    lp0 = log_joint(potential, momentum)
    start = (position, momentum, potential)
    buffer0 = jnp.full((K + 1,), -jnp.inf, dtype).at[0].set(lp0)

    class Carry(NamedTuple):
        k: Any  # trajectories integrated so far (forward, then backward)
        head: Any  # the last point integrated
        log_p: Any  # log p along the current line
        c_forward: Any  # Σ π_a(ζ) over the forward trajectories so far
        accepted: Any
        flipped: Any
        done: Any
        first_prob: Any
        first_finite: Any

    def body(c):
        k = c.k + 1
        backward = k > K
        j = jnp.where(backward, k - K, k)
        pos, mom, pot = leapfrog(
            potential_fn, *c.head, beta, step_size, num_steps, box, inverse_mass
        )
        lp = log_joint(pot, mom)
        log_p = c.log_p.at[j].set(jnp.where(jnp.isnan(lp), -jnp.inf, lp))
        cum = jnp.cumsum(leap_probabilities(log_p))[j - 1]
        first = k == 1
        first_prob = jnp.where(first, cum, c.first_prob)
        first_finite = jnp.where(first, jnp.isfinite(lp), c.first_finite)
        # forward: move to this point once the cumulative leap probability passes u
        accepted = ~backward & (u < cum)
        c_forward = jnp.where(backward, c.c_forward, cum)
        # backward: flip once C(Fζ) passes u (u ≥ C(ζ) is known here)
        flipped = backward & (u < cum)
        end_forward = ~backward & (j == K) & ~accepted
        if reduced:
            done = accepted | flipped | (backward & (j == K))
        else:
            flipped = flipped | end_forward
            done = accepted | end_forward
        # after the last forward trajectory fails, restart from Fζ
        restart = end_forward & ~done
        head = jax.tree.map(
            lambda a, b: jnp.where(restart, a, b),
            (position, -momentum, potential),
            (pos, mom, pot),
        )
        log_p = jnp.where(restart, buffer0, log_p)
        return Carry(k, head, log_p, c_forward, accepted, flipped, done, first_prob, first_finite)

    false = jnp.zeros((), bool)
    init = Carry(
        jnp.zeros((), jnp.int32),
        start,
        buffer0,
        jnp.zeros((), dtype),
        false,
        false,
        false,
        jnp.zeros((), dtype),
        jnp.ones((), bool),
    )
    c = jax.lax.while_loop(lambda c: ~c.done, body, init)
    pick = lambda a, b: jnp.where(c.accepted, a, b)  # noqa: E731
    position_out, momentum_out, potential_out = jax.tree.map(pick, c.head, start)
    momentum_out = jnp.where(c.flipped, -momentum, momentum_out)
    info = MoveInfo(
        acceptance_rate=c.first_prob,
        is_accepted=c.accepted,
        is_flipped=c.flipped,
        depth=jnp.where(c.accepted, c.k, 0),
        num_gradients=c.k * num_steps,
        is_finite=c.first_finite,
    )
    return (position_out, momentum_out, potential_out), info
