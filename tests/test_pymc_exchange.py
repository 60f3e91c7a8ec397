"""php.sample_exchange: the exchange sampler on a PyMC model's θ, against a grid posterior with
exact Z(θ) (the same data model as tests/test_numpyro_exchange.py's plate idiom)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pm = pytest.importorskip("pymc")
import arviz as az  # noqa: E402
from scipy.special import expit, log_expit  # noqa: E402

import ppl_hais as ph  # noqa: E402
from ppl_hais.adapters import pymc as php  # noqa: E402
from ppl_hais.research.exchange import GaussianEnvelope, UniformEnvelope  # noqa: E402


def energy(x, p):  # one datum x of shape (1,): E = θ·x² − 1
    return p["theta"] * jnp.sum(x**2) - 1.0


def _grid(data):
    gx, gw = np.polynomial.hermite_e.hermegauss(80)
    gw = gw / np.sqrt(2 * np.pi)
    th = np.linspace(-1.5, 5.0, 1301)
    log_z = np.log(np.sum(gw * expit(-(th[:, None] * gx**2 - 1.0)), axis=1))
    s = np.sum(np.asarray(data) ** 2, axis=1)
    log_post = -0.5 * th**2 + np.sum(log_expit(-(th[:, None] * s - 1.0)), 1) - len(s) * log_z
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    mean = np.sum(w * th)
    return mean, np.sqrt(np.sum(w * (th - mean) ** 2))


def test_posterior_against_grid():
    envelope = GaussianEnvelope(jnp.zeros(1))
    data, _ = ph.BoundedEnergy(lambda x, t: t * jnp.sum(x**2) - 1.0, envelope).sample(
        jax.random.key(2), 1.0, 50
    )
    with pm.Model():
        pm.Normal("theta", 0.0, 1.0)
        idata = php.sample_exchange(energy, envelope, data, draws=3000, tune=500, chains=2,
                                    random_seed=1, progressbar=False)  # fmt: skip
    draws = np.asarray(idata.posterior["theta"])
    assert draws.shape == (2, 3000)
    mean, sd = _grid(data)
    ess = float(az.ess(draws))
    assert ess > 300
    assert abs(draws.mean() - mean) < 5 * sd / np.sqrt(ess), (draws.mean(), mean, sd, ess)
    assert abs(draws.std() - sd) < 0.25 * sd
    assert 0.1 < float(idata.sample_stats["acceptance_rate"].mean()) < 0.7
    assert float(idata.sample_stats["proposals_per_draw"].mean()) >= 1.0


def test_budget_error_and_bad_input():
    envelope = GaussianEnvelope(jnp.zeros(1))
    with pm.Model():
        pm.Normal("theta", 200.0, 0.1)  # Z(θ) tiny: 50 data cannot be drawn from 100 proposals
        with pytest.raises(ph.RejectionBudgetError):
            php.sample_exchange(energy, envelope, np.full((50, 1), 0.01), draws=5, tune=0,
                                chains=1, max_proposals=100, progressbar=False)  # fmt: skip
    with pm.Model():
        pm.Normal("theta", 0.0, 1.0)
        with pytest.raises(ValueError, match="outside the envelope"):
            php.sample_exchange(energy, UniformEnvelope(jnp.zeros(1), jnp.ones(1)),
                                np.full((5, 1), 2.0), progressbar=False)  # fmt: skip
        with pytest.raises(ValueError, match="chains"):
            php.sample_exchange(energy, envelope, np.zeros((5, 1)), chains=0)
        with pytest.raises(TypeError, match="envelope"):
            php.sample_exchange(energy, object(), np.zeros((5, 1)))


def test_progressbar_shows_each_chain(capsys):
    """``progressbar=True`` (pm.sample's default) shows a bar per chain; False shows none."""
    envelope = GaussianEnvelope(jnp.zeros(1))
    data = np.random.default_rng(0).normal(size=(20, 1))
    for shown in (True, False):
        with pm.Model():
            pm.Normal("theta", 0.0, 1.0)
            php.sample_exchange(energy, envelope, data, draws=50, tune=20, chains=2,
                                random_seed=0, progressbar=shown)  # fmt: skip
        err = capsys.readouterr().err
        assert ("exchange, chain 2/2" in err) is shown, err[-300:]
