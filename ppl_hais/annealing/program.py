"""The compiled anneal and the host loop that runs it a chunk of bins at a time.

One program per target *structure* (``ppl_hais.runtime.structure``) and transition runs every
anneal of that target: pilots, main runs, the bias check's reverse anneal, any number of
temperatures. The host calls it until the last bin (:func:`drive`), ticking the progress bar
and hearing Ctrl-C between calls, so the program holds no host callback and JAX's persistent
cache stores it on every supported version.

Example
-------
>>> from ppl_hais.annealing import program
>>> program.compiled.cache_info().maxsize
32
"""

from __future__ import annotations

import time
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from ..runtime import progress
from ..runtime.structure import merge
from . import scan

__all__ = ["compiled", "drive", "empty_loop", "vectorized"]


@lru_cache(maxsize=32)
def compiled(structure, kernel, *, num_particles):
    """:func:`anneal_program` jitted: one anneal of ``num_particles`` particles per call."""
    return jax.jit(anneal_program(structure, kernel, num_particles=num_particles))


@lru_cache(maxsize=32)
def vectorized(structure, kernel, *, num_particles):
    """:func:`anneal_program` vmapped over a leading axis of every argument and jitted: several
    anneals of one structure (data sets of one design, particle groups) in one call
    (:mod:`~ppl_hais.annealing.batching`). A key is passed as its key data (uint32) and
    wrapped inside, so that the host can stack the arguments as arrays."""
    run = anneal_program(structure, kernel, num_particles=num_particles)

    def one(arrays, key_data, *rest):
        return run(arrays, jax.random.wrap_key_data(key_data), *rest)

    return jax.jit(jax.vmap(one))


def anneal_program(structure, kernel, *, num_particles):
    """The annealing scan of one target *structure* (``ppl_hais.runtime.structure``), jitted
    once per structure by :func:`compiled` (or :func:`vectorized`): the target's arrays (a
    model's data, a Gaussian's mean) are arguments, and so are the number of temperatures (the
    schedule comes :func:`~ppl_hais.annealing.execution.padded`), the pilot's switches
    (``adapt_target``: −1 off; ``adapt_scale``; ``record``) and the count of particles that
    are not padding (``num_valid``): a new budget, a pilot, a main run's group and the bias
    check's reverse anneal of ``num_particles`` particles all run one program
    (:data:`~ppl_hais.annealing.execution.GROUP_PARTICLES`).

    The program runs the bins from ``loop.bin`` to ``until``
    (:func:`~ppl_hais.annealing.scan.advance`), starting the run where ``loop.bin`` is 0, and
    returns the loop and its output:
    the host calls it again until the last bin (:func:`drive`), ticking the progress bar and
    hearing Ctrl-C in between, so the program holds no host callback and JAX's persistent
    cache stores it on every supported version (JAX 0.10 keys a callback by its address, new
    in every process)."""

    def run(
        arrays, rng_key, betas, num_steps, log_step, positions, offset, scale_ref,
        adapt_target, adapt_scale, record, num_valid, loop, until,
    ):  # fmt: skip
        target = merge(structure, arrays)
        kw = dict(num_particles=num_particles, particle_offset=offset)
        loop = jax.lax.cond(
            loop.bin == 0, lambda: scan.start(rng_key, target, kernel, betas, positions=positions,
                                              **kw),
            lambda: loop)  # fmt: skip
        loop = scan.advance(rng_key, target, kernel, betas, log_step, loop, until,
                            num_steps=num_steps, adapt_target=adapt_target, scale_ref=scale_ref,
                            adapt_scale=adapt_scale, num_valid=num_valid, record=record,
                            **kw)  # fmt: skip
        return loop, scan.output(loop, scan.valid_particles(num_particles, offset, num_valid)[0])

    return run


@lru_cache(maxsize=32)
def _loop_shapes(structure, kernel, num_particles, capacity, dim, avals):
    """The shapes of :func:`compiled`'s loop, traced (not compiled) once per structure."""

    def first(arrays, rng_key, betas, positions):
        return scan.start(rng_key, merge(structure, arrays), kernel, betas,
                          num_particles=num_particles, positions=positions)  # fmt: skip

    dtype = jnp.result_type(float)
    return jax.eval_shape(
        first, [jax.ShapeDtypeStruct(shape, t) for shape, t in avals],
        jax.eval_shape(lambda: jax.random.key(0)), jax.ShapeDtypeStruct((capacity,), dtype),
        jax.ShapeDtypeStruct((num_particles, dim), dtype))  # fmt: skip


def empty_loop(structure, arrays, kernel, num_particles, capacity, dim):
    """A loop of zeros in :func:`compiled`'s shapes (``bin`` 0: the program starts the run)."""
    avals = tuple((tuple(np.shape(a)), np.dtype(a.dtype)) for a in arrays)
    return _zeros(structure, kernel, num_particles, capacity, int(dim), avals)


@lru_cache(maxsize=32)
def _zeros(structure, kernel, num_particles, capacity, dim, avals):
    """:func:`empty_loop`'s arrays, put on the device once per shape: the program does not
    donate its loop, so every run may start from the same zeros (putting its ~30 arrays took
    1 ms of host time a run)."""
    shapes = _loop_shapes(structure, kernel, num_particles, capacity, dim, avals)
    # on the device, as the outputs that later calls pass back: one dispatch signature
    return jax.tree.map(lambda s: jax.device_put(np.zeros(s.shape, s.dtype)), shapes)


_RATES: dict = {}  # a program's bins per second in its last run, by drive's ``pace`` key


def drive(call, loop, num_steps, run_id, pace=None):
    """Call ``call(loop, until)`` (:func:`compiled`'s program, its other arguments bound) from
    bin 0 to the last, a chunk of bins at a time, and return its last output. Between calls the
    host ticks the progress bar and hears Ctrl-C (:func:`~ppl_hais.runtime.progress.paced_tick`,
    which sizes the next chunk to about ``TICK_SECONDS``; under ``jax.distributed`` one chunk,
    as every process must make the same calls). The first chunk is one bin, which measures the
    rate, unless the program's last run (the same hashable ``pace``) measured it: then it is
    ``TICK_SECONDS`` at that rate, and a run shorter than that makes one call, not two (a
    dispatch of ~0.3 ms per particle group, the groups queuing for the host)."""
    last = int(scan.num_bins(num_steps))
    rate = _RATES.get(pace)
    until = (last if jax.process_count() > 1 else 1 if rate is None
             else int(np.clip(rate * progress.TICK_SECONDS, 1, last)))  # fmt: skip
    start = time.perf_counter()
    while True:
        loop, out = call(loop, np.int32(min(until, last)))
        jax.block_until_ready(loop.bin)
        done = min(min(until, last) * scan.BIN_STEPS, num_steps)
        due = int(progress.paced_tick(run_id, done, done))
        if until >= last:
            if pace is not None:
                if len(_RATES) > 64:
                    _RATES.clear()
                _RATES[pace] = last / max(time.perf_counter() - start, 1e-6)
            return out
        until = max(-(-due // scan.BIN_STEPS), until + 1)
