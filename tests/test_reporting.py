"""AISResult summary, ArviZ output and model comparison."""

import dataclasses

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppl_hais as ph
from ppl_hais.model import validation as ex
from ppl_hais.results import arviz as arviz_out


@pytest.fixture(scope="module")
def result():
    import jax

    case = ex.correlated_gaussian(dim=3)
    return ph.hais(
        jax.random.key(0), case.target, num_particles=128, num_steps=300, progress_bar=False
    )


def test_summary_and_fields(result):
    s = result.summary()
    assert "log Z =" in s and "ESS" in s and "gradients per particle: 300" in s
    assert result.particles.shape == (128, 3)
    assert result.log_weights.shape == (128,)
    assert result.acceptance.shape == result.trace.beta.shape
    assert result.trace.beta[-1] == 1.0
    assert 0 < result.ess <= 128


def test_to_arviz(result):
    idata = result.to_arviz()
    assert idata.posterior["z"].shape == (1, 128, 3)
    lml = idata.sample_stats["log_marginal_likelihood"]
    assert lml.dims == ("chain",) and float(lml[0]) == result.log_z
    assert idata.sample_stats["log_weight"].shape == (1, 128)
    summary = az.summary(idata)
    assert len(summary) == 3
    # resampled posterior matches the weighted mean
    wmean = np.sum(result.weights[:, None] * result.particles, axis=0)
    post = idata.posterior["z"].values.reshape(-1, 3).mean(0)
    np.testing.assert_allclose(
        post, wmean, atol=4 * result.particles.std(0).max() / np.sqrt(result.ess)
    )


def test_compare_evidence_orders_and_probabilities(result):
    df = ph.compare_evidence(
        {"worse": (result.log_z - 2.0, 0.1), "run": result, "idata": result.to_arviz()}
    )
    assert list(df.index)[-1] == "worse"
    assert df["prob"].sum() == pytest.approx(1.0)
    assert df.loc["worse", "bayes_factor"] == pytest.approx(np.exp(2.0))
    assert df.loc["worse", "d_log_evidence"] == pytest.approx(2.0)
    assert df["rank"].tolist() == [0, 1, 2]


def test_compare_evidence_prior_probs():
    df = ph.compare_evidence({"a": (0.0, 0.1), "b": (0.0, 0.1)}, prior_probs={"a": 3, "b": 1})
    assert df.loc["a", "prob"] == pytest.approx(0.75)
    with pytest.raises(TypeError, match="cannot read"):
        ph.compare_evidence({"a": "nonsense"})


def test_compare_reads_smc_style_idata():
    import xarray as xr

    vals = np.empty((2, 3), dtype=object)
    for c in range(2):
        for d in range(3):
            vals[c, d] = np.nan if d < 2 else -10.0 - 0.1 * c
    idata = arviz_out.assemble(
        {"sample_stats": xr.Dataset({"log_marginal_likelihood": (("chain", "draw"), vals)})}
    )
    est, se = ph.workflow.compare.evidence_of(idata)
    assert est == pytest.approx(np.log(np.mean(np.exp([-10.0, -10.1]))))
    assert se > 0


def test_compare_reads_smc_idata_whose_chains_ran_different_numbers_of_stages():
    """pm.sample_smc stores one array of stage values per chain when the chains' stage counts
    differ (seen on a two-switchpoint model): the last finite value of each is its estimate."""
    import xarray as xr

    vals = np.empty(2, dtype=object)
    vals[0] = np.array([np.nan, -10.0])
    vals[1] = np.array([np.nan, np.nan, -10.1])
    idata = arviz_out.assemble(
        {"sample_stats": xr.Dataset({"log_marginal_likelihood": (("chain",), vals)})}
    )
    est, _ = ph.workflow.compare.evidence_of(idata)
    assert est == pytest.approx(np.log(np.mean(np.exp([-10.0, -10.1]))))


def test_observed_record_reads_values_only():
    """Names, site order, shapes and dtypes do not change the record; values and their number
    do, and the refusal says which kind of difference it is."""
    from ppl_hais.model.observed import differences, from_attrs, observed_data

    y, k = np.linspace(-1, 1, 10), np.arange(5)
    a = observed_data({"y": y, "k": k})
    assert a == observed_data({"counts": k.astype(np.int16), "obs": y.astype(np.float32)[:, None]})
    assert a.size == 15 and from_attrs(a.attrs()) == a and from_attrs(a.attrs()).sites == a.sites
    other = observed_data({"y": y + 1e-3, "k": k})
    assert other != a and other.size == a.size
    assert "same number of observations with different values" in differences(
        {"a": a, "b": other, "c": None})
    assert "different numbers" in differences({"a": a, "b": observed_data({"y": y})})
    assert differences({"a": a, "b": observed_data({"z": y, "w": k}), "c": None}) is None


def test_gaussian_full_covariance_density():
    from scipy.stats import multivariate_normal

    L = np.array([[1.0, 0, 0], [0.5, 2.0, 0], [-0.3, 0.2, 0.7]])
    q = ph.Gaussian(np.array([1.0, 0.0, -1.0]), scale_tril=L)
    z = np.array([0.3, -0.2, 0.5])
    exact = multivariate_normal(q.mean, L @ L.T).logpdf(z)
    assert float(q.log_prob(jnp.asarray(z))) == pytest.approx(exact, rel=1e-12)


def test_plots(result):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = ph.results.plots.plot_weights(result)
    assert "ESS" in ax.get_title()
    axes = ph.results.plots.plot_trace(result)
    assert axes.shape == (3,)
    idata = result.to_arviz(jax.random.key(0))  # the ArviZ output plots the same way
    assert ph.results.plots.plot_weights(idata).get_title() == ax.get_title()
    assert ph.results.plots.plot_trace(idata).shape == (3,)
    with pytest.raises(TypeError, match="AISResult"):
        ph.results.plots.plot_weights({"nonsense": 1})
    ax = ph.results.plots.plot_convergence([300], {"HAIS": [result]}, truth=result.log_z)
    assert ax.get_xscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    assert "warned (EvidenceWarning)" not in labels  # the fixture's run passed its checks
    # a warned run with an infinite SE is ringed and marked, never drawn as a bare marker
    warned = dataclasses.replace(result, log_z_se=float("inf"), checks=("pareto_k: ...",))
    ax = ph.results.plots.plot_convergence([300, 1000], {"HAIS": [result, warned]})
    assert "warned (EvidenceWarning)" in ax.get_legend_handles_labels()[1]
    assert [t.get_text() for t in ax.texts] == ["SE = ∞"]
    plt.close("all")


def test_pooled_error_bar_uses_the_larger_of_own_and_between_run_spread():
    from ppl_hais.checks.diagnostics import pool as _pool

    # runs that agree: the weights' SE stands (delta method: SE/√C for equal runs)
    est, var = _pool([-5.0, -5.0, -5.0, -5.0], [0.1, 0.1, 0.1, 0.1])
    assert est == pytest.approx(-5.0) and np.sqrt(var) == pytest.approx(0.05)
    # runs that disagree far beyond their SEs: the spread of Ẑ_c/Ẑ sets the error bar
    log_z = np.array([-5.0, -5.6, -4.7, -5.3])
    est, var = _pool(log_z, [0.01] * 4)
    rel = np.exp(log_z - est)
    assert np.sqrt(var) == pytest.approx(np.std(rel, ddof=1) / 2)
    assert np.sqrt(var) > 0.1
