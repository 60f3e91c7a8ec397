"""Cost of the momentum-refresh normals: jax.random.normal vs ppl_hais.mcmc.fast_random.normal
(Threefry-2x32-20 words, written out) vs the integer hash it replaced in stop 55.

    python benchmarks/rng.py [--out docs/rng.md]

(P, D) = (200, 36) standard normals per step inside a jitted lax.scan of 3000 steps, warm,
median of 5 alternating rounds; beside them one vmap(value_and_grad) of the 36-D Laplace POE.
Then whole ``ph.hais`` runs (512 particles, 2000 temperatures) with ``fast_random``'s words and
keys as they are and with the hash put back in their place (recompiled, alternating).
"""

import argparse
import contextlib
import datetime
import time

import _machine
import jax
import jax.numpy as jnp
import numpy as np

import ppl_hais as ph
from ppl_hais import validation as ex
from ppl_hais.mcmc import fast_random as fr

ph.enable_x64()
P, STEPS = 200, 3000
KEY = jax.random.key(7)  # the run's key; the step selects the particles' keys, as in a scan


def scan_timer(body, carry):
    """µs per step of ``body(carry, (key, step))`` in a jitted scan (keys split outside)."""
    steps = jnp.arange(STEPS)
    f = jax.jit(lambda c, k: jax.lax.scan(body, c, (jax.random.split(k, STEPS), steps))[0])
    jax.block_until_ready(f(carry, jax.random.key(0)))

    def timed():
        t = time.perf_counter()
        jax.block_until_ready(f(carry, jax.random.key(1)))
        return (time.perf_counter() - t) / STEPS * 1e6

    return timed


def _lowbias32(x):
    x = (x ^ (x >> 16)) * jnp.uint32(0x7FEB352D)
    x = (x ^ (x >> 15)) * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def hash_bits(key, shape, salt=0):
    """The words fast_random drew until stop 55: a counter hashed with the key's two words by
    three rounds of the lowbias32 mixer (no standard battery vouched for it)."""
    k0, k1 = fr._key_words(key)
    counter = jnp.arange(int(np.prod(shape)), dtype=jnp.uint32).reshape(shape)
    counter = counter + jnp.uint32((salt * 0x9E3779B9) & 0xFFFFFFFF)
    return _lowbias32(_lowbias32(_lowbias32(counter) ^ k0) ^ k1)


def xla_erfinv_normal(key, D):
    """The fast normals before 2026-11-22: hashed bits through XLA's erf_inv."""
    b = hash_bits(key, (D,))
    m = ((b >> 8) & jnp.uint32(0x7FFFFF)).astype(jnp.float32)
    x = (m + jnp.float32(0.5)) * jnp.float32(2.0**-23)
    x = jnp.where((b >> 31) == 1, -x, x)
    return (jnp.float32(np.sqrt(2)) * jax.scipy.special.erfinv(x)).astype(jnp.float64)


@contextlib.contextmanager
def hashed_words():
    """Within the block, ``fast_random`` draws the stop-54 hash's words and keys, recompiled."""
    from ppl_hais.annealing import execution

    saved = fr.bits, fr.split_particles
    fr.bits, fr.split_particles = hash_bits, _hash_split_at
    jax.clear_caches(), execution.compiled.cache_clear()
    try:
        yield
    finally:
        fr.bits, fr.split_particles = saved
        jax.clear_caches(), execution.compiled.cache_clear()


def _hash_split_at(key, num, offset=0, step=None):
    """Stop 54's split_particles: the hashed keys of particles offset … offset + num − 1."""
    k0, k1 = fr._key_words(key)
    if step is not None:
        t = _lowbias32(jnp.asarray(step).astype(jnp.uint32) ^ jnp.uint32(0x85EBCA6B))
        k0, k1 = _lowbias32(k0 ^ t), _lowbias32(k1 + _lowbias32(t ^ jnp.uint32(0xC2B2AE35)))
    idx = jnp.arange(num, dtype=jnp.uint32) + jnp.asarray(offset).astype(jnp.uint32)
    w0 = _lowbias32(idx ^ k0)
    return jax.random.wrap_key_data(jnp.stack([w0, _lowbias32(w0 + k1)], axis=-1))


