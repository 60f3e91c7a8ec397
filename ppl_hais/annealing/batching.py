"""Anneals of several estimates run side by side: one vmapped call over many anneals' groups.

Many estimates of one design (every data set of a calibration, :mod:`ppl_hais.workflow.calibration`)
run the same compiled anneal over different arrays. A :class:`Batch` runs them together: each
estimate runs in a worker thread that joins the batch (``with batch.member():``); inside, every
anneal it starts (:func:`ppl_hais.annealing.execution.run`: its pilots, main runs, reverse
anneals) hands its particle groups to the batch and waits. When every member still running
waits, the batch runs all the waiting groups of one program and schedule length as one call of
:func:`~ppl_hais.annealing.program.vectorized` (their arguments stacked on a leading axis), a
few such calls at once on CPU threads, and hands each member its slices. A round therefore
holds each running member's next anneal, whatever the threads' timing: which anneals share a
call is fixed by the members' own sequences of anneals.

Each group draws its own random numbers from its own key, as when run alone, so batching
changes an estimate by floating-point rounding at most. A member's host work (the Laplace fit,
the checks) runs in its own thread meanwhile; the other members wait for it at the next round.

Example
-------
>>> from ppl_hais.annealing.batching import Batch, current
>>> batch = Batch(members=2)
>>> current() is None
True
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np

from ..runtime.precision import in_thread
from .program import compiled, vectorized

__all__ = ["Batch", "current", "widths"]

_BATCH: contextvars.ContextVar[Batch | None] = contextvars.ContextVar("ppl_hais_batch",
                                                                     default=None)  # fmt: skip

WIDEST = 16  # anneal groups in one vmapped call at most (16 groups of 64 particles: 1024)


def current() -> Batch | None:
    """The batch this thread's anneals join (None: they run on their own)."""
    return _BATCH.get()


def widths(count: int, threads: int) -> list[int]:
    """How ``count`` waiting groups are split into calls: a few widths (1, 4, ``WIDEST``; each a
    program compiled once) so that about ``threads`` calls run at once, the last call padded
    to its width. Returns the calls' widths, padding included."""
    width = WIDEST if count >= WIDEST * threads else 4 if count >= 2 * threads else 1
    return [width] * -(-count // width)


class Batch:
    """The rounds of anneals of ``members`` worker threads (see the module docstring);
    ``threads``: the calls that run at once (on CPU, two per core:
    :func:`~ppl_hais.annealing.execution.cpu_threads`).

    A member's Python runs only while the others wait (in a round, or for their turn): NumPyro
    keeps its handlers in one process-wide stack and Python its warning filters, so two
    models traced at once would mix. The members take turns as coroutines would; the rounds'
    compiled calls, which run no model code once compiled, run in parallel."""

    def __init__(self, members: int, threads: int = 1):
        self._live = int(members)
        self._threads = max(1, int(threads))
        self._waiting: list[_Request] = []
        self._turn = threading.Condition()
        self._compiled: set = set()  # (program, width) called once: the next run in parallel

    @contextlib.contextmanager
    def member(self):
        """This thread's work runs in turn with the other members' and its anneals join the
        rounds until the block ends (then a round that waited only on it runs)."""
        with self._turn:
            token = _BATCH.set(self)
            try:
                yield self
            finally:
                _BATCH.reset(token)
                self._live -= 1
                self._run_round_if_due()

    def run(self, program_key, groups, until):
        """The outputs of ``groups`` (each the argument tuple of
        :func:`~ppl_hais.annealing.program.compiled`'s program without ``until``:
        ``(arrays, key, betas, ..., num_valid, loop)``) of the program ``program_key``
        (``(structure, kernel, num_particles)``), run to bin ``until``, as host arrays; called
        by a member, it waits (the others take their turns) until its round has run."""
        request = _Request((program_key, int(until), _signature(groups[0])), list(groups))
        self._waiting.append(request)
        self._run_round_if_due()
        while not request.done:
            self._turn.wait()
        if request.error is not None:
            raise request.error
        return request.outputs

    def _run_round_if_due(self):
        """In a member's turn: run the waiting requests when every live member waits."""
        if not self._waiting or len(self._waiting) < self._live:
            return
        round_, self._waiting = self._waiting, []
        try:
            _run_round(round_, self._threads, self._compiled)
        except BaseException as err:  # every waiting member raises it
            for request in round_:
                request.error = request.error or err
        for request in round_:
            request.done = True
        self._turn.notify_all()


class _Request:
    def __init__(self, key, groups):
        self.key, self.groups = key, groups
        self.outputs, self.error, self.done = None, None, False


def _run_round(requests, threads, compiled_once):
    """Run the requests' groups, those of one program and length together, and give each
    request its outputs (host arrays, one per group). A program's first call of a width runs
    alone, here: it traces the model, which must not run in two threads at once."""
    by_key: dict = {}
    for request in requests:
        by_key.setdefault(request.key, []).append(request)
    calls = []
    for (program_key, until, signature), same in by_key.items():
        groups = [(r, i) for r in same for i in range(len(r.groups))]
        start = 0
        for width in widths(len(groups), threads):
            calls.append((program_key, until, width, groups[start : start + width], signature))
            start += width
    outs = [None] * len(calls)
    for c, (program_key, _, width, _, signature) in enumerate(calls):
        if (program_key, width, signature) not in compiled_once:
            compiled_once.add((program_key, width, signature))
            outs[c] = _call(*calls[c][:4])
    rest = [c for c in range(len(calls)) if outs[c] is None]
    with ThreadPoolExecutor(max(1, min(threads, len(rest)))) as pool:
        for c, out in zip(rest, pool.map(in_thread(lambda c: _call(*calls[c][:4])), rest),
                          strict=True):  # fmt: skip
            outs[c] = out
    for request in requests:
        request.outputs = [None] * len(request.groups)
    for (_, _, _, part, _), out in zip(calls, outs, strict=True):
        for j, (request, i) in enumerate(part):
            request.outputs[i] = jax.tree.map(lambda x, j=j: x[j], out)


def _signature(group) -> tuple:
    """The shapes and dtypes of a group's arguments: groups of one program stack only where
    these agree (two data sets' Laplace starts that kept 2 and 4 modes give mixture arrays of
    other shapes, which cannot stack; each shape also traces anew)."""
    leaves, treedef = jax.tree.flatten(group)
    return treedef, tuple((tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x))))
                          for x in leaves)  # fmt: skip


def _call(program_key, until, width, part):
    """One vmapped call over ``part``'s groups (padded to ``width`` by repeating the first),
    or the plain program for one group; host outputs with a leading axis."""
    structure, kernel, num_particles = program_key
    args = [request.groups[i] for request, i in part]
    if width == 1:
        fn = compiled(structure, kernel, num_particles=num_particles)
        _, out = fn(*args[0], np.int32(until))
        return jax.tree.map(lambda x: np.asarray(x)[None], jax.device_get(out))
    args += [args[0]] * (width - len(args))
    # on the host: stacking device arrays would compile a program per count and shape
    arrays, keys, *rest = (jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *a)
                           for a in zip(*[(g[0], jax.random.key_data(g[1]), *g[2:])
                                          for g in args], strict=True))  # fmt: skip
    fn = vectorized(structure, kernel, num_particles=num_particles)
    _, out = fn(arrays, keys, *rest, np.full(width, until, np.int32))
    return jax.device_get(out)
