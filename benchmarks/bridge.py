"""Bridge sampling from NUTS draws, against exact evidence, beside HAIS.

Every model is a NumPyro model run the way a user runs it: ``MCMC(NUTS(model), num_warmup=1000,
num_samples=1000, num_chains=4)`` (vectorized chains), then ``phn.bridge_sampling(mcmc, model,
...)`` (the normal proposal, the default). Per model over ``--seeds`` seeds: the error against
the exact log Z (closed form or quadrature; the hierarchical logistic model against one long
HAIS run), the reported SE, the ±2·SE coverage of the runs that did not warn, the warnings,
the bridge's wall time (after NUTS, whose time is listed apart), and on the first
``--hais-seeds`` seeds ``phn.HAIS(model)`` with its defaults (error, SE, time) and the bridge's
``cross_check=True`` (the forward anneal, the reverse anneal from the draws, whether it warned).
Two cases where the draws cannot support the estimate close the table: the centered funnel
(NUTS diverges in its neck) and a two-mode mixture whose chains all start in one mode.

    python benchmarks/bridge.py --seeds 20 --hais-seeds 5 --out docs/bridge.md
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import _machine
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, init_to_value
from scipy import integrate, special, stats

import ppl_hais as ph
from ppl_hais.adapters import numpyro as phn


def regression(dim, rows, prior_sd, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, dim))
    y = x @ rng.normal(size=dim) + rng.normal(size=rows)
    exact = stats.multivariate_normal(np.zeros(rows), np.eye(rows) + prior_sd**2 * x @ x.T)

    def model(x, y):
        w = numpyro.sample("w", dist.Normal(0.0, prior_sd).expand([dim]).to_event(1))
        numpyro.sample("y", dist.Normal(x @ w, 1.0).to_event(1), obs=y)

    return model, dict(x=jnp.asarray(x), y=jnp.asarray(y)), float(exact.logpdf(y))


SCHOOLS_Y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12])
SCHOOLS_SIGMA = np.array([15.0, 10, 16, 11, 9, 11, 10, 18])


def schools_exact():
    def marginal(tau):
        cov = np.diag(SCHOOLS_SIGMA**2 + tau**2) + 25.0
        return stats.multivariate_normal(np.zeros(8), cov).pdf(SCHOOLS_Y) * 2 * stats.cauchy(
            0, 5
        ).pdf(tau)

    return float(np.log(integrate.quad(marginal, 0, np.inf, epsrel=1e-10, limit=200)[0]))


def schools(centered):
    def model(y, sigma):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        with numpyro.plate("school", 8):
            if centered:
                theta = numpyro.sample("theta", dist.Normal(mu, tau))
            else:
                eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
                theta = numpyro.deterministic("theta", mu + tau * eta)
            numpyro.sample("y", dist.Normal(theta, sigma), obs=y)

    data = dict(y=jnp.asarray(SCHOOLS_Y), sigma=jnp.asarray(SCHOOLS_SIGMA))
    return model, data, schools_exact()


def mixture(dim=5, sep=4.0, sd=0.5, prior_sd=3.0):
    """Two equal Gaussian modes at ±sep: the prior N(0, 3²) times a factor making the joint
    the mixture, so log Z is the mixture's normalizer."""
    m = jnp.full(dim, sep)

    def model():
        z = numpyro.sample("z", dist.Normal(0.0, prior_sd).expand([dim]).to_event(1))
        a = -0.5 * jnp.sum(((z - m) / sd) ** 2)
        b = -0.5 * jnp.sum(((z + m) / sd) ** 2)
        prior = dist.Normal(0.0, prior_sd).expand([dim]).to_event(1).log_prob(z)
        numpyro.factor("mix", jnp.logaddexp(a, b) - prior)

    return model, {}, float(np.log(2.0) + 0.5 * dim * np.log(2 * np.pi * sd * sd))


