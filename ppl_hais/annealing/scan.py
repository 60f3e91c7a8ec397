"""The annealing scan: one ``lax.scan`` over temperatures, particles ``vmap``ped, pure.

For n = 1 … N (seed 000 §2.2–2.3):

1. ``log w += (β_n − β_{n−1}) · log_ratio(z)`` — the weight update before the move, read from
   the cached potential, so it costs nothing;
2. one transition that leaves π_{β_n} invariant (any
   :class:`~ppl_hais.annealing.kernels.TransitionKernel`).

log Ẑ = logsumexp(log w) − log P + log Z_initial. Memory does not grow with N: per-step
diagnostics are folded into a fixed number of bins as the scan runs.

Example
-------
>>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
>>> from ppl_hais.annealing.scan import anneal
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> out = anneal(jax.random.key(0), target, ph.hais_kernel(), jnp.linspace(0, 1, 101),
...              np.array([0.0, 1.0]), np.log(np.full(2, 0.3)), num_particles=64, num_bins=10)
>>> out["log_weights"].shape
(64,)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import estimators
from ..mcmc import fast_random
from ..progress import tick
from ..target import AnnealingTarget
from .kernels import TransitionKernel

ADAPT_RATE = 0.1  # Robbins–Monro gain on log(step size) per pilot temperature
# A host callback costs 0.05-0.4 ms (more when several groups' scans call at once): a bin
# ticks the progress bar (and checks for Ctrl-C) only when it crosses a multiple of this many
# temperatures, so short runs make a few callbacks instead of one per bin.
TICK_STEPS = 500


class Carry(NamedTuple):
    """What the scan carries from one bin to the next."""

    states: Any  # the kernel's per-particle states (each with its cached Potential)
    log_w: Any  # (P,) log weights
    offset: Any  # the pilot's adaptation offset on log(step size)
    nonfinite: Any  # proposals with a non-finite density or gradient so far
    grads: Any  # (3,) gradients per particle: own (mean), executed (max); integer moves taken


class BinSums(NamedTuple):
    """Per-temperature sums inside one bin (reset at each bin)."""

    acceptance: Any
    step_size: Any
    log_scale: Any  # (D,) with adapt_scale, else (0,)
    beta: Any


def _finite_std(x):
    ok = jnp.isfinite(x)
    n = jnp.maximum(jnp.sum(ok), 1)
    mean = jnp.sum(jnp.where(ok, x, 0.0)) / n
    return jnp.sqrt(jnp.sum(jnp.where(ok, x - mean, 0.0) ** 2) / n)


def anneal(
    rng_key,
    target: AnnealingTarget,
    kernel: TransitionKernel,
    betas,
    ref_betas,
    ref_log_step,
    *,
    num_particles: int,
    num_bins: int,
    adapt_target=None,
    record=False,
    progress=None,
    positions=None,
    particle_offset=0,
    scale_ref=None,
    adapt_scale=False,
):
    """The pure annealing run (jit- and vmap-able); returns a dict of arrays.

    ``positions`` are the P initial particles (drawn from ``target.initial`` here if None).
    ``particle_offset`` is the index of the first particle in a larger population: particle i
    draws the random numbers of particle ``particle_offset + i``.

    ``ref_betas``/``ref_log_step`` give log(step size) as a function of β (linear
    interpolation). With ``adapt_target`` set (the pilot), an offset on log(step size) follows
    the population's mean acceptance; with ``record`` the per-step log(step size) and the
    spread (standard deviation over particles) of the log likelihood ratio are returned.
    ``progress`` is a run id for the progress bar (0: none), reported at the end of a bin
    once per ``TICK_STEPS`` temperatures; the same callback stops the scan after Ctrl-C.

    The leapfrog (or random-walk) step along coordinate i is ``step_size · scale_i(β)``: a
    diagonal preconditioner, exactly HMC on z/scale with unit kinetic energy, so the persistent
    momentum stays N(0, I) whatever the scale does between temperatures. ``scale_ref`` =
    ``(ref_betas, ref_log_scale)`` gives log(scale) per coordinate as a function of β (None:
    scale 1). With ``adapt_scale`` (the pilot) the scale is instead measured at each step from
    the population, ``(Var z / Var ∇log π_β)^(1/4)`` per coordinate (MEADS's estimator, exact
    for a Gaussian however far the particles lag), and its bin means are returned as
    ``scale_betas``/``log_scale``.

    The temperatures are scanned in two levels: an outer scan over bins of equal length and an
    inner scan over the temperatures of a bin (plus one shorter bin for the remainder), so the
    per-temperature diagnostics are scalar sums in the carry and memory does not grow with N.
    """
    num_steps = betas.shape[0] - 1
    key_init, key_sample, key_steps = jax.random.split(rng_key, 3)
    dtype = jnp.result_type(float)
    if positions is None:
        positions = target.initial.sample(key_sample, num_particles)
    positions = jnp.asarray(positions, dtype)
    init_keys = fast_random.split_particles(key_init, num_particles, particle_offset)
    states = jax.vmap(kernel.init, (0, 0, None))(init_keys, positions, target)
    carry0_initial = states.potential.log_initial
    step_vmap = jax.vmap(kernel.step, (0, 0, None, None, None, None))
    dim = positions.shape[-1]

    def coordinate_scale(states, beta):
        if adapt_scale:
            pot = states.potential
            grad = None if pot.grad_ratio is None else pot.grad(beta)
            return _population_log_scale(states.position, grad)
        if scale_ref is None:
            return jnp.zeros(dim, dtype)
        b, log_s = scale_ref
        return jax.vmap(lambda col: jnp.interp(beta, b, col), in_axes=1)(log_s)

    def temperature(inner, xs):
        n, beta_prev, beta = xs
        (states, log_w, offset, nonfinite, grads), sums = inner
        d_beta = beta - beta_prev
        log_w = log_w + jnp.where(d_beta == 0, 0.0, d_beta * states.potential.log_ratio)
        log_step = jnp.interp(beta, ref_betas, ref_log_step) + offset
        step_size = jnp.exp(log_step)
        log_scale = coordinate_scale(states, beta)
        keys = fast_random.split_particles(key_steps, num_particles, particle_offset, step=n)
        states, info = step_vmap(keys, states, target, beta, step_size, jnp.exp(log_scale))
        mean_acc = jnp.mean(info.acceptance_rate)
        if adapt_target is not None:
            offset = offset + ADAPT_RATE * (mean_acc - adapt_target)
        nonfinite = nonfinite + jnp.sum(~info.is_finite).astype(jnp.int32)
        # gradients per particle: a particle's own (mean) and what vmap executed (max)
        used = jnp.asarray(info.num_gradients, dtype)
        # and, for mixed_kernel, the fraction of particles whose integer move was taken
        taken = jnp.mean(jnp.asarray(info.discrete_accepted, dtype))
        grads = grads + jnp.stack([jnp.mean(used), jnp.max(used), taken])
        sums = BinSums(
            sums.acceptance + mean_acc,
            sums.step_size + step_size,
            sums.log_scale + log_scale if adapt_scale else sums.log_scale,
            sums.beta + beta if adapt_scale else sums.beta,
        )
        inner = (Carry(states, log_w, offset, nonfinite, grads), sums)
        return inner, ((log_step, _finite_std(states.potential.log_ratio)) if record else None)

    def bin_(carry, xs):
        zero = jnp.zeros((), dtype)
        sums = BinSums(zero, zero, jnp.zeros(dim if adapt_scale else 0, dtype), zero)
        (carry, sums), log_steps = jax.lax.scan(temperature, (carry, sums), xs)
        count = xs[0].shape[0]
        lw = jnp.where(jnp.isnan(carry.log_w), -jnp.inf, carry.log_w)
        summary = (
            sums.acceptance / count, sums.step_size / count, estimators.ess(lw),
            estimators.log_mean_exp(lw), xs[2][-1],
            sums.log_scale / count, sums.beta / count,
        )  # fmt: skip
        if progress is not None:  # the progress bar, and where Ctrl-C stops the scan
            first, last = xs[0][0], xs[0][-1]
            jax.lax.cond(
                last // TICK_STEPS > (first - 1) // TICK_STEPS,
                lambda: jax.debug.callback(tick, progress, last, ordered=False),
                lambda: None,
            )
        return carry, (summary, log_steps)

    per_bin = -(-num_steps // num_bins)
    num_full = num_steps // per_bin
    xs = (jnp.arange(1, num_steps + 1), betas[:-1], betas[1:])
    head = jax.tree.map(lambda a: a[: num_full * per_bin].reshape(num_full, per_bin), xs)
    carry = Carry(
        states,
        jnp.zeros(num_particles, dtype),
        jnp.zeros((), dtype),
        jnp.zeros((), jnp.int32),
        jnp.zeros(3, dtype),
    )
    carry, (summaries, log_steps) = jax.lax.scan(bin_, carry, head)
    if record:
        log_steps = jax.tree.map(lambda a: a.reshape(-1), log_steps)
    if num_full * per_bin < num_steps:
        tail = jax.tree.map(lambda a: a[num_full * per_bin :], xs)
        carry, (last, tail_steps) = bin_(carry, tail)
        summaries = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), summaries, last)
        if record:
            log_steps = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), log_steps, tail_steps)
    states, log_w, _, nonfinite, grads = carry
    acc, eps, ess, log_z, bin_beta, bin_log_scale, bin_mean_beta = summaries
    init_nonfinite = jnp.sum(~jnp.isfinite(carry0_initial)).astype(jnp.int32)
    return dict(
        log_weights=log_w,
        particles=states.position,
        log_ratio=states.potential.log_ratio,
        log_initial=states.potential.log_initial,
        start_log_initial=carry0_initial,
        initial_nonfinite=init_nonfinite,
        num_nonfinite=nonfinite,
        acceptance=acc,
        step_size=eps,
        ess=ess,
        log_z=log_z,
        bin_beta=bin_beta,
        log_steps=log_steps[0] if record else None,
        log_ratio_sd=log_steps[1] if record else None,
        gradients=grads,
        scale_betas=bin_mean_beta if adapt_scale else None,
        log_scale=bin_log_scale if adapt_scale else None,
    )


def _population_log_scale(x, g):
    """log (Var x / Var g)^(1/4) per coordinate over the particles (MEADS's diagonal scale);
    without gradients (g None) or where they do not vary (e.g. a flat initial density),
    log sd(x); 0 where the population has collapsed or is not finite."""
    log_x = jnp.log(jnp.var(x, axis=0))
    log_g = jnp.full_like(log_x, jnp.nan) if g is None else jnp.log(jnp.var(g, axis=0))
    ok_x = jnp.isfinite(log_x)
    ok_g = jnp.isfinite(log_g)
    log_s = jnp.where(ok_x & ok_g, 0.25 * (log_x - log_g), 0.5 * log_x)
    return jnp.where(ok_x, log_s, 0.0)


