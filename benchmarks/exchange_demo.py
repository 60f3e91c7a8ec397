"""Exchange sampling: the cost of exact fantasy data against dimension, and what ignoring Z(θ) does.

    python benchmarks/exchange_demo.py      # writes docs/exchange.md + two PNGs

Part 1 ([Adams]'s warning, measured): π = N(0, I_d), E(x; θ) = θ‖x‖² − 1, so
Z_d(θ) = E[σ(1 − θ S)] with S ~ χ²_d, computed by quadrature over the χ² density. Proposals per
exact draw measured by `BoundedEnergy.sample_with_status` against 1/Z_d(θ), for d up to where
the budget (10⁷ proposals for 100 draws) runs out.

Part 2: two posteriors over θ with an exact reference on a grid, sampled by
`ph.research.exchange.sample`
and by the obvious wrong approach (treat log π(x) + log σ(−E(x; θ)) as if it were normalized,
i.e. ignore Z(θ), and run ordinary HMC on θ): a 1-D continuous x (Z by Gauss–Hermite) and a
4×4 Ising-type model under the Bernoulli(½) envelope (Z by enumerating all 2¹⁶ states).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import sys

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from scipy import integrate, stats
from scipy.special import expit, log_expit

sys.path.insert(0, os.path.dirname(__file__))
import _machine  # noqa: E402

import ppl_hais as ph  # noqa: E402
from ppl_hais.research import exchange as ex  # noqa: E402

jax.config.update("jax_enable_x64", True)
DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")


# ---------------------------------------------------------------------------- part 1
def z_exact(dim, theta):
    """Z_d(θ) = ∫ σ(1 − θ s) χ²_d(s) ds, by adaptive quadrature (log-safe integrand)."""

    def f(s):
        return np.exp(log_expit(1.0 - theta * s) + stats.chi2.logpdf(s, dim))

    peak = max((dim / 2 - 1) / (theta + 0.5), 1e-8)  # where the integrand peaks (large d)
    upper = peak + 100 * np.sqrt(dim) + 200
    val, _ = integrate.quad(f, 0, upper, points=[peak], limit=500, epsabs=0, epsrel=1e-10)
    return val


def part1(lines, quick):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budget, num = 10_000_000, 100
    dims = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
    thetas = [0.1, 0.3, 1.0]
    if quick:
        dims, budget = dims[:5], 1_000_000
    rows = []
    fig, ax = plt.subplots(figsize=(6, 4))
    for ci, theta in enumerate(thetas):
        exact, meas = [], []
        for d in dims:
            model = ph.BoundedEnergy(
                lambda x, th: th * jnp.sum(x**2) - 1.0, ex.GaussianEnvelope(jnp.zeros(d))
            )
            z = z_exact(d, theta)
            exact.append(1 / z)
            need = num / z
            if need < 100 * budget:  # run it, also when it will run out (shows the stop)
                run = jax.jit(
                    lambda k, m=model, t=theta: m.sample_with_status(
                        k, t, num, max_proposals=budget, batch_size=65_536
                    )
                )
                _, used, filled = run(jax.random.key(d))
                filled = int(filled)
                per = int(used) / num if filled == num else np.nan
                note = (
                    f"{per:.3g}" if filled == num
                    else f"budget of {budget:.0e} spent after {filled} of {num} draws"
                )  # fmt: skip
            else:
                per, note = np.nan, f"not attempted: needs ≈{need:.2g} proposals"
            meas.append(per)
            rows.append(f"| {theta} | {d} | {z:.3g} | {1 / z:.3g} | {note} |")
        color = f"C{ci}"
        ax.semilogy(dims, exact, "-", color=color, label=f"1/Z(θ) exact, θ = {theta}")
        ax.semilogy(dims, meas, "o", color=color, label=f"measured, θ = {theta}")
    ax.axhline(budget / num, color="k", lw=0.6, ls="--")
    ax.text(dims[0], budget / num * 1.5, "budget per draw", fontsize=8)
    ax.set_xlabel("dimension d of x")
    ax.set_ylabel("proposals per exact draw")
    ax.set_title("E = θ‖x‖² − 1, envelope N(0, I): cost grows exponentially")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "exchange_dimension.png"), dpi=110)
    lines += [
        "## Proposals per exact draw against dimension ([Adams]'s warning)",
        "",
        "Energy family E(x; θ) = θ‖x‖² − 1 under the envelope N(0, I_d). The acceptance rate "
        "of the rejection sampler is Z_d(θ) = E[σ(1 − θS)], S ~ χ²_d (quadrature); measured = "
        "proposals "
        f"used for {num} exact draws / {num}, budget {budget:.0e} proposals.",
        "",
        "![proposals per draw](exchange_dimension.png)",
        "",
        "| θ | d | Z_d(θ) exact | 1/Z exact | proposals per draw, measured |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


# ---------------------------------------------------------------------------- part 2
GH_X, GH_W = np.polynomial.hermite_e.hermegauss(120)
GH_W = GH_W / np.sqrt(2 * np.pi)


def _bonds(side=4):
    out = []
    for r, c in itertools.product(range(side), range(side)):
        i = r * side + c
        if c + 1 < side:
            out.append((i, i + 1))
        if r + 1 < side:
            out.append((i, i + side))
    return np.array(out)


def continuous_case():
    model = ph.BoundedEnergy(
        lambda x, th: th * jnp.sum(x**2) - 1.0, ex.GaussianEnvelope(jnp.zeros(1))
    )
    data, _ = model.sample(jax.random.key(1), 1.0, 40)
    d2 = np.asarray(data)[:, 0] ** 2
    grid = np.linspace(-12, 7, 3801)
    log_z = np.array([np.log(np.sum(GH_W * expit(-(t * GH_X**2 - 1)))) for t in grid])
    log_lik = np.array([np.sum(log_expit(-(t * d2 - 1))) for t in grid])
    prior_sd = 2.0
    return dict(
        name="1-D x, E = θx² − 1, N(0,1) envelope, 40 data from θ = 1, prior θ ~ N(0, 2²)",
        short="continuous x", model=model, data=data, grid=grid,
        log_prior=lambda t: -0.5 * t**2 / prior_sd**2,
        right=-(grid**2) / (2 * prior_sd**2) + log_lik - len(d2) * log_z,
        wrong=-(grid**2) / (2 * prior_sd**2) + log_lik, truth=1.0,
    )  # fmt: skip


def ising_case():
    bonds = _bonds()

    offset = 4.0  # without it E is odd under a sublattice spin flip and Z(J) ≡ ½

    def energy(x, j):
        s = 2.0 * x - 1.0
        return -j * (jnp.sum(s[bonds[:, 0]] * s[bonds[:, 1]]) - offset)

    model = ph.BoundedEnergy(energy, ex.BernoulliEnvelope(jnp.full(16, 0.5)))
    data, _ = model.sample(jax.random.key(3), 0.4, 30)
    states = 2 * np.array(list(itertools.product([0.0, 1.0], repeat=16))) - 1
    all_bonds = np.sum(states[:, bonds[:, 0]] * states[:, bonds[:, 1]], axis=1) - offset
    d = 2 * np.asarray(data) - 1
    data_bonds = np.sum(d[:, bonds[:, 0]] * d[:, bonds[:, 1]], axis=1) - offset
    grid = np.linspace(-1.0, 3.0, 801)
    log_z = np.array([np.log(np.mean(expit(g * all_bonds))) for g in grid])
    log_lik = np.array([np.sum(log_expit(g * data_bonds)) for g in grid])
    return dict(
        name="4×4 Ising-type, E = −J (Σ_⟨ij⟩ s_i s_j − 4), Bernoulli(½) envelope, 30 data "
        "from J = 0.4, prior J ~ N(0, 1)",
        short="4×4 Ising", model=model, data=data, grid=grid, log_prior=lambda t: -0.5 * t**2,
        right=-0.5 * grid**2 + log_lik - len(d) * log_z, wrong=-0.5 * grid**2 + log_lik,
        truth=0.4,
    )  # fmt: skip


def grid_summary(grid, log_post):
    w = np.exp(log_post - log_post.max())
    w /= np.trapezoid(w, grid)
    m = np.trapezoid(w * grid, grid)
    return w, m, np.sqrt(np.trapezoid(w * (grid - m) ** 2, grid))


def part2(lines, quick):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = 3000 if quick else 20_000
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    rows = []
    cases = (continuous_case(), ising_case())
    for ax, case in zip(axes, cases, strict=True):
        grid = case["grid"]
        dens, m, s = grid_summary(grid, case["right"])
        dens_w, m_w, s_w = grid_summary(grid, case["wrong"])
        theta, st = ex.sample(
            jax.random.key(2), case["model"], case["data"], case["log_prior"], 0.0,
            num_warmup=500, num_samples=n,
        )  # fmt: skip
        theta = theta[:, 0]
        model, data = case["model"], case["data"]

        def wrong_logp(t, model=model, data=data, log_prior=case["log_prior"]):
            return log_prior(t[0]) + jnp.sum(model.log_prob_unnormalized(data, t[0]))

        r = ph.mcmc.sample(
            jax.random.key(3), wrong_logp, np.zeros((4, 1)), num_warmup=500,
            num_samples=n // 4, num_steps=5, progress_bar=False,
        )  # fmt: skip
        naive = r.samples.reshape(-1)
        ess = float(az.ess(theta[None]))
        mcse = float(np.std(theta)) / np.sqrt(ess)
        rows += [
            f"| {case['short']} | exact (grid) | {m:.3f} | {s:.3f} | – | – |",
            f"| {case['short']} | exchange | {theta.mean():.3f} ± {mcse:.3f} | {theta.std():.3f} "
            f"| {float(st['acceptance_rate'].mean()):.2f} | "
            f"{float(st['proposals_per_draw'].mean()):.2f} |",
            f"| {case['short']} | ignoring Z(θ) (grid) | {m_w:.3f} | {s_w:.3f} | – | – |",
            f"| {case['short']} | ignoring Z(θ) (HMC) | {naive.mean():.3f} | {naive.std():.3f} "
            "| – | – |",
        ]
        lo = min(m - 5 * s, m_w - 5 * s_w)
        hi = max(m + 5 * s, m_w + 5 * s_w)
        bins = np.linspace(lo, hi, 60)
        ax.hist(theta, bins=bins, density=True, alpha=0.45, color="C0", label="exchange draws")
        ax.hist(naive, bins=bins, density=True, alpha=0.45, color="C3",
                label="HMC ignoring Z(θ)")  # fmt: skip
        ax.plot(grid, dens, "C0-", lw=1.5, label="exact posterior")
        ax.plot(grid, dens_w, "C3--", lw=1.2, label="posterior without Z(θ)")
        ax.axvline(case["truth"], color="k", lw=0.7, ls=":", label="θ used to simulate")
        ax.set_xlim(lo, hi)
        ax.set_title(case["short"])
        ax.set_xlabel("θ")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "exchange_posteriors.png"), dpi=110)
    lines += [
        "## Exchange against ignoring Z(θ)",
        "",
        "Exact posterior on a θ-grid (Z(θ) by 120-point Gauss–Hermite for continuous x, by "
        "enumerating all 2¹⁶ states for the Ising model); `ph.research.exchange.sample` (one "
        f"chain, 500 warmup + {n:,} draws; ± = MCSE); and the naive posterior that drops Z(θ), "
        "on the grid and sampled by our HMC (`ph.mcmc.sample`, 4 chains, 5 leapfrog steps).",
        "",
        "![posteriors](exchange_posteriors.png)",
        "",
        "| model | method | mean | sd | acceptance | proposals per exact draw |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "Cases: " + "; ".join(c["name"] for c in cases) + ".",
        "",
    ]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    lines = [
        "# Exchange sampling with bounded partition functions",
        "",
        f"Generated by `python benchmarks/exchange_demo.py{' --quick' if a.quick else ''}` on "
        f"{datetime.date.today()}. Machine: {_machine.describe()}.",
        "",
    ]
    part1(lines, a.quick)
    part2(lines, a.quick)
    with open(os.path.join(DOCS, "exchange.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