def dirichlet_multinomial():
    counts = np.array([5.0, 3, 12, 0, 7])
    alpha = np.array([1.0, 2, 1, 0.5, 1.5])
    n = counts.sum()
    exact = (special.gammaln(n + 1) - special.gammaln(counts + 1).sum()
             + special.gammaln(alpha.sum()) - special.gammaln(alpha.sum() + n)
             + (special.gammaln(alpha + counts) - special.gammaln(alpha)).sum())  # fmt: skip

    def model(y):
        p = numpyro.sample("p", dist.Dirichlet(jnp.asarray(alpha)))
        numpyro.sample("y", dist.Multinomial(int(n), p), obs=y)

    return model, dict(y=jnp.asarray(counts)), float(exact)


def logistic_data(groups=8, per=20, seed=11):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(groups), per)
    x = rng.normal(size=groups * per)
    a = 0.3 + 0.8 * rng.normal(size=groups)
    y = rng.random(groups * per) < 1 / (1 + np.exp(-(a[g] + 1.2 * x)))
    return dict(g=jnp.asarray(g), x=jnp.asarray(x), y=jnp.asarray(y.astype(float)))


def hier_logistic(groups=8):
    def model(g, x, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0))
        with numpyro.plate("group", groups):
            eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
        logits = mu + sigma * eta[g] + beta * x
        numpyro.sample("y", dist.Bernoulli(logits=logits), obs=y)

    return model, logistic_data(groups), None  # exact: a long HAIS run (reference())


def funnel(dim=10, y_obs=1.5):
    """Neal's funnel, centered, with one observation y ~ N(x₁, 1): log Z by quadrature over v."""

    def model(y):
        v = numpyro.sample("v", dist.Normal(0.0, 3.0))
        x = numpyro.sample("x", dist.Normal(0.0, jnp.exp(v / 2)).expand([dim - 1]).to_event(1))
        numpyro.sample("y", dist.Normal(x[0], 1.0), obs=y)

    f = lambda v: stats.norm(0, 3).pdf(v) * stats.norm(0, np.sqrt(1 + np.exp(v))).pdf(y_obs)  # noqa: E731
    exact = float(np.log(integrate.quad(f, -40, 40, epsrel=1e-10, limit=400)[0]))
    return model, dict(y=jnp.asarray(y_obs)), exact


def cases():
    return {
        # name: (model, data, exact, NUTS init (None: NumPyro's default), note)
        "regression 3-D": (*regression(3, 50, 1.0, seed=4), None, "conjugate, N(0, 1) prior"),
        "regression 50-D": (*regression(50, 100, 1.0, seed=5), None, "conjugate, N(0, 1) prior"),
        "vague regression 3-D": (*regression(3, 500, 100.0, seed=6), None, "prior sd 100"),
        "eight schools centered": (*schools(True), None, "τ by quadrature"),
        "eight schools non-centered": (*schools(False), None, "τ by quadrature"),
        "two-mode mixture 5-D": (*mixture(), None, "modes ±4, chains start at random"),
        "hierarchical logistic": (*hier_logistic(), None, "8 groups × 20; vs. long HAIS"),
        "Dirichlet-multinomial": (*dirichlet_multinomial(), None, "simplex (stick-breaking)"),
        "funnel 10-D, centered": (*funnel(), None, "NUTS diverges in the neck"),
        "mixture, one mode only": (*mixture(), {"z": jnp.full(5, 4.0)}, "all chains start at +4"),
    }  # fmt: skip


def reference(model, data):
    """log Z of a model without a closed form: HAIS with 20,000 temperatures, 4 chains."""
    hais = phn.HAIS(model, num_particles=1024, num_steps=20_000, num_chains=4,
                    progress_bar=False)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ph.EvidenceWarning)
        hais.run(jax.random.key(12345), **data)
    return hais.log_evidence, hais.log_evidence_se


