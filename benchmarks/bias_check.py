"""The bias check and the recalibrated checks on the trust suite's hard models, default calls.

Every model goes through the evidence workflow the adapters call
(``ppl_hais.workflow.evidence.evidence``: initial="auto", 512 particles × 1000 temperatures — fixed,
the ladder's first rung (benchmarks/ladder.py runs the ladder) — ``bias_check="auto"``);
targets without a prior/likelihood split are given their stated start
as the "prior". Per model and seed: the error against the exact log Z, the reported SE, the
bias check's gap (reverse anneal from MCMC draws minus the estimate, NaN where it did not run),
whether an EvidenceWarning fired, and gradients in all (pilots, main run, bias check).

    python benchmarks/bias_check.py --seeds 10 --out docs/bias_check.md
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import _machine
import jax
import numpy as np
from trust import Model, eight_schools, funnel, mixture, regression
from trust_heldout import student

import ppl_hais as ph
from ppl_hais.model.validation import product_of_experts
from ppl_hais.workflow.evidence import evidence


def as_model(target, prior=None):
    """A target with an initial distribution as a Bayesian model: prior = the initial, or
    ``prior`` (a distribution with ``log_prob`` and ``sample``), likelihood = target / prior.

    A target with tails as heavy as a Student-t's of ½ degree of freedom (the experts) puts
    draws at |z| of 1e8, where a N(0, I) prior's log density (−5e16) and the target less it
    cancel to within float64's spacing there: its likelihood gets a Cauchy prior, whose log
    density grows as 2 log |z|."""
    q = target.initial if prior is None else prior

    def log_lik(z):
        return target.log_density(z) - q.log_prob(z)

    return Model(target.dim, q.log_prob, log_lik, q.sample)


def cauchy(dim):
    return ph.IndependentStudentT(np.zeros(dim), 1.0, df=1.0)


def banana(b=0.03, sd1=10.0):
    """Twisted Gaussian (Haario et al.): x1 ~ N(0, 10²), x2 | x1 ~ N(b(x1² − 100), 1); Z = 1."""

    def log_density(z):
        y2 = z[1] - b * (z[0] ** 2 - sd1**2)
        return (-0.5 * (z[0] / sd1) ** 2 - 0.5 * y2**2 - math.log(2 * math.pi * sd1))

    return ph.AnnealingTarget(log_density, ph.Gaussian(np.zeros(2), 3.0)), 0.0


def cases():
    poe = product_of_experts("student", 36)
    return {
        # name: (model, exact, note)
        "regression 20-D": (*regression(20, 50, 1.0, seed=5), "easy: N(0, 1) prior"),
        "eight schools (centered)": (*eight_schools(), "funnel geometry, prior start"),
        "funnel 10-D": (as_model(funnel()[0]), funnel()[1], "Neal's, from N(0, I)"),
        "two-mode mixture 5-D": (as_model(mixture()[0]), mixture()[1], "modes ±4, N(0, 3²I)"),
        "banana 2-D": (as_model(banana()[0]), banana()[1], "b = 0.03, from N(0, 3²I)"),
        "Student-t 30-D, ν = 2": (as_model(student(30, 2.0)[0]), student(30, 2.0)[1], "N(0, I)"),
        "Student-t experts 36-D": (as_model(poe.target, cauchy(36)), poe.log_z,
                                   "λ 0.75..3, Cauchy(0, 1) prior"),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", default="docs/bias_check.md")
    p.add_argument("--only", default=None, help="run the models whose name contains this")
    args = p.parse_args()
    ph.enable_x64()
    rows = []
    for name, (model, exact, note) in cases().items():
        if args.only and args.only not in name:
            continue
        runs = []
        for s in range(args.seeds):
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ph.EvidenceWarning)
                ev = evidence(jax.random.key(200 + s), model, num_steps=1000, progress_bar=False)
            err = ev.log_z - exact
            runs.append(dict(
                err=err, se=ev.log_z_se, gap=ev.bias_gap, warned=ev.warning,
                bennett=float("nan") if ev.bias is None else ev.bias.log_z_bennett - exact,
                bias_warned=any(c.name == "bias" for c in ev.checks),
                checks=sorted({c.name for c in ev.checks}),
                grads=ev.gradients, wall=time.perf_counter() - t0, initial=ev.initial,
                redrawn=ev.bias is not None and ev.bias.redrawn,
                broken=ev.bias is not None and ev.bias.broken,
            ))  # fmt: skip
        err = np.array([r["err"] for r in runs])
        se = np.array([r["se"] for r in runs])
        warned = np.array([r["warned"] for r in runs])
        right = np.abs(err) <= 0.1
        miss = np.abs(err) > 3 * se + 0.05
        gaps = np.array([r["gap"] for r in runs])
        ran = np.isfinite(gaps)
        covered = [abs(e) <= g + 0.1 for e, g, w in zip(err, gaps, warned, strict=True) if w]
        checks = sorted({c for r in runs for c in r["checks"]})
        both = np.array([r["bennett"] for r in runs])[ran]
        rows.append(dict(
            bennett=f"{both.mean():+.3f} ({both.std():.3f})" if ran.any() else "—",
            bennett_right=f"{int(np.sum(np.abs(both) <= 0.1))}/{int(ran.sum())}",
            checked_right=f"{int(np.sum(right[ran]))}/{int(ran.sum())}",
            name=name, note=note, err=err.mean(), err_sd=err.std(), se=np.median(se),
            gap=np.median(gaps[ran]) if ran.any() else float("nan"), ran=int(ran.sum()),
            right=int(right.sum()), warned=int(warned.sum()),
            false_alarms=int(np.sum(right & warned)), silent=int(np.sum(miss & ~warned)),
            bias_warned=sum(r["bias_warned"] for r in runs),
            covered=f"{sum(covered)}/{len(covered)}",
            checks=", ".join(checks) or "—", grads=np.mean([r["grads"] for r in runs]),
            wall=np.median([r["wall"] for r in runs]), seeds=args.seeds,
            initial=",".join(sorted({r["initial"] for r in runs})),
            redrawn=sum(r["redrawn"] for r in runs), broken=sum(r["broken"] for r in runs),
        ))  # fmt: skip
        r = rows[-1]
        print(f"{name}: err {r['err']:+.3f}±{r['err_sd']:.3f} se {r['se']:.3f} gap {r['gap']:.3f} "
              f"ran {r['ran']} right {r['right']} warned {r['warned']} false {r['false_alarms']} "
              f"silent {r['silent']} bias {r['bias_warned']} covered {r['covered']} "
              f"bennett {r['bennett']} {r['bennett_right']} vs {r['checked_right']} "
              f"[{r['checks']}] redrawn {r['redrawn']} broken {r['broken']} "
              f"{r['grads'] / 1e6:.2f} M grads {r['wall']:.2f} s",
              flush=True)  # fmt: skip
    write(args, rows)


def write(args, rows):
    lines = [
        "# The bias check: a reverse anneal from MCMC draws, on the hard models",
        "",
        f"`python benchmarks/bias_check.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · `ppl_hais.workflow.evidence.evidence` defaults "
        "(initial='auto', 512 particles × 1000 temperatures, `bias_check='auto'`), seeds 200 "
        "and up",
        "",
        "*right*: |error| ≤ 0.1 nat; *false alarms*: right and warned; *silent*: |error| > "
        "3 SE + 0.05 without a warning; *gap*: median of the bias check's reverse estimate minus "
        "the estimate, over the runs it checked (*checked*); *bias warned*: runs whose `bias` "
        "check fired; *gap covers*: warned runs whose |error| ≤ gap + 0.1; *gradients*: mean per "
        "call, pilots and the bias check included; *Bennett*: over the checked runs, the error "
        "of Bennett's bridge of the check's forward and reverse weights "
        "(`BiasCheck.log_z_bennett`: reported, not used by any decision), and how many of them "
        "it puts within 0.1 nat, beside how many the estimate itself does; *redrawn / could "
        "not run*: checks whose MCMC draws gave a reverse estimate below the estimate and were "
        "redrawn by the anneal's own transition, and checks still below after that "
        "(`BiasCheck.redrawn`, `BiasCheck.broken`).",
        "",
        "| model | start | mean error (sd) | median SE | checked | median gap | right | warned "
        "| false alarms | silent | bias warned | gap covers | Bennett: mean error (sd) "
        "| Bennett right / estimate right (checked) | redrawn / could not run "
        "| checks that fired | gradients | median time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} ({r['note']}) | {r['initial']} | {r['err']:+.3f} ({r['err_sd']:.3f}) "
            f"| {r['se']:.3f} | {r['ran']}/{r['seeds']} | {r['gap']:.3f} | {r['right']} "
            f"| {r['warned']} | {r['false_alarms']} | {r['silent']} | {r['bias_warned']} "
            f"| {r['covered']} | {r['bennett']} | {r['bennett_right']} / {r['checked_right']} "
            f"| {r['redrawn']} / {r['broken']} | {r['checks']} | {r['grads'] / 1e6:.2f} M "
            f"| {r['wall']:.2f} s |"
        )
    right = sum(r["right"] for r in rows)
    false = sum(r["false_alarms"] for r in rows)
    silent = sum(r["silent"] for r in rows)
    total = sum(r["seeds"] for r in rows)
    lines += [
        "",
        f"Over {total} runs: {silent} silent misses; {false} false alarms of {right} right runs.",
    ]
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
