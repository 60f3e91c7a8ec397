"""The convergence ladder: run again with 4× the temperatures while a check fails, within a
gradient budget, and say in nats what is left when the budget runs out.

The evidence workflow's default (``num_steps=None``) anneals over 250 temperatures first (its pilot
surveys the path as for the fixed default's 1000). A rung whose checks fail (the weights', then the
bias check) is followed by one with ``GROWTH`` times the temperatures and a fresh key, unless its
bridge ends the ladder (below), while the gradients spent and the next rung's predicted cost fit
``max_gradients`` (default: ``DEFAULT_BUDGET`` times the first rung's main run). Each rung is an
independent run (compiling nothing new; one whose weights pass is topped up with particles to an SE
of :func:`~ppl_hais.workflow.runs.precise_se`); the last is the estimate, every rung in
``Evidence.trajectory`` (:class:`Rung`, :func:`ppl_hais.results.plots.plot_convergence`).

**A different transition** (:func:`needs_local_steps`). After a rung of ``FIXED_NUM_STEPS``
temperatures or more whose bias check found more than ``CLEAR_BOUND`` missing while its lag check
failed (a funnel's neck), the rungs give each particle a step size of its own (``local_steps``,
tuned by a pilot of its own, its gradients counted); not where the misses cannot be sized
(:func:`unsizable`), nor where the call sets it.

**The joint decision** (:func:`clears`). The weights' checks (Pareto k̂, importance ESS, lag) read
one run's weights, and a right estimate can fail them (a banana's or a Student-t's weights reach k̂
0.5–1 at errors of 0.01 nat). A later rung whose weights still fail is accepted when two checks
that do not read its weights agree that it has converged: the bias check's reverse anneal lies
within ``CLEAR_GAP`` of it, its gap plus ``BIAS_NOISE`` of its SEs within ``CLEAR_BOUND`` (the
check bounds the bias by the suite's "right", 0.1 nat), and the previous rung, an independent run
over 4× fewer temperatures, within ``CLEAR_MOVE`` — unless its particles still predict their
weights strongly (lag ≥ ``CLEAR_LAG``) or most of them ended outside the start's bulk (outside
fraction ≥ ``CLEAR_OUTSIDE``): mass that neither path reached, which no agreement can rule out. Its
SE then comes from the two runs' spread. Nor may an earlier rung's check have reached an upper
estimate more than ``CLEAR_BOUND`` above the rung (thresholds derived on the trust suite's rungs,
docs/calibration.md). A run of a fixed budget (``num_steps`` or ``target_se``) has no previous
rung: the bias check's agreement alone clears it (``clears(..., alone=True)``), its SE then
carrying the gap (the suite at a fixed 1000 temperatures: false alarms 48 → 21 of 240 right).

When the last rung still fails, :func:`remaining_gap` adds a ``converged`` check that states how
low the estimate may be, in nats (:func:`shortfall`), and, where one weight dominates, how far too
*high* (``Rung.excess``, :func:`~ppl_hais.stats.estimators.excess`); where most particles ended
beyond the start and still predict their weights (:func:`unsizable`), the shortfall is ``inf``.

**The bridge** (:func:`bridge_figures`). Where the last rung's bias check ran, the estimate is
Bennett's bridge of the forward weights and the check's reverse weights (``Rung.bridge``: each
direction alone is biased by its weights' tail, the bridge reads both). Its SE omits the MCMC
draws' error, so the call states the interval in nats around it: no higher than the forward
estimate plus its shortfall, no lower than the forward estimate less its stated excess and two of
its SEs (a forward anneal's log Ẑ is a stochastic lower bound). A rung that still fails a check
gives its bridge without a warning (:func:`bridge_clears`) where that interval lies within
``BRIDGE_CLEAR`` either way (a Bayes factor's doubt of at most e^0.2 ≈ 1.22), or where the previous
rung's bridge, an independent run, lies within ``CLEAR_MOVE`` of it while what is missing can be
sized; an unwarned bridge's SE carries the interval's half-width (:func:`bridge_se`), the checks go
to ``Rung.cleared``, and from ``FIXED_NUM_STEPS`` temperatures on the ladder ends there
(:func:`ends`): on the suite's funnel from N(0, I) most calls end at 4000 temperatures.

Example
-------
>>> from ppl_hais.checks.ladder import Rung, remaining_gap, shortfall
>>> rungs = (Rung(1000, -10.30, 0.02, ("lag",), float("nan"), 600_000, 0.2),
...          Rung(4000, -10.10, 0.02, ("lag",), float("nan"), 2_700_000, 0.6))
>>> round(shortfall(rungs), 2)  # rose 0.2 over 4×; a bias shrinking by ¾ per 4× leaves 0.6
0.6
>>> remaining_gap(rungs, max_gradients=3_000_000)[0].name  # and its sentence states the 0.6
'converged'
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .diagnostics import BIAS_NOISE, EXCESS_STATE, bias_below
from .record import Check

__all__ = [
    "DEFAULT_BUDGET", "FIRST_NUM_STEPS", "FIXED_NUM_STEPS", "GROWTH", "Rung", "WEIGHT_CHECKS",
    "bridge_clears", "bridge_figures", "bridge_se", "cleared_se", "clears", "ends",
    "default_max_gradients", "needs_local_steps", "next_num_steps", "remaining_gap", "settled",
    "settling_bound", "shortfall", "unsizable",
]  # fmt: skip

FIRST_NUM_STEPS = 250  # the first rung's temperatures (a quarter of the fixed default's)
FIXED_NUM_STEPS = 1000  # the fixed default: the pilots survey as for it; the checks calibrated
GROWTH = 4  # each rung anneals over this many times the previous rung's temperatures
DEFAULT_BUDGET = 160  # max_gradients: this many first rungs' main runs (250 to 16000; ladder.md)
MOVED = 3.0  # a move over the last rung beyond this many of its SEs is "still moving"
WEIGHT_CHECKS = ("pareto_k", "ess", "lag")  # the checks that read one run's weights
CLEAR_GAP = 0.05  # nats: the bias check's reverse estimate at most this far from the rung
CLEAR_BOUND = 0.1  # nats: nor its gap + BIAS_NOISE of its SEs above it (the bias's upper bound)
CLEAR_MOVE = 0.1  # nats: the previous rung at most this far from it
CLEAR_LAG = 0.25  # a lag at or above this is never cleared
CLEAR_OUTSIDE = 0.75  # nor an outside fraction at or above this
DECAY = 0.75  # the bias's factor per 4× temperatures assumed when sizing a shortfall
GAP_SCALE = 2.0  # the shortfall the bias check's gap can hide: up to this many gaps
BRIDGE_CLEAR = 0.2  # nats: a bridge whose stated interval lies within this either way: no warning


class Rung(NamedTuple):
    """One run of the ladder: its pooled estimate, failed checks and cumulative cost."""

    num_steps: int  # temperatures
    log_z: float
    log_z_se: float
    failed: tuple[str, ...]  # the failed checks' names ("pareto_k", "lag", "bias", ...)
    bias_gap: float  # the bias check's reverse estimate − log_z (NaN: not run)
    gradients: int  # model gradients spent by the call up to and including this rung
    wall_time: float  # seconds, cumulative
    lag: float = float("nan")  # the largest of the chains' lag correlations
    cleared: tuple[str, ...] = ()  # weight checks that failed but :func:`clears` accepted
    outside: float = float("nan")  # the largest of the chains' outside fractions
    bias_gap_se: float = float("nan")  # the bias check's gap's standard error (NaN: not run)
    excess: float = float("nan")  # the largest of the chains' excess (estimators.excess)
    local_steps: bool = False  # whether its transition gave each particle its own step size
    bridge: float = float("nan")  # its bias check's bridge of both directions (NaN: not run)
    bridge_se: float = float("nan")
    remembered: bool = False  # run by an earlier call, which stopped above it (workflow.resume)


def next_num_steps(num_steps: int) -> int:
    """The next rung's number of temperatures."""
    return int(num_steps) * GROWTH


