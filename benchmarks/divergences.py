"""Divergences where no weight ends: two models whose prior draws of a tiny scale make the
leapfrog diverge, through both adapters' default calls.

    python benchmarks/divergences.py [--seeds 10] [--out docs/divergences.md]

A prior draw of a small scale meets a likelihood gradient of 10⁵ or more; its leapfrog
diverges and its proposals come back non-finite, and the particle ends without weight. The
``nonfinite`` check weighs each particle's share of non-finite proposals by its final weight
(stop 65); it had counted them unweighted, warned on right answers and sent the convergence
ladder up to 16,000 temperatures. The script reads only what both versions report, so it runs
against the code before the change too (``PYTHONPATH=<old checkout> python
benchmarks/divergences.py``).

- **NumPyro, exact:** σ_j ~ Exponential(1) and y_ij ~ N(0, σ_j) for 3 columns × 1000 rows;
  exact log evidence by a 1-D quadrature per column.
- **PyMC, no exact:** a 3-D ``pm.MvNormal`` whose Cholesky factor has a
  ``pm.LKJCholeskyCov(eta=2, sd_dist=Exponential(1))`` prior, 60 rows; the seeds' spread stands
  in for the error.
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pymc as pm
from scipy import stats

from ppl_hais.adapters import numpyro as phn
from ppl_hais.adapters import pymc as php


def scales_model():
    y = np.random.default_rng(0).normal(size=(1000, 3))

    def model(y):
        s = numpyro.sample("s", dist.Exponential(1.0).expand([3]).to_event(1))
        numpyro.sample("y", dist.Normal(0.0, s).to_event(1), obs=y)

    grid = np.linspace(0.8, 1.2, 4001)
    exact = 0.0
    for col in y.T:
        log_f = stats.expon.logpdf(grid) + stats.norm.logpdf(col[:, None], 0.0, grid).sum(0)
        exact += np.log(np.trapezoid(np.exp(log_f - log_f.max()), grid)) + log_f.max()
    return model, jnp.asarray(y), float(exact)


def lkj_model():
    rng = np.random.default_rng(2)
    cov = [[1.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.0]]
    y = rng.multivariate_normal(np.zeros(3), cov, size=60)
    with pm.Model() as model:
        chol, _, _ = pm.LKJCholeskyCov("c", n=3, eta=2.0, compute_corr=True,
                                       sd_dist=pm.Exponential.dist(1.0, shape=3))  # fmt: skip
        pm.MvNormal("y", mu=np.zeros(3), chol=chol, observed=y)
    return model


def run_numpyro(model, y, seed):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        h = phn.HAIS(model, progress_bar=False)
        h.run(jax.random.key(seed), y)
    ev = h.evidence
    last = ev.results[0]
    share = last.num_nonfinite / (last.log_weights.size * (len(last.betas) - 1))
    warned = any("nonfinite" in str(w.message) for w in record)
    rungs = [r.num_steps for r in ev.trajectory]
    return ev.log_z, ev.log_z_se, ev.initial, ev.gradients, rungs, share, warned


def run_pymc(model, seed):
    with model, warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        idata = php.sample_hais(random_seed=seed, progressbar=False)
    st = idata.sample_stats
    rungs = [int(n) for n in st["ladder_num_steps"].values] if "ladder_num_steps" in st else []
    warned = any("nonfinite" in str(w.message) for w in record)
    share = float("nan")
    return (float(st["log_evidence"]), float(st["log_evidence_se"]), st.attrs["hais_initial"],
            int(st.attrs["gradients"]), rungs, share, warned)  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", default="docs/divergences.md")
    args = p.parse_args()
    scales, y, exact = scales_model()
    lkj = lkj_model()
    cases = (("σ_j ~ Exponential(1), 3 × 1000 rows", "numpyro",
              lambda s: run_numpyro(scales, y, s), exact),
             ("3-D MvNormal, LKJCholeskyCov prior, 60 rows", "pymc",
              lambda s: run_pymc(lkj, s), None))  # fmt: skip
    rows = []
    for name, adapter, call, truth in cases:
        for seed in range(args.seeds):
            t = time.perf_counter()
            est, se, start, grads, rungs, share, warned = call(seed)
            wall = time.perf_counter() - t
            err = "—" if truth is None else f"{est - truth:+.3f}"
            rows.append(
                f"| {name} | {adapter} | {seed} | {est:.3f} | {err} | {se:.3f} | {start} | "
                f"{'' if np.isnan(share) else f'{share:.2%}'} | {'yes' if warned else 'no'} | "
                f"{', '.join(map(str, rungs))} | {grads / 1e6:.2f} M | {wall:.1f} s |"
            )
            print(rows[-1], flush=True)
    head = [
        "# Divergences where no weight ends: the default calls",
        "",
        f"`python benchmarks/divergences.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{datetime.date.today()}",
        "",
        "Default calls (the convergence ladder, `initial='auto'`, `bias_check='auto'`), keys "
        f"0–{args.seeds - 1}. *error*: estimate − exact (σ model; exact {exact:.3f} by "
        "quadrature); *non-finite*: the last rung's proposals with a NaN/inf density or "
        "gradient, unweighted (NumPyro); *nonfinite warned*: whether the call warned by the "
        "`nonfinite` check; *rungs*: the ladder's temperatures; *time*: the whole call (the "
        "first of each model compiles).",
        "",
        "| model | adapter | key | estimate | error | SE | start | non-finite | nonfinite warned "
        "| rungs | gradients | time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    _machine.write(args.out, head + rows)


if __name__ == "__main__":
    main()
