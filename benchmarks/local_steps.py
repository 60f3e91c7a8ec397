"""Per-particle step sizes (``local_steps=True``) against the tuned population step size, on the
trust suite's models whose densities are written in JAX (``benchmarks/trust_suite.py``).

Each model anneals from its prior (a N(0, prior_sd² I)) through ``ph.hais`` at fixed numbers of
temperatures, 512 particles, the same seeds for both kernels; the error is against the exact
log evidence. Writes docs/local_steps.md.

    python benchmarks/local_steps.py [--seeds 20] [--steps 1000 4000 16000] [--only funnel]
"""

import argparse
import os
import sys
import time
import warnings
from datetime import date

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402
import trust_suite  # noqa: E402

import ppl_hais as ph  # noqa: E402

RIGHT = 0.1  # nats, the trust suite's


def run(case, num_steps, local, seed):
    log_prior, log_lik, dim, prior_sd = case["jax"]
    target = ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(dim), prior_sd),
                                log_likelihood=log_lik)  # fmt: skip
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ph.hais(jax.random.key(700 + seed), target, num_particles=512,
                      num_steps=num_steps, local_steps=local, progress_bar=False)  # fmt: skip
    return (res.log_z - case["exact"], res.log_z_se, time.perf_counter() - start,
            float(np.mean(res.trace.acceptance_rate)))  # fmt: skip


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--only", default=None, help="comma-separated parts of model names")
    parser.add_argument("--out", default="docs/local_steps.md")
    args = parser.parse_args()
    cases = {n: c for n, c in trust_suite.cases().items() if c["jax"] is not None}
    if args.only:
        cases = {n: c for n, c in cases.items() if any(p in n for p in args.only.split(","))}
    rows = []
    for name, case in cases.items():
        for num_steps in args.steps:
            cells = []
            for local in (False, True):
                run(case, num_steps, local, 0)  # compile
                out = np.array([run(case, num_steps, local, s) for s in range(args.seeds)])
                err, se, secs, acc = out.T
                cells.append((err, se, secs, acc))
                print(name, num_steps, "local" if local else "tuned", f"{err.mean():+.3f}",
                      f"right {np.sum(np.abs(err) <= RIGHT)}/{args.seeds}", flush=True)
            rows.append((name, num_steps, cells))
    lines = [
        "# Per-particle step sizes against the tuned step size",
        "",
        f"`python benchmarks/local_steps.py {' '.join(sys.argv[1:])}` · "
        f"{_machine.describe()} · {date.today()} · "
        "`ph.hais(..., num_particles=512, num_steps=N, local_steps=...)` from each model's "
        "N(0, prior_sd² I) prior, seeds 700 and up (the same for both kernels).",
        "",
        "*tuned*: the default HAIS transition, one step size per temperature for the whole "
        "population (the pilot's, frozen); *local*: `local_steps=True`, that step size times "
        "(√D / ‖s ⊙ ∇log π_β(z)‖)^½ e^{σξ} per particle and transition, σ = ½, exact by a "
        "Metropolis correction. *right*: |error| ≤ 0.1 nat. *time*: median seconds per call "
        "(the pilot included, compiling excluded).",
        "",
        "| model | N | tuned: mean error (sd) | right | median SE | time | local: mean error "
        "(sd) | right | median SE | time | time ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, num_steps, ((e0, s0, t0, _), (e1, s1, t1, _)) in rows:
        def cell(e, s, t):
            return (f"{e.mean():+.3f} ({e.std():.3f}) | {np.sum(np.abs(e) <= RIGHT)}/{len(e)} | "
                    f"{np.median(s):.3f} | {np.median(t):.2f} s")  # fmt: skip

        lines.append(f"| {name} | {num_steps} | {cell(e0, s0, t0)} | {cell(e1, s1, t1)} | "
                     f"{np.median(t1) / np.median(t0):.2f} |")  # fmt: skip
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
