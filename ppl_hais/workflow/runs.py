"""One rung's runs: the chains over one schedule, topped up with particles where their weights
pass every check but their SE is above ``PRECISE_SE``.

A rung of the convergence ladder (:mod:`ppl_hais.ladder`) anneals the chains once. Where their
weights pass every check while the pooled standard error exceeds ``PRECISE_SE`` (half the
suite's "right", 0.1 nat), the estimate is limited by particles, not by temperatures: more
temperatures shrink a bias, not the particles' noise. :func:`topped_up` then runs the same
schedule again with fresh keys, as many times as the SE predicts (its square falls as 1/runs)
within the gradient budget (less a bias check's predicted cost) and ``MAX_RUNS``, and pools
each chain's runs into one result of all their particles (:meth:`~ppl_hais.AISResult.pooled`);
nothing new compiles. The top-up comes before the rung's bias check, whose noise then shrinks
with it: a check that the forward estimate's noise left inconclusive at 250 temperatures
(``ladder.settled``) would send the ladder to 4× the temperatures. Pooled weights that now
fail a check send the ladder on, as a failed rung does. On the trust suite's 36-D
Student-t experts through NumPyro (512 particles, SEs 0.06–0.12 at 250 temperatures) a call
in 20 had ended 0.1 nat or more off, within its SE; topped up, none did, at fewer gradients
(docs/trust_suite.md). A floor met by temperatures instead had cost the centered
funnel 3× its gradients for an SE that particles bound.

Example
-------
>>> from ppl_hais.workflow.runs import repeats_for
>>> repeats_for(0.03, cost=1, room=100), repeats_for(0.08, cost=1, room=100)  # 0.08²/0.05² → 3
(0, 2)
>>> repeats_for(0.2, cost=1, room=100), repeats_for(0.08, cost=1, room=1)  # MAX_RUNS, budget
(7, 1)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import partial

import numpy as np

from ..checks import diagnostics
from ..checks.ladder import Rung, cleared_se
from ..estimate.annealers import anneal
from ..mcmc.fast_random import host_fold_in, host_split
from ..results.result import AISResult
from ..stats.estimators import disagreement
from .budget import main_gradients

__all__ = ["MAX_RUNS", "PRECISE_SE", "chains", "check_names", "cleared", "largest",
           "pooled_checks", "record", "repeats_for", "topped_up"]  # fmt: skip

PRECISE_SE = 0.05  # nats: a rung whose weights pass is topped up with particles to this SE
MAX_RUNS = 8  # runs of one rung at most (its particles at most 8×, its SE down by √8)
_KEYS = 7919  # the repeats' keys: the rung's key folded with this + i (rungs fold 1, 2, …)


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


def pooled_checks(results: Sequence[AISResult]) -> tuple[str, ...]:
    """Every chain's failed checks (labelled by chain when there are several) and whether the
    chains disagree beyond their own error bars."""
    if len(results) == 1:
        return tuple(results[0].checks)
    checks = [f"chain {c}: {msg}" for c, r in enumerate(results) for msg in r.checks]
    se = np.array([r.log_z_se for r in results])
    if np.all(np.isfinite(se)):
        ratio = disagreement([r.log_z for r in results], se)
        checks.extend(diagnostics.evidence_checks(disagreement=ratio))
    return tuple(checks)


def repeats_for(se: float, *, runs: int = 1, cost: int, room: float) -> int:
    """How many more runs bring the SE ``se`` of ``runs`` pooled runs to ``PRECISE_SE`` (its
    square falls as 1/runs): at most ``MAX_RUNS`` in all, and what ``room`` gradients allow at
    ``cost`` a run."""
    if not (np.isfinite(se) and se > PRECISE_SE):
        return 0
    wanted = math.ceil(runs * (se / PRECISE_SE) ** 2 - 1e-9) - runs
    return int(max(min(wanted, MAX_RUNS - runs, room // max(cost, 1)), 0))


def topped_up(key, results, run, *, room) -> tuple[list[AISResult], int]:
    """The rung's chains topped up with runs of ``run(key)`` (one run of every chain) while
    their weights pass every check and their pooled SE exceeds ``PRECISE_SE`` (module
    docstring), within ``room`` gradients; each chain's runs pooled into one result. Returns
    the chains and the gradients the repeats spent."""
    pooled, spent, done, cost = list(results), 0, 1, main_gradients(results)
    while not pooled_checks(pooled):
        _, var = diagnostics.pool([r.log_z for r in pooled], [r.log_z_se for r in pooled])
        more = repeats_for(math.sqrt(var), runs=done, cost=cost, room=room - spent)
        if more < 1:
            break
        runs = [run(host_fold_in(key, _KEYS + done + i)) for i in range(more)]
        spent += sum(main_gradients(r) for r in runs)
        pooled = [AISResult.pooled([p, *rs]) for p, *rs in zip(pooled, *runs, strict=True)]
        done += more
    return pooled, spent


def record(results, steps, log_z, var, checks, bias, spent, wall, local_steps) -> Rung:
    """The ladder's record of one rung's pooled chains, checks and bias check."""
    nan = float("nan")
    return Rung(
        steps, float(log_z), float(np.sqrt(var)), check_names(checks),
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
    return rung._replace(log_z_se=se, checks=(), cleared=rung.checks), se**2, ()


def largest(values) -> float:
    """The largest of the chains' finite figures; NaN when none was measured."""
    finite = [v for v in values if np.isfinite(v)]
    return max(finite) if finite else float("nan")


def check_names(checks) -> tuple[str, ...]:
    """The checks' names ("pareto_k", "lag", ...), once each, chain labels dropped."""
    parts = [c.split(": ") for c in checks]
    names = [p[1] if p[0].startswith("chain ") and len(p) > 1 else p[0] for p in parts]
    return tuple(dict.fromkeys(names))
