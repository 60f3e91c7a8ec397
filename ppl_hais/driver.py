"""The annealing driver: one ``lax.scan`` over temperatures, particles ``vmap``ped, jit once.

For n = 1 … N (seed 000 §2.2–2.3):

1. ``log w += (β_n − β_{n−1}) · log_ratio(z)`` — the weight update before the move, read from
   the cached potential, so it costs nothing;
2. one transition that leaves π_{β_n} invariant (any :class:`~ppl_hais.kernels.TransitionKernel`).

log Ẑ = logsumexp(log w) − log P + log Z_initial. Memory does not grow with N: per-step
diagnostics are folded into a fixed number of bins as the scan runs.

Step size
---------
``step_size`` is a number (fixed, the seed uses 0.2) or ``"auto"``. ``"auto"`` (and
``schedule="adaptive"``) runs a short *pilot* anneal first (``num_pilot_particles`` particles
over at most ``num_pilot_steps`` temperatures of the same schedule) whose step size follows the
population's mean acceptance toward ``target_accept`` by a Robbins–Monro rule; the pilot's
particles are discarded and its step size, as a function of β, is frozen before the main run
starts. With ``adapt_mass_matrix`` (the default) the pilot also measures each coordinate's
scale in its population, and the main run moves coordinate i by step size × scale_i(β): a
diagonal mass matrix that follows the annealing from prior to posterior (the step size is then
in units of that scale, so the seed's momentum refresh per unit time keeps its meaning at every
β). The main run's kernels are thus fixed in advance and independent of its own particles,
so Ẑ stays exactly unbiased (an adaptation that used the main run's own particles would only
be consistent as P → ∞).
"""

from __future__ import annotations

import os
import time
from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import diagnostics
from . import random as fast_random
from .kernels import TransitionKernel, hais_kernel, mixed_kernel
from .precision import float64, in_thread
from .progress import close_bar, open_bar, run_interruptibly, tick
from .result import AISResult, AnnealingError, AnnealingTrace
from .schedules import adaptive_schedule, make_schedule
from .structure import compile_once, merge, split
from .target import AnnealingTarget

__all__ = ["ais", "bdmc", "hais"]

_ADAPT_RATE = 0.1  # Robbins–Monro gain on log(step size) per pilot temperature
_PILOT_WARMUP = 100  # pilot steps at beta = 0 before annealing starts


# ---------------------------------------------------------------------------------------------
# the scan


def _log_mean_exp(x):
    return jax.scipy.special.logsumexp(x) - jnp.log(x.shape[0])


def _finite_std(x):
    ok = jnp.isfinite(x)
    n = jnp.maximum(jnp.sum(ok), 1)
    mean = jnp.sum(jnp.where(ok, x, 0.0)) / n
    return jnp.sqrt(jnp.sum(jnp.where(ok, x - mean, 0.0) ** 2) / n)


