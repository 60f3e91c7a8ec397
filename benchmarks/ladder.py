"""The convergence ladder against the fixed 1000 temperatures, on the trust suite's hard models.

Every model goes through the evidence workflow the adapters call
(``ppl_hais.workflow.evidence.evidence``, initial="auto", 512 particles, ``bias_check="auto"``),
twice per seed: ``num_steps=1000`` (one run of a fixed budget) and the default ``num_steps=None``
(the ladder: 250, 1000, 4000, 16,000 temperatures while a check fails and no rung's bridge ends it,
within the default ``max_gradients``, 160× the first rung's run). Per model: the error against
the exact log Z, right (|error| ≤ 0.1), warned, false alarms (right and warned), silent misses
(|error| > 3 SE + 0.05 without a warning), whether the stated shortfall covers the error of the
warned runs (|error| ≤ shortfall + 0.1; the ladder's ``converged`` check), the rung it ended on,
every gradient the call spent (``Evidence.gradients``: pilots, Laplace fit, rungs, bias checks)
and the wall time.

    python benchmarks/ladder.py --seeds 10 --out docs/ladder.md
"""

from __future__ import annotations

import argparse
import collections
import time
import warnings

import _machine
import jax
import numpy as np
from bias_check import cases

import ppl_hais as ph
from ppl_hais.workflow.evidence import evidence

MODES = {"fixed 1000": dict(num_steps=1000), "ladder (default)": {}}


def run(model, exact, seed, kwargs):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ph.EvidenceWarning)
        ev = evidence(jax.random.key(300 + seed), model, progress_bar=False, **kwargs)
    return dict(
        err=ev.log_z - exact, se=ev.log_z_se, warned=ev.warning, steps=ev.num_steps,
        short=ev.shortfall if len(ev.trajectory) > 1 or ev.bias is not None else np.nan,
        grads=ev.gradients, wall=time.perf_counter() - t0,
    )  # fmt: skip


def summarize(name, mode, runs):
    err = np.array([r["err"] for r in runs])
    se = np.array([r["se"] for r in runs])
    warned = np.array([r["warned"] for r in runs])
    right = np.abs(err) <= 0.1
    miss = np.abs(err) > 3 * se + 0.05
    short = np.array([r["short"] for r in runs])
    wrong_warned = warned & ~right
    covered = np.abs(err) <= np.nan_to_num(short, nan=0.0) + 0.1
    steps = collections.Counter(r["steps"] for r in runs)
    return dict(
        name=name, mode=mode, err=err.mean(), sd=err.std(), right=int(right.sum()),
        warned=int(warned.sum()), false=int(np.sum(right & warned)),
        silent=int(np.sum(miss & ~warned)),
        covered=f"{int(np.sum(covered & wrong_warned))}/{int(wrong_warned.sum())}",
        steps=", ".join(f"{n}×{k}" for k, n in sorted(steps.items())),
        grads=np.mean([r["grads"] for r in runs]), wall=np.median([r["wall"] for r in runs]),
        n=len(runs),
    )  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", default="docs/ladder.md")
    p.add_argument("--only", default=None, help="run the models whose name contains this")
    args = p.parse_args()
    ph.enable_x64()
    rows = []
    for name, (model, exact, _) in cases().items():
        if args.only and args.only not in name:
            continue
        for mode, kwargs in MODES.items():
            runs = [run(model, exact, s, kwargs) for s in range(args.seeds)]
            rows.append(summarize(name, mode, runs))
            r = rows[-1]
            print(f"{name} | {mode}: err {r['err']:+.3f}±{r['sd']:.3f} right {r['right']} "
                  f"warned {r['warned']} false {r['false']} silent {r['silent']} covered "
                  f"{r['covered']} steps [{r['steps']}] {r['grads'] / 1e6:.2f} M {r['wall']:.1f} s",
                  flush=True)  # fmt: skip
    write(args, rows)


def write(args, rows):
    lines = [
        "# The convergence ladder on the hard models",
        "",
        f"`python benchmarks/ladder.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · `ppl_hais.workflow.evidence.evidence` (what `phn.HAIS` and "
        "`php.sample_hais` call), initial='auto', 512 particles, `bias_check='auto'`, seeds 300 "
        "and up; *fixed 1000*: `num_steps=1000`; *ladder*: the default `num_steps=None` "
        "(250 → 1000 → 4000 → 16,000 temperatures while a check fails and no rung's bridge "
        "ends it, within the default `max_gradients`, 160× the first rung's 128,000)",
        "",
        "*right*: |error| ≤ 0.1 nat; *false alarms*: right and warned; *silent*: |error| > "
        "3 SE + 0.05 without a warning; *shortfall covers*: of the wrong, warned runs, those "
        "whose |error| ≤ the stated shortfall + 0.1 (`Evidence.shortfall`: the rise over the "
        "last rung and the bias check's gap; 0 where neither shows one); *ended at*: "
        "temperatures of the last rung × runs; *gradients*: mean per call, everything counted "
        "(`Evidence.gradients`).",
        "",
        "| model | mode | mean error (sd) | right | warned | false alarms | silent | shortfall "
        "covers | ended at | gradients | median time |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['mode']} | {r['err']:+.3f} ({r['sd']:.3f}) | "
            f"{r['right']}/{r['n']} | {r['warned']} | {r['false']} | {r['silent']} | "
            f"{r['covered']} | {r['steps']} | "
            f"{r['grads'] / 1e6:.2f} M | {r['wall']:.2f} s |"
        )
    for mode in MODES:
        sub = [r for r in rows if r["mode"] == mode]
        right = sum(r["right"] for r in sub)
        lines.append(
            f"\n*{mode}*: {sum(r['n'] for r in sub)} runs, {right} right, "
            f"{sum(r['false'] for r in sub)} false alarms of the right runs, "
            f"{sum(r['silent'] for r in sub)} silent misses."
        )
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
