"""The evidence workflow both adapters call: a model's densities in, a trusted estimate out.

An adapter translates a model into a :class:`ModelDensity` (flat unconstrained z: log prior,
log likelihood, the prior as an initial distribution) and calls :func:`evidence`, which

1. chooses the initial distribution (``initial="auto"``: the prior, a Gaussian fitted at the
   posterior mode, or on a hard path natural-gradient VI fits, whichever anneals better on a
   discarded pilot run: ``ppl_hais.starts``; any normalized one keeps Ẑ unbiased);
2. runs the chains (independent annealing runs sharing that pilot's tuning);
3. pools them, checks the pooled estimate and raises one :class:`~ppl_hais.EvidenceWarning`
   naming every failed check;
4. resamples posterior draws from the user's key.

The annealer compiles once per target *structure* (:mod:`ppl_hais.runtime.structure`): a second
call, or a new model of the same structure over data of the same shapes, compiles nothing.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.workflow.evidence import evidence
>>> class Model:  # y = 1 observed under N(z, 1), prior z ~ N(0, 1): evidence N(1; 0, 2)
...     dim, improper = 1, ()
...     prior = ph.Gaussian(jnp.zeros(1), 1.0)
...     def log_likelihood(self, z):
...         return -0.5 * jnp.sum((1.0 - z) ** 2) - 0.5 * jnp.log(2 * jnp.pi)
...     def log_joint(self, z):
...         return self.prior.log_prob(z) + self.log_likelihood(z)
>>> ev = evidence(jax.random.key(0), Model(), num_particles=128, num_steps=200,
...               progress_bar=False)
>>> exact = -0.25 - 0.5 * jnp.log(4 * jnp.pi)
>>> bool(abs(ev.log_z - exact) < 5 * ev.log_z_se + 0.02)
True
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..checks import diagnostics
from ..checks import ladder as _ladder
from ..checks.record import Check
from ..estimate.bias import BiasCheck
from ..mcmc.fast_random import check_key, host_split
from ..model.density import ModelDensity, improper_note
from ..model.observed import ObservedData
from ..model.target import AnnealingTarget
from ..results.result import AISResult
from ..runtime import progress
from ..runtime.precision import float64
from ..starts.choose import (
    choose_initial,
    choose_initial_counted,
    discrete,
    transition,
)
from .budget import StepsPlan, choose_num_steps, gradient_cap
from .climb import Keys, Plan, State, step
from .memory import Memory
from .options import EvidenceOptions
from .resume import Resume, keep, resumed
from .runs import largest

__all__ = ["Evidence", "ModelDensity", "evidence", "choose_initial", "choose_num_steps"]


@dataclass(frozen=True, eq=False)
class Evidence:
    """The pooled evidence of one model: estimate, error bar, the chains' results, the checks."""

    results: list[AISResult]
    target: AnnealingTarget  # what the chains annealed
    initial: str  # "prior", "laplace", "laplace_t", "vi", "student_t", "user" (ppl_hais.starts)
    log_z: float
    log_z_se: float
    checks: tuple[Check, ...]  # the failed checks: each a sentence and its figures
    choice: dict  # initial distribution -> the pilot's importance ESS (initial="auto")
    steps_plan: StepsPlan | None = None  # target_se=: the probes' SE and the temperatures chosen
    bias: BiasCheck | None = None  # the reverse anneal from MCMC draws (ppl_hais.estimate.bias)
    trajectory: tuple[_ladder.Rung, ...] = ()  # the runs made (ppl_hais.checks.ladder)
    gradients: int = 0  # model gradients the call spent: pilots, Laplace fit, runs, checks
    max_gradients: float | None = None  # the budget they were spent under (None: unbounded)
    log_z_forward: float = float("nan")  # the last run's forward estimate, where log_z bridges
    remembered: bool = False  # start and tuning from an earlier call's (workflow.memory.Memory)
    observed_data: ObservedData | None = None  # what it conditions on (ppl_hais.model.observed)

    @property
    def bridged(self) -> bool:
        """Whether ``log_z`` bridges the last rung's forward and reverse anneals (a ladder's last
        rung whose bias check ran; :mod:`ppl_hais.checks.ladder`), not ``log_z_forward``."""
        return bool(np.isfinite(self.log_z_forward))

    @property
    def shortfall(self) -> float:
        """Nats the estimate may be too low by what the ladder's trajectory shows (its last
        moves, the bias check's gap; :func:`ppl_hais.checks.ladder.shortfall`, about the bridge
        where it is one: :func:`ppl_hais.checks.ladder.bridge_figures`); NaN without a trajectory, 0
        when neither shows one, inf when it cannot be sized. Stated by the ``converged`` warning, or
        inside the error bar of a call without one (``log_z_se`` at least half of it)."""
        if not self.trajectory:
            return float("nan")
        return _stated_shortfall(self.trajectory, self.log_z if self.bridged else None)

    @property
    def excess(self) -> float:
        """Nats the estimate may be too high: the fall of the last rung's estimate without its
        largest weights (the largest over chains; :func:`ppl_hais.stats.estimators.excess`); for a
        bridge, :func:`ppl_hais.checks.ladder.bridge_figures`."""
        if self.bridged:
            return _ladder.bridge_figures(self.trajectory, self.log_z)[1]
        if self.trajectory:
            return self.trajectory[-1].excess
        return largest(r.excess for r in self.results)

    @property
    def cleared(self) -> tuple[str, ...]:
        """The weights' checks the last rung failed but the joint decision accepted as false
        alarms (:func:`ppl_hais.checks.ladder.clears`); its SE then comes from the rungs' spread."""
        return self.trajectory[-1].cleared if self.trajectory else ()

    @property
    def num_steps(self) -> int:
        """The temperatures of the run the estimate comes from (the ladder's last rung)."""
        return int(self.results[0].settings.num_steps)

    @property
    def log_z_upper(self) -> float:
        """The bias check's reverse (upper) estimate; NaN when it did not run."""
        return float("nan") if self.bias is None else self.bias.log_z_upper

    @property
    def bias_gap(self) -> float:
        """``log_z_upper`` − the last rung's forward estimate, in nats; NaN when not run."""
        return float("nan") if self.bias is None else self.bias.gap

    @property
    def warning(self) -> bool:
        return bool(self.checks)

    @property
    def pareto_k(self) -> float:
        return float(max(r.pareto_k for r in self.results))

    @property
    def ess(self) -> float:
        """Importance ESS summed over the chains."""
        return float(sum(r.ess for r in self.results))

    def resample(self, rng_key, num_draws: int | None = None) -> np.ndarray:
        """(chains, draws) indices drawn by weight from the user's key: ``num_draws`` per chain,
        by default the call's ``num_particles`` (a topped-up rung pools more)."""
        keys = host_split(rng_key, len(self.results))
        return np.stack([r.resample(k, num_draws or r.settings.run_particles
            or r.num_particles) for r, k in zip(self.results, keys, strict=True)])  # fmt: skip


