"""Kernel properties: leapfrog reversibility and volume, reflection, invariance of π_β."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppl_hais as ph
from ppl_hais.annealing.kernels import hais_kernel, random_walk_kernel
from ppl_hais.mcmc import fast_random
from ppl_hais.mcmc.integrators import leapfrog, reflect


def _gauss_target(dim=3, scale=(0.5, 1.0, 2.0)):
    scale = np.asarray(scale, float)
    return ph.AnnealingTarget(
        log_density=lambda z: -0.5 * jnp.sum((z / scale) ** 2) + jnp.sum(0.3 * z),
        initial=ph.Gaussian(np.zeros(dim)),
    )


def test_leapfrog_reversible_and_volume_preserving():
    t = _gauss_target()
    beta = 0.7
    z0, v0 = jnp.array([0.3, -1.2, 2.0]), jnp.array([1.0, 0.5, -0.7])

    def flow(zv):
        z, v = zv[:3], zv[3:]
        z1, v1, _ = leapfrog(t.potential_and_grad, z, v, t.potential_and_grad(z), beta, 0.3, 3)
        return jnp.concatenate([z1, v1])

    zv1 = flow(jnp.concatenate([z0, v0]))
    back = flow(jnp.concatenate([zv1[:3], -zv1[3:]]))
    np.testing.assert_allclose(back[:3], z0, atol=1e-12)
    np.testing.assert_allclose(-back[3:], v0, atol=1e-12)
    jac = jax.jacfwd(flow)(jnp.concatenate([z0, v0]))
    assert abs(np.linalg.det(np.asarray(jac)) - 1) < 1e-10


def test_leapfrog_energy_error_is_second_order():
    t = _gauss_target()
    z0, v0 = jnp.array([0.3, -1.2, 2.0]), jnp.array([1.0, 0.5, -0.7])

    def energy_error(eps):
        n = int(round(1.0 / eps))
        p0 = t.potential_and_grad(z0)
        z1, v1, p1 = leapfrog(t.potential_and_grad, z0, v0, p0, 1.0, eps, n)
        h = lambda p, v: -p.log_density(1.0) + 0.5 * jnp.sum(v**2)  # noqa: E731
        return abs(float(h(p1, v1) - h(p0, v0)))

    e1, e2 = energy_error(0.1), energy_error(0.05)
    assert 3.0 < e1 / e2 < 5.0  # O(ε²): halving ε quarters the error


@pytest.mark.parametrize("box", [(0.0, np.inf), (-np.inf, 1.0), (-1.0, 2.0)])
def test_reflection_is_an_involution_and_stays_inside(box):
    rng = np.random.default_rng(0)
    lo, hi = box
    start = rng.uniform(max(lo, -3), min(hi, 3), size=200)
    vel = rng.normal(scale=4.0, size=200)
    b = (np.full(200, lo), np.full(200, hi))
    z1, v1 = reflect(jnp.asarray(start + vel), jnp.asarray(vel), b)
    z1, v1 = np.asarray(z1), np.asarray(v1)
    assert np.all(z1 >= lo) and np.all(z1 <= hi)
    # reversibility of the free flight with mirrors: flip momentum and fly back
    z2, v2 = reflect(jnp.asarray(z1 - v1), jnp.asarray(-v1), b)
    np.testing.assert_allclose(np.asarray(z2), start, atol=1e-9)
    np.testing.assert_allclose(-np.asarray(v2), vel, atol=1e-12)


@pytest.mark.parametrize(
    "kernel,step,scale",
    [
        (hais_kernel(0.5), 0.4, 1.0),
        (hais_kernel(1.0), 0.4, 1.0),
        (random_walk_kernel(), 0.8, 1.0),
        (hais_kernel(0.5), 0.6, np.array([0.4, 0.9, 1.6])),
        (hais_kernel(0.5, flips="reduced", lookahead=2), 0.6, np.array([0.4, 0.9, 1.6])),
        (hais_kernel(0.5, step_size_jitter=1.0), 0.6, np.array([0.4, 0.9, 1.6])),
        (hais_kernel(0.5, local_steps=True), 0.6, np.array([0.4, 0.9, 1.6])),
        (hais_kernel(0.5, num_leapfrog=3, local_steps=True), 0.9, 1.0),
        (random_walk_kernel(), 1.5, np.array([0.4, 0.9, 1.6])),
    ],
)
def test_transition_leaves_tempered_gaussian_invariant(key, kernel, step, scale):
    """Start from exact draws of π_β (a Gaussian), run 20 steps, compare moments (z-tests).

    π_β for a N(0, I) initial and a N(m, diag s²) target is Gaussian with precision
    (1 − β) + β/s² and mean β m/s² / precision. 20000 particles; 5-sigma bounds. A vector
    ``scale`` (the diagonal preconditioner) must keep π_β and the momentum's N(0, I).
    """
    widths = np.array([0.5, 1.0, 2.0])  # the target's (not the preconditioner ``scale``)
    shift = np.array([1.0, -0.5, 0.3])
    t = ph.AnnealingTarget(
        log_density=lambda z: -0.5 * jnp.sum(((z - shift) / widths) ** 2),
        initial=ph.Gaussian(np.zeros(3)),
    )
    beta = 0.6
    prec = (1 - beta) + beta / widths**2
    mean = beta * shift / widths**2 / prec
    sd = 1 / np.sqrt(prec)
    n = 20000
    k0, k1, k2 = jax.random.split(key, 3)
    z = mean + sd * np.asarray(jax.random.normal(k0, (n, 3)))
    keys = jax.random.split(k1, n)
    states = jax.vmap(kernel.init, (0, 0, None))(keys, jnp.asarray(z), t)
    step_fn = jax.jit(
        lambda ks, s: jax.vmap(kernel.step, (0, 0, None, None, None, None))(
            ks, s, t, beta, step, jnp.asarray(scale)
        )
    )
    for i in range(20):
        ks = fast_random.split_particles(jax.random.fold_in(k2, i), n)
        states, info = step_fn(ks, states)
    zf = np.asarray(states.position)
    assert 0.2 < float(np.mean(info.acceptance_rate)) <= 1.0
    np.testing.assert_array_less(np.abs(zf.mean(0) - mean), 5 * sd / np.sqrt(n))
    np.testing.assert_array_less(np.abs(zf.var(0) - sd**2), 5 * sd**2 * np.sqrt(2 / n))
    if hasattr(states, "momentum"):
        v = np.asarray(states.momentum)
        np.testing.assert_array_less(np.abs(v.mean(0)), 5 / np.sqrt(n))
        np.testing.assert_array_less(np.abs(v.var(0) - 1), 5 * np.sqrt(2 / n))


def test_refresh_fraction_matches_seed():
    # half the momentum power per unit time: (1 - γ)^(1/ε) = 1/2
    g = float(ph.refresh_fraction(0.5, 0.2))
    assert abs((1 - g) ** (1 / 0.2) - 0.5) < 1e-12
    assert float(ph.refresh_fraction(1.0, 0.3)) == 1.0


class _NormalPoissonPrior:
    """μ ~ N(0, 1), n ~ Poisson(3): a state with one continuous and one integer coordinate."""

    dim = 2

    def sample(self, rng_key, sample_shape=()):
        k1, k2 = jax.random.split(rng_key)
        n = jax.random.poisson(k2, 3.0, sample_shape).astype(jnp.result_type(float))
        return jnp.stack([jax.random.normal(k1, sample_shape), n], axis=-1)

    def log_prob(self, z):
        n = z[1]
        log_pmf = n * jnp.log(3.0) - 3.0 - jax.scipy.special.gammaln(n + 1.0)
        return -0.5 * z[0] ** 2 - 0.5 * jnp.log(2 * jnp.pi) + jnp.where(n >= 0, log_pmf, -jnp.inf)


def test_mixed_kernel_anneals_a_state_with_an_integer_coordinate():
    """y_i ~ N(μ + n, 0.5): log Z = log Σ_n Poisson(n; 3) N(y; n·1, 0.25 I + 11ᵀ), exact."""
    from scipy import special, stats

    y = np.array([4.1, 3.6, 4.4, 3.9, 4.2])
    cov = 0.25 * np.eye(5) + 1.0
    exact = special.logsumexp(
        [stats.poisson(3).logpmf(n) + stats.multivariate_normal(np.full(5, n), cov).logpdf(y)
         for n in range(60)]
    )  # fmt: skip

    def log_likelihood(z):
        return jnp.sum(-0.5 * ((y - z[0] - z[1]) / 0.5) ** 2 - jnp.log(0.5 * jnp.sqrt(2 * jnp.pi)))

    target = ph.AnnealingTarget(initial=_NormalPoissonPrior(), log_likelihood=log_likelihood)
    res = ph.hais(jax.random.key(0), target, num_particles=256, num_steps=500,
                  discrete=[False, True], progress_bar=False)  # fmt: skip
    assert abs(res.log_z - exact) < 4 * res.log_z_se + 0.02
    assert np.all(res.particles[:, 1] == np.round(res.particles[:, 1]))  # still integers
    assert res.settings.kernel == "hais+discrete"
    assert res.settings.discrete_acceptance > 0.005 and not res.checks
    with pytest.raises(ValueError, match="at least one discrete"):
        ph.mixed_kernel((False, False))


def test_integer_moves_that_never_accept_are_reported():
    """An integer coordinate whose neighbours all have density 0 (only n = 0 is allowed): the
    moves are never taken, and the result says so."""

    class Prior:
        dim = 2

        def sample(self, rng_key, sample_shape=()):
            return jnp.stack(
                [jax.random.normal(rng_key, sample_shape), jnp.zeros(sample_shape)], axis=-1
            )

        def log_prob(self, z):
            return (
                -0.5 * z[0] ** 2 - 0.5 * jnp.log(2 * jnp.pi) + jnp.where(z[1] == 0, 0.0, -jnp.inf)
            )

    target = ph.AnnealingTarget(initial=Prior(), log_likelihood=lambda z: -0.5 * (z[0] - 1.0) ** 2)
    with pytest.warns(ph.EvidenceWarning, match="discrete"):
        res = ph.hais(jax.random.key(0), target, num_particles=64, num_steps=100,
                      discrete=[False, True], progress_bar=False)  # fmt: skip
    assert res.settings.discrete_acceptance == 0.0
    assert any(c.startswith("discrete") for c in res.checks)


def test_local_steps_estimate_a_funnel_neck_exactly(key):
    """``local_steps=True`` keeps Ẑ unbiased: a 3-D funnel (v ~ N(0, 1.5²), x | v ~
    N(0, e^v)), normalized, from N(0, I): six runs average to log Z = 0 within their
    spread, and the kernel's name says which transition ran."""

    def log_density(z):
        v, x = z[0], z[1:]
        return (-0.5 * (v / 1.5) ** 2 - 0.5 * jnp.sum(x * x) * jnp.exp(-v) - v
                - 1.5 * jnp.log(2 * jnp.pi) - jnp.log(1.5))  # fmt: skip

    t = ph.AnnealingTarget(log_density=log_density, initial=ph.Gaussian(np.zeros(3)))
    runs = [ph.hais(k, t, num_particles=512, num_steps=1000, local_steps=True,
                    progress_bar=False) for k in jax.random.split(key, 6)]  # fmt: skip
    assert all(r.settings.kernel.endswith("_local") for r in runs)
    est = np.array([r.log_z for r in runs])  # the runs' spread, not their (heavy-tailed) SEs
    assert abs(est.mean()) < 4 * est.std(ddof=1) / np.sqrt(len(est)) + 0.005, est
