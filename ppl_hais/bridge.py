"""Bridge sampling: the evidence from posterior draws a user already has.

Given draws θ₁…θ_N from a posterior p(θ | y) ∝ q(θ) = p(y | θ) p(θ) (here: flat unconstrained
vectors, several MCMC chains) and the unnormalized log density log q, the **optimal bridge**
of Meng & Wong (1996) estimates Z = ∫ q from both directions at once: a proposal g (a Gaussian
fitted to the first half of each chain) is sampled N₂ times, the second half of each chain gives
N₁ posterior draws, and Z solves the fixed point (Gronau et al. 2017, eq. 4)

    Z = [1/N₂ Σⱼ q(θ̃ⱼ) / (s₁ q(θ̃ⱼ) + s₂ Z g(θ̃ⱼ))] / [1/N₁ Σᵢ g(θᵢ) / (s₁ q(θᵢ) + s₂ Z g(θᵢ))],

s₁ = N₁,eff / (N₁,eff + N₂) with N₁,eff the draws' median effective sample size (as R's
``bridgesampling``). ``method="warp3"`` (Meng & Schilling 2002) bridges a standard normal to
the posterior standardized by the proposal's location and scale *and symmetrized*
(½[q(μ + Lη) + q(μ − Lη)]·det L): it matches the first three moments, not two, at twice the
density evaluations; ``method="student_t"`` uses a multivariate t (5 degrees of freedom) as
the proposal, for heavy tails.

**Error bar**: the relative mean squared error of Frühwirth-Schnatter (2004, as
``bridgesampling::error_measures``), whose posterior-draw term uses the effective, not the
nominal, number of draws of the chains (:func:`~ppl_hais.estimators.chain_ess`); the SE of
log Ẑ is its square root (delta method). It is the Monte Carlo error given the draws; draws
that never visited part of the posterior (a mode, a funnel's neck) make an estimate that is
off by more than any error bar. Hence the checks, each an :class:`~ppl_hais.EvidenceWarning`
naming its remedy: the draws' ESS and split-R̂, the per-chain estimates' disagreement, the
fixed point's convergence, and, with
:func:`bridge_evidence`'s ``cross_check=True``, a forward anneal (a stochastic lower bound of
log Z that needs no draws) and a reverse anneal from the draws beside the bridge estimate.

The Pareto k̂ of the proposal's importance weights q/g is reported, not warned on: the
bridge's summands are bounded (by 1/s₁ and 1/s₂), so a proposal with lighter tails than the
posterior does not give it the infinite variance it gives importance sampling (measured,
docs/bridge.md: k̂ up to 0.8 on right answers; the wrong runs with k̂ ≥ 0.7 failed the ESS
check too).

Example
-------
>>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
>>> rng = np.random.default_rng(0)  # "MCMC draws": exact ones from N(1, 0.5²) in 2-D
>>> draws = 1.0 + 0.5 * rng.normal(size=(4, 1000, 2))
>>> log_q = lambda z: -0.5 * jnp.sum(((z - 1.0) / 0.5) ** 2)  # Z = 2π · 0.25
>>> res = ph.bridge_sampling(jax.random.key(0), log_q, draws)
>>> bool(abs(res.log_z - np.log(2 * np.pi * 0.25)) < 4 * res.log_z_se), res.warning
(True, False)
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from . import diagnostics
from .estimators import chain_ess, disagreement, split_rhat
from .precision import float64
from .target import Gaussian, StudentT

__all__ = ["BridgeResult", "CrossCheck", "bridge_evidence", "bridge_sampling", "MIN_DRAWS"]

MIN_DRAWS = 100  # draws per chain below this are refused: half of them fit the proposal
METHODS = ("normal", "warp3", "student_t")
STUDENT_DF = 5.0
# the draws' smallest effective sample size (bridge half) below this many per chain warns: 50 of
# the half is Vehtari et al.'s (2021) 100 per chain of the whole run
ESS_WARN_PER_CHAIN = 50.0
DIVERGENCE_WARN = 0.0025  # divergent transitions above this fraction of the draws warn
RHAT_WARN = 1.05  # a coordinate's split-R̂ at or above this warns: the chains disagree
CROSS_FLOOR = 0.1  # nats: a cross-check difference below this never warns
NUM_REVERSE = 256  # draws annealed back by the cross-check
_CHUNK = 4096  # density evaluations per compiled batch (bounds memory on large models)




class CrossCheck(NamedTuple):
    """The bridge estimate's cross-check by annealing (:func:`bridge_evidence`)."""

    log_z_forward: float  # forward HAIS from the prior/Laplace start: a stochastic lower bound
    log_z_forward_se: float
    log_z_reverse: float  # reverse anneal from the user's draws (an upper bound if they're exact)
    log_z_reverse_se: float
    forward_checks: tuple  # the forward run's own failed checks
    gradients: int  # model gradients both anneals spent


