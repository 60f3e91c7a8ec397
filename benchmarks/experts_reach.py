"""Why the 36-D Student-t experts stay low: the mass beyond the particles' reach (issue 29).

The product of Student-t experts (``ppl_hais.validation.product_of_experts("student", 36)``,
the trust suite's model) is p(z) ∝ Π_l (1 + u_l²)^(−λ_l) with u = Φz: under p the u_l are
independent, u_l·√ν_l a Student-t with ν_l = 2λ_l − 1 degrees of freedom (0.5 for the
heaviest experts, λ = 0.75). Annealed from the suite's N(0, I) prior, the final particles
reach some largest |u_l| per expert; the target's mass inside that box is
Π_l P(|u_l| ≤ reach_l), exactly, from the Student-t CDF. This script sets the estimate's
error beside log of that mass (the *reach shortfall*): if the missing tail explains the
error, the two agree.

    python benchmarks/experts_reach.py [--seeds 5] [--steps 1000 4000 16000]
                                       [--augmented 3] [--out docs/experts_reach.md]

``ph.hais`` with 512 particles and its defaults (adaptive schedule, tuned step size and
diagonal scale), the core the evidence workflow's rungs run, keys 700 and up.
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
import trust_suite
from scipy import stats

import ppl_hais as ph

CASE = trust_suite.cases()["Student-t experts 36-D"]
POE = trust_suite.POE
PHI, LAM = POE.info["phi"], POE.info["lam"]
NU = 2 * LAM - 1
HEAVIEST = (0, 1, 2)  # λ = 0.75, 0.81, 0.88


def target():
    """The trust suite's potential model: N(0, I) prior, likelihood = experts / prior."""
    _, log_lik, dim, prior_sd = CASE["jax"]
    return ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(dim), prior_sd),
                              log_likelihood=log_lik)  # fmt: skip


def inside(reach):
    """log P(|u_l| ≤ reach_l for every l) under the exact target."""
    return float(np.sum(np.log1p(-2 * stats.t.sf(reach * np.sqrt(NU), NU))))


def quantile(level):
    return stats.t.ppf(0.5 + level / 2, NU) / np.sqrt(NU)


def augmented_model():
    """The experts as a Gaussian scale mixture: (1 + u²)^(−λ) = E[exp(−w u²)] over
    w ~ Gamma(λ, 1), so with w_l latent the target is Gaussian in z given w (the usual cure for
    Student-t tails in MCMC); same N(0, I) prior on z, evidence 1 (log 0)."""
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Gamma(jnp.asarray(LAM), 1.0).to_event(1))
    z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([36]).to_event(1))
    u = jnp.asarray(PHI) @ z
    log_prior = trust_suite.normal_logpdf(jnp, z, 1.0)
    numpyro.factor("experts", -jnp.sum(w * u * u) - log_prior - POE.log_z)


def run_augmented(seed):
    """The default NumPyro call on :func:`augmented_model`: (error, SE, checks that fired)."""
    from ppl_hais.adapters import numpyro as phn

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hais = phn.HAIS(augmented_model, progress_bar=False)
        hais.run(jax.random.key(700 + seed))
    ev = hais.evidence
    return ev.log_z, ev.log_z_se, [c.split(":")[0] for c in ev.checks]


