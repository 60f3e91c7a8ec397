"""Warmup and sampling of many chains of reduced-flip HMC in one compiled ``lax.scan``.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> result = ph.mcmc.sample(jax.random.key(0), lambda x: -0.5 * jnp.sum(x**2), jnp.zeros((2, 3)),
...                         num_warmup=100, num_samples=100, progress_bar=False)
>>> result.samples.shape
(2, 100, 3)
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._renamed import refuse_unknown, renamed
from ..precision import float64
from ..progress import close_bar, maybe_tick, open_bar
from . import fast_random
from .adaptation import adaptation_init, adaptation_schedule, adaptation_update
from .kernel import build_kernel, find_reasonable_step_size, init
from .lookahead import FLIPS

__all__ = ["MCMCResult", "sample"]


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
    num_leapfrog,
    lookahead,
    flips,
    adapt_mass_matrix,
    thinning,
    chain_method,
):
    kernel = build_kernel(num_leapfrog, lookahead, flips)
    in_slow, ends = adaptation_schedule(num_warmup, adapt_mass_matrix)

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
    step_size="auto",
    num_leapfrog: int = 1,
    lookahead: int = 1,
    flips: str = "reduced",
    refresh: float = 0.5,
    target_accept: float = 0.9,
    adapt_mass_matrix: bool = True,
    thinning: int = 1,
    chain_method: str = "vectorized",
    progress_bar: bool = True,
    **renamed_kwargs,
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
        ``adapt_mass_matrix``, a diagonal mass matrix (Stan's windows); its draws are
        discarded.
    step_size : float or "auto"
        Initial step size (``"auto"``, or None: found by doubling/halving).
    num_leapfrog, lookahead, flips : see :func:`build_kernel`. (``num_steps=`` and
        ``adapt_mass=`` are the old names, accepted for one release.)
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

    num_leapfrog = renamed(renamed_kwargs, "num_steps", "num_leapfrog", num_leapfrog)
    adapt_mass_matrix = renamed(
        renamed_kwargs, "adapt_mass", "adapt_mass_matrix", adapt_mass_matrix
    )
    refuse_unknown(renamed_kwargs, "sample")
    step_size = None if isinstance(step_size, str) and step_size == "auto" else step_size
    rng_key = fast_random.check_key(rng_key)
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if chain_method not in ("vectorized", "sequential"):
        raise ValueError("chain_method must be 'vectorized' or 'sequential'")
    if not 0.0 < refresh <= 1.0:
        raise ValueError("refresh must be in (0, 1]")
    if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
        raise ValueError(f"step_size must be a positive number or 'auto', got {step_size!r}")
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
        int(num_leapfrog),
        int(lookahead),
        flips,
        bool(adapt_mass_matrix),
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
