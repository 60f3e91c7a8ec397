"""Evidence against peers on the same log densities: HAIS vs BlackJAX, TFP and dynesty.

    python benchmarks/evidence_peers.py [--seeds 10] [--out docs/evidence_peers.md]

Model: Bayesian linear regression, w ~ N(0, I), y ~ N(Xw, I), 50 points, D = 5 and 20 (the
figures of shared/ADAPTERS.md); exact log Z = log N(y; 0, I + XXᵀ). Both methods get the same
jnp log prior and log likelihood. Peers' settings: BlackJAX adaptive tempered SMC with an HMC
kernel (L = 10 leapfrog steps, 5 MCMC steps per tempering step, target ESS ½, systematic
resampling, 1000 particles, step size 0.1 — the shared/ADAPTERS.md configuration). HAIS: sigmoid
schedule, step size tuned by a pilot (its gradients are counted). Gradient evaluations are totals
over all particles as each algorithm defines them. Wall time is the median warm call (JIT excluded;
the first call is reported apart).

TFP (tfp-nightly's JAX substrate; stable 0.25 fails on jax 0.10): `sample_annealed_importance_chain`
with the HMC kernel of its docstring example (step size 0.1, 2 leapfrog steps), 256 chains,
1000 steps, prior as proposal. dynesty: static nested sampling, 500 live points, prior transform
through the normal quantile function; it reports log Z and its own error (`logzerr`); it uses no
gradients (likelihood calls are reported instead); 3 seeds (it is slow at 20-D).
"""

from __future__ import annotations

import argparse
import datetime
import time

import _machine
import blackjax
import blackjax.smc.resampling as resampling
import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import multivariate_normal

import ppl_hais as ph

ph.enable_x64()


def problem(dim, seed=0, n=50):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, dim))
    y = X @ rng.normal(size=dim) + rng.normal(size=n)
    exact = multivariate_normal(np.zeros(n), np.eye(n) + X @ X.T).logpdf(y)
    Xj, yj = jnp.asarray(X), jnp.asarray(y)

    def log_prior(w):
        return -0.5 * jnp.sum(w**2) - 0.5 * dim * np.log(2 * np.pi)

    def log_lik(w):
        r = yj - Xj @ w
        return -0.5 * jnp.sum(r**2) - 0.5 * n * np.log(2 * np.pi)

    return exact, log_prior, log_lik


def build_smc(dim, log_prior, log_lik, num_particles=1000, step_size=0.1, L=10, mcmc=5,
              prior_sd=1.0, prior_draws=None):  # fmt: skip
    """A jitted BlackJAX run: key -> (log Z estimate, number of tempering steps); the
    particles start as draws of the prior N(0, prior_sd² I), or ``prior_draws(key, shape)``."""
    params = blackjax.smc.extend_params(
        {
            "step_size": jnp.asarray(step_size),
            "inverse_mass_matrix": jnp.ones(dim),
            "num_integration_steps": L,
        }
    )
    smc = blackjax.adaptive_tempered_smc(
        log_prior,
        log_lik,
        blackjax.hmc.build_kernel(),
        blackjax.hmc.init,
        params,
        resampling.systematic,
        0.5,
        num_mcmc_steps=mcmc,
    )

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        shape = (num_particles, dim)
        state = smc.init(prior_sd * jax.random.normal(k0, shape) if prior_draws is None
                         else prior_draws(k0, shape))  # fmt: skip

        def cond(c):
            return c[1].tempering_param < 1

        def body(c):
            k, st, n, lz = c
            k, sub = jax.random.split(k)
            st, info = smc.step(sub, st)
            return k, st, n + 1, lz + info.log_likelihood_increment

        _, _, n, lz = jax.lax.while_loop(cond, body, (k1, state, 0, 0.0))
        return lz, n

    return run, mcmc * L * num_particles


def build_tfp(dim, log_prior, log_lik, num_chains=256, num_steps=1000, step_size=0.1, L=2):
    import tensorflow_probability.substrates.jax as tfp

    def target(w):
        return jax.vmap(log_prior)(w) + jax.vmap(log_lik)(w)

    def make_kernel(tlp):
        return tfp.mcmc.HamiltonianMonteCarlo(tlp, step_size=step_size, num_leapfrog_steps=L)

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        init = jax.random.normal(k0, (num_chains, dim))
        _, weights, _ = tfp.mcmc.sample_annealed_importance_chain(
            num_steps=num_steps,
            proposal_log_prob_fn=jax.vmap(log_prior),
            target_log_prob_fn=target,
            current_state=init,
            make_kernel_fn=make_kernel,
            seed=k1,
        )
        return jax.scipy.special.logsumexp(weights) - jnp.log(num_chains)

    return run, num_chains * num_steps * L