@dataclass(frozen=True, eq=False)
class BridgeResult:
    """The bridge-sampling estimate of log Z and everything needed to judge it.

    Attributes
    ----------
    log_z, log_z_se : float
        The estimate and its standard error (Frühwirth-Schnatter's relative error, counting the
        chains' autocorrelation).
    checks : tuple of str
        The failed trust checks, each raised as an :class:`~ppl_hais.EvidenceWarning`.
    method : str
        ``"normal"``, ``"warp3"`` or ``"student_t"``.
    iterations : (K,) array
        log Ẑ after each step of the fixed-point iteration (the first is the start).
    converged : bool
        Whether the iteration met its tolerance within ``max_iter`` steps.
    ess : float
        The draws' median effective sample size over coordinates (bridge half): N₁,eff.
    min_ess, rhat : float
        The draws' smallest ESS and largest split-R̂ over coordinates (bridge half).
    pareto_k : float
        Pareto k̂ of the proposal's importance weights q/g at its own draws.
    chain_log_z, chain_log_z_se : (C,) arrays
        Each chain's bridge estimate (the shared proposal draws, that chain's draws).
    num_draws, num_proposal : int
        N₁ (posterior draws in the bridge) and N₂ (proposal draws).
    evaluations : int
        Log-density evaluations (no gradients are needed).
    proposal : Gaussian or StudentT
        The fitted proposal (location and scale; warp3 standardizes by them).
    cross_check : CrossCheck or None
        With ``cross_check=True``: the forward and reverse anneals beside the estimate.
    """

    log_z: float
    log_z_se: float
    checks: tuple
    method: str
    iterations: np.ndarray
    converged: bool
    ess: float
    min_ess: float
    rhat: float
    pareto_k: float
    chain_log_z: np.ndarray
    chain_log_z_se: np.ndarray
    num_draws: int
    num_proposal: int
    evaluations: int
    proposal: Gaussian
    wall_time: float = float("nan")
    cross_check: CrossCheck | None = None
    divergences: int | None = None  # the sampler's divergent transitions among the draws

    @property
    def warning(self) -> bool:
        return bool(self.checks)

    @property
    def log_z_upper(self) -> float:
        """The cross-check's reverse anneal from the draws; NaN without a cross-check."""
        return float("nan") if self.cross_check is None else self.cross_check.log_z_reverse

    @property
    def log_z_lower(self) -> float:
        """The cross-check's forward anneal; NaN without a cross-check."""
        return float("nan") if self.cross_check is None else self.cross_check.log_z_forward

    @property
    def bias_gap(self) -> float:
        """``log_z_upper − log_z`` in nats (NaN without a cross-check)."""
        return self.log_z_upper - self.log_z

    @property
    def shortfall(self) -> float:
        """Nats the estimate lies below the forward anneal's lower estimate, when by more than
        their noise (the ``cross_check`` warning; else 0; NaN without a cross-check): the least
        it is too low by, on the forward run's word."""
        if self.cross_check is None:
            return float("nan")
        below = self.log_z_lower - self.log_z
        noise = _tolerance(self.log_z_se, self.cross_check.log_z_forward_se)
        return float(below) if below > noise else 0.0

    def summary(self) -> str:
        """Plain-text summary: estimate, error bar, the draws' and the proposal's checks."""
        lines = [
            f"log Z = {self.log_z:.4f} ± {self.log_z_se:.4f} (bridge sampling, {self.method}; "
            f"{'converged' if self.converged else 'NOT converged'} in "
            f"{len(self.iterations) - 1} iterations)",
            f"  draws: {self.num_draws} in the bridge, ESS median {self.ess:.0f} / min "
            f"{self.min_ess:.0f}, split-R̂ max {self.rhat:.3f}"
            f"{'' if self.divergences is None else f', {self.divergences} divergent'}; "
            f"proposal: {self.num_proposal} "
            f"draws, Pareto k̂ {self.pareto_k:.2f}",
            "  per chain: "
            + ", ".join(f"{z:.3f} ± {s:.3f}" for z, s in zip(self.chain_log_z,
                                                            self.chain_log_z_se, strict=True)),
            f"  density evaluations: {self.evaluations}  wall time: {self.wall_time:.2f} s",
        ]  # fmt: skip
        cc = self.cross_check
        if cc is not None:
            lines.append(
                f"  cross-check: forward anneal {cc.log_z_forward:.4f} ± {cc.log_z_forward_se:.4f}"
                f" (lower), reverse from the draws {cc.log_z_reverse:.4f} ± "
                f"{cc.log_z_reverse_se:.4f}; {cc.gradients} gradients"
            )
        lines += [f"  WARNING {c}" for c in self.checks]
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def to_arviz(self):
        """ArviZ output (a DataTree on ArviZ ≥ 1, an InferenceData on 0.x) whose sample_stats
        read as every other evidence estimate here (``log_marginal_likelihood`` per chain and
        its SE, the checks), so :func:`ppl_hais.compare_evidence` takes it."""
        from .arviz import from_bridge

        return from_bridge(self)


