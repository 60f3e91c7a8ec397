"""The trust suite: eight hard-but-ordinary models through both adapters' default calls.

Models (each written the way a NumPyro or a PyMC user writes it, exact log evidence in closed form,
by enumeration or by quadrature): Neal's funnel from N(0, I) (a potential on a N(0, I) prior), a
centered 10-D funnel with weak data (a hierarchical model as users write it first; not run through
BlackJAX, whose runner draws iid normals, not this prior), a two-mode mixture, a mixture with its
assignments enumerated (NumPyro's ``config_enumerate``; PyMC's ``NormalMixture``), a banana, the
36-D product of Student-t experts (on iid Cauchy priors: :func:`potential_case`), a 50-D
regression with ``chains=4`` and a regression under vague N(0, 100²) priors.

Two modes:

* ``--collect FILE``: the features the decision rule is derived from. Per adapter, model and
  seed (seeds 500 and up through NumPyro, 600 and up through PyMC: the potential models
  translate to the same density, so the two adapters add independent runs), the rungs 1000,
  4000 and 16,000 temperatures (independent runs, ``bias_check=True``;
  a rung is run only while the previous one gave a reason to look further, as the ladder
  would), each with its estimate, SE, k̂, largest weight, ESS, lag, outside fraction, bias
  gap, gradients and time. ``python benchmarks/calibrate_ladder.py FILE`` replays the ladder's
  rule on them (docs/calibration.md).
* default: the default calls (``phn.HAIS(model).run(key, ...)``,
  ``php.sample_hais(random_seed=...)``), per model the error, SE, bias gap, warnings, false
  alarms, silent misses, whether the stated shortfall covers the error, gradients and time,
  written to ``--out`` (docs/trust_suite.md). ``--adapters blackjax,blackjax-long`` runs
  BlackJAX's adaptive tempered SMC on the same log prior and likelihood instead.

``--models heldout`` runs ``benchmarks/trust_heldout.py``'s eleven targets (Gaussians, Cauchy,
Student-t, funnels, a Laplace; no threshold was chosen on them) through the same default calls;
``--models ppl`` six two-parameter models written with each PPL's own distributions (a Bayesian
lasso, Poisson and near-separable logistic regressions, Student-t and Cauchy location-scale models,
a label-switching mixture), exact by quadrature; ``--models ridges`` 10-D bananas whose nine other
coordinates all bend with the first, a ridge winding in 8-D and a thin 2-D ring (the bananas
not yet right: see docs/trust_suite_ridges.md). ``make bench``
writes the default suite's page, BlackJAX's rows beside ours:

    python benchmarks/trust_suite.py --seeds 20 --adapters numpyro,pymc,blackjax,blackjax-long \
        --out docs/trust_suite.md
    python benchmarks/trust_suite.py --models heldout --seeds 10 --first-seed 100
    python benchmarks/trust_suite.py --models ppl --seeds 10 --first-seed 200

Every call tunes from its own key (no memory is shared), so a row measures the tuning over as
many pilots as seeds; one model and adapter alone:

    python benchmarks/trust_suite.py --seeds 16 --only "funnel 10-D" --adapters numpyro
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import shlex
import sys
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

import ppl_hais as ph
from ppl_hais.model.validation import product_of_experts

LOG2PI = math.log(2 * math.pi)


# -- target densities, written once for jax.numpy and pytensor (``m`` is either module) -----
def funnel_logpdf(m, z, dim=10):
    v, x = z[0], z[1:]
    return (-0.5 * (v / 3.0) ** 2 - 0.5 * m.sum(x * x) * m.exp(-v) - 0.5 * (dim - 1) * v
            - 0.5 * dim * LOG2PI - math.log(3.0))  # fmt: skip


def mixture_logpdf(m, z, dim=5, sep=4.0, sd=0.5):
    a = -0.5 * m.sum(((z - sep) / sd) ** 2)
    b = -0.5 * m.sum(((z + sep) / sd) ** 2)
    return m.logaddexp(a, b) - math.log(2.0) - 0.5 * dim * math.log(2 * math.pi * sd * sd)


def banana_logpdf(m, z, b=0.03, sd1=10.0):
    y2 = z[1] - b * (z[0] ** 2 - sd1**2)
    return -0.5 * (z[0] / sd1) ** 2 - 0.5 * y2**2 - math.log(2 * math.pi * sd1)


POE = product_of_experts("student", 36)


def experts_logpdf(m, z):
    u = m.dot(POE.info["phi"], z)
    return -m.sum(m.log1p(u * u) * POE.info["lam"]) - POE.log_z


def normal_logpdf(m, z, sd):
    return m.sum(-0.5 * (z / sd) ** 2) - z.shape[0] * (0.5 * LOG2PI + math.log(sd))


def regression_data(dim, rows, prior_sd, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, dim))
    y = x @ rng.normal(size=dim) + rng.normal(size=rows)
    exact = stats.multivariate_normal(np.zeros(rows), np.eye(rows) + prior_sd**2 * x @ x.T)
    return x, y, float(exact.logpdf(y))


def mixture_data(n=12, seed=3):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -2.0, 2.0) + rng.normal(size=n)
    terms = []
    for c in itertools.product((0, 1), repeat=n):  # every assignment: y | c ~ N(0, I + 9 AAᵀ)
        a = np.eye(2)[list(c)]
        cov = np.eye(n) + 9.0 * a @ a.T
        terms.append(stats.multivariate_normal(np.zeros(n), cov).logpdf(y))
    return y, float(special.logsumexp(terms) - n * math.log(2.0))


# -- the models in each PPL ---------------------------------------------------------------------
def cauchy_logpdf(m, z, scale):
    return m.sum(-m.log1p((z / scale) ** 2)) - z.shape[0] * math.log(math.pi * scale)


def potential_case(logpdf, dim, prior_sd, prior="normal"):
    """A N(0, prior_sd² I) prior (``prior="cauchy"``: iid Cauchy(0, prior_sd)) times the
    potential logpdf − log prior: evidence = the normalized logpdf's integral, 1 (log 0).

    A target with tails as heavy as a Student-t's of ½ degree of freedom puts draws at |z| of
    1e8, where a normal prior's log density (−5e16) and the potential less it (+5e16) cancel
    to within float64's spacing there, 8: the model's log joint errs by tens of nats. A Cauchy
    prior's log density grows as 2 log |z|, so that target keeps its exact log joint."""
    prior_logpdf = cauchy_logpdf if prior == "cauchy" else normal_logpdf

    def numpyro_model():
        import numpyro
        import numpyro.distributions as dist

        base = dist.Cauchy if prior == "cauchy" else dist.Normal
        z = numpyro.sample("z", base(0.0, prior_sd).expand([dim]).to_event(1))
        numpyro.factor("target", logpdf(jnp, z) - prior_logpdf(jnp, z, prior_sd))

    def pymc_model():
        import pymc as pm
        import pytensor.tensor as pt

        with pm.Model() as model:
            z = (pm.Cauchy if prior == "cauchy" else pm.Normal)("z", 0.0, prior_sd, shape=dim)
            pm.Potential("target", logpdf(pt, z) - prior_logpdf(pt, z, prior_sd))
        return model

    draws = (lambda key, shape: prior_sd * jax.random.cauchy(key, shape)) if prior == "cauchy" \
        else None  # fmt: skip
    return dict(numpyro=(numpyro_model, ()), pymc=pymc_model, exact=0.0, chains=1,
                jax=(lambda z: prior_logpdf(jnp, z, prior_sd),
                     lambda z: logpdf(jnp, z) - prior_logpdf(jnp, z, prior_sd), dim,
                     prior_sd), prior_draws=draws)  # fmt: skip


