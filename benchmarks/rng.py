"""Cost of the momentum-refresh normals: jax.random.normal vs ppl_hais.mcmc.fast_random.normal.

    python benchmarks/rng.py [--out docs/rng.md]

(P, D) = (200, 36) standard normals per step inside a jitted lax.scan of 3000 steps, warm,
median of 5 alternating rounds; beside them one vmap(value_and_grad) of the 36-D Laplace POE.
"""

import argparse
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


def scan_timer(body, carry):
    f = jax.jit(lambda c, k: jax.lax.scan(body, c, jax.random.split(k, STEPS))[0])
    jax.block_until_ready(f(carry, jax.random.key(0)))

    def timed():
        t = time.perf_counter()
        jax.block_until_ready(f(carry, jax.random.key(1)))
        return (time.perf_counter() - t) / STEPS * 1e6

    return timed


def xla_erfinv_normal(key, D):
    """The previous ppl_hais.mcmc.fast_random.normal: the same bits through XLA's erf_inv."""
    b = fr.bits(key, (D,))
    m = ((b >> 8) & jnp.uint32(0x7FFFFF)).astype(jnp.float32)
    x = (m + jnp.float32(0.5)) * jnp.float32(2.0**-23)
    x = jnp.where((b >> 31) == 1, -x, x)
    return (jnp.float32(np.sqrt(2)) * jax.scipy.special.erfinv(x)).astype(jnp.float64)


def timers_for(D):
    x = jnp.zeros((P, D))
    case = ex.product_of_experts("laplace", dim=D)
    vg = jax.vmap(jax.value_and_grad(case.target.log_density))
    return {
        "jax.random.normal, float64 (threefry)": scan_timer(
            lambda c, k: (c + jax.random.normal(k, (P, D)), None), x
        ),
        "jax.random.normal, float32 (threefry)": scan_timer(
            lambda c, k: (c + jax.random.normal(k, (P, D), jnp.float32), None), x
        ),
        "per-particle keys, hash + XLA's float32 erf_inv (before 2026-11-22)": scan_timer(
            lambda c, k: (
                c + jax.vmap(lambda kk: xla_erfinv_normal(kk, D))(fr.split_particles(k, P)),
                None,
            ),
            x,
        ),
        "fast_random.normal (per-particle keys, hash + Giles' erfinv written out)": scan_timer(
            lambda c, k: (
                c + jax.vmap(lambda kk: fr.normal(kk, (D,)))(fr.split_particles(k, P)),
                None,
            ),
            x,
        ),
        "vmap(value_and_grad) of the D-dim Laplace POE (for scale)": scan_timer(
            lambda c, k: (c + 1e-12 * vg(c)[1], None), x
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
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        _machine.write(args.out, text)


if __name__ == "__main__":
    main()
