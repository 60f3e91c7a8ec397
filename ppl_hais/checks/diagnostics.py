"""Trust checks for evidence estimates, in one place for every entry point (the estimator maths
they read lives in :mod:`ppl_hais.stats.estimators`).

An annealing run gives P log weights; log Ẑ = log mean exp(log w). Three things decide whether
its number can be trusted, and each is checked here:

* **The tail of the weights (Pareto k̂).** A generalized Pareto fit to the largest weights (PSIS,
  Vehtari et al. 2024, :mod:`ppl_hais.stats.pareto`). k̂ < ½: the weights have a finite variance and
  the delta-method standard error means what it says. ½ ≤ k̂ < 0.7: the variance is probably
  infinite; Ẑ is still unbiased but its distribution is so skewed that a typical log Ẑ lies
  *below* log Z by more than the SE says (measured: the 36-D Student-t product of experts and
  the 10-D funnel sit at k̂ ≈ 0.5–1 and −0.2 to −1 nats off). k̂ ≥ 0.7: the estimate is
  unreliable, and the standard error is reported as ``inf``: a self-normalized error bar can
  never exceed about 1 (it is (P·ΣW² − 1)/(P − 1) ≤ 1), however wrong the run. Both apply
  only when the weights show a tail at all (the largest weight over the mean above 3,
  :func:`~ppl_hais.stats.estimators.max_relative_weight`): a Pareto fit to weights that are all
  within a factor 3 of their mean extrapolates a tail the sample does not have (a small
  cluster of particles half a nat above the rest gave k̂ = 1.5–3.6 at an importance ESS of
  98%).
* **The importance effective sample size** (Σw)²/Σw² below 10% of the particles, where k̂
  cannot vouch for the SE (at k̂ < ½ the SE already says how few particles carry the estimate).
* **Lag** (:func:`lag_correlation`): whether the final positions still predict their weights.
  With transitions that keep up with the annealing, a particle's last move forgets how its
  weight was earned and the correlation is about 0; where the particles lag a target that
  widens (heavier tails than the initial distribution, a funnel's neck), the particles that
  went furthest out carry the largest weights, and the mass none reached is missing from an
  estimate whose weights look healthy (measured in docs/trust.md: the 36-D Student-t product
  of experts, −0.9 nats at k̂ ≈ 0.4 and an SE of 0.07; Spearman ρ 0.28–0.38 there, ≤ 0.15 on
  models where the estimate is right). It warns only when the target reaches beyond the
  initial distribution (:func:`outside_fraction`): a lagging contraction from a wide start
  (centered eight schools from its prior: ρ 0.4–0.65, right within its SE) leaves nothing
  unreached.
* **A bias check**, when the run has one: the gap between a forward (stochastic lower) and a
  reverse (stochastic upper) estimate (bidirectional Monte Carlo, Grosse et al. 2015).

Failed checks are kept with the result and raised as :class:`EvidenceWarning` through Python's
``warnings``, each naming the check, its figure and the remedy.

Example
-------
>>> import numpy as np
>>> from ppl_hais.checks import diagnostics
>>> rng = np.random.default_rng(0)
>>> diagnostics.pareto_khat(rng.normal(size=1000)) < diagnostics.KHAT_WARN  # light tail
True
>>> diagnostics.evidence_checks(khat=0.9, ess=5.0, num_particles=100)[0].name
'pareto_k'
"""

from __future__ import annotations

import numpy as np

from ..stats.estimators import EXCESS_TOP, importance_ess, log_mean_exp_se, pool
from ..stats.weights import MIN_PARTICLES_KHAT, lag_correlation, outside_fraction, pareto_khat
from .record import Check, EvidenceWarning, user_stacklevel, warn

__all__ = [
    "Check", "EvidenceWarning", "KHAT_UNRELIABLE", "KHAT_WARN", "ESS_FRACTION", "bias_below",
    "evidence_checks", "importance_ess", "khat_applies", "lag_correlation", "outside_fraction",
    "log_mean_exp_se", "pareto_khat", "pool", "user_stacklevel", "warn",
]  # fmt: skip

