"""Running the scan: particle groups on CPU threads or sharded over devices, each run by the
compiled program's host loop (:mod:`~ppl_hais.annealing.program`), and the merge of their
outputs.

Example
-------
>>> from ppl_hais.annealing import execution
>>> execution.layout(8)  # fewer than 32 particles a group: one batch
(1, 8)
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..mcmc.fast_random import host_fold_in
from ..results.result import InitialSupportError
from ..runtime.precision import in_thread
from ..runtime.progress import close_bar, open_run, run_interruptibly, shared_bar
from ..runtime.structure import compile_once, split
from . import batching
from .outputs import finish, merge_groups
from .program import compiled, drive, empty_loop
from .scan import num_bins as num_bins_of
from .starvation import serial_groups

# schedules up to 16,383 temperatures share one compiled program: every rung of the convergence
# ladder (the longest is 16,000), whatever the transition. At 8192 for the standard transition
# the first call in a process whose ladder climbed to 16,000 compiled a second anneal (2-3 s on
# 2 cores); paired runs of 36-91 ms measured no cost of the larger buffers (-0.5 to +0.9 ms:
# paired runs in one process)
MIN_CAPACITY = 2**14


def capacity(length):
    """The padded length of a schedule of ``length`` βs (and of its per-temperature step sizes):
    ``MIN_CAPACITY``, or the next power of two above it, so a few programs serve every N."""
    return max(MIN_CAPACITY, 1 << (int(length) - 1).bit_length())


def padded(values, length=None):
    """``values`` (1-D, or 2-D by rows) extended to ``capacity`` (or ``length``) rows by
    repeating its last row: a schedule's padding is never reached (masked in the scan), and
    interpolating the padded scale knots gives the same values as the unpadded ones."""
    values = np.asarray(values)
    extra = (capacity(len(values)) if length is None else length) - len(values)
    return np.concatenate([values, np.repeat(values[-1:], extra, axis=0)]) if extra else values


def _sample_initial(target, key, *, num):
    return target.initial.sample(key, (num,))


_sample_initial_jit = compile_once(_sample_initial)


DRAW_BLOCK = 1024  # initial draws come in blocks of this many: one compiled sampler for any count


def initial_sampler(target, num):
    """Initial draws (a host array) of ``num`` particles, in blocks of ``DRAW_BLOCK`` from one
    program per target structure, so any number of particles or chains compiles no new
    sampler (each took 0.3-0.5 s on 2 cores). Block b ≥ 1 is drawn with ``fold_in(key, b)``.
    Under JAX's partitionable Threefry (its default) particle i's draw depends on i and the
    key, not on how many were drawn. A ``jittable = False`` initial distribution (e.g. one that
    samples through a PPL on the host) is called as is."""
    if not getattr(target.initial, "jittable", True):
        return lambda key: np.asarray(target.initial.sample(key, (num,)))
    num = int(num)
    blocks = range(-(-num // DRAW_BLOCK))

    def draw(key):
        keys = (key if b == 0 else host_fold_in(key, b) for b in blocks)
        parts = [np.asarray(_sample_initial_jit(target, k, num=DRAW_BLOCK)) for k in keys]
        return np.concatenate(parts)[:num] if len(parts) > 1 else parts[0][:num]

    return draw


def _check_initial_density(out, num_particles):
    bad = int(out.initial_nonfinite)
    if bad:
        raise InitialSupportError(bad, num_particles)


_CORES: contextvars.ContextVar[int | None] = contextvars.ContextVar("ppl_hais_cores", default=None)


@contextlib.contextmanager
def using_cores(cores: int | None):
    """Within the block, runs split their particles as if the machine had ``cores`` CPU cores
    (``None``: the cores this process may use). ``php.sample_hais(cores=…)`` sets it."""
    token = _CORES.set(None if cores is None else int(cores))
    try:
        yield
    finally:
        _CORES.reset(token)


GROUP_PARTICLES = 64  # the pilot's particles, and a main run's group where that fits the cores
LARGE_GROUP = 512  # a main run's group past eight pilot-sized groups per core
PAD_LIMIT = 1 / 16  # a main run is padded to whole groups by at most this fraction of its particles


def layout(num_particles):
    """(groups, particles per group) of a main run on CPU. Two sizes serve every population,
    so a new number of particles or chains compiles no new anneal once each has run: groups of
    ``GROUP_PARTICLES`` (the pilot's size: the pilot, the main run and the bias check's reverse
    anneal share one program) where that gives one to eight per core, past that of
    ``LARGE_GROUP`` (several chains, ``draws=2000``; of 64 still where 512 would pad more),
    the last group padded by at most ``PAD_LIMIT`` of the particles (PyMC's default 1000 run
    as 16 groups of 64, 24 of them padding that no figure counts); else two groups per core
    dividing the particles.

    At most :func:`concurrent_groups` run at once. XLA runs one vmapped scan on about one
    core, and part of each step waits on small thread-pool tasks that other groups fill: two
    per core beat one by 1.1–1.4×, four ran within ±10% of two. Two fixed sizes mean a new
    number of particles or chains compiles no new program; groups of 64 for every population
    made a cheap model's large populations 1.6–2× slower warm (per-step overhead;
    docs/chains.md). On an accelerator one batch is best. :func:`using_cores` sets the cores;
    ``PPL_HAIS_CPU_THREADS`` caps the groups per core pair (e.g. 1 under ``pytest -n``).
    """
    if jax.default_backend() != "cpu":
        return 1, num_particles
    most = cpu_threads()
    pilot_sized = -(-num_particles // GROUP_PARTICLES)
    padding = pilot_sized * GROUP_PARTICLES - num_particles
    fits = max(most // 2, 1) <= pilot_sized and padding <= PAD_LIMIT * num_particles
    if fits and pilot_sized <= 4 * most:
        return pilot_sized, GROUP_PARTICLES
    large = -(-num_particles // LARGE_GROUP)
    if large >= max(most // 2, 1) and large * LARGE_GROUP - num_particles <= (
        PAD_LIMIT * num_particles
    ):
        return large, LARGE_GROUP
    if fits:
        return pilot_sized, GROUP_PARTICLES
    for groups in range(min(most, num_particles // 32), 1, -1):
        if num_particles % groups == 0:
            return groups, num_particles // groups
    return 1, num_particles


def top_up_unit(num_particles, num_chains=1, num_devices=1) -> int:
    """The fewest particles a chain's top-up run (:mod:`ppl_hais.workflow.runs`) takes without
    compiling a new anneal: on one CPU device, whole groups of ``GROUP_PARTICLES`` (the pilot's
    program), as many as :func:`layout` needs for a population of pilot-sized groups (one per
    core pair), shared among the chains, which run as one population; a main run smaller than
    that, or sharded over several devices (where each population size is a program), in whole
    runs of ``num_particles``."""
    if num_devices > 1 or jax.default_backend() != "cpu":
        return int(num_particles)
    groups = -(-max(cpu_threads() // 2, 1) // max(int(num_chains), 1))
    return int(min(num_particles, GROUP_PARTICLES * groups))


def concurrent_groups() -> int:
    """How many particle groups run at once on CPU: eight per core (capped as
    :func:`layout`'s groups are). With groups of 64 for every population, four
    chains of the 50-D regression (32 groups) ran 1.1× slower with all 32 at once and 1.2×
    slower with two per core at once (a scratch A/B, 2 cores)."""
    return 4 * cpu_threads()


def cpu_threads() -> int:
    cores = _CORES.get()
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
    most = 2 * cores
    cap = os.environ.get("PPL_HAIS_CPU_THREADS")
    if cap:
        most = min(most, max(1, int(cap)))
    return most


def run(
    rng_key, target, kernel, betas, ref_betas, ref_log_step, positions, *, num_bins,
    adapt_target=None, record=False, progress_bar=False, desc="annealing", scale_ref=None,
    adapt_scale=False, devices=None,
):  # fmt: skip
    """Run :func:`anneal` compiled. A main run (not a pilot: ``record`` unset) over several
    ``devices`` has its particles sharded across them (one program, XLA's partitioner adds the
    collectives); on one CPU device it is split into particle groups dispatched from threads.
    Particle i draws the same random numbers either way, so neither split changes the result
    beyond floating-point rounding. A pilot (``record``) runs as one population: its
    adaptation reads the whole population."""
    num_steps = len(betas) - 1
    num_particles = positions.shape[0]
    main = adapt_target is None and not record
    if main and devices is not None and len(devices) > 1:
        return _run_sharded(
            rng_key, target, kernel, betas, ref_betas, ref_log_step, positions, num_bins=num_bins,
            progress_bar=progress_bar, desc=desc, scale_ref=scale_ref, adapt_scale=adapt_scale,
            devices=devices,
        )  # fmt: skip
    groups, size = layout(num_particles) if main else (1, num_particles)
    if groups * size > num_particles:  # padding: copies of the first particles (finite
        # densities), drawing the random numbers of particles num_particles and up; host draws
        # stay on the host (slicing a device array compiles a program per shape)
        xp = np if isinstance(positions, np.ndarray) else jnp
        positions = xp.concatenate([positions, positions[: groups * size - num_particles]])
    # device_put, not jnp.asarray: that compiles a conversion program for a Python scalar
    valid = jax.device_put(np.int32(num_particles))
    structure, arrays = split(target)
    fn = compiled(structure, kernel, num_particles=size)
    scale_ref = _scale_args(scale_ref, positions.shape[-1])
    switches = _switches(adapt_target, adapt_scale, not main)
    # each group is paced on its own clock; the bar shows the groups' mean position
    bar = shared_bar(num_steps, desc, groups) if progress_bar else None
    run_ids = [open_run(num_steps, desc, part_of=bar) for g in range(groups)]
    args = (rng_key, *_schedule_args(betas, ref_betas, ref_log_step))

    empty = empty_loop(structure, arrays, kernel, size, len(args[1]), positions.shape[-1])

    def arguments(g):
        chunk = positions[g * size : (g + 1) * size]
        return arrays, *args, chunk, g * size, scale_ref, *switches, valid

    def group(g):
        call = partial(fn, *arguments(g))
        return drive(call, empty, num_steps, run_ids[g], pace=(fn, groups))

    outs, batch = None, batching.current()
    try:
        if batch is not None:  # side by side with other estimates' anneals (a calibration)
            outs = batch.run((structure, kernel, size),
                             [(*arguments(g), empty) for g in range(groups)],
                             num_bins_of(num_steps))  # fmt: skip
        elif groups > 1 and serial_groups(structure, target):  # one group at a time
            (outs,) = run_interruptibly([in_thread(lambda: [group(g) for g in range(groups)])])
        else:
            calls = [in_thread(lambda g=g: group(g)) for g in range(groups)]
            outs = run_interruptibly(calls, workers=concurrent_groups())
    finally:
        for run_id in [*run_ids, bar]:
            close_bar(run_id, complete=outs is not None)
    outs = jax.device_get(outs)  # one batched copy to the host
    out = finish(merge_groups(outs, num_particles), num_steps, num_bins)._replace(
        particles_per_device=[num_particles]
    )
    _check_initial_density(out, num_particles)
    return out


def _schedule_args(betas, ref_betas, ref_log_step):
    """The schedule padded (to at least ``MIN_CAPACITY``), its length N, and log(step size) at each
    of its βs (interpolated here, once, rather than at every temperature)."""
    betas = np.asarray(betas, float)
    log_step = np.interp(betas, np.asarray(ref_betas, float), np.asarray(ref_log_step, float))
    length = capacity(len(betas))
    return (
        jax.device_put(padded(betas, length)), jax.device_put(np.int32(len(betas) - 1)),
        jax.device_put(padded(log_step, length)),
    )  # fmt: skip


SCALE_POINTS = 128  # the pilot's per-bin scale is given at ≤ num_bins (100) points


def _scale_args(scale_ref, dim):
    """The pilot's per-bin scale padded to ``SCALE_POINTS`` knots; scale 1 where none."""
    if scale_ref is None:
        scale_ref = (np.array([0.0, 1.0]), np.zeros((2, dim)))
    ref_betas, log_scale = (np.asarray(a, float) for a in scale_ref)
    length = max(SCALE_POINTS, len(ref_betas))
    return jnp.asarray(padded(ref_betas, length)), jnp.asarray(padded(log_scale, length))


def _switches(adapt_target, adapt_scale, record=False):
    """The pilot's switches as arguments of the compiled scan: its adaptation (−1: no step-size
    adaptation; not NaN, which a multi-process run's check that every process passes the same
    value would fail) and whether it records the log ratio's spread (``record``)."""
    target = -1.0 if adapt_target is None else float(adapt_target)
    return jax.device_put(np.asarray(target, jnp.result_type(float))), jax.device_put(
        np.bool_(adapt_scale)), jax.device_put(np.bool_(record))  # fmt: skip


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
    if num_particles < len(devices):
        raise ValueError(
            f"{num_particles} particles cannot be sharded over {len(devices)} devices: use at "
            "least one particle per device (better, many), or fewer devices (devices=...)"
        )
    if num_particles % len(devices):
        raise ValueError(
            f"{num_particles} particles do not split evenly over {len(devices)} devices: use a "
            "multiple of the number of devices"
        )
    mesh = Mesh(np.asarray(devices), ("particles",))
    sharded = NamedSharding(mesh, PartitionSpec("particles"))
    replicated = NamedSharding(mesh, PartitionSpec())
    structure, arrays = split(target)
    fn = compiled(structure, kernel, num_particles=num_particles)
    put = lambda x: _global(x, replicated)  # noqa: E731
    scale_ref = tuple(put(a) for a in _scale_args(scale_ref, positions.shape[-1]))
    switches = [put(a) for a in _switches(None, adapt_scale)]
    run_id = open_run(len(betas) - 1, desc, bar=progress_bar)
    schedule = [put(a) for a in _schedule_args(betas, ref_betas, ref_log_step)]

    empty = jax.tree.map(  # per-particle rows sharded as the particles, the rest replicated
        lambda x: _global(np.asarray(x), sharded if x.shape[:1] == (num_particles,)
                          else replicated),  # fmt: skip
        empty_loop(structure, arrays, kernel, num_particles, len(schedule[0]),
                   positions.shape[-1]))  # fmt: skip
    bound = partial(fn, [put(a) for a in arrays], put(rng_key), *schedule,
                    _global(jnp.asarray(positions), sharded), 0, scale_ref, *switches,
                    put(jnp.asarray(num_particles, jnp.int32)))  # fmt: skip

    def call():
        return drive(lambda loop, until: bound(loop, put(until)), empty, len(betas) - 1, run_id)

    out = None
    try:
        (out,) = run_interruptibly([in_thread(call)])
    finally:
        close_bar(run_id, complete=out is not None)
    # where the particles lived: rows per device (this process's devices)
    shards = [int(s.data.shape[0]) for s in out.particles.addressable_shards]
    if any(not getattr(v, "is_fully_addressable", True) for v in out):
        # several processes (jax.distributed): every process gets the whole population
        from jax.experimental import multihost_utils

        out = multihost_utils.process_allgather(out, tiled=True)
    out = finish(out, len(betas) - 1, num_bins)._replace(particles_per_device=shards)
    _check_initial_density(out, num_particles)
    return out


def _global(x, sharding):
    """``x`` placed with ``sharding``. Under ``jax.distributed`` every process holds the same
    host value (same key, same draws) and contributes its devices' part of it."""
    if jax.process_count() == 1:
        return jax.device_put(x, sharding)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(_global(jax.random.key_data(x), sharding))
    return jax.device_put(np.asarray(x), sharding)


def resolve_devices(devices):
    """The devices a main run shards over: ``None`` → under ``jax.distributed`` (several
    processes) every device of every process; otherwise every local device of the default
    backend, except on CPU, where one device with particle groups on threads was faster than
    the cores as XLA host devices. A list of ``jax.Device`` as given (one
    platform)."""
    if devices is None:
        if jax.process_count() > 1:
            return jax.devices()
        local = jax.local_devices()
        return local[:1] if local[0].platform == "cpu" else local
    devices = list(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise TypeError("devices must be a non-empty list of jax.Device, e.g. jax.devices()[:2]")
    platforms = sorted({d.platform for d in devices})
    if len(platforms) > 1:
        raise ValueError(
            f"devices mix platforms {platforms}: one run shards over devices of one kind "
            "(e.g. jax.devices('gpu'))"
        )
    return devices
