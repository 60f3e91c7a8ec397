"""Chains that work through their own transitions: the loop behind :func:`ppl_hais.mcmc.sample`.

A reduced-flip or look-ahead transition integrates one trajectory, or more after a rejection.
Vectorized chains that each made one transition per loop step would all wait for the chain
that needs the most trajectories. Here one loop step integrates one trajectory for every chain
(:func:`micro_step`: start a transition if none is in progress, :func:`~.lookahead.advance`,
settle it if done), and each chain keeps its own transition counter, so a chain whose
transition is settled starts its next one at the next step. A chain's draws are the ones it
would make alone; the batch executes about its own gradients plus, at the end of a phase,
the wait for the chain that took longest. Step size, refresh and metric are read when a
transition starts and stay fixed until it is settled, so adapting them between one chain's
transitions (warmup) keeps every transition valid.

Example
-------
>>> import jax, jax.numpy as jnp
>>> from ppl_hais.mcmc import init, lanes
>>> logdensity = lambda x: -0.5 * jnp.sum(x**2)
>>> states = jax.vmap(init, (0, None, 0))(jnp.zeros((3, 2)), logdensity,
...                                      jax.random.split(jax.random.key(0), 3))
>>> start = jax.vmap(lanes.lane, (0, None))(states, 1)
>>> one = lambda extra, lanes_: (jnp.full(3, 0.5), jnp.full(3, 0.5), jnp.ones((3, 2)))
>>> out, _, steps = lanes.run_phase(
...     start, None, 10, jax.random.split(jax.random.key(1), 3), one, lambda e, *_: e, 0, 0,
...     logdensity_fn=logdensity, num_leapfrog=1, num_lookahead=1, flips="reduced",
...     uniform="persistent")
>>> [int(c) for c in out.count]
[10, 10, 10]
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..model.target import Potential
from ..runtime.progress import pace
from . import fast_random, lookahead
from .kernel import ReducedFlipState, complete, potential_fn_of, prepare

__all__ = ["Lane", "lane", "micro_step", "run_phase", "run_phases"]


class Lane(NamedTuple):
    """One chain inside the loop."""

    state: ReducedFlipState  # between transitions; its momentum/uniform already prepared
    moving: lookahead.Trajectories  # the transition in progress (k = 0: none)
    count: Any  # transitions completed in this phase
    grads: Any  # own gradient evaluations in this phase


def lane(state, num_lookahead):
    pot = Potential(state.logdensity, 0.0, state.logdensity_grad, 0.0)
    tr = lookahead.begin(0.0, state.position, state.momentum, pot, 1.0, lookahead=num_lookahead)
    zero = jnp.zeros((), jnp.int32)
    return Lane(state, tr, zero, zero)


def micro_step(lane, active, key, step_size, refresh, inverse_mass, *, logdensity_fn,
                num_leapfrog, num_lookahead, flips, uniform):  # fmt: skip
    """One trajectory of one chain: start a transition if none is in progress, integrate one
    trajectory, and settle the transition if it is done. Inactive chains stay as they are."""
    idle = lane.moving.k == 0
    prepared, u = prepare(fast_random.fold_in(key, lane.count), lane.state, step_size, refresh,
                          inverse_mass, num_leapfrog=num_leapfrog, uniform=uniform)  # fmt: skip
    pot = Potential(prepared.logdensity, 0.0, prepared.logdensity_grad, 0.0)
    fresh = lookahead.begin(u, prepared.position, prepared.momentum, pot, 1.0,
                            lookahead=num_lookahead, inverse_mass=inverse_mass)  # fmt: skip
    pick = partial(jax.tree.map, lambda a, b: jnp.where(idle, a, b))
    state, tr = pick(prepared, lane.state), pick(fresh, lane.moving)
    tr = lookahead.advance(
        tr, potential_fn_of(logdensity_fn), 1.0, step_size, num_leapfrog=num_leapfrog,
        lookahead=num_lookahead, flips=flips, inverse_mass=inverse_mass,
    )  # fmt: skip
    new_state, info = complete(state, *lookahead.finish(tr, num_leapfrog=num_leapfrog),
                               uniform=uniform)  # fmt: skip
    done = tr.done & active
    state = jax.tree.map(lambda a, b: jnp.where(done, a, b), new_state, state)
    tr = tr._replace(k=jnp.where(tr.done, 0, tr.k))
    new = Lane(state, tr, lane.count + done, lane.grads + num_leapfrog)
    new = jax.tree.map(lambda a, b: jnp.where(active, a, b), new, lane)
    return new, done, info


def run_phase(lanes, extra, total, keys, params, settle, run_id, offset, **kw):
    """Step every chain until each has completed ``total`` transitions.

    ``params(extra, lanes) -> (step_size, refresh, inverse_mass)`` per chain; ``settle(extra,
    lanes, done, info) -> extra`` after each step. Returns (lanes, extra, loop steps)."""
    micro = jax.vmap(partial(micro_step, **kw))

    def body(c):
        lanes, extra, it, due = c
        active = lanes.count < total
        step_size, refresh, inverse_mass = params(extra, lanes)
        lanes, done, info = micro(lanes, active, keys, step_size, refresh, inverse_mass)
        extra = settle(extra, lanes, done, info)
        # the progress tick, paced by time, is also where Ctrl-C stops the loop
        due = pace(run_id, it, due, shown=offset + jnp.min(lanes.count))
        return lanes, extra, it + 1, due

    zero = jnp.zeros((), jnp.int32)
    lanes, extra, steps, _ = jax.lax.while_loop(
        lambda c: jnp.any(c[0].count < total), body, (lanes, extra, zero, zero)
    )
    return lanes, extra, steps


def run_phases(lanes, extra, totals, keys, params, settle, switch, run_id, **kw):
    """Two phases of :func:`run_phase` (warmup, then sampling) in one loop, so that the
    compiled program holds the transition, and the log density's gradient, once (a loop per
    phase compiled about 1.2x as long: timed in fresh processes).

    ``totals``: phase 0's and phase 1's; ``keys``: theirs stacked, (2, chains);
    ``params(phase, extra, lanes)`` and ``settle(phase, extra, lanes, done, info)`` as in
    :func:`run_phase`, for the phase given (an int32 scalar); ``switch(extra, lanes) ->
    (extra, lanes)`` runs once, when every chain has completed phase 0's transitions, before
    phase 1's first step: the transitions are those of two loops run one after the other.
    Returns (lanes, extra, (loop steps of phase 0, of phase 1))."""
    micro = jax.vmap(partial(micro_step, **kw))
    first, second = totals

    def body(c):
        lanes, extra, phase, it, due, steps0 = c
        active = lanes.count < jnp.where(phase == 0, first, second)
        step_size, refresh, inverse_mass = params(phase, extra, lanes)
        lanes, done, info = micro(lanes, active, keys[phase], step_size, refresh, inverse_mass)
        extra = settle(phase, extra, lanes, done, info)
        shown = jnp.where(phase == 0, 0, first) + jnp.min(lanes.count)
        due = pace(run_id, it, due, shown=shown)
        end = (phase == 0) & jnp.all(lanes.count >= first)
        extra, lanes = jax.lax.cond(end, switch, lambda e, ls: (e, ls), extra, lanes)
        steps0 = jnp.where(end, it + 1, steps0)
        return lanes, extra, phase + end, it + 1, due, steps0

    def cond(c):
        lanes, _, phase, _, _, _ = c
        return (phase == 0) | jnp.any(lanes.count < second)

    zero = jnp.zeros((), jnp.int32)
    lanes, extra, _, steps, _, steps0 = jax.lax.while_loop(
        cond, body, (lanes, extra, zero, zero, zero, zero))
    return lanes, extra, (steps0, steps - steps0)
