"""The stack users have: ArviZ 0.x and 1.x output, compile-once NumPyro runs, missing data the
NumPyro way, float64 scoped to a call, pm.sample_smc's keywords, and bad input named clearly.
Every test runs on both stacks (CI: `make test` on the newest, `make test-oldest` on 3.11)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

import ppl_hais as ph
from ppl_hais.annealing import execution
from ppl_hais.results.arviz import ARVIZ_1, group_names

numpyro = pytest.importorskip("numpyro")
pm = pytest.importorskip("pymc")

import numpyro.distributions as dist  # noqa: E402
from numpyro import handlers  # noqa: E402

from ppl_hais.adapters import numpyro as phn  # noqa: E402
from ppl_hais.adapters import pymc as php  # noqa: E402

TOL = 4.0
ROOT = Path(__file__).parents[1]


def _regression(X, y=None):
    w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)


def _regression_exact(X, y):
    return multivariate_normal(np.zeros(len(y)), np.eye(len(y)) + X @ X.T).logpdf(y)


def _data(seed, n=30, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + rng.normal(size=n)


def _compiled_count():
    """Compiled annealing scans so far (the driver's per-structure cache and jit's own)."""
    info = execution.compiled.cache_info()
    return info.misses, info.currsize


# ---------------------------------------------------------------------------------------------
# ArviZ output


def test_output_type_follows_the_installed_arviz():
    X, y = _data(0)
    h = phn.HAIS(_regression, num_particles=64, num_steps=100, progress_bar=False)
    h.run(jax.random.key(0), X, y=y)
    idata = h.to_arviz()
    if ARVIZ_1:
        import xarray as xr

        assert isinstance(idata, xr.DataTree)
    else:
        assert isinstance(idata, az.InferenceData)
    assert {"posterior", "sample_stats", "log_likelihood", "observed_data"} <= set(
        group_names(idata)
    )
    assert idata["sample_stats"].attrs["inference_library"] == "ppl_hais (numpyro)"
    assert idata["posterior"]["w"].dims == ("chain", "draw", "w_dim_0")


def test_pymc_output_keeps_constant_data_and_works_with_arviz():
    rng = np.random.default_rng(1)
    x = rng.normal(size=20)
    y = 0.7 * x + rng.normal(size=20)
    with pm.Model(coords={"obs": np.arange(20)}):
        xd = pm.Data("x", x, dims="obs")
        b = pm.Normal("b", 0, 1)
        pm.Normal("y", b * xd, 1.0, observed=y, dims="obs")
        idata = php.sample_hais(
            draws=128, num_steps=200, chains=2, random_seed=0, progressbar=False,
            idata_kwargs={"log_likelihood": True},
        )  # fmt: skip
        mcmc = php.sample_reduced_flip_hmc(
            draws=200, tune=200, chains=2, random_seed=0, progressbar=False
        )
    for out in (idata, mcmc):
        groups = set(group_names(out))
        assert {"posterior", "sample_stats", "observed_data", "constant_data"} <= groups
        np.testing.assert_allclose(out["constant_data"]["x"].values, x)
        assert out["observed_data"]["y"].dims == ("obs",)
    assert idata["log_likelihood"]["y"].shape == (2, 128, 20)
    assert idata["sample_stats"]["log_marginal_likelihood"].dims == ("chain",)
    az.summary(idata)
    az.summary(mcmc)
    loo = az.loo(idata)
    assert np.isfinite(float(loo["elpd"] if ARVIZ_1 else loo["elpd_loo"]))
    table = az.compare({"a": idata, "b": idata})
    assert sorted(table.index) == ["a", "b"] and np.allclose(table["elpd_diff"].astype(float), 0)
    # the plots of ph.results.plots read the ArviZ output of either stack
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    assert ph.results.plots.plot_trace(idata, chain=1).shape == (3,)
    plt.close("all")


# ---------------------------------------------------------------------------------------------
# NumPyro: compile once


def test_numpyro_second_run_and_new_data_compile_nothing():
    X, y = _data(2)
    h = phn.HAIS(_regression, num_particles=64, num_steps=200, progress_bar=False)
    h.run(jax.random.key(0), X, y=y)
    first = h.log_evidence
    before = _compiled_count()
    h.run(jax.random.key(1), X, y=y)  # a second run
    X2, y2 = _data(3)
    h2 = phn.HAIS(_regression, num_particles=64, num_steps=200, progress_bar=True)
    h2.run(jax.random.key(1), X2, y=y2)  # a new HAIS, new data of the same shapes, a bar
    assert _compiled_count() == before
    # and the new data was used, not the compiled-in old data
    assert abs(h2.log_evidence - _regression_exact(X2, y2)) < TOL * h2.log_evidence_se
    assert abs(first - _regression_exact(X, y)) < TOL * h.log_evidence_se
    assert abs(h2.log_evidence - first) > 1.0


def test_numpyro_model_with_python_control_flow_on_data_still_runs():
    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0, 2))
        if float(np.sum(y)) > -1e9:  # needs concrete data: compiled per data set instead
            numpyro.sample("y", dist.Normal(mu, 1), obs=y)

    y = np.array([0.3, -0.5, 1.1])
    h = phn.HAIS(model, num_particles=128, num_steps=200, progress_bar=False)
    h.run(jax.random.key(0), y)
    exact = multivariate_normal(np.zeros(3), np.eye(3) + 4.0).logpdf(y)
    assert abs(h.log_evidence - exact) < TOL * h.log_evidence_se


def test_float64_is_scoped_to_the_call():
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        from ppl_hais.adapters import numpyro as phn
        def model(y):
            mu = numpyro.sample("mu", dist.Normal(0, 2))
            numpyro.sample("y", dist.Normal(mu, 1), obs=y)
        h = phn.HAIS(model, num_particles=32, num_steps=50, progress_bar=False)
        h.run(jax.random.key(0), jnp.array([0.3, -0.5]))
        assert h.results[0].log_weights.dtype.name == "float64"
        h.get_samples()
        # the start's own entry point too (its Laplace fit once ran in float32 when a
        # refactor moved the decorator off the start's chooser)
        import ppl_hais as ph
        from ppl_hais.workflow.evidence import choose_initial
        class Model:
            dim, improper = 1, ()
            prior = ph.Gaussian(jnp.zeros(1), 1.0)
            def log_likelihood(self, z):
                return -0.5 * 1e4 * jnp.sum((1.0 - z) ** 2)  # a prior that does not work
            def log_joint(self, z):
                return self.prior.log_prob(z) + self.log_likelihood(z)
        name, target, pilot, _ = choose_initial(jax.random.key(1), Model(), num_steps=50)
        assert name == "laplace" and pilot.log_weights.dtype.name == "float64"
        leaves = jax.tree_util.tree_leaves(target.initial)
        assert all(x.dtype.name == "float64" for x in leaves if hasattr(x, "dtype")), leaves
        print(jnp.arange(3).dtype, jax.config.jax_enable_x64)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.split()[-2:] == ["int32", "False"]


# ---------------------------------------------------------------------------------------------
# NumPyro: missing data


def _missing():
    rng = np.random.default_rng(4)
    y = rng.normal(0.5, 1.0, size=12)
    miss = np.zeros(12, bool)
    miss[[2, 5, 9]] = True
    obs = y[~miss]
    exact = multivariate_normal(np.zeros(obs.size), 4.0 + np.eye(obs.size)).logpdf(obs)
    return np.where(miss, np.nan, y), exact


def test_obs_mask_gives_the_evidence_of_the_observed_entries():
    y, exact = _missing()

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0, 2))
        with numpyro.plate("n", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, 1), obs=y, obs_mask=~jnp.isnan(y))

    h = phn.HAIS(model, num_particles=256, num_steps=300, progress_bar=False)
    h.run(jax.random.key(0), jnp.asarray(y))
    assert abs(h.log_evidence - exact) < TOL * h.log_evidence_se
    s = h.get_samples()
    assert s["y"].shape == (256, 12) and np.all(np.isfinite(s["y"]))
    np.testing.assert_allclose(s["y"][:, ~np.isnan(y)], np.broadcast_to(y[~np.isnan(y)], (256, 9)))


def test_mask_handler_with_nan_in_the_array():
    y, exact = _missing()

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0, 2))
        with numpyro.plate("n", y.shape[0]), handlers.mask(mask=~jnp.isnan(y)):
            numpyro.sample("y", dist.Normal(mu, 1), obs=y)

    h = phn.HAIS(model, num_particles=256, num_steps=300, progress_bar=False)
    h.run(jax.random.key(0), jnp.asarray(y))
    assert abs(h.log_evidence - exact) < TOL * h.log_evidence_se


def test_unmasked_nan_recommends_obs_mask_only():
    y, _ = _missing()

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0, 2))
        numpyro.sample("y", dist.Normal(mu, 1), obs=y)

    h = phn.HAIS(model, num_particles=32, num_steps=50, progress_bar=False)
    with pytest.raises(ValueError, match=r"3 NaN/inf value\(s\) that are not masked.*obs_mask"):
        h.run(jax.random.key(0), jnp.asarray(y))


# ---------------------------------------------------------------------------------------------
# PyMC


def test_pymc_notices_a_changed_unnamed_shared_value():
    import pytensor

    data = pytensor.shared(np.array([0.3, -0.5, 1.1]))
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 2)
        pm.Normal("y", mu, 1.0, observed=data)
    kw = dict(draws=128, num_steps=200, random_seed=0, progressbar=False, model=model)
    estimates = []
    for values in ([0.3, -0.5, 1.1], [5.3, 4.5, 6.1]):
        data.set_value(np.array(values))
        idata = php.sample_hais(**kw)
        est, se = ph.workflow.compare.evidence_of(idata)
        exact = multivariate_normal(np.zeros(3), np.eye(3) + 4.0).logpdf(values)
        assert abs(est - exact) < TOL * se
        estimates.append(est)
    assert abs(estimates[0] - estimates[1]) > 1.0


def test_pymc_takes_or_refuses_sample_smc_keywords():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 2)
        pm.Normal("y", mu, 1.0, observed=[0.3, -0.5])
    kw = dict(draws=32, num_steps=50, random_seed=0, progressbar=False, model=model)
    idata = php.sample_hais(cores=2, compute_convergence_checks=False, chains=None, **kw)
    assert idata["sample_stats"]["log_marginal_likelihood"].shape == (1,)
    for name, value in [("kernel", pm.smc.kernels.IMH), ("start", {}), ("threshold", 0.5),
                        ("mp_ctx", "spawn"), ("nonsense", 1)]:  # fmt: skip
        with pytest.raises(TypeError, match=f"does not take {name}="):
            php.sample_hais(**kw, **{name: value})
    with pytest.raises(ValueError, match="return_inferencedata=False"):
        php.sample_hais(return_inferencedata=False, **kw)


def test_pymc_draws_are_resampled_from_the_particles():
    """``draws`` is the posterior's size per chain, as ``pm.sample_smc``'s; the anneal runs
    ``num_particles`` particles, by default ``min(draws, 512)`` (``phn.HAIS``'s default)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 2)
        pm.Normal("y", mu, 1.0, observed=[0.3, -0.5])
    kw = dict(num_steps=50, random_seed=0, progressbar=False, model=model)

    def particles(idata):
        return int(idata["sample_stats"].attrs["hais_num_particles"])

    few = php.sample_hais(draws=40, num_particles=16, **kw)
    assert few["posterior"]["mu"].shape == (1, 40) and particles(few) == 16
    many = php.sample_hais(draws=600, **kw)
    assert many["posterior"]["mu"].shape == (1, 600) and particles(many) == 512
    same = [php.sample_hais(draws=32, **kw), php.sample_hais(draws=32, num_particles=32, **kw)]
    assert particles(same[0]) == 32
    assert float(same[0]["sample_stats"]["log_evidence"]) == float(
        same[1]["sample_stats"]["log_evidence"])
    with pytest.raises(ValueError, match="num_particles must be an integer of at least 2"):
        php.sample_hais(draws=40, num_particles=1, **kw)


# ---------------------------------------------------------------------------------------------
# bad input


def test_bad_input_is_named():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 2)
        pm.Normal("y", mu, 1.0, observed=[0.3, -0.5])
    with pytest.raises(TypeError, match="PyMC model.*sample_hais"):
        phn.HAIS(model)
    with pytest.raises(TypeError, match="pm.Model.*NumPyro model function"):
        php.sample_hais(model=_regression, progressbar=False)
    for kw in ({"num_chains": 0}, {"num_particles": 0}, {"num_steps": 2.5}):
        with pytest.raises(ValueError, match="positive integer|integer of at least 2"):
            phn.HAIS(_regression, **kw)
    with pytest.raises(ValueError, match="chains must be a positive integer"):
        php.sample_hais(model=model, chains=0, progressbar=False)
    with pytest.raises(ValueError, match="draws must be an integer of at least 2"):
        php.sample_hais(model=model, draws=1, progressbar=False)  # named as PyMC names it
    with pytest.raises(ValueError, match="chains must be a positive integer"):
        php.sample_reduced_flip_hmc(model=model, chains=0, progressbar=False)
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        php.sample_reduced_flip_hmc(model=model, draws=0, progressbar=False)
    X, y = _data(0)
    h = phn.HAIS(_regression, num_particles=32, num_steps=50, progress_bar=False)
    with pytest.raises(TypeError, match=r"rng_key must be a single JAX PRNG key.*got int \(0\)"):
        h.run(0, X, y=y)
    with pytest.raises(TypeError, match="extra_fields"):
        h.run(jax.random.key(0), X, y=y, extra_fields=("accept_prob",))
    with pytest.raises(TypeError, match="init_params"):
        h.run(jax.random.key(0), X, y=y, init_params={"w": np.zeros(3)})
    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum(z**2), ph.Gaussian(np.zeros(2)))
    with pytest.raises(TypeError, match="rng_key must be a single JAX PRNG key"):
        ph.hais(1, target, num_particles=32, num_steps=50, progress_bar=False)
    with pytest.raises(TypeError, match="rng_key must be a single JAX PRNG key"):
        ph.hais(jax.random.split(jax.random.key(0)), target, num_particles=32, num_steps=50)


# (the README's blocks run as written on whichever stack runs tests/test_docs.py)


def test_target_se_picks_the_number_of_temperatures_for_the_model():
    chosen = {}
    for d, n in ((2, 30), (12, 60)):
        X, y = _data(d, n=n, d=d)
        h = phn.HAIS(
            _regression, num_particles=256, target_se=0.05, initial="prior", progress_bar=False
        )
        h.run(jax.random.key(d), X, y=y)
        chosen[d] = h.evidence.steps_plan.num_steps
        assert h.results[0].settings.num_steps == chosen[d]
        assert abs(h.log_evidence - _regression_exact(X, y)) < TOL * h.log_evidence_se
        # the probe's 1/N prediction is what the main run reaches (within 50%)
        assert h.log_evidence_se < 1.5 * 0.05 or h.evidence.checks
    # the harder model gets more temperatures than the easy one
    assert chosen[12] > chosen[2], chosen
