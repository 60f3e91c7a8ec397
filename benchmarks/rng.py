"""Cost of the momentum-refresh normals: jax.random.normal vs ppl_hais.random.normal.

    python benchmarks/rng.py [--out docs/rng.md]

(P, D) = (200, 36) standard normals per step inside a jitted lax.scan of 3000 steps, warm,
median of 5 alternating rounds; beside them one vmap(value_and_grad) of the 36-D Laplace POE.
"""

import argparse
import datetime
import time

import jax
import jax.numpy as jnp
import numpy as np

import ppl_hais as ph
from ppl_hais import examples as ex
from ppl_hais import random as fr

ph.enable_x64()
P, D, STEPS = 200, 36, 3000


def scan_timer(body, carry):
    f = jax.jit(lambda c, k: jax.lax.scan(body, c, jax.random.split(k, STEPS))[0])
    jax.block_until_ready(f(carry, jax.random.key(0)))

    def timed():
        t = time.perf_counter()
        jax.block_until_ready(f(carry, jax.random.key(1)))
        return (time.perf_counter() - t) / STEPS * 1e6

    return timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    x = jnp.zeros((P, D))
    case = ex.product_of_experts("laplace", dim=D)
    vg = jax.vmap(jax.value_and_grad(case.target.log_density))
    timers = {
        "jax.random.normal, float64 (threefry)": scan_timer(
            lambda c, k: (c + jax.random.normal(k, (P, D)), None), x
        ),
        "jax.random.normal, float32 (threefry)": scan_timer(
            lambda c, k: (c + jax.random.normal(k, (P, D), jnp.float32), None), x
        ),
        "ppl_hais.random.normal (per-particle keys, hash + float32 erfinv)": scan_timer(
            lambda c, k: (
                c + jax.vmap(lambda kk: fr.normal(kk, (D,)))(fr.split_particles(k, P)),
                None,
            ),
            x,
        ),
        "vmap(value_and_grad) of the 36-D Laplace POE": scan_timer(
            lambda c, k: (c + 1e-12 * vg(c)[1], None), x
        ),
    }
    res = {k: [] for k in timers}
    for _ in range(5):
        for k, f in timers.items():
            res[k].append(f())
    lines = [
        "# Random numbers for the momentum refresh",
        "",
        f"Command: `python benchmarks/rng.py`; {datetime.date.today().isoformat()}; "
        f"{jax.devices()[0].platform}, jax {jax.__version__}.",
        "",
        f"µs per step for {P}×{D} draws (median of 5 warm rounds, {STEPS}-step scans).",
        "",
        "| what | µs per step |",
        "|---|---|",
    ]
    for k, v in res.items():
        lines.append(f"| {k} | {np.median(v):.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