@float64
def evidence(
    rng_key,
    model: ModelDensity,
    options: EvidenceOptions | Mapping | None = None,
    *,
    progress_bar: bool = True,
    memory: Memory | None = None,
    **keywords,
) -> Evidence:
    """The log evidence of a model by HAIS, checked, over ``options.num_chains`` independent
    runs sharing one pilot. Raises one :class:`~ppl_hais.EvidenceWarning` listing every failed
    check of the pooled estimate.

    ``options``: an :class:`~ppl_hais.workflow.options.EvidenceOptions` (or a dict of its
    fields), where every option is documented; its fields given as keywords replace the
    object's (``evidence(key, model, num_steps=1000)``).

    On the convergence ladder (neither ``num_steps`` nor ``target_se``) the last rung is the
    estimate and every rung is in ``Evidence.trajectory``: a rung whose weights pass at an SE
    above 0.05 nat (0.025 at a first rung no check questions) anneals the particles that SE
    asks for and pools them (:mod:`ppl_hais.workflow.runs`); after a rung of 1000 or more whose
    bias check found over 0.1 nat missing while its lag check failed, the rungs give each
    particle a step size of its own (unless the call sets ``local_steps``;
    :func:`ppl_hais.checks.ladder.needs_local_steps`). Every rung after the first gets the bias
    check. A last rung whose bias check ran is given as the bridge of its forward and reverse
    anneals (``Evidence.bridged``, ``Evidence.log_z_forward``), its SE carrying half the interval
    it may be off by; one that still fails a check ends the ladder where the bridge needs no
    warning, else the last states the gap in nats (the ``converged`` check;
    :func:`ppl_hais.checks.ladder.ends`).

    Where the last rung passes every check without a bridge and its bias check's reverse
    estimate lies above it, the SE includes that gap: the two anneals bracket log Z, so it may
    lie up to the gap above. A call without a warning carries half its ``shortfall`` (what its
    trajectory says may be missing) in its SE beside the noise, so that its ±2 SE reaches it
    beyond the noise.

    ``memory``: a :class:`~ppl_hais.workflow.memory.Memory` that keeps the start and its tuning
    (the pilots draw from the call's key) for the next call given it on the same model, data and
    options, which runs no pilot (``Evidence.remembered``); on the ladder, that call begins at
    the rung where the first call's stopped, the rungs below it the first call's
    (``Rung.remembered``, :mod:`ppl_hais.workflow.resume`). None (default): the call tunes from
    its own key and keeps nothing, so calls with different keys are independent.
    """
    opts = EvidenceOptions.of(options, "evidence", **keywords)
    rng_key, num_chains, num_particles = check_key(rng_key), opts.num_chains, opts.num_particles
    ladder, initial, bias_check, max_gradients = (opts.ladder, opts.initial, opts.bias_check,
                                                  opts.max_gradients)  # fmt: skip
    first = _ladder.FIRST_NUM_STEPS if opts.num_steps is None else int(opts.num_steps)
    surveyed = first if opts.num_steps is not None else max(first, _ladder.FIXED_NUM_STEPS)
    options = opts.anneal()  # made once: every pilot, rung and check reads it
    kernel = transition(model, options.kernel)
    max_gradients = gradient_cap(max_gradients, ladder, opts.target_se, num_chains,
                                 num_particles, options.kernel.num_leapfrog, first)  # fmt: skip
    start = time.perf_counter()
    keys = Keys.of(rng_key)
    name, target, pilot, choice, spent, remembered = _tuned(
        keys.pilot, model, initial, surveyed, options, progress_bar, memory)  # fmt: skip
    steps_plan, key_chains = _probed(keys.chains, target, pilot, opts.target_se, kernel,
        options.pilot, num_particles=num_particles, num_chains=num_chains,
        max_num_steps=opts.max_num_steps,
        max_gradients=None if max_gradients is None else max_gradients - spent)  # fmt: skip
    keys = keys._replace(chains=key_chains)
    if steps_plan is not None:
        first, spent = steps_plan.num_steps, spent + steps_plan.probe_gradients
    own_reverse = options.run.bidirectional or options.run.reverse_from is not None
    checking = bool(bias_check) and not own_reverse and not discrete(model)
    plan = Plan(model, target, ladder, checking, own_reverse, bias_check, max_gradients,
                num_chains, num_particles, surveyed, progress_bar, start, steps_plan,
                opts.target_se)  # fmt: skip
    kept = model if ladder and isinstance(initial, str) else None  # a ladder the memory resumes
    kept_key = (initial, surveyed, options, num_particles, num_chains, bias_check, max_gradients)
    begun = resumed(memory, kept, kept_key) or Resume((), first, None, None)
    if begun.local is not None:
        options, kernel, pilot = options._replace(kernel=begun.local[0]), *begun.local[1:]
    switchable = begun.local is None and ladder and checking and opts.local_steps is None \
        and (options.kernel.lookahead, options.kernel.flips) == (1, "standard")  # may switch
    state = State(tuple(begun.rungs), begun.num_steps, spent, options, kernel, pilot,
                  begun.local, begun.last_check, switchable)  # fmt: skip
    while not state.done:
        state, info = step(keys, plan, state)
    trajectory, results, spent = list(state.trajectory), info.results, state.spent
    log_z, var, checks, bias = info.log_z, info.var, info.checks, info.bias
    keep(memory, kept, kept_key, trajectory, state.local, state.last_check)
    forward, log_z, var, checks = _answer(trajectory, log_z, var, checks, ladder, max_gradients)
    out = Evidence(results, target, name, float(log_z), float(np.sqrt(var)), checks, choice,
                   steps_plan, bias, tuple(trajectory), int(spent), max_gradients, forward,
                   remembered, getattr(model, "observed_data", None))  # fmt: skip
    diagnostics.warn(checks, "log evidence", note=checks and getattr(model, "remedy_note", None))
    if getattr(model, "improper", ()):
        warnings.warn(improper_note(model), UserWarning, stacklevel=diagnostics.user_stacklevel())
    return out


