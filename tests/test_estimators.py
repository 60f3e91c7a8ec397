"""HAIS and the AIS baselines against exact normalizers ([HAIS12] §3, §5.1; shared/cases).

Tolerance: |log Ẑ − log Z| < 4 · (reported SE). If the SE were exact and the estimator
Gaussian and unbiased, each check would fail with probability 6e-5; AIS's downward bias at
finite N counts against us, so N is chosen where the bias is well below the SE (the slow
seed sweep test_slow.py::test_coverage_over_seeds measures how often these bounds hold).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppl_hais as ph
from ppl_hais.mcmc import fast_random
from ppl_hais.model import validation as ex

Z_TOL = 4.0


def assert_close(result, truth):
    err = result.log_z - truth
    assert abs(err) < Z_TOL * result.log_z_se, (
        f"log Z {result.log_z:.4f} ± {result.log_z_se:.4f}, truth {truth:.4f}, error {err:+.4f}"
    )


def test_poe_laplace_36d(key):
    case = ex.product_of_experts("laplace", dim=36)
    r = ph.hais(key, case.target, num_particles=200, num_steps=10_000, progress_bar=False)
    assert_close(r, case.log_z)
    assert r.log_z_se < 0.1


def test_poe_student_36d_heavy_tailed_experts(key):
    # λ from 1.5 to 3: tails |u|^(−2λ), the λ = 1.5 expert has infinite variance. With Cauchy
    # experts (λ = 1) the anneal misses tail mass in most runs, so log Ẑ sits low by more than
    # its SE (about 1 seed in 3 beyond 4 SE): test_slow.py records that as a strict xfail, and
    # this test passed at λ from 1 only by the luck of its seed until the random numbers changed.
    case = ex.product_of_experts(
        "student", dim=36, lam=np.linspace(1.5, 3.0, 36), initial_scale=2.0
    )
    assert np.sum(case.info["lam"] <= 1.5) >= 1
    r = ph.hais(key, case.target, num_particles=200, num_steps=30_000, progress_bar=False)
    assert_close(r, case.log_z)
    assert r.log_z_se < 0.05


def test_linear_generative_gaussian_prior_per_datum(key):
    m = ex.linear_generative(dim=36, sigma=0.1, prior="gaussian", num_data=3)
    est = ph.generative_log_likelihood(
        key,
        m["log_likelihood"],
        m["prior"],
        m["data"],
        num_particles=200,
        num_steps=10_000,
        schedule="sigmoid",
    )
    err = est.per_datum - m["log_p"]
    np.testing.assert_array_less(np.abs(err), Z_TOL * est.per_datum_se)
    assert abs(est.mean - m["log_p"].mean()) < Z_TOL * est.se


def test_linear_generative_laplace_prior_zero_bases(key):
    """The HAIS paper's sanity check: with Φ = 0, p(x) = N(x; 0, σ²I) whatever the prior."""
    m = ex.linear_generative(dim=36, sigma=0.1, prior="laplace", zero_bases=True, num_data=4)
    est = ph.generative_log_likelihood(
        key,
        m["log_likelihood"],
        m["prior"],
        m["data"],
        num_particles=200,
        num_steps=2000,
        schedule="sigmoid",
    )
    np.testing.assert_array_less(np.abs(est.per_datum - m["log_p"]), Z_TOL * est.per_datum_se)


def test_positive_target_by_reflection(key):
    # shapes ≥ 1 keep the density finite at the wall; a shape below 1 (infinite density at
    # z = 0) is measured in test_slow.py: reflected HMC does not reach the wall's mass.
    case = ex.gamma_positive()
    r = ph.hais(key, case.target, num_particles=400, num_steps=3000, progress_bar=False)
    assert_close(r, case.log_z)
    assert np.all(r.particles > 0)
    # the weighted particles reproduce the Gamma means α/β
    mean = np.sum(r.weights[:, None] * r.particles, axis=0)
    alpha, beta = case.info["alpha"], case.info["beta"]
    sd = np.sqrt(alpha) / beta
    np.testing.assert_array_less(np.abs(mean - alpha / beta), 5 * sd / np.sqrt(r.ess))