KHAT_WARN = 0.5  # above: the weights' variance is probably infinite (PSIS)
KHAT_UNRELIABLE = 0.7  # above: the estimate is unreliable; the SE is reported as inf
ESS_FRACTION = 0.1  # importance ESS below this fraction of the particles warns
BOUNDED_WEIGHT = 3.0  # largest weight at most this × the mean: no tail for k̂ to judge
GAP_FLOOR = 0.1  # nats: a bidirectional gap below this never warns
# the bias check warns above BIAS_FLOOR nats and BIAS_NOISE of its SEs (derived on the trust
# suite, docs/trust_suite.md: the funnel's 16,000-temperature runs 0.10–0.12 nat low had gaps of
# 0.058–0.064 at 2.1 SEs; converged runs' gaps stay within ±0.05)
BIAS_FLOOR = 0.05
BIAS_NOISE = 2.0
BIAS_INVALID = 1.0  # nats below the estimate (and 2·BIAS_NOISE SEs): :func:`bias_invalid`
LAG_WARN = 0.2  # Spearman ρ(log w, log f − log q) at or above this warns (and ≥ 4/√P)
LAG_WITH_KHAT = (0.1, 0.3)  # ρ ≥ 0.1 (and 2.5/√P) together with k̂ ≥ 0.3 also warns
DISCRETE_ACCEPT_WARN = 0.005  # mixed_kernel's integer moves taken in fewer steps: warns
EXCESS_STATE = 0.05  # nats: a failed weight check states an excess of at least this
NONFINITE_WARN = 0.01  # proposals' share with a NaN/inf density or gradient that warns
OUTSIDE_WARN = 0.1  # the lag check applies when this fraction of the final particles lies
# outside the initial distribution's central 95% (twice the 5% of the initial draws)


def _too_high(up, max_weight, num_particles) -> str:
    """The clause a weight check adds when a few particles' weights may have lifted the
    estimate: by :func:`~ppl_hais.stats.estimators.excess`, at least ``EXCESS_STATE`` nats."""
    if up is None or not up >= EXCESS_STATE:
        return ""
    carried = (
        f" (the largest carries {max_weight / num_particles:.0%} of the weights)"
        if max_weight is not None and np.isfinite(max_weight) and num_particles
        else ""
    )
    return (
        f"; or up to {up:.2f} nats too high: the estimate falls by that much without its "
        f"{EXCESS_TOP} largest weights{carried}"
    )


def _stated(excess) -> float:
    """The excess a weight check states (NaN below :data:`EXCESS_STATE`: none stated)."""
    return float(excess) if excess is not None and excess >= EXCESS_STATE else float("nan")


def khat_applies(khat, max_weight=None) -> bool:
    """Whether a Pareto k̂ says something about the error bar: it was estimated, and the
    sample shows a tail (the largest weight more than :data:`BOUNDED_WEIGHT` times the mean).

    With every weight within a factor 3 of the mean the delta-method variance is that of a
    bounded sample, and the tail fit sees only how the top 3√P weights are spaced: two clusters
    half a nat apart made it report k̂ = 1.5–3.6 at an importance ESS of 98% (20 of 20 correct
    runs of a two-mode mixture warned). A real heavy tail (k ≥ ½) puts its largest of 512
    weights 10–25× above the mean, far past the bound.
    """
    if khat is None or np.isnan(khat):
        return False
    return max_weight is None or not max_weight <= BOUNDED_WEIGHT


def lag_threshold(num_particles: int, khat: float | None = None) -> float:
    """The lag correlation that warns: 0.2, or 4 noise standard deviations (4/√P) if larger.

    With k̂ ≥ 0.3 it is 0.1 (or 2.5/√P): k̂ from P = 512 weights has a sampling spread of
    about 0.1–0.15, so a k̂ of 0.3 is consistent with the infinite-variance regime (k ≥ ½)
    that the k̂ check alone catches only above 0.5, and a significant lag says why the tail
    is there (measured: the 10-D funnel's runs at k̂ 0.34–0.5 and ρ 0.15–0.17 were 0.3 nats
    low; the two-mode mixture's runs at k̂ up to 0.43 had ρ ≤ 0.14 and were right).
    """
    root = np.sqrt(max(num_particles, 1))
    if khat is not None and np.isfinite(khat) and khat >= LAG_WITH_KHAT[1]:
        return max(LAG_WITH_KHAT[0], 2.5 / root)
    return max(LAG_WARN, 4.0 / root)


