"""Replay the convergence ladder's joint decision on the rungs collected by trust_suite.py.

``python benchmarks/trust_suite.py --collect docs/trust_suite_rungs.json`` ran, per adapter,
model and seed, the rungs 1000, 4000 and 16,000 temperatures with a bias check on each. This
script walks each run's rungs as the ladder does (stop at the first rung that passes) under
the library's own rule: the bias check's thresholds (``diagnostics.evidence_checks``), the
joint decision (``ladder.clears``, ``ladder.cleared_se``) and the stated shortfall
(``ladder.shortfall``), and prints per model the runs that are right, warned, false alarms,
silent misses and how often the stated shortfall covers the error. It is how the thresholds
were chosen; ``--before`` shows the decision before this change (bias check at 0.1 nat and
3 SEs, nothing cleared).

    python benchmarks/decision.py docs/trust_suite_rungs.json
"""

from __future__ import annotations

import argparse
import collections
import json

import numpy as np

from ppl_hais import diagnostics, ladder


def walk(rungs, before=False):
    """(the rung the ladder ends on, warned, SE, stated shortfall)."""
    trajectory = []
    for k, r in enumerate(rungs):
        gap, gap_se = r["bias_gap"], r["bias_gap_se"]
        checks = [c for c in r["checks"] if c != "bias"]
        if np.isfinite(gap):
            noise = gap_se if np.isfinite(gap_se) else 0.0
            tol = max(0.1, 3 * noise) if before else max(
                diagnostics.BIAS_FLOOR, diagnostics.BIAS_NOISE * noise
            )
            checks += ["bias"] if gap > tol else []
        lag, outside = (np.nanmax(r[f]) if np.isfinite(r[f]).any() else float("nan")
                        for f in ("lag", "outside"))  # fmt: skip
        rung = ladder.Rung(r["num_steps"], r["log_z"], r["se"], tuple(checks), gap,
                           r["gradients"], r["seconds"], lag, outside=outside,
                           bias_gap_se=gap_se)  # fmt: skip
        if not before and ladder.clears(trajectory + [rung]):
            se = ladder.cleared_se(trajectory + [rung], r["se_delta"])
            rung = rung._replace(log_z_se=se, checks=(), cleared=rung.checks)
        trajectory.append(rung)
        if not rung.checks or k == len(rungs) - 1:
            break
    last = trajectory[-1]
    return len(trajectory) - 1, bool(last.checks), last.log_z_se, ladder.shortfall(trajectory)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rungs", nargs="?", default="docs/trust_suite_rungs.json")
    p.add_argument("--before", action="store_true", help="the decision before the joint rule")
    args = p.parse_args()
    runs = json.load(open(args.rungs))
    table = collections.defaultdict(list)
    for run in runs:
        k, warned, se, short = walk(run["rungs"], args.before)
        err = run["rungs"][k]["log_z"] - run["exact"]
        grads = sum(r["gradients"] for r in run["rungs"][: k + 1])
        table[run["model"]].append((err, warned, se, short, k, grads))
    total = collections.Counter()
    print("| model | runs | mean error (sd) | right | warned | false alarms | silent | shortfall "
          "covers | ended at rung | gradients |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, rows in table.items():
        err, warned, se, short, k, grads = (np.array(x) for x in zip(*rows, strict=True))
        right = np.abs(err) <= 0.1
        silent = (np.abs(err) > 3 * se + 0.05) & ~warned
        wrong_warned = warned & ~right
        covered = (np.abs(err) <= short + 0.1) & wrong_warned
        ends = ", ".join(f"{n}×{1000 * 4**i}" for i, n in sorted(collections.Counter(k).items()))
        print(f"| {model} | {len(err)} | {err.mean():+.3f} ({err.std():.3f}) | {right.sum()} | "
              f"{warned.sum()} | {np.sum(right & warned)} | {silent.sum()} | "
              f"{covered.sum()}/{wrong_warned.sum()} | {ends} | {grads.mean() / 1e6:.1f} M |")
        total.update(runs=len(err), right=int(right.sum()), false=int(np.sum(right & warned)),
                     silent=int(silent.sum()))  # fmt: skip
    print(f"\n{total['runs']} runs: {total['silent']} silent misses, {total['false']} false alarms "
          f"of {total['right']} right runs ({total['false'] / max(total['right'], 1):.1%}).")


if __name__ == "__main__":
    main()
