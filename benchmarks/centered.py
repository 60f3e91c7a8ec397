"""Centered hierarchies: what the warning's non-centering note is worth. Default calls of
``phn.HAIS`` and ``php.sample_hais`` on two models written centered, and on the same models
reparameterized as each adapter's note says (NumPyro: ``numpyro.handlers.reparam`` with
``LocScaleReparam(0)``; PyMC: ``theta = pm.Deterministic('theta', tau * theta_z)`` with
``theta_z ~ Normal(0, 1)``): the same evidence.

    python benchmarks/centered.py [--seeds 5] [--out docs/centered.md] [--no-pymc]

Models:
- *schools*: θ_i ~ N(0, τ), τ ~ HalfCauchy(5), y_i ~ N(θ_i, 0.5²), 8 groups (y spread as
  eight schools'). Exact: y_i ~ N(0, τ² + 0.25) given τ, a 1-D integral on a grid.
- *horseshoe*: β_j ~ N(0, τ λ_j), τ, λ_j ~ HalfCauchy(1), y ~ N(Xβ, I), D = 10, n = 50 (three
  nonzero coefficients). Reference: β integrated out (y ~ N(0, I + X diag(τ²λ²) Xᵀ)), the
  mean over 8 M prior draws of (τ, λ), with its Monte Carlo SE.
*right*: |error| ≤ 0.1 nat (the horseshoe's, also counting the reference's SE); *warned*: an
``EvidenceWarning``; *noted*: the warning carried the non-centering note; *silent*: |error| >
3 SE + 0.05 without a warning; *gradients*: mean per call, everything counted; *time*: median
of the calls after a first (compiling) one.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer.reparam import LocScaleReparam
from scipy import stats

import ppl_hais as ph
from ppl_hais.adapters import numpyro as phn

SCHOOLS = np.array([25.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])


def schools(y):
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("g", y.shape[0]):
        theta = numpyro.sample("theta", dist.Normal(0.0, tau))
        numpyro.sample("y", dist.Normal(theta, 0.5), obs=y)


def schools_exact():
    grid = np.linspace(1e-4, 400.0, 400_001)
    log_f = stats.halfcauchy.logpdf(grid, scale=5.0) + stats.norm.logpdf(
        SCHOOLS[:, None], 0.0, np.sqrt(grid**2 + 0.25)).sum(0)  # fmt: skip
    return float(np.log(np.trapezoid(np.exp(log_f - log_f.max()), grid)) + log_f.max()), 0.0


def horseshoe_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 10))
    b = np.zeros(10)
    b[:3] = [2.0, -1.5, 1.0]
    return x, x @ b + rng.normal(size=50)


def horseshoe(x, y):
    tau = numpyro.sample("tau", dist.HalfCauchy(1.0))
    lam = numpyro.sample("lam", dist.HalfCauchy(1.0).expand([x.shape[1]]).to_event(1))
    beta = numpyro.sample("beta", dist.Normal(0.0, tau * lam).to_event(1))
    numpyro.sample("y", dist.Normal(x @ beta, 1.0), obs=y)


def horseshoe_reference(batches=40, size=200_000):
    """log E_prior p(y | τ, λ) with β integrated out, by prior Monte Carlo (float64)."""
    x, y = horseshoe_data()
    n, d = x.shape
    xtx, xty, yty = jnp.asarray(x.T @ x), jnp.asarray(x.T @ y), float(y @ y)

    def loglik(s2):  # y ~ N(0, I + X diag(s2) Xᵀ), by the matrix determinant lemma
        chol = jnp.linalg.cholesky(jnp.diag(1.0 / s2) + xtx)
        v = jax.scipy.linalg.solve_triangular(chol, xty, lower=True)
        log_det = jnp.sum(jnp.log(s2)) + 2 * jnp.sum(jnp.log(jnp.diag(chol)))
        return -0.5 * (n * jnp.log(2 * jnp.pi) + log_det + yty - v @ v)

    f = jax.jit(jax.vmap(loglik))
    key, out = jax.random.key(1), []
    for _ in range(batches):
        key, k1, k2 = jax.random.split(key, 3)
        tau = jnp.abs(jax.random.cauchy(k1, (size, 1)))
        lam = jnp.abs(jax.random.cauchy(k2, (size, d)))
        out.append(np.asarray(f((tau * lam) ** 2)))
    ll = np.concatenate(out)
    w = np.exp(ll - ll.max())
    return float(ll.max() + np.log(w.mean())), float(w.std() / w.mean() / np.sqrt(w.size))


def numpyro_call(model, args):
    def call(seed):
        h = phn.HAIS(model, progress_bar=False)
        h.run(jax.random.key(seed), *args)
        return h.evidence.log_z, h.evidence.log_z_se, h.evidence.gradients

    return call


def pymc_model(name, noncentered):
    """The same models as PyMC users write them; non-centered as the PyMC note says."""
    import pymc as pm

    x, y = horseshoe_data()
    with pm.Model() as m:
        if name == "schools":
            scale, size, obs, noise = pm.HalfCauchy("tau", 5.0), 8, SCHOOLS, 0.5
        else:
            tau, lam = pm.HalfCauchy("tau", 1.0), pm.HalfCauchy("lam", 1.0, shape=10)
            scale, size, noise = tau * lam, 10, 1.0
        site = "theta" if name == "schools" else "beta"
        if noncentered:
            z = pm.Normal(f"{site}_z", 0.0, 1.0, shape=size)
            value = pm.Deterministic(site, scale * z)
        else:
            value = pm.Normal(site, 0.0, scale, shape=size)
        mean = value if name == "schools" else pm.math.dot(x, value)
        pm.Normal("y", mean, noise, observed=obs if name == "schools" else y)
    return m


def pymc_call(model):
    from ppl_hais.adapters import pymc as php

    def call(seed):
        idata = php.sample_hais(model=model, random_seed=seed, progressbar=False)
        attrs = idata.sample_stats.attrs
        log_z, se = ph.compare.evidence_of(idata)[:2]
        return log_z, se, attrs["gradients"]

    return call


def run(call, seed):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ph.EvidenceWarning)
        t = time.perf_counter()
        log_z, se, gradients = call(seed)
        seconds = time.perf_counter() - t
    msgs = [str(w.message) for w in caught if issubclass(w.category, ph.EvidenceWarning)]
    return dict(log_z=log_z, se=se, warned=bool(msgs),
                noted=any("For this model" in m for m in msgs), gradients=gradients,
                seconds=seconds)  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default="docs/centered.md")
    ap.add_argument("--pymc", action=argparse.BooleanOptionalAction, default=True,
                    help="also the PyMC forms (--no-pymc: NumPyro's alone)")
    opts = ap.parse_args(argv)
    ph.enable_x64()
    x, y = horseshoe_data()
    cases = [("schools", schools, (jnp.asarray(SCHOOLS),), "theta", schools_exact()),
             ("horseshoe", horseshoe, (jnp.asarray(x), jnp.asarray(y)), "beta",
              horseshoe_reference())]  # fmt: skip
    rows = []
    for name, model, args, site, (exact, ref_se) in cases:
        reparam = numpyro.handlers.reparam(model, config={site: LocScaleReparam(0)})
        forms = [("numpyro", "centered", numpyro_call(model, args)),
                 ("numpyro", "non-centered as noted", numpyro_call(reparam, args))]
        if opts.pymc:
            forms += [("pymc", "centered", pymc_call(pymc_model(name, False))),
                      ("pymc", "non-centered as noted", pymc_call(pymc_model(name, True)))]
        for adapter, form, call in forms:  # fmt: skip
            run(call, 10_000)  # compiles
            runs = [run(call, s) for s in range(opts.seeds)]
            err = np.array([r["log_z"] - exact for r in runs])
            right = np.abs(err) <= 0.1 + 2 * ref_se
            silent = sum(abs(e) > 3 * r["se"] + 0.05 + 2 * ref_se and not r["warned"]
                         for e, r in zip(err, runs, strict=True))  # fmt: skip
            rows.append(
                f"| {name} | {adapter} | {form} | {exact:.3f} ± {ref_se:.3f} | {err.mean():+.3f} "
                f"({err.std():.3f}) | {err.min():+.3f} … {err.max():+.3f} | "
                f"{np.median([r['se'] for r in runs]):.3f} | {right.sum()}/{len(runs)} | "
                f"{sum(r['warned'] for r in runs)} | {sum(r['noted'] for r in runs)} | {silent} | "
                f"{np.mean([r['gradients'] for r in runs]) / 1e6:.2f} M | "
                f"{np.median([r['seconds'] for r in runs]):.1f} s |"
            )
            print(rows[-1], flush=True)
    cmd = "python benchmarks/centered.py " + " ".join(argv or sys.argv[1:])
    _machine.write(opts.out, [
        "# Centered hierarchies: the warning's non-centering note, followed", "",
        f"`{cmd.strip()}` · {_machine.describe()} · {time.strftime('%Y-%m-%d')} · default "
        f"`phn.HAIS(model).run(key, ...)` and `php.sample_hais(model=model, random_seed=seed)`, "
        f"keys and seeds 0–{opts.seeds - 1}", "",
        __doc__.split("\n\n", 2)[2].strip(), "",
        "| model | adapter | form | exact log Z | mean error (sd) | range | median SE | right "
        "| warned | noted | silent | gradients | time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ])  # fmt: skip


if __name__ == "__main__":
    main()
