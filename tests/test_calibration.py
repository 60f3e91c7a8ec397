"""Simulation-based calibration of Bayes factors: the arithmetic against data sets simulated
with exact evidences, and the NumPyro workflow on conjugate pairs whose evidences are exact."""

import warnings

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import stats
from scipy.special import betaln, gammaln

import ppl_hais as ph
from ppl_hais.adapters import numpyro as phn
from ppl_hais.model.observed import observed_data
from ppl_hais.results import arviz as arviz_out
from ppl_hais.workflow.calibration import BayesFactorCalibration

N, TAU = 20, 0.5  # a normal mean: zero (H0) or N(0, TAU²) (H1), unit noise, N observations
TRIALS = 30  # a binomial rate: 1/2 (H0) or uniform (H1)


def _normal_mean_exact(y):
    """(log p(y | H0), log p(y | H1)) per data set (rows of y)."""
    h0 = stats.norm(0, 1).logpdf(y).sum(axis=1)
    h1 = stats.multivariate_normal(np.zeros(N), np.eye(N) + TAU**2).logpdf(y)
    return np.stack([h0, np.atleast_1d(h1)], axis=1)


def _simulated_normal_mean(rng, num):
    true = rng.integers(0, 2, size=num)
    mu = np.where(true == 1, rng.normal(0, TAU, size=num), 0.0)
    return true, mu[:, None] + rng.normal(size=(num, N))


def test_exact_evidences_are_calibrated_and_a_biased_estimator_is_caught():
    """With exact evidences both checks hold within Monte Carlo error; adding 0.5 nat to H1's
    evidence (a biased estimator) moves its mean posterior probability beyond 3 SEs, and the
    calibration warns, stating it."""
    rng = np.random.default_rng(1)
    true, y = _simulated_normal_mean(rng, 4000)
    log_z = _normal_mean_exact(y)
    cal = BayesFactorCalibration(("H0", "H1"), np.array([0.5, 0.5]), true, log_z,
                                 np.zeros_like(log_z))  # fmt: skip
    table = cal.marginal()
    assert np.all(np.abs(table["z"]) < 3), table
    bins = cal.calibration(10).dropna()
    assert np.all(np.abs(bins["observed"] - bins["predicted"]) < 4 * bins["se"] + 0.01), bins
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        cal.warn_if_miscalibrated()  # nothing to say
    biased = BayesFactorCalibration(cal.models, cal.prior_probs, true,
                                    log_z + np.array([0.0, 0.5]), np.zeros_like(log_z))
    assert biased.marginal().loc["H1", "z"] > 3
    with pytest.warns(ph.EvidenceWarning, match=r"calibration: the mean posterior probability "
                      r"of H0 is 0\.\d+ ± 0\.\d+ against its prior 0\.500"):
        biased.warn_if_miscalibrated()


def test_design_analysis_shares():
    """The design table counts, per true model, the data sets whose Bayes factor reaches the
    threshold either way."""
    true = np.array([0, 0, 0, 0, 1, 1])
    log_bf = np.log([1 / 20, 1 / 5, 2.0, 1 / 11, 30.0, 9.0])
    log_z = np.stack([np.zeros(6), log_bf], axis=1)
    cal = BayesFactorCalibration(("H0", "H1"), np.array([0.5, 0.5]), true, log_z, 0 * log_z)
    table = cal.design("H1", "H0", threshold=10)
    assert table.loc["H0", "for_denominator"] == 0.5 and table.loc["H0", "for_numerator"] == 0
    assert table.loc["H1", "for_numerator"] == 0.5 and table.loc["H1", "inconclusive"] == 0.5
    group = arviz_out.group(cal.to_arviz(), "sample_stats")
    assert group["log_evidence"].dims == ("dataset", "model")
    assert list(group["true_model"].values) == ["H0"] * 4 + ["H1"] * 2


def null_mean(y=None):
    numpyro.sample("y", dist.Normal(0.0, 1.0).expand([N]).to_event(1), obs=y)


def normal_mean(y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, TAU))
    numpyro.sample("y", dist.Normal(mu, 1.0).expand([N]).to_event(1), obs=y)


def fair(k=None):
    numpyro.sample("k", dist.Binomial(TRIALS, 0.5), obs=k)


def uniform_rate(k=None):
    theta = numpyro.sample("theta", dist.Beta(1.0, 1.0))
    numpyro.sample("k", dist.Binomial(TRIALS, theta), obs=k)


