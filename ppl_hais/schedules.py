"""Annealing schedules: arrays 0 = β_0 < β_1 < … < β_N = 1 (N = ``num_steps``)."""

from __future__ import annotations

import numpy as np

__all__ = ["linear_schedule", "sigmoid_schedule", "geometric_schedule", "make_schedule"]


def linear_schedule(num_steps: int) -> np.ndarray:
    """β_n = n / N, as in seed 000 §2.2."""
    return np.linspace(0.0, 1.0, num_steps + 1)


def sigmoid_schedule(num_steps: int, radius: float = 4.0) -> np.ndarray:
    """β_n = (σ(t_n) − σ(−r)) / (σ(r) − σ(−r)) with t_n evenly spaced on [−r, r].

    Dense at both ends, the common choice of Grosse et al. (2015) for AIS on Bayesian models.
    """
    t = np.linspace(-radius, radius, num_steps + 1)
    s = 1.0 / (1.0 + np.exp(-t))
    return (s - s[0]) / (s[-1] - s[0])


def geometric_schedule(num_steps: int, start: float = 1e-4) -> np.ndarray:
    """β_0 = 0, then β_1 … β_N evenly spaced in log from ``start`` to 1.

    Suits posteriors much narrower than the prior: the log likelihood changes fastest at
    small β.
    """
    if not 0 < start < 1:
        raise ValueError("geometric_schedule needs 0 < start < 1")
    return np.concatenate([[0.0], np.geomspace(start, 1.0, num_steps)])


_NAMED = {"linear": linear_schedule, "sigmoid": sigmoid_schedule, "geometric": geometric_schedule}


def make_schedule(schedule, num_steps: int | None) -> np.ndarray:
    """An array of betas from a name (with ``num_steps``) or a user-given array (checked)."""
    if isinstance(schedule, str):
        if schedule not in _NAMED:
            raise ValueError(f"unknown schedule {schedule!r}; use one of {sorted(_NAMED)}")
        if num_steps is None or int(num_steps) < 1:
            raise ValueError("num_steps must be a positive integer")
        betas = _NAMED[schedule](int(num_steps))
    else:
        betas = np.asarray(schedule, dtype=float)
        if num_steps is not None and betas.size != int(num_steps) + 1:
            raise ValueError(
                f"a schedule array has num_steps + 1 entries; got {betas.size} for "
                f"num_steps={num_steps}"
            )
    if betas.ndim != 1 or betas.size < 2:
        raise ValueError("a schedule is a 1-D array of at least two betas")
    if betas[0] != 0.0 or betas[-1] != 1.0:
        raise ValueError("a schedule must start at beta=0 and end at beta=1")
    if np.any(np.diff(betas) < 0):
        raise ValueError("a schedule must be non-decreasing")
    return betas
