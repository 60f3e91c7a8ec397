"""Which schedule: sigmoid, adaptive (pilot-measured thermodynamic length) and the closed-form
optimum, on a 20-D Bayesian linear regression with exact evidence; and what the diagonal mass
matrix that follows β (adapt_mass_matrix) does there and on a badly scaled Gaussian.

    python benchmarks/schedules.py [--seeds 32] [--out docs/schedules.md]

Model: w ~ N(0, I_20), y | w ~ N(Xw, I_50). Under π_β the weights are Gaussian, so
sd_β(log L) has a closed form (the variance of a Gaussian quadratic form); the "optimal" schedule
places β at equal steps of its integral (equal thermodynamic length), which is what
schedule="adaptive" estimates from its 64-particle pilot. Error = log Ẑ − exact over seeds;
"ideal sd" = L / √(K·P), the error sd of perfectly mixing transitions with the optimal schedule.
"""

from __future__ import annotations

import argparse
import datetime
import time

import _machine
import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import multivariate_normal

import ppl_hais as ph
from ppl_hais.annealing import pilot as driver
from ppl_hais.annealing.kernels import hais_kernel

ph.enable_x64()
DIM, N = 20, 50


def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, DIM))
    y = X @ rng.normal(size=DIM) + rng.normal(size=N)
    exact = multivariate_normal(np.zeros(N), np.eye(N) + X @ X.T).logpdf(y)
    Xj, yj = jnp.asarray(X), jnp.asarray(y)

    def log_lik(w):
        return -0.5 * jnp.sum((yj - Xj @ w) ** 2) - 0.5 * N * np.log(2 * np.pi)

    A, w_hat = X.T @ X, np.linalg.lstsq(X, y, rcond=None)[0]

    def spread(beta):  # sd of log L under π_β = N(μ, Σ): 0.5 tr((AΣ)²) + (μ − ŵ)ᵀAΣA(μ − ŵ)
        S = np.linalg.inv(np.eye(DIM) + beta * A)
        d = beta * S @ X.T @ y - w_hat
        return np.sqrt(0.5 * np.trace(A @ S @ A @ S) + d @ A @ S @ A @ d)

    target = ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(DIM)), log_likelihood=log_lik)
    return target, exact, spread


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=32)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    target, exact, spread = problem()
    grid = np.concatenate([[0.0], np.geomspace(1e-8, 1.0, 20000)])
    sd = np.array([spread(b) for b in grid])
    length = float(np.sum(0.5 * (sd[1:] + sd[:-1]) * np.diff(grid)))

    # the pilot's measured spread against the closed form
    pos = target.initial.sample(jax.random.key(3), 64)
    ref_b, _, ref_sd, _ = driver.pilot_run(
        jax.random.key(1), target, hais_kernel(0.5, 1), ph.sigmoid_schedule(1000), pos,
        initial_step_size=0.2, target_accept=0.9,
    )  # fmt: skip
    check = [0.0, 1e-3, 1e-2, 0.1, 1.0]
    lines = [
        "# Annealing schedules on a 20-D Bayesian linear regression",
        "",
        f"Command: `python benchmarks/schedules.py --seeds {args.seeds}`  ",
        f"Machine: {_machine.describe()}; {datetime.date.today().isoformat()}.",
        "",
        f"Exact log Z = {exact:.3f}; thermodynamic length L = ∫ sd_β(log L) dβ = {length:.2f}.",
        "",
        "Spread of log L: the pilot's 64 particles (smoothed) against the closed form:",
        "",
        "| β | " + " | ".join(f"{b:g}" for b in check) + " |",
        "|---|" + "---|" * len(check),
        "| pilot | " + " | ".join(f"{np.interp(b, ref_b, ref_sd):.1f}" for b in check) + " |",
        "| exact | " + " | ".join(f"{spread(b):.1f}" for b in check) + " |",
        "",
        f"{args.seeds} seeds each (ph.hais defaults: auto step size and diagonal mass matrix; "
        "timings warm).",
        "",
        "| particles × temperatures | schedule | mean error | sd of error | mean reported SE | "
        "ideal sd | median time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for P, K in [(512, 1000), (256, 2000), (128, 4000)]:
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (sd[1:] + sd[:-1]) * np.diff(grid))])
        optimal = np.interp(np.linspace(0, cum[-1], K + 1), cum, grid)
        optimal[0], optimal[-1] = 0.0, 1.0
        for name, schedule in [("sigmoid", "sigmoid"), ("adaptive", "adaptive"),
                               ("closed-form optimum", optimal)]:  # fmt: skip
            ph.hais(jax.random.key(999), target, num_particles=P, num_steps=K,
                    schedule=schedule, progress_bar=False)  # fmt: skip
            errs, ses, times = [], [], []
            for s in range(args.seeds):
                t = time.perf_counter()
                r = ph.hais(jax.random.key(s), target, num_particles=P, num_steps=K,
                            schedule=schedule, progress_bar=False)  # fmt: skip
                times.append(time.perf_counter() - t)
                errs.append(r.log_z - exact)
                ses.append(r.log_z_se)
            errs = np.array(errs)
            lines.append(
                f"| {P} × {K} | {name} | {errs.mean():+.3f} | {errs.std(ddof=1):.3f} | "
                f"{np.mean(ses):.3f} | {length / np.sqrt(K * P):.3f} | {np.median(times):.2f} |"
            )
            print(lines[-1], flush=True)
    lines += mass_matrix_section(target, exact, args.seeds)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        _machine.write(args.out, text)


