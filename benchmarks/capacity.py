"""What the schedule's padded capacity costs a run: 8192 against 16,384, paired in one process.

The annealing program takes the schedule padded to ``execution.MIN_CAPACITY`` (16,384 since
stop 71, so that every rung of the convergence ladder shares one program; 8192 before for the
standard transition). Both capacities are compiled first; then ``ph.hais`` calls alternate
between them, pair by pair with the order switched each pair, and the report gives each
capacity's median and the median of the paired differences.

    python benchmarks/capacity.py [--pairs 40] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np

import ppl_hais as ph
from ppl_hais.annealing import execution

CASES = [(5, 512, 250), (5, 128, 250), (5, 64, 100)]  # (dimension, particles, temperatures)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=40)
    p.add_argument("--out", default=None, help="write the table here (default: print it)")
    args = p.parse_args()
    warnings.simplefilter("ignore")  # short runs of a 5-D Gaussian: the checks are not the point
    lines = [
        "# The schedule's capacity: what a run pays for 16,384 against 8192",
        "",
        f"Command: `python benchmarks/capacity.py --pairs {args.pairs}`  ",
        f"Machine: {_machine.describe()}; {datetime.date.today()}.",
        "",
        "| dimension | particles | temperatures | 8192: median ms | 16,384: median ms "
        "| paired difference: median ms |",
        "|---|---|---|---|---|---|",
    ]
    default = execution.MIN_CAPACITY
    try:
        for dim, particles, steps in CASES:
            target = ph.AnnealingTarget(
                log_density=lambda z: -0.5 * jnp.sum(((z - 1.0) / 0.5) ** 2),
                initial=ph.Gaussian(jnp.zeros(dim)),
            )
            opts = dict(num_particles=particles, num_steps=steps, progress_bar=False)
            times = {8192: [], 16384: []}
            for cap in times:  # compile both, and warm them
                execution.MIN_CAPACITY = cap
                for _ in range(2):
                    ph.hais(jax.random.key(0), target, **opts)
            for i in range(args.pairs):
                for cap in (8192, 16384) if i % 2 else (16384, 8192):
                    execution.MIN_CAPACITY = cap
                    start = time.perf_counter()
                    ph.hais(jax.random.key(i), target, **opts)
                    times[cap].append(time.perf_counter() - start)
            a, b = (np.array(times[c]) * 1e3 for c in (8192, 16384))
            lines.append(f"| {dim} | {particles} | {steps} | {np.median(a):.1f} | "
                         f"{np.median(b):.1f} | {np.median(b - a):+.1f} |")  # fmt: skip
            print(lines[-1], flush=True)
    finally:
        execution.MIN_CAPACITY = default
    _machine.report(args.out, lines)


if __name__ == "__main__":
    main()