def test_ill_conditioned_gaussian(key):
    case = ex.correlated_gaussian(dim=10, condition=100.0)
    r = ph.hais(
        key, case.target, num_particles=256, num_steps=3000, schedule="sigmoid", progress_bar=False
    )
    assert_close(r, case.log_z)


@pytest.mark.parametrize("kernel", [ph.random_walk_kernel(), ph.resampled_hmc_kernel()])
def test_baselines_are_consistent(key, kernel):
    case = ex.correlated_gaussian(dim=4, condition=10.0)
    r = ph.ais(key, case.target, kernel, num_particles=256, num_steps=3000, progress_bar=False)
    assert_close(r, case.log_z)


def test_split_likelihood_form_matches_exact_evidence(key):
    """Bayesian form: initial = prior, log_likelihood given; Normal–Normal 5-D, closed form."""
    rng = np.random.default_rng(3)
    y = rng.normal(1.0, 1.0, size=(20, 5))
    sigma, s0 = 1.0, 2.0

    def log_lik(mu):
        return jnp.sum(
            -0.5 * ((y - mu[None, :]) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
        )

    cov = sigma**2 * np.eye(20) + s0**2 * np.ones((20, 20))
    from scipy.stats import multivariate_normal

    truth = sum(multivariate_normal(np.zeros(20), cov).logpdf(y[:, j]) for j in range(5))
    target = ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(5), s0), log_likelihood=log_lik)
    r = ph.hais(
        key, target, num_particles=256, num_steps=2000, schedule="sigmoid", progress_bar=False
    )
    assert_close(r, truth)


def test_likelihood_that_ignores_the_latents(key):
    """A likelihood constant in z makes every weight equal: the estimate is that constant,
    exactly, with no warning (ArviZ's tail fit raised on the equal weights, or said k = inf)."""
    target = ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(3), 2.0),
                                log_likelihood=lambda z: -1.25 + 0.0 * jnp.sum(z))  # fmt: skip
    r = ph.hais(key, target, num_particles=128, num_steps=50, progress_bar=False)
    assert abs(r.log_z + 1.25) < 1e-9 and r.log_z_se < 1e-6  # rounding only
    assert r.pareto_k == -np.inf and r.checks == ()
    assert ph.checks.diagnostics.pareto_khat(np.zeros(512)) == -np.inf


def test_analysis_log_likelihood(key):
    case = ex.product_of_experts("laplace", dim=8, seed=4)
    phi = case.info["phi"]
    rng = np.random.default_rng(0)
    u = rng.laplace(size=(50, 8))
    data = np.linalg.solve(phi, u.T).T  # exact draws: u = Φx has independent Laplace entries
    est = ph.analysis_log_likelihood(
        key,
        case.target.log_density,
        data,
        case.target.initial,
        num_particles=200,
        num_steps=2000,
        progress_bar=False,
    )
    exact = np.mean(-np.sum(np.abs(data @ phi.T), axis=1)) - case.log_z
    assert abs(est.mean - exact) < Z_TOL * est.se
    assert est.data_se > 0


def test_fixed_key_gives_identical_result(key):
    case = ex.correlated_gaussian(dim=3)
    a = ph.hais(key, case.target, num_particles=32, num_steps=200, progress_bar=False)
    b = ph.hais(key, case.target, num_particles=32, num_steps=200, progress_bar=False)
    assert a.log_z == b.log_z
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    c = ph.hais(
        jax.random.fold_in(key, 1), case.target, num_particles=32, num_steps=200, progress_bar=False
    )
    assert c.log_z != a.log_z


