"""Heavy-tailed starts (ppl_hais.model.tails): the distribution, the tail probe, and
``initial="auto"`` choosing them where a Gaussian start cannot reach the target's tails."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import ppl_hais as ph
from ppl_hais.model import tails
from ppl_hais.workflow.evidence import evidence

TOL = 4.0


def rotation(dim, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))
    return q


def test_independent_student_t_is_normalized_and_sampled_exactly():
    basis, df = rotation(4, 0), np.array([0.7, 1.0, 3.0, 30.0])
    mean, scale = np.array([1.0, -2.0, 0.5, 0.0]), np.array([0.5, 2.0, 1.0, 3.0])
    q = ph.IndependentStudentT(mean, scale, df, basis)
    x = np.random.default_rng(1).normal(size=(7, 4)) * 3.0
    w = (x - mean) @ basis / scale
    exact = np.sum(stats.t.logpdf(w, df) - np.log(scale), axis=-1)
    np.testing.assert_allclose(q.log_prob(jnp.asarray(x)), exact, rtol=1e-10)
    draws = np.asarray(q.sample(jax.random.key(3), (20_000,)))
    w = (draws - mean) @ basis / scale
    for i in range(4):  # each axis a Student-t with its own degrees of freedom
        assert stats.kstest(w[:, i], stats.t(df[i]).cdf).pvalue > 1e-3
    # the coordinate axes by default: NumPyro's StudentT(df, loc, scale).to_event(1)
    axes = ph.IndependentStudentT(np.zeros(2), [1.0, 2.0], df=3.0)
    z = jnp.array([0.3, -4.0])
    assert float(axes.log_prob(z)) == pytest.approx(
        float(np.sum(stats.t.logpdf(np.array([0.3, -2.0]), 3.0)) - math.log(2.0))
    )


@pytest.mark.parametrize(
    "kwargs", [dict(df=0.0), dict(scale=-1.0), dict(basis=np.ones((2, 2)))]
)
def test_a_bad_independent_student_t_is_refused(kwargs):
    with pytest.raises(ValueError):
        ph.IndependentStudentT(np.zeros(2), **kwargs)


def experts(lam, basis, widths):
    """Π_l (1 + u_l²)^−λ_l, u = diag(1/widths) basisᵀ z: independent Student-t tails with
    ν_l = 2λ_l − 1 along the basis's columns; (log density, its exact log normalizer, the
    Laplace Gaussian at its mode 0)."""
    lam, widths = np.asarray(lam, float), np.asarray(widths, float)

    def log_density(z):
        u = (z @ basis) / widths
        return -jnp.sum(lam * jnp.log1p(u * u))

    log_z = float(np.sum(0.5 * np.log(np.pi) + special.gammaln(lam - 0.5)
                         - special.gammaln(lam) + np.log(widths)))  # fmt: skip
    sd = widths / np.sqrt(2.0 * lam)  # the negative Hessian at 0 is 2λ/width² per axis
    cov = basis @ np.diag(sd**2) @ basis.T
    laplace = ph.Gaussian(np.zeros(len(lam)), scale_tril=np.linalg.cholesky(cov))
    return log_density, log_z, laplace


def test_the_probe_reads_each_axis_tail_index_and_ignores_tails_without_mass():
    lam = np.array([0.75, 1.0, 2.0, 4.5, 30.0])  # ν = 0.5, 1, 3, 8, 59
    basis = rotation(5, 2)
    log_density, _, laplace = experts(lam, basis, [1.0, 0.3, 2.0, 1.0, 0.5])
    reading = tails.read_tails(log_density, laplace, scale_inflation=1.0)
    df = np.empty(5)  # the reading's axes are the basis's columns, in eigh's order
    df[np.abs(basis.T @ reading.basis).argmax(axis=0)] = reading.df
    np.testing.assert_allclose(df[:4], 2 * lam[:4] - 1, rtol=0.1)
    assert df[4] > tails.HEAVY_BELOW and tails.has_heavy_tails(reading)
    # a Gaussian reads as light, and so does a Gaussian bulk whose far tail is exponential
    gauss = tails.read_tails(lambda z: -0.5 * jnp.sum(z * z), ph.Gaussian(np.zeros(2)), 1.0)
    assert np.all(gauss.df == tails.DF_CAP) and not tails.has_heavy_tails(gauss)

    def bulk(z):  # N(0, 0.1²) near 0, exp(−|z|) beyond 1: 50 nats down at 10 σ
        return jnp.sum(jnp.maximum(-0.5 * (z / 0.1) ** 2, -jnp.abs(z) - 49.0))

    reading = tails.read_tails(bulk, ph.Gaussian(np.zeros(2), 0.1), 1.0)
    assert not tails.has_heavy_tails(reading)


def test_a_start_lighter_than_half_the_targets_tail_index_is_too_light():
    log_density, _, laplace = experts([1.0, 1.0], np.eye(2), [1.0, 1.0])  # Cauchy axes
    cauchy = tails.read_tails(log_density, laplace, scale_inflation=1.0)
    assert tails.too_light(ph.Gaussian(np.zeros(2), 1.0).log_prob, cauchy)
    assert tails.too_light(ph.StudentT(np.zeros(2), 1.0, df=3.0).log_prob, cauchy)
    assert not tails.too_light(tails.tail_start(cauchy).log_prob, cauchy)
    log_density, _, laplace = experts([2.0, 2.0], np.eye(2), [1.0, 1.0])  # ν = 3
    t3 = tails.read_tails(log_density, laplace, scale_inflation=1.0)
    assert not tails.too_light(ph.StudentT(np.zeros(2), 1.0, df=3.0).log_prob, t3)


class Potential:
    """A N(0, I) prior times exp(potential − log prior): a ModelDensity whose evidence is the
    potential's normalizer (as benchmarks/trust_suite.py's potential cases)."""

    improper = ()

    def __init__(self, log_density, dim):
        self.dim, self.potential = dim, log_density

    def log_prob(self, z):
        return -0.5 * jnp.sum(z * z, axis=-1) - 0.5 * self.dim * math.log(2 * math.pi)

    def log_likelihood(self, z):
        return self.potential(z) - self.log_prob(z)

    def log_joint(self, z):
        return self.potential(z)

    def sample(self, rng_key, sample_shape=()):
        return jax.random.normal(rng_key, (*sample_shape, self.dim))

    @property
    def prior(self):
        return self


@pytest.mark.parametrize("seed", [0, 1])
def test_auto_anneals_independent_heavy_tails_from_the_tail_start(seed):
    """Rotated experts with ν from 0.5 to 5: from the Laplace Gaussian or the prior the
    estimate misses the tails (the 36-D suite model: 0.3 nat low at 16 M gradients); the
    tail start reaches them."""
    lam = np.linspace(0.75, 3.0, 8)
    log_density, log_z, _ = experts(lam, rotation(8, 3), np.exp(np.linspace(-0.5, 0.5, 8)))
    model = Potential(log_density, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ev = evidence(jax.random.key(seed), model, progress_bar=False)
    assert ev.initial == "laplace_t", ev.choice
    assert not [w for w in caught if issubclass(w.category, ph.EvidenceWarning)]
    assert abs(ev.log_z - log_z) < TOL * ev.log_z_se, (ev.log_z - log_z, ev.log_z_se)
    assert ev.gradients < 2e6
    # asked for by name, it is the start whatever its pilot
    named = evidence(jax.random.key(seed), model, initial="laplace_t", num_steps=250,
                     progress_bar=False, bias_check=False)  # fmt: skip
    assert named.initial == "laplace_t" and isinstance(named.target.initial,
                                                       ph.IndependentStudentT)  # fmt: skip


def test_a_light_tailed_model_pilots_no_tail_start():
    """The probe runs only where the Laplace pilot is short of near exact, and finds nothing
    on a Gaussian: no extra pilot, no change to the start."""
    model = Potential(lambda z: -0.5 * jnp.sum((z / 3.0) ** 2) - 4 * math.log(3 * math.sqrt(
        2 * math.pi)), 4)  # fmt: skip
    ev = evidence(jax.random.key(0), model, num_steps=250, progress_bar=False, bias_check=False)
    assert "laplace_t" not in ev.choice and ev.initial in ("prior", "laplace")
