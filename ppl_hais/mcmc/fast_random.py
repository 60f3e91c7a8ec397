"""Fast Gaussian and uniform draws for the inner annealing loop.

On CPU the momentum refresh, not the gradient, dominates a cheap annealing step when it uses
``jax.random.normal``: threefry bits and a float64 inverse error function cost several times
one ``vmap(value_and_grad)`` of a 36-D density. These draws use the same
vetted generator, Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as
easy as 1, 2, 3", SC 2011; JAX's default), as a counter-based generator: the words are
those of the Threefry blocks of (counter, salt) under the key's two 32-bit words, and a
particle's key at a step is the block of (particle index, step). The rounds are written out,
so XLA fuses them into the step's loop instead of running a loop of its own. A sign bit and
23 magnitude bits map through a float32 inverse error function (Giles' polynomials written
out: XLA's own CPU erf_inv is slower).

Properties (tested in ``tests/test_random.py``): the blocks are bitwise those of
``jax.extend.random.threefry_2x32`` and Random123's known answers; a fixed key gives identical
draws; draws for different keys or counters are independent to the precision of the moment,
KS and correlation tests, and the words pass a battery of classical empirical tests (bit
frequency, serial pairs and triples, neighbours' Hamming distance, GF(2) matrix ranks,
birthday spacings) in the orders the annealer draws them, as numpy's PCG64 does, while weaker
generators of the same shape fail it; every draw is finite; normals are exact to float32
resolution, i.e. the tails are cut at |z| ≈ 5.4 (probability 7e-8 per draw).

Example
-------
>>> import jax
>>> from ppl_hais.mcmc import fast_random
>>> z = fast_random.normal(jax.random.key(0), (100_000,))
>>> bool(abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02)
True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "check_key", "fold_in", "normal", "uniform", "split_particles", "threefry2x32", "host_key",
    "host_split", "host_fold_in", "host_uniform", "host_randint",
]  # fmt: skip

_SQRT2 = 1.4142135623730951


def check_key(rng_key, name: str = "rng_key"):
    """``rng_key`` if it is a JAX PRNG key (``jax.random.key(0)`` or a legacy
    ``jax.random.PRNGKey(0)``); otherwise a TypeError that names the mistake."""
    dtype = getattr(rng_key, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key) and rng_key.shape == ():
        return rng_key
    if dtype is not None and dtype == jnp.uint32 and getattr(rng_key, "shape", None) == (2,):
        return rng_key
    shown = type(rng_key).__name__
    if dtype is not None:
        shown += f" of dtype {dtype} and shape {getattr(rng_key, 'shape', None)}"
    raise TypeError(
        f"{name} must be a single JAX PRNG key, e.g. jax.random.key(0); got {shown}"
        + (f" ({rng_key!r})" if isinstance(rng_key, int | float) else "")
        + ". (PyMC's random_seed takes an int; NumPyro's and ppl_hais' rng_key a key.)"
    )


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Threefry-2x32's, by round, Random123's


def threefry2x32(k0, k1, x0, x1):
    """The Threefry-2x32-20 block of the counter words ``(x0, x1)`` under the key words
    ``(k0, k1)`` (uint32 arrays that broadcast): 20 add-rotate-xor rounds with a key injection
    every four, bitwise ``jax.extend.random.threefry_2x32``'s; written out so that XLA fuses
    it into the surrounding elementwise work (JAX's runs as a loop of its own on CPU). With
    Python ints and NumPy arrays only, it runs in NumPy (uint32 arithmetic wraps there too).

    Under JAX the rounds go through ``jit``: a program that draws at several places (the bias
    check's MCMC: 11) reuses their traced form instead of tracing 20 rounds at each, and the
    next program does too. XLA inlines the call, so the compiled program is the same; the
    MCMC's tracing took 0.53 → 0.37 s (2-D banana, 128 chains, 2 cores)."""
    if all(isinstance(a, int | np.ndarray | np.generic) for a in (k0, k1, x0, x1)):
        return _rounds(np, k0, k1, x0, x1)
    return _rounds_jit(k0, k1, x0, x1)


def _rounds(xp, k0, k1, x0, x1):
    u32 = xp.uint32
    k0, k1, x0, x1 = (xp.asarray(a).astype(u32) for a in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ u32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = ((x1 << u32(r)) | (x1 >> u32(32 - r))) ^ x0
        x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + u32(i + 1)
    return x0, x1


_rounds_jit = jax.jit(lambda k0, k1, x0, x1: _rounds(jnp, k0, k1, x0, x1))  # traced once


def _key_words(key):
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    data = data.astype(jnp.uint32).reshape(-1)
    return data[0], data[-1]


_SALTED = 0x80000000  # bits' second counter word: salts above, a key's steps below


def bits(key, shape, salt: int = 0):
    """Uniform uint32 words for ``shape``: both words of the Threefry blocks of (counter,
    2³¹ + ``salt``) under the key, counters 0 … ⌈n/2⌉ − 1 for n words (word j the first word of
    block j, word ⌈n/2⌉ + j its second)."""
    k0, k1 = _key_words(key)
    size = 1
    for s in shape:
        size *= s
    half = (size + 1) // 2
    j = jnp.arange(size, dtype=jnp.uint32)
    # every word computes its block (j mod half) and keeps one of its two words: a select,
    # which XLA fuses; concatenating the two halves of ⌈n/2⌉ blocks instead broke the fusion
    # and was 2.6x slower per draw (timed on 2 cores)
    first, second = threefry2x32(k0, k1, j % jnp.uint32(half), jnp.uint32(_SALTED + int(salt)))
    return jnp.where(j < jnp.uint32(half), first, second).reshape(shape)


def uniform_from_bits(b, dtype=jnp.float32):
    """(k + ½)·2⁻²³ from the top 23 bits: every value is exact in float32 and lies in (0, 1).

    (With 24 bits the top value 1 − 2⁻²⁵ is not a float32 and rounds to 1.0.)
    """
    k = (b >> 9).astype(jnp.float32)
    return ((k + jnp.float32(0.5)) * jnp.float32(2.0**-23)).astype(dtype)


# M. Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision:
# w = −log((1 − x)(1 + x)); erfinv(x) = x·p(w) with one polynomial for w < 5 (in w − 2.5) and
# another (in √w − 3) for the tails. Written out here because XLA's CPU erf_inv is 1.3× (D = 36)
# to 5× (D = 10) slower per vmapped draw
# (``benchmarks/rng.py``).
_ERFINV_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
)  # fmt: skip
_ERFINV_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
)  # fmt: skip


def _horner(coefficients, t):
    p = jnp.float32(coefficients[0])
    for c in coefficients[1:]:
        p = p * t + jnp.float32(c)
    return p


@jax.jit  # traced once per shape, as the rounds above
def erfinv_f32(x):
    """erfinv for float32 |x| < 1 (relative error ~1e-7, Giles 2011); finite for every input
    of ``normal_from_bits``, where 1 − |x| ≥ 2⁻²⁴."""
    w = -jnp.log((jnp.float32(1.0) - x) * (jnp.float32(1.0) + x))
    central = _horner(_ERFINV_CENTRAL, w - jnp.float32(2.5))
    tail = _horner(_ERFINV_TAIL, jnp.sqrt(w) - jnp.float32(3.0))
    return jnp.where(w < jnp.float32(5.0), central, tail) * x


def normal_from_bits(b, dtype=jnp.float32):
    """sqrt(2)·erfinv(x) with x = ±(m + ½)·2⁻²³ (sign bit and 23 magnitude bits).

    x = (2m + 1)·2⁻²⁴ has at most 24 significant bits, so it is exact in float32 and
    |x| ≤ 1 − 2⁻²⁴ < 1: the draw is always finite (|z| ≤ 5.4). Computing 2u − 1 from a
    uniform instead can round to exactly 1 and give erfinv(1) = inf.
    """
    m = ((b >> 8) & jnp.uint32(0x7FFFFF)).astype(jnp.float32)
    x = (m + jnp.float32(0.5)) * jnp.float32(2.0**-23)
    x = jnp.where((b >> 31) == 1, -x, x)
    return (jnp.float32(_SQRT2) * erfinv_f32(x)).astype(dtype)


def uniform(key, shape=(), salt: int = 1, dtype=jnp.float32):
    """Uniform draws in the open interval (0, 1) with 23-bit resolution."""
    return uniform_from_bits(bits(key, shape, salt), dtype)


def normal(key, shape, salt: int = 0, dtype=None):
    """Standard normal draws (float32 inverse error function, cast to ``dtype``).

    ``salt`` selects an independent stream from the same key (the uniform used for the
    Metropolis test uses another salt than the momentum refresh).
    """
    dtype = jnp.result_type(float) if dtype is None else dtype
    return normal_from_bits(bits(key, shape, salt), dtype)


def split_particles(key, num: int, offset=0, step=None):
    """``num`` per-particle keys for one step: one Threefry block each instead of a split.

    Particle i gets the block of (``offset + i``, ``step``), so a population run in several
    groups (``offset`` = the group's first index) draws the same numbers as one run of all of
    it. ``step`` (an integer below 2³¹, traced or not) selects an independent set of keys, as
    ``jax.random.fold_in(key, step)`` would; ``None`` is a set of its own.
    """
    k0, k1 = _key_words(key)
    idx = jnp.arange(num, dtype=jnp.uint32) + jnp.asarray(offset).astype(jnp.uint32)
    step = jnp.uint32(_SALTED - 1) if step is None else jnp.asarray(step).astype(jnp.uint32)
    w0, w1 = threefry2x32(k0, k1, idx, step)
    return jax.random.wrap_key_data(jnp.stack([w0, w1], axis=-1))


def fold_in(key, data):
    """A key for the integer ``data`` (traced or not, below 2³¹) derived from ``key``, as
    ``jax.random.fold_in`` gives one: :func:`split_particles`' block, fused into the
    surrounding loop (JAX's threefry runs as a loop of its own on XLA:CPU)."""
    return split_particles(key, 1, step=data)[0]


# -- keys derived on the host ------------------------------------------------------------------
# jax.random.split and fold_in called outside jit compile a program per shape the first time a
# process calls them (0.05-0.15 s each on 2 cores). Under JAX's
# partitionable Threefry (its default) split(key, n)[i] and
# fold_in(key, i) are the Threefry block of (0, i) under the key's words, so NumPy computes
# them bitwise, and wrapping words as a key compiles nothing.


def _host_words(key):
    """The key's two words as NumPy, or None where the host derivation is not JAX's (a key of
    another implementation, JAX's non-partitionable Threefry, or a traced key)."""
    if isinstance(key, jax.core.Tracer) or not jax.config.jax_threefry_partitionable:
        return None
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if str(jax.random.key_impl(key)) != "threefry2x32" or key.shape != ():
            return None
        return np.asarray(jax.random.key_data(key), np.uint32)
    return np.asarray(key, np.uint32) if np.shape(key) == (2,) else None


def _host_blocks(key, counters, as_array=False):
    k0, k1 = _host_words(key)
    with np.errstate(over="ignore"):
        w0, w1 = threefry2x32(k0, k1, np.zeros_like(counters), counters)
    words = np.stack([w0, w1], axis=-1)
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    wrap = (lambda w: jax.random.wrap_key_data(w, impl=jax.random.key_impl(key))) if typed \
        else jax.device_put  # fmt: skip
    # one key at a time: indexing a key array outside jit compiles a slice per shape
    return wrap(words) if as_array else [wrap(w) for w in words]


def host_split(key, num: int = 2, *, as_array: bool = False):
    """``list(jax.random.split(key, num))`` (``as_array``: the array itself), bitwise,
    computed in NumPy: no program compiled. Falls back to ``jax.random.split`` where the
    derivation is not JAX's Threefry's."""
    if _host_words(key) is None:
        keys = jax.random.split(key, num)
        return keys if as_array else list(keys)
    return _host_blocks(key, np.arange(int(num), dtype=np.uint32), as_array)


def host_fold_in(key, data: int):
    """``jax.random.fold_in(key, data)`` for a Python int ``0 <= data < 2**32``, bitwise,
    computed in NumPy (as :func:`host_split`)."""
    if _host_words(key) is None or not 0 <= int(data) < 2**32:
        return jax.random.fold_in(key, data)
    return _host_blocks(key, np.array([int(data)], np.uint32))[0]


def host_key(seed: int):
    """``jax.random.key(seed)`` for a Python int ``0 <= seed < 2**32`` under JAX's default
    Threefry, bitwise (its words are (0, seed)), without compiling JAX's seeding program."""
    seed = int(seed)
    if jax.config.jax_default_prng_impl != "threefry2x32" or not 0 <= seed < 2**32:
        return jax.random.key(seed)
    return jax.random.wrap_key_data(np.array([0, seed], np.uint32), impl="threefry2x32")


def host_uniform(key) -> float:
    """``float(jax.random.uniform(key))`` (one draw in [0, 1) of JAX's default float), bitwise,
    computed in NumPy: the top mantissa bits of its random bits (:func:`_host_bits`) fill a
    float in [1, 2), less 1. Falls back to ``jax.random.uniform`` as :func:`host_split` does."""
    if _host_words(key) is None:
        return float(jax.random.uniform(key))
    if jnp.result_type(float) == jnp.float64:
        mantissa = _host_bits(key, 64) >> 12
        return float(np.array(mantissa | 0x3FF0000000000000, np.uint64).view(np.float64) - 1.0)
    mantissa = _host_bits(key, 32) >> 9
    return float(np.array(mantissa | 0x3F800000, np.uint32).view(np.float32) - np.float32(1.0))


def host_randint(key, minval: int, maxval: int) -> int:
    """``int(jax.random.randint(key, (), minval, maxval))`` for ``minval < maxval`` within JAX's
    default int, bitwise, computed in NumPy (as :func:`host_uniform`): two words of its bit
    width from the key's two subkeys, combined modulo the span as JAX combines them."""
    nbits = 64 if jnp.result_type(int) == jnp.int64 else 32
    if _host_words(key) is None or not -(2 ** (nbits - 1)) <= minval < maxval < 2 ** (nbits - 1):
        return int(jax.random.randint(key, (), minval, maxval))
    k_high, k_low = host_split(key)
    span, mask = maxval - minval, (1 << nbits) - 1
    multiplier = ((2 ** (nbits // 2) % span) ** 2 & mask) % span  # products wrap, as in JAX
    high, low = _host_bits(k_high, nbits), _host_bits(k_low, nbits)
    return minval + (((high % span) * multiplier & mask) + low % span & mask) % span


def _host_bits(key, nbits):
    """JAX's random bits of one draw of ``nbits`` (32 or 64) as a Python int: the Threefry
    block of counter (0, 0) under the key, both words (64) or their XOR (32)."""
    k0, k1 = _host_words(key)
    zero = np.zeros(1, np.uint32)
    with np.errstate(over="ignore"):
        w0, w1 = (int(w[0]) for w in threefry2x32(k0, k1, zero, zero))
    return (w0 << 32) | w1 if nbits == 64 else w0 ^ w1
