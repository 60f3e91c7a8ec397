"""Progress bars driven from inside compiled scans (one host callback per tick)."""

from __future__ import annotations

import itertools

import jax
import numpy as np

__all__ = ["open_bar", "close_bar", "tick", "maybe_tick"]

_BARS: dict[int, object] = {}
_RUN_IDS = itertools.count(1)


def tick(run_id, n):
    """Move bar ``run_id`` to position ``n`` (the largest, if a vmapped call passes several)."""
    bar = _BARS.get(int(np.max(run_id)))
    if bar is not None:
        bar.update(int(np.max(n)) - bar.n)


def open_bar(total, desc):
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
