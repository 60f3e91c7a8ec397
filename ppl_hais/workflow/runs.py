"""One rung's runs: the chains over one schedule, topped up with particles where their weights
pass every check but their SE is above :func:`precise_se`.

A rung of the convergence ladder (:mod:`ppl_hais.checks.ladder`) anneals the chains once. Where
their
weights pass every check while the pooled standard error exceeds :func:`precise_se`, the estimate
is limited by particles, not by temperatures: more temperatures shrink a bias, not the particles'
noise. :func:`topped_up` then anneals as many more particles over the same schedule, with fresh
keys, as the SE predicts (its square falls as 1/particles), in whole units that compile nothing
new (:func:`~ppl_hais.annealing.execution.top_up_unit`: groups of the pilot's size on CPU)
within the gradient budget (less a bias check's predicted cost) and ``MAX_PARTICLES`` times the
run's, and pools each chain's runs into one result of all their particles
(:meth:`~ppl_hais.AISResult.pooled`). Whole runs overshoot: an SE of 0.026 would take a second
run of all the particles (twice the cost, SE 0.018) where a quarter more (a unit of 128 on two
cores) reach 0.023.

A rung whose bias check is due (``final``, asked at an SE of 0.05) may yet move on, and would
drop the particles bought for it: it is topped up to ``MOST_SE``, 0.05 nat, what its check
needs. One that no check questions ends the ladder once its weights pass, and its SE is all its
error bar holds: it is topped up to :func:`precise_se`, ``PRECISE_SE`` at the first rung's 250
temperatures, a quarter of the 0.1 nat the trust suite calls right, so that ±2 SE stays inside
it with room for a shortfall beside the noise. At 0.05, an honest SE of 0.047 put 2 SE + 0.02 at
2.4 SEs, beyond which one run in 65 falls by chance (the centered weak-data funnel of
docs/trust_suite.md, 1 of its 40 runs); at 0.025 one in 200 does. The target grows as
√temperatures to ``MOST_SE`` from 1000 on: a particle there costs 4× as many gradients, and at
this rate a top-up from a given SE costs the same on every rung.

The top-up comes before the rung's bias check, whose noise then shrinks with it: a check that
the forward estimate's noise left inconclusive at 250 temperatures (``ladder.settled``) would
send the ladder to 4× the temperatures. Pooled weights that now fail a check send the ladder
on, as a failed rung does. On the trust suite's 36-D Student-t experts through NumPyro (512
particles, SEs 0.06–0.12 at 250 temperatures) a call in 20 had ended 0.1 nat or more off,
within its SE; topped up, none did, at fewer gradients (docs/trust_suite.md). A floor met by
temperatures instead had cost the centered funnel 3× its gradients for an SE that particles
bound.

Example
-------
>>> from ppl_hais.workflow.runs import more_particles
>>> more_particles(0.02, 512, unit=128, cost=1, room=1e9)  # precise already
0
>>> more_particles(0.026, 512, unit=128, cost=1, room=1e9)  # 512 × (0.026² / 0.025² − 1) = 42
128
>>> more_particles(0.04, 512, unit=128, cost=1, room=1e9)  # 799 → whole units of 128
896
>>> more_particles(0.04, 512, unit=128, cost=1, room=300)  # what the budget allows
256
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import partial

import numpy as np

from ..annealing.execution import top_up_unit
from ..checks import diagnostics
from ..checks.ladder import FIRST_NUM_STEPS, Rung, cleared_se
from ..checks.record import Check, names
from ..estimate.annealers import anneal
from ..mcmc.fast_random import host_fold_in, host_split
from ..results.result import AISResult
from ..stats.estimators import disagreement
from .budget import main_gradients

__all__ = ["MAX_PARTICLES", "MOST_SE", "PRECISE_SE", "chains", "cleared",
           "largest", "more_particles", "pooled_checks", "precise_se", "record",
           "topped_up"]  # fmt: skip

PRECISE_SE = 0.025  # nats: a first rung that no check questions is topped up to this SE
MOST_SE = 0.05  # nats: a rung whose check is due, or a later rung, at most to this (precise_se)
MAX_PARTICLES = 8  # a topped-up rung's particles at most this many times its run's (SE ÷ √8)
_KEYS = 7919  # the top-ups' keys: the rung's key folded with this + i (rungs fold 1, 2, …)


def chains(key, target, kernel, pilot, options, num_chains, num_particles, num_steps,
           progress_bar) -> list[AISResult]:  # fmt: skip
    """One run of a rung: the chains over ``num_steps`` temperatures, the shared pilot, the
    call's :class:`~ppl_hais.estimate.annealers.AnnealOptions`."""
    with warnings.catch_warnings():  # one pooled warning instead of one per chain
        warnings.simplefilter("ignore", diagnostics.EvidenceWarning)
        run = partial(anneal, target=target, kernel=kernel, options=options, pilot=pilot,
                      num_particles=num_particles, num_steps=num_steps,
                      progress_bar=progress_bar)  # fmt: skip
        if options.run.bidirectional or options.run.reverse_from is not None:
            return [run(k) for k in host_split(key, num_chains)]
        # the chains as one population: one dispatch, particle groups shared
        out = run(key, num_chains=num_chains)
        return out if num_chains > 1 else [out]