def _binomial_exact(k):
    choose = gammaln(TRIALS + 1) - gammaln(k + 1) - gammaln(TRIALS - k + 1)
    return np.stack([choose + TRIALS * np.log(0.5), choose + betaln(k + 1, TRIALS - k + 1)], 1)


@pytest.mark.parametrize("pair", ["normal_mean", "beta_binomial"])
def test_numpyro_evidences_match_exact_on_every_data_set(pair):
    """Through NumPyro, on conjugate pairs: every estimated evidence within 4 SE + 0.02 of the
    exact one on its simulated data set (the null's exact, SE 0), so the posterior model
    probabilities agree with the exact ones to the same error."""
    models = ({"H0": null_mean, "H1": normal_mean} if pair == "normal_mean"
              else {"H0": fair, "H1": uniform_rate})  # fmt: skip
    site = "y" if pair == "normal_mean" else "k"
    cal = phn.calibrate_bayes_factors(jax.random.key(3), models, num_datasets=16,
                                      observed=[site], progress_bar=False,
                                      prior_probs={"H0": 0.3, "H1": 0.7})  # fmt: skip
    data = np.asarray(cal.datasets[site])
    exact = _normal_mean_exact(data) if pair == "normal_mean" else _binomial_exact(data)
    err = np.abs(cal.log_evidence - exact)
    assert np.all(err <= 4 * cal.log_evidence_se + 0.02), (err, cal.log_evidence_se)
    assert np.all(cal.log_evidence_se[:, 0] == 0) and not cal.warning.any()
    assert set(np.unique(cal.true_model)) == {0, 1}
    log_post = exact + np.log([0.3, 0.7])
    exact_probs = np.exp(log_post - np.logaddexp(log_post[:, :1], log_post[:, 1:]))
    bound = np.max(4 * cal.log_evidence_se + 0.02, axis=1) / 4  # |dp| <= |d log BF| / 4
    assert np.all(np.abs(cal.posterior_probs - exact_probs)[:, 1] <= bound)


def test_models_must_share_their_data_sites():
    def other(z=None):
        numpyro.sample("z", dist.Normal(0.0, 1.0), obs=z)

    with pytest.raises(ValueError, match=r"observe the same sites.*H0: \['y'\]; H1: \[\]"):
        phn.calibrate_bayes_factors(jax.random.key(0), {"H0": null_mean, "H1": other},
                                    observed=["y"], num_datasets=2, progress_bar=False)


@pytest.mark.slow
def test_calibration_holds_over_500_data_sets():
    """The normal-mean pair over 500 data sets from the joint prior: every evidence within
    4 SE + 0.02 of the exact one, and the marginal calibration within 3 Monte Carlo SEs."""
    cal = phn.calibrate_bayes_factors(jax.random.key(11), {"H0": null_mean, "H1": normal_mean},
                                      num_datasets=500, observed=["y"], progress_bar=False)
    exact = _normal_mean_exact(np.asarray(cal.datasets["y"]))
    assert np.all(np.abs(cal.log_evidence - exact) <= 4 * cal.log_evidence_se + 0.02)
    assert np.all(np.abs(cal.marginal()["z"]) < 3)


def test_pymc_evidences_match_exact_and_each_model_compiles_once():
    """Through PyMC, the normal-mean pair: every evidence within 4 SE + 0.02 of the exact one
    on its data set; the data sets are inputs of one compiled density per model, so a data
    set after the first costs no compilation (under a tenth of a second of work here)."""
    import pymc as pm

    from ppl_hais.adapters import pymc as php

    with pm.Model() as null:
        pm.Normal("y", 0.0, 1.0, observed=np.zeros(N))
    with pm.Model() as alternative:
        mu = pm.Normal("mu", 0.0, TAU)
        pm.Normal("y", mu, 1.0, observed=np.zeros(N))
    cal = php.calibrate_bayes_factors({"H0": null, "H1": alternative}, num_datasets=16,
                                      random_seed=4, progressbar=False)  # fmt: skip
    exact = _normal_mean_exact(np.asarray(cal.datasets["y"]))
    assert np.all(np.abs(cal.log_evidence - exact) <= 4 * cal.log_evidence_se + 0.02)
    assert set(np.unique(cal.true_model)) == {0, 1} and not cal.warning.any()
    target = php.PyMCTarget(alternative)
    moved = target.with_data({"y": np.ones(N)})
    assert moved == target and moved.observed_data != target.observed_data
    assert moved.observed_data == observed_data({"obs": np.ones(N)})
