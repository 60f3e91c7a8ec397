"""How many particle groups per CPU core: whole php.sample_hais calls at 1, 2 and 4 groups.

    python benchmarks/groups.py [--out docs/groups.md]

On CPU the driver splits the main run into particle groups dispatched from threads
(``driver.layout``: groups of the pilot's 64 particles where that gives two to eight per core,
else two per core). This times whole calls (256 and 512 particles,
1500 temperatures; best of 3 after a compiling call) with the group count forced, on the
10-D and 20-D regressions and the 10-D funnel of ``benchmarks/pymc_vs_smc.py``.
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import _machine
from pymc_vs_smc import blr, funnel

import ppl_hais.annealing.execution as driver
from ppl_hais.adapters import pymc as php

warnings.filterwarnings("ignore")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    counts = [1, 2, 4]
    lines = [
        "# Particle groups per CPU core",
        "",
        "Command: `python benchmarks/groups.py`  ",
        f"Machine: {_machine.describe()}; {datetime.date.today().isoformat()}.",
        "",
        "Whole `php.sample_hais` calls (s), 1500 temperatures, best of 3 later calls, with the "
        "number of particle groups forced.",
        "",
        "| model | particles | " + " | ".join(f"{g} group(s)" for g in counts) + " |",
        "|---|---|" + "---|" * len(counts),
    ]
    default = driver.layout
    try:
        for name, (model, _) in [
            ("linear regression, 10-D", blr(10)),
            ("linear regression, 20-D", blr(20)),
            ("funnel, 10-D", funnel()),
        ]:
            for num in [256, 512]:
                row = []
                for g in counts:
                    driver.layout = lambda n, g=g: (g, n // g)
                    with model:
                        php.sample_hais(draws=num, num_steps=1500, random_seed=0, progressbar=False)
                        times = []
                        for s in range(3):
                            t = time.perf_counter()
                            php.sample_hais(
                                draws=num, num_steps=1500, random_seed=s + 1, progressbar=False
                            )
                            times.append(time.perf_counter() - t)
                    row.append(min(times))
                lines.append(f"| {name} | {num} | " + " | ".join(f"{t:.3f}" for t in row) + " |")
                print(lines[-1], flush=True)
    finally:
        driver.layout = default
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        _machine.write(args.out, text)


if __name__ == "__main__":
    main()
