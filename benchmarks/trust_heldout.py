"""Held-out check of the trust checks: models that played no part in choosing their thresholds.

The lag check's thresholds (ρ ≥ 0.2, or ≥ 0.1 with k̂ ≥ 0.3; outside fraction ≥ 0.1) were
chosen on the models of ``benchmarks/trust.py``. This script runs ``ph.hais`` with its
defaults (512 particles × 1000 temperatures, N(0, I) start) on eleven other targets with exact
log Z, other seeds, and counts silent misses (|error| > 3 SE + 0.05 without a warning) and
warnings on runs that were right.

    python benchmarks/trust_heldout.py --seeds 10 --out docs/trust_heldout.md
"""

from __future__ import annotations

import argparse
import time
import warnings

import _machine
import jax
import numpy as np
from _models import funnel, laplace, scaled_gaussian, student

import ppl_hais as ph


def cases():
    return {
        "Gaussian 10-D, sd 3": scaled_gaussian(10, 3.0),
        "Gaussian 10-D, sd 10": scaled_gaussian(10, 10.0),
        "Gaussian 50-D, sd 3": scaled_gaussian(50, 3.0),
        "Gaussian 20-D, sd 0.1": scaled_gaussian(20, 0.1),
        "Cauchy 10-D": student(10, 1.0),
        "Student-t 10-D, ν = 3": student(10, 3.0),
        "Student-t 10-D, ν = 10": student(10, 10.0),
        "Student-t 30-D, ν = 2": student(30, 2.0),
        "funnel 5-D, sd(v) = 2": funnel(5, 2.0),
        "funnel 20-D, sd(v) = 3": funnel(20, 3.0),
        "Laplace 20-D, b = 2": laplace(20, 2.0),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", default="docs/trust_heldout.md")
    args = p.parse_args()
    ph.enable_x64()
    lines = [
        "# Trust checks on held-out models",
        "",
        f"`python benchmarks/trust_heldout.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · `ph.hais` defaults, 512 particles × 1000 temperatures, "
        "N(0, I) start, seeds 100 and up",
        "",
        "None of these models was used to choose the checks' thresholds (docs/trust.md's were). "
        "*miss*: |error| > 3 SE + 0.05; *silent*: a miss without an `EvidenceWarning` (goal: 0). "
        "*lag*, *outside*: medians of `AISResult.lag` and `outside_initial`.",
        "",
        "| model | mean error | misses | warned | silent misses | warned but right | lag "
        "| outside |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total = silent_total = 0
    for name, (target, exact) in cases().items():
        rows = []
        for s in range(args.seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ph.EvidenceWarning)
                r = ph.hais(jax.random.key(100 + s), target, num_particles=512, num_steps=1000,
                            progress_bar=False)  # fmt: skip
            err = r.log_z - exact
            miss = abs(err) > 3 * r.log_z_se + 0.05
            rows.append((err, miss, r.warning, r.lag, r.outside_initial))
        err, miss, warned, lag, out = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
        silent = int(np.sum((miss == 1) & (warned == 0)))
        total, silent_total = total + args.seeds, silent_total + silent
        lines.append(
            f"| {name} | {err.mean():+.3f} | {int(miss.sum())} | {int(warned.sum())}/{args.seeds} "
            f"| {silent} | {int(np.sum((miss == 0) & (warned == 1)))} | {np.median(lag):.2f} | "
            f"{np.median(out):.2f} |"
        )
        print(lines[-1], flush=True)
    lines += ["", f"Silent misses: {silent_total} of {total} runs."]
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
