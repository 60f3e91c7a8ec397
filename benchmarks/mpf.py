"""Minimum probability flow against maximum likelihood (Ising) and contrastive divergence (RBMs).

Part 1 ([SD12] ch. 3's experiment, scaled to exact enumeration): 10- and 16-unit Ising
models with couplings N(0, 0.5²) and fields N(0, 0.5²); exact draws of n = 300 … 30,000
samples; fits by MPF (`ph.energy.fit_mpf`) and by exact maximum likelihood
(`ph.energy.fit_ising_ml`, gradient by enumerating all 2^d states). Reported: the largest
coupling error and the warm fit time, median over seeds.

Part 2: RBMs on scikit-learn's 8×8 digits binarized at 8/16 (1,500 training, 297 test
images), fitted by CD-1, CD-10 and MPF (`ph.energy.fit_mpf_rbm`) with the same minibatches
(100), learning rate (0.05) and start, and CD-1 with a 4× larger rate; test log-probability
with log Z exact (H ≤ 20) or by AIS (`ph.energy.log_partition`, 100 particles × 14,500
temperatures, [SM08]'s schedule, ± SE). Times are warm (a second call with the same
shapes), on this machine.

    python benchmarks/mpf.py --out docs/mpf.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import _machine
import jax
import numpy as np
from scipy.special import logsumexp

import ppl_hais as ph
from ppl_hais import energy


def _ising(seed, d=10, scale=0.5):
    rng = np.random.default_rng(seed)
    j = np.triu(rng.normal(scale=scale, size=(d, d)), 1)
    return energy.Ising(j + j.T, rng.normal(scale=0.5, size=d))


def _ising_data(model, n, seed):
    d = model.dim
    x = ((np.arange(2**d)[:, None] >> np.arange(d)) & 1).astype(float)
    f = 0.5 * np.sum((x @ model.couplings) * x, 1) + x @ model.fields
    rng = np.random.default_rng(seed)
    return x[rng.choice(len(x), size=n, p=np.exp(f - logsumexp(f)))]


def _timed(fn):
    fn()  # compile
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def part1(dims, sizes, seeds):
    rows = []
    for d, n in [(d, n) for d in dims for n in sizes]:
        err = {"mpf": [], "ml": []}
        wall = {"mpf": [], "ml": []}
        for seed in range(seeds):
            true = _ising(seed, d)
            data = _ising_data(true, n, seed + 100)
            for name, fit in (("mpf", energy.fit_mpf), ("ml", energy.fit_ising_ml)):
                model, t = _timed(lambda fit=fit, data=data: fit(data))
                err[name].append(float(np.max(np.abs(model.couplings - true.couplings))))
                wall[name].append(t)
        rows.append((d, n, {k: np.median(v) for k, v in err.items()},
                     {k: np.median(v) for k, v in wall.items()}))  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def digits():
    from sklearn.datasets import load_digits

    x = (load_digits().data >= 8).astype(float)
    order = np.random.default_rng(0).permutation(len(x))
    return x[order[:1500]], x[order[1500:]]


def _score(model, train, test, key):
    if model.num_hidden <= 20:
        log_z, se = energy.log_partition_exact(model), 0.0
    else:
        res = energy.log_partition(key, model, base=energy.base_rate(train), num_particles=100,
                                   schedule="seed_002")  # fmt: skip
        log_z, se = res.log_z, res.log_z_se
    return energy.mean_log_prob(model, test, log_z), se


def part2(hidden, epochs):
    train, test = digits()
    methods = {
        "CD-1": lambda key, h, e: energy.fit_cd(key, train, h, num_epochs=e),
        "CD-10": lambda key, h, e: energy.fit_cd(key, train, h, num_epochs=e, cd_steps=10),
        "CD-1, rate 0.2": lambda key, h, e: energy.fit_cd(key, train, h, num_epochs=e,
                                                          learning_rate=0.2),
        "MPF": lambda key, h, e: energy.fit_mpf_rbm(key, train, h, num_epochs=e),
    }
    rows = []
    for h in hidden:
        for e in epochs:
            for name, fit in methods.items():
                model, wall = _timed(lambda fit=fit, h=h, e=e: fit(jax.random.key(0), h, e))
                lp, se = _score(model, train, test, jax.random.key(1))
                rows.append((h, e, name, wall, lp, se))
                print(rows[-1], flush=True)
    base = energy.base_rate(train)
    return rows, energy.mean_log_prob(base, test, energy.log_partition_exact(base))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", default="10,16")
    p.add_argument("--sizes", default="300,3000,30000")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--hidden", default="10,20,100")
    p.add_argument("--epochs", default="25,100")
    p.add_argument("--out", default="docs/mpf.md")
    args = p.parse_args()
    warnings.simplefilter("ignore", ph.EvidenceWarning)
    ising = part1([int(d) for d in args.dims.split(",")],
                  [int(n) for n in args.sizes.split(",")], args.seeds)  # fmt: skip
    rbm, base_lp = part2([int(h) for h in args.hidden.split(",")],
                         [int(e) for e in args.epochs.split(",")])  # fmt: skip
    lines = [
        "# Minimum probability flow against maximum likelihood and contrastive divergence",
        "",
        f"`python benchmarks/mpf.py` · {_machine.describe()} · Python "
        f"{sys.version.split()[0]} · {time.strftime('%Y-%m-%d')}",
        "",
        "## Ising models: coupling error against sample size",
        "",
        f"Exact draws; median over {args.seeds} models (couplings and fields N(0, 0.5²)). Exact "
        "ML's gradient enumerates all 2^d states; MPF's objective touches only the data and "
        "their d one-bit flips. Both by BFGS from zero.",
        "",
        "| units | samples | MPF max coupling error | ML max coupling error | MPF fit (s) | "
        "ML fit (s) | ML / MPF time |",
        "|---|---|---|---|---|---|---|",
    ]
    for d, n, err, wall in ising:
        lines.append(
            f"| {d} | {n:,} | {err['mpf']:.3f} | {err['ml']:.3f} | {wall['mpf']:.3f} | "
            f"{wall['ml']:.3f} | {wall['ml'] / wall['mpf']:.1f}× |"
        )
    lines += [
        "",
        "## RBMs on 8×8 digits: training time and test log-probability",
        "",
        "Same start, minibatches and learning rate for every method; test log p in nats per "
        "image (log Z exact for H ≤ 20, else AIS ± SE). Base-rate model (independent pixels): "
        f"{base_lp:.2f}.",
        "",
        "| hidden | epochs | method | fit time (s) | test log p |",
        "|---|---|---|---|---|",
    ]
    for h, e, name, wall, lp, se in rbm:
        shown = f"{lp:.2f}" if se == 0.0 else f"{lp:.2f} ± {se:.2f}"
        lines.append(f"| {h} | {e} | {name} | {wall:.2f} | {shown} |")
    text = "\n".join(lines) + "\n"
    print(text)
    _machine.write(args.out, text)


if __name__ == "__main__":
    main()
