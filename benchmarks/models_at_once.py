"""The models of a comparison at once, or one after another? (issue 19, on this CPU)

    python benchmarks/models_at_once.py > docs/models_at_once.md

Two models of different structure (a 36-D product of Laplace experts and a 20-D Bayesian
regression) cannot share one compiled program, so "at once" means two `ph.hais` calls
dispatched from two threads; each call still splits its particles into its own groups
(the default), or runs as one group (`PPL_HAIS_CPU_THREADS=1`, set before the run).
Warm calls, best of 3, 2,000 temperatures.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import _machine  # noqa: E402

import ppl_hais as ph  # noqa: E402
from ppl_hais.precision import in_thread  # noqa: E402
from ppl_hais.validation import product_of_experts  # noqa: E402

warnings.simplefilter("ignore")
rng = np.random.default_rng(5)
X = rng.normal(size=(50, 20))
y = X @ rng.normal(size=20) + rng.normal(size=50)
TARGETS = [
    product_of_experts("laplace", 36).target,
    ph.AnnealingTarget(
        initial=ph.Gaussian(np.zeros(20)),
        log_likelihood=lambda w: -0.5 * jnp.sum((jnp.asarray(y) - jnp.asarray(X) @ w) ** 2),
    ),
]


def one(target, particles):
    return ph.hais(jax.random.key(0), target, num_particles=particles, num_steps=2000,
                   progress_bar=False)  # fmt: skip


def best(fn):
    fn()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    rows = []
    for groups in ("default", "1"):
        if groups == "1":
            os.environ["PPL_HAIS_CPU_THREADS"] = "1"
        else:
            os.environ.pop("PPL_HAIS_CPU_THREADS", None)
        for particles in (200, 1000):
            seq = best(lambda p=particles: [one(t, p) for t in TARGETS])
            pool = ThreadPoolExecutor(len(TARGETS))

            def together(p=particles, pool=pool):
                jobs = [pool.submit(in_thread(lambda t=t: one(t, p))) for t in TARGETS]
                return [j.result() for j in jobs]

            par = best(together)
            rows.append((groups, particles, seq, par))
    lines = [
        "# The models of a comparison: at once or one after another",
        "",
        f"`python benchmarks/models_at_once.py` · {_machine.describe()} · Python "
        f"{sys.version.split()[0]} · {datetime.date.today()} · two models (36-D Laplace POE, "
        "20-D regression), warm `ph.hais`, 2,000 temperatures, best of 3 (seconds)",
        "",
        "| particle groups per call | particles | one after another | at once (two threads) "
        "| speed-up |",
        "|---|---|---|---|---|",
    ]
    for groups, p, seq, par in rows:
        lines.append(f"| {groups} | {p} | {seq:.2f} | {par:.2f} | {seq / par:.2f}× |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