def badly_scaled():
    """8 coordinates, posterior sds from 10⁻² to 10 (prior N(0, I)); exact log Z."""
    sd = np.geomspace(1e-2, 10.0, 8)
    mean = np.linspace(-1.0, 1.0, 8) * sd
    post_var = 1.0 / (1.0 + 1.0 / sd**2)
    post_mean = post_var * mean / sd**2
    exact = np.sum(0.5 * np.log(post_var) + 0.5 * post_mean**2 / post_var - 0.5 * mean**2 / sd**2)
    target = ph.AnnealingTarget(
        initial=ph.Gaussian(np.zeros(8)),
        log_likelihood=lambda z: -0.5 * jnp.sum(((z - mean) / sd) ** 2),
    )
    return target, float(exact)


def sweep(target, exact, seeds, **kw):
    ph.hais(jax.random.key(999), target, progress_bar=False, **kw)  # compile
    errs, ses, times = [], [], []
    for s in range(seeds):
        t = time.perf_counter()
        r = ph.hais(jax.random.key(s), target, progress_bar=False, **kw)
        times.append(time.perf_counter() - t)
        errs.append(r.log_z - exact)
        ses.append(r.log_z_se)
    errs = np.array(errs)
    return f"{errs.mean():+.3f} | {errs.std(ddof=1):.3f} | {np.mean(ses):.3f} | " + (
        f"{np.median(times):.2f}"
    )


def mass_matrix_section(target, exact, seeds):
    """Unit mass against the diagonal scale that follows β (adapt_mass_matrix)."""
    lines = [
        "",
        "## The mass matrix",
        "",
        "Adaptive schedule, auto step size; `adapt_mass_matrix=False` is unit mass. "
        f"{seeds} seeds each.",
        "",
        "| target | particles × temperatures | mass matrix | refresh | mean error | sd of error | "
        "mean reported SE | median time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    scaled, scaled_exact = badly_scaled()
    rows = [
        ("20-D regression", target, exact, 256, 2000, False, 0.5),
        ("20-D regression", target, exact, 256, 2000, False, 0.99),
        ("20-D regression", target, exact, 256, 2000, True, 0.5),
        ("8-D Gaussian, sds 10⁻²…10", scaled, scaled_exact, 128, 1000, False, 0.5),
        ("8-D Gaussian, sds 10⁻²…10", scaled, scaled_exact, 128, 1000, True, 0.5),
    ]
    for name, t, z, P, K, mm, refresh in rows:
        stats = sweep(t, z, seeds, num_particles=P, num_steps=K, schedule="adaptive",
                      adapt_mass_matrix=mm, refresh=refresh)  # fmt: skip
        kind = "diagonal, follows β" if mm else "unit"
        lines.append(f"| {name} | {P} × {K} | {kind} | {refresh} | {stats} |")
        print(lines[-1], flush=True)
    return lines


if __name__ == "__main__":
    main()