def test_fixed_step_size_and_progress_bar(key, capsys):
    case = ex.correlated_gaussian(dim=3)
    # a fixed step on a fixed schedule needs no pilot (the default adaptive schedule does)
    r = ph.hais(
        key, case.target, num_particles=64, num_steps=500, step_size=0.2, schedule="sigmoid",
        progress_bar=True,
    )  # fmt: skip
    assert r.settings.pilot_gradients_per_particle == 0
    np.testing.assert_allclose(r.trace.step_size, 0.2)
    assert_close(r, case.log_z)


def test_a_bar_shared_by_particle_groups_shows_their_mean():
    """Particle groups move one bar: each ticks its own position, the bar shows their mean
    (groups waiting for a thread count as 0), and closing leaves nothing open."""
    from ppl_hais.runtime import progress

    bar = progress.shared_bar(100, "demo", 4)
    parts = [progress.open_run(100, "demo", part_of=bar) for _ in range(4)]
    progress.tick(parts[0], 100)
    assert progress._BARS[bar].n == 25
    progress.tick(parts[1], 60)
    progress.tick(parts[1], 80)
    assert progress._BARS[bar].n == 45 and progress._BARS[parts[1]].n == 80
    for run_id in [*parts, bar]:
        progress.close_bar(run_id)
    assert not {bar, *parts} & set(progress._BARS)