def default_max_gradients(num_particles: int, num_chains: int, gradients_per_step: float = 1):
    """The default gradient budget of a ladder: ``DEFAULT_BUDGET`` × the first rung's main run."""
    return int(DEFAULT_BUDGET * num_particles * num_chains * FIRST_NUM_STEPS * gradients_per_step)


def _moved(trajectory):
    """(move, noise) of the estimate over the last rung; NaNs for a single rung."""
    if len(trajectory) < 2:
        return float("nan"), float("nan")
    last, prev = trajectory[-1], trajectory[-2]
    se = [x if np.isfinite(x) else np.nan for x in (last.log_z_se, prev.log_z_se)]
    return last.log_z - prev.log_z, float(np.hypot(*se))


def clears(trajectory, alone: bool = False) -> bool:
    """Whether the last rung's failed weight checks are false alarms (module docstring);
    ``alone``: a run of a fixed budget, cleared by its bias check without a previous rung."""
    if len(trajectory) < (1 if alone else 2):
        return False
    last = trajectory[-1]
    return bool(
        last.failed
        and all(c in WEIGHT_CHECKS for c in last.failed)
        and abs(last.bias_gap) <= CLEAR_GAP  # False when NaN (no bias check)
        and last.bias_gap + BIAS_NOISE * last.bias_gap_se <= CLEAR_BOUND  # False when NaN
        and _highest_upper(trajectory) - last.log_z <= CLEAR_BOUND
        and (alone or abs(last.log_z - trajectory[-2].log_z) <= CLEAR_MOVE)
        and not last.lag >= CLEAR_LAG  # a lag not measured (NaN) does not block
        and not last.outside >= CLEAR_OUTSIDE
    )


