"""A PyMC model built again: the notebook cell that defines the model and samples, re-run.

Three small models, in one process, each timed four ways through ``php.sample_hais`` (its
defaults) and ``pm.sample_smc`` (its defaults, ``cores=1``): the first call, a call on the
same model object with a new seed, and calls on a model built again over the same data (a new
``pm.Model``, as a re-run cell makes), median of ``--repeats``. Since stop 52 a PyMC target
compares equal to an earlier one whose log density graph, constants and shared values are
equal (``adapters/pymc/target.py``), so a model built again reuses the compiled programs.

    python benchmarks/pymc_rebuild.py --out docs/pymc_rebuild.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import _machine
import numpy as np


def models():
    import pymc as pm

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 5))
    y = X @ rng.normal(size=5) + rng.normal(size=50)
    Xl = rng.normal(size=(100, 3))
    yl = (rng.random(100) < 1 / (1 + np.exp(-Xl @ [1.0, -1.0, 0.5]))) * 1
    school_y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    school_s = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])

    def regression():
        with pm.Model() as m:
            w = pm.Normal("w", 0.0, 1.0, shape=5)
            pm.Normal("y", pm.math.dot(X, w), 1.0, observed=y)
        return m

    def eight_schools():
        with pm.Model() as m:
            mu = pm.Normal("mu", 0.0, 5.0)
            tau = pm.HalfCauchy("tau", 5.0)
            theta = pm.Normal("theta", mu, tau, shape=8)
            pm.Normal("y", theta, school_s, observed=school_y)
        return m

    def logistic():
        with pm.Model() as m:
            w = pm.Normal("w", 0.0, 1.0, shape=3)
            pm.Bernoulli("y", logit_p=pm.math.dot(Xl, w), observed=yl)
        return m

    return {"regression": regression, "eight schools": eight_schools, "logistic": logistic}


def timed(fn):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn()
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    import logging

    import pymc as pm

    import ppl_hais.adapters.pymc as php

    logging.getLogger("pymc").setLevel(logging.ERROR)
    ours = lambda m, s: php.sample_hais(model=m, random_seed=s, progressbar=False)  # noqa: E731
    smc = lambda m, s: pm.sample_smc(model=m, random_seed=s, progressbar=False,  # noqa: E731
                                     cores=1, compute_convergence_checks=False)  # fmt: skip
    rows = []
    for name, build in models().items():
        for label, call in (("php.sample_hais", ours), ("pm.sample_smc", smc)):
            model = build()
            first = timed(lambda: call(model, 0))  # noqa: B023
            same = [timed(lambda i=i: call(model, 1 + i)) for i in range(args.repeats)]  # noqa: B023
            again = [timed(lambda i=i: call(build(), 10 + i)) for i in range(args.repeats)]  # noqa: B023
            rows.append((name, label, first, statistics.median(same), statistics.median(again)))
            print(*rows[-1], flush=True)
    lines = [
        "# A PyMC model built again: a re-run notebook cell",
        "",
        f"`python benchmarks/pymc_rebuild.py {' '.join(sys.argv[1:])}` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · each library's defaults (`php.sample_hais`: the ladder, "
        f"`draws=1000`; `pm.sample_smc`: 2 chains of 2000 draws, `cores=1`) · median of "
        f"{args.repeats} calls",
        "",
        "| model | sampler | first call | same model, new seed | model built again | "
        "built again / same model |",
        "|---|---|---|---|---|---|",
    ]
    for name, label, first, same, again in rows:
        lines.append(f"| {name} | {label} | {first:.2f} | {same:.2f} | {again:.2f} | "
                     f"{again / same:.1f}× |")  # fmt: skip
    lines += ["", "Seconds. `pm.sample_smc`'s time over ours on a model built again:", ""]
    for name in models():
        ours_t = next(r[4] for r in rows if r[0] == name and r[1] == "php.sample_hais")
        smc_t = next(r[4] for r in rows if r[0] == name and r[1] == "pm.sample_smc")
        lines.append(f"- {name}: {smc_t / ours_t:.2f}")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
