"""What ``initial="auto"`` and ``bias_check="auto"`` spend on easy models, whose posterior lies
inside the start: the fits they make and the checks they run, each paid for nothing there.

    python benchmarks/auto_reasons.py [--seeds 20] [--out docs/auto_reasons.md]

Models: the three small ones of ``benchmarks/first_call.py`` (a 5-D linear regression, eight
schools, a logistic regression), ``phn.HAIS(model).run(key)`` and
``php.sample_hais(model=m, random_seed=seed)`` with their defaults, seeds 0 and up. Both
decisions are instrumented (``ppl_hais.evidence._choose_initial`` and ``needs_check``
wrapped, not changed): the starts each call piloted and chose; for each rung the check is
asked about, the chains' k̂ that applies (weights that show a tail), lag and outside
fraction, which reasons they give, and whether a flat k̂ ≥ 0.3 (the rule before stop 61)
would have counted k̂ as one. The first rung's figures do not depend on that rule; later
rungs exist only where an earlier one was checked or failed.
"""

import argparse
import collections
import datetime
import warnings

import _machine
import jax
import numpy as np
from scipy import stats

import ppl_hais.evidence as evidence_module
from ppl_hais import diagnostics, estimators, starts
from ppl_hais.annealing import bias

FLAT_KHAT = 0.3  # the rule before stop 61


def data():
    rng = np.random.default_rng(0)  # the draws of benchmarks/first_call.py
    x = rng.normal(size=(50, 5))
    y = x @ rng.normal(size=5) + rng.normal(size=50)
    xl = rng.normal(size=(100, 3))
    yl = (rng.random(100) < 1 / (1 + np.exp(-xl @ [1.0, -1.0, 0.5]))) * 1
    school_y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    school_s = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    exact = float(stats.multivariate_normal(np.zeros(50), np.eye(50) + x @ x.T).logpdf(y))
    return dict(x=x, y=y, xl=xl, yl=yl, school_y=school_y, school_s=school_s, exact=exact)


