"""Reduced momentum flips: [SD12] §6.1.3 reproduced, and ESS per gradient against peers.

    python benchmarks/reduced_flips.py            # writes docs/reduced_flips.md + two PNGs
    python benchmarks/reduced_flips.py --quick    # smaller runs (a smoke test of the script)

Part 1 ([SD12] Fig. 6.3): E = 100·log²‖x‖ in 2-D, ε = 0.1, one leapfrog step, half the
momentum power refreshed per unit time, 100,000 steps; autocovariance against lag and flip
rates for standard vs reduced flips (and look-ahead K = 2).

Part 2: ESS per gradient evaluation (bulk ESS of x and x², min and median over coordinates)
after warmup, against BlackJAX GHMC tuned by its MEADS adaptation and NumPyro NUTS (its own
warmup), on the ring, 100-D rotated Gaussians with condition numbers 10² and 10⁴, a 10-D funnel
and a logistic regression on scikit-learn's breast-cancer data (standardized). Gradients are
counted as executed: a vmapped chain waits for the slowest lane (our look-ahead), NUTS counts
its own leapfrog steps per chain (vectorized NUTS executes the max over chains: also shown).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import _machine  # noqa: E402
from _models import funnel_log_density as funnel  # noqa: E402

import ppl_hais as ph  # noqa: E402

jax.config.update("jax_enable_x64", True)
DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")
REPORT = "reduced_flips.md"


# ---------------------------------------------------------------------------- targets
def ring(x):
    return -100.0 * jnp.log(jnp.sqrt(jnp.sum(x**2))) ** 2


def rotated_gaussian(dim, condition, seed=0):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    var = np.logspace(0, np.log10(condition), dim)  # covariance eigenvalues
    prec = jnp.asarray(q @ np.diag(1 / var) @ q.T)
    return lambda x: -0.5 * x @ prec @ x


def logistic_regression():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    X = jnp.asarray(np.hstack([np.ones((X.shape[0], 1)), X]))
    y = jnp.asarray(y, float)

    def logp(b):
        eta = X @ b
        return jnp.sum(y * eta - jnp.logaddexp(0.0, eta)) - 0.5 * jnp.sum(b**2)

    return logp, X.shape[1]


def targets(quick, skip=()):
    lr, lr_dim = logistic_regression()
    out = [
        ("ring (2-D)", ring, 2, np.array([1.0, 0.0])),
        ("Gaussian 100-D, cond 1e2", rotated_gaussian(100, 1e2), 100, None),
        ("Gaussian 100-D, cond 1e4", rotated_gaussian(100, 1e4), 100, None),
        ("funnel (10-D)", funnel, 10, None),
        ("logistic, breast cancer (31-D)", lr, lr_dim, None),
    ]
    out = out[:2] + out[3:4] if quick else out
    return [t for t in out if not any(k in t[0] for k in skip)]


# ---------------------------------------------------------------------------- ESS
def ess_summary(draws):
    """draws (chains, n, D) → min and median bulk ESS over coordinates, for x and x²."""
    out = {}
    for name, d in (("x", draws), ("x2", draws**2)):
        e = np.array([float(az.ess(np.asarray(d[:, :, i]))) for i in range(d.shape[2])])
        out[name] = (e.min(), np.median(e))
    return out


def run_ours(key, logp, x0, warmup, draws, **options):
    kw = dict(num_warmup=warmup, num_samples=draws, progress_bar=False, **options)
    ph.mcmc.sample(key, logp, x0, **kw)  # compile
    t0 = time.perf_counter()
    r = ph.mcmc.sample(key, logp, x0, **kw)
    wall = time.perf_counter() - t0
    grads = float(r.executed_gradients[1])  # per chain, as the vectorized batch executed them
    own = float(r.stats["num_gradients"].sum(1).mean())
    flip = float(r.stats["is_flipped"].mean())
    return r.samples, grads, own, wall, flip


def run_ghmc(key, logp, x0, warmup, draws):
    import blackjax

    chains = x0.shape[0]
    k_warm, k_run = jax.random.split(key)
    adapt = blackjax.meads_adaptation(logp, chains)
    (states, params), _ = adapt.run(k_warm, x0, warmup)
    kernel = blackjax.ghmc(logp, **params)

    @jax.jit
    def run(states, key):
        def step(states, k):
            states, info = jax.vmap(kernel.step)(jax.random.split(k, chains), states)
            return states, (states.position, info.is_accepted)

        return jax.lax.scan(step, states, jax.random.split(key, draws))

    run(states, k_run)
    t0 = time.perf_counter()
    _, (xs, acc) = run(states, k_run)
    jax.block_until_ready(xs)
    wall = time.perf_counter() - t0
    flip = 1.0 - float(np.mean(acc))
    return np.swapaxes(np.asarray(xs), 0, 1), float(draws), float(draws), wall, flip


def run_nuts(key, logp, x0, warmup, draws):
    from numpyro.infer import MCMC, NUTS

    chains = x0.shape[0]
    mcmc = MCMC(
        NUTS(potential_fn=lambda x: -logp(x)), num_warmup=warmup, num_samples=draws,
        num_chains=chains, chain_method="vectorized", progress_bar=False,
    )  # fmt: skip
    t0 = time.perf_counter()
    mcmc.run(key, init_params=jnp.asarray(x0), extra_fields=("num_steps",))
    wall = time.perf_counter() - t0
    steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    xs = np.asarray(mcmc.get_samples(group_by_chain=True))
    return xs, float(steps.max(0).sum()), float(steps.sum(1).mean()), wall, float("nan")


# ---------------------------------------------------------------------------- part 1
def autocovariance(x, max_lag):
    x = x - x.mean(axis=1, keepdims=True)  # (chains, n, D)
    n = x.shape[1]
    f = np.fft.rfft(x, n=2 * n, axis=1)
    ac = np.fft.irfft(f * np.conj(f), axis=1)[:, :max_lag] / n
    return ac.mean(axis=(0, 2))


def part1(quick, lines):
    steps = 10_000 if quick else 100_000
    chains = 8
    x0 = np.tile([1.0, 0.0], (chains, 1))
    curves, rows = {}, []
    for label, flips, K, uniform in (
        ("standard flips", "standard", 1, "fresh"), ("reduced flips", "reduced", 1, "fresh"),
        ("reduced flips, look-ahead K=2", "reduced", 2, "fresh"),
        ("standard flips, persistent uniform", "standard", 1, "persistent"),
        ("reduced flips, persistent uniform", "reduced", 1, "persistent"),
    ):  # fmt: skip
        r = ph.mcmc.sample(
            jax.random.key(0), ring, x0, num_warmup=0, num_samples=steps, step_size=0.1,
            flips=flips, lookahead=K, uniform=uniform, refresh=0.5, adapt_mass_matrix=False,
            progress_bar=False,
        )  # fmt: skip
        ac = autocovariance(r.samples, 300)
        curves[label] = ac / ac[0]
        s = r.stats
        reject = 1.0 - float((s["lookahead_depth"] > 0).mean())
        rows.append(
            f"| {label} | {1 - reject:.3f} | {reject:.3f} | {float(s['is_flipped'].mean()):.4f} "
            f"| {float(s['num_gradients'].mean()):.3f} | "
            f"{int(np.argmax(curves[label] < np.exp(-1)))} |"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, c in curves.items():
        ax.plot(c, label=label)
    ax.set_xlabel("lag (sampling steps)")
    ax.set_ylabel("autocovariance / variance")
    ax.set_title("E = 100 log²‖x‖, ε = 0.1, n = 1 ([SD12] Fig. 6.3)")
    ax.axhline(0, color="k", lw=0.5)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "reduced_flips_autocov.png"), dpi=110)
    lines += [
        f"## Seed 001 §6.1.3 reproduced ({chains} chains × {steps:,} steps each)",
        "",
        "![autocovariance](reduced_flips_autocov.png)",
        "",
        "| sampler | move rate | rejection rate | flip rate | gradients / step | lag to 1/e |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


# ---------------------------------------------------------------------------- part 2
def part2(quick, seeds, lines, skip=(), draws=2000):
    chains = 8 if quick else 32
    warmup, draws = (300, 500) if quick else (1000, draws)
    ours = [
        ("ours: reduced, K=1", dict(flips="reduced")),
        ("ours: reduced, K=2", dict(flips="reduced", lookahead=2)),
        ("ours: standard, K=1", dict(flips="standard")),
        ("ours: [SD12] (reduced, fresh u, refresh ½)",
         dict(flips="reduced", uniform="fresh", refresh=0.5)),
    ]  # fmt: skip
    lines += [
        f"## ESS per gradient ({chains} chains, {warmup} warmup + {draws} draws, "
        f"{seeds} seeds; medians over seeds)",
        "",
        "ESS (bulk, pooled over chains) per gradient of all chains in the sampling phase, as "
        "executed by the vectorized batch (ours: every chain works through its own "
        "transitions, so the batch runs its busiest chain's gradients; NUTS: the max over "
        "chains of each draw's leapfrog steps). `own` = a chain's own gradients. Ours: "
        "persistent uniform (Neal 2020) with K=1, `refresh='auto'` (MEADS's damping from the "
        "population of chains), dual averaging to 0.9, diagonal mass; the [SD12] row keeps "
        "its fresh uniform and refresh ½. GHMC: BlackJAX's `meads_adaptation` (cross-chain). "
        "NUTS: NumPyro defaults (diagonal mass, target 0.8).",
        "",
        "| target | sampler | min ESS(x)/grad | median ESS(x)/grad | min ESS(x²)/grad "
        "| grads/draw (exec / own) | flip rate | sampling s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    summary = []
    for name, logp, dim, start in targets(quick, skip):
        results = {}
        for seed in range(seeds):
            key = jax.random.key(100 + seed)
            rng = np.random.default_rng(seed)
            x0 = np.tile(start, (chains, 1)) if start is not None else rng.normal(
                size=(chains, dim)) * 0.5  # fmt: skip
            if start is not None:
                x0 = x0 + rng.normal(size=x0.shape) * 0.05

            def ours_run(k, options, logp=logp, x0=x0):
                return run_ours(k, logp, x0, warmup, draws, **options)

            runs = [(label, lambda k, o=o: ours_run(k, o)) for label, o in ours]
            runs += [
                ("BlackJAX GHMC (MEADS)",
                 lambda k, logp=logp, x0=x0: run_ghmc(k, logp, jnp.asarray(x0), warmup, draws)),
                ("NumPyro NUTS", lambda k, logp=logp, x0=x0: run_nuts(k, logp, x0, warmup, draws)),
            ]  # fmt: skip
            for label, fn in runs:
                xs, grads, own, wall, flip = fn(key)
                e = ess_summary(xs)
                total = grads * chains  # all chains' executed gradients
                results.setdefault(label, []).append(
                    (e["x"][0] / total, e["x"][1] / total, e["x2"][0] / total, grads / draws,
                     own / draws, flip, wall)
                )  # fmt: skip
        med = {k: np.median(np.array(v), axis=0) for k, v in results.items()}
        for label, m in med.items():
            lines.append(
                f"| {name} | {label} | {m[0]:.2e} | {m[1]:.2e} | {m[2]:.2e} | {m[3]:.2f} / "
                f"{m[4]:.2f} | {m[5]:.3f} | {m[6]:.2f} |"
            )
        best = max((label for label, _ in ours), key=lambda label: med[label][0])
        base = med[best][0]
        summary.append(
            f"| {name} | {best.removeprefix('ours: ')} | "
            f"{base / med['BlackJAX GHMC (MEADS)'][0]:.2f} | "
            f"{base / med['NumPyro NUTS'][0]:.2f} | "
            f"{med['ours: reduced, K=1'][0] / med['ours: standard, K=1'][0]:.2f} |"
        )
        print(name, "done", flush=True)
        write(lines + ["", "(partial: the run is still going)"])
    lines += [
        "",
        "Ratios of min ESS(x) per executed gradient (ours = the best of our rows):",
        "",
        "| target | our best | ours / GHMC | ours / NUTS | reduced / standard flips |",
        "|---|---|---|---|---|",
        *summary,
        "",
    ]


def write(lines):
    with open(os.path.join(DOCS, REPORT), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    global DOCS, REPORT
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--draws", type=int, default=2000)
    p.add_argument("--skip", default="", help="comma-separated target-name fragments to leave out")
    p.add_argument("--no-reproduction", action="store_true", help="leave out part 1 (Fig. 6.3)")
    p.add_argument("--out", default=DOCS, help="folder for the report and the plot")
    p.add_argument("--report", default="reduced_flips.md", help="report file name")
    a = p.parse_args()
    DOCS, REPORT = a.out, a.report
    lines = [
        "# HMC with reduced momentum flips: reproduction and peers",
        "",
        f"Generated by `python benchmarks/reduced_flips.py{' --quick' if a.quick else ''}"
        f" --seeds {a.seeds} --draws {a.draws}{' --skip ' + repr(a.skip) if a.skip else ''}` on "
        f"{datetime.date.today()}.",
        f"Machine: {_machine.describe()}.",
        "",
    ]
    if not a.no_reproduction:
        part1(a.quick, lines)
    skip = tuple(k for k in a.skip.split(",") if k)
    part2(a.quick, a.seeds, lines, skip, a.draws)
    write(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