def run(num_steps, seed):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ph.hais(jax.random.key(700 + seed), target(), num_particles=512,
                      num_steps=num_steps, progress_bar=False)  # fmt: skip
    reach = np.max(np.abs(np.asarray(res.particles) @ PHI.T), axis=0)
    return dict(err=res.log_z, se=res.log_z_se, lag=res.lag, shortfall=inside(reach),
                reach=reach, secs=time.perf_counter() - t0)  # fmt: skip


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, nargs="+", default=[1000, 4000, 16000])
    p.add_argument("--augmented", type=int, default=3,
                   help="keys for the default NumPyro call on the scale-mixture model")  # fmt: skip
    p.add_argument("--out", default="docs/experts_reach.md")
    args = p.parse_args()
    rows = []
    for num_steps in args.steps:
        run(num_steps, 0)  # compile
        for seed in range(args.seeds):
            r = run(num_steps, seed)
            rows.append((num_steps, seed, r))
            print(num_steps, seed, f"{r['err']:+.3f} {r['shortfall']:+.3f}", flush=True)
    err = np.array([r["err"] for *_, r in rows])
    short = np.array([r["shortfall"] for *_, r in rows])
    q90, q99 = quantile(0.9), quantile(0.99)
    lines = [
        "# The Student-t experts: the error is the mass beyond the particles' reach",
        "",
        f"`python benchmarks/experts_reach.py --seeds {args.seeds} --steps "
        f"{' '.join(map(str, args.steps))}` · {_machine.describe()} · "
        f"{datetime.date.today()}",
        "",
        "`ph.hais(key, target, num_particles=512, num_steps=N)` on the trust suite's 36-D "
        "product of Student-t experts (N(0, I) prior; exact log Z = 0), keys 700 and up. "
        "*reach*: the largest |u_l| = |Φ_l·z| over the final particles, for the three "
        "heaviest experts (λ = 0.75, 0.81, 0.88; their exact central 90% ends at "
        f"{q90[0]:.0f}, {q90[1]:.0f} and {q90[2]:.0f}, their 99% at {q99[0]:.0f}, "
        f"{q99[1]:.0f} and {q99[2]:.0f}); *reach shortfall*: log of the target's mass "
        "inside the box the particles reached, Σ_l log P(|u_l| ≤ reach_l), exact.",
        "",
        "| temperatures | key | error | SE | lag | reach shortfall | error − shortfall | "
        "reach (3 heaviest) | time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for num_steps, seed, r in rows:
        reach = ", ".join(f"{r['reach'][i]:.0f}" for i in HEAVIEST)
        lines.append(
            f"| {num_steps} | {700 + seed} | {r['err']:+.3f} | {r['se']:.3f} | "
            f"{r['lag']:.2f} | {r['shortfall']:+.3f} | {r['err'] - r['shortfall']:+.3f} | "
            f"{reach} | {r['secs']:.1f} |"
        )
    corr = float(np.corrcoef(err, short)[0, 1])
    # how the reach grows with the temperatures, and what a 0.1-nat shortfall would take
    lo, hi = min(args.steps), max(args.steps)
    reach = {(n, s): r["reach"] for n, s, r in rows}
    heavy = list(HEAVIEST)
    growth = float(np.median([np.log(reach[hi, s][heavy] / reach[lo, s][heavy])
                              for s in range(args.seeds)]) / np.log(hi / lo))  # fmt: skip
    last = np.median([reach[hi, s] for s in range(args.seeds)], axis=0)
    factor = next(c for c in np.geomspace(1, 1e4, 401) if inside(last * c) >= -0.1)
    lines += [
        "",
        f"{len(rows)} runs: error − reach shortfall {np.mean(err - short):+.3f} on average "
        f"(SD {np.std(err - short):.3f}; the errors' own SD {np.std(err):.3f}); correlation "
        f"of error and shortfall {corr:.2f}. The reach grows as N^{growth:.2f} (median over "
        f"keys and the three heaviest experts, {lo} → {hi} temperatures); a shortfall of "
        f"0.1 nat needs {factor:.1f}× the median reach at {hi}, about "
        f"{hi * factor ** (1 / growth):.1e} temperatures at that rate.",
    ]
    if args.augmented:
        runs = [run_augmented(seed) for seed in range(args.augmented)]
        cells = "; ".join(f"{700 + k}: {e:+.3f} (SE {se:.3f}; {', '.join(c) or 'no warning'})"
                          for k, (e, se, c) in enumerate(runs))  # fmt: skip
        lines += [
            "",
            "The experts as a Gaussian scale mixture (`augmented_model`: w_l ~ Gamma(λ_l, 1) "
            "latent, the expert exp(−w_l u_l²)), the default NumPyro call "
            f"`phn.HAIS(augmented_model).run(key)`, error (SE; checks that fired) by key: "
            f"{cells}.",
        ]
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
