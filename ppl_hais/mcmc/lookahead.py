"""The reject branch of HMC with reduced momentum flips and look-ahead ([SD12] ch. 6; LAHMC).

A state ζ = (x, v) with joint density p(ζ) ∝ π(x)·exp(−½vᵀM⁻¹v); L is ``num_leapfrog`` leapfrog
steps, F negates the momentum. One uniform r decides among K + 2 outcomes:

* move to L^a ζ (a = 1..K) with probability π_a(ζ), the look-ahead rule of Sohl-Dickstein,
  Mudigonda & DeWeese (2014):

      π_a(ζ) = min[ 1 − Σ_{b<a} π_b(ζ),  p(L^a ζ)/p(ζ) · (1 − Σ_{b<a} π_b(F L^a ζ)) ],

  which balances ζ → L^a ζ against F L^a ζ → F ζ (F L^a is an involution);
* otherwise flip the momentum with probability P_F(ζ), otherwise stay.

Write R(ζ) = 1 − Σ_a π_a(ζ) for the probability of no move. The flows into and out of ζ balance
(global, not detailed balance; [SD12] eq. 6.4–6.6) iff P_F(ζ) − P_F(Fζ) = R(ζ) − R(Fζ).
``flips="standard"`` takes P_F = R (every rejection flips: ordinary HMC when K = 1, LAHMC
otherwise). ``flips="reduced"`` takes the smallest choice, P_F(ζ) = max(0, R(ζ) − R(Fζ)); for
K = 1 that is [SD12] eq. 6.11, max(0, min(1, p(LFζ)/p(ζ)) − min(1, p(Lζ)/p(ζ))).

With C(ζ) = 1 − R(ζ) the flip test is r < C(Fζ) given r ≥ C(ζ), so the backward trajectories
(from Fζ) are only integrated after every forward one was rejected, and can stop as soon as
C(Fζ) exceeds r. A transition is a loop that integrates one more trajectory per iteration
(:func:`begin`, :func:`advance`, :func:`finish`): :func:`lookahead_transition` runs it as one
``lax.while_loop`` (unbatched it does only the work the outcome needs; under ``vmap`` every lane
runs as many iterations as the slowest, and the info's ``num_gradients`` counts a lane's own
work); :func:`ppl_hais.mcmc.sample` instead steps every chain through its own transitions.

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
    "Trajectories",
    "advance",
    "begin",
    "finish",
    "flip_probability",
    "leap_probabilities",
    "lookahead_transition",
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
    log_ratio: Any  # log p(ζ') − log p(ζ) of the point moved to (0 when it did not move)


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


class Trajectories(NamedTuple):
    """A leap / flip / stay transition in progress: the trajectories integrated so far.

    :func:`begin` makes one, :func:`advance` integrates one more trajectory, :func:`finish`
    reads the outcome once ``done``. A driver that runs one :func:`advance` per lane and step
    lets every lane of a batch work through its own transitions, instead of all waiting for
    the lane that needs the most trajectories (:mod:`ppl_hais.mcmc.sampler`).
    """

    start: Any  # (position, momentum, potential) of ζ
    u: Any  # the uniform that decides the outcome
    k: Any  # trajectories integrated so far (forward, then backward)
    head: Any  # the last point integrated
    log_p: Any  # log p along the current line (ζ, Lζ, …)
    log_p0: Any  # log p(ζ)
    accepted: Any
    flipped: Any
    done: Any
    first_prob: Any  # min(1, p(Lζ)/p(ζ))
    first_finite: Any


def _log_joint(potential, momentum, beta, inverse_mass):
    return potential.log_density(beta) - kinetic_energy(momentum, inverse_mass)


def begin(u, position, momentum, potential, beta, *, lookahead: int = 1, inverse_mass=None):
    """The transition from ζ = (position, momentum) decided by the uniform ``u``, before any
    trajectory is integrated."""
    dtype = jnp.result_type(position)
    lp0 = _log_joint(potential, momentum, beta, inverse_mass)
    false = jnp.zeros((), bool)
    return Trajectories(
        start=(position, momentum, potential),
        u=jnp.asarray(u, dtype),
        k=jnp.zeros((), jnp.int32),
        head=(position, momentum, potential),
        log_p=jnp.full((int(lookahead) + 1,), -jnp.inf, dtype).at[0].set(lp0),
        log_p0=lp0,
        accepted=false,
        flipped=false,
        done=false,
        first_prob=jnp.zeros((), dtype),
        first_finite=jnp.ones((), bool),
    )


def advance(
    tr: Trajectories,
    potential_fn,
    beta,
    step_size,
    *,
    num_leapfrog: int = 1,
    lookahead: int = 1,
    flips: str = "reduced",
    box=None,
    inverse_mass=None,
) -> Trajectories:
    """Integrate one more trajectory of ``num_leapfrog`` leapfrog steps and decide what it
    settles: forward trajectories first (leap to L^a ζ once the cumulative leap probability
    passes u), then, after the last one failed, backward ones from Fζ (flip once C(Fζ) passes
    u; ``flips="standard"`` flips at once)."""
    K = int(lookahead)
    reduced = flips == "reduced"
    k = tr.k + 1
    backward = k > K
    j = jnp.where(backward, k - K, k)
    pos, mom, pot = leapfrog(potential_fn, *tr.head, beta, step_size, num_leapfrog, box,
                             inverse_mass)  # fmt: skip
    lp = _log_joint(pot, mom, beta, inverse_mass)
    log_p = tr.log_p.at[j].set(jnp.where(jnp.isnan(lp), -jnp.inf, lp))
    cum = jnp.cumsum(leap_probabilities(log_p))[j - 1]
    first = k == 1
    first_prob = jnp.where(first, cum, tr.first_prob)
    first_finite = jnp.where(first, jnp.isfinite(lp), tr.first_finite)
    accepted = ~backward & (tr.u < cum)
    flipped = backward & (tr.u < cum)  # u ≥ C(ζ) is known here
    end_forward = ~backward & (j == K) & ~accepted
    if reduced:
        done = accepted | flipped | (backward & (j == K))
    else:
        flipped = flipped | end_forward
        done = accepted | end_forward
    # after the last forward trajectory fails, restart from Fζ
    restart = end_forward & ~done
    position, momentum, potential = tr.start
    head = jax.tree.map(
        lambda a, b: jnp.where(restart, a, b), (position, -momentum, potential), (pos, mom, pot)
    )
    log_p = jnp.where(restart, jnp.full_like(log_p, -jnp.inf).at[0].set(tr.log_p0), log_p)
    return tr._replace(
        k=k,
        head=head,
        log_p=log_p,
        accepted=accepted,
        flipped=flipped,
        done=done,
        first_prob=first_prob,
        first_finite=first_finite,
    )


def finish(tr: Trajectories, *, num_leapfrog: int = 1):
    """``((position, momentum, potential), MoveInfo)`` of a finished transition."""
    position, momentum, potential = tr.start
    out = jax.tree.map(lambda a, b: jnp.where(tr.accepted, a, b), tr.head, tr.start)
    momentum_out = jnp.where(tr.flipped, -momentum, out[1])
    # accepted moves end on the forward line, at index k
    log_ratio = jnp.where(tr.accepted, tr.log_p[jnp.minimum(tr.k, tr.log_p.shape[0] - 1)], 0.0)
    info = MoveInfo(
        acceptance_rate=tr.first_prob,
        is_accepted=tr.accepted,
        is_flipped=tr.flipped,
        depth=jnp.where(tr.accepted, tr.k, 0),
        num_gradients=tr.k * num_leapfrog,
        is_finite=tr.first_finite,
        log_ratio=jnp.where(tr.accepted, log_ratio - tr.log_p0, 0.0),
    )
    return (out[0], momentum_out, out[2]), info


def lookahead_transition(
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
    flips: str = "reduced",
    box=None,
    inverse_mass=None,
):
    """One leap / flip / stay transition decided by the uniform ``u``.

    ``potential`` is the cached :class:`~ppl_hais.model.target.Potential` at ``position``; the joint
    log density at β is ``potential.log_density(beta) − ½vᵀM⁻¹v``. Returns
    ``((position, momentum, potential), MoveInfo)``. One ``lax.while_loop`` over
    :func:`advance`: unbatched it does only the work the outcome needs.
    """
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if int(lookahead) < 1:
        raise ValueError("lookahead must be at least 1")
    tr = begin(u, position, momentum, potential, beta, lookahead=lookahead,
               inverse_mass=inverse_mass)  # fmt: skip
    tr = jax.lax.while_loop(
        lambda t: ~t.done,
        lambda t: advance(
            t, potential_fn, beta, step_size, num_leapfrog=num_leapfrog, lookahead=lookahead,
            flips=flips, box=box, inverse_mass=inverse_mass,
        ),  # fmt: skip
        tr,
    )
    return finish(tr, num_leapfrog=num_leapfrog)
