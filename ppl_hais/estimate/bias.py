"""A bias check that does not read the forward run's weights: anneal back from posterior draws.

A forward anneal's log Ẑ is a stochastic lower bound (E[log Ẑ] ≤ log Z). A *reverse* anneal
from exact posterior draws back to the initial distribution estimates 1/Z without bias, so its
log estimate is a stochastic upper bound, and the gap between the two bounds the bias of
either (bidirectional Monte Carlo, Grosse et al. 2015, 2016). Users rarely have exact draws;
this check makes approximate ones: the forward particles resampled by weight, then moved by
:func:`ppl_hais.mcmc.sample` (reduced-flip HMC with its own warmup) at β = 1, so that the
draws forget how the anneal left them, then the reverse anneal over the forward run's
schedule and frozen tuning. A forward run with local steps (the convergence ladder's
transition for a funnel's neck) gets half its reverse chains from its own transition at β = 1
instead (:func:`_own_draws`): the MCMC's warmup moves draws out of a funnel's neck into its
mouth, even exact ones (docs/bias_check.md), and the bridge below leans high on them.

What the gap means (measured, docs/bias_check.md): where the MCMC reaches mass the forward
anneal missed (Neal's funnel from N(0, I)), the reverse estimate rises above the forward one
and the gap shows the miss; where the MCMC misses it too (the 36-D product of Student-t
experts, whose experts have tails heavier than Cauchy's), the reverse estimate is as low as
the forward one and the gap is about 0. So a large gap *raises* a warning that states the
gap in nats; a small gap alone never clears one, but with the convergence ladder's next rung
agreeing it can show the weights' checks to be false alarms (:func:`ppl_hais.checks.ladder.clears`).

The two directions' weights also give a third estimate, :func:`~.reverse.bennett`'s: the
optimal bridge between the forward and the reverse paths (Bennett's acceptance ratio, Bennett
1976; Meng & Wong 1996). Each bound alone is biased at a finite number of particles by the
weights' tails; the bridge uses both tails and, were the reverse starts exact posterior draws,
would be consistent at any number of temperatures (Crooks 2000; the reverse anneal applies the
forward transitions in reverse order, which with a persistent momentum is their time reversal
only approximately: on a 20-D Gaussian with exact draws and 10 temperatures it was 0.02 ± 0.47
off where the forward estimate was 1.9 low, tests/test_bias.py). The check reports it
(``log_z_bennett``) and decides nothing by it: its draws come from MCMC, so how far it can be
trusted is measured, not assumed (docs/bias_check.md). The evidence workflow gives it as the
estimate where the ladder's last rung had the check, the interval it may be off by
(:func:`ppl_hais.checks.ladder.bridge_figures`) in its SE or, on a failing rung, its warning.

Given the ``bound`` a rung must show (:func:`ppl_hais.checks.ladder.settling_bound`), a check
whose gap plus two SEs exceeds it only by its reverse draws' noise (within it at the same gap
with 1 + ``EXTEND`` times the draws) draws ``EXTEND`` times as many more by the same sampler and
pools them: on the Student-t experts written as a factor over N(0, I), half the calls' first
rungs were right with gaps of −0.04 ± 0.07, and the next rung (4× the temperatures) drew a
dominant weight on some (+0.27 and +11.9 nat) and climbed to 16,000 temperatures for an answer
the first rung had; the extra draws cost less than half of that rung (0.5 M gradients of 1.2 M).

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.estimate.bias import check_bias
>>> target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / 2.0) ** 2),
...                             ph.Gaussian(jnp.zeros(2)))
>>> res = ph.hais(jax.random.key(0), target, num_particles=128, num_steps=300,
...               progress_bar=False)
>>> check = check_bias(jax.random.key(1), target, [res], num_draws=64, num_mcmc=100)
>>> bool(abs(check.gap) < 0.2)
True
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import numpy as np

from ..annealing.execution import run
from ..annealing.kernels import hais_kernel
from ..annealing.pilot import Pilot
from ..checks import diagnostics
from ..checks.diagnostics import BIAS_NOISE
from ..mcmc.fast_random import host_fold_in, host_split, host_uniform
from ..mcmc.sampler import sample as mcmc_sample
from ..results.result import AISResult
from ..runtime.precision import float64
from ..stats import estimators
from ..stats.pareto import tail_length
from .reverse import bennett, reverse_anneal, reverse_estimate

__all__ = ["BiasCheck", "check_bias", "needs_check", "with_bias"]

# which runs are checked under bias_check="auto": a run whose target reaches past the start,
# whose final positions predict their weights, whose weights show a tail, or that warned.
# Easy models (a prior or Laplace start that covers the posterior) meet none of these
# (outside ≤ 0.04, lag ≤ 0.13, k̂ ≤ 0.2 in docs/trust.md; k̂ up to 0.39 in the trust suite's
# default calls, within its noise), so they pay nothing.
# The outside fraction of draws from the start itself is 5% (its central 95% by definition),
# so a run is suspect only beyond that figure's sampling noise: 5% + 3 binomial SDs (7.9% at
# 512 particles). At a flat 5%, half the runs whose posterior sits inside the prior were
# checked: eight schools from its prior ends 3.5-6.2% outside, and 3 of 8 default calls paid
# the check's MCMC (compiled on the first) and 0.3 M gradients for nothing.
# A lag is a reason only where some particles ended outside the start's central 95% (more
# than LAG_OUTSIDE of them): a lagging contraction from a start that covers the posterior
# leaves nothing unreached (``diagnostics``: the lag check warns only beyond the start), and
# on the 50-D regression from its Laplace fit (no particle outside, every estimate right) a
# lag of 0.10-0.22 in one of four chains checked 16 and 19 of 20 default calls (the trust
# suite), 11% of their gradients and a compiled MCMC for nothing.
# A k̂ is a reason beyond its own noise alone: 0.3 plus one SD of k̂ from the M = 3√P largest
# weights the tail fit uses, (1 + k)/√M (0.46 at 512 particles, 0.43 at 1000). At a flat 0.3
# the 5-D regression's default calls were checked on 1 (NumPyro) and 3 (PyMC) of 20 for k̂ of
# 0.32-0.39, every one right, and two of those checks' SEs (0.08) could not bound the bias by
# 0.1, so the ladder climbed a rung: 1.4-4.5x the gradients. The easy models' largest k̂ that
# applies was 0.39 (regressions, logistic regression, mixtures: medians 0.02-0.20 on the trust
# suite), the funnel's, banana's and Student-t experts' medians 0.60-0.71, and every
# such run also reached past its start, a reason of its own.
SUSPECT_OUTSIDE = 0.05
SUSPECT_LAG = 0.1
LAG_OUTSIDE = 0.01
SUSPECT_KHAT = 0.3

BIAS_STREAM = 29  # a check draws from fold_in(the call's key, 29) (+ 1000 per rung on a ladder)
MIN_MCMC = 200  # the bias check's MCMC transitions (warmup, then draws) at the least
EXTEND = 3  # a check in doubt by its noise alone draws this many times its reverse chains more


def mcmc_length(num_steps: int) -> int:
    """The bias check's MCMC transitions after a run of ``num_steps`` temperatures (each of
    warmup and draws): a quarter of them, at least ``MIN_MCMC`` (:func:`check_bias`)."""
    return max(MIN_MCMC, int(num_steps) // 4)


def suspect_khat(num_particles: int) -> float:
    """The k̂ at or above which ``"auto"`` checks a run of ``num_particles``."""
    noise = (1.0 + SUSPECT_KHAT) / np.sqrt(max(tail_length(int(num_particles)), 1))
    return SUSPECT_KHAT + noise


def suspect_outside(num_particles: int) -> float:
    """The outside fraction above which ``"auto"`` checks a run of ``num_particles``."""
    p = SUSPECT_OUTSIDE
    return p + 3.0 * np.sqrt(p * (1.0 - p) / max(int(num_particles), 1))


class BiasCheck(NamedTuple):
    """The reverse anneal's upper estimate and its distance to the forward estimate, in nats."""

    log_z_upper: float  # the reverse anneal's estimate (an upper bound from exact draws)
    log_z_upper_se: float
    gap: float  # log_z_upper − the forward estimate
    gap_se: float
    num_draws: int  # reverse chains
    gradients: int  # model gradients spent by the check (MCMC and reverse anneal)
    log_z_bennett: float = float("nan")  # both directions' weights bridged (reverse.bennett)
    log_z_bennett_se: float = float("nan")
    redrawn: bool = False  # the MCMC's draws failed and the forward transition redrew them
    broken: bool = False  # the draws still failed (:func:`_draws_failed`): no bound, no bridge

    @property
    def note(self) -> str:
        """What a user should know of the check's draws ("" when nothing)."""
        if self.broken:
            return (
                f"the bias check could not run: its reverse anneal lies {-self.gap:.2f} ± "
                f"{self.gap_se:.2f} nats below the estimate, where posterior draws lie above "
                "it; its draws were not posterior draws (MCMC stuck, as in a funnel's neck), "
                "or a few dominant weights lifted the forward estimate. It bounds nothing. "
                "Remedy: a non-centered parameterization, or more temperatures."
            )
        if self.redrawn:
            return ("the bias check's MCMC draws were not posterior draws (its reverse anneal "
                    "lay below the estimate); the anneal's own transition redrew them")
        return ""