def _tuned(key_pilot, model, initial, surveyed, options, progress_bar, memory):
    """The start's choice and its pilots (:func:`~ppl_hais.starts.choose.choose_initial_counted`)
    with the gradients they spent, and whether they came from ``memory`` (an earlier call's on
    the same model, data and options, spending none)."""

    def tune():
        with progress.shown(progress_bar):  # the pilots and the Laplace fit show bars too
            return choose_initial_counted(key_pilot, model, initial, num_steps=surveyed,
                kernel_options=options.kernel, pilot_options=options.pilot)  # fmt: skip

    if memory is None:
        return *tune(), False
    kept = model if isinstance(initial, str) else None  # a user's distribution: not kept
    (name, target, pilot, choice, spent), remembered = memory.recall(
        kept, (initial, surveyed, options.kernel, options.pilot), tune)  # fmt: skip
    return name, target, pilot, choice, 0 if remembered else spent, remembered


def _probed(key_chains, target, pilot, target_se, kernel, pilot_options, **sizes):
    """With ``target_se``: the temperatures its probes chose (:func:`choose_num_steps`) and the
    chains' key after them; else (None, the chains' key)."""
    if target_se is None:
        return None, key_chains
    key_probe, key_chains = host_split(key_chains)
    return choose_num_steps(key_probe, target, pilot, target_se, kernel=kernel,
                            options=pilot_options, **sizes), key_chains  # fmt: skip


