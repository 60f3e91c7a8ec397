"""php.bridge_sampling: pm.sample's InferenceData (ArviZ 0.x) or DataTree (ArviZ 1.x) in, the
evidence out, against exact values; bad input refused by name."""

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

import ppl_hais as ph
from ppl_hais.adapters import pymc as php
from ppl_hais.results.arviz import group

rng = np.random.default_rng(5)
Y = rng.normal(0.8, 1.0, size=15)
COUNTS = np.array([4, 9, 2, 6])
ALPHA = np.array([1.0, 0.5, 2.0, 1.5])


def exact():
    nn = stats.multivariate_normal(np.zeros(15), np.eye(15) + 4.0).logpdf(Y)
    n = COUNTS.sum()
    dm = (special.gammaln(n + 1) - special.gammaln(COUNTS + 1).sum()
          + special.gammaln(ALPHA.sum()) - special.gammaln(ALPHA.sum() + n)
          + (special.gammaln(ALPHA + COUNTS) - special.gammaln(ALPHA)).sum())  # fmt: skip
    return float(nn + dm)


def build():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        pm.Normal("y", mu, 1.0, observed=Y)
        p = pm.Dirichlet("p", ALPHA)  # a simplex: PyMC's stick-breaking-like transform
        pm.Deterministic("mu2", 2 * mu)
        pm.Multinomial("counts", n=int(COUNTS.sum()), p=p, observed=COUNTS)
    return model


@pytest.fixture(scope="module")
def fitted():
    model = build()
    with model:
        idata = pm.sample(1000, tune=500, chains=4, cores=1, random_seed=3, progressbar=False,
                          compute_convergence_checks=False)  # fmt: skip
    return model, idata


def test_evidence_inside_and_outside_the_model_context(fitted):
    model, idata = fitted
    res = php.bridge_sampling(idata, model, random_seed=1)
    assert not res.warning, res.checks
    assert abs(res.log_z - exact()) < 4 * res.log_z_se
    with model:
        again = php.bridge_sampling(idata, random_seed=1)
    assert again.log_z == pytest.approx(res.log_z, abs=1e-9)
    warp = php.bridge_sampling(idata, model, method="warp3", random_seed=1)
    assert abs(warp.log_z - exact()) < 4 * warp.log_z_se
    table = ph.compare_evidence({"bridge": res, "bridge (ArviZ)": res.to_arviz()})
    assert table["log_evidence"].iloc[0] == pytest.approx(res.log_z)


def _without(idata, names):
    """A copy of the posterior group without ``names``, as the same kind of object."""
    post = group(idata, "posterior")
    kept = post.drop_vars(names)
    if hasattr(idata, "children"):  # DataTree (ArviZ 1.x)
        import xarray as xr

        return xr.DataTree.from_dict({"posterior": kept})
    import arviz as az

    return az.InferenceData(posterior=kept)


def _first_draws(idata, n):
    post = group(idata, "posterior").isel(draw=slice(0, n))
    if hasattr(idata, "children"):
        import xarray as xr

        return xr.DataTree.from_dict({"posterior": post})
    import arviz as az

    return az.InferenceData(posterior=post)


def test_bad_input(fitted):
    model, idata = fitted
    with pytest.raises(ValueError, match=r"lacks the model's free variable\(s\) \['p'\]"):
        php.bridge_sampling(_without(idata, ["p"]), model)
    with pytest.raises(ValueError, match="deterministics cannot stand"):
        php.bridge_sampling(_without(idata, ["mu", "p"]), model)  # only mu2 left
    with pytest.raises(ValueError, match="at least 100"):
        php.bridge_sampling(_first_draws(idata, 50), model)
    with model:
        prior = pm.sample_prior_predictive(50, random_seed=0)
    if "posterior" not in (list(prior.children) if hasattr(prior, "children")
                           else prior.groups()):  # fmt: skip
        with pytest.raises(ValueError, match="no posterior group"):
            php.bridge_sampling(prior, model)
    with pytest.raises(TypeError, match="InferenceData"):
        php.bridge_sampling({"mu": np.zeros((4, 1000))}, model)
    with pm.Model() as other:  # the same names, other shapes
        pm.Normal("mu", 0.0, 1.0, shape=2)
        pm.Dirichlet("p", ALPHA)
        pm.Normal("y", 0.0, 1.0, observed=Y)
    with pytest.raises(ValueError, match="do not come from this model"):
        php.bridge_sampling(idata, other)
    with pm.Model() as discrete:
        k = pm.Poisson("k", 3.0)
        pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", k, 1.0, observed=Y)
    with pytest.raises(ValueError, match=r"\['k'\] are discrete"):
        php.bridge_sampling(idata, discrete)


def test_bambi_model_goes_straight_in():
    bmb = pytest.importorskip("bambi")
    import pandas as pd

    data = pd.DataFrame({"x": rng.normal(size=40)})
    data["y"] = 0.5 + 1.2 * data["x"] + rng.normal(size=40)
    fit = bmb.Model("y ~ x", data, priors={"sigma": bmb.Prior("HalfNormal", sigma=2.0)})
    idata = fit.fit(draws=1000, tune=500, chains=2, cores=1, random_seed=0, progressbar=False)
    res = php.bridge_sampling(idata, fit, random_seed=0)
    assert not res.warning, res.checks
    # the evidence in one call from the Bambi model itself: the same as the bridge's, and a
    # posterior whose intercept is the one Bambi reports (uncentered), as in its own fit
    hais = php.sample_hais(model=fit, draws=512, random_seed=0, progressbar=False)
    stats = group(hais, "sample_stats")
    lz, lz_se = float(stats["log_evidence"]), float(stats["log_evidence_se"])
    assert abs(res.log_z - lz) < 4 * np.hypot(res.log_z_se, lz_se) + 0.02
    ours, bambis = (np.asarray(group(d, "posterior")["Intercept"]) for d in (hais, idata))
    sd = float(bambis.std())
    ours, bambis = float(ours.mean()), float(bambis.mean())
    assert abs(ours - bambis) < 0.2 * sd
