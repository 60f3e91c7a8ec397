"""Iterative refinement of the approximate posterior (Hjelm et al. 2016).

Part 1, training: one-layer sigmoid belief networks on scikit-learn's 8×8 digits binarized at
8 (1500 training, 297 test images, the split of the RBM reports), trained by reweighted
wake-sleep (RWS, 10 draws per datum; and 60 draws, near the 70 joint evaluations AIR(5)
spends) and by AIR(K) (each datum's q refined K steps of 10 draws, damping 0.1, before the update;
the model's gradient importance-weighted, the paper's AIR+RW, and unweighted, its "vanilla"
AIR), Adam 3e-3, 50 epochs. With 16 hidden units the test log likelihood is exact
(enumeration of 2^16 states); with 64 it is estimated by AIS from the refined q.

Part 2, evaluation at test time (the paper's RWS vs RWS+): for the RWS-trained 16-unit
network, the importance-weighted bound with 10 and 100 draws and AIS (100 temperatures, 100
particles, Gibbs sweeps) from the recognition network's q and from q refined 20 steps,
against the exact value.

Part 3, refinement from a poor start: the prior, and the recognition network with 80% of its
means set to ½ (the paper's "simplified" posterior): importance ESS and bound by step.

Part 4, ``generative_log_likelihood(initial="refined")`` on a linear-Gaussian latent model
(exact p(x)): error and warnings at 10, 30 and 100 temperatures, from the prior and from the
refined start.

    python benchmarks/refinement.py --seeds 3 --out docs/refinement.md
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats as st

import ppl_hais as ph
from ppl_hais.research import sbn
from ppl_hais.research.refinement import Bernoulli

METHODS = {  # name: fit kwargs
    "RWS (10 draws)": dict(num_samples=10),
    "RWS (60 draws)": dict(num_samples=60),
    "AIR(5)": dict(refine_steps=5),
    "AIR(5), unweighted": dict(refine_steps=5, reweight=False),
    "AIR(20)": dict(refine_steps=20),
}


def digits():
    from sklearn.datasets import load_digits

    x = (load_digits().data >= 8).astype(float)
    order = np.random.default_rng(0).permutation(len(x))
    return x[order[:1500]], x[order[1500:]]


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, sum(issubclass(w.category, ph.EvidenceWarning) for w in caught)


def part1(train, test, seeds, epochs):
    rows, models = [], {}
    for hidden in (16, 64):
        for name, kwargs in METHODS.items():
            if hidden == 64 and name not in ("RWS (10 draws)", "AIR(5)"):
                continue
            for seed in range(seeds if hidden == 16 else 1):
                t = time.perf_counter()
                net, rec, hist = sbn.fit(jax.random.key(seed), train, hidden,
                                            num_epochs=epochs, **kwargs)  # fmt: skip
                seconds = time.perf_counter() - t
                row = dict(hidden=hidden, method=name, seed=seed, seconds=seconds,
                           train_bound=float(hist[-1]))  # fmt: skip
                if hidden <= 20:
                    row["test"] = float(sbn.log_marginal_exact(net, test).mean())
                    row["test_se"] = 0.0
                else:
                    q = refined(net, rec, test)
                    est, _ = quiet(sbn.log_likelihood, jax.random.key(7), net, test, q,
                                   num_particles=100, num_steps=100)  # fmt: skip
                    row["test"], row["test_se"] = est.mean, est.se
                rows.append(row)
                models[(hidden, name, seed)] = (net, rec)
                print(row, flush=True)
    return rows, models


def refined(net, rec, data, steps=20, samples=20, damping=0.1, key=3):
    fit = ph.refine(jax.random.key(key), lambda h, x: sbn.log_joint(net, h, x),
                    rec.proposal(data), data, num_iterations=steps, num_samples=samples,
                    damping=damping)  # fmt: skip
    return fit.q


def part2(net, rec, test):
    exact = sbn.log_marginal_exact(net, test)
    rows = []
    starts = {"q (recognition network)": rec.proposal(test),
              "q refined 20 steps (20 draws, γ 0.1)": refined(net, rec, test),
              "q refined 20 steps (100 draws, γ 0.3)": refined(net, rec, test, samples=100,
                                                               damping=0.3)}  # fmt: skip
    for start, q in starts.items():
        for label, particles, steps in (("IW bound, 10 draws", 10, 0),
                                        ("IW bound, 100 draws", 100, 0),
                                        ("AIS, 100 temperatures × 100", 100, 100)):  # fmt: skip
            t = time.perf_counter()
            est, warned = quiet(sbn.log_likelihood, jax.random.key(11), net, test, q,
                                num_particles=particles, num_steps=steps)  # fmt: skip
            err = est.per_datum - exact
            rows.append(dict(start=start, estimator=label, mean=est.mean, se=est.se,
                             error=float(err.mean()), max_abs=float(np.abs(err).max()),
                             ess=float(np.mean(est.details["ess"]) / particles),
                             data_warned=int(sum(bool(c) for c in est.details["checks"])),
                             seconds=time.perf_counter() - t))  # fmt: skip
            print(rows[-1], flush=True)
    return rows, float(exact.mean())


def part3(net, rec, test):
    n, h = test.shape[0], net.num_hidden
    probs = np.asarray(rec.proposal(test).probs)
    mask = np.random.default_rng(0).random(probs.shape) < 0.8
    starts = {"prior": Bernoulli(jnp.broadcast_to(jax.nn.sigmoid(net.hidden_bias), (n, h))),
              "recognition, 80% of means set to ½": Bernoulli(jnp.where(mask, 0.5, probs)),
              "recognition network": rec.proposal(test)}  # fmt: skip
    rows = []
    for name, q in starts.items():
        fit = ph.refine(jax.random.key(5), lambda h, x: sbn.log_joint(net, h, x), q, test,
                        num_iterations=50, num_samples=100, damping=0.3)  # fmt: skip
        rows.append(dict(start=name, ess=fit.ess.mean(0).tolist(),
                         bound=fit.bound.mean(0).tolist()))
    return rows


def part4():
    rng = np.random.default_rng(0)
    a_mat, sig = 3.0 * rng.normal(size=(6, 3)), 0.3
    cov = a_mat @ a_mat.T + sig**2 * np.eye(6)
    x = rng.multivariate_normal(np.zeros(6), cov, size=50)
    exact = st.multivariate_normal(np.zeros(6), cov).logpdf(x)

    def log_lik(a, x):
        return jnp.sum(jax.scipy.stats.norm.logpdf(x, a_mat @ a, sig))

    rows = []
    for initial in ("prior", "refined"):
        for steps in (10, 30, 100):
            t = time.perf_counter()
            est, warned = quiet(ph.generative_log_likelihood, jax.random.key(0), log_lik,
                                ph.Gaussian(jnp.zeros(3)), x, num_particles=100,
                                num_steps=steps, initial=initial)  # fmt: skip
            err = est.per_datum - exact
            rows.append(dict(initial=initial, steps=steps, error=float(err.mean()),
                             max_abs=float(np.abs(err).max()), se=est.se,
                             data_warned=int(sum(bool(c) for c in est.details["checks"])),
                             seconds=time.perf_counter() - t))  # fmt: skip
            print(rows[-1], flush=True)
    return rows


def report(data):
    out = [
        "# Iterative refinement of the approximate posterior",
        "",
        f"`python benchmarks/refinement.py --seeds {data['seeds']}` on {data['machine']}, "
        f"{data['date']}. Hjelm et al. 2016 (the paper's adaptive importance refinement, AIR); "
        "`ph.refine`, `ph.research.sbn`, `generative_log_likelihood(initial='refined')`, "
        "`phn.refine_guide`.",
        "",
        "## 1. Training a sigmoid belief network with and without refinement",
        "",
        f"Digits 8×8 binarized (1500 train / 297 test), {data['epochs']} epochs, Adam 3e-3. "
        "Test log likelihood per image: exact (enumeration) with 16 hidden units; with 64, "
        "AIS from the refined q (100 temperatures × 100 particles, ± its SE). Mean over seeds, "
        "(min, max) in brackets.",
        "",
        "| hidden | method | test log p(x) | train bound | seconds |",
        "|---:|---|---:|---:|---:|",
    ]
    groups = {}
    for r in data["part1"]:
        groups.setdefault((r["hidden"], r["method"]), []).append(r)
    for (hidden, method), rs in groups.items():
        t = np.array([r["test"] for r in rs])
        if len(rs) > 1:
            cell = f"{t.mean():.3f} ({t.min():.3f}, {t.max():.3f})"
        else:
            cell = f"{t.mean():.3f}" + (f" ± {rs[0]['test_se']:.3f}" if rs[0]["test_se"] else "")
        out.append(f"| {hidden} | {method} | {cell} | "
                   f"{np.mean([r['train_bound'] for r in rs]):.3f} | "
                   f"{np.mean([r['seconds'] for r in rs]):.1f} |")  # fmt: skip
    out += [
        "",
        "## 2. Evaluating the RWS-trained network (16 hidden units): RWS against RWS+",
        "",
        f"Exact mean test log p(x) = {data['exact2']:.4f}. Error = estimate − exact, averaged "
        "over the 297 test images (max |error| over images); ESS as a fraction of the draws; "
        "'warned': images whose weights failed a check (k̂, ESS).",
        "",
        "| start | estimator | estimate ± SE | error | max abs error | ESS | warned | s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["part2"]:
        out.append(f"| {r['start']} | {r['estimator']} | {r['mean']:.4f} ± {r['se']:.4f} | "
                   f"{r['error']:+.4f} | {r['max_abs']:.3f} | {r['ess']:.3f} | "
                   f"{r['data_warned']} | {r['seconds']:.1f} |")  # fmt: skip
    out += [
        "",
        "## 3. Refinement from a poor start (RWS network, 16 hidden units, 100 draws, γ 0.3)",
        "",
        "Mean importance ESS (fraction of 100 draws) and importance-weighted bound over the "
        "test images, by refinement step.",
        "",
        "| start | ESS step 0 | 5 | 10 | 20 | 50 | bound step 0 | 20 | 50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["part3"]:
        e, b = r["ess"], r["bound"]
        out.append(f"| {r['start']} | {e[0]:.3f} | {e[5]:.3f} | {e[10]:.3f} | {e[20]:.3f} | "
                   f"{e[50]:.3f} | {b[0]:.3f} | {b[20]:.3f} | {b[50]:.3f} |")  # fmt: skip
    out += [
        "",
        "## 4. `generative_log_likelihood`: prior against refined starts",
        "",
        "Linear-Gaussian latent model (3 latents, 6 observed, 50 data; exact p(x)), 100 "
        "particles, HAIS with the per-datum pilot.",
        "",
        "| initial | temperatures | mean error | max abs error | SE | data warned | s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["part4"]:
        out.append(f"| {r['initial']} | {r['steps']} | {r['error']:+.4f} | {r['max_abs']:.3f} | "
                   f"{r['se']:.4f} | {r['data_warned']} | {r['seconds']:.1f} |")  # fmt: skip
    out += ["", "## What it shows", ""] + summary(data)
    return "\n".join(out) + "\n"


def summary(data):
    """The reading of the tables, computed from them."""

    def test(hidden, method):
        return np.mean([r["test"] for r in data["part1"]
                        if r["hidden"] == hidden and r["method"] == method])  # fmt: skip

    rws, rws60, air5, air20 = (test(16, m) for m in ("RWS (10 draws)", "RWS (60 draws)",
                                                     "AIR(5)", "AIR(20)"))  # fmt: skip
    vanilla = test(16, "AIR(5), unweighted")
    big_rws, big_air = test(64, "RWS (10 draws)"), test(64, "AIR(5)")
    p3 = {r["start"]: r for r in data["part3"]}
    prior = p3["prior"]
    ais = [r for r in data["part2"] if r["estimator"].startswith("AIS")]
    p4 = {(r["initial"], r["steps"]): r for r in data["part4"]}
    return [
        f"- **Training, equal draws per update** (16 hidden units): AIR(5) {air5 - rws:+.3f} and "
        f"AIR(20) {air20 - rws:+.3f} nats of exact test log likelihood over RWS with 10 draws: "
        "the paper's ordering (AIR at least as good as RWS) holds. **At equal cost it does "
        "not**: RWS with 60 draws (AIR(5) evaluates the joint 70 times per datum) is "
        f"{rws60 - air5:+.3f} over "
        f"AIR(5) and {rws60 - air20:+.3f} over AIR(20), in less time; with 64 hidden units "
        f"RWS is {big_rws - big_air:+.3f} over AIR(5). The unweighted ('vanilla') AIR of the "
        f"paper is {vanilla - rws:+.3f} against RWS here ([AIR16] preferred it on MNIST).",
        "- **Refinement at test time (RWS+)** on this small network adds nothing measurable: "
        "the recognition network trained by RWS is already near the factorized optimum "
        f"(ESS {p3['recognition network']['ess'][0]:.2f} before and "
        f"{p3['recognition network']['ess'][50]:.2f} after 50 steps). AIS from either start is "
        f"within {max(abs(r['error']) for r in ais):.4f} nat of the exact mean with no image "
        "warned; the importance-weighted bounds warn on the images whose error is large.",
        f"- **From a poor start refinement pays**: from the prior the importance ESS rises from "
        f"{prior['ess'][0]:.3f} to {prior['ess'][10]:.3f} in 10 steps and the bound by "
        f"{prior['bound'][50] - prior['bound'][0]:.2f} nats; the weakened recognition network "
        "recovers the trained one's ESS.",
        f"- **Annealing from refined starts**: `generative_log_likelihood` from the prior is "
        f"{p4[('prior', 100)]['error']:+.2f} nats per datum at 100 temperatures; from the refined "
        f"start {p4[('refined', 10)]['error']:+.3f} at 10 and {p4[('refined', 100)]['error']:+.4f} "
        "at 100. The data whose weights still fail a check are named in the warning, and the "
        "total SE is inf while any datum's is.",
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--out", default="docs/refinement.md")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    json_path = args.out.replace(".md", ".json")
    if args.report_only:
        data = json.load(open(json_path))
    else:
        train, test = digits()
        data = dict(machine=_machine.describe(), date=time.strftime("%Y-%m-%d"),
                    seeds=args.seeds, epochs=args.epochs)  # fmt: skip
        data["part1"], models = part1(train, test, args.seeds, args.epochs)
        net, rec = models[(16, "RWS (10 draws)", 0)]
        data["part2"], data["exact2"] = part2(net, rec, test)
        data["part3"] = part3(net, rec, test)
        data["part4"] = part4()
        json.dump(data, open(json_path, "w"), indent=1)
    _machine.write(args.out, report(data))


if __name__ == "__main__":
    main()