def _answer(trajectory, log_z, var, checks, ladder, max_gradients):
    """(the forward estimate where a bridge replaced it, else NaN; log Ẑ; its variance; the
    checks) from the last rung: a last rung with both directions is bridged (a failing one
    unwarned where :func:`~ppl_hais.checks.ladder.bridge_clears`); one that passed without a
    bridge but with its reverse estimate above widens the SE by the gap (log Z may lie up to the
    gap above); the ladder states what may remain. An answer without a warning carries half
    its shortfall in its SE beside its noise, so that its ±2 SE reaches the shortfall beyond the
    noise: a shortfall is either stated by a warning or inside the error bar."""
    forward, bridge, last, noise = float("nan"), None, trajectory[-1], var
    if ladder and np.isfinite(last.bridge):  # both directions ran: their bridge
        forward, bridge, log_z = float(log_z), last.bridge, last.bridge
        var = _ladder.bridge_se(trajectory) ** 2
        if last.failed and _ladder.bridge_clears(trajectory):  # its doubt in its SE, no warning
            trajectory[-1], checks = last._replace(failed=(), cleared=last.failed), ()
    elif not last.failed and not last.cleared and last.bias_gap > 0:
        var = var + last.bias_gap**2
    if ladder:
        checks += _ladder.remaining_gap(trajectory, max_gradients=max_gradients, bridge=bridge)
    if not checks:  # unwarned: the error bar reaches what the trajectory says may be missing
        short = _stated_shortfall(trajectory, None if bridge is None else log_z)
        if np.isfinite(short):  # a bridge's SE carries half its stated interval already
            var = max(var, (short / 2) ** 2 + (0.0 if bridge is not None else noise))
    return forward, log_z, var, checks


def _stated_shortfall(trajectory, bridge: float | None = None) -> float:
    """The ladder's :func:`~ppl_hais.checks.ladder.shortfall`, or where ``bridge`` is the
    estimate, :func:`~ppl_hais.checks.ladder.bridge_figures`' about it."""
    if bridge is None:
        return _ladder.shortfall(trajectory)
    return _ladder.bridge_figures(trajectory, bridge)[0]
