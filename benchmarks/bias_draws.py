"""Where the bias check's MCMC draws sit on centered eight schools, against the posterior.

The check (``ppl_hais.annealing.bias.check_bias``) moves the forward particles by MCMC at
β = 1 and anneals them back; its reverse estimate is an upper bound only from exact draws. On
centered eight schools the reverse estimate lies nats *below* the forward one
(docs/bias_check.md). Per seed (``evidence`` at 1000 temperatures, as bias_check.py calls it)
this prints the check's gap, the posterior mean and SD of log τ under the forward run's
weighted particles and under the check's MCMC draws, beside the exact posterior's (quadrature
over τ, θ and μ integrated out in closed form), and the log τ of the draws whose reverse
weights are largest.

    python benchmarks/bias_draws.py --seeds 10
"""

from __future__ import annotations

import argparse
import warnings

import jax
import numpy as np
from bias_check import cases
from scipy import integrate, stats

import ppl_hais as ph
from ppl_hais.annealing import bias
from ppl_hais.evidence import evidence

Y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12])
SIGMA = np.array([15.0, 10, 16, 11, 9, 11, 10, 18])


def exact_log_tau():
    """(mean, sd) of log τ under the posterior: p(τ | y) ∝ N(y; 0, diag(σ² + τ²) + 25) p(τ)."""

    def marginal(tau):
        cov = np.diag(SIGMA**2 + tau**2) + 25.0
        return stats.multivariate_normal(np.zeros(8), cov).pdf(Y) * 2 * stats.cauchy(0, 5).pdf(tau)

    moments = [integrate.quad(lambda t, k=k: np.log(t) ** k * marginal(t), 0, np.inf,
                              limit=400)[0] for k in range(3)]  # fmt: skip
    mean = moments[1] / moments[0]
    return mean, np.sqrt(moments[2] / moments[0] - mean**2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    args = p.parse_args()
    ph.enable_x64()
    model, _, _ = cases()["eight schools (centered)"]
    seen = {}
    mcmc, run = bias.mcmc_sample, bias.run

    def spy_mcmc(*a, **k):
        seen["mcmc"] = mcmc(*a, **k)
        return seen["mcmc"]

    def spy_run(*a, **k):  # the reverse anneal: its starts and weights
        out = run(*a, **k)
        seen["starts"], seen["rev"] = np.asarray(a[6]), np.asarray(out.log_weights)
        return out

    bias.mcmc_sample, bias.run = spy_mcmc, spy_run
    mean, sd = exact_log_tau()
    print(f"posterior log tau: mean {mean:.2f}, sd {sd:.2f} (quadrature)")
    for s in range(args.seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = evidence(jax.random.key(200 + s), model, num_steps=1000, progress_bar=False)
        if ev.bias is None:
            print(f"random_seed {200 + s}: no check")
            continue
        z = np.concatenate([r.particles for r in ev.results])[:, 1]
        lw = np.concatenate([r.log_weights for r in ev.results])
        w = np.exp(lw - lw.max())
        w /= w.sum()
        fwd = (w @ z, np.sqrt(w @ (z - w @ z) ** 2))
        draws = np.asarray(seen["mcmc"].samples)[..., 1]
        top = np.argsort(seen["rev"])[::-1][:8]
        print(f"random_seed {200 + s} ({ev.initial}): gap {ev.bias.gap:+.2f} ± "
              f"{ev.bias.gap_se:.2f}; log tau forward {fwd[0]:.2f} (sd {fwd[1]:.2f}), MCMC "
              f"{draws.mean():.2f} (sd {draws.std():.2f}); largest reverse weights at log tau "
              f"{np.round(seen['starts'][top, 1], 1).tolist()}")  # fmt: skip


if __name__ == "__main__":
    main()
