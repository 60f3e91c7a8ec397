"""The trust checks of a bridge estimate: the draws' own (divergences, ESS, split-R̂, the
chains' disagreement, the fixed point's convergence), and the cross-check against a forward
anneal (a stochastic lower bound of log Z that needs no draws) and a reverse anneal from the
draws. Each failed check is one sentence with its remedy, raised as an
:class:`~ppl_hais.EvidenceWarning` by the caller.

Example
-------
>>> from ppl_hais.bridge.checks import bridge_checks
>>> bridge_checks(num_draws=4000, num_chains=4, min_ess=1500.0, rhat=1.002)
()
>>> bridge_checks(num_draws=4000, num_chains=4, min_ess=1500.0, rhat=1.2)[0][:17]
'rhat: split-R̂ = '
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..checks import diagnostics
from ..checks.record import Check
from ..stats.estimators import disagreement

__all__ = ["CrossCheck", "bridge_checks", "cross_checks", "tolerance"]

# the draws' smallest effective sample size (bridge half) below this many per chain warns: 50 of
# the half is Vehtari et al.'s (2021) 100 per chain of the whole run
ESS_WARN_PER_CHAIN = 50.0
DIVERGENCE_WARN = 0.0025  # divergent transitions above this fraction of the draws warn
RHAT_WARN = 1.05  # a coordinate's split-R̂ at or above this warns: the chains disagree
CROSS_FLOOR = 0.1  # nats: a cross-check difference below this never warns


class CrossCheck(NamedTuple):
    """The bridge estimate's cross-check by annealing (:func:`bridge_evidence`)."""

    log_z_forward: float  # forward HAIS from the prior/Laplace start: a stochastic lower bound
    log_z_forward_se: float
    log_z_reverse: float  # reverse anneal from the user's draws (an upper bound if they're exact)
    log_z_reverse_se: float
    forward_checks: tuple  # the forward run's own failed checks
    gradients: int  # model gradients both anneals spent


_REMEDY = (
    "draw longer chains, reparameterize where the sampler struggles (non-centered hierarchies), "
    "or check the draws with cross_check=True / the annealing estimate (php.sample_hais, "
    "phn.HAIS)"
)


def bridge_checks(
    *, divergences=None, num_draws=0, num_chains=1, converged=True, max_iter=1000, min_ess=None,
    rhat=None, chain_log_z=None, chain_log_z_se=None,
) -> tuple[Check, ...]:  # fmt: skip
    """The failed checks of a bridge estimate (:class:`~ppl_hais.checks.record.Check`), each
    stating its figure and remedy."""
    out = []
    if divergences and divergences > DIVERGENCE_WARN * max(num_draws, 1):
        out.append(Check(
            "divergences",
            f"{divergences} of the {num_draws} draws followed divergent "
            f"transitions (> {DIVERGENCE_WARN:.1%}): the sampler could not enter regions of "
            "high curvature (a funnel's neck), so the draws, and an estimate built on them, "
            "miss their mass. Remedy: a non-centered parameterization, a higher target_accept; "
            "or the annealing estimate, which needs no draws.", figure=divergences,
        ))
    if not converged:
        out.append(Check(
            "converged",
            f"the bridge's fixed-point iteration did not settle in {max_iter} steps: "
            "the proposal and the posterior barely overlap, so the estimate is meaningless and "
            "its SE is reported as inf. Remedy: method='warp3', or the annealing estimate.",
        ))
    least = ESS_WARN_PER_CHAIN * max(int(num_chains), 1)
    if min_ess is not None and not min_ess >= least:
        out.append(Check(
            "ess",
            f"the draws' effective sample size is {min_ess:.0f} in their worst coordinate "
            f"(< {least:.0f}, {ESS_WARN_PER_CHAIN:.0f} per chain in the half that enters the "
            "bridge): the chains mix too slowly for the draws, or the error bar, to be trusted. "
            f"Remedy: {_REMEDY}.", figure=min_ess,
        ))
    if rhat is not None and np.isfinite(rhat) and rhat >= RHAT_WARN:
        out.append(Check(
            "rhat",
            f"split-R̂ = {rhat:.3f} (≥ {RHAT_WARN}): the chains disagree about the posterior "
            "(a mode some chains missed, or chains not yet converged), so the draws cannot stand "
            f"for it. Remedy: {_REMEDY}.", figure=rhat,
        ))
    if chain_log_z is not None:
        ratio = disagreement(chain_log_z, chain_log_z_se)
        if np.isfinite(ratio) or np.isinf(ratio):
            out.extend(diagnostics.evidence_checks(disagreement=ratio, remedy=_REMEDY))
    return tuple(out)



def tolerance(*ses) -> float:
    """What two estimates may differ by before a cross-check warns: 3 × their combined SE,
    at least ``CROSS_FLOOR`` nats (infinite when no SE is finite)."""
    ses = [s for s in ses if np.isfinite(s)]
    return max(CROSS_FLOOR, 3.0 * float(np.sqrt(np.sum(np.square(ses))))) if ses else np.inf


def cross_checks(log_z, log_z_se, cc: CrossCheck) -> tuple[Check, ...]:
    """The cross-check's failed checks: the bridge estimate below the forward anneal's (a
    stochastic lower bound), above the reverse anneal's from the same draws, or the reverse
    anneal below the forward one (the draws miss mass the forward anneal found)."""

    tol = tolerance
    out = []
    lower, upper = cc.log_z_forward, cc.log_z_reverse
    if lower - log_z > tol(log_z_se, cc.log_z_forward_se):
        out.append(Check(
            "cross_check",
            f"the bridge estimate lies {lower - log_z:.2f} nats below the forward "
            "anneal's, a stochastic lower bound of log Z that needs no draws: the draws miss "
            f"posterior mass (a mode, a tail, a funnel's neck), and the estimate is at least "
            f"about {lower - log_z:.2f} nats too low. Remedy: {_REMEDY}.",
            figure=lower - log_z, short=lower - log_z,
        ))
    if log_z - upper > tol(log_z_se, cc.log_z_reverse_se):
        out.append(Check(
            "cross_check",
            f"the bridge estimate lies {log_z - upper:.2f} nats above the reverse "
            "anneal from the same draws (an upper bound of log Z when the draws are exact): "
            f"the proposal or the draws misrepresent the posterior. Remedy: {_REMEDY}.",
            figure=log_z - upper, over=log_z - upper,
        ))
    if lower - upper > tol(cc.log_z_forward_se, cc.log_z_reverse_se):
        out.append(Check(
            "cross_check",
            f"the reverse anneal from the draws lies {lower - upper:.2f} nats "
            "below the forward anneal: the draws do not cover the posterior the forward anneal "
            f"found (a missed mode or tail). Remedy: {_REMEDY}.", figure=lower - upper,
        ))
    return tuple(out)
