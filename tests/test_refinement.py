"""Adaptive importance refinement (ph.refine), the sigmoid belief network's AIS against exact
enumeration, and refined starts for generative_log_likelihood."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st

import ppl_hais as ph
from ppl_hais.research import sbn
from ppl_hais.research.refinement import Bernoulli, DiagonalNormal, RefinementError

SIGMA = 0.5  # x | z ~ N(z, σ²), z ~ N(0, 1): posterior N(x / (1 + σ²), σ² / (1 + σ²))


def _log_joint(z, x):
    return jnp.sum(
        jax.scipy.stats.norm.logpdf(z, 0.0, 1.0) + jax.scipy.stats.norm.logpdf(x, z, SIGMA)
    )


def _kl_to_posterior(q, data):
    """KL(q ‖ p(z | x)) summed over data and coordinates (diagonal Gaussians, closed form)."""
    var = SIGMA**2 / (1 + SIGMA**2)
    mean = np.asarray(data) / (1 + SIGMA**2)
    s2 = np.asarray(q.scale) ** 2
    d2 = (np.asarray(q.loc) - mean) ** 2
    return float(np.sum(0.5 * (s2 / var + d2 / var - 1 - np.log(s2 / var))))


def test_refinement_lowers_kl_and_raises_ess_monotonically():
    data = jnp.array([[2.0, -1.0, 0.5], [-3.0, 0.0, 1.5]])
    q = DiagonalNormal(jnp.full((2, 3), 4.0), jnp.full((2, 3), 3.0))  # far from both posteriors
    kls, ess = [_kl_to_posterior(q, data)], []
    for k in range(8):  # one step at a time, to see every intermediate q
        fit = ph.refine(jax.random.key(k), _log_joint, q, data, num_iterations=1,
                        num_samples=2000, damping=0.5)  # fmt: skip
        q = fit.q
        kls.append(_kl_to_posterior(q, data))
        ess.append(fit.ess[:, 0].mean())
    ess.append(fit.ess[:, 1].mean())
    assert np.all(np.diff(kls) < 0), kls
    assert np.all(np.diff(ess) > 0), ess
    assert kls[-1] < 0.02 * kls[0] and ess[-1] > 0.95
    # run on (damping ½ leaves 2⁻ᵏ of the start's variance): the exact posterior's moments, to
    # the Monte Carlo error of 2000 weighted draws
    q = ph.refine(jax.random.key(9), _log_joint, q, data, num_iterations=12, num_samples=2000,
                  damping=0.5).q  # fmt: skip
    np.testing.assert_allclose(q.loc, data / (1 + SIGMA**2), atol=0.03)
    np.testing.assert_allclose(q.scale, np.sqrt(SIGMA**2 / (1 + SIGMA**2)), rtol=0.05)


def test_bernoulli_refinement_matches_enumerated_posterior_marginals():
    rng = np.random.default_rng(1)
    net = sbn.SBN(2 * rng.normal(size=(8, 5)), rng.normal(size=8), rng.normal(size=5))
    x = np.asarray(net.sample(jax.random.key(0), 6))
    states = ((np.arange(32)[:, None] >> np.arange(5)) & 1).astype(float)
    log_post = np.stack([np.asarray(sbn.log_joint(net, states, xi)) for xi in x])
    marginals = np.exp(log_post - log_post.max(1, keepdims=True))
    marginals = (marginals / marginals.sum(1, keepdims=True)) @ states
    prior = Bernoulli(jnp.full((6, 5), 0.5))
    fit = ph.refine(jax.random.key(1), lambda h, x: sbn.log_joint(net, h, x), prior, x,
                    num_iterations=60, num_samples=400, damping=0.2)  # fmt: skip
    # the fixed point of moment matching is the posterior's marginals (within the draws' noise)
    np.testing.assert_allclose(fit.q.probs, np.clip(marginals, 1e-3, 1 - 1e-3), atol=0.06)
    assert fit.ess[:, -1].mean() > fit.ess[:, 0].mean()


def test_zero_effective_samples_is_an_error_naming_the_datum():
    def log_joint(z, x):  # no mass where q proposes: every weight is zero
        return jnp.where(jnp.all(z > 50.0), _log_joint(z, x), -jnp.inf)

    q = DiagonalNormal(jnp.zeros((2, 1)), jnp.ones((2, 1)))
    with pytest.raises(RefinementError, match="zero effective samples.*datum 0"):
        ph.refine(jax.random.key(0), log_joint, q, jnp.zeros((2, 1)), num_iterations=3)
    with pytest.raises(ValueError, match="one row per datum"):
        ph.refine(jax.random.key(0), _log_joint, q, jnp.zeros((3, 1)))
    with pytest.raises(ValueError, match="damping"):
        ph.refine(jax.random.key(0), _log_joint, q, jnp.zeros((2, 1)), damping=0.0)


def test_sbn_ais_matches_exact_enumeration():
    rng = np.random.default_rng(2)
    net = sbn.SBN(1.5 * rng.normal(size=(12, 10)), rng.normal(size=12), rng.normal(size=10))
    x = np.asarray(net.sample(jax.random.key(3), 8))
    exact = sbn.log_marginal_exact(net, x)
    est = sbn.log_likelihood(jax.random.key(4), net, x, num_particles=200, num_steps=300)
    z = (est.per_datum - exact) / est.per_datum_se
    assert np.all(np.abs(z) < 4), z
    assert abs(est.mean - exact.mean()) < 4 * est.se + 1e-3
    assert set(est.details) >= {"log_weights", "pareto_k", "ess", "checks"}


def test_sbn_refined_start_beats_the_prior_and_training_learns():
    rng = np.random.default_rng(5)  # data from a teacher network with strong weights
    teacher = sbn.SBN(3 * rng.normal(size=(20, 8)), rng.normal(size=20), rng.normal(size=8))
    x = np.asarray(teacher.sample(jax.random.key(6), 340))
    net, rec, history = sbn.fit(jax.random.key(0), x[:300], 8, num_epochs=40, batch_size=20,
                                   learning_rate=0.03)  # fmt: skip
    assert history[-1] > history[0] + 0.3  # the training bound rises
    means = np.clip(x[:300].mean(0), 1e-3, 1 - 1e-3)  # independent pixels: what training starts at
    independent = np.mean(x[300:] @ np.log(means) + (1 - x[300:]) @ np.log1p(-means))
    assert sbn.log_marginal_exact(net, x[300:]).mean() > independent + 0.15
    test = x[300:340]
    prior = Bernoulli(jnp.broadcast_to(jax.nn.sigmoid(net.hidden_bias), (40, 8)))
    fit = ph.refine(jax.random.key(1), lambda h, x: sbn.log_joint(net, h, x), prior, test,
                    num_iterations=20, num_samples=100, damping=0.3)  # fmt: skip
    with pytest.warns(ph.EvidenceWarning, match="data failed"):  # 10 draws: k̂ not estimable
        before = sbn.log_likelihood(jax.random.key(2), net, test, prior, num_particles=10,
                                       num_steps=0)  # fmt: skip
    with pytest.warns(ph.EvidenceWarning, match="data failed"):
        after = sbn.log_likelihood(jax.random.key(2), net, test, fit.q, num_particles=10,
                                      num_steps=0)  # fmt: skip
    exact = sbn.log_marginal_exact(net, test).mean()
    # importance-weighted bounds from 10 draws: the refined proposal's is tighter
    assert before.mean < after.mean <= exact + 0.05
    assert np.mean(after.details["ess"]) > np.mean(before.details["ess"])


def test_generative_log_likelihood_from_refined_starts():
    rng = np.random.default_rng(0)
    a_mat, sig = 3.0 * rng.normal(size=(3, 2)), 0.3
    cov = a_mat @ a_mat.T + sig**2 * np.eye(3)
    x = rng.multivariate_normal(np.zeros(3), cov, size=10)
    exact = st.multivariate_normal(np.zeros(3), cov).logpdf(x)

    def log_lik(a, x):
        return jnp.sum(jax.scipy.stats.norm.logpdf(x, a_mat @ a, sig))

    prior = ph.Gaussian(jnp.zeros(2))
    est = ph.generative_log_likelihood(jax.random.key(0), log_lik, prior, x, num_particles=100,
                                       num_steps=10, initial="refined")  # fmt: skip
    z = (est.per_datum - exact) / est.per_datum_se
    assert np.all(np.abs(z) < 4) and abs(est.mean - exact.mean()) < 4 * est.se + 1e-3
    assert est.details["refinement"].ess[:, -1].mean() > 0.5
    # the same 10 temperatures from the prior: far off, and warned
    with pytest.warns(ph.EvidenceWarning, match="log likelihood"):
        rough = ph.generative_log_likelihood(jax.random.key(0), log_lik, prior, x,
                                             num_particles=100, num_steps=10)  # fmt: skip
    assert np.max(np.abs(rough.per_datum - exact)) > 5 * np.max(np.abs(est.per_datum - exact))
    with pytest.raises(ValueError, match="one row per datum"):
        ph.generative_log_likelihood(jax.random.key(0), log_lik, prior, x, initial=DiagonalNormal(
            jnp.zeros((3, 2)), jnp.ones((3, 2))))  # fmt: skip
    with pytest.raises(ValueError, match="initial must be"):
        ph.generative_log_likelihood(jax.random.key(0), log_lik, prior, x, initial="laplace")
