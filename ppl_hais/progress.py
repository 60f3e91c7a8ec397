"""Progress bars driven from inside compiled scans (one host callback per tick), and the stop
request that Ctrl-C raises through the same callback.

A compiled scan cannot be cancelled from outside, but its per-bin callback runs on the host:
:func:`run_interruptibly` dispatches the compiled calls from worker threads, so the main
thread stays in Python and receives Ctrl-C at once; it then sets a stop flag, each running
scan raises :class:`Interrupted` from its next tick (the end of a bin), and the
KeyboardInterrupt reaches the user with the process usable.

Example
-------
>>> from ppl_hais.progress import close_bar, open_bar
>>> run_id = open_bar(100, "demo")  # ticked from compiled code by tick(run_id, n)
>>> close_bar(run_id)
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor, wait

import jax
import numpy as np

__all__ = [
    "open_bar", "close_bar", "tick", "maybe_tick", "run_interruptibly", "Interrupted", "shown",
    "showing",
]  # fmt: skip

_BARS: dict[int, object] = {}
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
    """Raised inside a compiled scan's callback to stop it after Ctrl-C."""


# exceptions our callbacks raise on purpose, which reach the user with their own message
QUIET_CALLBACK_ERRORS: list[type] = [Interrupted]


class _QuietInterrupt(logging.Filter):
    """JAX logs every failing callback with its traceback; a requested stop is not a failure,
    and an error the user gets anyway (a spent rejection budget) need not be printed twice."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, tuple(QUIET_CALLBACK_ERRORS))


logging.getLogger("jax._src.debugging").addFilter(_QuietInterrupt())


def run_interruptibly(calls, what="annealing"):
    """Run the zero-argument ``calls`` on worker threads and return their results in order.
    Ctrl-C stops every call at its next tick and raises KeyboardInterrupt here (its message
    names ``what`` was interrupted)."""
    pool = ThreadPoolExecutor(max(1, len(calls)))
    futures = [pool.submit(c) for c in calls]
    try:
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        _STOP.set()
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
    _BARS[run_id] = tqdm(total=total, desc=desc, leave=False, mininterval=0.3)
    return run_id


def close_bar(run_id):
    bar = _BARS.pop(run_id, None)
    if bar is not None:
        bar.close()


def maybe_tick(run_id, i, every):
    """Inside a scan: tick at iterations that are multiples of ``every`` (``i`` unbatched)."""
    jax.lax.cond(
        i % every == 0,
        lambda: jax.debug.callback(tick, run_id, i, ordered=False),
        lambda: None,
    )