def run_dynesty(seed, dim, log_lik_np, nlive=500):
    import dynesty
    from scipy.special import ndtri

    sampler = dynesty.NestedSampler(
        log_lik_np, lambda u: ndtri(u), dim, nlive=nlive, rstate=np.random.default_rng(seed)
    )
    sampler.run_nested(print_progress=False)
    res = sampler.results
    return float(res.logz[-1]), float(res.logzerr[-1]), int(np.sum(res.ncall))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    lines = [
        "# Evidence against peers: HAIS vs BlackJAX tempered SMC, TFP AIS and dynesty",
        "",
        f"Command: `python benchmarks/evidence_peers.py --seeds {args.seeds}`  ",
        f"Machine: {_machine.describe()}, blackjax {blackjax.__version__}; "
        f"{datetime.date.today().isoformat()}.",
        "",
        "Bayesian linear regression, 50 points, N(0, I) prior, unit noise; same jnp log densities "
        f"for both. {args.seeds} seeds each. Error = log Ẑ − exact. Coverage = share of seeds "
        "whose ±2 SE interval holds the exact value (BlackJAX and TFP report no error bar; "
        "dynesty's is its own logzerr). Gradients = "
        "total over all particles (HAIS: P·N plus the pilot's 64 particles × ~1100 steps; SMC: "
        "tempering steps × 5 MCMC steps × 10 leapfrog steps × 1000 particles). Times: median "
        "warm call; first call (with compilation) in brackets.",
        "",
        "| D | method | mean error | sd of error | coverage ±2 SE | mean SE | gradients | "
        "wall time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for dim in (5, 20):
        exact, log_prior, log_lik = problem(dim)
        target = ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(dim)), log_likelihood=log_lik)
        configs = [
            ("HAIS P=128, N=1000", 128, 1000),
            ("HAIS P=128, N=2000", 128, 2000),
            ("HAIS P=256, N=1000", 256, 1000),
            ("HAIS P=256, N=3000", 256, 3000),
            ("HAIS P=512, N=3000", 512, 3000),
        ]
        for name, P, N in configs:
            errs, ses, times, cov = [], [], [], []
            first = None
            for s in range(args.seeds):
                t = time.perf_counter()
                r = ph.hais(
                    jax.random.key(s),
                    target,
                    num_particles=P,
                    num_steps=N,
                    schedule="sigmoid",
                    progress_bar=False,
                )
                dt = time.perf_counter() - t
                if first is None:
                    first = dt
                else:
                    times.append(dt)
                errs.append(r.log_z - exact)
                ses.append(r.log_z_se)
                cov.append(abs(r.log_z - exact) < 2 * r.log_z_se)
            grads = (
                P * N
                + r.settings.num_pilot_particles * r.settings.pilot_gradients_per_particle
            )
            lines.append(
                f"| {dim} | {name} | {np.mean(errs):+.3f} | {np.std(errs, ddof=1):.3f} | "
                f"{np.mean(cov):.0%} | {np.mean(ses):.3f} | {grads:.2e} | "
                f"{np.median(times):.2f} [{first:.1f}] |"
            )
            print(lines[-1], flush=True)
        errs, grads_all, times = [], [], []
        run, grads_per_step = build_smc(dim, log_prior, log_lik)
        t = time.perf_counter()
        jax.block_until_ready(run(jax.random.key(10_000)))
        first = time.perf_counter() - t
        for s in range(args.seeds):
            t = time.perf_counter()
            lz, n = jax.block_until_ready(run(jax.random.key(s)))
            times.append(time.perf_counter() - t)
            errs.append(float(lz) - exact)
            grads_all.append(int(n) * grads_per_step)
        lines.append(
            f"| {dim} | BlackJAX tempered SMC, HMC L=10, 1000 particles | "
            f"{np.mean(errs):+.3f} | {np.std(errs, ddof=1):.3f} | n/a | n/a | "
            f"{np.mean(grads_all):.2e} | {np.median(times):.2f} [{first:.1f}] |"
        )
        print(lines[-1], flush=True)
        run, grads = build_tfp(dim, log_prior, log_lik)
        t = time.perf_counter()
        jax.block_until_ready(run(jax.random.key(10_000)))
        first = time.perf_counter() - t
        errs, times = [], []
        for s in range(args.seeds):
            t = time.perf_counter()
            errs.append(float(jax.block_until_ready(run(jax.random.key(s)))) - exact)
            times.append(time.perf_counter() - t)
        lines.append(
            f"| {dim} | TFP AIS, HMC L=2 ε=0.1, 256 chains × 1000 steps | "
            f"{np.mean(errs):+.3f} | {np.std(errs, ddof=1):.3f} | n/a | n/a | "
            f"{grads:.2e} | {np.median(times):.2f} [{first:.1f}] |"
        )
        print(lines[-1], flush=True)
        log_lik_jit = jax.jit(log_lik)
        errs, cov, ses, calls, times = [], [], [], [], []
        for s in range(min(3, args.seeds)):
            t = time.perf_counter()
            lz, lze, nc = run_dynesty(s, dim, lambda w, f=log_lik_jit: float(f(jnp.asarray(w))))
            times.append(time.perf_counter() - t)
            errs.append(lz - exact)
            ses.append(lze)
            cov.append(abs(lz - exact) < 2 * lze)
            calls.append(nc)
        lines.append(
            f"| {dim} | dynesty, 500 live points ({len(errs)} seeds) | "
            f"{np.mean(errs):+.3f} | {np.std(errs, ddof=1):.3f} | {np.mean(cov):.0%} | "
            f"{np.mean(ses):.3f} | {np.mean(calls):.2e} likelihood calls | "
            f"{np.median(times):.1f} |"
        )
        print(lines[-1], flush=True)
    lines += ["", f"Exact log Z: D=5 {problem(5)[0]:.3f}, D=20 {problem(20)[0]:.3f}.", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        _machine.write(args.out, text)


if __name__ == "__main__":
    main()