def needs_check(results) -> bool:
    """Whether ``bias_check="auto"`` checks these (a chain's) results."""
    for r in results:
        tail = estimators.max_relative_weight(r.log_weights)
        khat = r.pareto_k if diagnostics.khat_applies(r.pareto_k, tail) else 0.0
        inside = np.isfinite(r.outside_initial) and r.outside_initial <= LAG_OUTSIDE
        if (
            r.checks
            or khat >= suspect_khat(len(r.log_weights))
            or (np.isfinite(r.lag) and r.lag >= SUSPECT_LAG and not inside)
            or (np.isfinite(r.outside_initial)
                and r.outside_initial >= suspect_outside(len(r.log_weights)))
        ):
            return True
    return False


def _log_final(target, z):
    p = target.potential(z)
    return p.log_initial + p.log_ratio


def _final_log_density(target):
    """log π_1 = log q + r of a target, as a pytree over it (``jax.tree_util.Partial``): the
    MCMC that the check runs compiles once per target *structure*, so a later call on a new
    target of the same model and data shapes (each ``phn.HAIS.run`` builds one) reuses it."""
    return jax.tree_util.Partial(_log_final, target)


@float64
def check_bias(
    rng_key,
    target,
    results,
    pilot: Pilot | None = None,
    *,
    log_z: float | None = None,
    log_z_se: float | None = None,
    num_draws: int = 256,
    num_mcmc: int | None = None,
    refresh: float = 0.5,
    num_leapfrog: int = 1,
    kernel=None,
    step_size="auto",
    progress_bar: bool = False,
    log_density=None,
    bound: float | None = None,
) -> BiasCheck:
    """Anneal back from MCMC-refreshed posterior draws; return the upper estimate and the gap.

    ``results``: the forward run's chains (their particles are resampled by weight, pooled);
    ``pilot``: the forward run's frozen tuning (step size and scale as functions of β), reused
    backwards (``None`` with ``step_size="auto"``: a new pilot is run). ``num_draws`` reverse
    chains start from the last draws of ``num_draws // 2`` MCMC chains (two draws each,
    ``num_mcmc // 2`` apart) after ``num_mcmc`` warmup transitions (default
    :func:`mcmc_length`: a longer anneal is a harder path, whose reverse starts must mix as
    long; on Neal's funnel from N(0, I) at 4000 temperatures, four calls, 200 transitions
    left the bridge 0.07–0.11 nat low, 1000 within 0.06). ``log_z``/``log_z_se``:
    the forward estimate the gap is measured from (default: the pooled chains'). ``kernel``:
    the forward run's transition kernel (default: HAIS with ``refresh`` and ``num_leapfrog``).
    ``log_density``: the posterior's log density the MCMC samples, a pytree (default: the
    target's log q + r). The evidence workflow passes the model's joint density, the same
    function whatever the start, so one compiled MCMC serves every start. ``bound``: the bias
    the caller needs bounded (the ladder's :func:`~ppl_hais.checks.ladder.settling_bound`);
    where only the reverse draws' noise leaves it in doubt, ``EXTEND`` times as many more are
    drawn and pooled (module docstring), and ``num_draws`` in the result counts them all.

    With a local-step ``kernel`` (and its ``pilot``) half the reverse chains start from the
    MCMC's draws and half from :func:`_own_draws`; the reverse estimate, its gap and the
    bridge use all of them, and the bridge's SE gains half the difference between the two
    halves' bridges.
    """
    betas = np.asarray(results[0].betas, dtype=float)
    if num_mcmc is None:
        num_mcmc = mcmc_length(len(betas) - 1)
    particles = np.concatenate([np.asarray(r.particles) for r in results])
    log_w = np.concatenate([np.asarray(r.log_weights) for r in results])
    if log_z is None:
        log_z, var = diagnostics.pool([r.log_z for r in results], [r.log_z_se for r in results])
        log_z_se = float(np.sqrt(var))
    key_pick, key_mcmc, key_rev = host_split(rng_key, 3)
    # a forward run with local steps (a funnel's neck) gets half its draws from its own
    # transition at β = 1 (:func:`_own_draws`); their bridge and the MCMC's are compared below
    own = kernel is not None and kernel.local_steps and pilot is not None
    num_chains = max(int(num_draws) // (4 if own else 2), 2)
    density = _final_log_density(target) if log_density is None else log_density
    starts, gradients = _mcmc_draws((key_pick, key_mcmc), density, particles, log_w,
                                    num_chains, int(num_mcmc))  # fmt: skip
    if own:
        more, used = _own_draws(host_fold_in(key_mcmc, 1), target, kernel, pilot,
                                particles, log_w, len(starts), 2 * int(num_mcmc))  # fmt: skip
        starts, gradients = np.concatenate([starts, more]), gradients + used
    rev = reverse_anneal(
        key_rev, target, betas, starts, pilot, kernel=kernel, refresh=refresh,
        num_leapfrog=num_leapfrog, step_size=step_size, progress_bar=progress_bar,
    )  # fmt: skip
    gradients += rev.gradients
    own_se = log_z_se if log_z_se is not None and np.isfinite(log_z_se) else 0.0
    z0 = float(target.log_z_initial)
    gap, gap_se, log_z_both, both_se = _figures(rev, log_z, own_se, log_w, z0)
    if own:  # the two samplers' bridges differ by how far their draws are from π: an SE
        half = len(rev.log_weights) // 2
        apart = (bennett(log_w, rev.log_weights[:half], log_z_initial=z0)[0]
                 - bennett(log_w, rev.log_weights[half:], log_z_initial=z0)[0])  # fmt: skip
        both_se = float(np.hypot(both_se, 0.5 * apart))
    redrawn = False
    if not own and pilot is not None and _draws_failed(gap, gap_se, results):
        kernel = kernel or hais_kernel(float(refresh), int(num_leapfrog), 1, "standard")
        more, used = _own_draws(host_fold_in(key_mcmc, 2), target, kernel, pilot, particles,
                                log_w, len(starts), 2 * int(num_mcmc))  # fmt: skip
        rev = reverse_anneal(host_fold_in(key_rev, 1), target, betas, more, pilot,
                             kernel=kernel, step_size=step_size)  # fmt: skip
        gradients, redrawn = gradients + used + rev.gradients, True
        gap, gap_se, log_z_both, both_se = _figures(rev, log_z, own_se, log_w, z0)
    if bound is not None and not own and _inconclusive(gap, rev.log_z_upper_se, own_se, bound):
        key_more = host_split(host_fold_in(rng_key, 3), 3)  # more draws of the same sampler
        if redrawn:
            more, used = _own_draws(key_more[0], target, kernel, pilot, particles, log_w,
                                    EXTEND * len(starts), 2 * int(num_mcmc))  # fmt: skip
        else:
            more, used = _mcmc_draws(key_more[:2], density, particles, log_w,
                                     EXTEND * num_chains, int(num_mcmc))  # fmt: skip
        extra = reverse_anneal(key_more[2], target, betas, more, pilot, kernel=kernel,
                               refresh=refresh, num_leapfrog=num_leapfrog, step_size=step_size)
        rev = reverse_estimate(np.concatenate([rev.log_weights, extra.log_weights]), z0,
                               rev.gradients + extra.gradients)  # fmt: skip
        starts, gradients = np.concatenate([starts, more]), gradients + used + extra.gradients
        gap, gap_se, log_z_both, both_se = _figures(rev, log_z, own_se, log_w, z0)
    broken = _draws_failed(gap, gap_se, results)
    if broken:  # not posterior draws: no bridge either
        log_z_both, both_se = float("nan"), float("nan")
    return BiasCheck(rev.log_z_upper, float(rev.log_z_upper_se), gap, gap_se, len(starts),
                     gradients, log_z_both, both_se, redrawn, broken)  # fmt: skip


def _figures(rev, log_z, own_se, log_w, log_z_initial):
    """(gap, its SE, bridge, its SE) of a reverse anneal ``rev`` against the forward estimate
    ``log_z`` (SE ``own_se``) and its weights ``log_w``."""
    both, both_se = bennett(log_w, rev.log_weights, log_z_initial=log_z_initial)
    gap_se = float(np.hypot(rev.log_z_upper_se, own_se))
    return float(rev.log_z_upper - log_z), gap_se, both, both_se


def _mcmc_draws(keys, log_density, particles, log_w, num_chains, num_mcmc):
    """Two draws from each of ``num_chains`` MCMC chains (``num_mcmc // 2`` transitions apart,
    after ``num_mcmc`` of warmup) started from the particles resampled by weight, and the
    gradients they cost; ``keys``: (resampling, MCMC)."""
    idx = estimators.systematic(log_w, num_chains, host_uniform(keys[0]))
    mcmc = mcmc_sample(keys[1], log_density, particles[idx], num_warmup=num_mcmc,
                       num_samples=num_mcmc, flips="standard", progress_bar=False,
                       interruptible=False)  # fmt: skip
    samples = np.asarray(mcmc.samples)
    starts = np.concatenate([samples[:, num_mcmc // 2 - 1], samples[:, -1]])
    return starts, int(np.sum(mcmc.warmup_gradients) + np.sum(mcmc.stats["num_gradients"]))


def _inconclusive(gap, upper_se, own_se, bound) -> bool:
    """Whether the check leaves ``bound`` in doubt by its reverse draws' noise alone: its gap
    plus ``BIAS_NOISE`` SEs lies above it, and would lie within it at the same gap with
    ``1 + EXTEND`` times the reverse draws (the forward estimate's SE unchanged)."""
    now = gap + BIAS_NOISE * np.hypot(upper_se, own_se)
    then = gap + BIAS_NOISE * np.hypot(upper_se / np.sqrt(1 + EXTEND), own_se)
    return bool(now > bound >= then)


def _draws_failed(gap, gap_se, results) -> bool:
    """Whether the MCMC's draws were no posterior draws, so the check redraws them by the
    forward run's own transition: its reverse estimate far below the forward one
    (:func:`~ppl_hais.checks.diagnostics.bias_invalid`), or below beyond its noise
    (:func:`~ppl_hais.checks.diagnostics.bias_below`) where the forward weights passed every check
    and so cannot have lifted the forward estimate (where they failed, a reverse estimate
    below is the forward one's excess: the banana's dominant weights, 0.1–0.4 nat high). On
    centered eight schools (a funnel in the schools' scale) the MCMC's draws often sit away
    from the posterior, and the redrawn checks lie above (`BiasCheck.redrawn` counts them in
    benchmarks/bias_check.py)."""
    return diagnostics.bias_invalid(gap, gap_se) or (
        diagnostics.bias_below(gap, gap_se) and not any(r.checks for r in results))


def _own_draws(rng_key, target, kernel, pilot, particles, log_w, num, num_transitions):
    """``num`` posterior draws by the forward run's own transition at β = 1 (its step sizes
    and scale frozen from ``pilot``), ``num_transitions`` each from the particles resampled by
    weight, and the gradients spent. On Neal's funnel from N(0, I) the MCMC's warmup (per-chain
    adaptation with a persistent momentum) moves draws into the mouth, exact ones too (v > 3:
    16–34% of its draws against 16%; the neck, v < −3, 1–6% against 16%), and their bridge
    leans high (+0.03 mean); a local-step transition keeps the neck (13–21%) but not the far
    mouth, and its bridge leans low (−0.05): half the reverse chains start from each
    (docs/bias_check.md)."""
    idx = estimators.systematic(log_w, int(num), host_uniform(rng_key))
    out = run(
        host_fold_in(rng_key, 1), target, kernel, np.ones(int(num_transitions) + 1),
        pilot.betas, pilot.log_step, np.asarray(particles[idx]), num_bins=10,
        scale_ref=pilot.scale,
    )  # fmt: skip
    return np.asarray(out.particles), int(num) * int(num_transitions) * kernel.gradients_per_step


def with_bias(result: AISResult, check: BiasCheck) -> AISResult:
    """``result`` with the check's reverse estimate as ``log_z_upper``, its failed check added,
    and the check in ``settings.bias_check``."""
    checks = diagnostics.evidence_checks(bias_gap=check.gap, bias_gap_se=check.gap_se)
    return dataclasses.replace(
        result, log_z_upper=check.log_z_upper, log_z_upper_se=check.log_z_upper_se,
        checks=tuple(result.checks) + checks,
        settings=result.settings.replace(bias_check=dict(check._asdict(), note=check.note)),
    )  # fmt: skip
