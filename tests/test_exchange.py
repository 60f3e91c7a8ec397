"""Exchange sampling with bounded partition functions against independent references.

Z(θ) by Gauss–Hermite quadrature (continuous x) or by enumerating all 2¹⁶ states (4×4 Ising),
posteriors on θ-grids; a Geweke joint-distribution test; the budget errors. Tolerances: 5 MCSE.
"""

import itertools

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, log_expit

import ppl_hais as ph
from ppl_hais.research import exchange as ex

GH_X, GH_W = np.polynomial.hermite_e.hermegauss(120)  # ∫ f(x) N(x; 0, 1) dx = Σ w f / √(2π)
GH_W = GH_W / np.sqrt(2 * np.pi)


def quad_energy(x, th):  # E quadratic in x
    return th * jnp.sum(x**2) - 1.0


def _within(draws, mean, sd):
    draws = np.asarray(draws).reshape(1, -1)
    ess = float(az.ess(draws))
    assert ess > 200, ess
    assert abs(draws.mean() - mean) < 5 * sd / np.sqrt(ess), (draws.mean(), mean)
    ess2 = float(az.ess((draws - mean) ** 2))
    assert abs(np.mean((draws - mean) ** 2) - sd**2) < 5 * np.sqrt(2) * sd**2 / np.sqrt(ess2)


def _ks_against_grid(draws, grid, log_post):
    """KS test of MCMC draws, thinned to about one per effective sample, against a grid CDF."""
    draws = np.asarray(draws).reshape(-1)
    thin = max(1, int(np.ceil(draws.size / float(az.ess(draws[None])))))
    w = np.exp(log_post - log_post.max())
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (w[1:] + w[:-1]) * np.diff(grid))])
    cdf /= cdf[-1]
    p = stats.kstest(draws[::thin], lambda t: np.interp(t, grid, cdf)).pvalue
    assert p > 1e-3, (p, thin)


def _grid_moments(grid, log_post):
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    m = np.sum(w * grid)
    return m, np.sqrt(np.sum(w * (grid - m) ** 2))


def test_rejection_sampler_is_exact_and_counts_proposals():
    model = ph.BoundedEnergy(quad_energy, ex.GaussianEnvelope(jnp.zeros(1)))
    n = 40_000
    x, used = model.sample(jax.random.key(0), 0.7, n)
    f = expit(-(0.7 * GH_X**2 - 1.0))
    z = np.sum(GH_W * f)
    m2 = np.sum(GH_W * f * GH_X**2) / z
    m4 = np.sum(GH_W * f * GH_X**4) / z
    x = np.asarray(x)[:, 0]
    assert abs(x.mean()) < 5 * np.sqrt(m2 / n)
    assert abs(np.mean(x**2) - m2) < 5 * np.sqrt((m4 - m2**2) / n)
    # proposals per draw is geometric with mean 1/Z
    rate = n / int(used)
    assert abs(rate - z) < 5 * np.sqrt(z * (1 - z) / int(used))
    assert abs(float(model.partition_function(jax.random.key(1), 0.7)) - z) < 0.01


def test_budget_error_says_acceptance_rate():
    dim = 60  # Z(θ) ≈ σ-mass of a 60-D Gaussian inside a small ball: tiny
    model = ph.BoundedEnergy(
        lambda x, th: th * (jnp.sum(x**2) - 20.0), ex.GaussianEnvelope(jnp.zeros(dim))
    )
    with pytest.raises(ph.RejectionBudgetError, match="acceptance rate") as err:
        model.sample(jax.random.key(0), 5.0, 10, max_proposals=20_000)
    assert "exponentially" in str(err.value)
    data = jnp.zeros((5, dim))
    with pytest.raises(ph.RejectionBudgetError):
        ex.sample(jax.random.key(0), model, data, lambda t: -0.5 * t**2, 5.0,
                  num_warmup=5, num_samples=5, max_proposals=5_000)  # fmt: skip