def _ess(log_w):
    return jnp.exp(2 * jax.scipy.special.logsumexp(log_w) - jax.scipy.special.logsumexp(2 * log_w))


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
    ``progress`` is a run id for the progress bar, reported once per bin.

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

    def temperature(carry, xs):
        n, beta_prev, beta = xs
        states, log_w, offset, nonfinite, grads, acc_sum, eps_sum, scale_sum, beta_sum = carry
        d_beta = beta - beta_prev
        log_w = log_w + jnp.where(d_beta == 0, 0.0, d_beta * states.potential.log_ratio)
        log_step = jnp.interp(beta, ref_betas, ref_log_step) + offset
        step_size = jnp.exp(log_step)
        log_scale = coordinate_scale(states, beta)
        keys = fast_random.split_particles(
            jax.random.fold_in(key_steps, n), num_particles, particle_offset
        )
        states, info = step_vmap(keys, states, target, beta, step_size, jnp.exp(log_scale))
        mean_acc = jnp.mean(info.acceptance_rate)
        if adapt_target is not None:
            offset = offset + _ADAPT_RATE * (mean_acc - adapt_target)
        nonfinite = nonfinite + jnp.sum(~info.is_finite).astype(jnp.int32)
        # gradients per particle: a particle's own (mean) and what vmap executed (max)
        used = jnp.asarray(info.num_gradients, dtype)
        # and, for mixed_kernel, the fraction of particles whose integer move was taken
        taken = jnp.mean(jnp.asarray(info.discrete_accepted, dtype))
        grads = grads + jnp.stack([jnp.mean(used), jnp.max(used), taken])
        if adapt_scale:
            scale_sum, beta_sum = scale_sum + log_scale, beta_sum + beta
        carry = (states, log_w, offset, nonfinite, grads, acc_sum + mean_acc,
                 eps_sum + step_size, scale_sum, beta_sum)  # fmt: skip
        return carry, ((log_step, _finite_std(states.potential.log_ratio)) if record else None)

    def bin_(carry, xs):
        states, log_w, offset, nonfinite, grads = carry
        zero = jnp.zeros((), dtype)
        zeros = jnp.zeros(dim if adapt_scale else 0, dtype)
        carry = (states, log_w, offset, nonfinite, grads, zero, zero, zeros, zero)
        carry, log_steps = jax.lax.scan(temperature, carry, xs)
        states, log_w, offset, nonfinite, grads, acc_sum, eps_sum, scale_sum, beta_sum = carry
        count = xs[0].shape[0]
        lw = jnp.where(jnp.isnan(log_w), -jnp.inf, log_w)
        summary = (
            acc_sum / count, eps_sum / count, _ess(lw), _log_mean_exp(lw), xs[2][-1],
            scale_sum / count, beta_sum / count,
        )  # fmt: skip
        if progress is not None:
            jax.debug.callback(tick, progress, xs[0][-1], ordered=False)
        return (states, log_w, offset, nonfinite, grads), (summary, log_steps)

    per_bin = -(-num_steps // num_bins)
    num_full = num_steps // per_bin
    xs = (jnp.arange(1, num_steps + 1), betas[:-1], betas[1:])
    head = jax.tree.map(lambda a: a[: num_full * per_bin].reshape(num_full, per_bin), xs)
    carry = (
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


@lru_cache(maxsize=32)
def _compiled(structure, kernel, num_particles, num_bins, adapt_target, record, adapt_scale):
    """The annealing scan, jitted once per target *structure* (``ppl_hais.structure``): the
    target's arrays (a model's data, a Gaussian's mean) are arguments, so a new target of the
    same structure and shapes reuses the compiled code. The progress callback is always
    compiled in (once per bin; run id 0 has no bar), so switching the bar does not recompile."""

    def run(arrays, rng_key, betas, ref_betas, ref_log_step, run_id, positions, offset, scale_ref):
        return anneal(
            rng_key,
            merge(structure, arrays),
            kernel,
            betas,
            ref_betas,
            ref_log_step,
            num_particles=num_particles,
            num_bins=num_bins,
            adapt_target=adapt_target,
            record=record,
            progress=run_id,
            positions=positions,
            particle_offset=offset,
            scale_ref=scale_ref,
            adapt_scale=adapt_scale,
        )

    return jax.jit(run)


def _sample_initial(target, key, *, num):
    return target.initial.sample(key, num)


_sample_initial_jit = compile_once(_sample_initial)


def _sampler(target, num):
    """Initial draws, compiled once per (target structure, num); an initial distribution with
    ``jittable = False`` (e.g. one that samples through a PPL on the host) is called as is."""
    if not getattr(target.initial, "jittable", True):
        return lambda key: jnp.asarray(target.initial.sample(key, num))
    return lambda key: _sample_initial_jit(target, key, num=int(num))


def _check_initial_density(out, num_particles):
    bad = int(out["initial_nonfinite"])
    if bad:
        raise AnnealingError(
            f"{bad} of {num_particles} draws from the initial distribution have a non-finite "
            "initial log density (NaN/inf): the initial distribution's log_density must be "
            "finite wherever it samples (for a model's prior: check its parameters)."
        )


def _num_groups(num_particles):
    """How many particle groups the main run splits into: two per CPU core.

    XLA runs one vmapped scan on about one core, and part of each step waits on small
    thread-pool tasks (fusions XLA splits across threads, YNNPACK calls); independent groups
    dispatched from threads fill those gaps. Two groups per core beat one per core by
    1.1–1.4× (regressions and funnel, 256–512 particles, 2 cores; docs/groups.md). Groups
    keep ≥ 32 particles and divide the population evenly; on an accelerator one batch is best.
    The environment variable ``PPL_HAIS_CPU_THREADS`` caps the number of groups (e.g. 1 where
    processes already share the cores, as under ``pytest -n``).
    """
    if jax.default_backend() != "cpu":
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    most = 2 * cores
    cap = os.environ.get("PPL_HAIS_CPU_THREADS")
    if cap:
        most = min(most, max(1, int(cap)))
    for groups in range(min(most, num_particles // 32), 1, -1):
        if num_particles % groups == 0:
            return groups
    return 1


def _merge(outs):
    """One output dict from the outputs of particle groups (same betas, same step sizes)."""
    if len(outs) == 1:
        return outs[0]
    sizes = np.array([o["log_weights"].shape[0] for o in outs], dtype=float)
    share = sizes / sizes.sum()
    # per-bin log Ẑ and ESS of the whole population from each group's: with a_g = log Σ w_g,
    # Σw = Σ_g e^{a_g} and Σw² = Σ_g e^{2 a_g} / ESS_g
    log_sum = np.stack([np.asarray(o["log_z"]) for o in outs]) + np.log(sizes)[:, None]
    ess = np.stack([np.asarray(o["ess"]) for o in outs])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_sq = np.where(ess > 0, 2 * log_sum - np.log(ess), -np.inf)
        total = np.logaddexp.reduce(log_sum, axis=0)
        merged_ess = np.exp(2 * total - np.logaddexp.reduce(log_sq, axis=0))
    grads = np.stack([np.asarray(o["gradients"]) for o in outs])
    first = outs[0]
    return dict(
        first,
        log_weights=np.concatenate([np.asarray(o["log_weights"]) for o in outs]),
        particles=np.concatenate([np.asarray(o["particles"]) for o in outs]),
        log_ratio=np.concatenate([np.asarray(o["log_ratio"]) for o in outs]),
        log_initial=np.concatenate([np.asarray(o["log_initial"]) for o in outs]),
        start_log_initial=np.concatenate([np.asarray(o["start_log_initial"]) for o in outs]),
        initial_nonfinite=sum(int(o["initial_nonfinite"]) for o in outs),
        num_nonfinite=sum(int(o["num_nonfinite"]) for o in outs),
        acceptance=np.tensordot(share, np.stack([np.asarray(o["acceptance"]) for o in outs]), 1),
        ess=np.where(np.isfinite(merged_ess), merged_ess, 0.0),
        log_z=total - np.log(sizes.sum()),
        gradients=np.array([share @ grads[:, 0], grads[:, 1].max(), share @ grads[:, 2]]),
    )


def _run(
    rng_key,
    target,
    kernel,
    betas,
    ref_betas,
    ref_log_step,
    positions,
    *,
    num_bins,
    adapt_target=None,
    record=False,
    progress_bar=False,
    desc="annealing",
    scale_ref=None,
    adapt_scale=False,
    devices=None,
):
    """Run :func:`anneal` compiled. A main run (no adaptation, no recording) over several
    ``devices`` has its particles sharded across them (one program, XLA's partitioner adds the
    collectives); on one CPU device it is split into particle groups dispatched from threads.
    Particle i draws the same random numbers either way, so neither split changes the result
    beyond floating-point rounding."""
    num_steps = len(betas) - 1
    num_particles = positions.shape[0]
    main = adapt_target is None and not record
    if main and devices is not None and len(devices) > 1:
        return _run_sharded(
            rng_key, target, kernel, betas, ref_betas, ref_log_step, positions, num_bins=num_bins,
            progress_bar=progress_bar, desc=desc, scale_ref=scale_ref, adapt_scale=adapt_scale,
            devices=devices,
        )  # fmt: skip
    groups = _num_groups(num_particles) if main else 1
    size = num_particles // groups
    structure, arrays = split(target)
    fn = _compiled(structure, kernel, size, num_bins, adapt_target, record, adapt_scale)
    if scale_ref is not None:
        scale_ref = tuple(jnp.asarray(a) for a in scale_ref)
    run_id = open_bar(num_steps, desc) if progress_bar else 0
    args = (rng_key, jnp.asarray(betas), jnp.asarray(ref_betas), jnp.asarray(ref_log_step))

    def group(g):
        # only the first group moves the progress bar (run id 0 has none)
        chunk = positions[g * size : (g + 1) * size]
        out = fn(arrays, *args, run_id if g == 0 else 0, chunk, g * size, scale_ref)
        return jax.block_until_ready(out)

    try:
        outs = run_interruptibly(
            [in_thread(lambda g=g: group(g)) for g in range(groups)]
        )  # fmt: skip
    finally:
        if progress_bar:
            close_bar(run_id)
    out = _merge(outs)
    _check_initial_density(out, num_particles)
    return out


def _run_sharded(
    rng_key, target, kernel, betas, ref_betas, ref_log_step, positions, *, num_bins,
    progress_bar, desc, scale_ref, adapt_scale, devices,
):  # fmt: skip
    """The main run with its particles sharded over ``devices`` (a 1-D mesh, axis
    "particles"); everything else is replicated. The compiled scan is the same function as on
    one device: jit partitions it by the input's sharding (the per-bin log-sum-exp and ESS
    become cross-device reductions)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    num_particles = positions.shape[0]
    if num_particles % len(devices):
        raise ValueError(
            f"{num_particles} particles do not split evenly over {len(devices)} devices: use a "
            "multiple of the number of devices"
        )
    mesh = Mesh(np.asarray(devices), ("particles",))
    sharded = NamedSharding(mesh, PartitionSpec("particles"))
    replicated = NamedSharding(mesh, PartitionSpec())
    structure, arrays = split(target)
    fn = _compiled(structure, kernel, num_particles, num_bins, None, False, adapt_scale)
    put = lambda x: jax.device_put(x, replicated)  # noqa: E731
    if scale_ref is not None:
        scale_ref = tuple(put(jnp.asarray(a)) for a in scale_ref)
    run_id = open_bar(len(betas) - 1, desc) if progress_bar else 0

    def call():
        out = fn(
            [put(a) for a in arrays], put(rng_key), put(jnp.asarray(betas)),
            put(jnp.asarray(ref_betas)), put(jnp.asarray(ref_log_step)), run_id,
            jax.device_put(jnp.asarray(positions), sharded), 0, scale_ref,
        )  # fmt: skip
        return jax.block_until_ready(out)

    try:
        (out,) = run_interruptibly([in_thread(call)])
    finally:
        if progress_bar:
            close_bar(run_id)
    out = {k: np.asarray(v) for k, v in out.items()}
    _check_initial_density(out, num_particles)
    return out


def _devices(devices):
    """The devices a main run shards over: ``None`` → every local device of the default
    backend, except on CPU, where one device with particle groups on threads was faster than
    the cores as XLA host devices (docs/devices.md); a list of ``jax.Device`` as given."""
    if devices is None:
        local = jax.local_devices()
        return local[:1] if local[0].platform == "cpu" else local
    devices = list(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise TypeError("devices must be a non-empty list of jax.Device, e.g. jax.devices()[:2]")
    return devices


def _smooth(x, window):
    if x.size <= window:
        return np.full_like(x, x.mean())
    kernel = np.ones(window) / window
    padded = np.concatenate(
        [np.full(window // 2, x[0]), x, np.full(window - 1 - window // 2, x[-1])]
    )
    return np.convolve(padded, kernel, mode="valid")


def pilot_schedule(betas, num_steps):
    """The pilot's betas (warm-up at β = 0, then every k-th β) and the βs its step sizes map to.

    The pilot's step n uses β = pilot_betas[n] and records log(step size)[n − 1]; the recorded
    values from index ``_PILOT_WARMUP − 1`` on belong to
    ``ref_betas = pilot_betas[_PILOT_WARMUP:]``.
    """
    stride = max(1, int(np.ceil((len(betas) - 1) / num_steps)))
    pilot_betas = np.concatenate([np.zeros(_PILOT_WARMUP), betas[::stride]])
    if pilot_betas[-1] != 1.0:
        pilot_betas = np.append(pilot_betas, 1.0)
    return pilot_betas, pilot_betas[_PILOT_WARMUP:]


class Pilot(NamedTuple):
    """What the pilot measured, as functions of β (linear interpolation between the points)."""

    betas: np.ndarray  # where log_step and log_ratio_sd are given
    log_step: np.ndarray  # smoothed log(step size)
    log_ratio_sd: np.ndarray  # smoothed spread of the log likelihood ratio over particles
    scale: tuple | None  # (betas, log scale per coordinate) by bin, or None (scale 1)
    log_weights: np.ndarray | None = None  # the pilot's final log weights (to compare paths)


def pilot_run(
    rng_key,
    target,
    kernel,
    betas,
    positions,
    *,
    initial_step_size,
    target_accept,
    num_steps=1000,
    adapt_scale=False,
    progress_bar=False,
):
    """A short pilot anneal (its particles are discarded) that tunes log(step size) as a function
    of β toward ``target_accept`` (None: keep ``initial_step_size``), measures the spread of
    the log likelihood ratio along the way and, with ``adapt_scale``, the per-coordinate scale
    of the population (the diagonal preconditioner; see :func:`anneal`).
    """
    pilot_betas, ref_betas = pilot_schedule(betas, num_steps)
    out = _run(
        rng_key,
        target,
        kernel,
        pilot_betas,
        np.array([0.0, 1.0]),
        np.full(2, np.log(initial_step_size)),
        positions,
        num_bins=min(100, len(pilot_betas) - 1),
        adapt_target=None if target_accept is None else float(target_accept),
        record=True,
        progress_bar=progress_bar,
        desc="pilot",
        adapt_scale=adapt_scale,
    )
    log_steps = np.asarray(out["log_steps"])[_PILOT_WARMUP - 1 :]
    sd = np.asarray(out["log_ratio_sd"])[_PILOT_WARMUP - 1 :]
    if not np.all(np.isfinite(log_steps)):
        raise AnnealingError(
            "step-size adaptation diverged (non-finite step size) in the pilot run"
        )
    scale = None
    if adapt_scale:
        scale = (np.asarray(out["scale_betas"]), np.asarray(out["log_scale"]))
    return Pilot(
        ref_betas,
        _smooth(log_steps, 11),
        _smooth(np.where(np.isfinite(sd), sd, 0.0), 11),
        scale,
        np.asarray(out["log_weights"]),
    )


@float64
def survey(
    rng_key,
    target: AnnealingTarget,
    kernel: TransitionKernel,
    *,
    positions=None,
    num_pilot_particles: int = 64,
    num_steps: int = 1000,
    schedule="adaptive",
    step_size="auto",
    target_accept: float | None = None,
    num_pilot_steps: int = 1000,
    adapt_mass_matrix: bool = True,
    progress_bar: bool = False,
) -> Pilot:
    """The pilot :func:`ais` runs before its main run, with the same arguments: a discarded
    anneal that tunes the step size and mass matrix and measures the path (for the adaptive
    schedule). ``positions``: its initial particles (default: ``num_pilot_particles`` fresh
    draws). Its final log weights tell how hard the path is (the evidence workflow compares
    initial distributions by them); passing it to :func:`ais` as ``pilot=`` reuses it."""
    auto = isinstance(step_size, str)
    adaptive = isinstance(schedule, str) and schedule == "adaptive"
    betas = make_schedule(
        "survey" if adaptive else schedule, None if not isinstance(schedule, str) else num_steps
    )
    rng_key = fast_random.check_key(rng_key)
    if positions is None:
        key_sample, rng_key = jax.random.split(rng_key)
        positions = _sampler(target, int(num_pilot_particles))(key_sample)
    if auto and target_accept is None:
        target_accept = 0.9 if kernel.gradients_per_step > 0 else 0.3
    return pilot_run(
        rng_key,
        target,
        kernel,
        betas,
        positions,
        initial_step_size=kernel.default_step_size if auto else float(step_size),
        target_accept=target_accept if auto else None,
        num_steps=int(num_pilot_steps),
        adapt_scale=auto and bool(adapt_mass_matrix),
        progress_bar=progress_bar,
    )


# ---------------------------------------------------------------------------------------------
# public entry points


@float64
def ais(
    rng_key,
    target: AnnealingTarget,
    kernel: TransitionKernel,
    *,
    num_particles: int = 256,
    num_steps: int = 1000,
    schedule="adaptive",
    step_size="auto",
    target_accept: float | None = None,
    num_pilot_particles: int = 64,
    num_pilot_steps: int = 1000,
    adapt_mass_matrix: bool = True,
    bidirectional: bool = False,
    reverse_from=None,
    pilot: Pilot | None = None,
    num_bins: int = 100,
    progress_bar: bool = True,
    devices=None,
) -> AISResult:
    """Annealed importance sampling with any transition kernel.

    Parameters
    ----------
    rng_key : jax.random key
        Same key ⇒ bit-identical result.
    target : AnnealingTarget
    kernel : TransitionKernel
        ``ph.hais_kernel()``, ``ph.resampled_hmc_kernel()`` or ``ph.random_walk_kernel()``.
    num_particles : int
        Number of independent annealing chains P.
    num_steps : int
        Number of intermediate distributions N (ignored when ``schedule`` is an array).
    schedule : {"adaptive", "linear", "sigmoid", "geometric", "survey"} or array
        The betas 0 = β_0 ≤ … ≤ β_N = 1. ``"adaptive"`` (default) places them at equal
        thermodynamic length (:func:`~ppl_hais.schedules.adaptive_schedule`) from the spread of
        the log likelihood ratio measured by the pilot run, which surveys the path on
        :func:`~ppl_hais.schedules.survey_schedule` (down to β = 10⁻⁸, so a posterior 10⁴
        times narrower than the initial distribution per coordinate is still resolved); like
        the step size, it is fixed before the main run starts, so Ẑ stays unbiased.
    step_size : float or "auto"
        Fixed step size (leapfrog ε or random-walk σ), or ``"auto"``: tuned on a discarded
        pilot run toward ``target_accept`` and frozen (keeps Ẑ unbiased; see module docs).
    adapt_mass_matrix : bool
        With ``step_size="auto"``, also precondition each coordinate by the scale of the
        pilot's population at that β (a diagonal mass matrix that follows the annealing; the
        step size is then in units of that scale). NumPyro's spelling.
    target_accept : float, optional
        Mean Metropolis acceptance the pilot aims for (0.9 for leapfrog kernels, 0.3 for
        random walk).
    bidirectional : bool
        Also anneal back from the target to the initial distribution, starting from
        ``num_particles // 4`` of the final particles resampled by weight, with the same
        schedule and kernels; the result's ``log_z_upper`` is that reverse estimate and
        ``bidirectional_gap`` its distance to ``log_z``. The reverse estimate is an upper
        bound only when it starts from *exact* posterior draws (:func:`ppl_hais.bdmc`); from
        the run's own particles it is a diagnostic, and a large gap warns.
    reverse_from : (R, D) array, optional
        Start the reverse run from these positions instead (exact draws of the target: BDMC).
    pilot : Pilot, optional
        A pilot measured before (:func:`pilot_run`), reused instead of running a new one.
    num_bins : int
        Per-temperature diagnostics are averaged into this many bins.
    progress_bar : bool
        Show a progress bar (NumPyro's spelling).
    devices : list of jax.Device, optional
        Where the main run's particles go: sharded over these devices (default: every local
        device of the default backend; on CPU one device, with particle groups on threads,
        which measured faster than host devices: docs/devices.md). The same key gives the
        same estimate on 1 or k devices; ``settings["num_devices"]`` records k.

    Returns
    -------
    AISResult
        With its trust checks: every failed one is also raised as
        :class:`~ppl_hais.EvidenceWarning`.

    On one CPU device the main run's particles are split into groups, two per core,
    dispatched from threads (particle i draws the same random numbers either way).
    """
    adaptive = isinstance(schedule, str) and schedule == "adaptive"
    base = "survey" if adaptive else schedule
    betas = make_schedule(base, None if not isinstance(base, str) else num_steps)
    num_steps = int(num_steps) if adaptive else len(betas) - 1
    num_particles = int(num_particles)
    if num_particles < 2:
        raise ValueError("num_particles must be at least 2 (the error bar needs a spread)")
    num_bins = int(min(num_bins, num_steps))
    rng_key = fast_random.check_key(rng_key)
    _check_initial(target, rng_key)
    start = time.perf_counter()
    key_pilot, key_main, key_sample, key_reverse = jax.random.split(rng_key, 4)
    auto = isinstance(step_size, str)
    if auto and step_size != "auto":
        raise ValueError("step_size must be a positive number or 'auto'")
    if not auto:
        step_size = float(step_size)
        if not step_size > 0:
            raise ValueError("step_size must be positive")
    if auto and target_accept is None:
        target_accept = 0.9 if kernel.gradients_per_step > 0 else 0.3
    num_pilot = int(num_pilot_particles) if (auto or adaptive) and pilot is None else 0
    # one draw (one compiled sampler) for the pilot's and the main run's initial particles
    positions = _sampler(target, num_pilot + num_particles)(key_sample)
    if num_pilot:
        pilot = survey(
            key_pilot, target, kernel, positions=positions[:num_pilot], num_steps=num_steps,
            schedule=schedule, step_size=step_size, target_accept=target_accept,
            num_pilot_steps=num_pilot_steps, adapt_mass_matrix=adapt_mass_matrix,
            progress_bar=progress_bar,
        )  # fmt: skip
    pilot_gradients = 0
    if pilot is not None:
        pilot_gradients = (len(pilot.betas) + _PILOT_WARMUP) * kernel.gradients_per_step
        if adaptive:
            betas = adaptive_schedule(pilot.betas, pilot.log_ratio_sd, num_steps)
    if auto:
        ref_betas, ref_log_step, scale_ref = pilot.betas, pilot.log_step, pilot.scale
    else:
        ref_betas, ref_log_step = np.array([0.0, 1.0]), np.full(2, np.log(step_size))
        scale_ref = None
    devices = _devices(devices)
    tuning = dict(num_bins=num_bins, progress_bar=progress_bar, scale_ref=scale_ref)
    out = _run(
        key_main, target, kernel, betas, ref_betas, ref_log_step, positions[num_pilot:],
        desc=kernel.name, devices=devices, **tuning,
    )  # fmt: skip
    reverse = None
    if bidirectional or reverse_from is not None:
        if reverse_from is None:
            lw = np.asarray(out["log_weights"], dtype=float)
            lw = np.where(np.isnan(lw), -np.inf, lw)
            w = np.exp(lw - np.max(lw))
            keep = max(num_particles // 4, 2)
            idx = np.searchsorted(np.cumsum(w / w.sum()), (0.5 + np.arange(keep)) / keep)
            reverse_from = np.asarray(out["particles"])[np.minimum(idx, num_particles - 1)]
        start_rev = jnp.asarray(np.atleast_2d(np.asarray(reverse_from, dtype=float)))
        if start_rev.shape[-1] != positions.shape[-1]:
            raise ValueError(
                f"reverse_from has {start_rev.shape[-1]} coordinates; the target has "
                f"{positions.shape[-1]}"
            )
        reverse = _run(
            key_reverse, target, kernel, betas[::-1].copy(), ref_betas, ref_log_step,
            start_rev, desc="reverse", **tuning,
        )  # fmt: skip
    wall = time.perf_counter() - start
    trace = AnnealingTrace(
        beta=np.asarray(out["bin_beta"]),
        acceptance_rate=np.asarray(out["acceptance"]),
        step_size=np.asarray(out["step_size"]),
        ess=np.asarray(out["ess"]),
        log_z=np.asarray(out["log_z"]) + target.log_z_initial,
    )
    settings = dict(
        kernel=kernel.name,
        num_particles=num_particles,
        num_steps=len(betas) - 1,
        schedule=schedule if isinstance(schedule, str) else "user",
        step_size=step_size,
        target_accept=target_accept,
        gradients_per_particle=float(out["gradients"][0]),
        gradients_executed_per_particle=float(out["gradients"][1]),
        pilot_gradients_per_particle=pilot_gradients,
        num_pilot_particles=num_pilot,
        num_devices=len(devices),
    )
    if kernel.name.endswith("+discrete"):
        settings["discrete_acceptance"] = float(out["gradients"][2]) / max(len(betas) - 1, 1)
    if reverse is not None:
        settings["num_reverse_particles"] = int(reverse["log_weights"].shape[0])
        settings["reverse_from"] = "exact draws" if bidirectional is False else "own particles"
    result = AISResult.from_log_weights(
        np.asarray(out["log_weights"]),
        particles=np.asarray(out["particles"]),
        final_log_ratio=np.asarray(out["log_ratio"]),
        outside=diagnostics.outside_fraction(out["start_log_initial"], out["log_initial"]),
        betas=betas,
        trace=trace,
        num_nonfinite=int(out["num_nonfinite"]),
        log_z_initial=target.log_z_initial,
        settings=settings,
        wall_time=wall,
        reverse_log_weights=None if reverse is None else np.asarray(reverse["log_weights"]),
    )
    diagnostics.warn(result.checks, "log Z")
    return result


@float64
def bdmc(rng_key, target: AnnealingTarget, exact_draws, **kwargs) -> AISResult:
    """Bidirectional Monte Carlo (Grosse et al. 2015): log Z sandwiched between two anneals.

    A forward HAIS run from the initial distribution gives a stochastic lower bound
    (``result.log_z``: E[log Ẑ] ≤ log Z) and a reverse run from ``exact_draws``, exact
    samples of the target, gives a stochastic upper bound (``result.log_z_upper``). Their gap
    bounds the bias of either. Exact draws exist for simulated data: the parameters that
    generated the data are an exact posterior draw. The draws are reused cyclically to start
    at least ``num_particles // 4`` reverse chains (each is unbiased for 1/Z from an exact
    draw). Keyword arguments go to :func:`hais`.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
    >>> target = ph.AnnealingTarget(
    ...     log_density=lambda z: -0.5 * jnp.sum(((z - 2.0) / 0.5) ** 2),
    ...     initial=ph.Gaussian(jnp.zeros(3)))
    >>> exact = 2.0 + 0.5 * np.random.default_rng(0).normal(size=(64, 3))
    >>> res = ph.bdmc(jax.random.key(0), target, exact, num_particles=128, num_steps=300,
    ...               progress_bar=False)
    >>> bool(res.log_z - 0.1 < 3 * np.log(0.5 * np.sqrt(2 * np.pi)) < res.log_z_upper + 0.1)
    True
    """
    draws = np.atleast_2d(np.asarray(exact_draws, dtype=float))
    # each reverse chain from an exact draw is unbiased for 1/Z: reuse the draws cyclically
    # up to a quarter of the forward particles, so one simulated data set gives a usable bound
    num = max(len(draws), int(kwargs.get("num_particles", 256)) // 4)
    return hais(rng_key, target, reverse_from=np.resize(draws, (num, draws.shape[1])), **kwargs)


@float64
def hais(
    rng_key,
    target: AnnealingTarget,
    *,
    num_particles: int = 256,
    num_steps: int = 1000,
    step_size="auto",
    refresh: float = 0.5,
    num_leapfrog: int = 1,
    flips: str = "standard",
    lookahead: int = 1,
    schedule="adaptive",
    discrete=None,
    **kwargs,
) -> AISResult:
    """Hamiltonian annealed importance sampling (seed 000 §2.3): the log normalizer of a target.

    Runs :func:`ais` with :func:`~ppl_hais.kernels.hais_kernel`: one leapfrog step per
    temperature, momentum persistent across temperatures, negated on rejection and partially
    refreshed (``refresh`` = fraction of momentum power replaced per unit simulation time).
    ``flips="reduced"`` negates the momentum on rejection only as often as invariance needs
    (seed 001 ch. 6) and ``lookahead=K`` tries K trajectories first (LAHMC); both spend extra
    gradients after rejections only (counted in ``settings``). ``discrete``: booleans, one per
    coordinate, True where the coordinate is an integer: those are moved by a Metropolis step
    after each HMC step instead (:func:`~ppl_hais.kernels.mixed_kernel`); the initial
    distribution must draw integers there. Other keyword arguments go to :func:`ais`.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
    >>> target = ph.AnnealingTarget(
    ...     log_density=lambda z: -0.5 * jnp.sum((z / 3.0) ** 2),   # log Z = 2·log(3·√(2π))
    ...     initial=ph.Gaussian(jnp.zeros(2)))
    >>> res = ph.hais(jax.random.key(0), target, num_particles=128, num_steps=500,
    ...               progress_bar=False)
    >>> bool(abs(res.log_z - 2 * np.log(3 * np.sqrt(2 * np.pi))) < 5 * res.log_z_se + 0.05)
    True
    """
    kernel = hais_kernel(float(refresh), int(num_leapfrog), int(lookahead), str(flips))
    if discrete is not None and np.any(discrete):
        kernel = mixed_kernel(tuple(bool(d) for d in np.ravel(discrete)), kernel)
    return ais(
        rng_key,
        target,
        kernel,
        num_particles=num_particles,
        num_steps=num_steps,
        schedule=schedule,
        step_size=step_size,
        **kwargs,
    )


def _check_initial(target, rng_key):
    """Fail early on an initial distribution that cannot be sampled inside the box."""
    box = target.box
    if box is None:
        return
    z = np.asarray(target.initial.sample(jax.random.fold_in(rng_key, 17), 64))
    if np.any(z < box[0]) or np.any(z > box[1]):
        raise ValueError(
            "the initial distribution puts samples outside the target's bounds; use an initial "
            "distribution supported inside the box (e.g. a truncated or transformed one)"
        )
