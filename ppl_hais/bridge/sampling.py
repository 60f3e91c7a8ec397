"""The bridge estimator (Meng & Wong 1996; Gronau et al. 2017) over arrays of draws: the
proposal fit, the error bar and the per-chain estimates (the fixed point itself is
:func:`ppl_hais.stats.estimators.bridge_fixed_point`). Over an adapter's model, cross-checked by
annealing, it is :func:`ppl_hais.workflow.model_bridge.bridge_evidence`. The method is described in
:mod:`ppl_hais.bridge`.

Example
-------
>>> import jax, jax.numpy as jnp, numpy as np
>>> from ppl_hais.bridge.sampling import bridge
>>> draws = np.random.default_rng(1).normal(size=(2, 400, 1))  # exact N(0, 1) draws
>>> res = bridge(jax.random.key(0), lambda z: -0.5 * jnp.sum(z**2), draws)
>>> bool(abs(res.log_z - 0.5 * np.log(2 * np.pi)) < 4 * res.log_z_se), res.checks
(True, ())
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from ..checks import diagnostics
from ..model.target import Gaussian, StudentT
from ..runtime.precision import float64
from ..stats.estimators import bridge_fixed_point, bridge_relative_se, chain_ess, split_rhat
from .checks import bridge_checks
from .result import BridgeResult

__all__ = ["MIN_DRAWS", "bridge", "bridge_sampling"]

MIN_DRAWS = 100  # draws per chain below this are refused: half of them fit the proposal
METHODS = ("normal", "warp3", "student_t")
STUDENT_DF = 5.0
_CHUNK = 4096  # density evaluations per compiled batch (bounds memory on large models)


def _batched(log_density):
    one = jax.jit(jax.vmap(log_density))

    def evaluate(z):
        z = np.asarray(z, dtype=float)
        out = [np.asarray(one(jnp.asarray(z[i : i + _CHUNK]))) for i in range(0, len(z), _CHUNK)]
        v = np.concatenate(out).astype(float) if out else np.zeros(0)
        return np.where(np.isnan(v), -np.inf, v)

    return evaluate


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


def _checked_draws(draws) -> np.ndarray:
    """The draws as (chains, draws, D), refused where the bridge cannot use them."""
    x = np.asarray(draws, dtype=float)
    x = x[None] if x.ndim == 2 else x
    if x.ndim != 3:
        raise ValueError(f"draws must be shaped (chains, draws, D) or (draws, D), got {x.shape}")
    if x.shape[1] < MIN_DRAWS:
        raise ValueError(
            f"{x.shape[1]} draws per chain: bridge sampling needs at least {MIN_DRAWS} (half "
            "fit the proposal, half enter the bridge); draw more (pm.sample(draws=1000) or "
            "MCMC(num_samples=1000) are typical)"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("the draws contain NaN/inf values")
    return x


def _log_densities(rng_key, evaluate, proposal, post, n2, method):
    """((log q, log g) at the posterior draws, the same at ``n2`` proposal draws, the density
    evaluations spent); for warp-III, q is the symmetrized warped density over η."""
    if method != "warp3":
        prop = np.asarray(proposal.sample(rng_key, (n2,)))
        log_g = jax.vmap(proposal.log_prob)
        return ((evaluate(post), np.asarray(log_g(jnp.asarray(post)))),
                (evaluate(prop), np.asarray(log_g(jnp.asarray(prop)))), len(post) + n2)  # fmt: skip
    std = Gaussian(np.zeros(post.shape[-1]))
    tril, mean = proposal.scale_tril, proposal.mean
    log_det = float(np.sum(np.log(np.abs(np.diag(tril)))))

    def warped(eta):  # log of ½[q(μ + Lη) + q(μ − Lη)]·|L|: two evaluations per point
        plus, minus = mean + eta @ tril.T, mean - eta @ tril.T
        return np.logaddexp(evaluate(plus), evaluate(minus)) - np.log(2.0) + log_det

    eta_post = (post - mean) @ np.linalg.inv(tril).T
    eta_prop = np.asarray(std.sample(rng_key, (n2,)))
    log_g = jax.vmap(std.log_prob)
    return ((warped(eta_post), np.asarray(log_g(jnp.asarray(eta_post)))),
            (warped(eta_prop), np.asarray(log_g(jnp.asarray(eta_prop)))),
            2 * (len(post) + n2))  # fmt: skip


@float64
def bridge(rng_key, log_density, draws, *, method="normal", num_proposal=None, tol=1e-10,
           max_iter=1000, diverging=None) -> BridgeResult:  # fmt: skip
    """:func:`bridge_sampling` without raising its warning (for callers that add checks)."""
    start = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    x = _checked_draws(draws)
    chains, per_chain, dim = x.shape
    half = per_chain // 2
    fit, post = x[:, :half].reshape(-1, dim), x[:, half:]
    proposal = _fit_proposal(fit, method)
    n1 = post.shape[0] * post.shape[1]
    n2 = int(num_proposal or n1)
    (log_q1, log_g1), (log_q2, log_g2), evaluations = _log_densities(
        rng_key, _batched(log_density), proposal, post.reshape(-1, dim), n2, method)
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
    path, converged = bridge_fixed_point(l1s.ravel(), l2s, s1, s2, 0.0, tol, max_iter)
    log_z_s = float(path[-1])

    def ess_of(values):
        return chain_ess(np.reshape(values, (chains, -1)))

    se = bridge_relative_se(l1s.ravel(), l2s, s1, s2, log_z_s, ess_of) if converged else np.inf
    chain_z, chain_se = [], []
    for c in range(chains):  # each chain's own bridge: the same proposal draws
        p_c, ok = bridge_fixed_point(l1s[c], l2s, s1, s2, log_z_s, tol, max_iter)
        chain_z.append(float(p_c[-1]) + shift)
        chain_se.append(bridge_relative_se(l1s[c], l2s, s1, s2, float(p_c[-1]), chain_ess) if ok
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
