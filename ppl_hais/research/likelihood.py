"""Log likelihood of data under analysis and generative models ([HAIS12] §2.4, §2.5).

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> est = ph.analysis_log_likelihood(jax.random.key(0), lambda x: -0.5 * jnp.sum(x**2),
...                                  jnp.zeros((3, 2)), ph.Gaussian(jnp.zeros(2), 2.0),
...                                  num_particles=64, num_steps=100, progress_bar=False)
>>> bool(abs(est.mean + jnp.log(2 * jnp.pi)) < 5 * est.se + 0.05)  # N(0, I) at 0: −log 2π
True
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..annealing.kernels import hais_kernel
from ..annealing.pilot import PILOT_WARMUP, pilot_schedule
from ..annealing.scale import scale_knots
from ..annealing.scan import anneal
from ..checks.diagnostics import KHAT_UNRELIABLE, evidence_checks, khat_applies, pareto_khat, warn
from ..estimate.annealers import hais
from ..model.schedules import make_schedule
from ..model.target import AnnealingTarget, Gaussian
from ..results.result import AnnealingError
from ..runtime.precision import float64
from ..stats.estimators import importance_ess, log_mean_exp_se, max_relative_weight
from .refinement import DiagonalNormal, refine

__all__ = [
    "LogLikelihoodEstimate",
    "analysis_log_likelihood",
    "generative_log_likelihood",
    "per_datum_estimate",
]


class LogLikelihoodEstimate(NamedTuple):
    """Average log likelihood of a data set and its errors.

    ``mean`` = (1/N) Σ log p(x) over the N data points; ``se`` is its Monte Carlo standard
    error (from the annealing);
    ``data_se`` = std(log p(x)) / sqrt(N) is the spread over data points (how much the
    average would change with other test data, as in [HAIS12] Table 1); ``per_datum`` holds
    log p(x) for each datum, ``per_datum_se`` their Monte Carlo errors.
    """

    mean: float
    se: float
    data_se: float
    per_datum: np.ndarray
    per_datum_se: np.ndarray
    details: Any = None


@float64
def analysis_log_likelihood(rng_key, log_density: Callable, data, initial, **hais_kwargs):
    """Average log likelihood of ``data`` under p(x) = exp(log_density(x)) / Z ([HAIS12] eq. 26).

    One HAIS run estimates log Z; then the mean of log p(x) over the N data points is
    mean(log_density(x)) − log Ẑ.
    ``hais_kwargs`` go to :func:`ppl_hais.hais` (``details`` holds its AISResult).
    """
    result = hais(rng_key, AnnealingTarget(log_density=log_density, initial=initial), **hais_kwargs)
    log_f = np.asarray(jax.vmap(log_density)(jnp.asarray(data)))
    per_datum = log_f - result.log_z
    se = np.full_like(per_datum, result.log_z_se)
    return LogLikelihoodEstimate(
        float(per_datum.mean()),
        float(result.log_z_se),
        float(per_datum.std(ddof=1) / np.sqrt(per_datum.size)) if per_datum.size > 1 else np.nan,
        per_datum,
        se,
        result,
    )


@float64
def generative_log_likelihood(
    rng_key,
    log_likelihood: Callable,
    prior,
    data,
    *,
    num_particles: int = 200,
    num_steps: int = 1000,
    schedule="linear",
    step_size="auto",
    refresh: float = 0.5,
    kernel=None,
    target_accept: float | None = None,
    num_pilot_particles: int = 32,
    num_pilot_steps: int = 500,
    initial="prior",
    num_refinements: int = 20,
):
    """Log likelihood of each datum of a latent-variable model p(x) = ∫ p(x | a) p(a) da.

    One HAIS run per datum over the latent ``a`` ([HAIS12] eq. 28–29), annealing from the prior
    p(a) (``prior``: a normalized initial distribution, e.g. :class:`Gaussian`) to
    p(a) p(x | a); the runs are batched with ``vmap``. With ``step_size="auto"`` each datum gets
    its own pilot run (vmapped too) whose step sizes and coordinate scales (the diagonal
    mass matrix of :func:`~ppl_hais.annealing.scan.anneal`) are frozen before its main run.

    Parameters
    ----------
    log_likelihood : callable
        ``(a, x) -> log p(x | a)`` (normalized in x).
    prior : distribution over a
    data : (num_data, ...) array
    kernel : TransitionKernel, optional
        Default: the HAIS kernel with ``refresh``; the AIS baselines can be given instead.
    initial : "prior", "refined", or refinement.DiagonalNormal
        Where each datum's anneal starts. ``"refined"``: a diagonal Gaussian per datum,
        started at the prior's moments and refined ``num_refinements`` steps by adaptive
        importance sampling (:func:`ppl_hais.refine`, ``num_particles`` draws a step, damping
        0.3), so each anneal starts near its own posterior; a ``DiagonalNormal`` with one row
        per datum (e.g. a recognition network's output, refined or not) is used as given.

    Returns
    -------
    LogLikelihoodEstimate
        ``se`` = sqrt(Σ se_i²) / N (the runs are independent); ``details`` hold each
        datum's log weights, Pareto k̂ and ESS (failed checks warn, naming how many data
        failed) and, with a refined start, the :class:`~ppl_hais.research.refinement.Refinement`.
    """
    data = jnp.asarray(data)
    key_refine, rng_key = jax.random.split(rng_key)
    starts, refinement = _starts(
        key_refine, log_likelihood, prior, data, initial, num_refinements, num_particles
    )
    kernel = hais_kernel(float(refresh), 1) if kernel is None else kernel
    if target_accept is None:
        target_accept = 0.9 if kernel.gradients_per_step > 0 else 0.3
    betas = make_schedule(schedule, num_steps)
    num_steps = len(betas) - 1
    keys = jax.random.split(rng_key, data.shape[0])

    if isinstance(step_size, str):
        pilot_betas, ref_betas = pilot_schedule(betas, num_pilot_steps)
        log_step0 = np.log(kernel.default_step_size)
    else:
        ref_betas, log_step0 = np.array([0.0, 1.0]), np.log(float(step_size))

    def one(key, x, start):
        if start is None:
            target = AnnealingTarget(initial=prior, log_likelihood=partial(log_likelihood, x=x))
        else:
            q = jax.tree_util.tree_unflatten(_GAUSSIAN, list(start))
            joint = lambda a: prior.log_prob(a) + log_likelihood(a, x=x)  # noqa: E731
            target = AnnealingTarget(initial=q, log_density=joint)
        key_pilot, key_main = jax.random.split(key)
        if isinstance(step_size, str):
            pilot = anneal(
                key_pilot,
                target,
                kernel,
                jnp.asarray(pilot_betas),
                jnp.full(len(pilot_betas), log_step0),
                num_particles=num_pilot_particles,
                adapt_target=target_accept,
                adapt_scale=True,
            )
            ref_log_step = pilot.log_steps[PILOT_WARMUP - 1 : len(pilot_betas) - 1]
            scale_ref = scale_knots(pilot)
        else:
            ref_log_step, scale_ref = jnp.full(2, log_step0), None
        return anneal(
            key_main,
            target,
            kernel,
            jnp.asarray(betas),
            jnp.interp(jnp.asarray(betas), jnp.asarray(ref_betas), ref_log_step),
            num_particles=num_particles,
            scale_ref=scale_ref,
        )

    # with log_likelihood taking x by keyword, partial(..., x=x) must see a traced x: vmap it
    out = jax.jit(jax.vmap(one))(keys, data, starts)
    extra = {} if refinement is None else {"refinement": refinement}
    return per_datum_estimate(
        np.asarray(out.log_weights),
        remedy="more temperatures (num_steps), more particles, or initial='refined'",
        acceptance=np.asarray(out.acceptance),
        num_nonfinite=np.asarray(out.num_nonfinite),
        **extra,
    )


_GAUSSIAN = jax.tree_util.tree_structure(Gaussian(np.zeros(1), np.ones(1)))


def _starts(rng_key, log_likelihood, prior, data, initial, num_refinements, num_samples):
    """(loc, scale) rows of each datum's Gaussian start, or None for the prior; and the
    :class:`~ppl_hais.research.refinement.Refinement` when one ran."""
    if isinstance(initial, DiagonalNormal):
        q = initial
    elif isinstance(initial, str) and initial == "prior":
        return None, None
    elif isinstance(initial, str) and initial == "refined":
        z = np.asarray(prior.sample(jax.random.fold_in(rng_key, 1), (4096,)))
        if z.ndim != 2 or z.shape[1] == 0:
            raise ValueError(
                "initial='refined' refines a start per datum over its latent variables: this "
                f"prior has {0 if z.ndim < 2 else z.shape[1]} latent coordinates (no local "
                "latents to refine)"
            )
        loc, scale = (getattr(prior, "mean", None), getattr(prior, "scale", None))
        if isinstance(prior, Gaussian) and prior.scale_tril is None:
            loc, scale = np.asarray(loc), np.asarray(scale)
        else:  # the prior's moments from its draws
            loc, scale = z.mean(0), z.std(0)
        n = data.shape[0]
        q = DiagonalNormal(jnp.tile(loc, (n, 1)), jnp.tile(scale, (n, 1)))
        joint = lambda a, x: prior.log_prob(a) + log_likelihood(a, x=x)  # noqa: E731
        fit = refine(rng_key, joint, q, data, num_iterations=num_refinements,
                     num_samples=max(int(num_samples), 2), damping=0.3)  # fmt: skip
        return (fit.q.loc, fit.q.scale), fit
    else:
        raise ValueError(
            f"initial must be 'prior', 'refined' or a refinement.DiagonalNormal, got {initial!r}"
        )
    if q.loc.ndim != 2 or q.loc.shape[0] != data.shape[0]:
        raise ValueError(
            f"a DiagonalNormal start needs one row per datum: loc of shape ({data.shape[0]}, D), "
            f"got {tuple(q.loc.shape)}"
        )
    return (jnp.asarray(q.loc, float), jnp.asarray(q.scale, float)), None


def per_datum_estimate(log_weights, remedy: str | None = None, **details) -> LogLikelihoodEstimate:
    """A :class:`LogLikelihoodEstimate` from one row of importance (or AIS) log weights per
    datum, with each datum's weights through the evidence checks (Pareto k̂, ESS): a datum
    whose k̂ makes its SE meaningless gets SE = inf, and the failed checks are raised as one
    ``EvidenceWarning`` that counts the data and quotes the worst. ``details`` gains
    ``log_weights``, ``pareto_k``, ``ess`` and ``checks`` (per datum)."""
    log_weights = np.where(np.isnan(log_weights), -np.inf, np.asarray(log_weights, dtype=float))
    dead = np.flatnonzero(~np.any(np.isfinite(log_weights), axis=1))
    if dead.size:
        raise AnnealingError(
            f"all importance weights are zero for datum {int(dead[0])} ({dead.size} data): no "
            "particle reached a state with p(x, latent) > 0"
        )
    num_particles = log_weights.shape[1]
    est = np.array([log_mean_exp_se(lw) for lw in log_weights])
    khat = np.array([pareto_khat(lw) for lw in log_weights])
    ess = np.array([importance_ess(lw) for lw in log_weights])
    top = np.array([max_relative_weight(lw) for lw in log_weights])
    checks = [
        evidence_checks(khat=k, max_weight=m, ess=e, num_particles=num_particles, remedy=remedy)
        for k, m, e in zip(khat, top, ess, strict=True)
    ]
    per_datum, per_se = est[:, 0], est[:, 1]
    unreliable = np.array(
        [khat_applies(k, m) and k >= KHAT_UNRELIABLE for k, m in zip(khat, top, strict=True)]
    )
    per_se = np.where(unreliable | np.isposinf(khat), np.inf, per_se)
    n = per_datum.size
    _warn_per_datum(checks, khat)
    return LogLikelihoodEstimate(
        float(per_datum.mean()),
        float(np.sqrt(np.sum(per_se**2)) / n),
        float(per_datum.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan,
        per_datum,
        per_se,
        dict(details, log_weights=log_weights, pareto_k=khat, ess=ess, checks=checks),
    )


def _warn_per_datum(checks, khat) -> None:
    failed = [i for i, c in enumerate(checks) if c]
    if not failed:
        return
    which = ", ".join(sorted({c.name for i in failed for c in checks[i]}))
    worst = max(failed, key=lambda i: (np.nan_to_num(khat[i], nan=np.inf), len(checks[i])))
    lines = [
        f"{len(failed)} of {len(checks)} data failed ({which}); datum {worst}, the "
        "worst: " + checks[worst][0]
    ] + list(checks[worst][1:])
    warn(lines, what="log likelihood")
