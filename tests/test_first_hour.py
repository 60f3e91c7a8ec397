"""A new user's mistakes: each gets an error within seconds that names the cause, and the remedy
it names works."""

import time

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
import pandas as pd
import pytest

import ppl_hais as ph
from ppl_hais.adapters import numpyro as phn
from ppl_hais.model.density import SplitDensity, improper_error

pm = pytest.importorskip("pymc")
from ppl_hais.adapters import pymc as php  # noqa: E402

SECONDS = 15.0  # a refusal comes before anything anneals: well under this on a loaded 2-core CI

rng = np.random.default_rng(0)
X = rng.normal(size=(100, 3))
Y = X @ np.array([1.0, -0.5, 0.2]) + 0.3 * rng.normal(size=100)


def regression(X, y=None):
    w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(X @ w, sigma), obs=y)


def flat_regression(X, y=None):
    w = numpyro.sample("w", dist.ImproperUniform(dist.constraints.real, (), event_shape=(3,)))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(X @ w, sigma), obs=y)


def _refused(fn, match):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match) as err:
        fn()
    assert time.perf_counter() - start < SECONDS
    return str(err.value)


def _run(model, *args, **kwargs):
    hais = phn.HAIS(model, progress_bar=False, **kwargs.pop("opts", {}))
    hais.run(jax.random.key(0), *args, **kwargs)
    return hais


def test_an_improper_prior_names_a_start_that_works():
    # the README regression with flat weights: the error names initial='laplace', which the
    # Laplace fit must then honour (its BFGS search had stopped at a saddle), and it agrees
    # with the other start it names
    _refused(lambda: _run(flat_regression, X, y=Y), r"improper prior.*initial='laplace'")
    with pytest.warns(UserWarning, match="arbitrary constant"):
        laplace = _run(flat_regression, X, y=Y, opts=dict(initial="laplace"))
    with pytest.warns(UserWarning, match="arbitrary constant"):
        vi = _run(flat_regression, X, y=Y, opts=dict(initial="vi"))
    se = np.hypot(laplace.log_evidence_se, vi.log_evidence_se)
    assert abs(laplace.log_evidence - vi.log_evidence) <= 4 * se + 0.01


def test_where_the_laplace_fit_fails_the_error_names_vi_first():
    class Flat(SplitDensity):
        dim, improper, prior = 2, ("w",), None

        def log_parts(self, z):
            return 0.0, -0.5 * z[0] ** 2

    message = str(improper_error(Flat(), "the Hessian at the mode is not positive definite"))
    assert message.index("initial='vi'") < message.index("initial='laplace' fails")


def test_nan_in_a_predictor_names_the_argument():
    bad = X.copy()
    bad[3, 1] = np.nan
    _refused(lambda: _run(regression, bad, y=Y), r"model argument 'X' has 1 NaN value")
    with pm.Model():
        w = pm.Normal("w", 0, 1, shape=3)
        pm.Normal("y", pm.math.dot(bad, w), 1.0, observed=Y)
        _refused(lambda: php.sample_hais(progressbar=False),
                 r"array of shape \(100, 3\) that enters observed variable 'y'")  # fmt: skip


def test_nan_in_the_observations_still_names_obs_mask():
    y = Y.copy()
    y[0] = np.nan
    _refused(lambda: _run(regression, X, y=y), r"observed site 'y'.*obs_mask")


def test_observations_that_broadcast_are_refused_with_both_shapes():
    _refused(lambda: _run(regression, X, y=Y[:, None]),
             r"data have shape \(100, 1\) and its distribution \(100,\); they broadcast to "
             r"\(100, 100\)")  # fmt: skip
    # the remedy it names: the data in the distribution's shape
    assert np.isfinite(_run(regression, X, y=Y[:, None].reshape((100,))).log_evidence)


def _draws_only(model):
    """What pm.sample returns, without NUTS's time: exact posterior draws of a conjugate
    model, with the sample_stats group every pm.sample output has."""
    import arviz as az

    mu = 0.5 + np.sqrt(0.5) * np.random.default_rng(1).normal(size=(2, 500))
    groups = {"posterior": {"mu": mu}, "sample_stats": {"diverging": np.zeros((2, 500), bool)}}
    try:  # ArviZ 0.x: InferenceData from the groups as keywords
        return az.from_dict(**groups)
    except TypeError:  # ArviZ 1.x: a DataTree from a dict of groups
        return az.from_dict(groups)


def test_compare_evidence_on_draws_says_how_to_get_evidence_and_the_way_works():
    with pm.Model() as model:  # y = 1 observed with N(mu, 1), mu ~ N(0, 1): y ~ N(0, 2)
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu, 1.0, observed=np.array([1.0]))
    idata = _draws_only(model)
    message = _refused(lambda: ph.compare_evidence({"nuts": idata}), "model 'nuts'")
    assert "php.bridge_sampling(idata, model)" in message
    bridged = php.bridge_sampling(idata, model, progressbar=False)
    table = ph.compare_evidence({"nuts": bridged, "other": (-3.0, 0.1)})
    exact = -0.25 - 0.5 * np.log(2 * np.pi * 2)
    assert abs(table.loc["nuts", "log_evidence"] - exact) < 4 * table.loc["nuts", "se"] + 0.01


def test_a_comparison_table_prints_every_column_in_a_narrow_terminal():
    table = ph.compare_evidence({"a": (-10.0, 0.1), "b": (-12.0, 0.2)})
    with pd.option_context("display.max_columns", 4, "display.width", 60):
        text = str(table)
    assert "..." not in text and "bayes_factor" in text and "prob" in text
    assert type(table[["log_evidence", "se"]]) is type(table)  # selections print whole too


def test_progress_bars_close_at_their_totals(capsys):
    import re

    import jax.numpy as jnp

    target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum((z - 1.0) ** 2),
                                initial=ph.Gaussian(jnp.zeros(2), 2.0))  # fmt: skip
    ph.hais(jax.random.key(0), target, num_particles=64, num_steps=300, progress_bar=True)
    last = {}  # each bar's last state as the terminal shows it
    for line in re.split(r"[\r\n]", capsys.readouterr().err):
        m = re.match(r"\s*(.+?): +(\d+)%\|.*?\| *(\d+)/(\d+)", line)
        if m:
            last[m.group(1)] = m.groups()[1:]
    assert set(last) >= {"pilot", "hais"}, last
    assert all(pct == "100" and done == total for pct, done, total in last.values()), last


def test_typos_and_wrong_containers_get_the_name_that_was_meant():
    with pytest.raises(TypeError, match=r"'num_particle' \(did you mean 'num_particles'\?\)"):
        phn.HAIS(regression, num_particle=100)
    import jax.numpy as jnp

    target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
                                initial=ph.Gaussian(jnp.zeros(2)))  # fmt: skip
    with pytest.raises(TypeError, match=r"'num_particle' \(did you mean 'num_particles'\?\)"):
        ph.hais(jax.random.key(0), target, num_particle=64)
    with pytest.raises(TypeError, match="takes a dict"):
        ph.compare_evidence([("a", (-3.0, 0.1))])
