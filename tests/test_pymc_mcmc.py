"""php.sample_reduced_flip_hmc: closed-form posteriors, pm.sample-shaped InferenceData, refusals.

Tolerance: 5 Monte Carlo standard errors from ArviZ's ESS.
"""

import numpy as np
import pytest

pm = pytest.importorskip("pymc")
import arviz as az  # noqa: E402

from ppl_hais.adapters import pymc as php  # noqa: E402

RNG = np.random.default_rng(7)
Y = RNG.normal(1.0, 1.0, size=(3, 12))  # three groups, known noise 1


def _within(draws, mean, sd):
    draws = np.asarray(draws)  # (chain, draw)
    ess = float(az.ess(draws))
    assert ess > 100
    assert abs(float(draws.mean()) - mean) < 5 * sd / np.sqrt(ess)
    ess2 = float(az.ess((draws - mean) ** 2))
    assert abs(float(((draws - mean) ** 2).mean()) - sd**2) < 5 * np.sqrt(2) * sd**2 / np.sqrt(ess2)


def test_normal_means_with_dims():
    coords = {"group": ["a", "b", "c"], "obs": np.arange(12)}
    with pm.Model(coords=coords):
        mu = pm.Normal("mu", 0.0, 2.0, dims="group")
        pm.Deterministic("mu2", 2 * mu, dims="group")
        pm.Normal("y", mu[:, None], 1.0, observed=Y, dims=("group", "obs"))
        idata = php.sample_reduced_flip_hmc(
            draws=1500, tune=500, chains=2, random_seed=3, progressbar=False,
            lookahead=2, idata_kwargs={"log_likelihood": True},
        )  # fmt: skip
    post = idata.posterior
    assert post["mu"].dims == ("chain", "draw", "group")
    assert list(post["group"].values) == ["a", "b", "c"]
    np.testing.assert_allclose(post["mu2"], 2 * post["mu"])
    prec = 12 + 1 / 4.0
    for g in range(3):
        _within(post["mu"].isel(group=g), Y[g].sum() / prec, np.sqrt(1 / prec))
    for name in ("acceptance_rate", "step_size", "diverging", "lp", "n_steps", "is_flipped"):
        assert name in idata.sample_stats
    assert idata.sample_stats["diverging"].dims == ("chain", "draw")
    assert "y" in idata.observed_data and "y" in idata.log_likelihood
    assert (
        float(idata.sample_stats["is_flipped"].mean())
        < 1 - float((idata.sample_stats["lookahead_depth"] > 0).mean()) + 1e-12
    )


def test_positive_variable_and_flat_prior():
    """HalfNormal scale through PyMC's log transform; a Flat mean (fine for MCMC)."""
    y = RNG.normal(0.5, 2.0, size=30)
    with pm.Model():
        m = pm.Flat("m")
        pm.Normal("y", m, 2.0, observed=y)
        idata = php.sample_reduced_flip_hmc(draws=1500, tune=500, chains=2, random_seed=4,
                                            progressbar=False)  # fmt: skip
    _within(idata.posterior["m"], y.mean(), 2.0 / np.sqrt(30))

    with pm.Model():
        tau = pm.Gamma("tau", 3.0, 2.0)
        pm.Normal("y", 0.0, sigma=1 / np.sqrt(tau), observed=y)
        idata = php.sample_reduced_flip_hmc(draws=1500, tune=500, chains=2, random_seed=5,
                                            progressbar=False)  # fmt: skip
    a, b = 3.0 + 15, 2.0 + 0.5 * np.sum(y**2)  # Gamma posterior of the precision
    _within(idata.posterior["tau"], a / b, np.sqrt(a) / b)


def test_discrete_refused():
    with pm.Model():
        pm.Poisson("k", 3.0)
        with pytest.raises(ValueError, match=r"discrete free variable\(s\) \['k'\]"):
            php.sample_reduced_flip_hmc(draws=10, tune=10, progressbar=False)
