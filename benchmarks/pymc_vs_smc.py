"""PyMC users' comparison: php.sample_hais against pm.sample_smc on the same PyMC models.

    python benchmarks/pymc_vs_smc.py [--seeds 10] [--out docs/pymc_vs_smc.md] [--only funnel]

Models with exact evidence: Bayesian linear regression (N(0, I) prior, unit noise, 50 points)
in 10 and 20 dimensions; a 10-D hierarchical funnel (v ~ N(0, 3²), x_i | v ~ N(0, e^v),
y_i ~ N(x_i, 1), 9 observations; centred, so the posterior is a funnel) whose evidence
∫ N(v; 0, 9) Π N(y_i; 0, e^v + 1) dv is a 1-D quadrature. pm.sample_smc with its defaults
(2000 draws, 4 chains, IMH kernel); its estimate pools the chains (log of the mean Z). Its
default cores is cpu_count // 2 (PyMC assumes hyperthreads), 1 on a 2-core machine, where
the chains then run one after another; it is also run with cores=2 (chains in 2 processes),
and speed-ups are against the faster of the two.
sample_hais with its defaults (adaptive schedule, step size and diagonal mass matrix from a
pilot run; on CPU the particles run in two groups per core): 256 particles at the listed
number of temperatures K and at K/2, 512 and 1024 particles at K/2; 4 chains × 128 particles at K/2
(its error bar pools the chains: the larger of their own SEs and their spread); and 2048
particles at K (toward the time pm.sample_smc takes, for accuracy at equal time). Times:
whole calls, the first on each model (compilation included) and the later ones (another
seed: sample_hais keeps the compiled target on the model, PyTensor caches its compiled
functions). One process, methods alternated per seed.
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import _machine
import numpy as np
import pymc as pm
from scipy import integrate
from scipy.stats import multivariate_normal, norm

import ppl_hais as ph
from ppl_hais.adapters import pymc as php

warnings.filterwarnings("ignore")


def blr(dim, seed=0, n=50):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, dim))
    y = X @ rng.normal(size=dim) + rng.normal(size=n)
    with pm.Model() as m:
        w = pm.Normal("w", 0.0, 1.0, shape=dim)
        pm.Normal("y", pm.math.dot(X, w), 1.0, observed=y)
    return m, multivariate_normal(np.zeros(n), np.eye(n) + X @ X.T).logpdf(y)


def funnel(seed=0, k=9):
    rng = np.random.default_rng(seed)
    v0 = -1.0
    y = rng.normal(0, np.exp(v0 / 2), size=k) + rng.normal(size=k)
    with pm.Model() as m:
        v = pm.Normal("v", 0.0, 3.0)
        x = pm.Normal("x", 0.0, pm.math.exp(v / 2), shape=k)
        pm.Normal("y", x, 1.0, observed=y)

    def integrand(v):
        return np.exp(
            norm.logpdf(v, 0, 3) + np.sum(norm.logpdf(y, 0, np.sqrt(np.exp(v) + 1))) - base
        )

    base = np.sum(norm.logpdf(y, 0, np.sqrt(np.exp(v0) + 1)))
    val, _ = integrate.quad(integrand, -30, 30, epsabs=1e-13, epsrel=1e-11, limit=500)
    return m, float(np.log(val) + base)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="", help="run only the models whose name contains this")
    args = ap.parse_args()
    cases = [
        ("linear regression, 10-D", *blr(10), 3000),
        ("linear regression, 20-D", *blr(20), 3000),
        ("funnel (hierarchical), 10-D", *funnel(), 3000),
    ]
    cases = [c for c in cases if args.only in c[0]]
    lines = [
        "# PyMC: sample_hais against pm.sample_smc",
        "",
        f"Command: `python benchmarks/pymc_vs_smc.py --seeds {args.seeds}"
        + (f" --only {args.only!r}" if args.only else "")
        + "`  ",
        f"Machine: {_machine.describe()}, pymc {pm.__version__}; "
        f"{datetime.date.today().isoformat()}.",
        "",
        f"{args.seeds} seeds per method. Error = log Ẑ − exact (rms error: its root mean "
        "square, bias and spread together). Coverage = share of seeds whose "
        "reported ±2 SE holds the exact value (sample_smc reports none: n/a). Times are whole "
        "calls: the first call of each row (compilation included, except what an earlier row on "
        "the same model already compiled) and the median of its later calls (new seeds; both "
        "libraries reuse what they compiled). "
        "Speed-up = the faster pm.sample_smc row's later-call time / this row's.",
        "",
        "| model | exact log Z | method | mean error | sd of error | rms error | coverage | "
        "first call (s) | later calls (s) | speed-up vs sample_smc |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, model, exact, steps in cases:

        def hais(draws, n, chains=1):
            label = f"{chains} chains × {draws}" if chains > 1 else f"{draws}"
            return (f"sample_hais ({label} particles, {n} temperatures)",
                    dict(draws=draws, num_particles=draws, num_steps=n,
                         chains=chains))  # fmt: skip

        variants = [
            hais(256, steps),
            hais(256, steps // 2),
            hais(512, steps // 2),
            hais(1024, steps // 2),
            hais(128, steps // 2, chains=4),
            hais(2048, steps),
            ("pm.sample_smc (2000 draws × 4 chains, its default cores=1 here)", dict(cores=1)),
            ("pm.sample_smc (2000 draws × 4 chains, cores=2)", dict(cores=2)),
        ]
        res = {v[0]: [] for v in variants}
        for s in range(args.seeds):
            for label, kw in variants:  # methods alternated per seed
                is_hais = "draws" in kw
                t = time.perf_counter()
                with model:
                    if is_hais:
                        idata = php.sample_hais(random_seed=s, progressbar=False, **kw)
                    else:
                        idata = pm.sample_smc(random_seed=s, progressbar=False, chains=4, **kw)
                wall = time.perf_counter() - t
                est, se = ph.workflow.compare.evidence_of(idata)
                res[label].append((est - exact, se if is_hais else np.nan, wall))
                print(name, s, label, res[label][-1], flush=True)
        # the faster of pm.sample_smc's two settings
        smc_later = min(np.median(np.array(res[v[0]])[1:, 2]) for v in variants[-2:])
        for label, kw in variants:
            r = np.array(res[label])
            cov = f"{np.mean(np.abs(r[:, 0]) < 2 * r[:, 1]):.0%}" if "draws" in kw else "n/a"
            later = np.median(r[1:, 2])
            lines.append(
                f"| {name} | {exact:.3f} | {label} | {np.mean(r[:, 0]):+.3f} | "
                f"{np.std(r[:, 0], ddof=1):.3f} | {np.sqrt(np.mean(r[:, 0] ** 2)):.3f} | "
                f"{cov} | {r[0, 2]:.1f} | {later:.2f} | "
                f"{smc_later / later:.1f}× |"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        _machine.write(args.out, text)


if __name__ == "__main__":
    main()