def regression_case(dim, rows, prior_sd, seed, chains):
    x, y, exact = regression_data(dim, rows, prior_sd, seed)

    def numpyro_model(x, y):
        import numpyro
        import numpyro.distributions as dist

        w = numpyro.sample("w", dist.Normal(0.0, prior_sd).expand([dim]).to_event(1))
        numpyro.sample("y", dist.Normal(x @ w, 1.0).to_event(1), obs=y)

    def pymc_model():
        import pymc as pm

        with pm.Model() as model:
            w = pm.Normal("w", 0.0, prior_sd, shape=dim)
            pm.Normal("y", pm.math.dot(x, w), 1.0, observed=y)
        return model

    xj, yj = jnp.asarray(x), jnp.asarray(y)
    return dict(numpyro=(numpyro_model, (xj, yj)), pymc=pymc_model, exact=exact, chains=chains,
                jax=(lambda w: normal_logpdf(jnp, w, prior_sd),
                     lambda w: normal_logpdf(jnp, yj - xj @ w, 1.0), dim, prior_sd))  # fmt: skip


def enumerated_mixture_case():
    y, exact = mixture_data()

    def numpyro_model(y):
        import numpyro
        import numpyro.distributions as dist
        from numpyro.contrib.funsor import config_enumerate

        @config_enumerate
        def model(y):
            mu = numpyro.sample("mu", dist.Normal(0.0, 3.0).expand([2]).to_event(1))
            with numpyro.plate("data", y.shape[0]):
                c = numpyro.sample("c", dist.Bernoulli(0.5))
                numpyro.sample("y", dist.Normal(mu[c.astype(jnp.int32)], 1.0), obs=y)

        return model(y)

    def pymc_model():
        import pymc as pm

        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 3.0, shape=2)
            pm.NormalMixture("y", w=np.array([0.5, 0.5]), mu=mu, sigma=1.0, observed=y)
        return model

    def log_lik(mu):  # the assignments summed out, as both PPLs do
        yj = jnp.asarray(y)[:, None]
        return jnp.sum(jax.scipy.special.logsumexp(-0.5 * (yj - mu) ** 2, axis=1)
                       - math.log(2.0) - 0.5 * LOG2PI)  # fmt: skip

    return dict(numpyro=(numpyro_model, (jnp.asarray(y),)), pymc=pymc_model, exact=exact,
                chains=1,
                jax=(lambda mu: normal_logpdf(jnp, mu, 3.0), log_lik, 2, 3.0))  # fmt: skip


def centered_funnel_case(dim=10, noise=1.0, scale=0.1, seed=0):
    """A hierarchical model as users write it first (centered): v ~ N(0, 3²), x_i ~ N(0, eᵛ),
    y_i ~ N(x_i, noise²), with weak data. x integrates out (y_i ~ N(0, eᵛ + noise²)), leaving a
    1-D integral over v, done on a fine grid."""
    y = np.random.default_rng(seed).normal(size=dim) * scale
    v = np.linspace(-60.0, 25.0, 400_001)
    log_f = stats.norm(0.0, 3.0).logpdf(v) + stats.norm.logpdf(
        y[:, None], 0.0, np.sqrt(np.exp(v) + noise**2)).sum(0)  # fmt: skip
    exact = float(special.logsumexp(log_f) + np.log(v[1] - v[0]))

    def numpyro_model(y):
        import numpyro
        import numpyro.distributions as dist

        v = numpyro.sample("v", dist.Normal(0.0, 3.0))
        x = numpyro.sample("x", dist.Normal(0.0, jnp.exp(v / 2)).expand([dim]).to_event(1))
        numpyro.sample("y", dist.Normal(x, noise).to_event(1), obs=y)

    def pymc_model():
        import pymc as pm

        with pm.Model() as model:
            v = pm.Normal("v", 0.0, 3.0)
            x = pm.Normal("x", 0.0, pm.math.exp(v / 2), shape=dim)
            pm.Normal("y", x, noise, observed=y)
        return model

    # no "jax" entry: BlackJAX's runner starts from iid normal draws, not this prior
    return dict(numpyro=(numpyro_model, (jnp.asarray(y),)), pymc=pymc_model, exact=exact,
                chains=1, jax=None)


def cases():
    return {
        "funnel 10-D": potential_case(funnel_logpdf, 10, 1.0),
        "centered funnel 10-D, weak data": centered_funnel_case(),
        "two-mode mixture 5-D": potential_case(mixture_logpdf, 5, 3.0),
        "enumerated mixture": enumerated_mixture_case(),
        "banana 2-D": potential_case(banana_logpdf, 2, 3.0),
        "Student-t experts 36-D": potential_case(experts_logpdf, 36, 1.0, prior="cauchy"),
        "regression 50-D, chains=4": regression_case(50, 100, 1.0, seed=7, chains=4),
        "regression 5-D, vague N(0, 100²)": regression_case(5, 40, 100.0, seed=8, chains=1),
    }


def student_logpdf(nu):
    one = special.gammaln(nu / 2) + 0.5 * math.log(nu * math.pi) - special.gammaln((nu + 1) / 2)
    return lambda m, z: m.sum(-(nu + 1) / 2 * m.log1p(z * z / nu)) - z.shape[0] * one


def laplace_logpdf(b):
    return lambda m, z: -m.sum(abs(z)) / b - z.shape[0] * math.log(2 * b)


def scaled_funnel_logpdf(sd_v):
    def logpdf(m, z):  # v ~ N(0, sd_v²), x_i | v ~ N(0, eᵛ)
        v, x, dim = z[0], z[1:], z.shape[0]
        return (-0.5 * (v / sd_v) ** 2 - 0.5 * m.sum(x * x) * m.exp(-v) - 0.5 * (dim - 1) * v
                - 0.5 * dim * LOG2PI - math.log(sd_v))  # fmt: skip

    return logpdf


