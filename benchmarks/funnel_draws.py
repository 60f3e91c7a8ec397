"""Where the bias check's draws sit on Neal's funnel from N(0, I), against the posterior.

The check (``ppl_hais.annealing.bias.check_bias``) anneals posterior draws back to the start;
its bridge (Bennett's, the convergence ladder's estimate where the last rung still fails a
check) is consistent only from exact draws. Per seed (a forward ``ph.hais`` run of 512
particles over 4000 temperatures, with and without ``local_steps``) this prints the fraction
of draws below each quantile of v ~ N(0, 3²), the funnel's scale coordinate, for the forward
particles resampled by weight, for the check's MCMC (``ppl_hais.mcmc.sample``, per-chain step
sizes, ``num_mcmc`` warmup and sampling transitions) and for the forward run's own transition
at β = 1 (its step sizes and scale frozen from its pilot: ``check_bias``'s second sampler on
a run with local steps), beside the exact fractions; first, the check's MCMC started from
exact draws, with and without its warmup, and with its momentum resampled every transition.

    python benchmarks/funnel_draws.py --seeds 3
"""

from __future__ import annotations

import argparse
import math
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import ppl_hais as ph
from ppl_hais import estimators
from ppl_hais.annealing.execution import run
from ppl_hais.annealing.kernels import hais_kernel
from ppl_hais.annealing.pilot import survey
from ppl_hais.mcmc.sampler import sample as mcmc_sample

D = 10
CUTS = (-6.0, -3.0, 0.0, 3.0, 6.0)


def funnel(z):
    v, x = z[0], z[1:]
    return (-0.5 * (v / 3.0) ** 2 - 0.5 * jnp.sum(x * x) * jnp.exp(-v) - 0.5 * (D - 1) * v
            - 0.5 * D * math.log(2 * math.pi) - math.log(3.0))  # fmt: skip


def below(v):
    return " | ".join(f"{np.mean(v < c):.3f}" for c in CUTS)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4000)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    target = ph.AnnealingTarget(funnel, ph.Gaussian(np.zeros(D), 1.0))
    print(f"`python benchmarks/funnel_draws.py --seeds {args.seeds}` · {_machine.describe()}\n")
    print("| draws | seed | " + " | ".join(f"v < {c:g}" for c in CUTS) + " |")
    print("|---" * (len(CUTS) + 2) + "|")
    print("| exact | — | " + " | ".join(f"{stats.norm.cdf(c / 3):.3f}" for c in CUTS) + " |")
    rng = np.random.default_rng(0)  # exact draws: v ~ N(0, 3²), x | v ~ N(0, e^v I)
    v = 3.0 * rng.normal(size=256)
    exact = np.column_stack([v, rng.normal(size=(256, D - 1)) * np.exp(v / 2)[:, None]])
    print(f"| exact draws (256) | — | {below(exact[:, 0])} |")
    for label, kw in (("the check's MCMC from them, num_mcmc=200", dict(num_warmup=200)),
                      ("the same, the momentum resampled every transition (refresh=1)",
                       dict(num_warmup=200, refresh=1.0)),
                      ("the same without warmup (step size 0.3)",
                       dict(num_warmup=0, step_size=0.3))):  # fmt: skip
        m = mcmc_sample(jax.random.key(1), jax.jit(funnel), jnp.asarray(exact), num_samples=200,
                        flips="standard", progress_bar=False, **kw)  # fmt: skip
        print(f"| {label} | — | {below(np.asarray(m.samples)[:, -1, 0])} |")
    for local in (False, True):
        kernel = hais_kernel(local_steps=local)
        pilot = survey(jax.random.key(9), target, kernel, num_steps=args.steps)
        name = "local steps" if local else "global steps"
        for s in range(args.seeds):
            res = ph.hais(jax.random.key(s), target, num_particles=512, num_steps=args.steps,
                          progress_bar=False, local_steps=local)  # fmt: skip
            idx = estimators.systematic(np.asarray(res.log_weights), 256, 0.5)
            start = np.asarray(res.particles)[idx]
            print(f"| forward ({name}, log Ẑ {res.log_z:+.3f}) resampled | {s} | "
                  f"{below(start[:, 0])} |")
            for n in (200, 800):
                m = mcmc_sample(jax.random.key(100 + s), jax.jit(funnel),
                                jnp.asarray(start[::2]), num_warmup=n, num_samples=n,
                                flips="standard", progress_bar=False)  # fmt: skip
                sm = np.asarray(m.samples)
                v = np.concatenate([sm[:, n // 2 - 1, 0], sm[:, -1, 0]])
                print(f"| the check's MCMC, num_mcmc={n} | {s} | {below(v)} |")
            for n in (400, 1600):
                out = run(jax.random.key(100 + s), target, kernel, np.ones(n + 1), pilot.betas,
                          pilot.log_step, jnp.asarray(start), num_bins=10,
                          scale_ref=pilot.scale)  # fmt: skip
                print(f"| own transition ({name}) at β = 1 × {n} | {s} | "
                      f"{below(np.asarray(out.particles)[:, 0])} |")


if __name__ == "__main__":
    main()