def settling_bound(num_steps: int) -> float | None:
    """The bias a rung must bound to be :func:`settled`: ``CLEAR_BOUND`` below the fixed
    default's ``FIXED_NUM_STEPS`` temperatures (where the checks were calibrated), else none."""
    return CLEAR_BOUND if num_steps < FIXED_NUM_STEPS else None


def settled(rung) -> bool:
    """Whether a rung may end the ladder: no check failed and its bias check, where one ran,
    bounds the bias by :func:`settling_bound` (gap + ``BIAS_NOISE`` SEs), or the ladder goes on
    (at 250 temperatures a banana passed its weights' checks 0.13 nat low, gap 0.06 ± 0.04; a
    30-D Student-t 0.21 low, gap 0.11 ± 0.08) unless more reverse draws settle it (``bound`` of
    :func:`~ppl_hais.estimate.bias.check_bias`). A reverse estimate *below* beyond its noise
    (:func:`~ppl_hais.checks.diagnostics.bias_below`) bounds nothing: on a non-centered horseshoe
    regression it was 284 nats under, and the rung 0.40 nat low."""
    bound, gap, se = settling_bound(rung.num_steps), rung.bias_gap, rung.bias_gap_se
    return not rung.failed and (bound is None or not (gap + BIAS_NOISE * se > bound
                                                      or bias_below(gap, se)))  # fmt: skip


def ends(trajectory) -> bool:
    """Whether the last rung ends the ladder: it is :func:`settled`, or, of ``FIXED_NUM_STEPS``
    temperatures or more, it fails a check but its bridge comes without a warning
    (:func:`bridge_clears`; module docstring)."""
    last = trajectory[-1]
    return settled(last) or bool(last.failed and last.num_steps >= FIXED_NUM_STEPS
                                 and np.isfinite(last.bridge) and bridge_clears(trajectory))


def needs_local_steps(trajectory) -> bool:
    """Whether the next rung should give each particle a step size of its own (``local_steps``;
    module docstring): the last rung, of ``FIXED_NUM_STEPS`` temperatures or more, failed its
    bias check with a gap above ``CLEAR_BOUND`` and its lag check (the transitions did not keep
    up), while what it misses can be sized (not :func:`unsizable`: heavy tails, where the
    switch lowered the estimate), and the switch is not yet on. On the trust suite every funnel
    run met it, no banana or centered-funnel run (docs/trust_suite.md)."""
    last = trajectory[-1]
    return bool(last.num_steps >= FIXED_NUM_STEPS and {"bias", "lag"} <= set(last.failed)
                and last.bias_gap > CLEAR_BOUND and not last.local_steps
                and not unsizable(trajectory))  # fmt: skip


