"""phn.Exchange and phn.BoundedEnergyDist in numpyro.infer.MCMC: a 2-D x, θ 2-D, vs a grid."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

numpyro = pytest.importorskip("numpyro")
import arviz as az  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.infer import MCMC  # noqa: E402
from scipy.special import expit, log_expit  # noqa: E402

import ppl_hais as ph  # noqa: E402
from ppl_hais.adapters import numpyro as phn  # noqa: E402
from ppl_hais.research.exchange import GaussianEnvelope  # noqa: E402


def energy(x, th):  # linear and quadratic in x: E = a·x₁ + b·|x|² − 1
    return th[0] * x[0] + th[1] * jnp.sum(x**2) - 1.0


def model(x):
    th = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    numpyro.sample("x", phn.BoundedEnergyDist(energy, GaussianEnvelope(jnp.zeros(2)), th), obs=x)


def test_two_dimensional_posterior_against_grid():
    truth = jnp.array([1.0, 0.5])
    data, _ = ph.BoundedEnergy(energy, GaussianEnvelope(jnp.zeros(2))).sample(
        jax.random.key(0), truth, 50
    )
    mcmc = MCMC(phn.Exchange(model), num_warmup=500, num_samples=10_000, progress_bar=False)
    mcmc.run(jax.random.key(1), data, extra_fields=("accept_prob", "proposals_per_draw"))
    draws = np.asarray(mcmc.get_samples()["theta"])
    # reference: Z(θ) by a 2-D Gauss–Hermite rule, posterior on a θ grid
    gx, gw = np.polynomial.hermite_e.hermegauss(60)
    gw = gw / np.sqrt(2 * np.pi)
    X1, X2 = np.meshgrid(gx, gx, indexing="ij")
    W = np.outer(gw, gw)
    a, b = np.meshgrid(np.linspace(-2.5, 4, 261), np.linspace(-1.5, 3, 181), indexing="ij")
    E_nodes = a[..., None, None] * X1 + b[..., None, None] * (X1**2 + X2**2) - 1.0
    log_z = np.log(np.sum(W * expit(-E_nodes), axis=(-2, -1)))
    d = np.asarray(data)
    s1, s2 = d[:, 0], np.sum(d**2, 1)
    loglik = np.sum(log_expit(-(a[..., None] * s1 + b[..., None] * s2 - 1.0)), -1)
    log_post = -0.5 * (a**2 + b**2) + loglik - 50 * log_z
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    for coord, g in ((0, a), (1, b)):
        mean = np.sum(w * g)
        sd = np.sqrt(np.sum(w * (g - mean) ** 2))
        ess = float(az.ess(draws[None, :, coord]))
        assert ess > 200
        assert abs(draws[:, coord].mean() - mean) < 5 * sd / np.sqrt(ess)
    extra = mcmc.get_extra_fields()
    assert 0.1 < float(np.mean(extra["accept_prob"])) < 0.7
    assert float(np.mean(extra["proposals_per_draw"])) >= 1.0
    idata = az.from_numpyro(mcmc, log_likelihood=False)
    assert "proposals_per_draw" in idata.sample_stats


def test_log_prob_refuses_and_model_checked():
    d = phn.BoundedEnergyDist(energy, GaussianEnvelope(jnp.zeros(2)), jnp.zeros(2))
    with pytest.raises(NotImplementedError, match="Exchange"):
        d.log_prob(jnp.zeros(2))
    assert d.sample(jax.random.key(0), (3,)).shape == (3, 2)

    def plain(y):
        mu = numpyro.sample("mu", dist.Normal())
        numpyro.sample("y", dist.Normal(mu), obs=y)

    with pytest.raises(ValueError, match="BoundedEnergyDist"):
        MCMC(phn.Exchange(plain), num_warmup=1, num_samples=1, progress_bar=False).run(
            jax.random.key(0), jnp.zeros(3)
        )


def energy_1d(x, th):  # one scalar datum: E = θ·x² − 1
    return th * x**2 - 1.0


def plate_model(x=None, n=50, mask=True):
    """The NumPyro idiom: iid data under a plate, a NumPyro distribution as the envelope."""
    th = numpyro.sample("theta", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", n), numpyro.handlers.mask(mask=mask):
        numpyro.sample("x", phn.BoundedEnergyDist(energy_1d, dist.Normal(0.0, 1.0), th), obs=x)


def _grid_posterior(data):
    gx, gw = np.polynomial.hermite_e.hermegauss(80)
    gw = gw / np.sqrt(2 * np.pi)
    th = np.linspace(-1.5, 5.0, 1301)
    log_z = np.log(np.sum(gw * expit(-(th[:, None] * gx**2 - 1.0)), axis=1))
    loglik = np.sum(log_expit(-(th[:, None] * np.asarray(data) ** 2 - 1.0)), axis=1)
    log_post = -0.5 * th**2 + loglik - len(data) * log_z
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    mean = np.sum(w * th)
    return mean, np.sqrt(np.sum(w * (th - mean) ** 2))


def _check_against_grid(draws, data):
    mean, sd = _grid_posterior(data)
    ess = float(az.ess(draws[None, :]))
    assert ess > 200
    assert abs(draws.mean() - mean) < 5 * sd / np.sqrt(ess), (draws.mean(), mean, sd, ess)
    assert abs(draws.std() - sd) < 0.25 * sd


def test_plate_idiom_with_numpyro_envelope_against_grid():
    data, _ = ph.BoundedEnergy(energy_1d, dist.Normal(0.0, 1.0)).sample(
        jax.random.key(2), 1.0, 50
    )
    mcmc = MCMC(phn.Exchange(plate_model), num_warmup=500, num_samples=4000, progress_bar=False)
    mcmc.run(jax.random.key(3), data)
    _check_against_grid(np.asarray(mcmc.get_samples()["theta"]), data)
    # masked-out entries are not data: ten wild values behind a mask change nothing
    padded = jnp.concatenate([data, jnp.full(10, 9.0)])
    mask = jnp.arange(60) < 50
    mcmc = MCMC(phn.Exchange(plate_model), num_warmup=500, num_samples=4000, progress_bar=False)
    mcmc.run(jax.random.key(3), padded, n=60, mask=mask)
    _check_against_grid(np.asarray(mcmc.get_samples()["theta"]), data)


def test_predictive_draws_exact_fantasies():
    """Predictive (vmapped, jitted) draws from p(x | θ) by exact rejection: against the
    envelope-and-reject reference by a two-sample KS test."""
    from numpyro.infer import Predictive
    from scipy import stats

    predictive = Predictive(plate_model, posterior_samples={"theta": jnp.full(100, 1.5)})
    draws = np.asarray(predictive(jax.random.key(4), n=50)["x"])
    assert draws.shape == (100, 50)
    reference, _ = ph.BoundedEnergy(energy_1d, dist.Normal(0.0, 1.0)).sample(
        jax.random.key(5), 1.5, 5000
    )
    assert stats.ks_2samp(draws.ravel(), np.asarray(reference)).pvalue > 1e-3
    # and not the envelope itself: θ = 1.5 narrows it
    assert stats.ks_2samp(draws.ravel(), np.random.default_rng(0).normal(size=5000)).pvalue < 1e-6


def test_budget_errors_name_rejection_budget():
    d = phn.BoundedEnergyDist(energy_1d, dist.Normal(0.0, 1.0), 200.0, max_proposals=50)
    with pytest.raises(ph.RejectionBudgetError, match="budget"):
        d.sample(jax.random.key(0), (200,))
    with pytest.raises(Exception, match="RejectionBudgetError"):  # through the host callback
        jax.jit(lambda k: d.sample(k, (200,)))(jax.random.key(0)).block_until_ready()
    # phn.budget_errors() gives it back its own type, from compiled code too
    with pytest.raises(ph.RejectionBudgetError, match="spent its budget"):
        with phn.budget_errors():
            jax.jit(lambda k: d.sample(k, (200,)))(jax.random.key(0)).block_until_ready()
    with pytest.raises(KeyError), phn.budget_errors():  # others pass unchanged
        raise KeyError("not ours")


def test_spent_budget_inside_numpyro_mcmc_is_a_rejection_budget_error():
    """The issue's plate model with a θ whose fantasies need far more proposals than the
    budget: inside NumPyro's MCMC the error surfaces as RejectionBudgetError within
    phn.budget_errors()."""
    data = jnp.zeros(50)

    def model(x):
        theta = numpyro.sample("theta", dist.Normal(60.0, 1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("x", phn.BoundedEnergyDist(energy_1d, dist.Normal(0.0, 1.0), theta),
                           obs=x)  # fmt: skip

    mcmc = MCMC(phn.Exchange(model, max_proposals=200), num_warmup=5, num_samples=5,
                progress_bar=False)  # fmt: skip
    with pytest.raises(ph.RejectionBudgetError, match="max_proposals=200"):
        with phn.budget_errors():
            mcmc.run(jax.random.key(1), data)


def test_data_outside_the_envelope_support_are_refused():
    def model(x):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("x", phn.BoundedEnergyDist(energy_1d, dist.HalfNormal(1.0), theta),
                           obs=x)  # fmt: skip

    mcmc = MCMC(phn.Exchange(model), num_warmup=1, num_samples=1, progress_bar=False)
    with pytest.raises(ValueError, match="2 of 5 observed data lie outside the envelope"):
        mcmc.run(jax.random.key(0), jnp.array([0.5, -1.0, 2.0, -0.1, 1.0]))


def test_envelope_must_be_a_distribution():
    with pytest.raises(TypeError, match="envelope"):
        phn.BoundedEnergyDist(energy_1d, object(), 1.0)