def evidence_checks(
    *,
    khat: float | None = None,
    max_weight: float | None = None,
    excess: float | None = None,
    ess: float | None = None,
    num_particles: int = 0,
    num_nonfinite: int = 0,
    num_evaluations: int | None = None,
    nonfinite_weighted: float | None = None,
    gap: float | None = None,
    gap_se: float | None = None,
    disagreement: float | None = None,
    bias_gap: float | None = None,
    bias_gap_se: float | None = None,
    lag: float | None = None,
    outside: float | None = None,
    discrete_acceptance: float | None = None,
    remedy: str | None = None,
) -> tuple[Check, ...]:
    """The failed trust checks of an evidence estimate, each a :class:`~.record.Check` whose
    sentence states its figure and remedy.

    Each check runs when its figure is given: ``khat`` (Pareto k̂ of the weights; ignored when
    ``max_weight``, :func:`~ppl_hais.stats.estimators.max_relative_weight`, shows no tail:
    :func:`khat_applies`; a failed k̂ states ``excess``, :func:`~ppl_hais.stats.estimators.excess`,
    as how far too high the estimate may be), ``ess``
    (importance ESS of ``num_particles``), ``num_nonfinite`` of ``num_evaluations``
    proposals (over 1% warns; or ``nonfinite_weighted``'s share, weighed by the particles'
    weights: :func:`~ppl_hais.stats.estimators.weighted_nonfinite`), ``gap``/``gap_se`` (a reverse
    run's estimate minus the forward one, and its noise), ``disagreement`` (pooled chains'
    spread over their own SE; > 3 warns),
    ``bias_gap``/``bias_gap_se`` (:mod:`ppl_hais.estimate.bias`: a reverse anneal from MCMC
    draws minus the estimate; above 0.05 nats and 2 of its SE warns, stating the gap), ``lag``
    (:func:`lag_correlation`; warns at :func:`lag_threshold` when ``outside``, the
    :func:`outside_fraction`, is at least 0.1 or unknown), ``discrete_acceptance`` (the
    fraction of steps whose integer-coordinate move was taken, :func:`~ppl_hais.mixed_kernel`;
    below 0.5% warns). ``remedy``:
    what helps this estimator when the weights degenerate (default: the annealer's).
    """
    more = remedy or (
        "more temperatures (num_steps), more particles, or initial='laplace' / a fitted guide"
    )
    # a k̂ below ½ says the weights' variance is finite: the SE then states what a low ESS
    # means (measured: an enumerated mixture at ESS < 10% was right within its SE 10 of 10
    # times, and warned each time), so the ESS check speaks only where k̂ cannot
    se_valid = khat is not None and khat_applies(khat, max_weight) and khat < KHAT_WARN
    out = [
        _khat_check(khat, max_weight, excess, num_particles, more),
        _ess_check(ess, num_particles, se_valid, more),
        _nonfinite_check(num_nonfinite, num_evaluations, nonfinite_weighted),
        _gap_check(gap, gap_se, more),
        _bias_check(bias_gap, bias_gap_se, more),
        _lag_check(lag, outside, khat, max_weight, num_particles),
        _discrete_check(discrete_acceptance),
        _chains_check(disagreement, more),
    ]
    return tuple(check for check in out if check is not None)


