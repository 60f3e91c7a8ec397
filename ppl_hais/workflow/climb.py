"""The convergence ladder's loop as a state and a step: ``step(keys, plan, state) -> (state,
info)`` runs one rung (its chains, their top-up, the bias check where one is due, the false
alarms the trajectory clears) and says whether the ladder goes on, at which temperatures and
with which transition. The rules it applies live in :mod:`ppl_hais.checks.ladder`; the gradient
accounting in :mod:`.budget`; one rung's runs in :mod:`.runs`.

A call's random numbers come from its key by name (:class:`Keys`): the pilots, the chains of
each rung, each rung's bias check and the pilot of the per-particle step sizes, so no stream is
drawn twice and a resumed ladder (:mod:`.resume`) runs at its rung what a cold call runs there.

Example
-------
>>> import jax
>>> keys = Keys.of(jax.random.key(0))
>>> bool((jax.random.key_data(keys.rung(0)) == jax.random.key_data(keys.chains)).all())
True
>>> len({tuple(jax.random.key_data(k).tolist()) for k in
...      (keys.pilot, keys.rung(1), keys.bias(0), keys.bias(1), keys.local())})
5
"""

from __future__ import annotations

import functools
import time
from typing import Any, NamedTuple

import numpy as np

from ..checks import diagnostics
from ..checks import ladder as _ladder
from ..checks.record import Check, names
from ..estimate.annealers import AnnealOptions
from ..estimate.bias import BIAS_STREAM, BiasCheck, check_bias, needs_check
from ..mcmc.fast_random import host_fold_in, host_split
from ..starts.choose import with_local_steps
from ..starts.fits import bound_method
from .budget import SE_SLACK, Spent, StepsPlan, bias_reserve, main_gradients, next_fits
from .runs import chains, cleared, pooled_checks, record, topped_up

__all__ = ["Keys", "Plan", "RungInfo", "State", "step"]

RUNG_STRIDE = 1000  # rung i's bias check: fold_in(the call's key, BIAS_STREAM + RUNG_STRIDE·i)
LOCAL_STREAM = 51  # the per-particle step sizes' pilot: fold_in(the pilots' key, 51)


class Keys(NamedTuple):
    """A call's random streams, by name."""

    call: Any  # the user's key
    pilot: Any  # the start's pilots and fits
    chains: Any  # the rungs' chains (after the probes of ``target_se``, where they ran)

    @classmethod
    def of(cls, rng_key) -> Keys:
        pilot, chains_key = host_split(rng_key)
        return cls(rng_key, pilot, chains_key)

    def rung(self, index: int):
        """The chains of the ladder's rung ``index`` (0: the first)."""
        return self.chains if index == 0 else host_fold_in(self.chains, index)

    def bias(self, index: int):
        """The bias check of rung ``index``."""
        return host_fold_in(self.call, BIAS_STREAM + RUNG_STRIDE * index)

    def local(self):
        """The pilot of the per-particle step sizes the ladder may switch to."""
        return host_fold_in(self.pilot, LOCAL_STREAM)


class Plan(NamedTuple):
    """What one call's ladder reads and never changes."""

    model: Any  # the ModelDensity
    target: Any  # the AnnealingTarget of the chosen start
    ladder: bool  # climb (num_steps=None) or one run of the given temperatures
    checking: bool  # the bias check may run (not with a reverse run of the call's own)
    own_reverse: bool  # the call runs a reverse anneal of its own (bidirectional)
    bias_check: Any  # "auto", True or False, as the call gave it
    max_gradients: float | None
    num_chains: int
    num_particles: int
    surveyed: int  # the temperatures the pilots surveyed
    progress_bar: bool
    start: float  # time.perf_counter() at the call's start
    steps_plan: StepsPlan | None = None  # target_se=: the probes' plan
    target_se: float | None = None


class State(NamedTuple):
    """Where the ladder stands: the rungs run, the next one's temperatures, the gradients spent
    and the transition the next rung runs."""

    trajectory: tuple  # ppl_hais.checks.ladder.Rung, oldest first
    num_steps: int  # the next rung's temperatures
    spent: int  # every gradient the call spent so far
    options: AnnealOptions
    kernel: Any  # TransitionKernel
    pilot: Any  # Pilot: the frozen tuning
    local: tuple | None = None  # (kernel options, kernel, pilot) once switched to local steps
    last_check: Spent | None = None  # the cost of the last bias check (the next one's reserve)
    switchable: bool = False  # may still switch to per-particle step sizes
    done: bool = False


class RungInfo(NamedTuple):
    """What a rung gave beyond its record: its chains and pooled figures."""

    results: list  # AISResult per chain
    log_z: float
    var: float  # of log_z
    checks: tuple  # the failed checks (ppl_hais.checks.record.Check)
    bias: BiasCheck | None


