"""The fast counter-hash normals used for the momentum refresh: statistics and reproducibility.

Each test's false-failure rate is set by its threshold: p-value cut 1e-4 per test.
"""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from ppl_hais.mcmc import fast_random as fr


def test_same_key_same_draws(key):
    a = fr.normal(key, (100, 7))
    b = fr.normal(key, (100, 7))
    assert np.array_equal(np.asarray(a), np.asarray(b))
    c = fr.normal(jax.random.fold_in(key, 1), (100, 7))
    assert not np.array_equal(np.asarray(a), np.asarray(c))


def test_normal_moments_and_ks(key):
    keys = fr.split_particles(key, 4000)
    z = np.asarray(jax.vmap(lambda k: fr.normal(k, (50,)))(keys)).ravel()  # 200k draws
    n = z.size
    assert abs(z.mean()) < 4.5 / np.sqrt(n)
    assert abs(z.var() - 1) < 4.5 * np.sqrt(2 / n)
    assert abs(stats.skew(z)) < 4.5 * np.sqrt(6 / n)
    assert abs(stats.kurtosis(z)) < 4.5 * np.sqrt(24 / n)
    assert stats.kstest(z, "norm").pvalue > 1e-4


def test_streams_are_uncorrelated(key):
    keys = fr.split_particles(key, 2000)
    z = np.asarray(jax.vmap(lambda k: fr.normal(k, (8,)))(keys))
    u = np.asarray(jax.vmap(lambda k: fr.uniform(k, (), salt=1))(keys))
    corr = np.corrcoef(np.column_stack([z, stats.norm.ppf(u)]), rowvar=False)
    off = corr[~np.eye(9, dtype=bool)]
    assert np.max(np.abs(off)) < 4.5 / np.sqrt(2000) * 1.3  # 72 pairs, Bonferroni-ish
    # consecutive step keys: draws at the same particle and coordinate are uncorrelated
    steps = jnp.stack([fr.normal(jax.random.fold_in(key, i), (500,)) for i in range(2)])
    r = np.corrcoef(np.asarray(steps))[0, 1]
    assert abs(r) < 4.5 / np.sqrt(500)


def test_uniform_open_interval(key):
    u = np.asarray(fr.uniform(key, (100000,)))
    assert u.min() > 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-4


def test_extreme_bit_patterns_give_finite_draws():
    """Regression: a 24-bit uniform's top value rounds to 1.0 in float32 and erfinv(1) = inf;
    one such draw per 1.7e7 froze particles in 100k-step runs (biased log Z by -4 SE)."""
    extremes = jnp.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFEFF, 0xFFFFFFFF], jnp.uint32)
    z = np.asarray(fr.normal_from_bits(extremes))
    u = np.asarray(fr.uniform_from_bits(extremes))
    assert np.all(np.isfinite(z)) and np.max(np.abs(z)) < 5.6
    assert np.all(u > 0) and np.all(u < 1)
    # the full range of magnitudes: every float32 x = ±(m + 1/2)·2^-23 is exact and |x| < 1
    b = (jnp.arange(0, 2**23, 4097, dtype=jnp.uint32) << 8) | jnp.uint32(0xFF)
    zz = np.asarray(fr.normal_from_bits(jnp.concatenate([b, b | jnp.uint32(0x80000000)])))
    assert np.all(np.isfinite(zz))
    np.testing.assert_allclose(zz[: b.size], -zz[b.size :])


def test_every_normal_is_the_inverse_cdf_to_float32_precision():
    """All 2²³ magnitudes through the written-out erfinv (Giles 2011) against scipy's in float64:
    within 3 float32 ulps relative, increasing, symmetric in the sign bit."""
    from scipy.special import erfinv

    m = np.arange(2**23, dtype=np.uint32)
    to_normal = jax.jit(lambda b: fr.normal_from_bits(b, jnp.float64))
    z = np.asarray(to_normal(jnp.asarray(m << 8)))
    exact = np.sqrt(2.0) * erfinv((m.astype(np.float64) + 0.5) * 2.0**-23)
    assert np.max(np.abs(z - exact) / np.maximum(exact, 1e-3)) < 3 * 2.0**-23
    assert np.all(np.diff(z) >= 0) and 5.4 < z[-1] < 5.45
    negative = np.asarray(to_normal(jnp.asarray((m << 8) | np.uint32(1 << 31))))
    assert np.array_equal(negative, -z)


def test_step_keys_are_independent_across_steps_and_split_like_a_population(key):
    """split_particles(key, n, offset, step=i) replaces fold_in(key, i) in the annealing scan:
    draws of one particle at consecutive steps, and of neighbouring particles at one step, are
    uncorrelated; a group's keys are the population's slice."""
    steps = np.stack([
        np.asarray(jax.vmap(lambda k: fr.normal(k, (4,)))(fr.split_particles(key, 500, step=i)))
        for i in range(3)
    ])  # (step, particle, coordinate)
    flat = steps.reshape(3, -1)
    r = np.corrcoef(flat)[np.triu_indices(3, 1)]
    assert np.max(np.abs(r)) < 4.5 / np.sqrt(flat.shape[1])
    z = steps.ravel()
    assert stats.kstest(z, "norm").pvalue > 1e-4
    whole = jax.random.key_data(fr.split_particles(key, 64, step=7))
    part = jax.random.key_data(fr.split_particles(key, 32, offset=32, step=7))
    assert np.array_equal(np.asarray(whole)[32:], np.asarray(part))
    other = jax.random.key_data(fr.split_particles(key, 64, step=8))
    assert not np.any(np.all(np.asarray(whole) == np.asarray(other), axis=1))
