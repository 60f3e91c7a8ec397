"""The annealing scan: one ``lax.scan`` over temperatures, particles ``vmap``ped, pure.

For n = 1 … N ([HAIS12] §2.2–2.3):

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
...              jnp.full(101, np.log(0.3)), num_particles=64)
>>> out.log_weights.shape
(64,)
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..mcmc import fast_random
from ..model.target import AnnealingTarget
from ..stats import estimators
from .kernels import TransitionKernel
from .scale import interp_rows, population_log_scale
from .state import AnnealOutput, BinSums, Carry, Loop, ScaleSums, Summaries

ADAPT_RATE = 0.1  # Robbins–Monro gain on log(step size) per pilot temperature
BIN_STEPS = 8  # temperatures per bin of the scan; the host merges bins into ``num_bins``
# rows of the measured scale's sums: one per bin up to this many bins (a default pilot's 1100
# temperatures take 138), bins merged evenly beyond; bounded so that a main run, which runs the
# same program and reads none, carries SCALE_ROWS × D floats whatever its number of temperatures
SCALE_ROWS = 256


TRIM = 32  # the spread leaves out the 1/TRIM of finite values farthest from their median


def _trimmed_std(x):
    """The standard deviation of the finite values of ``x`` less the ``n // TRIM`` (at least
    one) farthest from their median. It spaces the adaptive schedule, which should follow the
    bulk of the particles: one particle far in a heavy tail (a half-Cauchy scale's) would
    otherwise set the spread of all, and crowd the schedule's temperatures near β = 0."""
    ok = jnp.isfinite(x)
    n = jnp.sum(ok)
    median = jnp.nanmedian(jnp.where(ok, x, jnp.nan))
    distance = jnp.where(ok, jnp.abs(x - median), jnp.inf)
    drop = jnp.maximum(n // TRIM, 1)
    cut = jnp.sort(distance)[jnp.maximum(n - drop - 1, 0)]
    keep = ok & (distance <= cut)
    m = jnp.maximum(jnp.sum(keep), 1)
    mean = jnp.sum(jnp.where(keep, x, 0.0)) / m
    return jnp.sqrt(jnp.sum(jnp.where(keep, x - mean, 0.0) ** 2) / m)


def anneal(
    rng_key,
    target: AnnealingTarget,
    kernel: TransitionKernel,
    betas,
    log_step,
    *,
    num_particles: int,
    num_steps=None,
    adapt_target=None,
    positions=None,
    particle_offset=0,
    scale_ref=None,
    adapt_scale=False,
    num_valid=None,
    record=True,
):
    """The pure annealing run (jit- and vmap-able); returns an :class:`AnnealOutput`:
    :func:`start`, :func:`advance` through every bin, :func:`output`.

    ``positions`` are the P initial particles (drawn from ``target.initial`` here if None).
    ``particle_offset`` is the index of the first particle in a larger population: particle i
    draws the random numbers of particle ``particle_offset + i``. With ``num_valid`` (may be
    traced), particles whose index in the population is ``num_valid`` or more are padding: they
    run, but no per-step or per-bin figure counts them (a population padded to whole groups
    shares the groups' compiled program, :func:`~ppl_hais.annealing.execution.run`; a pilot,
    whose measured scale would count them, is never padded).

    ``log_step[n]`` is log(step size) at ``betas[n]`` (e.g. the pilot's, interpolated at the
    schedule's βs, :func:`~ppl_hais.annealing.execution.run`). With ``adapt_target`` set (the
    pilot; None or a negative value: off), an offset on log(step size) follows the population's
    mean acceptance. The per-step log(step size) and, with ``record`` (a pilot), the spread
    (standard deviation over particles) of the log likelihood ratio are returned (0 without).
    ``adapt_target`` and ``adapt_scale`` may be traced values, so one compiled program serves
    the pilot (adapting), the main run and the bias check's reverse anneal alike
    (:func:`~ppl_hais.annealing.program.compiled`).

    The leapfrog (or random-walk) step along coordinate i is ``step_size · scale_i(β)``: a
    diagonal preconditioner, exactly HMC on z/scale with unit kinetic energy, so the persistent
    momentum stays N(0, I) whatever the scale does between temperatures. ``scale_ref`` =
    ``(ref_betas, ref_log_scale)`` gives log(scale) per coordinate as a function of β (None:
    scale 1). With ``adapt_scale`` (the pilot) the scale is instead measured at each step from
    the population, ``(Var z / Var ∇log π_β)^(1/4)`` per coordinate (MEADS's estimator, exact
    for a Gaussian however far the particles lag), and its sums over the temperatures are
    returned in ``SCALE_ROWS`` rows (a bin each while they fit) as ``scale_betas``/``log_scale``
    with ``scale_count``; :func:`~ppl_hais.annealing.execution.run` turns them into means.

    The temperatures run in bins of ``BIN_STEPS``: a ``scan`` over a bin's temperatures inside
    a ``while_loop`` over as many bins as N needs, so the per-temperature diagnostics are
    scalar sums in the carry, memory does not grow with N, and N (``num_steps``, default
    ``len(betas) − 1``) is an argument, not a shape: ``betas`` may be padded beyond β_N
    (:func:`~ppl_hais.annealing.execution.padded`), and one compiled program serves every
    number of temperatures that fits. Per-bin rows past the last bin have ``bin_count`` 0;
    :func:`~ppl_hais.annealing.execution.run` merges the rows into ``num_bins``.
    """
    if num_steps is None:
        num_steps = betas.shape[0] - 1
    loop = start(rng_key, target, kernel, betas, num_particles=num_particles,
                 positions=positions, particle_offset=particle_offset)  # fmt: skip
    loop = advance(rng_key, target, kernel, betas, log_step, loop, num_bins(num_steps),
                   num_particles=num_particles, num_steps=num_steps, adapt_target=adapt_target,
                   particle_offset=particle_offset, scale_ref=scale_ref, adapt_scale=adapt_scale,
                   num_valid=num_valid, record=record)  # fmt: skip
    return output(loop, valid_particles(num_particles, particle_offset, num_valid)[0])


def num_bins(num_steps):
    """The bins of ``BIN_STEPS`` temperatures that ``num_steps`` temperatures fill."""
    return (num_steps + BIN_STEPS - 1) // BIN_STEPS


def _keys(rng_key):
    """(initial states', initial draws', transitions') keys of a run."""
    return jax.random.split(rng_key, 3)


def valid_particles(num_particles, particle_offset, num_valid):
    """(P,) False for padding, and the count of the others (at least 1)."""
    if num_valid is None:
        return jnp.ones(num_particles, bool), num_particles
    valid = particle_offset + jnp.arange(num_particles) < num_valid
    return valid, jnp.maximum(jnp.sum(valid), 1).astype(jnp.result_type(float))


def start(rng_key, target, kernel, betas, *, num_particles, positions=None, particle_offset=0):
    """The :class:`Loop` before the first bin: the kernel's states at ``positions`` (drawn
    from ``target.initial`` if None), zero weights, empty rows for every bin ``betas`` holds."""
    key_init, key_sample, _ = _keys(rng_key)
    dtype = jnp.result_type(float)
    if positions is None:
        positions = target.initial.sample(key_sample, (num_particles,))
    positions = jnp.asarray(positions, dtype)
    init_keys = fast_random.split_particles(key_init, num_particles, particle_offset)
    states = jax.vmap(kernel.init, (0, 0, None))(init_keys, positions, target)
    carry = Carry(
        states,
        jnp.zeros(num_particles, dtype),
        jnp.zeros((), dtype),
        jnp.zeros(num_particles, jnp.int32),
        jnp.zeros(3, dtype),
    )
    # Bins of BIN_STEPS temperatures, as many as N needs, under a while loop: N is data, so one
    # compiled program serves every number of temperatures up to the schedule's length. A bin
    # is a scan of fixed length (an accelerator checks the loop's condition once per bin, not
    # per temperature); temperatures past β_N in the last bin are masked.
    max_bins = -(-(betas.shape[0] - 1) // BIN_STEPS)
    rows = _empty_rows(max_bins, positions.shape[-1], dtype)
    return Loop(jnp.zeros((), jnp.int32), carry, *rows, states.potential.log_initial)


def advance(
    rng_key, target, kernel, betas, log_step, loop: Loop, until, *, num_particles, num_steps,
    adapt_target=None, particle_offset=0, scale_ref=None, adapt_scale=False, num_valid=None,
    record=True,
) -> Loop:  # fmt: skip
    """``loop`` run on to bin ``until`` (or to the last bin ``num_steps`` needs, if sooner;
    both may be traced): the same numbers whether a run takes one call or many, so the host
    can call between bins (a progress bar, Ctrl-C) without a callback inside the program."""
    adapt_target = -1.0 if adapt_target is None else adapt_target
    dtype = jnp.result_type(float)
    betas, log_step = jnp.asarray(betas, dtype), jnp.asarray(log_step, dtype)
    valid, count_valid = valid_particles(num_particles, particle_offset, num_valid)
    step_vmap = jax.vmap(kernel.step, (0, 0, None, None, None, None))
    used = num_bins(num_steps)
    run = _Run(target, step_vmap, betas, log_step, _keys(rng_key)[2], num_particles,
               particle_offset, valid, count_valid, loop.carry.states.position.shape[-1], dtype,
               scale_ref, adapt_scale, adapt_target, num_steps, used, record)  # fmt: skip
    last = jnp.minimum(until, used)
    return jax.lax.while_loop(lambda loop: loop.bin < last, partial(_bin, run), loop)


class _Run(NamedTuple):
    """What every temperature of one :func:`anneal` reads: fixed for the run."""

    target: Any
    step_vmap: Any  # the kernel's step, vmapped over particles
    betas: Any
    log_step: Any
    key_steps: Any
    num_particles: int
    particle_offset: Any
    valid: Any  # (P,) False for padding
    count_valid: Any
    dim: int
    dtype: Any
    scale_ref: Any
    adapt_scale: Any
    adapt_target: Any
    num_steps: Any
    num_bins_used: Any
    record: Any  # the per-step spread of the log ratio is computed (a pilot reads it)


def _mean(run, x):
    """The mean over the particles that are not padding."""
    return jnp.sum(jnp.where(run.valid, x, 0.0)) / run.count_valid


def _coordinate_scale(run, states, beta):
    """log(scale) per coordinate at β: measured from the population (the pilot), or given."""

    def measured():
        pot = states.potential
        grad = None if pot.grad_ratio is None else pot.grad(beta)
        return population_log_scale(states.position, grad)

    def given():
        if run.scale_ref is None:
            return jnp.zeros(run.dim, run.dtype)
        return interp_rows(beta, *run.scale_ref)

    return _when(run.adapt_scale, measured, given)


def _when(flag, yes, no):
    """``yes()`` where ``flag`` (a bool, or traced), else ``no()``. Traced, a cond: a main run
    skips the pilot's O(P·D) population statistics (6-10% of a 10-D model's step at 64 and
    512 particles, 2 cores), where a select computed both."""
    if isinstance(flag, bool):
        return yes() if flag else no()
    return jax.lax.cond(flag, yes, no)


def _temperature(run, inner, xs):
    """One temperature: the weight update from the cached ratio, then one transition."""
    n, active = xs  # a temperature past β_N (the last bin's padding) changes nothing
    carry, sums = inner
    betas, dtype = run.betas, run.dtype
    last = betas.shape[0] - 1
    beta_prev, beta = betas[jnp.minimum(n - 1, last)], betas[jnp.minimum(n, last)]
    d_beta = jnp.where(active, beta - beta_prev, 0.0)
    pot = carry.states.potential
    log_w = carry.log_w + jnp.where(d_beta == 0, 0.0, d_beta * pot.log_ratio)
    step_log = run.log_step[jnp.minimum(n, last)] + carry.offset
    step_size = jnp.exp(step_log)
    log_scale = _coordinate_scale(run, carry.states, beta)
    keys = fast_random.split_particles(run.key_steps, run.num_particles, run.particle_offset,
                                       step=n)  # fmt: skip
    moved, info = run.step_vmap(keys, carry.states, run.target, beta, step_size,
                                jnp.exp(log_scale))  # fmt: skip
    states = jax.tree.map(lambda new, old: jnp.where(active, new, old), moved, carry.states)
    on = jnp.asarray(active, dtype)
    mean_acc = _mean(run, info.acceptance_rate)
    adapting = run.adapt_target >= 0
    offset = carry.offset + jnp.where(adapting, on * ADAPT_RATE * (mean_acc - run.adapt_target),
                                      0)  # fmt: skip
    nonfinite = carry.nonfinite + (active & ~info.is_finite & run.valid).astype(jnp.int32)
    # gradients per particle: a particle's own (mean) and what vmap executed (max)
    used = jnp.asarray(info.num_gradients, dtype)
    # and, for mixed_kernel, the fraction of particles whose integer move was taken
    taken = _mean(run, jnp.asarray(info.discrete_accepted, dtype))
    grads = carry.grads + on * jnp.stack([_mean(run, used), jnp.max(used), taken])
    sums = BinSums(
        sums.acceptance + on * mean_acc,
        sums.step_size + on * step_size,
        sums.log_scale + on * log_scale,
        sums.beta + on * beta,
    )
    inner = (Carry(states, log_w, offset, nonfinite, grads), sums)
    spread = _when(run.record,
                   lambda: _trimmed_std(jnp.where(run.valid, states.potential.log_ratio, jnp.nan)),
                   lambda: jnp.zeros((), dtype))  # fmt: skip
    return inner, (step_log, spread)


def _empty_rows(max_bins, dim, dtype):
    """The per-bin summaries, the scale's rows and the per-temperature records, all zero."""
    zeros = lambda *shape: jnp.zeros((max_bins, *shape), dtype)  # noqa: E731
    summaries0 = Summaries(
        zeros(), zeros(), zeros(), zeros(), zeros(), jnp.zeros(max_bins, jnp.int32)
    )
    scale0 = ScaleSums(jnp.zeros(SCALE_ROWS, dtype), jnp.zeros((SCALE_ROWS, dim), dtype),
                       jnp.zeros(SCALE_ROWS, jnp.int32))  # fmt: skip
    rec0 = (zeros(BIN_STEPS), zeros(BIN_STEPS))
    return summaries0, scale0, rec0


def _bin(run, loop: Loop) -> Loop:
    """One bin of ``BIN_STEPS`` temperatures and its row of summaries."""
    b, carry, summaries, scale, rec, start_log_initial = loop
    dtype, zero = run.dtype, jnp.zeros((), run.dtype)
    first = b * BIN_STEPS + 1
    n = first + jnp.arange(BIN_STEPS)
    sums = BinSums(zero, zero, jnp.zeros(run.dim, dtype), zero)
    (carry, sums), per_step = jax.lax.scan(partial(_temperature, run), (carry, sums),
                                           (n, n <= run.num_steps))  # fmt: skip
    count = jnp.minimum(run.num_steps - first + 1, BIN_STEPS)
    per = count.astype(dtype)
    lw = jnp.where(jnp.isnan(carry.log_w) | ~run.valid, -jnp.inf, carry.log_w)
    row = Summaries(
        sums.acceptance / per, sums.step_size / per, estimators.ess(lw),
        jax.scipy.special.logsumexp(lw) - jnp.log(run.count_valid), run.betas[first + count - 1],
        count,
    )  # fmt: skip
    summaries = jax.tree.map(lambda buf, v: buf.at[b].set(v), summaries, row)
    # one row per bin while they fit, else bins merged evenly into the rows
    slot = (b * SCALE_ROWS) // jnp.maximum(run.num_bins_used, SCALE_ROWS)
    scale = jax.tree.map(lambda buf, v: buf.at[slot].add(v), scale,
                         ScaleSums(sums.beta, sums.log_scale, count))  # fmt: skip
    rec = tuple(buf.at[b].set(v) for buf, v in zip(rec, per_step, strict=True))
    return Loop(b + 1, carry, summaries, scale, rec, start_log_initial)


def output(loop: Loop, valid) -> AnnealOutput:
    """The :class:`AnnealOutput` of ``loop`` (``valid``: (P,) False for padding)."""
    _, carry, summaries, scale, rec, start_log_initial = loop
    states, log_w, _, nonfinite, grads = carry
    acc, eps, ess, log_z, bin_beta, bin_count = summaries
    init_nonfinite = jnp.sum(~jnp.isfinite(start_log_initial) & valid).astype(jnp.int32)
    return AnnealOutput(
        log_weights=log_w,
        particles=states.position,
        log_ratio=states.potential.log_ratio,
        log_initial=states.potential.log_initial,
        start_log_initial=start_log_initial,
        initial_nonfinite=init_nonfinite,
        num_nonfinite=jnp.sum(nonfinite),
        particle_nonfinite=nonfinite,
        acceptance=acc,
        step_size=eps,
        ess=ess,
        log_z=log_z,
        bin_beta=bin_beta,
        bin_count=bin_count,
        log_steps=rec[0].reshape(-1),
        log_ratio_sd=rec[1].reshape(-1),
        gradients=grads,
        scale_betas=scale.beta,
        log_scale=scale.log_scale,
        scale_count=scale.count,
    )
