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
from ppl_hais.exchange import GaussianEnvelope  # noqa: E402


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
