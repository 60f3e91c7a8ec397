"""Progress bars and Ctrl-C for long compiled loops, ticked at a pace measured in seconds.

Long loops hear from the host at a pace measured in seconds, not iterations
(:func:`paced_tick`): each tick times the loop since the previous one and says at which
iteration to tick next, about ``TICK_SECONDS`` later. A loaded machine makes iterations slower,
not the ticks rarer, so Ctrl-C stops a run within about a quarter of a second plus one
iteration. The anneal is called by the host in chunks of bins sized that way
(:func:`ppl_hais.annealing.program.drive`), so its program holds no callback and JAX's
persistent cache stores it; the MCMC loops call the host from inside (:func:`pace`, one host
callback per tick).

A compiled call cannot be cancelled from outside, but its ticks run on the host:
:func:`run_interruptibly` dispatches the compiled calls from worker threads, so the main
thread stays in Python and receives Ctrl-C at once; it then sets a stop flag, each running
loop raises :class:`Interrupted` from its next tick, and the KeyboardInterrupt reaches the user
with the process usable.

Example
-------
>>> from ppl_hais.runtime.progress import close_bar, open_bar
>>> run_id = open_bar(100, "demo")  # ticked from compiled code by tick(run_id, n)
>>> close_bar(run_id)
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, wait

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "open_bar", "close_bar", "tick", "pace", "paced_tick", "open_run", "shared_bar",
    "run_interruptibly", "Interrupted", "shown", "showing", "TICK_SECONDS",
]  # fmt: skip

TICK_SECONDS = 0.25  # the host hears from a paced loop about this often
GROWTH = 64  # a paced interval grows at most this much from one tick to the next

_BARS: dict[int, object] = {}
_CLOCKS: dict[int, list] = {}  # run id -> [time, position, interval] at its last tick
_RUN_IDS = itertools.count(1)
_STOP = threading.Event()


_SHOW: contextvars.ContextVar[bool] = contextvars.ContextVar("ppl_hais_progress", default=False)


@contextlib.contextmanager
def shown(flag: bool):
    """Within the block, the phases that do not take a ``progress_bar`` argument of their own
    (the pilots, the Laplace fit) show bars when ``flag`` is true: the evidence workflow passes
    its caller's ``progress_bar`` down this way."""
    token = _SHOW.set(bool(flag))
    try:
        yield
    finally:
        _SHOW.reset(token)


def showing() -> bool:
    """Whether the enclosing :func:`shown` block asked for progress bars."""
    return _SHOW.get()


class Interrupted(Exception):
    """Raised at a loop's tick (inside a compiled loop's callback, or between the anneal's
    chunks) to stop it after Ctrl-C."""


# exceptions our callbacks raise on purpose, which reach the user with their own message
QUIET_CALLBACK_ERRORS: list[type] = [Interrupted]