def test_adaptive_schedule_against_exact_evidence(key):
    """schedule="adaptive" (pilot-measured thermodynamic length) on a 20-D Bayesian linear
    regression, against the exact evidence (its gain over sigmoid: benchmarks/pymc_vs_smc.py)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 20))
    y = X @ rng.normal(size=20) + rng.normal(size=50)
    from scipy.stats import multivariate_normal

    truth = multivariate_normal(np.zeros(50), np.eye(50) + X @ X.T).logpdf(y)

    def log_lik(w):
        return -0.5 * jnp.sum((y - X @ w) ** 2) - 25 * np.log(2 * np.pi)

    target = ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(20)), log_likelihood=log_lik)
    # 512 particles: at 256 the weights' k̂ crossed 0.7 (SE inf, warned) on 2 keys of 12,
    # at 512 on none of 21, whose errors were within 3 of their SEs
    r = ph.hais(
        key, target, num_particles=512, num_steps=1000, schedule="adaptive", progress_bar=False
    )
    assert_close(r, truth)
    # a sanity bound: a run whose particles fell behind reports a far larger error bar
    assert r.settings.schedule == "adaptive" and r.log_z_se < 0.25
    # the schedule follows the pilot's spread of log L: dense where β is small
    assert np.sum(r.betas < 0.05) > 300


def test_mass_matrix_on_a_badly_scaled_target(key):
    """Coordinates whose posterior sds span 10⁻² … 10: the pilot's population scale matches
    them at β = 1, and the preconditioned run (the default) is right and far tighter than the
    same run with one step size for all coordinates."""
    from ppl_hais.annealing import pilot as pilots

    sd = np.geomspace(1e-2, 10.0, 8)
    mean = np.linspace(-1.0, 1.0, 8) * sd

    def log_lik(z):  # N(mean, sd²) up to its normalizer; prior N(0, I)
        return -0.5 * jnp.sum(((z - mean) / sd) ** 2)

    target = ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(8)), log_likelihood=log_lik)
    post_var = 1.0 / (1.0 + 1.0 / sd**2)
    post_mean = post_var * mean / sd**2
    # log ∫ N(z; 0, I) exp(−½|(z − m)/s|²) dz, coordinate by coordinate
    truth = np.sum(0.5 * np.log(post_var) + 0.5 * post_mean**2 / post_var - 0.5 * mean**2 / sd**2)

    pos = target.initial.sample(jax.random.key(5), 64)
    pilot = pilots.pilot_run(
        key, target, ph.hais_kernel(), ph.sigmoid_schedule(1000), pos,
        initial_step_size=0.2, target_accept=0.9, adapt_scale=True,
    )  # fmt: skip
    betas, log_scale = pilot.scale
    assert betas[-1] > 0.99 and log_scale.shape == (len(betas), 8)
    np.testing.assert_allclose(np.exp(log_scale[-1]), np.sqrt(post_var), rtol=0.25)
    np.testing.assert_allclose(np.exp(log_scale[0]), 1.0, rtol=0.25)  # the N(0, I) prior

    runs = {
        mm: ph.hais(
            key,
            target,
            num_particles=128,
            num_steps=1000,
            schedule="adaptive",
            adapt_mass_matrix=mm,
            progress_bar=False,
        )
        for mm in (True, False)
    }
    assert_close(runs[True], truth)
    assert runs[True].log_z_se < 0.4 * runs[False].log_z_se  # 0.07 against 0.3–0.8 (4 seeds)


def test_particle_groups_give_the_same_weights(key, monkeypatch):
    """On CPU the main run is split into particle groups run from threads; particle i draws the
    same numbers either way, so the weights agree to rounding and the merged trace is the
    whole population's. Padded to whole groups (120 particles as 4 × 32, 8 of them padding),
    the padding counts in no figure: the same weights, trace and gradients. Two groups run at
    once here, so the others wait for a thread."""
    from ppl_hais.annealing import execution

    monkeypatch.setattr(execution, "concurrent_groups", lambda: 2)
    case = ex.correlated_gaussian(dim=3)
    for num, layouts in [(128, [(1, 128), (4, 32)]), (120, [(1, 120), (4, 32)])]:
        runs = {}
        for groups, size in layouts:
            monkeypatch.setattr(execution, "layout", lambda n, g=groups, s=size: (g, s))
            runs[groups] = ph.hais(key, case.target, num_particles=num, num_steps=300,
                                   step_size=0.3, progress_bar=groups > 1)  # fmt: skip
        one, four = runs[1], runs[4]
        assert four.log_weights.shape == (num,) and four.particles.shape == (num, 3)
        np.testing.assert_allclose(four.log_weights, one.log_weights, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(four.trace.log_z, one.trace.log_z, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(four.trace.ess, one.trace.ess, rtol=1e-7)
        np.testing.assert_allclose(four.trace.acceptance_rate, one.trace.acceptance_rate,
                                   rtol=1e-9)  # fmt: skip
        assert four.settings.gradients_per_particle == one.settings.gradients_per_particle


def test_initial_draws_of_any_count_run_one_program(key, monkeypatch):
    """Initial draws come in blocks of ``DRAW_BLOCK`` from one compiled sampler, whatever their
    number (a pilot's 64, four chains' 2048): the first block is the key's own draws, the
    others fold the block's index into the key, so no two blocks repeat."""
    from ppl_hais.annealing import execution

    sizes = []
    real = execution._sample_initial_jit
    monkeypatch.setattr(execution, "_sample_initial_jit",
                        lambda t, k, num: sizes.append(num) or real(t, k, num=num))  # fmt: skip
    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum(z**2), ph.Gaussian(jnp.zeros(2)))
    few = execution.initial_sampler(target, 64)(key)
    many = execution.initial_sampler(target, 2 * execution.DRAW_BLOCK + 5)(key)
    assert set(sizes) == {execution.DRAW_BLOCK} and len(sizes) == 4
    assert few.shape == (64, 2) and many.shape == (2 * execution.DRAW_BLOCK + 5, 2)
    np.testing.assert_array_equal(many[:64], few)
    third = np.asarray(real(target, fast_random.host_fold_in(key, 2), num=execution.DRAW_BLOCK))
    np.testing.assert_array_equal(many[2 * execution.DRAW_BLOCK :], third[:5])
    blocks = many[: 2 * execution.DRAW_BLOCK].reshape(2, execution.DRAW_BLOCK, 2)
    assert not np.any(blocks[0] == blocks[1])