def whole_runs(rounds=2, reps=7):
    """Median seconds of warm ``ph.hais`` calls per model, words as they are vs hashed."""
    cases = {"36-D Laplace POE": ex.product_of_experts("laplace", 36),
             "10-D Student-t POE": ex.product_of_experts("student", 10)}  # fmt: skip
    times = {(name, mode): [] for name in cases for mode in ("hash", "threefry")}
    for _ in range(rounds):
        for mode in ("hash", "threefry"):
            with hashed_words() if mode == "hash" else contextlib.nullcontext():
                for name, case in cases.items():
                    run = dict(num_particles=512, num_steps=2000, step_size=0.1,
                               progress_bar=False)  # fmt: skip
                    ph.hais(jax.random.key(0), case.target, **run)  # compiles
                    for r in range(reps):
                        t = time.perf_counter()
                        ph.hais(jax.random.key(r + 1), case.target, **run)
                        times[name, mode].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in times.items()}


def timers_for(D):
    x = jnp.zeros((P, D))
    case = ex.product_of_experts("laplace", dim=D)
    vg = jax.vmap(jax.value_and_grad(case.target.log_density))
    return {
        "jax.random.normal, float64 (threefry)": scan_timer(
            lambda c, kn: (c + jax.random.normal(kn[0], (P, D)), None), x
        ),
        "jax.random.normal, float32 (threefry)": scan_timer(
            lambda c, kn: (c + jax.random.normal(kn[0], (P, D), jnp.float32), None), x
        ),
        "per-particle keys, hash + XLA's float32 erf_inv (before 2026-11-22)": scan_timer(
            lambda c, kn: (
                c + jax.vmap(lambda kk: xla_erfinv_normal(kk, D))(
                    _hash_split_at(KEY, P, step=kn[1])),
                None,
            ),
            x,
        ),
        "per-particle keys, hash + Giles' erfinv written out (2026-11-22 to stop 54)": scan_timer(
            lambda c, kn: (
                c + jax.vmap(lambda kk: fr.normal_from_bits(hash_bits(kk, (D,)), c.dtype))(
                    _hash_split_at(KEY, P, step=kn[1])),
                None,
            ),
            x,
        ),
        "fast_random.normal (Threefry-2x32-20 keys and words + Giles' erfinv; stop 55)": scan_timer(
            lambda c, kn: (
                c + jax.vmap(lambda kk: fr.normal(kk, (D,)))(
                    fr.split_particles(KEY, P, step=kn[1])),
                None,
            ),
            x,
        ),
        "vmap(value_and_grad) of the D-dim Laplace POE (for scale)": scan_timer(
            lambda c, kn: (c + 1e-12 * vg(c)[1], None), x
        ),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dims = [36, 10]
    cols = []
    for D in dims:
        timers = timers_for(D)
        res = {k: [] for k in timers}
        for _ in range(5):
            for k, f in timers.items():
                res[k].append(f())
        cols.append({k: np.median(v) for k, v in res.items()})
    lines = [
        "# Random numbers for the momentum refresh",
        "",
        f"Command: `python benchmarks/rng.py`; {datetime.date.today().isoformat()}; "
        f"{_machine.describe()}.",
        "",
        f"µs per step for {P}×D draws (median of 5 warm rounds, {STEPS}-step scans).",
        "",
        "| what | " + " | ".join(f"D = {D}" for D in dims) + " |",
        "|---|" + "---|" * len(dims),
    ]
    for k in cols[0]:
        lines.append(f"| {k} | " + " | ".join(f"{c[k]:.1f}" for c in cols) + " |")
    runs = whole_runs()
    lines += ["", "Whole `ph.hais` runs, 512 particles × 2000 temperatures, seconds (median of 7 "
              "warm calls in each of 2 alternating rounds; the hash's words and keys put back into "
              "`fast_random` and recompiled for its rounds):", "",
              "| model | hash (stop 54) | Threefry-2x32-20 (stop 55) | ratio |",
              "|---|---|---|---|"]
    for name in dict.fromkeys(n for n, _ in runs):
        a, b = runs[name, "hash"], runs[name, "threefry"]
        lines.append(f"| {name} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        _machine.write(args.out, text)


if __name__ == "__main__":
    main()
