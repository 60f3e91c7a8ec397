"""CPU cores as XLA host devices against particle groups on threads, and 1 vs k devices.

Each configuration runs in its own process (the number of host devices is fixed when JAX
starts: ``XLA_FLAGS=--xla_force_host_platform_device_count=k``): warm ``ph.hais`` on the 36-D
product of Laplace experts and a 20-D Bayesian regression, at 200 and 1,000 particles × 2,000
temperatures. *threads*: one device, the driver's particle groups on threads (the CPU
default); *one group*: one device, ``PPL_HAIS_CPU_THREADS=1``; *k devices*: the particles
sharded over k host devices (``devices=jax.devices()``), k = the number of cores and 4. Beside
them, the limit of the whole call: one ``vmap(value_and_grad)`` plus a step's random draws
(``benchmarks/speed.py``'s ``time_limit``, one thread) for each of the main run's 2,000
temperatures and each of the pilot's 1,100 steps on 64 particles. Also checks that the log
weights are identical across the splits (same key).

    python benchmarks/devices.py --out docs/devices.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import _machine

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[2])
import jax, jax.numpy as jnp, numpy as np
import ppl_hais as ph
from speed import time_limit
from ppl_hais.validation import product_of_experts
sharded = sys.argv[1] == "sharded"
rng = np.random.default_rng(5)
X = rng.normal(size=(50, 20)); y = X @ rng.normal(size=20) + rng.normal(size=50)
cases = {
    "36-D Laplace POE": product_of_experts("laplace", 36).target,
    "20-D regression": ph.AnnealingTarget(
        initial=ph.Gaussian(np.zeros(20)),
        log_likelihood=lambda w: -0.5 * jnp.sum((jnp.asarray(y) - jnp.asarray(X) @ w) ** 2)),
}
out = {}
for name, target in cases.items():
    for p in (200, 1000):
        kw = dict(num_particles=p, num_steps=2000, progress_bar=False,
                  devices=jax.devices() if sharded else jax.devices()[:1])
        ph.hais(jax.random.key(0), target, **kw)
        times = []
        for _ in range(3):
            t = time.perf_counter(); r = ph.hais(jax.random.key(0), target, **kw)
            times.append(time.perf_counter() - t)
        main, pilot = time_limit(target, p, 2000), time_limit(target, 64, 1100)
        limit = 2000 * min(main() for _ in range(3)) + 1100 * min(pilot() for _ in range(3))
        out[f"{name}|{p}"] = dict(time=min(times), lw=r.log_weights[:8].tolist(), limit=limit)
print(json.dumps(out))
"""


def run(env_extra, mode):
    env = dict(os.environ, **env_extra)
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, here], env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/devices.md")
    args = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    configs = {
        "threads (default)": ({}, "one"),
        "one group": ({"PPL_HAIS_CPU_THREADS": "1"}, "one"),
        **{
            f"{k} host devices": (
                {"XLA_FLAGS": f"--xla_force_host_platform_device_count={k}"}, "sharded"
            )
            for k in sorted({cores, 4})
        },
    }
    results = {name: run(env, mode) for name, (env, mode) in configs.items()}
    keys = list(next(iter(results.values())))
    diff = max(
        abs(a - b)
        for n in results
        for k in keys
        for a, b in zip(results[n][k]["lw"], results["threads (default)"][k]["lw"], strict=True)
    )

    lines = [
        "# CPU cores: XLA host devices or particle groups on threads",
        "",
        f"`python benchmarks/devices.py` · {_machine.describe()} · Python "
        f"{sys.version.split()[0]} · {time.strftime('%Y-%m-%d')} · "
        "warm `ph.hais`, 2,000 temperatures, best of 3 (seconds)",
        "",
        "| target | particles | " + " | ".join(results) + " | limit, one thread "
        "| default / limit |",
        "|---|---|" + "---|" * (len(results) + 2),
    ]
    for k in keys:
        name, n = k.split("|")
        limit = results["threads (default)"][k]["limit"]
        lines.append(
            f"| {name} | {n} | "
            + " | ".join(f"{results[c][k]['time']:.2f}" for c in results)
            + f" | {limit:.2f} | {results['threads (default)'][k]['time'] / limit:.2f} |"
        )
    lines += [
        "",
        "- largest difference of a log weight between the splits (same key; floating-point "
        f"rounding of the grouped reductions): {diff:.1e}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    _machine.write(args.out, text)


if __name__ == "__main__":
    main()
