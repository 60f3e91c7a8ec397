"""Can the default evidence be trusted? 13 models with exact evidence, default settings, many seeds.

For each model and seed: the error of log Ẑ against the exact value, the reported SE, whether
±2 SE covers the truth, whether an EvidenceWarning fired, and whether the run was a *silent
miss* (|error| > 3 SE + 0.05 without a warning). Bayesian models go through the evidence
workflow the adapters call (``ppl_hais.workflow.evidence.evidence``: initial="auto", 512 particles ×
1000 temperatures, the adapters' defaults); targets without a prior/likelihood split go
through ``ph.hais`` with its defaults and the initial distribution named. A last table compares
the vague-prior regression with a wrong tight-prior model.

    python benchmarks/trust.py --seeds 20 --out docs/trust.md
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
from _models import funnel, mixture
from scipy import integrate, special, stats

import ppl_hais as ph
from ppl_hais.model.target import num_draws
from ppl_hais.model.validation import product_of_experts
from ppl_hais.workflow.evidence import evidence


class Model:
    """A Bayesian model over flat unconstrained z: what an adapter hands the workflow."""

    improper = ()

    def __init__(self, dim, log_prior, log_likelihood, sample_prior):
        self.dim = dim
        self._log_prior = log_prior
        self.log_likelihood = log_likelihood
        self._sample = sample_prior

    def log_joint(self, z):
        return self._log_prior(z) + self.log_likelihood(z)

    @property
    def prior(self):
        return self

    def sample(self, rng_key, sample_shape=()):  # NumPyro's protocol over flat draws
        return self._sample(rng_key, num_draws(sample_shape)).reshape((*sample_shape, self.dim))

    def log_prob(self, z):
        return self._log_prior(z)


def _gauss_prior(dim, sd):
    def log_prior(z):
        return jnp.sum(-0.5 * (z / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi))

    def sample(key, n):
        return sd * jax.random.normal(key, (n, dim))

    return log_prior, sample


def regression(dim, rows, prior_sd, seed=0, true_sd=1.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, dim))
    y = x @ (true_sd * rng.normal(size=dim)) + rng.normal(size=rows)
    cov = np.eye(rows) + prior_sd**2 * x @ x.T
    exact = stats.multivariate_normal(np.zeros(rows), cov).logpdf(y)
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def log_lik(z):
        r = yj - xj @ z
        return -0.5 * jnp.sum(r * r) - 0.5 * rows * math.log(2 * math.pi)

    log_prior, sample = _gauss_prior(dim, prior_sd)
    return Model(dim, log_prior, log_lik, sample), float(exact)


def normal_normal(n=20, s0=2.0, seed=1):
    rng = np.random.default_rng(seed)
    y = rng.normal(1.0, 1.0, size=n)
    exact = stats.multivariate_normal(np.zeros(n), np.eye(n) + s0**2).logpdf(y)
    yj = jnp.asarray(y)
    lp, sample = _gauss_prior(1, s0)
    return Model(1, lp, lambda z: jnp.sum(stats_norm(yj, z[0], 1.0)), sample), float(exact)


def stats_norm(x, mu, sd):
    return -0.5 * ((x - mu) / sd) ** 2 - jnp.log(sd) - 0.5 * math.log(2 * math.pi)


def gamma_poisson(a=2.0, b=1.0, n=30, seed=2):
    y = np.random.default_rng(seed).poisson(3.0, size=n)
    s = y.sum()
    exact = (a * np.log(b) - special.gammaln(a) + special.gammaln(a + s)
             - (a + s) * np.log(b + n) - special.gammaln(y + 1).sum())  # fmt: skip
    yj = jnp.asarray(y, float)

    def log_prior(z):  # log λ, Jacobian λ
        lam = jnp.exp(z[0])
        return a * math.log(b) - special.gammaln(a) + a * z[0] - b * lam

    def log_lik(z):
        return jnp.sum(yj * z[0] - jnp.exp(z[0]) - jax.scipy.special.gammaln(yj + 1))

    def sample(key, n_):
        return jnp.log(jax.random.gamma(key, a, (n_, 1)) / b)

    return Model(1, log_prior, log_lik, sample), float(exact)


def beta_binomial(a=2.0, b=3.0, n=50, k=31):
    exact = (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
             + special.betaln(k + a, n - k + b) - special.betaln(a, b))  # fmt: skip

    def log_prior(z):  # logit p, Jacobian p(1 − p)
        lp, l1p = jax.nn.log_sigmoid(z[0]), jax.nn.log_sigmoid(-z[0])
        return (a * lp + b * l1p) - special.betaln(a, b)

    def log_lik(z):
        lp, l1p = jax.nn.log_sigmoid(z[0]), jax.nn.log_sigmoid(-z[0])
        c = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
        return c + k * lp + (n - k) * l1p

    def sample(key, n_):
        return jax.scipy.special.logit(jax.random.beta(key, a, b, (n_, 1)))

    return Model(1, log_prior, log_lik, sample), float(exact)


def normal_inverse_gamma(m0=0.0, k0=1.0, a0=3.0, b0=2.0, n=25, seed=3):
    y = np.random.default_rng(seed).normal(0.7, 1.3, size=n)
    kn, an = k0 + n, a0 + n / 2
    bn = b0 + 0.5 * np.sum((y - y.mean()) ** 2) + k0 * n * (y.mean() - m0) ** 2 / (2 * kn)
    exact = (special.gammaln(an) - special.gammaln(a0) + a0 * np.log(b0) - an * np.log(bn)
             + 0.5 * np.log(k0 / kn) - 0.5 * n * np.log(2 * np.pi))  # fmt: skip
    yj = jnp.asarray(y)

    def log_prior(z):  # z = (μ, log σ²)
        s2 = jnp.exp(z[1])
        lig = a0 * math.log(b0) - special.gammaln(a0) - (a0 + 1) * z[1] - b0 / s2 + z[1]
        return lig + stats_norm(z[0], m0, jnp.sqrt(s2 / k0))

    def log_lik(z):
        return jnp.sum(stats_norm(yj, z[0], jnp.exp(0.5 * z[1])))

    def sample(key, n_):
        k1, k2 = jax.random.split(key)
        s2 = b0 / jax.random.gamma(k1, a0, (n_,))
        mu = m0 + jnp.sqrt(s2 / k0) * jax.random.normal(k2, (n_,))
        return jnp.stack([mu, jnp.log(s2)], axis=1)

    return Model(2, log_prior, log_lik, sample), float(exact)


def eight_schools():
    """Centered eight schools: μ ~ N(0, 5), τ ~ HalfCauchy(5), θ_j ~ N(μ, τ), y_j ~ N(θ_j, σ_j).
    Exact: θ and μ integrate out in closed form, τ by quadrature."""
    y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12])
    sig = np.array([15.0, 10, 16, 11, 9, 11, 10, 18])

    def marginal(tau):  # y ~ N(0, diag(σ² + τ²) + 25·11ᵀ)
        cov = np.diag(sig**2 + tau**2) + 25.0
        return stats.multivariate_normal(np.zeros(8), cov).pdf(y) * 2 * stats.cauchy(0, 5).pdf(tau)

    val, _ = integrate.quad(marginal, 0, np.inf, epsabs=0, epsrel=1e-10, limit=200)
    yj, sj = jnp.asarray(y), jnp.asarray(sig)

    def log_prior(z):  # z = (μ, log τ, θ_1..8)
        mu, log_tau, theta = z[0], z[1], z[2:]
        tau = jnp.exp(log_tau)
        lp = stats_norm(mu, 0.0, 5.0) + math.log(2 / (5 * math.pi)) - jnp.log1p((tau / 5) ** 2)
        return lp + log_tau + jnp.sum(stats_norm(theta, mu, tau))

    def log_lik(z):
        return jnp.sum(stats_norm(yj, z[2:], sj))

    def sample(key, n_):
        k1, k2, k3 = jax.random.split(key, 3)
        mu = 5.0 * jax.random.normal(k1, (n_, 1))
        tau = jnp.abs(5.0 * jax.random.cauchy(k2, (n_, 1)))
        theta = mu + tau * jax.random.normal(k3, (n_, 8))
        return jnp.concatenate([mu, jnp.log(tau), theta], axis=1)

    return Model(10, log_prior, log_lik, sample), float(np.log(val))


# targets without a prior/likelihood split (core ph.hais with the stated initial)


def far_narrow(dim=5):
    def ld(z):
        return -0.5 * jnp.sum(((z - 10.0) / 0.01) ** 2)

    return ph.AnnealingTarget(ld, ph.Gaussian(np.zeros(dim))), 0.5 * dim * np.log(2 * np.pi * 1e-4)


def cases():
    poe = product_of_experts("student", 36)
    vague = regression(3, 500, 100.0, seed=6, true_sd=2.0)
    return {
        # name: (kind, model or target, exact, easy, note)
        "normal-normal (1-D)": ("model", *normal_normal(), True, "conjugate"),
        "regression 5-D": ("model", *regression(5, 50, 1.0, seed=4), True, "N(0,1) prior"),
        "regression 20-D": ("model", *regression(20, 50, 1.0, seed=5), True, "N(0,1) prior"),
        "gamma-Poisson": ("model", *gamma_poisson(), True, "log link"),
        "beta-binomial": ("model", *beta_binomial(), True, "logit"),
        "normal-inverse-gamma": ("model", *normal_inverse_gamma(), True, "(μ, log σ²)"),
        "vague regression": ("model", *vague, False, "prior sd 100, 500 rows"),
        "vague regression, initial='prior'": ("prior", *vague, False, "the old default start"),
        "eight schools (centered)": ("model", *eight_schools(), False, "funnel geometry"),
        "far narrow Gaussian 5-D": ("target", *far_narrow(), False, "N(10, 0.01²) from N(0, I)"),
        "Student-t experts 36-D": ("target", poe.target, poe.log_z, False, "λ 0.75..3, N(0, I)"),
        "funnel 10-D": ("target", *funnel(), False, "Neal's, from N(0, I)"),
        "two-mode mixture 5-D": ("target", *mixture(), False, "modes ±4, from N(0, 3²I)"),
    }  # fmt: skip


def run_one(kind, obj, seed, particles, steps):
    key = jax.random.key(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ph.EvidenceWarning)
        start = time.perf_counter()
        if kind == "target":
            r = ph.hais(key, obj, num_particles=particles, num_steps=steps, progress_bar=False)
            log_z, se, res, initial = r.log_z, r.log_z_se, [r], "given"
        else:
            ev = evidence(key, obj, initial="prior" if kind == "prior" else "auto",
                          num_particles=particles, num_steps=steps, progress_bar=False)  # fmt: skip
            log_z, se, res, initial = ev.log_z, ev.log_z_se, ev.results, ev.initial
        wall = time.perf_counter() - start
    warned = any(issubclass(w.category, ph.EvidenceWarning) for w in caught)
    grads = sum(
        r.num_particles * r.settings.gradients_per_particle
        + r.settings.num_pilot_particles * r.settings.pilot_gradients_per_particle
        for r in res
    )
    return dict(log_z=log_z, se=se, warned=warned, grads=grads, wall=wall, initial=initial,
                khat=max(r.pareto_k for r in res))  # fmt: skip


def comparison(seeds, particles, steps):
    """Vague-prior regression (the true model) against the same data under a tight wrong prior."""
    true_model, true_exact = regression(3, 500, 100.0, seed=6, true_sd=2.0)
    wrong_model, wrong_exact = regression(3, 500, 0.1, seed=6, true_sd=2.0)
    right, probs, warned = 0, [], 0
    for s in range(seeds):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ph.EvidenceWarning)
            a = evidence(jax.random.key(s), true_model, num_particles=particles,
                         num_steps=steps, progress_bar=False)  # fmt: skip
            b = evidence(jax.random.key(s + 1000), wrong_model, num_particles=particles,
                         num_steps=steps, progress_bar=False)  # fmt: skip
            table = ph.compare_evidence({"vague (true)": a, "tight (wrong)": b})
        warned += any(issubclass(w.category, ph.EvidenceWarning) for w in caught)
        right += table.index[0] == "vague (true)"
        probs.append(table.loc["vague (true)", "prob"])
    return dict(exact_diff=true_exact - wrong_exact, right=right, seeds=seeds,
                prob=np.nanmedian(probs) if np.any(np.isfinite(probs)) else float("nan"),
                warned=warned)  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--particles", type=int, default=512)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--only", default=None, help="run the models whose name contains this")
    p.add_argument("--out", default="docs/trust.md")
    args = p.parse_args()
    ph.enable_x64()
    rows = []
    for name, (kind, obj, exact, easy, note) in cases().items():
        if args.only and args.only not in name:
            continue
        runs = [run_one(kind, obj, s, args.particles, args.steps) for s in range(args.seeds)]
        err = np.array([r["log_z"] - exact for r in runs])
        se = np.array([r["se"] for r in runs])
        warned = np.array([r["warned"] for r in runs])
        covered = np.abs(err) <= 2 * se
        silent = (np.abs(err) > 3 * se + 0.05) & ~warned
        ok = ~warned
        rows.append(dict(
            name=name, note=note, easy=easy, exact=exact,
            mean_err=err.mean(), rms=np.sqrt(np.mean(err**2)), med_se=np.median(se),
            inf_se=int(np.sum(np.isinf(se))), warned=int(warned.sum()),
            cover_ok=(covered[ok].mean() if ok.any() else float("nan")), n_ok=int(ok.sum()),
            silent=int(silent.sum()), khat=np.median([r["khat"] for r in runs]),
            grads=np.median([r["grads"] for r in runs]),
            wall=np.median([r["wall"] for r in runs[1:]] or [runs[0]["wall"]]),
            initial=",".join(sorted({r["initial"] for r in runs})), seeds=args.seeds,
        ))  # fmt: skip
        r = rows[-1]
        print(f"{name:36s} err {r['mean_err']:+.3f} rms {r['rms']:.3f} se {r['med_se']:.3f} "
              f"warned {r['warned']}/{args.seeds} cover(no warn) {r['cover_ok']:.2f} "
              f"silent {r['silent']} k {r['khat']:.2f} {r['wall']:.2f}s", flush=True)  # fmt: skip
    cmp = None if args.only else comparison(args.seeds, args.particles, args.steps)
    write(args, rows, cmp)


def write(args, rows, cmp):
    lines = [
        "# Trust: default evidence on models with exact answers",
        "",
        f"`python benchmarks/trust.py --seeds {args.seeds}` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · {args.particles} particles × {args.steps} temperatures",
        "",
        "Bayesian models run through the evidence workflow the adapters call "
        "(`ppl_hais.workflow.evidence.evidence`, `initial='auto'`); the other targets through "
        "`ph.hais` with its defaults and the initial distribution named. *warned*: an "
        "`EvidenceWarning` fired. *cover*: ±2 SE covers the exact value, among runs without a "
        "warning. *silent miss*: |error| > 3 SE + 0.05 without a warning (goal: 0). *k̂*: median "
        "Pareto k̂. *gradients*: per run, all particles, pilot(s) included. *time*: median wall "
        "time of a call after the first (compiled).",
        "",
        "| model | note | start | mean error | rms error | median SE | SE = inf | warned | "
        "cover (no warning) | silent misses | k̂ | gradients | time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cover = "—" if not r["n_ok"] else f"{r['cover_ok']:.0%} of {r['n_ok']}"
        lines.append(
            f"| {r['name']}{'' if r['easy'] else ' †'} | {r['note']} | {r['initial']} | "
            f"{r['mean_err']:+.3f} | {r['rms']:.3f} | {r['med_se']:.3f} | {r['inf_se']} | "
            f"{r['warned']}/{r['seeds']} | {cover} | {r['silent']} | {r['khat']:.2f} | "
            f"{r['grads']:.3g} | {r['wall']:.2f} |"
        )
    easy = [r for r in rows if r["easy"]]
    lines += [
        "",
        "† not an easy model. Goals: (i) no silent miss; (ii) among runs without a "
        "warning ±2 SE covers ≥ 90%; (iii) warnings on < 10% of the easy models' runs.",
        "",
        f"- silent misses, all models: {sum(r['silent'] for r in rows)} of "
        f"{sum(r['seeds'] for r in rows)} runs",
        f"- warnings on easy models: {sum(r['warned'] for r in easy)} of "
        f"{sum(r['seeds'] for r in easy)} runs",
    ]
    n_ok = sum(r["n_ok"] for r in rows)
    if n_ok:
        cov = sum(r["cover_ok"] * r["n_ok"] for r in rows if r["n_ok"]) / n_ok
        lines.append(f"- coverage of ±2 SE among runs without a warning: {cov:.1%} of {n_ok}")
    if cmp:
        lines += [
            "",
            "## Comparison: vague-prior regression (true) against a tight wrong prior",
            "",
            f"Exact log Bayes factor true − wrong: {cmp['exact_diff']:.1f}. "
            f"`compare_evidence` ranked the true model first in {cmp['right']} of "
            f"{cmp['seeds']} seeds; median probability of the true model "
            f"{cmp['prob']:.3f}; a warning fired in {cmp['warned']} seeds.",
        ]
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