def _highest_upper(trajectory) -> float:
    """The highest upper estimate (log Ẑ + its bias check's gap) of the rungs (-inf: none) but
    those whose SE is inf: their check's draws, resampled by weight, are a handful of particles."""
    return max((r.log_z + r.bias_gap for r in trajectory
                if np.isfinite(r.bias_gap) and np.isfinite(r.log_z_se)), default=-np.inf)


def cleared_se(trajectory, se_delta: float) -> float:
    """The SE of a cleared rung: its delta-method SE and the spread of the last two rungs
    (independent runs; their difference over √2); of a run cleared alone, its bias check's gap
    and that gap's SE in place of the spread."""
    last = trajectory[-1]
    spread = ((last.log_z - trajectory[-2].log_z) / np.sqrt(2.0) if len(trajectory) > 1
              else float(np.hypot(last.bias_gap, last.bias_gap_se)))  # fmt: skip
    return float(np.hypot(se_delta if np.isfinite(se_delta) else 0.0, spread))


def unsizable(trajectory) -> bool:
    """Whether what the last rung may miss cannot be sized: it failed a check while most of its
    particles ended beyond the start's bulk (outside fraction ≥ ``CLEAR_OUTSIDE``) and still
    predict their weights (lag ≥ ``CLEAR_LAG`` on the last rung or an earlier one of at least
    ``FIXED_NUM_STEPS`` temperatures: a 30-D Student-t, right, lagged 0.25–0.28 at 250, and the
    experts ≥ 0.288 from 1000 on, 120 calls). Mass lies farther out than the particles went,
    in tails that neither the forward anneal, the bias check's MCMC draws nor a longer ladder
    reach (the suite's Student-t experts: 0.3–0.7 nat low while every rung and the reverse
    anneal agreed within 0.2)."""
    last = trajectory[-1]
    rungs = [r for r in trajectory[:-1] if r.num_steps >= FIXED_NUM_STEPS] + [last]
    lagged = max((r.lag for r in rungs if np.isfinite(r.lag)), default=np.nan)
    return bool(last.failed) and last.outside >= CLEAR_OUTSIDE and lagged >= CLEAR_LAG


def shortfall(trajectory) -> float:
    """How many nats too low the last rung's estimate may be, by what the trajectory shows; 0
    when nothing shows one (which does not prove there is none); ``inf`` when it cannot be
    sized (:func:`unsizable`).

    Otherwise the largest of: ``GAP_SCALE`` × the bias check's positive gap (the gap itself
    with exact posterior draws; the suite's funnel was up to twice its gap low), the gap plus
    ``BIAS_NOISE`` of its SEs (a check whose own noise is large bounds less than its figure
    says), the highest upper estimate any rung's bias check reached less this estimate (each
    is an estimate of an upper bound: a last rung below an earlier rung's is that much low),
    and the rises extrapolated by a bias that shrinks by ``DECAY`` per 4× temperatures (bias
    ∝ N^−0.2, as slow as heavy tails and funnels showed): the last rise × DECAY/(1 − DECAY),
    the rise over the whole ladder × DECAY^k/(1 − DECAY^k) for its k steps of 4×.
    """
    if unsizable(trajectory):
        return float("inf")
    return _sized(trajectory)


def _sized(trajectory) -> float:
    """:func:`shortfall` by the trajectory's own figures, whether or not it can be sized."""
    last = trajectory[-1]
    low = [0.0]
    if len(trajectory) > 1:
        low.append((last.log_z - trajectory[-2].log_z) * DECAY / (1 - DECAY))
    if len(trajectory) > 2:
        k = len(trajectory) - 1
        low.append((last.log_z - trajectory[0].log_z) * DECAY**k / (1 - DECAY**k))
    if np.isfinite(last.bias_gap):
        low.append(GAP_SCALE * last.bias_gap)
        if np.isfinite(last.bias_gap_se):
            low.append(last.bias_gap + BIAS_NOISE * last.bias_gap_se)
    low.append(_highest_upper(trajectory) - last.log_z)  # -inf without a bias check
    return float(max(low))