def numpyro_calls(d):
    import numpyro
    import numpyro.distributions as dist

    from ppl_hais.adapters import numpyro as phn

    def regression(x, y):
        w = numpyro.sample("w", dist.Normal(0, 1).expand([5]).to_event(1))
        numpyro.sample("y", dist.Normal(x @ w, 1.0), obs=y)

    def eight_schools(s, y):
        mu = numpyro.sample("mu", dist.Normal(0, 5))
        tau = numpyro.sample("tau", dist.HalfCauchy(5))
        th = numpyro.sample("th", dist.Normal(0, 1).expand([8]).to_event(1))
        numpyro.sample("y", dist.Normal(mu + tau * th, s), obs=y)

    def logistic(x, y):
        w = numpyro.sample("w", dist.Normal(0, 2).expand([3]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)

    models = {"regression": (regression, (d["x"], d["y"])),
              "eight schools": (eight_schools, (d["school_s"], d["school_y"])),
              "logistic": (logistic, (d["xl"], d["yl"]))}  # fmt: skip

    def call(name, seed):
        model, args = models[name]
        hais = phn.HAIS(model, progress_bar=False)
        hais.run(jax.random.key(seed), *args)
        return hais.log_evidence, hais.evidence.log_z_se, hais.evidence.gradients

    return list(models), call


def pymc_calls(d):
    import pymc as pm

    from ppl_hais.adapters import pymc as php

    models = {}
    with pm.Model() as models["regression"]:
        w = pm.Normal("w", 0, 1, shape=5)
        pm.Normal("y", d["x"] @ w, 1.0, observed=d["y"])
    with pm.Model() as models["eight schools"]:
        mu, tau = pm.Normal("mu", 0, 5), pm.HalfCauchy("tau", 5)
        th = pm.Normal("th", 0, 1, shape=8)
        pm.Normal("y", mu + tau * th, d["school_s"], observed=d["school_y"])
    with pm.Model() as models["logistic"]:
        w = pm.Normal("w", 0, 2, shape=3)
        pm.Bernoulli("y", logit_p=pm.math.dot(d["xl"], w), observed=d["yl"])

    def call(name, seed):
        idata = php.sample_hais(model=models[name], random_seed=seed, progressbar=False)
        st = idata["sample_stats"]
        return float(st["log_evidence"]), float(st["log_evidence_se"]), int(st.attrs["gradients"])

    return list(models), call


def reasons(results, flat=False):
    """The reasons ``bias.needs_check`` finds in a rung's chains (``flat``: k̂ against 0.3)."""
    out = set()
    for r in results:
        tail = estimators.max_relative_weight(r.log_weights)
        khat = r.pareto_k if diagnostics.khat_applies(r.pareto_k, tail) else 0.0
        n = len(r.log_weights)
        if r.checks:
            out.add("failed check")
        if khat >= (FLAT_KHAT if flat else bias.suspect_khat(n)):
            out.add("k̂")
        inside = np.isfinite(r.outside_initial) and r.outside_initial <= bias.LAG_OUTSIDE
        if np.isfinite(r.lag) and r.lag >= bias.SUSPECT_LAG and not inside:
            out.add("lag")
        if np.isfinite(r.outside_initial) and r.outside_initial >= bias.suspect_outside(n):
            out.add("outside")
    return out


def khats(results):
    """The chains' k̂ where it applies (their weights show a tail)."""
    tails = [estimators.max_relative_weight(r.log_weights) for r in results]
    return [float(r.pareto_k) for r, t in zip(results, tails, strict=True)
            if diagnostics.khat_applies(r.pareto_k, t)]  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--out", default="docs/auto_reasons.md")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    d = data()
    rungs = []
    needs_check = evidence_module.needs_check

    def instrumented(results):
        decision = needs_check(results)
        rungs.append(dict(now=reasons(results), flat=reasons(results, flat=True),
                          khat=khats(results), checked=decision))  # fmt: skip
        return decision

    choose_initial = evidence_module._choose_initial

    def choosing(*args, **kwargs):
        out = choose_initial(*args, **kwargs)  # (name, target, pilot, choice, gradients)
        prior = out[0] == "prior" and sorted(out[3]) == ["prior"]
        near_exact = prior and out[3]["prior"] >= starts.NEAR_EXACT * len(out[2].log_weights)
        kept = near_exact and not out[2].outside < diagnostics.OUTSIDE_WARN
        piloted.append((out[0], sorted(out[3]), kept))
        return out

    piloted = []
    evidence_module.needs_check = instrumented
    evidence_module._choose_initial = choosing
    rows = []
    for adapter, calls in (("numpyro", numpyro_calls), ("pymc", pymc_calls)):
        names, call = calls(d)
        for name in names:
            runs = []
            for seed in range(args.seeds):
                start, chosen = len(rungs), len(piloted)
                log_z, se, gradients = call(name, seed)
                runs.append(dict(rungs=rungs[start:], starts=piloted[chosen:], log_z=log_z,
                                 se=se, gradients=gradients))  # fmt: skip
            rows.append((name, adapter, runs))
            print(name, adapter, summary(name, runs, d)[0], flush=True)
    write(args, rows, d)


def summary(name, runs, d):
    first = [r["rungs"][0] for r in runs if r["rungs"]]
    every = [g for r in runs for g in r["rungs"]]
    k = [x for g in first for x in g["khat"]]
    count = collections.Counter(x for g in every for x in g["now"])
    flat_k = sum("k̂" in g["flat"] and not (g["flat"] - {"k̂"}) for g in first)
    checked = sum(any(g["checked"] for g in r["rungs"]) for r in runs)
    err = [r["log_z"] - d["exact"] for r in runs] if name == "regression" else None
    z = None if err is None else np.abs(err) / [r["se"] for r in runs]
    fitted = sum(any("laplace" in c for _, c, _ in r["starts"]) for r in runs)
    kept = sum(any(k for _, _, k in r["starts"]) for r in runs)
    won = collections.Counter(n for r in runs for n, _, _ in r["starts"][:1])
    cells = [
        f"{fitted}/{len(runs)}",
        f"{kept}/{len(runs)}",
        ", ".join(f"{n} {c}" for n, c in sorted(won.items())),
        f"{np.median(k):.2f} · {max(k):.2f}" if k else "—",
        f"{flat_k}/{len(runs)}",
        ", ".join(f"{n} {c}" for n, c in sorted(count.items())) or "—",
        f"{checked}/{len(runs)}",
        f"{max(len(r['rungs']) for r in runs)}",
        f"{np.mean([r['gradients'] for r in runs]) / 1e6:.3f} M",
        "—" if err is None else f"{np.max(np.abs(err)):.3f} · {np.max(z):.1f}",
    ]
    return " | ".join(cells), cells


def write(args, rows, d):
    lines = [
        "# What `\"auto\"` spends on an easy model: fitted starts and bias checks",
        "",
        f"`python benchmarks/auto_reasons.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{datetime.date.today()} · `phn.HAIS(model).run(key)` and "
        "`php.sample_hais(model=m, random_seed=seed)`, defaults otherwise; seeds 0 and up.",
        "",
        "The three small models of `docs/first_call.md`. *Laplace piloted*: calls whose "
        "`initial=\"auto\"` made and piloted the Laplace fit beside the prior (the prior's "
        "pilot did not clear `starts.PRIOR_WORKS` with its particles inside the prior, "
        f"fewer than {diagnostics.OUTSIDE_WARN:.0%} of them outside, or a near-exact ESS); "
        "*kept near exact*: calls whose prior was kept for its near-exact pilot (ESS ≥ "
        f"{starts.NEAR_EXACT:.0%}) with {diagnostics.OUTSIDE_WARN:.0%} or more of its particles "
        "outside, which made and piloted the Laplace fit before stop 61; *start*: the start "
        "each call chose; *k̂*: median · largest over the first "
        "rungs' chains, where k̂ applies (weights that show a tail); *k̂ alone at a flat 0.3*: "
        "first rungs that the rule before stop 61 would have checked for k̂ and nothing else; "
        "*reasons now*: rungs giving each reason under `bias.needs_check` as it is "
        f"(k̂ from `bias.suspect_khat`: {bias.suspect_khat(512):.2f} at 512 particles, "
        f"{bias.suspect_khat(1000):.2f} at 1000); *checked*: calls with a bias check on any "
        "rung; *rungs*: the most any call climbed; *gradients*: mean per call, everything "
        "counted; *largest |error| · in SEs*: the regression's, against its exact evidence.",
        "",
        "| model | adapter | Laplace piloted | kept near exact | start | k̂ "
        "| k̂ alone at a flat 0.3 | reasons now | checked | rungs | gradients "
        "| largest \\|error\\| · in SEs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, adapter, runs in rows:
        lines.append(f"| {name} | {adapter} | {summary(name, runs, d)[0]} |")
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
