"""Simulation-based calibration of Bayes factors for PyMC models
(:mod:`ppl_hais.workflow.calibration`): data sets from the models' joint prior by
``pm.sample_prior_predictive``, every model's evidence on each by HAIS, each model compiled once
(its observed values are inputs of the compiled density: ``PyMCTarget.with_data``).

Example
-------
>>> import numpy as np, pymc as pm
>>> from ppl_hais.adapters import pymc as php
>>> y = np.zeros(5)
>>> with pm.Model() as null:  # y ~ N(0, 1): no parameter, an exact evidence
...     _ = pm.Normal("y", 0.0, 1.0, observed=y)
>>> with pm.Model() as alternative:  # y ~ N(mu, 1), mu ~ N(0, 1)
...     mu = pm.Normal("mu", 0.0, 1.0)
...     _ = pm.Normal("y", mu, 1.0, observed=y)
>>> cal = php.calibrate_bayes_factors({"H0": null, "H1": alternative}, num_datasets=4,
...     num_steps=100, random_seed=0, progressbar=False)
>>> cal.log_evidence.shape
(4, 2)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import numpy as np
import pymc as pm

from ppl_hais.mcmc.fast_random import host_key, host_split
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
from ppl_hais.workflow.evidence import evidence
from ppl_hais.workflow.options import EvidenceOptions

from .target import cached_target, log_likelihood_of_data, pymc_model

__all__ = ["calibrate_bayes_factors"]


@float64
def calibrate_bayes_factors(
    models: Mapping,
    num_datasets: int = 100,
    *,
    prior_probs: Mapping | None = None,
    stratified: bool = False,
    random_seed=None,
    progressbar: bool = True,
    options=None,
    batch_size: int = BATCH_SIZE,
    **kwargs,
) -> BayesFactorCalibration:
    """Simulation-based calibration of the Bayes factors between PyMC models.

    For each of ``num_datasets`` data sets a model is drawn with its prior probability, and
    data from its prior predictive (``pm.sample_prior_predictive``); every model's log
    evidence on each data set is then estimated as :func:`sample_hais` estimates it (exactly,
    for a model without free variables: a point null). Each model compiles once: the data
    sets are arguments of its compiled density.

    Parameters
    ----------
    models : dict
        ``{name: pm.Model}`` (or Bambi models) over the same observed variables; the values
        they were built with only set the data's shapes.
    num_datasets : int
    prior_probs : dict, optional
        Prior model probabilities (default: equal).
    stratified : bool
        The same number of data sets from each model, in blocks, instead of drawing the model
        (a design analysis, ``design()``); the marginal check holds for drawn models, or
        stratified ones under equal prior probabilities.
    random_seed : int, optional
    progressbar : bool
    batch_size : int
        Data sets estimated side by side (default 16): their anneals run as vmapped calls
        over the data sets (:mod:`ppl_hais.workflow.datasets`); 1 estimates one data set after
        another. Either way each estimate tunes itself on its own data from its own key.
    options : ppl_hais.EvidenceOptions or dict, optional
        The options of every evidence (default: the convergence ladder).
    **kwargs
        Its fields by name (``num_steps``, ``num_particles``, ``initial``, ...), replacing the
        object's, as :func:`sample_hais` takes them.

    Returns
    -------
    ppl_hais.workflow.calibration.BayesFactorCalibration
        ``marginal()``, ``calibration()``, ``design()``, ``plot()``, ``to_arviz()``; warned
        data sets are kept and counted.
    """
    options = EvidenceOptions.of(options, "calibrate_bayes_factors", **kwargs)
    names = list(models) if isinstance(models, Mapping) else []
    pymc_models = {n: pymc_model(models[n]) for n in names}
    sites = check_models(models, {n: [rv.name for rv in m.observed_RVs]
                                  for n, m in pymc_models.items()}, "PyMC models")  # fmt: skip
    prior = check_prior_probs(names, prior_probs)
    start = time.perf_counter()
    rng = np.random.default_rng(random_seed)
    true = draw_models(rng, prior, num_datasets, stratified)

    def draw(m, num):
        pp = pm.sample_prior_predictive(draws=num, model=pymc_models[names[m]], var_names=sites,
                                        random_seed=int(rng.integers(2**31 - 1)))  # fmt: skip
        return {s: np.asarray(pp["prior_predictive"][s].values)[0] for s in sites}

    quiet = logging.getLogger("pymc")  # "Sampling: [...]" for every model
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        data = simulate(true, len(names), draw)
    finally:
        quiet.setLevel(level)
    fits = {n: _fitter(pymc_models[n], options) for n in names}
    key = host_split(host_key(int(rng.integers(2**31 - 1))))[1]  # the evidences' own key
    return calibrate(key, names, prior, true, data, fits, progress_bar=progressbar,
                     started=start, batch_size=batch_size,
                     settings=dict(num_datasets=len(true), stratified=stratified,
                                   options=options, batch_size=batch_size))  # fmt: skip


def _fitter(model, options):
    """``fit(key, data) -> evidence_record`` for one model: the evidence workflow over its
    target with the data set's values, or its exact log likelihood without free variables."""
    if not model.free_RVs:
        logp = log_likelihood_of_data(model)
        names = [rv.name for rv in model.observed_RVs]

        def fit_exact(key, data):
            return float(logp(*(data[n] for n in names))), 0.0, "", 0

        return fit_exact
    target = cached_target(model)

    def fit(key, data):
        return evidence_record(evidence(key, target.with_data(data), options,
                                        progress_bar=False))  # fmt: skip

    return fit
