"""The fast counter-hash normals used for the momentum refresh: statistics and reproducibility.

Each test's false-failure rate is set by its threshold: p-value cut 1e-4 per test.
"""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from ppl_hais import random as fr


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
