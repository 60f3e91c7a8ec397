"""Natural-gradient variational fits (Gaussian full-rank and diagonal,
Student-t) as annealing starts: exact on conjugate Gaussian posteriors, fewer gradients than
plain (Adam) gradients, `initial="vi"`/`"student_t"` through the evidence workflow and both
adapters, the fit's failure a clear message with a fallback."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_bias import _TargetModel

import ppl_hais as ph
from ppl_hais.starts import choose as starts
from ppl_hais.starts.vi import VIError, fit_vi
from ppl_hais.workflow.evidence import evidence


def _regression(n=40, dim=4, seed=0, noise=0.5, prior_sd=2.0):
    """Bayesian linear regression y ~ N(Xw, noise²), w ~ N(0, prior_sd² I): the posterior
    N(m, A⁻¹) and the evidence are exact."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    x[:, 1] += 0.8 * x[:, 0]  # correlated posterior coordinates
    y = x @ rng.normal(size=dim) + noise * rng.normal(size=n)
    a = x.T @ x / noise**2 + np.eye(dim) / prior_sd**2
    m = np.linalg.solve(a, x.T @ y / noise**2)
    cov_y = noise**2 * np.eye(n) + prior_sd**2 * x @ x.T
    _, logdet = np.linalg.slogdet(2 * np.pi * cov_y)
    log_z = -0.5 * logdet - 0.5 * y @ np.linalg.solve(cov_y, y)

    def log_joint(z):
        r = y - x @ z
        return (
            -0.5 * jnp.sum(r * r) / noise**2 - n * math.log(noise * math.sqrt(2 * math.pi))
            - 0.5 * jnp.sum(z * z) / prior_sd**2
            - dim * math.log(prior_sd * math.sqrt(2 * math.pi))
        )  # fmt: skip

    return log_joint, m, a, log_z


def _cov(dist):
    if dist.scale_tril is not None:
        return dist.scale_tril @ dist.scale_tril.T
    return np.diag(dist.scale**2)


def test_the_natural_gradient_fit_is_the_exact_posterior_of_a_conjugate_model():
    """A Gaussian posterior N(m, A⁻¹): the full-rank fit is it (mean and covariance to 1e-6),
    in a handful of steps; the diagonal fit is the mean-field optimum (mean m, variances
    1/A_ii); the Student-t fit is centred at m with Σ·E[s²] = A⁻¹ (its covariance matches)."""
    log_joint, m, a, _ = _regression()
    fit = fit_vi(jax.random.key(0), log_joint, np.zeros(4), tol=1e-10)
    assert fit.converged and fit.iterations <= 20 and fit.method == "natural"
    np.testing.assert_allclose(fit.distribution.mean, m, atol=1e-6)
    np.testing.assert_allclose(_cov(fit.distribution), np.linalg.inv(a), rtol=1e-6, atol=1e-9)
    assert fit.gradients == fit.iterations * 64 and np.all(np.diff(fit.elbo_trace) >= -1e-9)

    diag = fit_vi(jax.random.key(0), log_joint, np.zeros(4), family="diagonal", tol=1e-12,
                  max_iter=500)  # fmt: skip
    np.testing.assert_allclose(diag.distribution.mean, m, atol=1e-5)
    np.testing.assert_allclose(diag.distribution.scale**2, 1 / np.diag(a), rtol=1e-6)

    t = fit_vi(jax.random.key(0), log_joint, np.zeros(4), family="student_t", df=30.0,
               tol=1e-10)  # fmt: skip
    assert isinstance(t.distribution, ph.StudentT) and t.distribution.df == 30.0
    np.testing.assert_allclose(t.distribution.mean, m, atol=1e-6)
    cov_t = _cov(t.distribution) * 30.0 / 28.0  # a t's covariance: ν/(ν−2) Σ
    np.testing.assert_allclose(cov_t, np.linalg.inv(a), rtol=0.25)
    # the ELBO at the exact posterior is log Z: the fit's is within the SAA's noise of it
    _, _, _, log_z = _regression()
    assert abs(fit.elbo - log_z) < 1e-6


def test_the_natural_gradient_takes_fewer_gradients_than_adam_to_a_fit_as_good():
    """Same objective, same draws: Adam needs an order of magnitude more gradients, and its
    fit is no better on fresh draws."""
    log_joint, m, a, log_z = _regression(dim=6, seed=1)
    natural = fit_vi(jax.random.key(0), log_joint, np.zeros(6))
    adam = fit_vi(jax.random.key(0), log_joint, np.zeros(6), method="adam")
    assert natural.converged and adam.method == "adam"
    assert 10 * natural.gradients < adam.gradients

    def fresh_elbo(dist):
        z = dist.sample(jax.random.key(7), 4000)
        return float(jnp.mean(jax.vmap(log_joint)(z) - jax.vmap(dist.log_prob)(z)))

    assert fresh_elbo(natural.distribution) > fresh_elbo(adam.distribution) - 0.01
    assert abs(fresh_elbo(natural.distribution) - log_z) < 0.01  # KL(q‖p) ≈ 0


