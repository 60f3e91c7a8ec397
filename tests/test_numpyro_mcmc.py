"""phn.ReducedFlipHMC inside numpyro.infer.MCMC: closed-form posteriors, chain methods, ArviZ.

Tolerance: 5 Monte Carlo standard errors, the MCSE from NumPyro's own ESS estimate.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

numpyro = pytest.importorskip("numpyro")
import arviz as az  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.diagnostics import effective_sample_size  # noqa: E402
from numpyro.infer import MCMC  # noqa: E402

from ppl_hais.adapters import numpyro as phn  # noqa: E402

# Normal–Normal regression with known noise: posterior N(m, S) in closed form
RNG = np.random.default_rng(4)
X = RNG.normal(size=(40, 3))
BETA = np.array([0.5, -1.0, 2.0])
Y = X @ BETA + RNG.normal(size=40)
PRIOR_SD, NOISE = 2.0, 1.0
S = np.linalg.inv(X.T @ X / NOISE**2 + np.eye(3) / PRIOR_SD**2)
M = S @ X.T @ Y / NOISE**2


def regression(x, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, PRIOR_SD).expand([3]).to_event(1))
    numpyro.sample("y", dist.Normal(x @ beta, NOISE), obs=y)


def _check_moments(draws, mean, sd):
    """draws: (chains, samples, D); 5 MCSE on the mean and on the second moment."""
    ess = np.asarray(effective_sample_size(draws))
    centred = draws - mean
    z_mean = (draws.mean((0, 1)) - mean) / (sd / np.sqrt(ess))
    ess2 = np.asarray(effective_sample_size(centred**2))
    z_var = (np.mean(centred**2, (0, 1)) - sd**2) / (np.sqrt(2) * sd**2 / np.sqrt(ess2))
    assert np.all(np.abs(z_mean) < 5), z_mean
    assert np.all(np.abs(z_var) < 5), z_var
    assert np.all(ess > 100), ess


@pytest.mark.parametrize(
    "chain_method,lookahead,flips",
    [("vectorized", 1, "reduced"), ("sequential", 2, "reduced"), ("vectorized", 1, "standard")],
)
def test_regression_posterior_matches_closed_form(chain_method, lookahead, flips):
    kernel = phn.ReducedFlipHMC(regression, lookahead=lookahead, flips=flips)
    mcmc = MCMC(
        kernel,
        num_warmup=500,
        num_samples=2000,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(
        jax.random.key(1),
        jnp.asarray(X),
        y=jnp.asarray(Y),
        extra_fields=("is_flipped", "accept_prob", "lookahead_depth", "num_steps"),
    )
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])
    _check_moments(draws, M, np.sqrt(np.diag(S)))
    extra = mcmc.get_extra_fields()
    flipped, accepted = np.asarray(extra["is_flipped"]), np.asarray(extra["lookahead_depth"]) > 0
    assert not np.any(flipped & accepted)
    if flips == "standard" and lookahead == 1:
        np.testing.assert_array_equal(flipped, ~accepted)  # every rejection flips
    assert np.all(np.asarray(extra["num_steps"]) >= 1)


def test_auto_refresh_from_vectorized_chains():
    """refresh='auto': MEADS's damping from the spread of 4 vectorized chains, adapted in
    warmup and then fixed; the posterior still matches the closed form. Chains run one at a
    time have no population, so they keep ½."""
    mcmc = MCMC(phn.ReducedFlipHMC(regression), num_warmup=500, num_samples=2000,
                num_chains=4, chain_method="vectorized", progress_bar=False)  # fmt: skip
    mcmc.run(jax.random.key(5), jnp.asarray(X), y=jnp.asarray(Y), extra_fields=("refresh",))
    _check_moments(np.asarray(mcmc.get_samples(group_by_chain=True)["beta"]), M,
                   np.sqrt(np.diag(S)))  # fmt: skip
    refresh = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["refresh"])
    assert np.all(refresh == refresh[0, 0]) and 0.0 < refresh[0, 0] < 1.0
    assert refresh[0, 0] != 0.5
    alone = MCMC(phn.ReducedFlipHMC(regression), num_warmup=50, num_samples=10, num_chains=2,
                 chain_method="sequential", progress_bar=False)  # fmt: skip
    alone.run(jax.random.key(5), jnp.asarray(X), y=jnp.asarray(Y), extra_fields=("refresh",))
    np.testing.assert_array_equal(alone.get_extra_fields()["refresh"], 0.5)


def test_constrained_model_and_arviz():
    """Gamma–Poisson: rate > 0 through NumPyro's transform; posterior Gamma(a + Σy, b + n)."""
    y = jnp.array([3, 1, 4, 1, 5, 9, 2, 6])
    a, b = 2.0, 0.5

    def model(y):
        rate = numpyro.sample("rate", dist.Gamma(a, b))
        numpyro.sample("y", dist.Poisson(rate), obs=y)

    mcmc = MCMC(
        phn.ReducedFlipHMC(model), num_warmup=500, num_samples=2000, num_chains=2,
        progress_bar=False,
    )  # fmt: skip
    mcmc.run(jax.random.key(2), y, extra_fields=("is_flipped",))
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["rate"])[..., None]
    shape, rate = a + float(y.sum()), b + y.size
    _check_moments(draws, np.array([shape / rate]), np.array([np.sqrt(shape) / rate]))
    idata = az.from_numpyro(mcmc)
    assert "diverging" in idata.sample_stats and "is_flipped" in idata.sample_stats
    assert idata.posterior["rate"].shape == (2, 2000)


def test_potential_fn_mode():
    potential = lambda z: 0.5 * jnp.sum((z["x"] - 1.0) ** 2 / 0.25)  # noqa: E731
    mcmc = MCMC(
        phn.ReducedFlipHMC(potential_fn=potential), num_warmup=300, num_samples=2000,
        progress_bar=False,
    )  # fmt: skip
    mcmc.run(jax.random.key(3), init_params={"x": jnp.zeros(2)})
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["x"])
    _check_moments(draws, np.ones(2), np.full(2, 0.5))


def test_refusals():
    def discrete():
        numpyro.sample("k", dist.Poisson(3.0))
        numpyro.sample("y", dist.Normal(0.0, 1.0), obs=1.0)

    with pytest.raises(ValueError, match="discrete"):
        MCMC(phn.ReducedFlipHMC(discrete), num_warmup=1, num_samples=1, progress_bar=False).run(
            jax.random.key(0)
        )
    with pytest.raises(ValueError, match="exactly one"):
        phn.ReducedFlipHMC()
    with pytest.raises(ValueError, match="init_params"):
        MCMC(
            phn.ReducedFlipHMC(potential_fn=lambda z: z), num_warmup=1, num_samples=1,
            progress_bar=False,
        ).run(jax.random.key(0))  # fmt: skip