def test_chains_in_one_call_are_slices_of_one_population():
    """num_chains=C anneals C·P particles in one run; chain c is particles c·P … (c+1)·P − 1
    (bit-equal to the slice of a one-chain run of C·P particles with the same key), and each
    chain's estimate is checked against the exact log Z."""
    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / 2.0) ** 2), ph.Gaussian(jnp.zeros(3)))
    exact = 3 * np.log(2.0 * np.sqrt(2 * np.pi))
    kw = dict(num_steps=300, progress_bar=False)
    chains = ph.hais(jax.random.key(5), target, num_particles=64, num_chains=3, **kw)
    whole = ph.hais(jax.random.key(5), target, num_particles=192, **kw)
    assert len(chains) == 3
    for c, r in enumerate(chains):
        np.testing.assert_array_equal(r.log_weights, whole.log_weights[64 * c : 64 * (c + 1)])
        assert r.settings.num_chains == 3 and r.settings.chain == c
        assert abs(r.log_z - exact) < 4 * r.log_z_se
    assert len({round(r.log_z, 12) for r in chains}) == 3
    with pytest.raises(ValueError, match="one chain"):
        ph.hais(jax.random.key(5), target, num_particles=64, num_chains=2, bidirectional=True, **kw)
    with pytest.raises(ValueError, match="num_chains"):
        ph.hais(jax.random.key(5), target, num_particles=64, num_chains=0, **kw)



def test_initial_distributions_follow_numpyros_protocol():
    """The core's distributions take NumPyro's ``sample(rng_key, sample_shape)`` and a batched
    ``log_prob``; a NumPyro distribution is accepted as the initial distribution as it is."""
    import numpyro.distributions as dist

    dim, key = 3, jax.random.key(0)
    tril = np.array([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [-0.3, 0.2, 0.7]])
    dists = [
        ph.Gaussian(np.arange(3.0), np.array([1.0, 2.0, 0.5])),
        ph.Gaussian(np.arange(3.0), scale_tril=tril),
        ph.StudentT(np.zeros(3), 1.5, df=5.0),
        ph.GaussianMixture(np.array([[-2.0] * 3, [2.0] * 3]), np.stack([tril, tril]), [0.3, 0.7]),
    ]
    for q in dists:
        x = q.sample(key, (4, 5))
        assert x.shape == (4, 5, dim)
        batched = q.log_prob(x)
        one_by_one = jax.vmap(jax.vmap(q.log_prob))(x)
        np.testing.assert_allclose(batched, one_by_one, rtol=1e-10, atol=1e-10)
        assert q.sample(key, 7).shape == (7, dim)  # an int n is (n,)
    mvn = dist.MultivariateNormal(jnp.arange(3.0), scale_tril=jnp.asarray(tril))
    z = dists[1].sample(key, (6,))
    np.testing.assert_allclose(dists[1].log_prob(z), jax.vmap(mvn.log_prob)(z), rtol=1e-6)

    # a NumPyro distribution as the initial: ∫ exp(−|z|²/2) dz = (2π)^{D/2} (NumPyro's own
    # code broadcasts implicitly, which this suite's rank-promotion check would refuse)
    with jax.numpy_rank_promotion("allow"):
        target = ph.AnnealingTarget(
            log_density=lambda z: -0.5 * jnp.sum(z**2),
            initial=dist.MultivariateNormal(jnp.zeros(dim), 2.0 * jnp.eye(dim)),
        )
        assert target.dim == dim
        res = ph.hais(jax.random.key(1), target, num_particles=256, num_steps=200,
                      progress_bar=False)  # fmt: skip
    exact = 0.5 * dim * np.log(2 * np.pi)
    assert abs(res.log_z - exact) < 4 * res.log_z_se + 0.01, (res.log_z, res.log_z_se, exact)
