"""The convergence ladder: run again with 4× the temperatures while a check fails, within a
gradient budget, and say in nats what is left when the budget runs out.

The evidence workflow's default (``num_steps=None``) anneals over 1000 temperatures first,
the cost of the fixed default before the ladder, so a model whose checks pass pays nothing
more. A rung whose checks fail (the weights' checks, then the bias check) is followed by one
with ``GROWTH`` times the temperatures and a fresh key, while the gradients spent so far and
the next rung's predicted cost fit ``max_gradients`` (default: ``DEFAULT_BUDGET`` times the
first rung's main run). Each rung is an independent run (a new number of temperatures
compiles nothing, ``ppl_hais.annealing.execution``); the last one is the estimate and every
rung is in the trajectory (:class:`Rung`, ``Evidence.trajectory``,
:func:`ppl_hais.plots.plot_convergence`).

When the last rung still fails, :func:`remaining_gap` adds a ``converged`` check that states
what the trajectory says about the remaining error in nats: how far the estimate moved over
the last 4× (a forward anneal's log Ẑ is biased low and its bias shrinks with N, so a rise
means the earlier rung was low by about that much) and the bias check's gap.

Example
-------
>>> from ppl_hais.ladder import Rung, next_num_steps, remaining_gap, shortfall
>>> next_num_steps(1000)
4000
>>> rungs = (Rung(1000, -10.30, 0.02, ("lag",), float("nan"), 600_000, 0.2),
...          Rung(4000, -10.10, 0.02, ("lag",), float("nan"), 2_700_000, 0.6))
>>> round(shortfall(rungs), 2)  # rose 0.2 ± 0.03 over the last 4×: at least 0.2 too low
0.2
>>> print(remaining_gap(rungs, max_gradients=3_000_000)[0][:63])
converged: after 2 rungs (1000, 4000 temperatures; 2.7 M of max
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "DEFAULT_BUDGET",
    "FIRST_NUM_STEPS",
    "GROWTH",
    "Rung",
    "default_max_gradients",
    "next_num_steps",
    "remaining_gap",
    "shortfall",
]

FIRST_NUM_STEPS = 1000  # the first rung: the fixed default's number of temperatures
GROWTH = 4  # each rung anneals over this many times the previous rung's temperatures
# max_gradients by default: this many times the first rung's main run (particles × chains ×
# 1000 × gradients per step); room for rungs of 1000, 4000 and 16000 temperatures with their
# pilots and bias checks (measured: docs/ladder.md)
DEFAULT_BUDGET = 32
MOVED = 3.0  # a move over the last rung beyond this many of its SEs is "still moving"


class Rung(NamedTuple):
    """One run of the ladder: its pooled estimate, failed checks and cumulative cost."""

    num_steps: int  # temperatures
    log_z: float
    log_z_se: float
    checks: tuple[str, ...]  # names of the failed checks ("pareto_k", "lag", "bias", ...)
    bias_gap: float  # the bias check's reverse estimate − log_z (NaN: not run)
    gradients: int  # model gradients spent by the call up to and including this rung
    wall_time: float  # seconds, cumulative


def next_num_steps(num_steps: int) -> int:
    """The next rung's number of temperatures."""
    return int(num_steps) * GROWTH


def default_max_gradients(num_particles: int, num_chains: int, gradients_per_step: float = 1):
    """The default gradient budget of a ladder: ``DEFAULT_BUDGET`` × the first rung's main run."""
    return int(DEFAULT_BUDGET * num_particles * num_chains * FIRST_NUM_STEPS * gradients_per_step)


def _se(x):
    return x if np.isfinite(x) else np.nan


def _moved(trajectory):
    """(move, noise) of the estimate over the last rung; NaNs for a single rung."""
    if len(trajectory) < 2:
        return float("nan"), float("nan")
    last, prev = trajectory[-1], trajectory[-2]
    return last.log_z - prev.log_z, float(np.hypot(_se(last.log_z_se), _se(prev.log_z_se)))


def shortfall(trajectory) -> float:
    """How many nats too low the last rung's estimate is at least, by what the trajectory
    shows: a rise over the last rung beyond ``MOVED`` × its noise, the bias check's positive
    gap; 0 when neither shows one (which does not prove there is none)."""
    last = trajectory[-1]
    move, noise = _moved(trajectory)
    low = [0.0]
    if np.isfinite(noise) and move > MOVED * noise:
        low.append(move)
    if np.isfinite(last.bias_gap) and last.bias_gap > 0:
        low.append(last.bias_gap)
    return float(max(low))


def remaining_gap(trajectory, *, max_gradients) -> tuple[str, ...]:
    """The ``converged`` check of a ladder whose last rung still failed a check: what the
    trajectory says about the remaining error, in nats (:func:`shortfall`). Empty when the
    last rung passed."""
    last = trajectory[-1]
    if not last.checks:
        return ()
    steps = ", ".join(str(r.num_steps) for r in trajectory)
    spent = (
        f"after {len(trajectory)} rung{'s' if len(trajectory) > 1 else ''} ({steps} "
        f"temperatures; {last.gradients / 1e6:.1f} M of max_gradients={max_gradients / 1e6:.1f} M "
        "gradients)"
    )
    parts = []
    move, noise = _moved(trajectory)
    if len(trajectory) > 1:
        prev = trajectory[-2]
        if np.isfinite(noise) and abs(move) > MOVED * noise:
            parts.append(
                f"the estimate moved {move:+.2f} nats from {prev.num_steps} to {last.num_steps} "
                f"temperatures (± {noise:.2f}): it is still converging"
            )
        elif np.isfinite(noise):
            parts.append(
                f"the estimate moved {move:+.2f} ± {noise:.2f} nats from {prev.num_steps} to "
                f"{last.num_steps} temperatures (within its noise)"
            )
        else:
            parts.append(
                f"the estimate moved {move:+.2f} nats from {prev.num_steps} to "
                f"{last.num_steps} temperatures (its noise is not estimable: SE = inf)"
            )
    if np.isfinite(last.bias_gap):
        parts.append(f"the bias check's reverse anneal is {last.bias_gap:+.2f} nats from it")
    low = shortfall(trajectory)
    if low > 0:
        verdict = (
            f"expect it to be at least {low:.2f} nats too low (heavy tails or a neck that "
            "neither path reaches make the shortfall larger)"
        )
    else:
        verdict = (
            "neither shows a shortfall, so the failed checks may be false alarms on a converged "
            "estimate — or mass that no rung and no MCMC draw reached (tails heavier than the "
            "start's), which no check can size"
        )
    said = "; ".join(parts) if parts else "no second rung fitted the budget"
    return (
        f"converged: {spent} the checks {', '.join(last.checks)} still fail; {said}: {verdict}. "
        "Remedy: a larger max_gradients, an initial distribution as wide and heavy-tailed as "
        "the posterior, more leapfrog steps (num_leapfrog); for a funnel, a non-centered "
        "parameterization.",
    )
