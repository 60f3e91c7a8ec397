"""The sampler's two phases as functions of one fixed :class:`Phases` context: warmup, whose
per-chain adaptation settles as each chain's transition completes, and sampling, which records
every ``thinning``-th transition. :func:`warmup_and_draws` runs both in one loop (the program
holds the transition once); :func:`warmup_then_draws` runs them one after the other, the draws
of all chains together or one chain at a time.

Example
-------
>>> from ppl_hais.mcmc.phases import restart
>>> from ppl_hais.mcmc.lanes import lane
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> state = ph.mcmc.init(jnp.zeros(2), lambda x: -0.5 * jnp.sum(x**2), jax.random.key(0))
>>> int(restart(lane(state, 1)).count)
0
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .adaptation import adaptation_update, damping_refresh, max_eigenvalue
from .lanes import micro_step, run_phase, run_phases

__all__ = ["Draws", "Phases", "restart", "warmup_and_draws", "warmup_then_draws"]


class Draws(NamedTuple):
    """A chain's draws, filled in as its transitions complete, and the thinning accumulators."""

    position: Any
    logdensity: Any
    info: Any  # ReducedFlipInfo of arrays (draws,)
    flipped: Any  # any flip / divergence and the gradients since the last kept draw
    divergent: Any
    grads: Any


class Phases(NamedTuple):
    """What both phases read, fixed for one compiled run."""

    kw: dict  # the transition's keywords: logdensity_fn, num_leapfrog, num_lookahead, ...
    num_warmup: int
    num_samples: int
    thinning: int
    in_slow: Any  # per warmup step: inside a slow (mass-matrix) window
    ends: Any  # per warmup step: a window ends
    target_accept: Any
    use_damping: bool  # MEADS's refresh from the population's largest eigenvalue
    fixed: Any  # (chains,) the refresh where it is not damped
    template: tuple  # (lanes, key, step size, inverse mass): the shapes of a transition


def warm_params(p: Phases, extra, lanes):
    adapt, log_lam, _ = extra
    eps = jnp.exp(adapt.log_step_size)
    r = damping_refresh(log_lam, eps, lanes.count) if p.use_damping else p.fixed
    return eps, r, adapt.inverse_mass


def warm_settle(p: Phases, extra, lanes, done, info):
    adapt, log_lam, it = extra
    j = jnp.clip(lanes.count - 1, 0, max(p.num_warmup - 1, 0))
    new = jax.vmap(adaptation_update, (0, 0, 0, 0, 0, 0, None))(
        adapt, info.acceptance_rate, lanes.state.position, lanes.state.logdensity_grad,
        p.in_slow[j], p.ends[j], p.target_accept,
    )  # fmt: skip
    adapt = jax.tree.map(
        lambda a, b: jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b),
        new, adapt,
    )  # fmt: skip
    if p.use_damping:  # a running mean of log λ_max over the population
        whitened = lanes.state.position / jnp.sqrt(adapt.inverse_mass)
        est = jnp.log(max_eigenvalue(whitened))
        rate = jnp.maximum(1.0 / (it + 1.0), 0.02)
        log_lam = log_lam + rate * (est - log_lam)
    return adapt, log_lam, it + 1


def warm_end(p: Phases, adapt, log_lam):
    eps = jnp.exp(adapt.log_step_size_avg)
    return eps, (damping_refresh(log_lam, eps, p.num_warmup) if p.use_damping else p.fixed)


