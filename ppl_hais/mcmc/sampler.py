"""Warmup and sampling of many chains of reduced-flip HMC in one compiled call.

Every chain works through its own transitions (:mod:`.lanes`): a vectorized batch does not
pay a backward trajectory whenever any chain rejects, and a chain's draws are those it would
make alone.

Warmup: per chain, dual averaging of the step size and a diagonal mass matrix in Stan's
windows (:mod:`.adaptation`); over the population of chains, the momentum refresh by MEADS's
damping rule (``refresh="auto"``).

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

from ..runtime.names import LEAPFROG_HINT, refuse_unknown
from ..runtime.precision import float64, in_thread
from ..runtime.progress import close_bar, open_run, run_interruptibly
from ..runtime.structure import compile_once, merge, split
from . import fast_random
from .adaptation import adaptation_init, adaptation_schedule
from .kernel import find_reasonable_step_size, init, resolve_uniform
from .lanes import lane as start_lane
from .lookahead import FLIPS
from .phases import Phases, warmup_and_draws, warmup_then_draws

__all__ = ["MCMCResult", "sample"]

MIN_CHAINS_FOR_DAMPING = 4  # MEADS's λ_max estimate needs a population of chains


class MCMCResult(NamedTuple):
    """Draws and per-draw statistics of :func:`sample`, arrays with leading (chain, draw)."""

    samples: Any  # (chains, draws, D)
    stats: dict  # acceptance_rate, is_accepted, is_flipped, lookahead_depth, num_gradients,
    # is_divergent, logdensity: (chains, draws)
    step_size: Any  # (chains,) after warmup
    inverse_mass: Any  # (chains, D)
    warmup_gradients: Any  # (chains,) this chain's own work
    wall_time: float
    refresh: Any = None  # (chains,) momentum power replaced per unit time while sampling
    executed_gradients: Any = None  # (warmup, sampling): gradients per chain the batch ran


@lru_cache(maxsize=16)
def _compiled(structure, num_warmup, num_samples, num_leapfrog, num_lookahead, flips,
              uniform, adapt_mass_matrix, auto_refresh, thinning, chain_method,
              interruptible=True):  # fmt: skip
    """The sampler jitted once per *structure* of the log density
    (``ppl_hais.runtime.structure``): a pytree log density (e.g. a ``jax.tree_util.Partial``
    over a target) passes its arrays as an argument, so a new density of the same structure and
    shapes reuses the program. ``interruptible``: its loops tick the host (progress, Ctrl-C)
    through a callback; without, the program holds none."""
    in_slow, ends = (jnp.asarray(a) for a in adaptation_schedule(num_warmup, adapt_mass_matrix))

    def run(arrays, keys, x0, step_size, refresh, target_accept, run_id):
        run_id = run_id if interruptible else None  # None: no tick (runtime.progress.pace)
        logdensity_fn = merge(structure, arrays)
        kw = dict(logdensity_fn=logdensity_fn, num_leapfrog=num_leapfrog,
                  num_lookahead=num_lookahead, flips=flips, uniform=uniform)  # fmt: skip
        chains = x0.shape[0]
        k_init, k_eps, k_warm, k_samp = jnp.swapaxes(jax.vmap(jax.random.split, (0, None))(
            keys, 4), 0, 1)  # fmt: skip
        inv_mass0 = jnp.ones_like(x0)
        states = jax.vmap(init, (0, None, 0, 0))(x0, logdensity_fn, k_init, inv_mass0)
        eps0 = jnp.where(
            step_size > 0,
            step_size,
            jax.vmap(find_reasonable_step_size, (0, 0, None, 0))(
                k_eps, states, logdensity_fn, inv_mass0),
        )  # fmt: skip
        adapt = jax.vmap(adaptation_init)(eps0, inv_mass0)
        lanes = jax.vmap(start_lane, (0, None))(states, num_lookahead)
        use_damping = auto_refresh and chains >= MIN_CHAINS_FOR_DAMPING and num_warmup > 0
        fixed = jnp.broadcast_to(refresh, (chains,))
        phases = Phases(kw, num_warmup, num_samples, thinning, in_slow, ends, target_accept,
                        use_damping, fixed, (lanes, k_samp[0], eps0[0], inv_mass0[0]))  # fmt: skip
        if num_warmup > 0 and chain_method == "vectorized":
            # warmup and sampling in one loop: the program holds the transition once
            out = warmup_and_draws(phases, lanes, adapt, jnp.stack([k_warm, k_samp]), eps0,
                                   inv_mass0, run_id)  # fmt: skip
        else:
            out = warmup_then_draws(phases, lanes, adapt, k_warm, k_samp, eps0, chain_method,
                                    run_id)  # fmt: skip
        draws, eps, final_refresh, inv_mass, warm_grads, warm_steps, draw_steps = out
        return (draws.position, draws.logdensity, draws.info, eps, inv_mass, final_refresh,
                warm_grads, warm_steps * num_leapfrog, draw_steps * num_leapfrog)

    return jax.jit(run)


def _all_finite(logdensity_fn, x):
    return jnp.all(jnp.isfinite(jax.vmap(logdensity_fn)(x)))


# compiled once per structure of the log density, as the sampler is: evaluated op by op it
# compiled a program per operation (0.1-0.2 s the first time a process ran the bias check)
_finite_everywhere = compile_once(_all_finite)


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
    uniform: str | None = None,
    refresh="auto",
    target_accept: float = 0.9,
    adapt_mass_matrix: bool = True,
    thinning: int = 1,
    chain_method: str = "vectorized",
    progress_bar: bool = True,
    interruptible: bool = True,
    **unknown,
) -> MCMCResult:
    """Warmup and sampling for several chains in one compiled call.

    Parameters
    ----------
    rng_key : jax.random key
    logdensity_fn : callable
        ``x -> log p(x)`` on flat vectors (up to a constant).
    initial_positions : array (chains, D)
    num_warmup, num_samples : int
        Warmup tunes the step size (dual averaging toward ``target_accept``), with
        ``adapt_mass_matrix`` a diagonal mass matrix (Stan's windows), and with
        ``refresh="auto"`` the momentum refresh; its draws are discarded.
    step_size : float or "auto"
        Initial step size (``"auto"``, or None: found by doubling/halving).
    num_leapfrog, lookahead, flips, uniform : see :func:`build_kernel`.
    refresh : float or "auto"
        Fraction of momentum power replaced per unit simulated time ([SD12]: ½).
        ``"auto"``: MEADS's damping rule from the spread of the chains in warmup (with 4 or
        more chains; with fewer, ½).
    thinning : int
        Keep every ``thinning``-th transition.
    chain_method : {"vectorized", "sequential"}
        Sampling phase: all chains in one batch (each works through its own transitions;
        the batch waits only for the chain that finishes last) or one chain at a time
        (``lax.map``). Warmup always runs the chains together.
    progress_bar : bool
        Show a progress bar (transitions of the slowest chain).
    interruptible : bool
        The compiled loop calls the host about every quarter of a second, where Ctrl-C stops
        it and the progress bar moves. ``False``: no such call, so no progress bar, Ctrl-C
        waits for the end, and JAX's persistent cache stores the program on every supported
        JAX (0.10 keys a host callback by its address, new in every process); for short runs,
        such as the evidence workflow's bias check.

    Returns
    -------
    MCMCResult
    """

    refuse_unknown(unknown, "sample", hints=LEAPFROG_HINT)
    step_size = None if isinstance(step_size, str) and step_size == "auto" else step_size
    rng_key = fast_random.check_key(rng_key)
    _check(step_size, flips, chain_method, refresh, target_accept, num_leapfrog, lookahead,
           thinning, num_warmup, num_samples)  # fmt: skip
    uniform = resolve_uniform(uniform, lookahead)
    auto_refresh = isinstance(refresh, str)
    x0 = jnp.asarray(initial_positions, jnp.result_type(float))
    if x0.ndim != 2 or x0.shape[0] == 0:
        raise ValueError(
            f"initial_positions must have shape (chains, D) with chains ≥ 1, got {x0.shape}"
        )
    if not bool(_finite_everywhere(logdensity_fn, x0)):
        raise ValueError("the log density is not finite at every initial position")
    structure, arrays = split(logdensity_fn)
    fn = _compiled(
        structure,
        int(num_warmup),
        int(num_samples),
        int(num_leapfrog),
        int(lookahead),
        flips,
        uniform,
        bool(adapt_mass_matrix),
        auto_refresh,
        int(thinning),
        chain_method,
        bool(interruptible),
    )
    keys = fast_random.host_split(rng_key, x0.shape[0], as_array=True)
    start = time.perf_counter()
    total = num_warmup + num_samples * thinning
    run_id = open_run(total, "reduced-flip HMC", bar=progress_bar and interruptible)
    args = (
        arrays,
        keys,
        x0,
        np.asarray(step_size or 0.0, x0.dtype),  # NumPy: jnp.asarray compiles a conversion
        np.asarray(0.5 if auto_refresh else refresh, x0.dtype),
        np.asarray(target_accept, x0.dtype),
        run_id,
    )
    out = None
    try:  # dispatched from a worker thread, so that Ctrl-C reaches us and stops the loop
        (out,) = run_interruptibly(
            [in_thread(lambda: jax.block_until_ready(fn(*args)))], "sampling"
        )  # fmt: skip
    finally:
        close_bar(run_id, complete=out is not None)
    wall = time.perf_counter() - start
    xs, logp, info, eps, inv_mass, refresh_out, warm_grads, warm_exec, draw_exec = out
    stats = {name: np.asarray(v) for name, v in info._asdict().items()}
    stats["logdensity"] = np.asarray(logp)
    return MCMCResult(
        np.asarray(xs),
        stats,
        np.asarray(eps),
        np.asarray(inv_mass),
        np.asarray(warm_grads),
        wall,
        np.asarray(refresh_out),
        (int(warm_exec), int(np.max(np.asarray(draw_exec)))) if chain_method == "vectorized"
        else (int(warm_exec), int(np.sum(np.asarray(draw_exec)))),
    )


def _check(step_size, flips, chain_method, refresh, target_accept, num_leapfrog, lookahead,
           thinning, num_warmup, num_samples):  # fmt: skip
    """:func:`sample`'s arguments, each refused with its name where it is out of range."""
    if flips not in FLIPS:
        raise ValueError(f"flips must be one of {FLIPS}, got {flips!r}")
    if chain_method not in ("vectorized", "sequential"):
        raise ValueError("chain_method must be 'vectorized' or 'sequential'")
    auto_refresh = isinstance(refresh, str)
    if auto_refresh and refresh != "auto":
        raise ValueError(f"refresh must be a number in (0, 1] or 'auto', got {refresh!r}")
    if not auto_refresh and not 0.0 < refresh <= 1.0:
        raise ValueError("refresh must be in (0, 1]")
    if not 0.0 < target_accept < 1.0:  # 1.5 drove the step size to 1e-12, 0 to 1e4
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept!r}")
    if step_size is not None and not (np.isfinite(step_size) and step_size > 0):
        raise ValueError(f"step_size must be a positive number or 'auto', got {step_size!r}")
    for name, value in (("num_leapfrog", num_leapfrog), ("lookahead", lookahead),
                        ("thinning", thinning)):  # fmt: skip
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    for name, value, least in (("num_warmup", num_warmup, 0), ("num_samples", num_samples, 1)):
        if isinstance(value, bool) or int(value) != value or value < least:
            kind = "a non-negative" if least == 0 else "a positive"
            raise ValueError(f"{name} must be {kind} integer, got {value!r}")