def bridge_figures(trajectory, log_z_bridge: float) -> tuple[float, float]:
    """(shortfall, excess) in nats of an estimate ``log_z_bridge`` that replaces the last
    rung's forward estimate f (the bridge of its forward and reverse anneals; module
    docstring): too low by at most f + :func:`shortfall` − the bridge (inf stays inf), too
    high by at most the bridge − (f − its stated excess − ``BIAS_NOISE`` of its SEs), each
    at least 0.

    >>> rungs = (Rung(4000, -0.20, 0.02, ("lag", "bias"), 0.15, 9_000_000, 2.0,
    ...               bias_gap_se=0.03),)
    >>> [round(x, 2) for x in bridge_figures(rungs, -0.05)]  # f + 2 × gap = 0.10 above
    [0.15, 0.19]
    """
    last = trajectory[-1]
    low = last.log_z + shortfall(trajectory) - log_z_bridge
    stated = last.excess if last.excess >= EXCESS_STATE else 0.0  # False when NaN
    noise = BIAS_NOISE * last.log_z_se if np.isfinite(last.log_z_se) else 0.0
    high = log_z_bridge - (last.log_z - stated - noise)
    return float(max(low, 0.0)), float(max(high, 0.0))


def _agreement(trajectory) -> float:
    """The spread of the last two rungs' bridges (their difference over √2, with the earlier's
    SE) where they agree within ``CLEAR_MOVE`` and what is missing can be sized; else NaN."""
    last = trajectory[-1]
    prev = trajectory[-2] if len(trajectory) > 1 else last._replace(bridge=np.nan)
    if abs(last.bridge - prev.bridge) <= CLEAR_MOVE and not unsizable(trajectory):  # NaN: no
        return float(np.hypot(np.nan_to_num(prev.bridge_se), (last.bridge - prev.bridge) / 2**0.5))
    return float("nan")


def bridge_clears(trajectory) -> bool:
    """Whether the last rung's bridge (``Rung.bridge``) comes without a warning: its stated
    interval (:func:`bridge_figures`) lies within ``BRIDGE_CLEAR`` nats either way, or the
    previous rung's bridge, an independent run over 4× fewer temperatures, lies within
    ``CLEAR_MOVE`` of it (the bridge no longer moves) while what is missing can be sized.

    >>> rungs = (Rung(4000, -0.20, 0.02, ("lag", "bias"), 0.15, 9_000_000, 2.0,
    ...               bias_gap_se=0.03, bridge=-0.05),)
    >>> bridge_clears(rungs), bridge_clears((rungs[0]._replace(bridge=0.05),))  # 0.19, 0.29
    (True, False)
    >>> bridge_clears((rungs[0]._replace(bridge=0.12), rungs[0]._replace(bridge=0.05)))
    True
    """
    interval = max(bridge_figures(trajectory, trajectory[-1].bridge))
    return bool(interval <= BRIDGE_CLEAR or np.isfinite(_agreement(trajectory)))


def bridge_se(trajectory) -> float:
    """The SE of the last rung's bridge: its own (``Rung.bridge_se``, which omits the check's
    MCMC draws' error); on a rung that failed a check, a reverse estimate's distance *below* the
    forward one (exact draws put it above: the draws err by at least that); for a bridge without
    a warning (a rung that passed, whose interval bounds the draws' pull, or
    :func:`bridge_clears`), the half-width of its stated interval (:func:`bridge_figures`; the
    truth may lie anywhere in it) and the agreeing bridges' spread.
    On the twisted 10-D banana no particle reaches the arms and every direction agrees low:
    half the interval's larger side left unwarned bridges beyond 2 SE + 0.02."""
    last = trajectory[-1]
    low, high = bridge_figures(trajectory, last.bridge)
    below = min(last.bias_gap, 0.0) if np.isfinite(last.bias_gap) and last.failed else 0.0
    spread, cleared = _agreement(trajectory), not last.failed or bridge_clears(trajectory)
    parts = (last.bridge_se, below, (low + high) / 2 if cleared else 0.0,
             spread if np.isfinite(spread) else 0.0)  # fmt: skip
    return float(np.sqrt(sum(p * p for p in parts)))