def step(keys: Keys, plan: Plan, state: State) -> tuple[State, RungInfo]:
    """Run the next rung: its chains, topped up with particles on the ladder, the bias check
    where due, false alarms the trajectory clears; then end the ladder, or give the next rung's
    temperatures (and transition, after a funnel's signature)."""
    index, steps = len(state.trajectory), state.num_steps
    spent, last_check = state.spent, state.last_check
    key = keys.rung(index)
    run = functools.partial(chains, target=plan.target, kernel=state.kernel, pilot=state.pilot,
        options=state.options, num_chains=plan.num_chains, num_particles=plan.num_particles,
        num_steps=steps, progress_bar=plan.progress_bar)  # fmt: skip
    results = run(key)
    spent += main_gradients(results)
    gps = results[0].settings.gradients_per_particle / max(steps, 1)
    if plan.ladder and not plan.own_reverse:  # weights that pass, an SE that particles bound
        reserve = bias_reserve(steps, gps, last_check) if plan.checking else 0
        final = lambda rs: not plan.checking or not _checks_due(plan, rs, index)  # noqa: E731
        results, used = topped_up(key, results, run, room=plan.max_gradients - spent - reserve,
                                  final=final)  # fmt: skip
        spent += used
    log_z, var, checks = _pooled(results, plan.steps_plan, plan.target_se, steps)
    per_step = plan.num_particles * plan.num_chains * gps
    fits = dict(ladder=plan.ladder, max_gradients=plan.max_gradients, checking=plan.checking,
                steps=steps, per_step=per_step, gps=gps)  # fmt: skip
    bias, last_rung = None, not next_fits(spent, last_check, **fits)
    if plan.checking and _bias_due(checks, last_rung, plan.ladder and index > 0):
        if _checks_due(plan, results, index):
            bias = check_bias(keys.bias(index), plan.target, results, state.pilot, log_z=log_z,
                log_z_se=float(np.sqrt(var)), kernel=state.options.kernel.kernel(),
                step_size=state.options.pilot.step_size, progress_bar=plan.progress_bar,
                log_density=bound_method(plan.model, "log_joint"),
                bound=_ladder.settling_bound(steps) if plan.ladder else None)  # fmt: skip
            spent, last_check = spent + bias.gradients, Spent(bias.gradients, bias.num_draws,
                                                               steps)  # fmt: skip
            checks += diagnostics.evidence_checks(bias_gap=bias.gap, bias_gap_se=bias.gap_se)
    rung = record(results, steps, log_z, var, checks, bias, spent,
                  time.perf_counter() - plan.start, state.options.kernel.local_steps)  # fmt: skip
    below = list(state.trajectory)
    if _ladder.clears(below + [rung], alone=not plan.ladder):  # false alarms
        rung, var, checks = cleared(below, rung, results)
    trajectory = (*state.trajectory, rung)
    info = RungInfo(results, log_z, var, checks, bias)
    state = state._replace(trajectory=trajectory, spent=spent, last_check=last_check)
    if _ladder.ends(list(trajectory)) or not next_fits(spent, last_check, **fits):
        return state._replace(done=True), info
    if state.switchable and _ladder.needs_local_steps(list(trajectory)):  # a funnel's neck
        switched, kernel, pilot, used = with_local_steps(keys.local(), plan.model, plan.target,
            state.options.kernel, state.options.pilot, plan.surveyed)  # fmt: skip
        state = state._replace(options=state.options._replace(kernel=switched), kernel=kernel,
            pilot=pilot, local=(switched, kernel, pilot), spent=spent + used,
            switchable=False)  # fmt: skip
        if not next_fits(state.spent, last_check, **fits):
            return state._replace(done=True), info
    return state._replace(num_steps=_ladder.next_num_steps(steps)), info


def _checks_due(plan: Plan, results, index: int) -> bool:
    """Whether the bias check runs on rung ``index``'s chains when due: always with
    ``bias_check=True`` and on a ladder's later rungs (a rung runs there only because the one
    before it was in doubt, and weights that pass then may have missed the tail the earlier
    rung saw: on a twisted 10-D banana a rung after one that failed k̂ passed every weight check
    0.22 nat low), else where they give a reason to
    (:func:`~ppl_hais.estimate.bias.needs_check`)."""
    return plan.bias_check is True or (plan.ladder and index > 0) or needs_check(results)


def _bias_due(checks, last_rung: bool, later_rung: bool) -> bool:
    """Whether a rung gets the bias check: one whose checks pass, one after which the budget
    allows no other, and a later rung that fails only the weights' checks (with the previous
    rung it may show them to be false alarms, :func:`ppl_hais.checks.ladder.clears`)."""
    weight_only = bool(checks) and set(names(checks)) <= set(_ladder.WEIGHT_CHECKS)
    return not checks or last_rung or (later_rung and weight_only)


def _pooled(results, steps_plan, target_se, steps):
    """A rung's chains pooled: log Ẑ, its variance and the failed checks (with ``target_se``'s
    when the probes' plan chose the temperatures and the SE missed it)."""
    log_z, var = diagnostics.pool([r.log_z for r in results], [r.log_z_se for r in results])
    checks = pooled_checks(results)
    if steps_plan is not None and not np.sqrt(var) <= SE_SLACK * target_se:
        checks = checks + (Check(
            "target_se",
            f"the standard error {np.sqrt(var):.3g} missed target_se={target_se:g} with {steps} "
            f"temperatures (the probe predicted {steps_plan.predicted_se:.3g}). Remedy: more "
            "particles or chains, or a larger max_num_steps.", figure=np.sqrt(var)),)
    return log_z, var, checks
