"""phn.refine_guide: an AutoNormal guide's local factors refined per datum."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import scipy.stats as st
from numpyro.infer.autoguide import AutoDiagonalNormal, AutoNormal

from ppl_hais.adapters import numpyro as phn


def hierarchical(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Normal(mu, 1.0))
        numpyro.sample("y", dist.Normal(z, 0.5), obs=y)


Y = jnp.array([1.2, -0.7, 2.5, 0.1])


def test_local_factors_move_to_the_conditional_posterior_and_anneal_exactly():
    guide = AutoNormal(hierarchical)
    params = {"mu_auto_loc": jnp.array(0.5), "mu_auto_scale": jnp.array(0.4),
              "z_auto_loc": jnp.zeros(4), "z_auto_scale": jnp.ones(4)}  # fmt: skip
    refined = phn.refine_guide(jax.random.key(0), guide, params, Y, num_iterations=40,
                               num_samples=400)  # fmt: skip
    # z_n | y_n, μ = 0.5: N((μ + 4 y_n) / 5, 1/5); the global factor is left as it was
    np.testing.assert_allclose(refined.params["z_auto_loc"], (0.5 + 4 * Y) / 5, atol=0.05)
    np.testing.assert_allclose(refined.params["z_auto_scale"], np.sqrt(0.2), rtol=0.1)
    assert refined.params["mu_auto_loc"] == params["mu_auto_loc"]
    assert refined.refinement.ess[:, -1].mean() > refined.refinement.ess[:, 0].mean() + 0.2
    # the refined guide as the annealer's start: log p(y) exactly (y ~ N(0, 11ᵀ + 1.25 I))
    hais = phn.HAIS(hierarchical, initial=(guide, refined.params), num_particles=256,
                    num_steps=300, progress_bar=False)  # fmt: skip
    hais.run(jax.random.key(1), Y)
    exact = st.multivariate_normal(np.zeros(4), np.ones((4, 4)) + 1.25 * np.eye(4)).logpdf(Y)
    assert abs(hais.log_evidence - exact) < 4 * hais.log_evidence_se + 0.01


def test_models_without_local_latents_are_refused_by_name():
    def global_only(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    guide = AutoNormal(global_only)
    params = {"mu_auto_loc": jnp.array(0.0), "mu_auto_scale": jnp.array(1.0)}
    with pytest.raises(ValueError, match=r"local latent.*has none: \['mu'\] are global"):
        phn.refine_guide(jax.random.key(0), guide, params, Y)
    with pytest.raises(TypeError, match="AutoNormal"):
        phn.refine_guide(jax.random.key(0), AutoDiagonalNormal(hierarchical), params, Y)