def draw_settle(p: Phases, draws, lanes, done, info):
    """Record each chain's transition that just completed, if thinning keeps it."""

    def one(d, lane, done, info):
        flipped = d.flipped | (done & info.is_flipped)
        divergent = d.divergent | (done & info.is_divergent)
        grads = d.grads + jnp.where(done, info.num_gradients, 0)
        keep = done & (lane.count % p.thinning == 0)
        i = jnp.where(keep, lane.count // p.thinning - 1, p.num_samples)  # dropped if not
        info = info._replace(is_flipped=flipped, is_divergent=divergent,
                             num_gradients=grads)  # fmt: skip
        return Draws(
            d.position.at[i].set(lane.state.position, mode="drop"),
            d.logdensity.at[i].set(lane.state.logdensity, mode="drop"),
            jax.tree.map(lambda b, v: b.at[i].set(v, mode="drop"), d.info, info),
            flipped & ~keep, divergent & ~keep, jnp.where(keep, 0, grads),
        )

    return jax.vmap(one)(draws, lanes, done, info)


def empty(p: Phases, n):
    """``n`` chains' draws, all zero."""
    lanes, key, eps, inv_mass = p.template
    first = jax.tree.map(lambda a: a[0], lanes)
    _, _, info = jax.eval_shape(
        lambda: micro_step(first, True, key, eps, p.fixed[0], inv_mass, **p.kw))
    x = lanes.state.position
    false = jnp.zeros((n,), bool)
    return Draws(
        jnp.zeros((n, p.num_samples, x.shape[-1]), x.dtype),
        jnp.zeros((n, p.num_samples), x.dtype),
        jax.tree.map(lambda s: jnp.zeros((n, p.num_samples) + s.shape, s.dtype), info),
        false, false, jnp.zeros((n,), jnp.int32),
    )  # fmt: skip


def restart(lanes):
    """The lanes with their transition and gradient counts reset (a new phase)."""
    return lanes._replace(count=jnp.zeros_like(lanes.count), grads=jnp.zeros_like(lanes.grads))


def warmup_and_draws(p: Phases, lanes, adapt, keys, eps0, inv_mass0, run_id):
    """Warmup and sampling in one loop: (draws, ε, refresh, inverse mass, warmup's gradients
    per chain, warmup's steps, sampling's steps per chain)."""
    chains, dtype = lanes.count.shape[0], lanes.state.position.dtype

    def params(phase, extra, lanes):
        adapt, log_lam, _, _, final = extra
        warm = warm_params(p, (adapt, log_lam, None), lanes)
        return jax.tree.map(lambda a, b: jnp.where(phase == 0, a, b), warm, final[:3])

    def settle(phase, extra, lanes, done, info):
        def warm(extra):
            adapt, log_lam, it, draws, final = extra
            return (*warm_settle(p, (adapt, log_lam, it), lanes, done, info), draws, final)

        def draw(extra):
            adapt, log_lam, it, draws, final = extra
            return adapt, log_lam, it, draw_settle(p, draws, lanes, done, info), final

        return jax.lax.cond(phase == 0, warm, draw, extra)

    def switch(extra, lanes):
        adapt, log_lam, it, draws, _ = extra
        eps, refresh = warm_end(p, adapt, log_lam)
        final = (eps, refresh, adapt.inverse_mass, lanes.grads)
        return (adapt, log_lam, it, draws, final), restart(lanes)

    extra = (adapt, jnp.zeros((), dtype), jnp.zeros((), dtype), empty(p, chains),
             (eps0, p.fixed, inv_mass0, jnp.zeros((chains,), jnp.int32)))  # fmt: skip
    lanes, extra, (warm_steps, draw_steps) = run_phases(
        lanes, extra, (p.num_warmup, p.num_samples * p.thinning), keys, params, settle, switch,
        run_id, **p.kw,
    )  # fmt: skip
    _, _, _, draws, (eps, final_refresh, inv_mass, warm_grads) = extra
    draw_steps = jnp.broadcast_to(draw_steps, (chains,))
    return draws, eps, final_refresh, inv_mass, warm_grads, warm_steps, draw_steps


def warmup_then_draws(p: Phases, lanes, adapt, k_warm, k_samp, eps0, chain_method, run_id):
    """Warmup (if any), then sampling: all chains in one batch, or one chain at a time; the
    same figures as :func:`warmup_and_draws`."""
    chains, dtype = lanes.count.shape[0], lanes.state.position.dtype
    warm_grads = jnp.zeros((chains,), jnp.int32)
    warm_steps = jnp.zeros((), jnp.int32)
    eps, final_refresh = eps0, p.fixed
    if p.num_warmup > 0:
        lanes, (adapt, log_lam, _), warm_steps = run_phase(
            lanes, (adapt, jnp.zeros((), dtype), jnp.zeros((), dtype)), p.num_warmup, k_warm,
            partial(warm_params, p), partial(warm_settle, p), run_id, 0, **p.kw,
        )  # fmt: skip
        warm_grads = lanes.grads
        eps, final_refresh = warm_end(p, adapt, log_lam)
    inv_mass = adapt.inverse_mass
    lanes = restart(lanes)
    total = p.num_samples * p.thinning
    if chain_method == "vectorized":
        _, draws, draw_steps = run_phase(
            lanes, empty(p, chains), total, k_samp, lambda *_: (eps, final_refresh, inv_mass),
            partial(draw_settle, p), run_id, p.num_warmup, **p.kw,
        )  # fmt: skip
        draw_steps = jnp.broadcast_to(draw_steps, (chains,))
    else:  # one chain at a time: each does only its own work

        def alone(args):
            lane, k, e, r, m = args
            one = jax.tree.map(lambda a: a[None], lane)
            lane, draws, steps = run_phase(
                one, empty(p, 1), total, k[None], lambda *_: (e[None], r[None], m[None]),
                partial(draw_settle, p), run_id, p.num_warmup, **p.kw,
            )  # fmt: skip
            return jax.tree.map(lambda a: a[0], (lane, draws)), steps

        (_, draws), draw_steps = jax.lax.map(
            alone, (lanes, k_samp, eps, final_refresh, inv_mass))  # fmt: skip
    return draws, eps, final_refresh, inv_mass, warm_grads, warm_steps, draw_steps
