"""``sample_exchange``: the exchange sampler for a PyMC model's parameters when the data's
density has a normalizer that depends on them, like ``pm.sample``.

Example
-------
>>> import jax.numpy as jnp, numpy as np, pymc as pm
>>> from ppl_hais.adapters import pymc as php
>>> from ppl_hais.research.exchange import GaussianEnvelope
>>> with pm.Model():
...     theta = pm.Normal("theta", 0.0, 1.0)
...     idata = php.sample_exchange(
...         lambda x, p: p["theta"] * jnp.sum(x**2) - 1.0,  # E(x; θ), in JAX
...         GaussianEnvelope(jnp.zeros(1)), np.full((20, 1), 0.5),
...         draws=200, tune=100, chains=2, random_seed=0, progressbar=False)
>>> idata.posterior["theta"].shape
(2, 200)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm
from pymc.backends.arviz import coords_and_dims_for_inferencedata, find_constants

import ppl_hais as ph
from ppl_hais.results.arviz import from_mcmc
from ppl_hais.runtime.precision import float64

from .target import PyMCTarget

__all__ = ["sample_exchange"]


def _check(model, draws, tune, chains, data, envelope):
    if model is not None and not isinstance(model, pm.Model):
        raise TypeError(f"model must be a pm.Model, got {type(model).__name__}")
    for name, value, least in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if isinstance(value, bool) or int(value) != value or value < least:
            raise ValueError(f"{name} must be an integer ≥ {least}, got {value!r}")
    if not (hasattr(envelope, "sample") and hasattr(envelope, "log_prob")):
        raise TypeError(
            "envelope must have sample(key, sample_shape) and log_prob(x) (an envelope of "
            f"ppl_hais.research.exchange or a NumPyro distribution), got {type(envelope).__name__}"
        )
    if data.ndim < 1 or data.shape[0] == 0:
        raise ValueError(f"observed must have a leading data axis with ≥ 1 datum, got {data.shape}")
    ph.BoundedEnergy(None, envelope).check_data(data)


@float64
def sample_exchange(
    energy_fn,
    envelope,
    observed,
    draws: int = 1000,
    tune: int = 1000,
    *,
    chains: int = 4,
    random_seed=None,
    model=None,
    progressbar: bool = True,
    scale: float = 0.5,
    max_proposals: int = 1_000_000,
    approximate_sweeps: int = 0,
):
    """Sample θ of p(θ | x) ∝ p(θ) ∏ π(x_i) σ(−E(x_i; θ)) / Z(θ) by the exchange algorithm
    (Murray, Ghahramani & MacKay 2006), with exact fantasy data by rejection from π.

    The PyMC model holds θ: its free variables and their priors (and, if any, other observed
    variables or Potentials, whose likelihood joins the prior); the data model, whose
    normalizer Z(θ) is intractable, is given here. Called inside a ``with pm.Model():`` block
    like ``pm.sample``.

    Parameters
    ----------
    energy_fn : callable
        ``energy_fn(x, params) -> scalar`` in JAX, for one datum x (the envelope's event
        shape); ``params`` maps each free variable's (and deterministic's) name to its value.
    envelope : distribution
        π(x): an envelope of :mod:`ppl_hais.research.exchange` or a NumPyro distribution.
    observed : array (N, ...)
        The data, one datum per row.
    draws, tune, chains, random_seed, model, progressbar
        As in ``pm.sample``. ``tune`` steps adapt the random-walk scale (in the transformed
        space) toward an acceptance of 0.3; chains run one after another.
    scale : float
        Initial random-walk scale.
    max_proposals : int
        Rejection proposals allowed per move's fantasy data set; when spent the run stops with
        :class:`~ppl_hais.RejectionBudgetError` (never a silent partial draw).
    approximate_sweeps : int
        >0 replaces exact fantasies by that many MCMC sweeps from the data (approximate).

    Returns
    -------
    InferenceData (ArviZ 0.x) or DataTree (ArviZ ≥ 1)
        ``posterior`` (free variables and deterministics), ``sample_stats``
        (``acceptance_rate``, ``proposals_per_draw`` ≈ 1/Z(θ'), ``diverging``),
        ``observed_data`` (the data, as ``x``), ``constant_data``.
    """
    data = jnp.asarray(observed, jnp.result_type(float))
    _check(model, draws, tune, chains, data, envelope)
    model = pm.modelcontext(model)
    target = PyMCTarget(model, needs_likelihood=False)
    if target.discrete:
        raise ValueError(
            f"discrete free variable(s) {target.discrete_names}: the exchange sampler moves "
            "θ by a Gaussian random walk in the transformed space; make them continuous."
        )
    names = [v.name for v in target._outputs]

    def params_of(z):  # ph.research.exchange.sample passes a one-parameter θ as a scalar
        return dict(zip(names, target.constrain(jnp.atleast_1d(z)), strict=True))

    def log_prior(z):
        return target.log_joint(jnp.atleast_1d(z))

    bounded = ph.BoundedEnergy(lambda x, z: energy_fn(x, params_of(z)), envelope)
    rng = np.random.default_rng(random_seed)
    point = model.initial_point()
    start = target.ravel([np.asarray(point[n])[None] for n in target.names])[0]
    keys = jax.random.split(jax.random.key(int(rng.integers(2**31 - 1))), int(chains))
    samples, stats = [], []
    for c in range(int(chains)):
        x0 = start + rng.uniform(-0.5, 0.5, size=target.dim)
        if not np.isfinite(float(target.log_joint(jnp.asarray(x0)))):
            x0 = start
        s, st = ph.research.exchange.sample(
            keys[c], bounded, data, log_prior, x0, num_warmup=int(tune),
            num_samples=int(draws), scale=scale, max_proposals=int(max_proposals),
            approximate_sweeps=int(approximate_sweeps), progress_bar=bool(progressbar),
            desc=f"exchange, chain {c + 1}/{int(chains)}",
        )  # fmt: skip
        samples.append(np.asarray(s).reshape(int(draws), target.dim))
        stats.append(st)
    posterior = target.posterior(np.concatenate(samples), chains, draws)
    sample_stats = {
        "acceptance_rate": np.stack([st["acceptance_rate"] for st in stats]),
        "proposals_per_draw": np.stack([st["proposals_per_draw"] for st in stats]),
        "diverging": np.zeros((int(chains), int(draws)), bool),
    }
    coords, dims = coords_and_dims_for_inferencedata(model)
    return from_mcmc(
        posterior,
        sample_stats,
        observed_data={"x": np.asarray(data)},
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
        attrs={
            "tuning_steps": int(tune),
            "sampler": "exchange" + (" (approximate fantasies)" if approximate_sweeps else ""),
        },
        library="ppl_hais (pymc)",
    )