def _batched(log_density):
    one = jax.jit(jax.vmap(log_density))

    def evaluate(z):
        z = np.asarray(z, dtype=float)
        out = [np.asarray(one(jnp.asarray(z[i : i + _CHUNK]))) for i in range(0, len(z), _CHUNK)]
        v = np.concatenate(out).astype(float) if out else np.zeros(0)
        return np.where(np.isnan(v), -np.inf, v)

    return evaluate


def _log_mean_exp(x) -> float:
    return float(logsumexp(x) - np.log(len(x)))


def _iterate(l1, l2, s1, s2, start, tol, max_iter):
    """The fixed point of the optimal bridge in logs: l1 = log q − log g at the posterior
    draws, l2 at the proposal draws (both shifted by the same constant). Returns the path
    of log Ẑ (start first) and whether it converged."""
    log_s1, log_s2 = np.log(s1), np.log(s2)
    path = [start]
    log_r = start
    for _ in range(int(max_iter)):
        num = _log_mean_exp(l2 - np.logaddexp(log_s1 + l2, log_s2 + log_r))
        den = _log_mean_exp(-np.logaddexp(log_s1 + l1, log_s2 + log_r))
        new = num - den
        path.append(new)
        if not np.isfinite(new):
            return np.array(path), False
        if abs(new - log_r) < tol:
            return np.array(path), True
        log_r = new
    return np.array(path), False