class _QuietInterrupt(logging.Filter):
    """JAX logs every failing callback with its traceback; a requested stop is not a failure,
    and an error the user gets anyway (a spent rejection budget) need not be printed twice."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, tuple(QUIET_CALLBACK_ERRORS))


logging.getLogger("jax._src.debugging").addFilter(_QuietInterrupt())


def run_interruptibly(calls, what="annealing", *, workers=None):
    """Run the zero-argument ``calls`` on worker threads and return their results in order.
    Ctrl-C stops every call at its next tick and raises KeyboardInterrupt here (its message
    names ``what`` was interrupted). At most ``workers`` run at once (default: all)."""
    pool = ThreadPoolExecutor(max(1, min(len(calls), workers or len(calls))))
    futures = [pool.submit(c) for c in calls]
    try:
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        _STOP.set()
        for f in futures:  # calls still waiting for a thread never start
            f.cancel()
        wait(futures)  # each compiled scan stops at the end of its current bin
        raise KeyboardInterrupt(
            f"{what} interrupted (every compiled loop stopped at its next progress tick)"
        ) from None
    finally:
        _STOP.clear()
        pool.shutdown(wait=False)


def tick(run_id, n):
    """Move bar ``run_id`` to position ``n`` (the largest, if a vmapped call passes several);
    raise :class:`Interrupted` when a stop was requested."""
    if _STOP.is_set():
        raise Interrupted("stop requested (Ctrl-C)")
    bar = _BARS.get(int(np.max(run_id)))
    if bar is not None:
        bar.update(int(np.max(n)) - bar.n)


def open_bar(total, desc):
    with warnings.catch_warnings():  # a notebook without ipywidgets: the text bar, no advice
        warnings.simplefilter("ignore", category=Warning)
        from tqdm.auto import tqdm

    run_id = next(_RUN_IDS)
    # left on screen when closed, as NumPyro's and PyMC's bars are: one line per phase.
    # TQDM_DISABLE=1 switches them off everywhere, as it does tqdm's text bars (its notebook
    # bars ignore the variable): an executed documentation page shows results only
    off = os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true")
    _BARS[run_id] = tqdm(total=total, desc=desc, leave=True, mininterval=0.3, disable=off)
    return run_id


def open_run(total=None, desc=None, *, bar=False, part_of=None):
    """A run id for a paced loop (:func:`pace`): with a progress bar of ``total`` steps when
    ``bar``, else a clock of its own (every concurrent loop needs its own id to be paced). Its
    clock starts now, at position 0. ``part_of``: a :func:`shared_bar`'s id, which this loop
    moves with the others sharing it (the bar shows their mean position)."""
    run_id = open_bar(total, desc) if bar else next(_RUN_IDS)
    if part_of is not None:
        _BARS[run_id] = _Part(_BARS[part_of])
    _CLOCKS[run_id] = [time.perf_counter(), 0, 0]
    return run_id


def shared_bar(total, desc, parts):
    """The id of a bar of ``total`` steps that ``parts`` loops move together
    (``open_run(..., part_of=id)``), showing their mean position; closed by :func:`close_bar`."""
    run_id = open_bar(total, desc)
    _BARS[run_id].parts, _BARS[run_id].moved = parts, 0
    return run_id


class _Part:
    """One loop's share of a :func:`shared_bar`: its own position ``n``; the bar shows the
    mean of its parts' positions (ticks arrive from several threads, hence the lock)."""

    _LOCK = threading.Lock()

    def __init__(self, bar):
        self.bar, self.n = bar, 0

    def update(self, steps):
        with self._LOCK:
            self.n += steps
            self.bar.moved += steps
            self.bar.update(self.bar.moved // self.bar.parts - self.bar.n)

    def close(self):
        pass


def close_bar(run_id, complete: bool = False):
    """Close bar ``run_id``; ``complete``: the loop ran to its end, so the bar shows its total
    (its last paced tick came up to a quarter of a second before the end)."""
    if run_id is None:
        return
    _CLOCKS.pop(int(run_id), None)
    bar = _BARS.pop(run_id, None)
    if bar is not None:
        if complete and getattr(bar, "total", None) is not None and bar.n < bar.total:
            bar.update(bar.total - bar.n)
        bar.close()


def paced_tick(run_id, position, shown):
    """The host side of :func:`pace`: tick bar ``run_id`` to ``shown``, raise
    :class:`Interrupted` after Ctrl-C, and return the position at which to call next: the rate
    measured since the previous call (or since :func:`open_run`) times ``TICK_SECONDS``. The
    first measurement may include compiling, which makes it short, never long; later ones grow
    at most ``GROWTH``-fold per call and shrink at once when the machine slows down. A loop
    whose position went back (a new loop on the same id) asks again at its next position."""
    # NumPy's max, not JAX's: io_callback passes jax.Arrays, whose own reductions dispatch a
    # compiled op each (0.085 against 0.006 ms a tick)
    run_id, position, shown = (np.asarray(a) for a in (run_id, position, shown))
    tick(run_id, shown)
    run_id, position = int(np.max(run_id)), int(np.max(position))
    now = time.perf_counter()
    clock = _CLOCKS.get(run_id)
    if clock is None or position <= clock[1]:  # no clock, or a new loop: start it again
        interval = 1
    else:
        then, before, last = clock
        rate = (position - before) / max(now - then, 1e-6)  # positions per second
        most = GROWTH * last if last else np.inf
        interval = int(min(max(rate * TICK_SECONDS, 1), most))
    _CLOCKS[run_id] = [now, position, interval]
    return np.int32(min(position + interval, np.iinfo(np.int32).max))


def pace(run_id, position, due, shown=None):
    """Inside a compiled loop: once ``position`` (an int32 counter that grows by at least one
    per call) reaches ``due``, call the host (:func:`paced_tick`: the bar shows ``shown``,
    default ``position``; Ctrl-C stops the loop there) and return the next ``due``; before
    that, ``due`` unchanged. Start ``due`` at 0. Each concurrent loop needs its own
    ``run_id`` (:func:`open_run`), closed by :func:`close_bar`; ``run_id`` None: no call
    (a program that holds no host callback)."""
    from jax.experimental import io_callback

    if run_id is None:
        return due

    shown = position if shown is None else shown
    return jax.lax.cond(
        position >= due,
        lambda: io_callback(
            paced_tick, jax.ShapeDtypeStruct((), np.int32), run_id, position, shown,
            ordered=False,
        ),  # fmt: skip
        lambda: jnp.asarray(due, np.int32),
    )