def pooled_checks(results: Sequence[AISResult]) -> tuple[Check, ...]:
    """Every chain's failed checks (labelled by chain when there are several) and whether the
    chains disagree beyond their own error bars."""
    if len(results) == 1:
        return tuple(results[0].checks)
    checks = [check.in_chain(c) for c, r in enumerate(results) for check in r.checks]
    se = np.array([r.log_z_se for r in results])
    if np.all(np.isfinite(se)):
        ratio = disagreement([r.log_z for r in results], se)
        checks.extend(diagnostics.evidence_checks(disagreement=ratio))
    return tuple(checks)


def precise_se(num_steps: int) -> float:
    """The SE a passing rung of ``num_steps`` temperatures is topped up to: ``PRECISE_SE`` at
    the first rung's 250, × √(num_steps / 250) above it, at most ``MOST_SE`` (module docstring).

    >>> precise_se(250), precise_se(1000), precise_se(16000)
    (0.025, 0.05, 0.05)
    """
    return min(MOST_SE, PRECISE_SE * math.sqrt(max(num_steps, 1) / FIRST_NUM_STEPS))


def more_particles(se: float, num: int, *, unit: int, cost: float, room: float,
                   most: float = float("inf"), target: float = PRECISE_SE) -> int:  # fmt: skip
    """How many more particles (a chain) bring the SE ``se`` of ``num`` pooled particles to
    ``target`` (its square falls as 1/particles), in whole ``unit``s: at most ``most`` and
    what ``room`` gradients allow at ``cost`` a particle."""
    if not (np.isfinite(se) and se > target):
        return 0
    wanted = math.ceil(num * ((se / target) ** 2 - 1) / unit - 1e-9)
    allowed = min(most, room // max(cost, 1e-300)) // unit
    return int(max(min(wanted, allowed), 0) * unit)


def topped_up(key, results, run, *, room, unit=None,
              final=lambda pooled: True) -> tuple[list[AISResult], int]:  # fmt: skip
    """The rung's chains topped up with runs of ``run(key, num_particles=k)`` (every chain,
    ``k`` a multiple of ``unit``, by default :func:`~ppl_hais.annealing.execution.top_up_unit`)
    while their weights pass every check and their pooled SE exceeds ``MOST_SE``, then, where
    ``final(pooled)`` says no bias check is due on them (the rung ends the ladder), while it
    exceeds :func:`precise_se` of their temperatures (module docstring); within ``room``
    gradients; each chain's runs pooled into one result. Returns the chains and the gradients
    the top-ups spent."""
    pooled, spent, done = list(results), 0, 1
    first, steps = results[0].num_particles, results[0].settings.num_steps
    if unit is None:
        unit = top_up_unit(first, len(results), results[0].settings.num_devices)
    cost = main_gradients(results) / first  # gradients per particle of every chain
    while not pooled_checks(pooled):
        _, var = diagnostics.pool([r.log_z for r in pooled], [r.log_z_se for r in pooled])
        num, se = pooled[0].num_particles, math.sqrt(var)
        target = precise_se(steps) if se <= MOST_SE and final(pooled) else MOST_SE
        more = more_particles(se, num, unit=unit, cost=cost, room=room - spent,
                              most=MAX_PARTICLES * first - num, target=target)  # fmt: skip
        if more < 1:
            break
        runs = run(host_fold_in(key, _KEYS + done), num_particles=more)
        spent += main_gradients(runs)
        pooled = [AISResult.pooled([p, r]) for p, r in zip(pooled, runs, strict=True)]
        done += 1
    return pooled, spent


def record(results, steps, log_z, var, checks, bias, spent, wall, local_steps) -> Rung:
    """The ladder's record of one rung's pooled chains, checks and bias check."""
    nan = float("nan")
    return Rung(
        steps, float(log_z), float(np.sqrt(var)), names(checks),
        nan if bias is None else bias.gap, int(spent), wall,
        largest(r.lag for r in results), outside=largest(r.outside_initial for r in results),
        bias_gap_se=nan if bias is None else bias.gap_se,
        excess=largest(r.excess for r in results), local_steps=local_steps,
        bridge=nan if bias is None else bias.log_z_bennett,
        bridge_se=nan if bias is None else bias.log_z_bennett_se,
    )  # fmt: skip


def cleared(trajectory, rung, results):
    """A rung whose failed checks the ladder shows to be false alarms: its SE from the
    trajectory, no checks (the cleared ones kept in ``Rung.cleared``)."""
    _, var_delta = diagnostics.pool(
        [r.log_z for r in results], [r.log_z_se_delta for r in results]
    )
    se = cleared_se(trajectory + [rung], float(np.sqrt(var_delta)))
    return rung._replace(log_z_se=se, failed=(), cleared=rung.failed), se**2, ()


def largest(values) -> float:
    """The largest of the chains' finite figures; NaN when none was measured."""
    finite = [v for v in values if np.isfinite(v)]
    return max(finite) if finite else float("nan")