def _relative_se(l1, l2, s1, s2, log_z, ess_of) -> float:
    """Frühwirth-Schnatter's (2004) relative error of Ẑ: the proposal term with N₂ independent
    draws, the posterior term with the effective size of its chains' draws (``ess_of``)."""
    p2 = np.exp(np.clip(l2 - log_z, -700, 700))  # q/(Z g) at the proposal draws
    f1 = p2 / (s1 * p2 + s2)
    f2 = 1.0 / (s1 * np.exp(np.clip(l1 - log_z, -700, 700)) + s2)  # g/(s1 q/Z + s2 g), /g
    term1 = np.var(f1, ddof=1) / (len(f1) * np.mean(f1) ** 2)
    n_eff = ess_of(f2)
    n_eff = f2.size if not np.isfinite(n_eff) else min(n_eff, f2.size)
    term2 = np.var(f2, ddof=1) / (n_eff * np.mean(f2) ** 2)
    return float(np.sqrt(term1 + term2))


def _fit_proposal(fit, method):
    mean = fit.mean(axis=0)
    cov = np.atleast_2d(np.cov(fit, rowvar=False))
    eig = np.linalg.eigvalsh(cov)
    if not eig[0] > 1e-12 * max(eig[-1], 1e-300):
        raise ValueError(
            "the draws' covariance is singular (a coordinate that never moves, or fewer draws "
            f"than the {len(mean)} dimensions): bridge sampling needs draws that vary in every "
            "coordinate"
        )
    tril = np.linalg.cholesky(cov)
    if method == "student_t":
        return StudentT(mean, scale_tril=tril, df=STUDENT_DF)
    return Gaussian(mean, scale_tril=tril)


def bridge_sampling(
    rng_key,
    log_density,
    draws,
    *,
    method: str = "normal",
    num_proposal: int | None = None,
    tol: float = 1e-10,
    max_iter: int = 1000,
    diverging=None,
) -> BridgeResult:
    """log Z = log ∫ exp(log_density) from posterior draws, by the optimal bridge.

    Parameters
    ----------
    rng_key : jax.random key
        For the proposal's draws.
    log_density : callable
        Unnormalized log posterior (log prior with Jacobians + log likelihood) of a flat
        vector of size D, traceable by JAX.
    draws : array (chains, draws, D) or (draws, D)
        Posterior draws in the same space (e.g. several MCMC chains, 100 draws or more each):
        the first half of each chain fits the proposal, the second half enters the bridge.
    method : {"normal", "warp3", "student_t"}
        The proposal: a Gaussian (default), the same with warp-III's symmetrization, or a
        multivariate t with 5 degrees of freedom.
    num_proposal : int, optional
        Proposal draws N₂ (default: as many as the bridge's posterior draws).
    tol, max_iter :
        Convergence of the fixed-point iteration on log Ẑ.
    diverging : array of bool, optional
        The sampler's divergent transitions among the draws (NUTS's ``diverging``): above
        0.25% of the draws they warn, since the draws then miss the regions the sampler could
        not enter.

    Returns
    -------
    BridgeResult
        Failed checks are also raised as one :class:`~ppl_hais.EvidenceWarning`.
    """
    result = bridge(rng_key, log_density, draws, method=method, num_proposal=num_proposal,
                    tol=tol, max_iter=max_iter, diverging=diverging)  # fmt: skip
    diagnostics.warn(result.checks, "log evidence (bridge sampling)")
    return result