def test_a_fit_that_cannot_start_says_so_and_the_evidence_falls_back():
    def nan_at_zero(z):
        return jnp.where(jnp.abs(z[0]) < 10.0, jnp.nan, -0.5 * jnp.sum(z * z))

    with pytest.raises(VIError, match="ELBO is not finite"):
        fit_vi(jax.random.key(0), nan_at_zero, np.zeros(2))
    with pytest.raises(ValueError, match="unknown family"):
        fit_vi(jax.random.key(0), nan_at_zero, np.zeros(2), family="mixture")
    with pytest.raises(ValueError, match="unknown initial 'vl'"):
        evidence(jax.random.key(0), _TargetModel(nan_at_zero, 2), initial="vl")

    # the evidence workflow: initial="vi" falls back to "auto" with the reason
    model = _TargetModel(lambda z: jnp.where(jnp.abs(z[0]) < 0.5, jnp.nan, 0.0)
                         - 0.5 * jnp.sum(z * z), 2)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ev = evidence(jax.random.key(0), model, initial="vi", num_particles=64, num_steps=50,
                      progress_bar=False)  # fmt: skip
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert any("variational fit for initial='vi' failed" in m for m in messages)
    assert ev.initial in ("prior", "laplace")


def test_initial_vi_and_student_t_estimate_the_evidence_and_count_the_fit():
    log_joint, m, a, log_z = _regression()
    for name, cls in (("vi", ph.Gaussian), ("student_t", ph.StudentT)):
        model = _TargetModel(log_joint, 4, scale=2.0)
        ev = evidence(jax.random.key(1), model, initial=name, num_particles=256,
                      num_steps=200, progress_bar=False)  # fmt: skip
        assert ev.initial == name and type(ev.target.initial) is cls
        assert abs(ev.log_z - log_z) < 4 * ev.log_z_se + 0.01, (name, ev.log_z, log_z)
        fits = sum(v for k, v in model._ppl_hais_targets.items() if k.endswith("_gradients"))
        pilot = 64 * (200 + 100)
        assert ev.gradients >= 256 * 200 + pilot + fits and fits > 0
        assert list(ev.choice) == [name]


def test_auto_adds_the_fitted_starts_only_on_a_hard_path(monkeypatch):
    """An easy model keeps auto's two pilots (no fit, no extra gradients); where neither
    reaches the ESS bar, the VI starts are piloted beside them and counted."""
    log_joint, *_ = _regression()
    easy = evidence(jax.random.key(0), _TargetModel(log_joint, 4, scale=2.0), num_steps=200,
                    num_particles=128, progress_bar=False)  # fmt: skip
    assert set(easy.choice) == {"prior", "laplace"}
    monkeypatch.setattr(starts, "VI_BELOW", 1.01)  # every path counts as hard
    model = _TargetModel(log_joint, 4, scale=2.0)
    hard = evidence(jax.random.key(0), model, num_steps=200, num_particles=128,
                    progress_bar=False)  # fmt: skip
    assert set(hard.choice) == {"prior", "laplace", "vi", "student_t"}
    extra = 2 * 64 * (200 + 100) + model._ppl_hais_targets["vi_gradients"]
    assert hard.gradients - easy.gradients >= extra


def test_a_multimodal_laplace_fit_gets_no_one_mode_vi_start(monkeypatch):
    """When the Laplace search finds two modes (a mixture start), a one-mode VI fit would
    anneal within one of them: auto does not pilot it."""

    def two_modes(z):
        return jnp.logaddexp(-0.5 * jnp.sum((z - 3.0) ** 2), -0.5 * jnp.sum((z + 3.0) ** 2))

    monkeypatch.setattr(starts, "VI_BELOW", 1.01)
    ev = evidence(jax.random.key(0), _TargetModel(two_modes, 2, scale=3.0), num_steps=200,
                  num_particles=128, progress_bar=False)  # fmt: skip
    assert isinstance(ev.target.initial, ph.GaussianMixture) or ev.initial == "prior"
    assert "vi" not in ev.choice and "student_t" not in ev.choice
    assert abs(ev.log_z - (math.log(2) + math.log(2 * math.pi))) < 4 * ev.log_z_se + 0.02


def test_both_adapters_take_initial_vi():
    numpyro = pytest.importorskip("numpyro")
    dist = numpyro.distributions
    from ppl_hais.adapters import numpyro as phn

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y)

    y = jnp.array([0.3, 1.1, 0.7, 1.9, 0.2, 1.4])
    hais = phn.HAIS(model, num_particles=128, num_steps=200, initial="vi", progress_bar=False)
    hais.run(jax.random.key(0), y)
    assert hais.evidence.initial == "vi"
    ref = phn.HAIS(model, num_particles=128, num_steps=200, initial="prior",
                   progress_bar=False)  # fmt: skip
    ref.run(jax.random.key(1), y)
    gap = abs(hais.log_evidence - ref.log_evidence)
    assert gap < 4 * math.hypot(hais.log_evidence_se, ref.log_evidence_se) + 0.02

    pm = pytest.importorskip("pymc")
    from ppl_hais.adapters import pymc as php

    with pm.Model():
        mu = pm.Normal("mu", 0.0, 2.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", mu, sigma, observed=np.asarray(y))
        idata = php.sample_hais(draws=64, num_steps=200, initial="student_t", random_seed=0,
                                progressbar=False)  # fmt: skip
    log_z, se = ph.workflow.compare.evidence_of(idata)
    assert idata.sample_stats.attrs.get("initial", "student_t") == "student_t"
    assert abs(log_z - ref.log_evidence) < 4 * math.hypot(se, ref.log_evidence_se) + 0.02