def heldout_cases():
    """``benchmarks/trust_heldout.py``'s eleven targets (normalized: exact log Z = 0), each a
    potential on a N(0, I) prior as there: models no threshold of the checks was chosen on."""
    return {
        "Gaussian 10-D, sd 3": potential_case(lambda m, z: normal_logpdf(m, z, 3.0), 10, 1.0),
        "Gaussian 10-D, sd 10": potential_case(lambda m, z: normal_logpdf(m, z, 10.0), 10, 1.0),
        "Gaussian 50-D, sd 3": potential_case(lambda m, z: normal_logpdf(m, z, 3.0), 50, 1.0),
        "Gaussian 20-D, sd 0.1": potential_case(lambda m, z: normal_logpdf(m, z, 0.1), 20, 1.0),
        "Cauchy 10-D": potential_case(student_logpdf(1.0), 10, 1.0),
        "Student-t 10-D, ν = 3": potential_case(student_logpdf(3.0), 10, 1.0),
        "Student-t 10-D, ν = 10": potential_case(student_logpdf(10.0), 10, 1.0),
        "Student-t 30-D, ν = 2": potential_case(student_logpdf(2.0), 30, 1.0),
        "funnel 5-D, sd(v) = 2": potential_case(scaled_funnel_logpdf(2.0), 5, 1.0),
        "funnel 20-D, sd(v) = 3": potential_case(scaled_funnel_logpdf(3.0), 20, 1.0),
        "Laplace 20-D, b = 2": potential_case(laplace_logpdf(2.0), 20, 1.0),
    }


def twisted_banana_logpdf(dim, b, sd1=10.0):
    """A normalized banana in ``dim`` dimensions: z₀ ~ N(0, sd1²) and every other coordinate
    N(b (z₀² − sd1²), 1), so each of them bends with z₀ (the 2-D banana's, in 10-D)."""

    def logpdf(m, z):
        y = z[1:] - b * (z[0] ** 2 - sd1**2)
        return (-0.5 * (z[0] / sd1) ** 2 - 0.5 * m.sum(y * y) - math.log(sd1)
                - 0.5 * dim * LOG2PI)  # fmt: skip

    return logpdf


def sine_ridge_logpdf(dim, amplitude=1.5, width=0.2, sd1=2.0):
    """A normalized ridge that winds: z₀ ~ N(0, sd1²) and coordinate i ≥ 1
    N(amplitude · sin(z₀ + i), width²), each bending with z₀ at its own phase."""

    def logpdf(m, z):
        phase = np.arange(1, dim)
        y = (z[1:] - amplitude * m.sin(z[0] + phase)) / width
        return (-0.5 * (z[0] / sd1) ** 2 - 0.5 * m.sum(y * y) - math.log(sd1)
                - (dim - 1) * math.log(width) - 0.5 * dim * LOG2PI)  # fmt: skip

    return logpdf


def ring_logpdf(radius=3.0, width=0.15):
    """A normalized 2-D ring: density ∝ exp(−(|z| − radius)² / (2 width²)), whose integral
    2π (width² e^{−radius²/(2 width²)} + radius · width · √(2π) Φ(radius/width)) is exact."""
    from scipy.stats import norm

    log_norm = math.log(2 * math.pi * (width**2 * math.exp(-(radius**2) / (2 * width**2))
                        + radius * width * math.sqrt(2 * math.pi) * norm.cdf(radius / width)))

    def logpdf(m, z):
        rho = m.sqrt(m.sum(z * z))
        return -0.5 * ((rho - radius) / width) ** 2 - log_norm

    return logpdf


def ridge_cases():
    """Curved ridges written as a factor over N(0, 3² I) priors (exact log Z = 0): bananas
    whose nine other coordinates all bend with the first, as a user writes a banana in 10-D;
    beside them two ridges no threshold was set on, a ridge winding in 8-D and a thin ring."""
    out = {f"twisted banana 10-D, b = {b}": potential_case(twisted_banana_logpdf(10, b), 10, 3.0)
           for b in (0.03, 0.1)}  # fmt: skip
    out["sine ridge 8-D"] = potential_case(sine_ridge_logpdf(8), 8, 3.0)
    out["ring 2-D"] = potential_case(ring_logpdf(), 2, 3.0)
    return out


