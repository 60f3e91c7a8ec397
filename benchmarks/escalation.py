"""What more effort buys on the hard targets: temperatures, leapfrog steps, step-size jitter,
heavier starts.

The measurements behind issue 29's escalation ladder (not built yet): each target through
``ph.hais`` (512 particles, 1000 temperatures unless the row says otherwise), five seeds per
row. A Student-t start sits at the Laplace fit (mode, 1.2² H⁻¹) with the degrees of freedom
named; where the fit fails, at the target's own start.

    python benchmarks/escalation.py --seeds 5 --out docs/escalation.md
"""

from __future__ import annotations

import argparse
import time
import warnings

import _machine
import jax
import numpy as np
from bias_check import banana
from trust import funnel
from trust_heldout import student

import ppl_hais as ph
from ppl_hais.laplace import laplace_gaussian
from ppl_hais.validation import product_of_experts


def configs(target):
    """(label, target, hais keyword arguments, gradients per particle and temperature)."""
    out = [
        ("default", target, {}, 1),
        ("4× temperatures", target, dict(num_steps=4000), 4),
        ("4 leapfrog steps", target, dict(num_leapfrog=4), 4),
        ("step-size jitter 1", target, dict(step_size_jitter=1.0), 1),
        ("step-size jitter 1, 4× temperatures", target,
         dict(step_size_jitter=1.0, num_steps=4000), 4),
    ]
    try:
        fit = laplace_gaussian(target.log_density, np.zeros((1, target.dim)))
        mean, tril = np.asarray(fit.mean), np.asarray(fit.scale_tril)
    except (ValueError, AttributeError, np.linalg.LinAlgError):
        mean, tril = np.zeros(target.dim), np.eye(target.dim)
    for df in (3.0, 1.0):
        q = ph.StudentT(mean, scale_tril=tril, df=df)
        out.append((f"Student-t start, df {df:g}", ph.AnnealingTarget(target.log_density, q),
                    {}, 1))  # fmt: skip
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--out", default="docs/escalation.md")
    args = p.parse_args()
    ph.enable_x64()
    poe = product_of_experts("student", 36)
    cases = {
        "banana 2-D (b = 0.03, N(0, 3²I))": banana(),
        "Student-t 30-D, ν = 2 (N(0, I))": student(30, 2.0),
        "funnel 10-D (N(0, I))": funnel(),
        "Student-t experts 36-D (N(0, I))": (poe.target, poe.log_z),
    }
    lines = [
        "# What more effort buys on the hard targets",
        "",
        f"`python benchmarks/escalation.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · `ph.hais`, 512 particles × 1000 temperatures unless "
        "named, seeds 100 and up",
        "",
        "*right*: |error| ≤ 0.1 nat; *warned*: an `EvidenceWarning` fired; *cost*: gradients "
        "per particle and temperature relative to the default.",
        "",
        "| target | configuration | mean error | sd | right | warned | cost |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, (target, exact) in cases.items():
        for label, t, kw, cost in configs(target):
            errs, warned = [], []
            for s in range(args.seeds):
                run = dict(num_particles=512, num_steps=1000, progress_bar=False)
                run.update(kw)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ph.EvidenceWarning)
                    r = ph.hais(jax.random.key(100 + s), t, **run)
                errs.append(r.log_z - exact)
                warned.append(r.warning)
            e = np.array(errs)
            lines.append(
                f"| {name} | {label} | {e.mean():+.3f} | {e.std():.3f} | "
                f"{int(np.sum(np.abs(e) <= 0.1))}/{args.seeds} | {sum(warned)}/{args.seeds} "
                f"| {cost}× |"
            )
            print(lines[-1], flush=True)
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