def nuts(model, data, seed, init):
    kernel = NUTS(model, init_strategy=init_to_value(values=init) if init else
                  numpyro.infer.init_to_uniform)  # fmt: skip
    mcmc = MCMC(kernel, num_warmup=1000, num_samples=1000, num_chains=4,
                chain_method="vectorized", progress_bar=False)  # fmt: skip
    t0 = time.perf_counter()
    mcmc.run(jax.random.key(1000 + seed), **data)
    jax.block_until_ready(mcmc.get_samples())
    divergences = int(np.sum(np.asarray(mcmc.get_extra_fields()["diverging"])))
    return mcmc, time.perf_counter() - t0, divergences


def run_model(name, spec, args):
    model, data, exact, init, _ = spec
    exact_se = 0.0
    if exact is None:
        exact, exact_se = reference(model, data)
    rows = []
    for seed in range(args.seeds):
        mcmc, t_nuts, div = nuts(model, data, seed, init)
        cross = seed < args.hais_seeds
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ph.EvidenceWarning)
            res = phn.bridge_sampling(mcmc, model, rng_key=jax.random.key(seed), **data)
        t_bridge = time.perf_counter() - t0
        row = dict(seed=seed, error=res.log_z - exact, se=res.log_z_se, checks=[
            c.name for c in res.checks], khat=res.pareto_k, rhat=res.rhat,
            min_ess=res.min_ess, t_bridge=t_bridge, t_nuts=t_nuts, divergences=div)  # fmt: skip
        if cross:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ph.EvidenceWarning)
                cc = phn.bridge_sampling(mcmc, model, rng_key=jax.random.key(seed),
                                         cross_check=True, progress_bar=False, **data)  # fmt: skip
                t0 = time.perf_counter()
                hais = phn.HAIS(model, progress_bar=False)
                hais.run(jax.random.key(500 + seed), **data)
                t_hais = time.perf_counter() - t0
            row.update(
                cc_checks=[c.name for c in cc.checks if c.name == "cross_check"],
                forward=cc.cross_check.log_z_forward - exact,
                reverse=cc.cross_check.log_z_reverse - exact,
                hais_error=hais.log_evidence - exact, hais_se=hais.log_evidence_se,
                hais_warned=hais.warning, t_hais=t_hais,
            )  # fmt: skip
        rows.append(row)
        print(name, seed, {k: (round(v, 4) if isinstance(v, float) else v)
                           for k, v in row.items()}, flush=True)  # fmt: skip
    return dict(name=name, exact=exact, exact_se=exact_se, rows=rows)


def _run_named(name, args):
    return run_model(name, cases()[name], args)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--hais-seeds", type=int, default=5)
    p.add_argument("--out", default="docs/bridge.md")
    p.add_argument("--only", default=None, help="run the models whose name contains this")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the report from the JSON beside --out, running nothing")
    args = p.parse_args()
    if args.report_only:
        with open(args.out.replace(".md", ".json")) as f:
            return write(args, json.load(f))
    names = [n for n in cases() if args.only is None or args.only in n]
    # one process per model: each seed's NUTS and annealers compile anew, and XLA's compiled
    # code is not freed within a process (20 seeds × 10 models ran out of memory in one)
    ctx = multiprocessing.get_context("spawn")
    results = []
    for name in names:
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            results.append(pool.submit(_run_named, name, args).result())
    with open(args.out.replace(".md", ".json"), "w") as f:
        json.dump(results, f, default=float, indent=0)
    write(args, results)