def hierarchy_data(sizes, tau, sigma, seed):
    """Random-intercept data: group g has ``sizes[g]`` rows, y = 0.3 + 0.8 x + u_g + ε with
    u_g ~ N(0, tau²), ε ~ N(0, sigma²)."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.normal(size=group.size)
    u = tau * rng.normal(size=len(sizes))
    return group, x, 0.3 + 0.8 * x + u[group] + sigma * rng.normal(size=group.size)


def hierarchy_log_z(group, x, y, n=401):
    """log p(y) of :func:`hierarchy_case`'s model: the intercept, slope and group effects
    integrate out in closed form (a Gaussian whose covariance is block-diagonal by group plus
    rank 2: Sherman–Morrison per group, Woodbury for the coefficients), leaving a 2-D integral
    over (log σ, log τ), done on a grid refined around its mass."""
    counts = np.bincount(group)
    rows = np.stack([np.ones_like(x), x], axis=1)
    sy, sx = np.bincount(group, y), np.stack([np.bincount(group, r) for r in rows.T], 1)
    syy, sxy = np.bincount(group, y * y), np.stack([np.bincount(group, r * y) for r in rows.T], 1)
    sxx = np.stack([np.stack([np.bincount(group, rows[:, i] * rows[:, j]) for j in (0, 1)], -1)
                    for i in (0, 1)], -2)  # (G, 2, 2)  # fmt: skip

    def log_f(ls, lt):
        s2, t2 = np.exp(2 * ls)[:, None], np.exp(2 * lt)[:, None]  # (M, 1)
        c = t2 / (s2 + counts * t2)  # (M, G): each group's Sherman–Morrison weight
        quad = (syy - c * sy**2).sum(1) / s2[:, 0]
        xtx = (sxx[None] - c[..., None, None] * sx[None, :, :, None] * sx[None, :, None, :]
               ).sum(1) / s2[:, :, None]  # fmt: skip
        xty = (sxy[None] - c[..., None] * sx[None] * sy[None, :, None]).sum(1) / s2
        logdet = ((counts - 1) * np.log(s2) + np.log(s2 + counts * t2)).sum(1)
        inner = np.eye(2)[None] + xtx  # prior covariance of the coefficients: I
        sol = np.linalg.solve(inner, xty[..., None])[..., 0]
        logdet += np.linalg.slogdet(inner)[1]
        quad -= np.einsum("mi,mi->m", xty, sol)
        log_lik = -0.5 * (y.size * LOG2PI + logdet + quad)
        half = stats.halfnorm.logpdf  # both scales ~ N⁺(0, 1), in log coordinates
        return log_lik + half(np.exp(ls)) + half(np.exp(lt)) + ls + lt

    lo, hi = np.array([-10.0, -30.0]), np.array([3.0, 3.0])  # τ → 0 keeps mass ∝ τ
    for _ in range(3):  # each pass: the box where the integrand is within e⁻⁴⁰ of its peak
        a, b = np.meshgrid(np.linspace(lo[0], hi[0], n), np.linspace(lo[1], hi[1], n))
        v = np.concatenate([log_f(a.ravel()[i:i + 4096], b.ravel()[i:i + 4096])
                            for i in range(0, a.size, 4096)])  # (4096, G, 2, 2) at a time
        keep = v > v.max() - 40
        step = (hi - lo) / (n - 1)
        total = special.logsumexp(v) + np.log(step.prod())
        lo = np.array([a.ravel()[keep].min(), b.ravel()[keep].min()]) - 2 * step
        hi = np.array([a.ravel()[keep].max(), b.ravel()[keep].max()]) + 2 * step
    return float(total)


def hierarchy_case(sizes, tau, sigma, seed):
    """A random-intercept regression as users write it (centered group effects):
    α, β ~ N(0, 1), τ, σ ~ N⁺(0, 1), u_g ~ N(0, τ²), y ~ N(α + β x + u_group, σ²)."""
    group, x, y = hierarchy_data(sizes, tau, sigma, seed)
    exact, num_groups = hierarchy_log_z(group, x, y), len(sizes)

    def numpyro_model(group, x, y):
        import numpyro
        import numpyro.distributions as dist

        a = numpyro.sample("a", dist.Normal(0.0, 1.0))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0))
        t = numpyro.sample("tau", dist.HalfNormal(1.0))
        s = numpyro.sample("sigma", dist.HalfNormal(1.0))
        with numpyro.plate("groups", num_groups):
            u = numpyro.sample("u", dist.Normal(0.0, t))
        with numpyro.plate("rows", y.shape[0]):
            numpyro.sample("y", dist.Normal(a + b * x + u[group], s), obs=y)

    def pymc_model():
        import pymc as pm

        with pm.Model() as model:
            a, b = pm.Normal("a", 0.0, 1.0), pm.Normal("b", 0.0, 1.0)
            t, s = pm.HalfNormal("tau", 1.0), pm.HalfNormal("sigma", 1.0)
            u = pm.Normal("u", 0.0, t, shape=num_groups)
            pm.Normal("y", a + b * x + u[group], s, observed=y)
        return model

    return dict(numpyro=(numpyro_model, (group, jnp.asarray(x), jnp.asarray(y))),
                pymc=pymc_model, exact=exact, chains=1, jax=None)  # fmt: skip


def user_cases():
    """The models users fit, beside NUTS + bridge sampling and pm.sample_smc: hierarchies of
    hundreds of parameters, heavy tails written as a factor over N(0, I), a twisted ridge."""
    sizes = np.random.default_rng(11).geometric(1 / 11, size=85)  # radon-like: 1 to ~50 a group
    return {
        "hierarchy, 204 parameters (200 groups × 5)": hierarchy_case([5] * 200, 0.5, 1.0, 12),
        "radon-like hierarchy, 89 parameters (85 uneven groups)": hierarchy_case(
            sizes, 0.3, 0.8, 13),
        "Student-t experts 36-D, a factor over N(0, I)": potential_case(experts_logpdf, 36, 1.0),
        "twisted banana 10-D, b = 0.1": potential_case(twisted_banana_logpdf(10, 0.1), 10, 3.0),
    }


def grid_log_z(log_joint, a_lim, b_lim, n=2401):
    """log ∫∫ exp(log_joint(a, b)) da db on an n × n grid (the integrand falls by over 25 nats
    at the grid's edges, checked; the six models below agree to 1e-5 nat at n = 3201)."""
    a, b = np.linspace(*a_lim, n), np.linspace(*b_lim, n)
    lj = log_joint(*np.meshgrid(a, b, indexing="ij"))
    assert max(lj[0].max(), lj[-1].max(), lj[:, 0].max(), lj[:, -1].max()) < lj.max() - 25
    return float(special.logsumexp(lj) + np.log((a[1] - a[0]) * (b[1] - b[0])))


def two_parameter_case(log_joint, limits, numpyro_model, data, pymc_model):
    return dict(numpyro=(numpyro_model, tuple(jnp.asarray(d) for d in data)), pymc=pymc_model,
                exact=grid_log_z(log_joint, *limits), chains=1, jax=None)  # fmt: skip


def ppl_cases():
    """Six two-parameter models written with each PPL's own distributions (no potentials:
    constrained sites, transforms, mixtures as users write them), exact by quadrature."""
    import numpyro
    import numpyro.distributions as dist
    import pymc as pm

    rng = np.random.default_rng(11)
    xl = rng.normal(size=(20, 2))
    yl = xl @ np.array([1.0, 0.0]) + rng.normal(size=20)
    xp = rng.normal(size=30)
    yp = rng.poisson(np.exp(0.5 + 0.7 * xp))
    yr = np.concatenate([rng.normal(1.0, 1.0, 14), [12.0]])  # one outlier
    xs = np.linspace(-2, 2, 16)
    ys = (xs > 0.1).astype(int)
    ys[3] = 1  # one point short of separable
    yc = np.concatenate([rng.normal(-3.0, 0.3, 6), rng.normal(3.0, 0.3, 6)])
    ym = np.concatenate([rng.normal(2.0, 1.0, 14), rng.normal(-2.0, 1.0, 6)])

    def lasso(a, b):
        r = yl - (a[..., None] * xl[:, 0] + b[..., None] * xl[:, 1])
        return stats.laplace.logpdf(a) + stats.laplace.logpdf(b) + stats.norm.logpdf(r).sum(-1)

    def lasso_np(x, y):
        w = numpyro.sample("w", dist.Laplace(0.0, 1.0).expand([2]).to_event(1))
        numpyro.sample("y", dist.Normal(x @ w, 1.0).to_event(1), obs=y)

    def lasso_pm():
        with pm.Model() as m:
            pm.Normal("y", pm.math.dot(xl, pm.Laplace("w", 0.0, 1.0, shape=2)), 1.0, observed=yl)
        return m

    def poisson(a, b):
        eta = a[..., None] + b[..., None] * xp
        return (stats.norm.logpdf(a) + stats.norm.logpdf(b)
                + (yp * eta - np.exp(eta) - special.gammaln(yp + 1)).sum(-1))  # fmt: skip

    def poisson_np(x, y):
        a, b = numpyro.sample("a", dist.Normal(0, 1)), numpyro.sample("b", dist.Normal(0, 1))
        numpyro.sample("y", dist.Poisson(jnp.exp(a + b * x)).to_event(1), obs=y)

    def poisson_pm():
        with pm.Model() as m:
            a, b = pm.Normal("a", 0, 1), pm.Normal("b", 0, 1)
            pm.Poisson("y", pm.math.exp(a + b * xp), observed=yp)
        return m

    def location_scale(y, lik):  # mu ~ N(0, 5²), s ~ HalfNormal(2), on (mu, log s)
        def log_joint(mu, log_s):
            s = np.exp(log_s)
            return (stats.norm.logpdf(mu, 0, 5) + stats.halfnorm.logpdf(s, scale=2) + log_s
                    + lik(y, mu[..., None], s[..., None]).sum(-1))  # fmt: skip

        return log_joint

    def student_np(y):
        mu, s = numpyro.sample("mu", dist.Normal(0, 5)), numpyro.sample("s", dist.HalfNormal(2))
        numpyro.sample("y", dist.StudentT(3.0, mu, s).expand([y.shape[0]]).to_event(1), obs=y)

    def student_pm():
        with pm.Model() as m:
            mu, s = pm.Normal("mu", 0, 5), pm.HalfNormal("s", 2.0)
            pm.StudentT("y", nu=3, mu=mu, sigma=s, observed=yr)
        return m

    def cauchy_np(y):
        mu, s = numpyro.sample("mu", dist.Normal(0, 5)), numpyro.sample("s", dist.HalfNormal(2))
        numpyro.sample("y", dist.Cauchy(mu, s).expand([y.shape[0]]).to_event(1), obs=y)

    def cauchy_pm():
        with pm.Model() as m:
            mu, s = pm.Normal("mu", 0, 5), pm.HalfNormal("s", 2.0)
            pm.Cauchy("y", alpha=mu, beta=s, observed=yc)
        return m

    def logistic(a, b):
        eta = a[..., None] + b[..., None] * xs
        return (stats.norm.logpdf(a, 0, 2.5) + stats.norm.logpdf(b, 0, 2.5)
                + (ys * eta - np.logaddexp(0, eta)).sum(-1))  # fmt: skip

    def logistic_np(x, y):
        a, b = numpyro.sample("a", dist.Normal(0, 2.5)), numpyro.sample("b", dist.Normal(0, 2.5))
        numpyro.sample("y", dist.Bernoulli(logits=a + b * x).to_event(1), obs=y)

    def logistic_pm():
        with pm.Model() as m:
            a, b = pm.Normal("a", 0, 2.5), pm.Normal("b", 0, 2.5)
            pm.Bernoulli("y", logit_p=a + b * xs, observed=ys)
        return m

    def mixture(logit_w, mu):  # w ~ Beta(1, 1) on the logit scale, mu ~ N(0, 3²)
        w = special.expit(logit_w)
        lik = np.logaddexp(np.log(w)[..., None] + stats.norm.logpdf(ym, mu[..., None], 1),
                           np.log1p(-w)[..., None] + stats.norm.logpdf(ym, -mu[..., None], 1))
        return lik.sum(-1) + stats.norm.logpdf(mu, 0, 3) + np.log(w) + np.log1p(-w)

    def mixture_np(y):
        w, mu = numpyro.sample("w", dist.Beta(1, 1)), numpyro.sample("mu", dist.Normal(0, 3))
        mix = dist.MixtureSameFamily(dist.Categorical(probs=jnp.stack([w, 1 - w])),
                                     dist.Normal(jnp.stack([mu, -mu]), 1.0))  # fmt: skip
        numpyro.sample("y", mix.expand([y.shape[0]]).to_event(1), obs=y)

    def mixture_pm():
        with pm.Model() as m:
            w, mu = pm.Beta("w", 1, 1), pm.Normal("mu", 0, 3)
            pm.NormalMixture("y", w=pm.math.stack([w, 1 - w]), mu=pm.math.stack([mu, -mu]),
                             sigma=1.0, observed=ym)  # fmt: skip
        return m

    t3 = lambda y, mu, s: stats.t.logpdf(y, 3, mu, s)  # noqa: E731
    return {
        "Bayesian lasso 2-D": two_parameter_case(
            lasso, ((-3, 4), (-3, 3)), lasso_np, (xl, yl), lasso_pm),
        "Poisson regression 2-D": two_parameter_case(
            poisson, ((-2, 3), (-2, 3)), poisson_np, (xp, yp), poisson_pm),
        "Student-t location-scale, an outlier": two_parameter_case(
            location_scale(yr, t3), ((-6, 8), (-5, 3.5)), student_np, (yr,),
            student_pm),
        "Cauchy location-scale, two clusters": two_parameter_case(
            location_scale(yc, stats.cauchy.logpdf), ((-22, 22), (-7, 3.5)),
            cauchy_np, (yc,), cauchy_pm),
        "logistic regression, near-separable": two_parameter_case(
            logistic, ((-14, 14), (-6, 26)), logistic_np, (xs, ys), logistic_pm),
        "two-component mixture, label switching": two_parameter_case(
            mixture, ((-12, 12), (-10, 10)), mixture_np, (ym,), mixture_pm),
    }  # fmt: skip


MODEL_SETS = {"suite": cases, "heldout": heldout_cases, "ppl": ppl_cases, "ridges": ridge_cases,
              "users": user_cases}


# -- running ------------------------------------------------------------------------------------
def target_of(case, adapter, key):
    """The adapter's translation of the model (what its default call anneals)."""
    if adapter == "numpyro":
        from ppl_hais.adapters.numpyro.target import NumPyroTarget

        model, args = case["numpyro"]
        return NumPyroTarget(model, args, {}, key)
    from ppl_hais.adapters.pymc.target import cached_target

    return cached_target(case["pymc"]())


def rung_features(ev, seconds):
    r = ev.results
    lw = np.concatenate([np.asarray(x.log_weights) for x in r])
    return dict(
        num_steps=ev.num_steps, log_z=ev.log_z, se=ev.log_z_se,
        se_delta=float(np.sqrt(np.mean([x.log_z_se_delta**2 for x in r]) / len(r))),
        khat=[x.pareto_k for x in r],
        max_weight=[ph.stats.estimators.max_relative_weight(x.log_weights) for x in r],
        ess=[x.ess for x in r], lag=[x.lag for x in r], outside=[x.outside_initial for x in r],
        chain_log_z=[x.log_z for x in r], chain_se=[x.log_z_se for x in r],
        pooled_khat=ph.checks.diagnostics.pareto_khat(lw), num_particles=len(lw),
        bias_gap=ev.bias_gap, bias_gap_se=float("nan") if ev.bias is None else ev.bias.gap_se,
        checks=[c.name for c in ev.checks], gradients=ev.gradients, seconds=seconds,
        initial=ev.initial,
    )  # fmt: skip


def collect(args):
    from ppl_hais.estimate.bias import needs_check
    from ppl_hais.workflow.evidence import evidence

    out = []
    models = MODEL_SETS[args.models]()
    for (name, case), adapter in itertools.product(models.items(), args.adapters):
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        for seed in range(args.seeds):
            key = jax.random.key((500 if adapter == "numpyro" else 600) + seed)
            with jax.enable_x64(True):
                target = target_of(case, adapter, jax.random.key(0))
            rungs = []
            for k, steps in enumerate((1000, 4000, 16000)):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ev = evidence(jax.random.fold_in(key, k), target, num_steps=steps,
                                  num_chains=case["chains"], bias_check=True,
                                  progress_bar=False)  # fmt: skip
                rungs.append(rung_features(ev, time.perf_counter() - t0))
                if not (ev.checks or needs_check(ev.results) or abs(ev.bias_gap) > 0.05):
                    break
            out.append(dict(model=name, adapter=adapter, seed=seed, exact=case["exact"],
                            rungs=rungs))  # fmt: skip
            last = rungs[-1]
            print(f"{adapter} {name} {seed}: " + " ".join(
                f"[{r['num_steps']} {r['log_z'] - case['exact']:+.3f}±{r['se']:.3f} "
                f"k{max(r['khat']):.2f} lag{max(r['lag']):.2f} gap{r['bias_gap']:+.3f} "
                f"{','.join(r['checks'])}]" for r in rungs) + f" {last['seconds']:.1f}s",
                flush=True)  # fmt: skip
            with open(args.collect, "w") as f:
                json.dump(out, f)


SMC_SETTINGS = {  # BlackJAX's adaptive tempered SMC: docs/evidence_peers.md's, and 10× its work
    "blackjax": dict(num_particles=1000, mcmc=5),
    "blackjax-long": dict(num_particles=2000, mcmc=25),
}


_SMC_RUNS = {}  # (case, setting) -> the compiled run


def blackjax_call(case, adapter, seed):
    """BlackJAX's adaptive tempered SMC on the same log prior and likelihood (HMC with 10
    leapfrog steps of 0.1, target ESS ½; particles and HMC steps per tempering step from
    ``SMC_SETTINGS``), started from the prior's draws. It reports no SE and no warning."""
    from evidence_peers import build_smc

    if (id(case), adapter) not in _SMC_RUNS:
        log_prior, log_lik, dim, prior_sd = case["jax"]
        _SMC_RUNS[id(case), adapter] = build_smc(dim, log_prior, log_lik, prior_sd=prior_sd,
            prior_draws=case.get("prior_draws"), **SMC_SETTINGS[adapter])  # fmt: skip
    run, per_step = _SMC_RUNS[id(case), adapter]
    log_z, n = run(jax.random.key(700 + seed))
    return dict(log_z=float(log_z), se=float("nan"), checks=[], gap=float("nan"),
                shortfall=float("nan"), gradients=int(n) * per_step)  # fmt: skip


PEERS = (*SMC_SETTINGS, "nuts-bridge", "smc")  # the estimators set beside ours
NAN = float("nan")


def nuts_bridge_call(case, seed):
    """NUTS as a NumPyro user runs it (4 chains × 1000 draws after 1000 warm-up, vectorized),
    then the library's bridge sampling on its draws (``phn.bridge_sampling``, its checks and
    mode search). Gradients: every leapfrog step of warm-up and sampling."""
    from numpyro.infer import MCMC, NUTS

    from ppl_hais.adapters import numpyro as phn

    model, margs = case["numpyro"]
    mcmc = MCMC(NUTS(model), num_warmup=1000, num_samples=1000, num_chains=4,
                chain_method="vectorized", progress_bar=False)  # fmt: skip
    mcmc.warmup(jax.random.key(900 + seed), *margs, collect_warmup=True,
                extra_fields=("num_steps",))  # fmt: skip
    spent = int(np.sum(mcmc.get_extra_fields()["num_steps"]))
    mcmc.run(mcmc.post_warmup_state.rng_key, *margs, extra_fields=("num_steps",))
    spent += int(np.sum(mcmc.get_extra_fields()["num_steps"]))
    res = phn.bridge_sampling(mcmc, model, *margs, rng_key=jax.random.key(950 + seed),
                              progress_bar=False)  # fmt: skip
    return dict(log_z=res.log_z, se=res.log_z_se, checks=[c.name for c in res.checks],
                gap=NAN, shortfall=res.shortfall, gradients=spent)  # fmt: skip


def smc_call(case, seed):
    """``pm.sample_smc`` with its defaults (2000 draws × 4 chains, independent Metropolis-
    Hastings moves, cores=2): the mean of its chains' estimates, their spread the SE
    (``compare_evidence``'s reading). It states no check and counts no gradient."""
    import pymc as pm

    with case["pymc"]():
        idata = pm.sample_smc(chains=4, cores=2, random_seed=900 + seed, progressbar=False)
    log_z, se = ph.workflow.compare.evidence_of(idata)
    return dict(log_z=log_z, se=se, checks=[], gap=NAN, shortfall=NAN, gradients=NAN)


def default_call(case, adapter, seed, initial="auto", local_steps=False, num_steps=None):
    """The user's default call (``initial``, ``local_steps`` and a fixed ``num_steps`` aside);
    (log Z, SE, checks, Evidence-like figures)."""
    extra = dict(local_steps=True) if local_steps else {}
    if num_steps is not None:  # a fixed budget: one run, no ladder
        extra["num_steps"] = num_steps
    if adapter in SMC_SETTINGS:
        return blackjax_call(case, adapter, seed)
    if adapter in ("nuts-bridge", "smc"):
        return (nuts_bridge_call if adapter == "nuts-bridge" else smc_call)(case, seed)
    if adapter == "numpyro":
        from ppl_hais.adapters import numpyro as phn

        model, margs = case["numpyro"]
        hais = phn.HAIS(model, num_chains=case["chains"], progress_bar=False, initial=initial,
                        **extra)  # fmt: skip
        hais.run(jax.random.key(700 + seed), *margs)
        ev = hais.evidence
    else:
        from ppl_hais.adapters import pymc as php

        idata = php.sample_hais(model=case["pymc"](), chains=case["chains"], initial=initial,
                                random_seed=700 + seed, progressbar=False, **extra)  # fmt: skip
        st = idata["sample_stats"]  # the pooled estimate is the ladder's last rung
        gap = float(st["bias_gap"]) if "bias_gap" in st else float("nan")
        both, both_se = ((float(st["log_marginal_likelihood_bennett"]),
                          float(st["log_marginal_likelihood_bennett_se"]))
                         if "log_marginal_likelihood_bennett" in st else (np.nan, np.nan))
        return dict(bennett=both, bennett_se=both_se, lag=float(np.max(st["lag"])),
            log_z=float(st["log_evidence"]), se=float(st["log_evidence_se"]),
            forward=float(st["ladder_log_marginal_likelihood"][-1]),
            bridged=bool(st.attrs["bridged"]),
            checks=[c for c in st.attrs["evidence_check_names"].split(",") if c],
            gap=gap, shortfall=float(st.attrs["shortfall"]), gradients=int(st.attrs["gradients"]),
            excess=float(st.attrs["excess"]),
            cleared=[c for c in st.attrs.get("cleared_checks", "").split(",") if c],
            start=st.attrs.get("hais_initial", "?"),
        )  # fmt: skip
    both, both_se = (np.nan, np.nan) if ev.bias is None else (ev.bias.log_z_bennett,
                                                              ev.bias.log_z_bennett_se)
    return dict(bennett=both, bennett_se=both_se, lag=ev.trajectory[-1].lag,
                log_z=ev.log_z, se=ev.log_z_se, forward=ev.trajectory[-1].log_z,
                bridged=ev.bridged,
                checks=[c.name for c in ev.checks],
                gap=ev.bias_gap, shortfall=ev.shortfall, gradients=ev.gradients,
                excess=ev.excess, cleared=list(ev.cleared), start=ev.initial)  # fmt: skip


def report(args):
    rows, every = [], []
    models = MODEL_SETS[args.models]()
    for (name, case), adapter in itertools.product(models.items(), args.adapters):
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        runs = []
        if adapter in SMC_SETTINGS and case["jax"] is None:
            continue
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = default_call(case, adapter, seed, args.initial, args.local_steps,
                                 args.num_steps)  # fmt: skip
            r.update(err=r["log_z"] - case["exact"], wall=time.perf_counter() - t0,
                     model=name, adapter=adapter, seed=seed)  # fmt: skip
            runs.append(r)
            every.append(r)
        rows.append(summarize(name, adapter, runs, args.seeds))
        if args.runs:
            with open(args.runs, "w") as f:
                json.dump(every, f, indent=0)
        x = rows[-1]
        print(f"{adapter} {name}: err {x['err']:+.3f}±{x['sd']:.3f} right {x['right']} warned "
              f"{x['warned']} false {x['false']} silent {x['silent']} covered {x['covered']} "
              f"2SE {x['cover2']} beyond {x['beyond']} "
              f"{x['grads'] / 1e6:.2f} M {x['wall']:.1f} s [{x['checks']}]", flush=True)
    write(args, rows)


def summarize(name, adapter, runs, seeds):
    err = np.array([r["err"] for r in runs])
    se = np.array([r["se"] for r in runs])
    warned = np.array([bool(r["checks"]) for r in runs])
    right = np.abs(err) <= 0.1
    # no SE (BlackJAX): any miss is silent; an infinite SE or shortfall covers everything
    miss = np.abs(err) > 3 * np.nan_to_num(se, nan=0.0, posinf=np.inf) + 0.05
    short = np.nan_to_num(np.array([r["shortfall"] for r in runs]), nan=0.0, posinf=np.inf)
    ww = warned & ~right
    # a low run is covered by its stated shortfall, a high one by its stated excess (how far
    # too high a few dominant weights may have lifted it; stated from EXCESS_STATE nats)
    up = np.array([r.get("excess", np.nan) for r in runs])
    up = np.where(up >= ph.checks.diagnostics.EXCESS_STATE, up, 0.0)
    covered = np.where(err < 0, -err <= short + 0.1, err <= up + 0.1)
    unbounded = np.isinf(short) & ww & (err < 0)
    gaps = np.array([r["gap"] for r in runs])
    quiet = ~warned  # what the error bar promises where nothing was raised
    inside = np.abs(err) <= 2 * se
    beyond = np.abs(err) > 2 * se + 0.02
    # how many beyond chance alone gives, were the unwarned errors normal with their own mean
    # and spread: a count to read the one above against (BlackJAX gives no SE: 0)
    e, bound = err[quiet], 2 * se[quiet] + 0.02
    sd = e.std(ddof=1) if e.size > 1 else 0.0
    chance = (float(np.nansum(stats.norm.sf((bound - e.mean()) / sd)
                              + stats.norm.cdf((-bound - e.mean()) / sd)))
              if sd > 0 else 0.0)  # fmt: skip
    # the last rung's forward estimate: the call's estimate unless it is the bridge of the
    # forward and the bias check's reverse anneals (a last rung that still failed a check)
    fwd = np.array([r.get("forward", np.nan) - r["log_z"] + r["err"] for r in runs])
    bridged = np.array([bool(r.get("bridged", False)) for r in runs])
    return dict(
        bennett="—" if not np.isfinite(fwd).any() else (
            f"{int(bridged.sum())} · {int(np.sum(np.abs(fwd) <= 0.1))}/{len(runs)}"),
        name=name, adapter=adapter, err=err.mean(), sd=err.std(), se=np.median(se),
        gap=(f"{np.nanmedian(gaps):+.3f} ({int(np.isfinite(gaps).sum())})"
             if np.isfinite(gaps).any() else "— (0)"),
        right=int(right.sum()), warned=int(warned.sum()), false=int(np.sum(right & warned)),
        silent=int(np.sum(miss & ~warned)),
        cover2=f"{int(np.sum(inside & quiet))}/{int(quiet.sum())}",
        cover2_frac=float(np.sum(inside & quiet) / max(int(quiet.sum()), 1)),
        beyond=int(np.sum(beyond & quiet)), chance=chance,
        covered=f"{int(np.sum(covered & ww))}/{int(ww.sum())}" + (
            f" ({int(np.sum(unbounded))} unbounded)" if unbounded.any() else ""),
        checks=", ".join(sorted({c for r in runs for c in r["checks"]})) or "—",
        starts=", ".join(f"{k} {v}" for k, v in collections.Counter(
            r.get("start", "?") for r in runs).most_common()) if any(
            "start" in r for r in runs) else "—",  # peers choose no start
        grads=np.mean([r["gradients"] for r in runs]),
        grads_median=np.median([r["gradients"] for r in runs]),
        grads_max=np.max([r["gradients"] for r in runs]),
        wall=np.median([r["wall"] for r in runs[1:]] or [runs[0]["wall"]]), n=seeds,
    )  # fmt: skip


def write(args, rows):
    smc = all(a in SMC_SETTINGS for a in args.adapters)
    others = {"nuts-bridge": "NumPyro's NUTS (4 chains × 1000 draws after 1000 warm-up, "
              "vectorized) + `phn.bridge_sampling` on its draws (its own checks; gradients: "
              "every leapfrog step)", "smc": "`pm.sample_smc` with its defaults (2000 draws × 4 "
              "chains, cores=2; SE: its chains' spread; no checks, no gradient count)"}
    beside = [others[a] for a in args.adapters if a in others]
    peers = (
        "BlackJAX's adaptive tempered SMC on the same log prior and likelihood (HMC with 10 "
        "leapfrog steps of 0.1, target ESS ½, systematic resampling; `blackjax`: 1000 particles "
        "and 5 HMC steps per tempering step, docs/evidence_peers.md's settings; `blackjax-long`: "
        "2000 and 25, 10× the work per tempering step); it gives no SE and no warning, so every "
        "run off by more than 0.05 counts as silent"
    )
    what = (
        peers + "; the rows of our default calls are in docs/trust_suite.md"
        if smc
        else "`phn.HAIS(model, num_chains=…).run(key, …)` and `php.sample_hais(chains=…, "
        f"random_seed=…)`, defaults otherwise (512 particles, initial={args.initial!r}, "
        + ("local_steps=True, " if args.local_steps else "")
        + (f"num_steps={args.num_steps} (a fixed budget: one run, no ladder)"
           if args.num_steps else "the convergence ladder within the default `max_gradients`")
        + ", bias_check='auto'); a row's seeds are independent calls in one process, each "
        "choosing its start and tuning from its own key (no memory shared)"
        + (f"; beside them, {peers}" if any(a in SMC_SETTINGS for a in args.adapters) else "")
        + "".join(f"; beside them, {b}" for b in beside)
    )
    lines = [
        {"suite": "# The trust suite: hard-but-ordinary models",
         "heldout": "# The trust suite on held-out models (benchmarks/trust_heldout.py's)",
         "ppl": "# The trust suite on held-out two-parameter models in each PPL's terms",
         "ridges": "# The trust suite on curved ridges: 10-D bananas, a winding ridge, a ring",
         "users": "# The models users fit, beside NUTS + bridge sampling and pm.sample_smc",
         }[args.models]
        + (", BlackJAX's adaptive tempered SMC" if smc
           else f" through both adapters at num_steps={args.num_steps}" if args.num_steps
           else " through both adapters' defaults"),  # fmt: skip
        "",
        f"`python benchmarks/trust_suite.py {shlex.join(sys.argv[1:])}` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · {what}; keys {700 + args.first_seed} and up.",
        "",
        "*right*: |error| ≤ 0.1 nat; *false alarms*: right and warned; *silent*: |error| > 3 SE +"
        " 0.05 without a warning; *±2 SE covers*: the unwarned runs whose error is within two of "
        "their own SEs, of all unwarned runs; *beyond 2 SE + 0.02*: unwarned runs whose error "
        "exceeds two SEs and 0.02 nat; *gap*: median bias-check gap (reverse − forward) where it "
        "ran (in brackets: the runs whose last rung it checked); *stated gap covers*: wrong, "
        "warned runs whose error the warning's figure covers, + 0.1 nat: a low run's by the "
        "stated shortfall (*unbounded*: runs whose shortfall is stated as inf, "
        "`ladder.unsizable`), a high run's by the stated excess (how far too high its largest "
        "weights may have lifted it, `estimators.excess`); *bridged · forward right*: the runs "
        "whose estimate is the bridge of the last rung's forward anneal and its bias check's "
        "reverse anneal (Bennett's acceptance ratio, `Evidence.bridged`: a last rung whose bias "
        "check ran), and the runs whose last rung's forward estimate"
        " alone is within 0.1 nat; *starts*: the start each call's `initial='auto'` chose "
        "(ppl_hais.starts: `laplace_t`, Student-t marginals along the Laplace axes with the tails"
        " read there); *gradients*: mean per call (median), everything counted; *time*: median "
        "of the calls after the first (the first compiles).",
        "",
        "| model | adapter | mean error (sd) | median SE | median gap | right | warned | false "
        "alarms | silent | ±2 SE covers | beyond 2 SE + 0.02 | stated gap covers "
        "| bridged · forward right | checks that fired | starts | gradients | time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['adapter']} | {r['err']:+.3f} ({r['sd']:.3f}) | {r['se']:.3f} "
            f"| {r['gap']} | {r['right']}/{r['n']} | {r['warned']} | {r['false']} | "
            f"{r['silent']} | {r['cover2']} | {r['beyond']} | {r['covered']} | "
            f"{r.get('bennett', '')} | {r['checks']} | "
            f"{r.get('starts', '')} | " + (f"{r['grads'] / 1e6:.2f} M "
            f"({r['grads_median'] / 1e6:.2f})" if np.isfinite(r["grads"]) else "—") + " | "
            f"{r['wall']:.2f} s |"
        )
    own = [r for r in rows if r["adapter"] not in PEERS] or rows  # the totals: ours
    right = sum(r["right"] for r in own)
    false = sum(r["false"] for r in own)
    lines += [
        "",
        f"{sum(r['n'] for r in own)} runs: {sum(r['silent'] for r in own)} silent misses; "
        f"{false} false alarms of {right} right runs ({false / max(right, 1):.1%}); "
        f"{sum(r['beyond'] for r in own)} unwarned runs beyond 2 SE + 0.02 "
        f"({sum(r['chance'] for r in own):.1f} by chance, were each row's unwarned errors normal "
        "with their own mean and spread); ±2 SE covers "
        f"{min(r['cover2_frac'] for r in own):.0%} of a row's unwarned runs at the least"
        + (" (our adapters' rows; the peers' below)." if len(own) < len(rows) else "."),
    ]
    lines += _beside_peers(rows)
    _machine.write(args.out, lines)


def _beside_peers(rows):
    """Where one run holds our adapters' rows and peers': per model, each estimator's right
    runs, rms error, mean gradients and median time, and ours over each peer's, as ratios."""
    ours = [r for r in rows if r["adapter"] not in PEERS]
    peers = [r for r in rows if r["adapter"] in PEERS]
    if not ours or not peers:
        return []
    names = [a for a in dict.fromkeys(r["adapter"] for r in rows)]
    cell = {(r["name"], r["adapter"]): r for r in rows}
    lines = [
        "",
        "Beside the peers, in this run: per model, each estimator's right runs, rms error, mean"
        " gradients (≤ the most of one call) and median seconds per call; then each of our "
        "adapters' gradients and seconds over each peer's (*gradients · time*, marked † where "
        "the peer was right on fewer than 90% of runs: a ratio against an estimate that is not "
        "right compares nothing; — where the peer counts no gradients).",
        "",
        "| model | " + " | ".join(names)
        + " | " + " | ".join(f"{a} / {p}" for a in dict.fromkeys(r["adapter"] for r in ours)
                             for p in dict.fromkeys(r["adapter"] for r in peers)) + " |",
    ]  # fmt: skip
    lines.append("|---" * (lines[-1].count("|") - 1) + "|")
    for model in dict.fromkeys(r["name"] for r in rows):
        got = [cell.get((model, a)) for a in names]
        parts = ["—" if r is None else
                 f"{r['right']}/{r['n']} right, rms {math.hypot(r['err'], r['sd']):.3f}, "
                 + (f"{r['grads'] / 1e6:.2f} M (≤ {r['grads_max'] / 1e6:.2f}), "
                    if np.isfinite(r["grads"]) else "")
                 + f"{r['wall']:.1f} s" for r in got]  # fmt: skip
        for a in dict.fromkeys(r["adapter"] for r in ours):
            for p in dict.fromkeys(r["adapter"] for r in peers):
                x, y = cell.get((model, a)), cell.get((model, p))
                if x is None or y is None:
                    parts.append("—")
                    continue
                mark = "" if y["right"] >= 0.9 * y["n"] else " †"
                grads = (f"{x['grads'] / y['grads']:.2f}" if np.isfinite(y["grads"])
                         else "—")  # fmt: skip
                parts.append(f"{grads} · {x['wall'] / y['wall']:.2f}{mark}")
        lines.append(f"| {model} | " + " | ".join(parts) + " |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--first-seed", type=int, default=0,
                   help="the first seed (700 + it is the first key): 20 for held-out seeds")
    p.add_argument("--out", default="docs/trust_suite.md")
    p.add_argument("--collect", default=None, help="write the rungs' features to this JSON")
    p.add_argument("--runs", default=None,
                   help="also write every default call's figures to this JSON")  # fmt: skip
    p.add_argument("--only", default=None,
                   help="run the models whose name contains one of these (comma-separated)")
    p.add_argument("--initial", default="auto", help="the start (default: the default)")
    p.add_argument("--local-steps", action="store_true",
                   help="local_steps=True (per-particle step sizes; docs/local_steps.md)")
    p.add_argument("--num-steps", type=int, default=None,
                   help="a fixed number of temperatures (no ladder) instead of the default")
    p.add_argument("--models", default="suite", choices=sorted(MODEL_SETS),
                   help="the suite's eight models, trust_heldout.py's eleven targets, six "
                   "two-parameter models in each PPL's own distributions, 10-D bananas, or "
                   "the models users fit (hierarchies, heavy tails as a factor, a ridge)")
    p.add_argument("--adapters", default="numpyro,pymc",
                   help="numpyro, pymc; peers: blackjax, blackjax-long (adaptive tempered SMC; "
                   "no checks), nuts-bridge (NumPyro NUTS + phn.bridge_sampling), smc "
                   "(pm.sample_smc)")
    args = p.parse_args()
    args.adapters = args.adapters.split(",")
    ph.enable_x64()
    collect(args) if args.collect else report(args)


if __name__ == "__main__":
    main()
