"""Change points by evidence: one against two switchpoints in yearly counts, NumPyro's
enumeration (phn.HAIS) and PyMC's discrete variables (php.sample_hais) beside pm.sample_smc,
against the exact evidence by summation.

    python benchmarks/switchpoint.py [--seeds 5] [--out docs/switchpoint.md] [--methods phn]

Data: 111 yearly counts simulated in code (as long as the coal-mining disasters series; rates
3, 1 and 2.5 per year with changes after years 40 and 80). Models: rates ~ Exponential(1) per
segment; one switchpoint s ~ DiscreteUniform(0, 110), or two, s1 and s2 independent
DiscreteUniform(0, 110), the segments split at min(s1, s2) and max(s1, s2). Exact evidence: the
rates integrate out (gamma–Poisson) and the switchpoints are summed over (111 or 111² terms).

phn.HAIS either sums the switchpoints out by NumPyro's enumeration (funsor; the model under
``config_enumerate``) and anneals the rates, or, the same model unmarked, moves them by a
Metropolis step on their integer values inside the anneal: the one-switchpoint model as a user
writes it (a plate over years); the two-switchpoint model with its likelihood in sufficient
statistics (a numpyro.factor over cumulative counts), since enumerating 111² switchpoint pairs
against every year would hold 1.4 M terms per particle.
php.sample_hais and pm.sample_smc run the models as PyMC users write them: sample_hais moves
the switchpoints by a Metropolis step on one integer coordinate after each HMC step on the
rates (ph.mixed_kernel), 512 particles × 1000 temperatures; pm.sample_smc with its defaults
(2000 draws, 4 chains, its own Metropolis moves); its estimate pools the chains.

``--methods`` keeps the methods whose name contains one of its comma-separated parts (``phn``:
the NumPyro routes alone, which need no PyMC, as on a GPU machine without it).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.contrib.funsor import config_enumerate
from scipy import special

import ppl_hais as ph
from ppl_hais.adapters import numpyro as phn

YEARS = 111
warnings.filterwarnings("ignore")


def simulate(seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(YEARS)
    return rng.poisson(np.where(t < 40, 3.0, np.where(t < 80, 1.0, 2.5))).astype(float)


def segment_log_marginal(total, n, log_fact):
    """log ∫ Exp(λ; 1) Π Poisson(y_t; λ) dλ over a segment: from its sum, length, Σ log y!."""
    return special.gammaln(1 + total) - (1 + total) * np.log(1 + n) - log_fact


def exact(y, changes):
    c = np.concatenate([[0.0], np.cumsum(y)])
    f = np.concatenate([[0.0], np.cumsum(special.gammaln(y + 1))])
    cuts = np.arange(YEARS)

    def seg(a, b):
        return segment_log_marginal(c[b] - c[a], b - a, f[b] - f[a])

    if changes == 1:
        terms = seg(0, cuts) + seg(cuts, YEARS)
        return float(special.logsumexp(terms) - np.log(YEARS))
    lo = np.minimum(cuts[:, None], cuts[None, :])
    hi = np.maximum(cuts[:, None], cuts[None, :])
    terms = seg(0, lo) + seg(lo, hi) + seg(hi, YEARS)
    return float(special.logsumexp(terms) - 2 * np.log(YEARS))


def one_switch_plain(y):
    s = numpyro.sample("switchpoint", dist.DiscreteUniform(0, YEARS - 1))
    early = numpyro.sample("early_rate", dist.Exponential(1.0))
    late = numpyro.sample("late_rate", dist.Exponential(1.0))
    with numpyro.plate("years", YEARS):
        numpyro.sample("disasters", dist.Poisson(jnp.where(jnp.arange(YEARS) < s, early, late)),
                       obs=y)  # fmt: skip


def two_switch_plain(y):
    s1 = numpyro.sample("s1", dist.DiscreteUniform(0, YEARS - 1))
    s2 = numpyro.sample("s2", dist.DiscreteUniform(0, YEARS - 1))
    r = numpyro.sample("rates", dist.Exponential(1.0).expand([3]).to_event(1))
    c = jnp.concatenate([jnp.zeros(1), jnp.cumsum(y)])
    lo, hi = jnp.minimum(s1, s2), jnp.maximum(s1, s2)
    log_r = jnp.log(r)
    # Σ_t y_t log λ_t − λ_t − log y_t!, by segments from cumulative counts
    ll = (
        c[lo] * log_r[0] - lo * r[0]
        + (c[hi] - c[lo]) * log_r[1] - (hi - lo) * r[1]
        + (c[YEARS] - c[hi]) * log_r[2] - (YEARS - hi) * r[2]
        - jnp.sum(jax.scipy.special.gammaln(y + 1))
    )  # fmt: skip
    numpyro.factor("disasters", ll)


# marked for enumeration: the switchpoints summed out exactly; unmarked, they are moved by a
# Metropolis step inside the anneal
one_switch, two_switch = config_enumerate(one_switch_plain), config_enumerate(two_switch_plain)


def pymc_model(y, changes):
    import pymc as pm

    t = np.arange(YEARS)
    with pm.Model() as m:
        if changes == 1:
            s = pm.DiscreteUniform("switchpoint", 0, YEARS - 1)
            e = pm.Exponential("early_rate", 1.0)
            late = pm.Exponential("late_rate", 1.0)
            rate = pm.math.switch(t < s, e, late)
        else:
            s1 = pm.DiscreteUniform("s1", 0, YEARS - 1)
            s2 = pm.DiscreteUniform("s2", 0, YEARS - 1)
            r = pm.Exponential("rates", 1.0, shape=3)
            lo, hi = pm.math.minimum(s1, s2), pm.math.maximum(s1, s2)
            rate = pm.math.switch(t < lo, r[0], pm.math.switch(t < hi, r[1], r[2]))
        pm.Poisson("disasters", rate, observed=y)
    return m


METHODS = (
    "phn.HAIS (enumerated)",
    "phn.HAIS (Metropolis on the switchpoints)",
    "php.sample_hais (Metropolis on the switchpoints)",
    "pm.sample_smc",
)


def call(method, changes, y, seed):
    """(estimate, SE, warned) of one call; NaN SE and no warning for pm.sample_smc."""
    if method.startswith("phn"):
        plain = method.endswith("switchpoints)")
        model = {1: (one_switch, one_switch_plain), 2: (two_switch, two_switch_plain)}[changes]
        hais = phn.HAIS(model[plain], num_particles=512, num_steps=1000, progress_bar=False)
        hais.run(jax.random.key(seed), jnp.asarray(y))
        return hais.log_evidence, hais.log_evidence_se, bool(hais.warning), hais
    import pymc as pm

    from ppl_hais.adapters import pymc as php

    with pymc_model(y, changes):
        if method == "pm.sample_smc":
            idata = pm.sample_smc(random_seed=seed, progressbar=False, chains=4, cores=1)
            return ph.workflow.compare.evidence_of(idata)[0], float("nan"), False, None
        idata = php.sample_hais(draws=512, num_steps=1000, random_seed=seed, progressbar=False)
    est, se = ph.workflow.compare.evidence_of(idata)
    return est, se, bool(np.any(np.asarray(idata["sample_stats"]["evidence_warning"]))), None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--out", default="docs/switchpoint.md")
    p.add_argument("--methods", default=None, help="comma-separated parts of method names")
    args = p.parse_args()
    methods = [
        m
        for m in METHODS
        if args.methods is None or any(part in m for part in args.methods.split(","))
    ]
    y = simulate()
    truth = {1: exact(y, 1), 2: exact(y, 2)}
    runs = {(m, c): [] for m in methods for c in (1, 2)}
    for s in range(args.seeds):
        for changes in (1, 2):
            for method in methods:
                t = time.perf_counter()
                est, se, warned, hais = call(method, changes, y, s)
                runs[method, changes].append((est, se, warned, time.perf_counter() - t, hais))
                print(s, changes, method, f"{est - truth[changes]:+.4f}", f"{se:.4f}", warned,
                      f"{runs[method, changes][-1][3]:.1f} s", flush=True)  # fmt: skip
    ranked = {}
    for method in [m for m in methods if m.startswith("phn")]:
        tables = [ph.compare_evidence({"one": runs[method, 1][s][4], "two": runs[method, 2][s][4]})
                  for s in range(args.seeds)]  # fmt: skip
        ranked[method] = (sum(t.index[0] == "two" for t in tables),
                          np.median([t.loc["two", "prob"] for t in tables]))  # fmt: skip
    write(args, truth, runs, ranked, methods)


def write(args, truth, runs, ranked, methods):
    lines = [
        "# Switchpoints by evidence: HAIS with NumPyro enumeration or Metropolis moves and with "
        "PyMC's discrete variables, beside pm.sample_smc",
        "",
        f"`{shlex.join(['python', 'benchmarks/switchpoint.py', *sys.argv[1:]])}` · "
        f"{_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')}",
        "",
        __doc__.split("\n\n", 2)[2].strip().split("\n\n")[0].replace("\n", " "),
        "",
        "phn.HAIS and php.sample_hais: 512 particles × 1000 temperatures, defaults otherwise. "
        "pm.sample_smc: 2000 draws × 4 chains, cores=1. *error*: estimate − exact, mean and "
        "SD over seeds; *time*: median of the calls after the first.",
        "",
        "| model | exact log evidence | method | mean error | SD over seeds | reported SE "
        "(median) | ±2 SE covers | warned | time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for changes in (1, 2):
        name = f"{changes} switchpoint{'s' if changes > 1 else ''}"
        for method in methods:
            rows = runs[method, changes]
            err = np.array([r[0] for r in rows]) - truth[changes]
            se = np.array([r[1] for r in rows])
            wall = np.median([r[3] for r in rows[1:]] or [rows[0][3]])
            smc = method == "pm.sample_smc"
            lines.append(
                f"| {name} | {truth[changes]:.3f} | {method} | {err.mean():+.4f} | "
                f"{err.std(ddof=1) if len(err) > 1 else float('nan'):.4f} | "
                + ("n/a | n/a | n/a" if smc else
                   f"{np.median(se):.4f} | {np.mean(np.abs(err) <= 2 * se):.0%} | "
                   f"{sum(r[2] for r in rows)}/{len(rows)}")
                + f" | {wall:.1f} |"
            )  # fmt: skip
    lines += ["", f"Exact log Bayes factor two − one: {truth[2] - truth[1]:.3f}."]
    for method, (right, prob) in ranked.items():
        lines.append(
            f"`ph.compare_evidence` on {method}'s estimates ranked two switchpoints first in "
            f"{right} of {args.seeds} seeds (median probability {prob:.3f}; NaN when either "
            "estimate warned)."
        )
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