@float64
def bridge(rng_key, log_density, draws, *, method="normal", num_proposal=None, tol=1e-10,
           max_iter=1000, diverging=None) -> BridgeResult:  # fmt: skip
    """:func:`bridge_sampling` without raising its warning (for callers that add checks)."""
    start = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    x = np.asarray(draws, dtype=float)
    x = x[None] if x.ndim == 2 else x
    if x.ndim != 3:
        raise ValueError(f"draws must be shaped (chains, draws, D) or (draws, D), got {x.shape}")
    chains, per_chain, dim = x.shape
    if per_chain < MIN_DRAWS:
        raise ValueError(
            f"{per_chain} draws per chain: bridge sampling needs at least {MIN_DRAWS} (half fit "
            "the proposal, half enter the bridge); draw more (pm.sample(draws=1000) or "
            "MCMC(num_samples=1000) are typical)"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("the draws contain NaN/inf values")
    half = per_chain // 2
    fit, post = x[:, :half].reshape(-1, dim), x[:, half:]
    proposal = _fit_proposal(fit, method)
    evaluate = _batched(log_density)
    n1 = post.shape[0] * post.shape[1]
    n2 = int(num_proposal or n1)
    if method == "warp3":
        std = Gaussian(np.zeros(dim))
        tril, mean = proposal.scale_tril, proposal.mean
        log_det = float(np.sum(np.log(np.abs(np.diag(tril)))))

        def warped(eta):  # log of ½[q(μ + Lη) + q(μ − Lη)]·|L|: two evaluations per point
            plus, minus = mean + eta @ tril.T, mean - eta @ tril.T
            both = np.logaddexp(evaluate(plus), evaluate(minus))
            return both - np.log(2.0) + log_det

        eta_post = (post.reshape(-1, dim) - mean) @ np.linalg.inv(tril).T
        eta_prop = np.asarray(std.sample(rng_key, (n2,)))
        log_q1, log_q2 = warped(eta_post), warped(eta_prop)
        log_g1 = np.asarray(jax.vmap(std.log_prob)(jnp.asarray(eta_post)))
        log_g2 = np.asarray(jax.vmap(std.log_prob)(jnp.asarray(eta_prop)))
        evaluations = 2 * (n1 + n2)
    else:
        prop = np.asarray(proposal.sample(rng_key, (n2,)))
        log_q1, log_q2 = evaluate(post.reshape(-1, dim)), evaluate(prop)
        log_g1 = np.asarray(jax.vmap(proposal.log_prob)(jnp.asarray(post.reshape(-1, dim))))
        log_g2 = np.asarray(jax.vmap(proposal.log_prob)(jnp.asarray(prop)))
        evaluations = n1 + n2
    if not np.all(np.isfinite(log_q1)):
        bad = int(np.sum(~np.isfinite(log_q1)))
        raise ValueError(
            f"the log density is -inf/NaN at {bad} of the {n1} posterior draws: the draws do "
            "not belong to this model (other variables, other data, or another "
            "parameterization)"
        )
    l1 = (log_q1 - log_g1).reshape(chains, -1)
    l2 = log_q2 - log_g2
    shift = float(np.median(l1))  # keeps exp() in range
    l1s, l2s = l1 - shift, l2 - shift
    ess_coord = np.array([chain_ess(post[..., d]) for d in range(dim)])
    ess = float(np.nanmedian(ess_coord)) if np.any(np.isfinite(ess_coord)) else float(n1)
    n_eff = min(ess, n1)
    s1, s2 = n_eff / (n_eff + n2), n2 / (n_eff + n2)
    path, converged = _iterate(l1s.ravel(), l2s, s1, s2, 0.0, tol, max_iter)
    log_z_s = float(path[-1])

    def ess_of(values):
        return chain_ess(np.reshape(values, (chains, -1)))

    se = _relative_se(l1s.ravel(), l2s, s1, s2, log_z_s, ess_of) if converged else np.inf
    chain_z, chain_se = [], []
    for c in range(chains):  # each chain's own bridge: the same proposal draws
        p_c, ok = _iterate(l1s[c], l2s, s1, s2, log_z_s, tol, max_iter)
        chain_z.append(float(p_c[-1]) + shift)
        chain_se.append(_relative_se(l1s[c], l2s, s1, s2, float(p_c[-1]), chain_ess) if ok
                        else np.inf)  # fmt: skip
    if chains > 1 and np.all(np.isfinite(chain_z)):  # chains that disagree widen the SE
        rel = np.exp(np.array(chain_z) - log_z_s - shift)
        se = max(se, float(np.std(rel, ddof=1) / np.sqrt(chains)))
    rhat = float(np.nanmax([split_rhat(post[..., d]) for d in range(dim)]))
    khat = diagnostics.pareto_khat(l2)
    divergences = None if diverging is None else int(np.sum(np.asarray(diverging, bool)))
    checks = bridge_checks(
        divergences=divergences, num_draws=chains * per_chain, num_chains=chains,
        converged=converged, max_iter=max_iter, min_ess=float(np.nanmin(ess_coord)),
        rhat=rhat, chain_log_z=np.array(chain_z), chain_log_z_se=np.array(chain_se),
    )  # fmt: skip
    return BridgeResult(
        log_z=log_z_s + shift, log_z_se=float(se), checks=checks, method=method,
        iterations=path + shift, converged=converged, ess=ess,
        min_ess=float(np.nanmin(ess_coord)), rhat=rhat, pareto_k=khat,
        chain_log_z=np.array(chain_z), chain_log_z_se=np.array(chain_se), num_draws=n1,
        num_proposal=n2, evaluations=int(evaluations), proposal=proposal,
        wall_time=time.perf_counter() - start, divergences=divergences,
    )  # fmt: skip


_REMEDY = (
    "draw longer chains, reparameterize where the sampler struggles (non-centered hierarchies), "
    "or check the draws with cross_check=True / the annealing estimate (php.sample_hais, "
    "phn.HAIS)"
)


def bridge_checks(
    *, divergences=None, num_draws=0, num_chains=1, converged=True, max_iter=1000, min_ess=None,
    rhat=None, chain_log_z=None, chain_log_z_se=None,
) -> tuple[str, ...]:  # fmt: skip
    """The failed checks of a bridge estimate, each one sentence with its remedy."""
    out = []
    if divergences and divergences > DIVERGENCE_WARN * max(num_draws, 1):
        out.append(
            f"divergences: {divergences} of the {num_draws} draws followed divergent "
            f"transitions (> {DIVERGENCE_WARN:.1%}): the sampler could not enter regions of "
            "high curvature (a funnel's neck), so the draws, and an estimate built on them, "
            "miss their mass. Remedy: a non-centered parameterization, a higher target_accept; "
            "or the annealing estimate, which needs no draws."
        )
    if not converged:
        out.append(
            f"converged: the bridge's fixed-point iteration did not settle in {max_iter} steps: "
            "the proposal and the posterior barely overlap, so the estimate is meaningless and "
            "its SE is reported as inf. Remedy: method='warp3', or the annealing estimate."
        )
    least = ESS_WARN_PER_CHAIN * max(int(num_chains), 1)
    if min_ess is not None and not min_ess >= least:
        out.append(
            f"ess: the draws' effective sample size is {min_ess:.0f} in their worst coordinate "
            f"(< {least:.0f}, {ESS_WARN_PER_CHAIN:.0f} per chain in the half that enters the "
            "bridge): the chains mix too slowly for the draws, or the error bar, to be trusted. "
            f"Remedy: {_REMEDY}."
        )
    if rhat is not None and np.isfinite(rhat) and rhat >= RHAT_WARN:
        out.append(
            f"rhat: split-R̂ = {rhat:.3f} (≥ {RHAT_WARN}): the chains disagree about the posterior "
            "(a mode some chains missed, or chains not yet converged), so the draws cannot stand "
            f"for it. Remedy: {_REMEDY}."
        )
    if chain_log_z is not None:
        ratio = disagreement(chain_log_z, chain_log_z_se)
        if np.isfinite(ratio) or np.isinf(ratio):
            out.extend(diagnostics.evidence_checks(disagreement=ratio, remedy=_REMEDY))
    return tuple(out)



def _tolerance(*ses) -> float:
    """What two estimates may differ by before a cross-check warns: 3 × their combined SE,
    at least ``CROSS_FLOOR`` nats (infinite when no SE is finite)."""
    ses = [s for s in ses if np.isfinite(s)]
    return max(CROSS_FLOOR, 3.0 * float(np.sqrt(np.sum(np.square(ses))))) if ses else np.inf


def cross_checks(log_z, log_z_se, cc: CrossCheck) -> tuple[str, ...]:
    """The cross-check's failed checks: the bridge estimate below the forward anneal's (a
    stochastic lower bound), above the reverse anneal's from the same draws, or the reverse
    anneal below the forward one (the draws miss mass the forward anneal found)."""

    tol = _tolerance
    out = []
    lower, upper = cc.log_z_forward, cc.log_z_reverse
    if lower - log_z > tol(log_z_se, cc.log_z_forward_se):
        out.append(
            f"cross_check: the bridge estimate lies {lower - log_z:.2f} nats below the forward "
            "anneal's, a stochastic lower bound of log Z that needs no draws: the draws miss "
            f"posterior mass (a mode, a tail, a funnel's neck), and the estimate is at least "
            f"about {lower - log_z:.2f} nats too low. Remedy: {_REMEDY}."
        )
    if log_z - upper > tol(log_z_se, cc.log_z_reverse_se):
        out.append(
            f"cross_check: the bridge estimate lies {log_z - upper:.2f} nats above the reverse "
            "anneal from the same draws (an upper bound of log Z when the draws are exact): "
            f"the proposal or the draws misrepresent the posterior. Remedy: {_REMEDY}."
        )
    if lower - upper > tol(cc.log_z_forward_se, cc.log_z_reverse_se):
        out.append(
            f"cross_check: the reverse anneal from the draws lies {lower - upper:.2f} nats "
            "below the forward anneal: the draws do not cover the posterior the forward anneal "
            f"found (a missed mode or tail). Remedy: {_REMEDY}."
        )
    return tuple(out)


def bridge_evidence(
    rng_key, model, draws, *, method="normal", cross_check=False, num_reverse=NUM_REVERSE,
    progress_bar=True, diverging=None, **hais_kwargs,
) -> BridgeResult:  # fmt: skip
    """Bridge sampling over an adapter's model (a :class:`~ppl_hais.density.ModelDensity`)
    from its unconstrained draws (chains, draws, D), warning as :func:`bridge_sampling` does.

    ``cross_check=True`` also runs the evidence workflow's forward anneal
    (:func:`ppl_hais.evidence.evidence` with ``hais_kwargs``) and a reverse anneal of
    ``num_reverse`` of the draws (evenly spaced over the bridge half of every chain) over the
    forward run's schedule, and reports the three estimates side by side
    (:class:`CrossCheck`), warning where they disagree beyond their noise.
    """
    from .annealing.bias import reverse_anneal
    from .evidence import _improper_note, evidence

    key_bridge, key_fwd, key_rev = jax.random.split(rng_key, 3)
    result = bridge(key_bridge, model.log_joint, draws, method=method, diverging=diverging)
    checks = result.checks
    if cross_check:
        with warnings.catch_warnings():  # its checks are kept in the CrossCheck instead
            warnings.simplefilter("ignore", UserWarning)
            ev = evidence(key_fwd, model, progress_bar=progress_bar, **hais_kwargs)
        x = np.asarray(draws, dtype=float)
        x = x[None] if x.ndim == 2 else x
        post = x[:, x.shape[1] // 2 :].reshape(-1, x.shape[-1])
        pick = np.linspace(0, len(post) - 1, min(int(num_reverse), len(post))).astype(int)
        upper, upper_se, used = reverse_anneal(
            key_rev, ev.target, ev.results[0].betas, post[pick], progress_bar=progress_bar
        )
        cc = CrossCheck(ev.log_z, ev.log_z_se, upper, upper_se, tuple(ev.checks),
                        int(ev.gradients + used))  # fmt: skip
        checks = checks + cross_checks(result.log_z, result.log_z_se, cc)
        result = dataclasses.replace(result, cross_check=cc, checks=checks)
    diagnostics.warn(checks, "log evidence (bridge sampling)")
    if getattr(model, "improper", ()):
        warnings.warn(_improper_note(model), UserWarning, stacklevel=diagnostics.user_stacklevel())
    return result