def test_posterior_1d_against_quadrature_grid():
    model = ph.BoundedEnergy(quad_energy, ex.GaussianEnvelope(jnp.zeros(1)))
    data, _ = model.sample(jax.random.key(1), 1.0, 40)
    theta, stats = ex.sample(
        jax.random.key(2), model, data, lambda t: -0.5 * t**2 / 4.0, 0.0,
        num_warmup=500, num_samples=20_000,
    )  # fmt: skip
    d2 = np.asarray(data)[:, 0] ** 2
    grid = np.linspace(-3, 7, 2001)
    log_z = np.array([np.log(np.sum(GH_W * expit(-(t * GH_X**2 - 1)))) for t in grid])
    log_post = -(grid**2) / 8 + np.array([np.sum(log_expit(-(t * d2 - 1))) for t in grid])
    mean, sd = _grid_moments(grid, log_post - 40 * log_z)
    _within(theta[:, 0], mean, sd)
    _ks_against_grid(theta[:, 0], grid, log_post - 40 * log_z)
    assert 0.15 < stats["acceptance_rate"].mean() < 0.6
    assert stats["proposals_per_draw"].mean() >= 1.0 and stats["approximate"] is False
    # ignoring Z(θ) (the obvious wrong approach) gives a visibly different posterior
    wrong_mean, _ = _grid_moments(grid, log_post)
    assert abs(wrong_mean - mean) > 10 * sd / np.sqrt(float(az.ess(theta[None, :, 0])))
    # the approximate mode (HMC fantasies from the data) runs, is labelled, and lands near it
    approx, stats = ex.sample(
        jax.random.key(3), model, data, lambda t: -0.5 * t**2 / 4.0, 0.0,
        num_warmup=300, num_samples=3000, approximate_sweeps=5,
    )  # fmt: skip
    assert stats["approximate"] is True
    assert abs(approx.mean() - mean) < 0.5 * sd
    assert abs(approx.std() - sd) < 0.3 * sd


def _ising_bonds(side=4):
    bonds = []
    for r, c in itertools.product(range(side), range(side)):
        i = r * side + c
        if c + 1 < side:
            bonds.append((i, i + 1))
        if r + 1 < side:
            bonds.append((i, i + side))
    return np.array(bonds)


BONDS = _ising_bonds()


OFFSET = 4.0  # without it E is odd under a sublattice spin flip and Z(J) ≡ ½ (no test of Z)


def ising_energy(x, coupling):
    s = 2.0 * x - 1.0
    return -coupling * (jnp.sum(s[BONDS[:, 0]] * s[BONDS[:, 1]]) - OFFSET)


def test_ising_4x4_against_enumeration():
    model = ph.BoundedEnergy(ising_energy, ex.BernoulliEnvelope(jnp.full(16, 0.5)))
    data, _ = model.sample(jax.random.key(3), 0.4, 30)
    states = np.array(list(itertools.product([0.0, 1.0], repeat=16)))
    spins = 2 * states - 1
    bond_sum = np.sum(spins[:, BONDS[:, 0]] * spins[:, BONDS[:, 1]], axis=1)  # (65536,)
    d = 2 * np.asarray(data) - 1
    data_bonds = np.sum(d[:, BONDS[:, 0]] * d[:, BONDS[:, 1]], axis=1)
    grid = np.linspace(-1.0, 2.0, 601)
    log_z = np.array([np.log(np.mean(expit(g * (bond_sum - OFFSET)))) for g in grid])
    log_post = -0.5 * grid**2 + np.array(
        [np.sum(log_expit(g * (data_bonds - OFFSET))) for g in grid]
    )
    mean, sd = _grid_moments(grid, log_post - 30 * log_z)
    wrong_mean, _ = _grid_moments(grid, log_post)  # Z(J) matters here: ignoring it is far off
    assert abs(wrong_mean - mean) > 2 * sd
    theta, _ = ex.sample(
        jax.random.key(4), model, data, lambda t: -0.5 * t**2, 0.0,
        num_warmup=500, num_samples=10_000,
    )  # fmt: skip
    _within(theta[:, 0], mean, sd)
    _ks_against_grid(theta[:, 0], grid, log_post - 30 * log_z)
    # the approximate (Gibbs fantasy) mode runs, is labelled, and lands near the answer
    approx, stats = ex.sample(
        jax.random.key(5), model, data, lambda t: -0.5 * t**2, 0.0,
        num_warmup=300, num_samples=3000, approximate_sweeps=5,
    )  # fmt: skip
    assert stats["approximate"] is True
    assert abs(approx.mean() - mean) < 1.0 * sd


def test_geweke_joint_distribution():
    """Alternate y ~ p(y | θ) exactly and an exchange update of θ: θ must stay at its prior."""
    model = ph.BoundedEnergy(quad_energy, ex.GaussianEnvelope(jnp.zeros(1)))
    P, T, N = 3000, 25, 5

    def one_chain(key, theta0):
        def step(theta, i):
            k_y, k_t = jax.random.split(jax.random.fold_in(key, i))
            y, _, _ = model.sample_with_status(k_y, theta[0], N)
            theta, _ = ex.exchange_step(
                k_t, theta, lambda t: -0.5 * jnp.sum(t**2), y, lambda t: (model, t[0]), 1.0
            )
            return theta, None

        return jax.lax.scan(step, theta0, jnp.arange(T))[0]

    theta0 = jax.random.normal(jax.random.key(7), (P, 1))
    theta = jax.jit(jax.vmap(one_chain))(jax.random.split(jax.random.key(8), P), theta0)
    th = np.asarray(theta)[:, 0]
    assert abs(th.mean()) < 5 / np.sqrt(P)
    assert abs(np.mean(th**2) - 1) < 5 * np.sqrt(2 / P)
