"""The calibration of the convergence ladder's thresholds: its joint decision replayed on the
rungs that ``trust_suite.py --collect`` recorded.

``python benchmarks/trust_suite.py --collect benchmarks/data/trust_suite_rungs.json`` ran, per
adapter, model and seed, the rungs of 1000, 4000 and 16,000 temperatures with a bias check on
each, and kept each rung's features. This script walks each run's rungs as the ladder does
(stop at the first rung that passes) under the library's own rule, read from the library: the
bias check's thresholds (``diagnostics.BIAS_FLOOR``, ``diagnostics.BIAS_NOISE``), the joint
decision (``ladder.clears``, ``ladder.cleared_se``) and the stated shortfall
(``ladder.shortfall``), and tabulates per model the runs that are right, warned, false alarms,
silent misses and how often the stated shortfall covers the error. A change to a threshold is
judged by this table before the trust suite reruns it on fresh keys.

    python benchmarks/calibrate_ladder.py --out docs/calibration.md
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json

import _machine
import numpy as np

from ppl_hais.checks import diagnostics, ladder


def walk(rungs):
    """(the rung the ladder ends on, warned, SE, stated shortfall)."""
    trajectory = []
    for k, r in enumerate(rungs):
        gap, gap_se = r["bias_gap"], r["bias_gap_se"]
        checks = [c for c in r["checks"] if c != "bias"]
        if np.isfinite(gap):
            noise = gap_se if np.isfinite(gap_se) else 0.0
            tol = max(diagnostics.BIAS_FLOOR, diagnostics.BIAS_NOISE * noise)
            checks += ["bias"] if gap > tol else []
        lag, outside = (np.nanmax(r[f]) if np.isfinite(r[f]).any() else float("nan")
                        for f in ("lag", "outside"))  # fmt: skip
        rung = ladder.Rung(r["num_steps"], r["log_z"], r["se"], tuple(checks), gap,
                           r["gradients"], r["seconds"], lag, outside=outside,
                           bias_gap_se=gap_se)  # fmt: skip
        if ladder.clears(trajectory + [rung]):
            se = ladder.cleared_se(trajectory + [rung], r["se_delta"])
            rung = rung._replace(log_z_se=se, failed=(), cleared=rung.failed)
        trajectory.append(rung)
        if not rung.failed or k == len(rungs) - 1:
            break
    last = trajectory[-1]
    return len(trajectory) - 1, bool(last.failed), last.log_z_se, ladder.shortfall(trajectory)


DATA = "benchmarks/data/trust_suite_rungs.json"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rungs", nargs="?", default=DATA)
    p.add_argument("--out", default=None, help="write the page here (default: print it)")
    args = p.parse_args()
    with open(args.rungs) as f:
        runs = json.load(f)
    table = collections.defaultdict(list)
    for run in runs:
        k, warned, se, short = walk(run["rungs"])
        err = run["rungs"][k]["log_z"] - run["exact"]
        grads = sum(r["gradients"] for r in run["rungs"][: k + 1])
        table[run["model"]].append((err, warned, se, short, k, grads))
    total = collections.Counter()
    lines = [
        "# Calibration of the convergence ladder's thresholds",
        "",
        f"`python benchmarks/calibrate_ladder.py --out docs/calibration.md` · "
        f"{datetime.date.today()} · data: `{args.rungs}` ({len(runs)} runs)",
        "",
        "The ladder's joint decision (the bias check's floor "
        f"{diagnostics.BIAS_FLOOR} nat and {diagnostics.BIAS_NOISE} of its SEs, "
        "`ladder.clears`, `ladder.cleared_se`, `ladder.shortfall`) replayed on the rungs of 1000, "
        "4000 and 16,000 temperatures that `benchmarks/trust_suite.py --collect` recorded. A run "
        "is right within 0.1 nat; silent when it is further than 3 SE + 0.05 off without a "
        "warning; the shortfall covers a warned wrong run when the error is within it + 0.1.",
        "",
        "| model | runs | mean error (sd) | right | warned | false alarms | silent | shortfall "
        "covers | ended at rung | gradients |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, rows in table.items():
        err, warned, se, short, k, grads = (np.array(x) for x in zip(*rows, strict=True))
        right = np.abs(err) <= 0.1
        silent = (np.abs(err) > 3 * se + 0.05) & ~warned
        wrong_warned = warned & ~right
        covered = (np.abs(err) <= short + 0.1) & wrong_warned
        ends = ", ".join(f"{n}×{1000 * 4**i}" for i, n in sorted(collections.Counter(k).items()))
        lines.append(
            f"| {model} | {len(err)} | {err.mean():+.3f} ({err.std():.3f}) | {right.sum()} | "
            f"{warned.sum()} | {np.sum(right & warned)} | {silent.sum()} | "
            f"{covered.sum()}/{wrong_warned.sum()} | {ends} | {grads.mean() / 1e6:.1f} M |"
        )
        total.update(runs=len(err), right=int(right.sum()), false=int(np.sum(right & warned)),
                     silent=int(silent.sum()))  # fmt: skip
    lines += ["", f"{total['runs']} runs: {total['silent']} silent misses, {total['false']} false "
              f"alarms of {total['right']} right runs "
              f"({total['false'] / max(total['right'], 1):.1%})."]  # fmt: skip
    _machine.report(args.out, lines)


if __name__ == "__main__":
    main()
