"""Two runs of ``trust_suite.py`` over the same keys side by side (e.g. 2 CPU cores and a GPU).

Reads the per-run JSONs that ``trust_suite.py --runs`` writes and, for every (model, adapter)
both hold, prints a Markdown table over the seeds both ran: right runs (|error| ≤ 0.1 nat),
warned runs, mean error, the largest difference between the two runs of one key, and the median
seconds of the calls after each model's first (the first compiles), with their ratio.

    python benchmarks/runs_side_by_side.py docs/trust_suite_runs.json \\
        docs/trust_suite_gpu_h200_runs.json --names "2 CPU cores" H200
"""

from __future__ import annotations

import argparse
import json

import numpy as np

RIGHT = 0.1


def by_key(path):
    return {(r["model"], r["adapter"], r["seed"]): r for r in json.load(open(path))}


def rows(a, b):
    """One row per (model, adapter) that both runs hold, over the seeds both ran."""
    groups = {}
    for key in a:
        if key in b:
            groups.setdefault(key[:2], []).append(key[2])
    out = []
    for (model, adapter), seeds in groups.items():
        seeds = sorted(seeds)
        ra = [a[(model, adapter, s)] for s in seeds]
        rb = [b[(model, adapter, s)] for s in seeds]
        first_a = min(s for (m, ad, s) in a if (m, ad) == (model, adapter))
        first_b = min(s for (m, ad, s) in b if (m, ad) == (model, adapter))
        warm_a = [r["wall"] for s, r in zip(seeds, ra, strict=True) if s != first_a]
        warm_b = [r["wall"] for s, r in zip(seeds, rb, strict=True) if s != first_b]
        ta, tb = float(np.median(warm_a)), float(np.median(warm_b))
        out.append(dict(
            model=model, adapter=adapter, runs=len(seeds),
            right=[sum(abs(r["err"]) <= RIGHT for r in rs) for rs in (ra, rb)],
            warned=[sum(bool(r["checks"]) for r in rs) for rs in (ra, rb)],
            mean=[float(np.mean([r["err"] for r in rs])) for rs in (ra, rb)],
            apart=max(abs(x["err"] - y["err"]) for x, y in zip(ra, rb, strict=True)),
            time=[ta, tb], ratio=ta / tb,
        ))  # fmt: skip
    return out


def table(out, names):
    a, b = names
    head = (
        f"| model | adapter | runs | right ({a} · {b}) | warned | mean error | largest "
        f"difference of one key | seconds a call ({a} · {b}) | {a} / {b} |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in out:
        lines.append(
            f"| {r['model']} | {r['adapter']} | {r['runs']} | {r['right'][0]} · {r['right'][1]} "
            f"| {r['warned'][0]} · {r['warned'][1]} | {r['mean'][0]:+.3f} · {r['mean'][1]:+.3f} "
            f"| {r['apart']:.3f} | {r['time'][0]:.2f} · {r['time'][1]:.2f} | {r['ratio']:.1f} |"
        )
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--names", nargs=2, default=("first", "second"))
    args = p.parse_args()
    print(table(rows(by_key(args.first), by_key(args.second)), args.names))


if __name__ == "__main__":
    main()
