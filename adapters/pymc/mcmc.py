"""``sample_reduced_flip_hmc``: HMC with reduced momentum flips on a PyMC model, like
``pm.sample``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm

# PyMC module functions that `pm.` does not re-export (no public equivalent on PyMC 5.28 or 6.4):
# the coords/dims/observed/constant helpers pm.sample uses for its own ArviZ output, the prior
# initial-point expression pm.sample_smc draws its population with, the JAX graph of
# pymc.sampling.jax. Same names and behaviour on both versions, pinned by tests/test_pymc.py
# (evidence against exact values, coords/dims) and tests/test_stack.py (constant_data).
from pymc.backends.arviz import coords_and_dims_for_inferencedata, find_constants, find_observations

import ppl_hais as ph
from ppl_hais.results.arviz import from_mcmc
from ppl_hais.runtime.names import LEAPFROG_HINT, refuse_unknown
from ppl_hais.runtime.precision import float64

from .target import PyMCTarget


@float64
def sample_reduced_flip_hmc(
    draws: int = 1000,
    tune: int = 1000,
    *,
    chains: int = 4,
    random_seed=None,
    model=None,
    progressbar: bool = True,
    step_size="auto",
    num_leapfrog: int = 1,
    lookahead: int = 1,
    flips: str = "reduced",
    uniform: str | None = None,
    refresh="auto",
    target_accept: float = 0.9,
    thinning: int = 1,
    idata_kwargs: dict | None = None,
    **unknown,
):
    """Sample a PyMC model with HMC with reduced momentum flips, like ``pm.sample``.

    Persistent-momentum HMC (``num_leapfrog`` leapfrog steps per transition, a fraction
    ``refresh`` of the momentum power replaced per unit time) whose rejections negate the
    momentum only as often as invariance needs ([SD12] ch. 6; ``flips="standard"``
    negates it on every rejection), optionally trying ``lookahead`` trajectories first
    (LAHMC); with one trajectory the accept/reject uniform is Neal's persistent one
    (``uniform``, see :func:`ppl_hais.mcmc.build_kernel`). ``tune`` warmup iterations adapt
    the step size (toward ``target_accept``), a diagonal mass matrix and, with
    ``refresh="auto"``, the refresh (MEADS's damping from the spread of 4 or more chains).
    Chains run vectorized in one compiled call, each through its own transitions
    (:func:`ppl_hais.mcmc.sample`).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (constrained variables and deterministics, model coords/dims),
        ``sample_stats`` (``acceptance_rate``, ``step_size``, ``diverging``, ``lp``,
        ``n_steps`` = gradients per draw, ``is_flipped``, ``lookahead_depth``),
        ``observed_data``, ``constant_data``; ``log_likelihood`` with
        ``idata_kwargs={"log_likelihood": True}``.

    Example
    -------
    >>> import pymc as pm
    >>> from ppl_hais.adapters import pymc as php
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     y = pm.Normal("y", mu, 1.0, observed=[0.2, 0.4])
    ...     idata = php.sample_reduced_flip_hmc(draws=200, tune=200, chains=2,
    ...                                         random_seed=1, progressbar=False)
    >>> idata.posterior["mu"].shape
    (2, 200)
    """
    refuse_unknown(unknown, "sample_reduced_flip_hmc", hints=LEAPFROG_HINT)
    if model is not None and not isinstance(model, pm.Model):
        raise TypeError(f"model must be a pm.Model, got {type(model).__name__}")
    for name, value in (("chains", chains), ("draws", draws)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    model = pm.modelcontext(model)
    rng = np.random.default_rng(random_seed)
    target = PyMCTarget(model, needs_likelihood=False)
    if target.discrete:
        raise ValueError(
            f"discrete free variable(s) {target.discrete_names}: HMC moves continuous "
            "variables only. Use pm.sample (it assigns a Metropolis step to them), or "
            "marginalize them out; php.sample_hais anneals them for the evidence."
        )
    # start like pm.sample's "jitter+adapt_diag": the initial point plus U(-1, 1) jitter
    point = model.initial_point()
    start = target.ravel([np.asarray(point[n])[None] for n in target.names])[0]
    x0 = start[None, :] + rng.uniform(-1.0, 1.0, size=(chains, target.dim))
    logp = jax.jit(jax.vmap(target.log_joint))(jnp.asarray(x0))
    x0 = np.where(np.isfinite(np.asarray(logp))[:, None], x0, start[None, :])
    result = ph.mcmc.sample(
        jax.random.key(int(rng.integers(2**31 - 1))),
        target.log_joint,
        x0,
        num_warmup=tune,
        num_samples=draws,
        step_size=step_size,
        num_leapfrog=num_leapfrog,
        lookahead=lookahead,
        flips=flips,
        uniform=uniform,
        refresh=refresh,
        target_accept=target_accept,
        thinning=thinning,
        progress_bar=progressbar,
    )
    posterior = target.posterior(result.samples, chains, draws)
    st = result.stats
    sample_stats = {
        "acceptance_rate": st["acceptance_rate"],
        "step_size": np.broadcast_to(result.step_size[:, None], (chains, draws)),
        "diverging": st["is_divergent"],
        "lp": st["logdensity"],
        "n_steps": st["num_gradients"],
        "is_flipped": st["is_flipped"],
        "lookahead_depth": st["lookahead_depth"],
    }
    coords, dims = coords_and_dims_for_inferencedata(model)
    idata = from_mcmc(
        posterior,
        sample_stats,
        observed_data=find_observations(model),
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
        attrs={
            "sampling_time": result.wall_time,
            "tuning_steps": tune,
            "sampler": f"reduced-flip HMC (lookahead={lookahead}, flips={flips})",
        },
        library="ppl_hais (pymc)",
    )
    if (idata_kwargs or {}).get("log_likelihood", False):
        pm.compute_log_likelihood(idata, model=model, progressbar=False)
    return idata