def _khat_check(khat, max_weight, excess, num_particles, more) -> Check | None:
    if khat is None:
        return None
    if np.isnan(khat):
        return Check(
            "pareto_k",
            f"k̂ cannot be estimated from {num_particles} particles (fewer than "
            f"{MIN_PARTICLES_KHAT}), so the tail of the weights and the error bar are unchecked. "
            "Remedy: more particles.",
        )
    if khat == np.inf:
        return Check(
            "pareto_k",
            f"Pareto k̂ = {khat} (fewer than 5 non-zero weights to fit a "
            f"tail): the weights have collapsed; the error bar is meaningless. "
            f"Remedy: {more}.", figure=khat,
        )
    if not khat_applies(khat, max_weight):
        return None  # bounded weights: the tail fit has nothing to judge
    if khat >= KHAT_UNRELIABLE:
        return Check(
            "pareto_k",
            f"Pareto k̂ = {khat:.2f} ≥ {KHAT_UNRELIABLE}: the importance weights are "
            "so heavy-tailed that the estimate is unreliable (typically too low) and its "
            f"standard error is reported as inf{_too_high(excess, max_weight, num_particles)}. "
            f"Remedy: {more}.", figure=khat, over=_stated(excess),
        )
    if khat >= KHAT_WARN:
        return Check(
            "pareto_k",
            f"Pareto k̂ = {khat:.2f} ≥ {KHAT_WARN}: the importance weights probably "
            "have an infinite variance, so the standard error understates the error and the "
            "estimate is likely biased low (heavy tails or regions the particles rarely "
            f"reach){_too_high(excess, max_weight, num_particles)}. Remedy: {more}; an initial "
            "distribution with heavier tails (initial='laplace_t').", figure=khat,
            over=_stated(excess),
        )
    return None


def _ess_check(ess, num_particles, se_valid, more) -> Check | None:
    if ess is None:
        return None
    if np.isfinite(ess) and ess < ESS_FRACTION * num_particles and not se_valid:
        return Check(
            "ess",
            f"importance ESS = {ess:.1f} of {num_particles} particles "
            f"(< {ESS_FRACTION:.0%}): few particles carry the estimate. Remedy: {more}.",
            figure=ess,
        )
    if not np.isfinite(ess):
        return Check("ess", f"the importance ESS is {ess} (no finite weight). Remedy: {more}.",
                     figure=ess)  # fmt: skip
    return None


def _nonfinite_check(num_nonfinite, num_evaluations, nonfinite_weighted) -> Check | None:
    share = num_nonfinite / num_evaluations if num_nonfinite and num_evaluations else 0.0
    if not (share if nonfinite_weighted is None else nonfinite_weighted) > NONFINITE_WARN:
        return None
    weighted = ("" if nonfinite_weighted is None else
                f"; {nonfinite_weighted:.1%} weighed by the particles' final weights")
    return Check(
        "nonfinite",
        f"{num_nonfinite} proposals had a NaN/inf density or gradient "
        f"({share:.1%}{weighted}): the model is not finite where the particles go. "
        "Remedy: check the model's support and parameterization.",
        figure=share if nonfinite_weighted is None else nonfinite_weighted,
    )


def _gap_check(gap, gap_se, more) -> Check | None:
    if gap is not None and np.isfinite(gap):
        tol = max(GAP_FLOOR, 3.0 * (gap_se if gap_se is not None and np.isfinite(gap_se) else 0))
        if abs(gap) > tol:
            return Check(
                "bidirectional_gap",
                f"the reverse (upper) estimate exceeds the forward (lower) one "
                f"by {gap:.3f} nats (> {tol:.3f}): the annealing is far from equilibrium and "
                f"log Z may be anywhere in between. Remedy: {more}.", figure=gap, short=gap,
            )
    elif gap is not None:
        return Check("bidirectional_gap", f"the gap is {gap}: the reverse run failed. Remedy: "
                     f"{more}.", figure=gap)  # fmt: skip
    return None


def _bias_check(bias_gap, bias_gap_se, more) -> Check | None:
    if bias_gap is None:
        return None
    if not np.isfinite(bias_gap):
        return Check(
            "bias",
            f"the reverse anneal of the bias check gave {bias_gap} (no finite weight): the "
            f"posterior draws it started from lie where the path cannot reach. Remedy: {more}.",
            figure=bias_gap, short=np.inf,
        )
    noise = bias_gap_se if bias_gap_se is not None and np.isfinite(bias_gap_se) else 0.0
    tol = max(BIAS_FLOOR, BIAS_NOISE * noise)
    if not bias_gap > tol:
        return None
    return Check(
        "bias",
        f"the reverse anneal from MCMC posterior draws is {bias_gap:.2f} nats "
        f"above the estimate (more than {tol:.2f}, {BIAS_NOISE:g} times its noise): the "
        f"estimate may be up to {2 * bias_gap:.2f} nats too low (log Z lies between the "
        "two when the draws are exact; draws that miss mass too make the gap smaller "
        "than the shortfall, by up to half on a funnel). Remedy: more temperatures or "
        "leapfrog steps per temperature (num_leapfrog), an initial distribution as wide "
        "and heavy-tailed as the posterior; for a funnel, a non-centered "
        "parameterization.", figure=bias_gap, short=2 * bias_gap,
    )


