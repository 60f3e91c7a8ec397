"""PyMC's ``ordered`` transform: php.sample_hais's default call beside pm.sample_smc's.

    python benchmarks/ordered.py [--seeds 5] [--out docs/ordered.md]

Mixtures whose component means carry ``transform=pm.distributions.transforms.ordered`` (the
usual cure for label switching). PyMC's density is then the prior restricted to the ordered
cone, not renormalized there, and draws from the prior ignore the transform, so about
1 − 1/K! of them are unordered. Exact evidence (the cone's integral, in PyMC's own terms) by
quadrature on a grid: two components of unit sd with a N(0, 3²) prior on each mean, 30 points;
three components, 45 points, by a 3-D grid. Both samplers with their defaults (random seeds
1, 2, ...); pm.sample_smc with ``cores=1``, its estimate the log of the mean of its chains'
evidences. Times are whole calls after each model's first.
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import _machine
import numpy as np
import pymc as pm
from scipy.special import logsumexp

from ppl_hais.adapters import pymc as php

LOG2PI = np.log(2 * np.pi)


def mixture(k, per, seed=0):
    """(model, exact log evidence over the ordered cone)."""
    rng = np.random.default_rng(seed)
    centers = np.linspace(-3.0, 3.0, k)
    y = np.concatenate([rng.normal(c, 1.0, per) for c in centers])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 3.0, shape=k, initval=np.linspace(-1.0, 1.0, k),
                       transform=pm.distributions.transforms.ordered)  # fmt: skip
        pm.NormalMixture("y", w=np.full(k, 1.0 / k), mu=mu, sigma=1.0, observed=y)
    n = 401 if k == 2 else 121
    g = np.linspace(-8.0, 8.0, n)
    grids = np.meshgrid(*[g] * k, indexing="ij")
    log_lik = 0.0
    for v in y:
        log_lik = log_lik + logsumexp([-0.5 * (v - m) ** 2 for m in grids], axis=0)
    log_lik = log_lik + len(y) * (-np.log(k) - 0.5 * LOG2PI)
    log_prior = sum(-0.5 * m**2 / 9.0 - 0.5 * np.log(2 * np.pi * 9.0) for m in grids)
    ordered = np.all([grids[i] < grids[i + 1] for i in range(k - 1)], axis=0)
    joint = np.where(ordered, log_lik + log_prior, -np.inf)
    return model, float(logsumexp(joint) + k * np.log(g[1] - g[0]))


def ours(model, seed):
    with model, warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        idata = php.sample_hais(random_seed=seed, progressbar=False)
    st = idata.sample_stats
    notes = [str(w.message) for w in record if "aside" in str(w.message)]
    return float(st["log_evidence"]), float(st["log_evidence_se"]), st.attrs["hais_initial"], notes


def smc(model, seed):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample_smc(random_seed=seed, progressbar=False, cores=1)
    lml = np.asarray(idata.sample_stats["log_marginal_likelihood"].values, dtype=float)
    last = lml.reshape(lml.shape[0], -1)[:, -1]
    return float(logsumexp(last) - np.log(len(last)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--out", default="docs/ordered.md")
    args = p.parse_args()
    rows = []
    for k, per in ((2, 15), (3, 15)):
        model, exact = mixture(k, per)
        for name, call in (("php.sample_hais", ours), ("pm.sample_smc", smc)):
            errs, ses, walls, starts, notes = [], [], [], set(), []
            for seed in range(1, args.seeds + 1):
                t = time.perf_counter()
                out = call(model, seed)
                walls.append(time.perf_counter() - t)
                if name == "php.sample_hais":
                    est, se, start, note = out
                    ses.append(se), starts.add(start), notes.extend(note)
                else:
                    est = out
                errs.append(est - exact)
                print(k, name, seed, f"{est:.3f} (exact {exact:.3f})", flush=True)
            kept = sorted({n.split("keeps about ")[1].split()[0] for n in notes})
            se = f"{np.median(ses):.4f}" if ses else "—"
            note = f"{len(notes)}/{args.seeds}" + (f" (kept {', '.join(kept)})" if kept else "")
            rows.append(
                f"| {k} | {exact:.3f} | {name} | {np.mean(errs):+.3f} ({np.std(errs):.3f}) | "
                f"{max(np.abs(errs)):.3f} | {se} | {', '.join(sorted(starts)) or '—'} | {note} | "
                f"{np.median(walls[1:]):.2f} s |"
            )
    head = [
        "# PyMC's ordered transform: the default call beside pm.sample_smc",
        "",
        f"`python benchmarks/ordered.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{datetime.date.today()}",
        "",
        "Mixtures of K unit-sd normals whose means are `ordered`, N(0, 3²) priors, 15 points "
        "per component; exact log evidence in PyMC's terms (the prior restricted to the ordered "
        "cone, not renormalized) by quadrature. *error*: estimate − exact, mean (sd) over the "
        "seeds; *start*: where php.sample_hais annealed from; *note*: calls that warned that the "
        "prior was set aside (with the prior mass it estimated on the cone; exact 1/K!); *time*: "
        "median of the calls after the first.",
        "",
        "| K | exact log Z | method | error, mean (sd) | largest \\|error\\| | median SE | start "
        "| note | time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    _machine.write(args.out, head + rows)


if __name__ == "__main__":
    main()