def _f(x, nd=3):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def write(args, results):
    notes = {n: s[4] for n, s in cases().items()}
    lines = [
        "# Bridge sampling from NUTS draws, beside HAIS",
        "",
        f"`python benchmarks/bridge.py --seeds {args.seeds} --hais-seeds {args.hais_seeds}` on "
        f"{_machine.describe()}, {time.strftime('%Y-%m-%d')}.",
        "",
        "Each model: NumPyro NUTS, 4 chains × 1000 draws after 1000 warmup (vectorized), then "
        "`phn.bridge_sampling(mcmc, model, **data)` (normal proposal fitted to the first half of "
        "each chain, 4 × 500 draws in the bridge, as many proposal draws). *Right*: |error| ≤ "
        "0.1 nat. *Coverage*: |error| ≤ 2·SE among the runs that did not warn. Times: the "
        "bridge alone (its density evaluations; the first seed includes compilation) and NUTS "
        "(warmup and draws) apart. HAIS: `phn.HAIS(model)` with every default (the convergence "
        "ladder) on the first seeds; cross-check: `cross_check=True` on the same seeds "
        "(forward = the forward anneal's error, reverse = the reverse anneal's from the draws).",
        "",
        "| model | note | bridge error: mean (sd) | median SE | coverage ±2SE (unwarned) "
        "| warned | checks that fired | bridge s | NUTS s (divergences) "
        "| HAIS error (SE) | HAIS s | cross_check fired | forward / reverse error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows = r["rows"]
        err = np.array([x["error"] for x in rows])
        se = np.array([x["se"] for x in rows])
        warned = np.array([bool(x["checks"]) for x in rows])
        ok = ~warned
        cover = f"{np.mean(np.abs(err[ok]) <= 2 * se[ok]):.0%} of {ok.sum()}" if ok.any() else "–"
        fired = sorted({c for x in rows for c in x["checks"]})
        hs = [x for x in rows if "hais_error" in x]
        mean = lambda k, hs=hs: np.mean([x[k] for x in hs])  # noqa: E731
        hais = f"{mean('hais_error'):+.3f} ({mean('hais_se'):.3f})" if hs else "–"
        t_h = f"{np.median([x['t_hais'] for x in hs]):.1f}" if hs else "–"
        ccw = f"{sum(bool(x['cc_checks']) for x in hs)}/{len(hs)}" if hs else "–"
        fr = f"{mean('forward'):+.3f} / {mean('reverse'):+.3f}" if hs else "–"
        ref = "" if not r["exact_se"] else f" (ref. ± {r['exact_se']:.3f})"
        lines.append(
            f"| {r['name']} | {notes.get(r['name'], '')}{ref} "
            f"| {err.mean():+.4f} ({err.std():.4f}) "
            f"| {np.median(se):.4f} | {cover} | {warned.sum()}/{len(rows)} "
            f"| {', '.join(fired) or '–'} "
            f"| {np.median([x['t_bridge'] for x in rows]):.2f} "
            f"| {np.median([x['t_nuts'] for x in rows]):.1f} "
            f"({np.mean([x['divergences'] for x in rows]):.0f}) | {hais} | {t_h} | {ccw} | {fr} |"
        )
    khat_right = [x["khat"] for r in results for x in r["rows"] if abs(x["error"]) <= 0.1]
    quiet = [(r["name"], x) for r in results for x in r["rows"] if not x["checks"]]
    silent = [(n, x) for n, x in quiet if abs(x["error"]) > 3 * x["se"] + 0.05]
    right = [x for r in results for x in r["rows"] if abs(x["error"]) <= 0.1]
    by_model = sorted({n for n, _ in silent})
    lines += [
        "",
        f"Runs without a warning: {len(quiet)}; ±2 SE covers {np.mean([abs(x['error']) <= 2 * x['se'] for _, x in quiet]):.0%}"  # noqa: E501
        f" of them; silent misses (|error| > 3 SE + 0.05 without a warning): {len(silent)}"
        f"{' (' + ', '.join(f'{n}: {sum(1 for m, _ in silent if m == n)}' for n in by_model) + ')' if silent else ''}."  # noqa: E501
        f" Right runs (|error| ≤ 0.1) that warned: {sum(bool(x['checks']) for x in right)} of "
        f"{len(right)}.",
        f"The proposal's Pareto k̂ over the right runs: median {np.median(khat_right):.2f}, "
        f"max {np.max(khat_right):.2f}, ≥ 0.7 in {np.mean(np.array(khat_right) >= 0.7):.0%}.",
        "",
    ]
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
