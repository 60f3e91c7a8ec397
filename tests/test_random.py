"""The counter-based normals used for the momentum refresh: the generator, statistics and
reproducibility.

Each test's false-failure rate is set by its threshold: p-value cut 1e-4 per test.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from ppl_hais.mcmc import fast_random as fr


def test_the_generator_is_threefry_2x32_20():
    """Random123's known answers for Threefry-2x32-20 (its kat_vectors: counter, key, block)
    and JAX's own threefry_2x32 on many counters and keys: the words are a vetted generator's."""
    import jax.extend.random as jr

    for ctr, k, want in (((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
                         ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
                         ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344),
                          (0xC4923A9C, 0x483DF7A0))):  # fmt: skip
        got = fr.threefry2x32(*(jnp.uint32(v) for v in (*k, *ctr)))
        assert tuple(int(w) for w in got) == want
    words = jax.random.bits(jax.random.key(5), (4, 1000), jnp.uint32)
    for k0, k1 in ((0, 1), (0xDEADBEEF, 0x12345678)):
        a, b = fr.threefry2x32(jnp.uint32(k0), jnp.uint32(k1), words[0], words[1])
        ref = jr.threefry_2x32(jnp.array([k0, k1], jnp.uint32), jnp.concatenate(words[:2]))
        assert np.array_equal(np.concatenate([a, b]), np.asarray(ref))


def test_the_rounds_are_traced_once_for_every_program_that_draws(monkeypatch):
    """Two programs that draw normals at three places each trace Threefry's 20 rounds once per
    shape between them, not at every draw (12 times here: ~100 jnp operations each; the bias
    check's MCMC draws at 11 places). That the words are Threefry's whichever way they are
    computed is the test above."""
    counts = {"rounds": 0}
    rounds = fr._rounds

    def counted(xp, *words):
        counts["rounds"] += xp is jnp
        return rounds(xp, *words)

    monkeypatch.setattr(fr, "_rounds", counted)
    fr._rounds_jit.clear_cache()  # what an earlier test traced would hide the count

    def draws(key, scale):
        return [scale * fr.normal(fr.fold_in(key, i), (5,), salt=i) for i in range(3)]

    key = jax.random.key(3)
    first = jax.jit(draws)(key, 1.0)
    second = jax.jit(lambda k: draws(k, 2.0))(key)
    # one shape for fold_in's block (1 particle) and one for the draws' (3 blocks of 5 words)
    assert counts["rounds"] == 2, counts
    assert all(np.array_equal(2.0 * a, b) for a, b in zip(first, second, strict=True))


def test_host_keys_are_jaxs_own_and_compile_nothing(caplog):
    """host_split (a list, or an array) / host_fold_in / host_key give bitwise the keys
    jax.random.split, fold_in and key give (typed and legacy keys), computed in NumPy: no XLA
    program compiled, which is what they are for (each of JAX's compiled its own program per
    shape on a first call)."""
    import logging

    keys = [jax.random.key(s) for s in (0, 9, 2**31 - 1)]
    legacy = jax.random.PRNGKey(3)
    data = lambda k: np.asarray(jax.random.key_data(k))  # noqa: E731
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles(True):
        got = [(fr.host_split(k, 5), fr.host_split(k), fr.host_fold_in(k, 29),
                fr.host_fold_in(k, 2**32 - 1), fr.host_key(s))
               for k, s in zip(keys, (0, 9, 2**31 - 1), strict=True)]  # fmt: skip
        legacy_split = fr.host_split(legacy, 3)
        as_array = fr.host_split(keys[1], 6, as_array=True)
        jax.random.split(keys[0], 7919)  # JAX's own, the check's control: compiles its program
    compiled = [r.getMessage() for r in caplog.records if "XLA compilation" in r.getMessage()]
    assert len(compiled) == 1 and "split" in compiled[0], compiled
    for k, s, (five, two, f29, fmax, key) in zip(keys, (0, 9, 2**31 - 1), got, strict=True):
        assert np.array_equal(np.stack([data(x) for x in five]), data(jax.random.split(k, 5)))
        assert np.array_equal(np.stack([data(x) for x in two]), data(jax.random.split(k)))
        assert np.array_equal(data(f29), data(jax.random.fold_in(k, 29)))
        assert np.array_equal(data(fmax), data(jax.random.fold_in(k, 2**32 - 1)))
        assert np.array_equal(data(key), data(jax.random.key(s)))
    assert np.array_equal(data(as_array), data(jax.random.split(keys[1], 6)))
    for a, b in zip(legacy_split, jax.random.split(legacy, 3), strict=True):
        assert np.array_equal(a, b)
    other = jax.random.key(1, impl="rbg")  # not Threefry: JAX's own split
    assert np.array_equal(np.stack([data(x) for x in fr.host_split(other, 2)]),
                          data(jax.random.split(other, 2)))  # fmt: skip


@pytest.mark.parametrize("x64", [True, False])
def test_host_uniform_and_randint_are_jaxs_own_draws_and_compile_nothing(x64, caplog):
    """host_uniform(key) is float(jax.random.uniform(key)) bitwise, in float64 (the bias
    check's resampling offset) and float32, and host_randint(key, lo, hi) JAX's randint (a
    PyMC prior draw's seed) in int64 and int32, for typed and legacy keys, without compiling."""
    import logging

    with jax.enable_x64(x64):
        keys = [jax.random.key(s) for s in range(200)] + [jax.random.PRNGKey(s) for s in (3, 8)]
        keys += fr.host_split(jax.random.key(11), 50)
        spans = [(0, 2**31 - 1), (-5, 7), (3, 4), (-(2**31), 2**31 - 1)]
        with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles(True):
            got = [fr.host_uniform(k) for k in keys]
            ints = [[fr.host_randint(k, lo, hi) for lo, hi in spans] for k in keys]
        assert not [r for r in caplog.records if "XLA compilation" in r.getMessage()]
        want = [float(jax.random.uniform(k)) for k in keys]
        want_ints = [[int(jax.random.randint(k, (), lo, hi)) for lo, hi in spans] for k in keys]
    assert got == want and ints == want_ints
    assert all(0.0 <= u < 1.0 for u in got) and len(set(got[:200])) == 200


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


# -- a battery of empirical tests ------------------------------------------------------------
# Classical tests (bit frequency, serial pairs and triples, the Hamming distance of neighbours,
# GF(2) ranks of 32×32 bit matrices, birthday spacings with DIEHARD's parameters) applied to
# the words in the orders the annealer consumes them: one key's counters, neighbouring
# particles' keys at one step, one particle's keys over consecutive steps, and the salts of one
# key interleaved. The battery is calibrated on numpy's PCG64 and shown to have power on two
# weak generators of the same shape.


def _chi2(counts, probs):
    counts = np.asarray(counts, float)
    keep = probs * counts.sum() >= 5  # pool sparse cells into one
    c = np.append(counts[keep], counts[~keep].sum())
    p = np.append(probs[keep], probs[~keep].sum())
    c, p = (c, p) if p[-1] > 0 else (c[:-1], p[:-1])
    expected = c.sum() * p
    return stats.chi2.sf(np.sum((c - expected) ** 2 / expected), c.size - 1)


def _bit_frequency(w):
    ones = ((w[:, None] >> np.arange(32, dtype=np.uint32)) & 1).sum(0)
    z = (ones - w.size / 2) / np.sqrt(w.size / 4)
    return stats.chi2.sf(np.sum(z * z), 32)


def _serial(w, bits, k):
    t = (w >> np.uint32(32 - bits))[: w.size // k * k].reshape(-1, k).astype(np.int64)
    idx = np.zeros(len(t), np.int64)
    for j in range(k):
        idx = idx * (1 << bits) + t[:, j]
    cells = 1 << (bits * k)
    return _chi2(np.bincount(idx, minlength=cells), np.full(cells, 1.0 / cells))


def _hamming_neighbours(w):
    """Bits that differ between consecutive words: Binomial(32, ½) when they are independent."""
    count = np.unpackbits((w[1:] ^ w[:-1]).view(np.uint8)).reshape(-1, 32).sum(1, dtype=np.int64)
    return _chi2(np.bincount(count, minlength=33), stats.binom.pmf(np.arange(33), 32, 0.5))


def _gf2_rank_probabilities(n=32):
    def p(r):
        num = np.prod([(1 - 2.0 ** (i - n)) ** 2 for i in range(r)])
        den = np.prod([1 - 2.0 ** (i - r) for i in range(r)])
        return 2.0 ** (r * (2 * n - r) - n * n) * num / den

    top = np.array([p(32), p(31), p(30)])
    return np.append(top, 1 - top.sum())


def _gf2_rank(w):
    """Ranks over GF(2) of 32×32 bit matrices made of 32 consecutive words (DIEHARD)."""
    m = w[: w.size // 32 * 32].reshape(-1, 32).copy()
    rows, rank = np.arange(len(m)), np.zeros(len(m), np.int64)
    for bit in range(32):
        has = (m & np.uint32(1 << bit)) != 0
        candidates = has & (np.arange(32)[None, :] >= rank[:, None])
        found = candidates.any(1)
        pivot = np.argmax(candidates, 1)
        pivot_row = m[rows, pivot]
        clear = has & found[:, None]
        clear[rows, pivot] = False
        m = np.where(clear, m ^ pivot_row[:, None], m)
        to = np.minimum(rank, 31)
        displaced = m[rows, to].copy()
        m[rows, to] = np.where(found, pivot_row, displaced)
        m[rows, pivot] = np.where(found, displaced, m[rows, pivot])
        rank += found
    counts = [(rank == 32).sum(), (rank == 31).sum(), (rank == 30).sum(), (rank <= 29).sum()]
    return _chi2(counts, _gf2_rank_probabilities())


def _birthday_spacings(w, m=512, day_bits=24):
    """Repeated spacings among m birthdays in 2²⁴ days: Poisson(m³/(4·2²⁴) = 2) (DIEHARD)."""
    days = (w >> np.uint32(32 - day_bits)).astype(np.int64)[: w.size // m * m].reshape(-1, m)
    spacings = np.sort(np.diff(np.sort(days, 1), axis=1), 1)
    repeats = np.minimum((np.diff(spacings, axis=1) == 0).sum(1), 12)
    probs = stats.poisson.pmf(np.arange(13), m**3 / (4.0 * 2**day_bits))
    probs[-1] += 1 - probs.sum()
    return _chi2(np.bincount(repeats, minlength=13), probs)


_BATTERY = {
    "bit frequency": _bit_frequency,
    "serial pairs": lambda w: _serial(w, 5, 2),
    "serial triples": lambda w: _serial(w, 3, 3),
    "neighbours' Hamming distance": _hamming_neighbours,
    "GF(2) rank": _gf2_rank,
    "birthday spacings": _birthday_spacings,
}


def _layouts(bits, key, n=1 << 19, particles=512):
    """Words in the orders the annealer draws them. ``bits(key, shape, salt)``."""
    grid = np.asarray(jax.jit(jax.vmap(  # (step, particle)
        lambda i: jax.vmap(lambda k: bits(k, (), 0))(fr.split_particles(key, particles, step=i))
    ))(jnp.arange(n // particles)))  # fmt: skip
    salts = np.stack([np.asarray(bits(key, (n // 3,), s)) for s in (0, 7, 1)], 1)
    return {
        "one key's counters": np.asarray(bits(key, (n,), 0)),
        "neighbouring particles": grid.reshape(-1),
        "consecutive steps": grid.T.reshape(-1),
        "interleaved salts": salts.reshape(-1),
    }


def _battery(words_by_layout):
    words = {layout: np.asarray(w, np.uint32) for layout, w in words_by_layout.items()}
    return {(layout, name): float(test(w)) for layout, w in words.items()
            for name, test in _BATTERY.items()}  # fmt: skip


def _lowbias32(x):  # Chris Wellons' integer hash: a bijection on uint32
    x = (x ^ (x >> 16)) * jnp.uint32(0x7FEB352D)
    x = (x ^ (x >> 15)) * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _counter(shape, salt):
    size = int(np.prod(shape))
    return jnp.arange(size, dtype=jnp.uint32).reshape(shape) + jnp.uint32(
        (salt * 0x9E3779B9) & 0xFFFFFFFF
    )


def test_the_words_pass_a_battery_of_empirical_tests_that_weak_generators_fail():
    cut = 1e-5  # 24 p-values per generator: a family-wise false alarm below 3e-4
    key = jax.random.key(2026)
    ours = _battery(_layouts(fr.bits, key))
    assert min(ours.values()) > cut, {k: v for k, v in ours.items() if v <= cut}
    # calibration: a vetted generator (numpy's PCG64) passes the same tests
    pcg = np.random.default_rng(0).integers(0, 2**32, size=1 << 19, dtype=np.uint64)
    assert min(_battery({"pcg64": pcg.astype(np.uint32)}).values()) > cut

    # power: a Weyl sequence (the counter times the golden ratio, keyed) fails the serial,
    # rank and spacing tests; one round of an integer mixer (lowbias32, the hash these draws
    # once used, three rounds deep) fails the Hamming test
    def weyl(k, shape, salt):
        k0, k1 = fr._key_words(k)
        return (_counter(shape, salt) * jnp.uint32(0x9E3779B9) + k0) ^ k1

    def one_round(k, shape, salt):
        k0, k1 = fr._key_words(k)
        return _lowbias32(_counter(shape, salt) ^ k0) ^ k1

    failed = {k for k, v in _battery(_layouts(weyl, key)).items() if v < cut}
    assert {("one key's counters", t) for t in
            ("serial pairs", "GF(2) rank", "birthday spacings")} <= failed  # fmt: skip
    failed = {k for k, v in _battery(_layouts(one_round, key)).items() if v < cut}
    assert ("one key's counters", "neighbours' Hamming distance") in failed
