"""Log likelihood of data under analysis and generative models (seed 000 §2.4, §2.5).

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

from .annealing import hais
from .annealing.kernels import hais_kernel
from .annealing.pilot import PILOT_WARMUP, pilot_schedule
from .annealing.scan import anneal
from .diagnostics import log_mean_exp_se
from .precision import float64
from .result import AnnealingError
from .schedules import make_schedule
from .target import AnnealingTarget

__all__ = ["LogLikelihoodEstimate", "analysis_log_likelihood", "generative_log_likelihood"]


class LogLikelihoodEstimate(NamedTuple):
    """Average log likelihood of a data set and its errors.

    ``mean`` = (1/|D|) Σ log p(x); ``se`` is its Monte Carlo standard error (from the annealing);
    ``data_se`` = std(log p(x)) / sqrt(|D|) is the spread over data points (how much the
    average would change with other test data, as in seed 000 Table 1); ``per_datum`` holds
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
    """Average log likelihood of ``data`` under p(x) = exp(log_density(x)) / Z (seed 000 eq. 26).

    One HAIS run estimates log Z; then (1/|D|) Σ log p(x) = mean(log_density(x)) − log Ẑ.
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
):
    """Log likelihood of each datum of a latent-variable model p(x) = ∫ p(x | a) p(a) da.

    One HAIS run per datum over the latent ``a`` (seed 000 eq. 28–29), annealing from the prior
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

    Returns
    -------
    LogLikelihoodEstimate
        ``se`` = sqrt(Σ se_i²) / |D| (the runs are independent).
    """
    data = jnp.asarray(data)
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

    def one(key, x):
        target = AnnealingTarget(initial=prior, log_likelihood=partial(log_likelihood, x=x))
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
                record=True,
                adapt_scale=True,
            )
            ref_log_step = pilot["log_steps"][PILOT_WARMUP - 1 : len(pilot_betas) - 1]
            scale_ref = (pilot["scale_betas"], pilot["log_scale"])
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
    out = jax.jit(jax.vmap(one))(keys, data)
    log_weights = np.asarray(out["log_weights"])
    est = []
    for i, lw in enumerate(log_weights):
        lw = np.where(np.isnan(lw), -np.inf, lw)
        if not np.any(np.isfinite(lw)):
            raise AnnealingError(f"all importance weights are zero for datum {i}")
        est.append(log_mean_exp_se(lw))
    est = np.array(est)
    per_datum, per_se = est[:, 0], est[:, 1]
    n = per_datum.size
    return LogLikelihoodEstimate(
        float(per_datum.mean()),
        float(np.sqrt(np.sum(per_se**2)) / n),
        float(per_datum.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan,
        per_datum,
        per_se,
        dict(
            log_weights=log_weights,
            acceptance=np.asarray(out["acceptance"]),
            num_nonfinite=np.asarray(out["num_nonfinite"]),
        ),
    )