def _lag_check(lag, outside, khat, max_weight, num_particles) -> Check | None:
    lag_limit = lag_threshold(num_particles, khat if khat_applies(khat, max_weight) else None)
    beyond = outside is None or not np.isfinite(outside) or outside >= OUTSIDE_WARN
    if not (lag is not None and np.isfinite(lag) and lag >= lag_limit and beyond):
        return None
    with_k = "" if lag >= lag_threshold(num_particles) else f", with Pareto k̂ = {khat:.2f}"
    where = (
        ""
        if outside is None or not np.isfinite(outside)
        else f"; {outside:.0%} of them ended outside the initial distribution's central 95%"
    )
    return Check(
        "lag",
        f"the final particles still predict their weights (rank correlation "
        f"{lag:.2f} ≥ {lag_limit:.2f} between the log weights and log f − log q"
        f"{with_k}{where}): the transitions did not keep up with the annealing, so mass the "
        "particles never reached (tails heavier than the initial distribution's, a funnel's "
        "neck, a target much wider than the start) is missing and the estimate is probably "
        "too low by more than its SE. Remedy: an initial distribution at least as wide and "
        "heavy-tailed as the target (initial='laplace_t'), more temperatures or leapfrog steps "
        "per temperature (num_leapfrog); for a funnel, a non-centered parameterization.",
        figure=lag,
    )


def _discrete_check(discrete_acceptance) -> Check | None:
    if discrete_acceptance is None or discrete_acceptance >= DISCRETE_ACCEPT_WARN:
        return None
    return Check(
        "discrete",
        f"the Metropolis moves of the integer coordinates were taken in "
        f"{discrete_acceptance:.2%} of the steps (< {DISCRETE_ACCEPT_WARN:.1%}): those "
        "coordinates hardly leave their initial draws, so the annealing cannot follow the "
        "posterior in them and the estimate may miss most of its mass. Remedy: marginalize "
        "the discrete variable out (a sum in the model, or NumPyro's enumeration), or "
        "reparameterize it so that neighbouring values are both plausible.",
        figure=discrete_acceptance,
    )


def _chains_check(disagreement, more) -> Check | None:
    if disagreement is None or not disagreement > 3.0:
        return None
    return Check(
        "chains",
        f"the chains' estimates spread {disagreement:.1f}× more than their own "
        "error bars say (a mode or tail that some runs missed); the pooled SE uses the "
        f"spread. Remedy: {more}.", figure=disagreement,
    )


def bias_below(gap, gap_se) -> bool:
    """Whether a bias check's reverse (upper) estimate lies *below* the forward one beyond its
    noise (``BIAS_FLOOR`` nats and ``BIAS_NOISE`` SEs). From posterior draws the reverse
    estimate lies above in expectation, so either its draws were not posterior draws or a few
    dominant forward weights lifted the forward estimate: either way the check bounds nothing.
    False when NaN (no check)."""
    noise = gap_se if np.isfinite(gap_se) else 0.0
    return bool(gap < -max(BIAS_FLOOR, BIAS_NOISE * noise))


def bias_invalid(gap, gap_se) -> bool:
    """Whether a bias check's reverse (upper) estimate lies so far *below* the forward one that
    its draws were no posterior draws (an MCMC chain that wandered where the density is tiny,
    its reverse weight dominating): it then bounds nothing, neither warns nor vouches."""
    return bool(gap < -max(BIAS_INVALID, 2 * BIAS_NOISE * (gap_se if gap_se < np.inf else 0)))
