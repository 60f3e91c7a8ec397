"""Simulation-based calibration of Bayes factors for NumPyro models
(:mod:`ppl_hais.workflow.calibration`): data sets from the models' joint prior by NumPyro's own
``Predictive``, every model's evidence on each by ``HAIS``, compiled once per model.

Example
-------
>>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from ppl_hais.adapters import numpyro as phn
>>> def null(y=None):  # y ~ N(0, 1): no parameter, an exact evidence
...     numpyro.sample("y", dist.Normal(0.0, 1.0).expand([5]).to_event(1), obs=y)
>>> def alternative(y=None):  # y ~ N(mu, 1), mu ~ N(0, 1)
...     mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
...     numpyro.sample("y", dist.Normal(mu, 1.0).expand([5]).to_event(1), obs=y)
>>> cal = phn.calibrate_bayes_factors(jax.random.key(0), {"H0": null, "H1": alternative},
...     num_datasets=4, observed=["y"], options=dict(num_steps=100), progress_bar=False)
>>> cal.log_evidence.shape
(4, 2)
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import jax
import numpy as np
from numpyro import handlers
from numpyro.infer import Predictive
from numpyro.infer.util import log_density

from ppl_hais.mcmc.fast_random import check_key, host_fold_in, host_split
from ppl_hais.runtime.precision import float64
from ppl_hais.workflow.calibration import (
    BayesFactorCalibration,
    calibrate,
    check_models,
    check_prior_probs,
    draw_models,
    simulate,
)
from ppl_hais.workflow.datasets import BATCH_SIZE, evidence_record
from ppl_hais.workflow.options import EvidenceOptions

from .hais import HAIS
from .model import is_factor

__all__ = ["calibrate_bayes_factors"]


def _sites(model, args, kwargs, key, named=None):
    """(the data's site names, whether the model has latent sites) from one trace: the sites
    ``named``, else those observed."""
    tr = handlers.trace(handlers.seed(model, key)).get_trace(*args, **kwargs)
    observed, latent = [], False
    for name, site in tr.items():
        if site["type"] != "sample" or is_factor(site):
            continue
        if (name in named) if named is not None else site["is_observed"]:
            observed.append(name)
        else:
            latent = True
    return tuple(observed), latent


class _Conditioned:
    """``model`` with its observed sites set from the keyword ``simulated_data`` (a dict), so
    that every data set is an argument of one compiled program, not a new model. Equal for
    the same model, so a second calibration of it compiles nothing (each compiled anneal
    holds hundreds of the process's memory maps, of at most 65,530 on Linux)."""

    def __init__(self, model):
        self.model = model

    def __call__(self, *args, simulated_data, **kwargs):
        return handlers.condition(self.model, data=simulated_data)(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, _Conditioned) and other.model is self.model

    def __hash__(self):
        return hash((_Conditioned, id(self.model)))


@float64
def calibrate_bayes_factors(
    rng_key,
    models: Mapping,
    *args,
    num_datasets: int = 100,
    prior_probs: Mapping | None = None,
    observed=None,
    stratified: bool = False,
    options=None,
    progress_bar: bool = True,
    batch_size: int = BATCH_SIZE,
    **kwargs,
) -> BayesFactorCalibration:
    """Simulation-based calibration of the Bayes factors between NumPyro models.

    For each of ``num_datasets`` data sets a model is drawn with its prior probability, its
    parameters from their prior and data from its likelihood (``Predictive`` over the model
    with its observations unconditioned); every model's log evidence on that data set is then
    estimated by :class:`~ppl_hais.adapters.numpyro.HAIS` (exactly, where a model has no
    latent site: a point null). Each model's program compiles once: the data sets are its
    arguments.

    Parameters
    ----------
    rng_key : jax.random key
    models : dict
        ``{name: model}``: NumPyro models over the same observed sites, called as
        ``model(*args, **kwargs)`` (the design: covariates, sizes; observations passed in
        ``kwargs`` are replaced by each simulated data set).
    num_datasets : int
    prior_probs : dict, optional
        Prior model probabilities (default: equal).
    observed : list of str, optional
        The sites that hold the data. Default: the sites observed in
        ``model(*args, **kwargs)`` (pass the observations, or name the sites when there are
        none yet, as in a design analysis: ``observed=["y"]``).
    stratified : bool
        The same number of data sets from each model, in blocks, instead of drawing the model
        (a design analysis, ``design()``); the marginal check holds for drawn models, or
        stratified ones under equal prior probabilities.
    options : ppl_hais.EvidenceOptions or dict, optional
        The options of every ``HAIS`` (``num_particles``, ``num_steps``, ``initial``, ...;
        default: its defaults, the convergence ladder).
    progress_bar : bool
    batch_size : int
        Data sets estimated side by side (default 16): their anneals run as vmapped calls
        over the data sets (:mod:`ppl_hais.workflow.datasets`); 1 estimates one data set after
        another. Either way each estimate tunes itself on its own data from its own key.

    Returns
    -------
    ppl_hais.workflow.calibration.BayesFactorCalibration
        ``marginal()``, ``calibration()``, ``design()``, ``plot()``, ``to_arviz()``; warned
        data sets are kept and counted. One ``EvidenceWarning`` states a marginal calibration
        beyond 3 Monte Carlo SEs and how many data sets warned.
    """
    options = EvidenceOptions.of(options, "calibrate_bayes_factors")
    names = list(models) if isinstance(models, Mapping) else []
    rng_key = check_key(rng_key)
    key_models, key_data, key_fit = host_split(rng_key, 3)
    start = time.perf_counter()
    found = {n: _sites(models[n], args, kwargs, key_data, observed) for n in names}
    try:
        sites = check_models(models, {n: f[0] for n, f in found.items()}, "NumPyro models")
    except ValueError as err:
        raise ValueError(f"{err} Pass the observations as the models take them, or name the "
                         "sites that hold the data: observed=['y'].") from None
    prior = check_prior_probs(names, prior_probs)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key_models)).ravel())
    true = draw_models(rng, prior, num_datasets, stratified)

    def draw(m, num):
        run = Predictive(handlers.uncondition(models[names[m]]), num_samples=num,
                         return_sites=sites)  # fmt: skip
        return run(host_fold_in(key_data, m), *args, **kwargs)

    fits = {n: _fitter(models[n], found[n][1], args, kwargs, options)
            for n in names}  # fmt: skip
    return calibrate(key_fit, names, prior, true, simulate(true, len(names), draw), fits,
                     progress_bar=progress_bar, started=start, batch_size=batch_size,
                     settings=dict(num_datasets=len(true), stratified=stratified,
                                   options=options, batch_size=batch_size))  # fmt: skip


def _fitter(model, has_latent, args, kwargs, options):
    """``fit(key, data) -> (log Z, SE, failed checks' names, gradients)`` for one model: HAIS
    over the conditioned model, or its exact log likelihood where it has no latent site."""
    conditioned = _Conditioned(model)
    if not has_latent:
        exact = jax.jit(lambda data: log_density(conditioned, args,
                                                 {**kwargs, "simulated_data": data}, {})[0])

        def fit_exact(key, data):
            return float(exact(data)), 0.0, "", 0

        return fit_exact

    def fit(key, data):  # a HAIS per estimate: estimates run side by side in threads
        hais = HAIS(conditioned, options, progress_bar=False)
        hais.run(key, *args, simulated_data=data, **kwargs)
        return evidence_record(hais.evidence)

    return fit