def remaining_gap(trajectory, *, max_gradients, bridge=None) -> tuple[Check, ...]:
    """The ``converged`` check of a ladder whose last rung failed a check (else empty): the
    remaining error in nats (:func:`shortfall`); about ``bridge`` where it is the estimate."""
    last = trajectory[-1]
    if not last.failed:
        return ()
    steps = ", ".join(f"{r.num_steps}{' (local steps)' if r.local_steps else ''}"
                      for r in trajectory)  # fmt: skip
    spent = (f"after {len(trajectory)} rung{'s' if len(trajectory) > 1 else ''} ({steps} "
             f"temperatures; {last.gradients / 1e6:.1f} M of max_gradients="
             f"{max_gradients / 1e6:.1f} M gradients)")  # fmt: skip
    parts, (move, noise) = [], _moved(trajectory)
    if len(trajectory) > 1:
        how = (" (its noise is not estimable: SE = inf)" if not np.isfinite(noise)
               else f" (± {noise:.2f}): it is still converging" if abs(move) > MOVED * noise
               else f" (± {noise:.2f}, within its noise)")  # fmt: skip
        parts.append(f"the estimate moved {move:+.2f} nats from {trajectory[-2].num_steps} to "
                     f"{last.num_steps} temperatures{how}")  # fmt: skip
    if bias_below(last.bias_gap, last.bias_gap_se):
        parts.append(f"the bias check's reverse anneal is {-last.bias_gap:.2f} nats below it "
                     "(its draws were no posterior draws, or a few weights lifted the estimate: "
                     "it bounds nothing)")  # fmt: skip
    elif np.isfinite(last.bias_gap):
        parts.append(f"the bias check's reverse anneal is {last.bias_gap:+.2f} nats from it")
    low = _sized(trajectory)
    how = ("twice the bias check's gap or the gap plus two of its SEs, the highest upper "
           "estimate of the ladder's bias checks, or the rises extrapolated by a bias that "
           "shrinks by ¾ per 4× temperatures")  # fmt: skip
    if unsizable(trajectory):
        verdict = (
            f"it may be too low by more than any figure here can size (shortfall = inf): "
            f"{last.outside:.0%} of its particles ended beyond the start's central 95% and still "
            f"predict their weights (lag {last.lag:.2f}), so mass lies farther out than any path "
            "went, in tails that neither the anneals nor MCMC draws reach"
            + (f" (the trajectory alone says up to {low:.2f} nats: {how})" if low > 0 else "")
        )
    elif low > 0:
        verdict = (
            f"it may be up to {low:.2f} nats too low ({how}; mass that no path reaches can make "
            "it more)"
        )
    else:
        verdict = (
            "neither shows a shortfall, so the failed checks may be false alarms on a converged "
            "estimate — or mass that no rung and no MCMC draw reached (tails heavier than the "
            "start's), which no check can size"
        )
    if last.excess >= EXCESS_STATE:  # False when NaN
        verdict += (
            f"; or up to {last.excess:.2f} nats too high, the fall of the estimate without its "
            "largest weights (a few dominant weights lift an estimate whose weights have no "
            "variance)"
        )
    said = "; ".join(parts) if parts else "no second rung fitted the budget"
    if bridge is not None:  # the verdict above is the forward estimate's; now the bridge's
        low, high = bridge_figures(trajectory, bridge)
        below = ("too low by more than any figure here can size" if not np.isfinite(low)
                 else f"up to {low:.2f} nats too low")  # fmt: skip
        verdict = (
            f"of the forward estimate: {verdict}. The estimate given, {bridge:.3f}, bridges this "
            f"forward anneal ({last.log_z:.3f}, a stochastic lower bound) and the bias check's "
            f"reverse anneal ({last.log_z + last.bias_gap:.3f}) by Bennett's acceptance ratio: "
            f"by the same figures it may be {below} or up to {high:.2f} nats too high"
        )
    short = low if bridge is not None or not unsizable(trajectory) else np.inf
    over = high if bridge is not None else last.excess
    return (Check("converged", f"{spent} the checks {', '.join(last.failed)} still fail; {said}: "
                  f"{verdict}. Remedy: a larger max_gradients, an initial distribution as wide and "
                  "heavy-tailed as the posterior, more leapfrog steps (num_leapfrog); for a "
                  "funnel, a non-centered parameterization.", short=short,
                  over=over if over >= EXCESS_STATE else np.nan),)  # fmt: skip
