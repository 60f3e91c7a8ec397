"""The bridge estimator (Meng & Wong 1996; Gronau et al. 2017): the fixed point, its error
bar, the per-chain estimates, and the cross-checked workflow over a model
(:func:`bridge_evidence`). The method is described in :mod:`ppl_hais.bridge`.

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

import dataclasses
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from .. import diagnostics
from ..density import improper_note
from ..estimators import chain_ess, split_rhat
from ..precision import float64
from ..target import Gaussian, StudentT
from .checks import CrossCheck, bridge_checks, cross_checks
from .result import BridgeResult

__all__ = ["MIN_DRAWS", "bridge", "bridge_evidence", "bridge_sampling"]

MIN_DRAWS = 100  # draws per chain below this are refused: half of them fit the proposal
METHODS = ("normal", "warp3", "student_t")
STUDENT_DF = 5.0
NUM_REVERSE = 256  # draws annealed back by the cross-check
_CHUNK = 4096  # density evaluations per compiled batch (bounds memory on large models)


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
    from ..annealing.bias import reverse_anneal
    from ..evidence import evidence

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
        upper, upper_se, used, _ = reverse_anneal(
            key_rev, ev.target, ev.results[0].betas, post[pick], progress_bar=progress_bar
        )
        cc = CrossCheck(ev.log_z, ev.log_z_se, upper, upper_se, tuple(ev.checks),
                        int(ev.gradients + used))  # fmt: skip
        checks = checks + cross_checks(result.log_z, result.log_z_se, cc)
        result = dataclasses.replace(result, cross_check=cc, checks=checks)
    diagnostics.warn(checks, "log evidence (bridge sampling)")
    if getattr(model, "improper", ()):
        warnings.warn(improper_note(model), UserWarning, stacklevel=diagnostics.user_stacklevel())
    return result
