"""Our default calls beside BlackJAX's adaptive tempered SMC on issue 29's trust suite, as ratios.

Reads the two tables that ``trust_suite.py`` wrote on the same machine (our default calls in
docs/trust_suite.md; BlackJAX at docs/evidence_peers.md's settings and at 10× their work in
docs/trust_suite_blackjax.md) and writes, per model, each method's right runs (|error| ≤ 0.1
nat) and mean gradients, and our gradients over BlackJAX's.

    python benchmarks/trust_suite.py --seeds 20 --out docs/trust_suite.md
    python benchmarks/trust_suite.py --seeds 20 --adapters blackjax,blackjax-long \\
        --out docs/trust_suite_blackjax.md
    python benchmarks/suite_ratios.py --out docs/trust_suite_peers.md
"""

from __future__ import annotations

import argparse

import _machine

METHODS = ("numpyro", "pymc", "blackjax", "blackjax-long")


def read_table(path):
    """{(model, adapter): (right, runs, gradients in M, mean error, sd)} from its table (the
    generated one at the top; the hand-written sections after it start with ``##``)."""
    rows, col = {}, None
    for line in open(path):
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "model":  # the header names the columns (tables gained some over time)
            col = {name: i for i, name in enumerate(cells)}
            continue
        if col is None or cells[0].startswith("---") or len(cells) != len(col):
            continue
        right, runs = (int(x) for x in cells[col["right"]].split("/"))
        mean, sd = cells[col["mean error (sd)"]].replace("(", "").replace(")", "").split()
        grads = float(cells[col["gradients"]].split()[0])
        rows[cells[0], cells[1]] = (right, runs, grads, float(mean), float(sd))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ours", default="docs/trust_suite.md")
    p.add_argument("--peers", default="docs/trust_suite_blackjax.md")
    p.add_argument("--out", default="docs/trust_suite_peers.md")
    args = p.parse_args()
    rows = read_table(args.ours) | read_table(args.peers)
    models = list(dict.fromkeys(m for m, _ in rows))
    head = open(args.peers).read().splitlines()[2]  # the BlackJAX run's command, machine, date
    ours = open(args.ours).read().splitlines()[2]  # ours
    lines = [
        "# Issue 29's trust suite: our default calls beside BlackJAX's adaptive tempered SMC",
        "",
        f"`python benchmarks/suite_ratios.py` on {args.ours} and {args.peers} (same script; "
        f"our run: {ours.split(' · ')[1]}, {ours.split(' · ')[2]}; the BlackJAX run: "
        f"{head.split(' · ')[1]}, {head.split(' · ')[2]}; gradients are counted, not timed, "
        "though on another CPU a check can pass where it failed: docs/trust_suite.md, stop 68). "
        "Per method: runs within 0.1 nat of the exact log evidence, mean error (sd), mean "
        "gradients per call (ours: everything counted — pilots, fits, every rung, bias checks). "
        "*ratio*: our NumPyro call's gradients over BlackJAX's at 10× its documented work "
        "(`blackjax-long`), *at* whether ours was right on more runs than it; BlackJAX gives no "
        "SE and no warning, so its misses are silent.",
        "",
        "| model | " + " | ".join(METHODS) + " | ratio (numpyro / blackjax-long) | at |",
        "|---|" + "---|" * (len(METHODS) + 2),
    ]
    for m in models:
        cells = []
        for a in METHODS:
            if (m, a) not in rows:
                cells.append("not run")
                continue
            right, runs, grads, mean, sd = rows[m, a]
            cells.append(f"{right}/{runs} right, {mean:+.2f} ({sd:.2f}), {grads:.2f} M")
        ours, peer = rows[m, "numpyro"], rows.get((m, "blackjax-long"))
        if peer is None:  # a prior the BlackJAX runner cannot draw from (it draws iid normals)
            lines.append(f"| {m} | " + " | ".join(cells) + " | — | not run |")
            continue
        at = ("more right runs" if ours[0] > peer[0]
              else "as many" if ours[0] == peer[0] else "fewer")  # fmt: skip
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {ours[2] / peer[2]:.1f}× | {at} |")
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
