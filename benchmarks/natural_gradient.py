"""Natural-gradient variational starts: what the fit costs, what it saves.

Part 1, the fit: ``ph.starts.vi.fit_vi`` by the natural gradient against plain reparameterization
gradients with Adam (learning rate 0.05), same objective, same draws, from N(0, I): ELBO
evaluations, model gradients and time to convergence, the ELBO on the fit's own draws, and on
20,000 fresh draws (the fixed draws can be over-fitted; the fresh ELBO says which fit is better).

Part 2, the annealer: each start the evidence workflow can pick (the target's own start, the
Laplace fit, the natural-gradient Gaussian and Student-t fits, built by ``ppl_hais.starts``
exactly as ``initial=`` builds them) through ``ph.hais`` with 512 particles at 100, 300, 1000
and 3000 temperatures, ``--seeds`` seeds each: the mean error against the exact log Z, and the
fewest temperatures at which every seed is within 0.1 nat, with the gradients that costs in all
(fit, pilot and run). Part 3: the start ``initial="auto"`` picks. Part 4: the RBM fitters with
and without ``natural_gradient=True`` (needs scikit-learn, the ``bench`` extra).

    python benchmarks/natural_gradient.py --seeds 3 --out docs/natural_gradient.md
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import _machine
import jax
import jax.numpy as jnp
import numpy as np
from _models import funnel, student

import ppl_hais as ph
from ppl_hais.model.validation import product_of_experts
from ppl_hais.starts import choose as starts
from ppl_hais.starts.vi import fit_vi

STEPS = (100, 300, 1000, 3000)
PARTICLES = 512


def regression(dim=10, n=100, seed=0, noise=0.5, prior_sd=2.0):
    """Bayesian linear regression with correlated columns: exact log Z."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    x[:, 1:] += 0.7 * x[:, :1]
    y = x @ rng.normal(size=dim) + noise * rng.normal(size=n)
    cov_y = noise**2 * np.eye(n) + prior_sd**2 * x @ x.T
    log_z = -0.5 * np.linalg.slogdet(2 * np.pi * cov_y)[1] - 0.5 * y @ np.linalg.solve(cov_y, y)

    def log_joint(z):
        r = y - x @ z
        return (-0.5 * jnp.sum(r * r) / noise**2 - n * math.log(noise * math.sqrt(2 * math.pi))
                - 0.5 * jnp.sum(z * z) / prior_sd**2
                - dim * math.log(prior_sd * math.sqrt(2 * math.pi)))  # fmt: skip

    return ph.AnnealingTarget(log_joint, ph.Gaussian(np.zeros(dim), prior_sd)), float(log_z)


def logistic(dim=8, n=200, seed=0):
    """Logistic regression (no exact log Z: part 1 only)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    y = (rng.random(n) < 1 / (1 + np.exp(-x @ rng.normal(size=dim)))).astype(float)

    def log_joint(z):
        eta = x @ z
        return jnp.sum(y * eta - jnp.logaddexp(0.0, eta)) - 0.5 * jnp.sum(z * z)

    return ph.AnnealingTarget(log_joint, ph.Gaussian(np.zeros(dim))), None


def banana(b=0.03, sd1=10.0):
    def log_density(z):
        y2 = z[1] - b * (z[0] ** 2 - sd1**2)
        return -0.5 * (z[0] / sd1) ** 2 - 0.5 * y2**2 - math.log(2 * math.pi * sd1)

    return ph.AnnealingTarget(log_density, ph.Gaussian(np.zeros(2), 3.0)), 0.0


def experts():
    poe = product_of_experts("student", 36)
    return poe.target, float(poe.log_z)


CASES = {
    "regression 10-D": regression,
    "logistic regression 8-D": logistic,
    "banana 2-D": banana,
    "Student-t 30-D, ν = 2": lambda: student(30, 2.0),
    "funnel 10-D": funnel,
    "Student-t experts 36-D": experts,
}


class _Model:
    """A target as the evidence workflow's model: its own start as the prior."""

    improper = ()

    def __init__(self, target):
        self.dim, self.prior, self._f = target.dim, target.initial, target.log_density

    def log_joint(self, z):
        return self._f(z)

    def log_likelihood(self, z):
        return self._f(z) - self.prior.log_prob(z)


def fresh_elbo(dist, log_density, num=20_000):
    z = dist.sample(jax.random.key(99), num)
    with np.errstate(all="ignore"):
        vals = np.asarray(jax.vmap(log_density)(z) - jax.vmap(dist.log_prob)(z))
    return float(np.mean(vals)) if np.all(np.isfinite(vals)) else float("-inf")


def part1(name):
    target, _ = CASES[name]()
    rows = []
    for family in ("gaussian", "student_t"):
        for method in ("natural", "adam"):
            fit_vi(jax.random.key(0), target.log_density, np.zeros(target.dim), family=family,
                   method=method, max_iter=3)  # compile  # fmt: skip
            t0 = time.perf_counter()
            fit = fit_vi(jax.random.key(0), target.log_density, np.zeros(target.dim),
                         family=family, method=method)  # fmt: skip
            seconds = time.perf_counter() - t0
            rows.append(dict(model=name, family=family, method=method,
                             iterations=fit.iterations, gradients=fit.gradients, seconds=seconds,
                             elbo=fit.elbo, fresh=fresh_elbo(fit.distribution,
                                                             target.log_density),
                             converged=fit.converged))  # fmt: skip
    return rows


def part2(name, seeds):
    target, exact = CASES[name]()
    if exact is None:
        return []
    builders = {
        "own start": starts.prior_target,
        "Laplace": starts.laplace_target,
        "VI Gaussian": starts.vi_target,
        "VI Student-t": lambda m: starts.vi_target(m, "student_t"),
    }
    rows = []
    for label, build in builders.items():
        model = _Model(target)
        try:
            start_target = build(model)
        except ValueError as err:
            rows.append(dict(model=name, start=label, error=str(err)[:80]))
            continue
        fit_gradients = sum(v for k, v in model._ppl_hais_targets.items()
                            if k.endswith("_gradients"))  # fmt: skip
        for steps in STEPS:
            errors, grads, seconds = [], [], []
            for seed in range(seeds):
                t0 = time.perf_counter()
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    r = ph.hais(jax.random.key(1000 + seed), start_target,
                                num_particles=PARTICLES, num_steps=steps,
                                progress_bar=False)  # fmt: skip
                seconds.append(time.perf_counter() - t0)
                errors.append(float(r.log_z) - exact)
                per = r.settings.gradients_per_particle * PARTICLES
                pilot = r.settings.pilot_gradients_per_particle * 64
                grads.append(per + pilot + fit_gradients)
            rows.append(dict(model=name, start=label, steps=steps, errors=errors,
                             gradients=float(np.mean(grads)), seconds=float(np.median(seconds)),
                             fit_gradients=fit_gradients))  # fmt: skip
    return rows


def part3(name, seeds):
    """The start ``initial="auto"`` picks (1000 temperatures, no bias check) and its error."""
    from ppl_hais.workflow.evidence import evidence

    target, exact = CASES[name]()
    if exact is None:
        return []
    rows = []
    for seed in range(seeds):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            ev = evidence(jax.random.key(2000 + seed), _Model(target), num_particles=PARTICLES,
                          num_steps=1000, bias_check=False, progress_bar=False)  # fmt: skip
        rows.append(dict(model=name, initial=ev.initial, error=float(ev.log_z) - exact,
                         se=float(ev.log_z_se), warned=bool(ev.checks),
                         choice={k: float(v) for k, v in ev.choice.items()},
                         gradients=int(ev.gradients)))  # fmt: skip
    return rows


ENERGY_EPOCHS = (5, 20, 80)


def part4():
    """RBM fitters on the binarized digits, plain against natural_gradient=True: train and test
    mean log p(v) (exact log Z, 16 hidden units) after 5, 20 and 80 epochs, and time."""
    from rbm_ais import digits

    from ppl_hais.research.energy import rbm

    ph.enable_x64()
    train, test = digits()
    rows = []
    for fitter in ("fit_cd", "fit_mpf_rbm"):
        for natural in (False, True):
            for epochs in ENERGY_EPOCHS:
                fit = getattr(rbm, fitter)
                fit(jax.random.key(0), train[:200], 16, num_epochs=1, natural_gradient=natural)
                t0 = time.perf_counter()
                model = fit(jax.random.key(0), train, 16, num_epochs=epochs,
                            natural_gradient=natural)  # fmt: skip
                seconds = time.perf_counter() - t0
                log_z = rbm.log_partition_exact(model)
                rows.append(dict(fitter=fitter, natural=natural, epochs=epochs, seconds=seconds,
                                 train=rbm.mean_log_prob(model, train, log_z),
                                 test=rbm.mean_log_prob(model, test, log_z)))  # fmt: skip
    return rows


def _run(name, seeds):
    ph.enable_x64()
    return part1(name), part2(name, seeds), part3(name, seeds)


def report(data):
    seeds = len(data["part2"][0]["errors"])
    lines = [
        "# Natural-gradient variational starts: the fit's cost, and what each start saves",
        "",
        f"`python benchmarks/natural_gradient.py --seeds {seeds}` · {data['machine']} · "
        f"{data['date']}",
        "",
        "## 1. The fit: natural gradient against Adam (same ELBO, same draws, from N(0, I))",
        "",
        "*evals*: ELBO evaluations (each is one batch of draws: max(4D, 64) model gradients); "
        "*ELBO fresh*: on 20,000 new draws from the fit (higher is better; the fit's own draws "
        "can be over-fitted); *ratio*: Adam's gradients over the natural gradient's.",
        "",
        "| model | family | method | evals | gradients | time (s) | ELBO (fit's draws) | "
        "ELBO fresh | converged | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = data["part1"]
    for r in rows:
        nat = next(x for x in rows if x["model"] == r["model"] and x["family"] == r["family"]
                   and x["method"] == "natural")  # fmt: skip
        ratio = r["gradients"] / nat["gradients"]
        lines.append(
            f"| {r['model']} | {r['family']} | {r['method']} | {r['iterations']} | "
            f"{r['gradients']:,} | {r['seconds']:.2f} | {r['elbo']:.3f} | {r['fresh']:.3f} | "
            f"{'yes' if r['converged'] else 'no'} | {ratio:.1f}× |"
        )
    lines += [
        "",
        f"## 2. The annealer from each start (`ph.hais`, {PARTICLES} particles, "
        f"{seeds} seeds)",
        "",
        "*error*: mean (and largest |·|) error in nats against the exact log Z at each number "
        "of temperatures; *to 0.1 nat*: the fewest temperatures at which every seed is within "
        "0.1 nat, and the gradients that costs in all (the fit, the pilot, the run).",
        "",
        "| model | start | " + " | ".join(f"{s} temps" for s in STEPS)
        + " | to 0.1 nat | gradients then |",
        "|---|---|" + "---|" * len(STEPS) + "---|---|",
    ]
    by = {}
    for r in data["part2"]:
        by.setdefault((r["model"], r["start"]), []).append(r)
    for (model, start), rs in by.items():
        if "error" in rs[0]:
            lines.append(f"| {model} | {start} | " + " | ".join("—" for _ in STEPS)
                         + f" | fit failed: {rs[0]['error']} | — |")  # fmt: skip
            continue
        cells, first = [], None
        for r in rs:
            e = np.asarray(r["errors"])
            cells.append(f"{e.mean():+.3f} ({np.abs(e).max():.3f})")
            if first is None and np.all(np.abs(e) <= 0.1):
                first = r
        reach = "not reached" if first is None else f"{first['steps']}"
        grads = "—" if first is None else f"{first['gradients']:,.0f}"
        lines.append(f"| {model} | {start} | " + " | ".join(cells) + f" | {reach} | {grads} |")
    lines += [
        "",
        f"## 3. What `initial=\"auto\"` picks ({PARTICLES} particles × 1000 temperatures, no "
        "bias check)",
        "",
        "*pilot ESS*: the importance ESS of each candidate's discarded 64-particle pilot (the "
        "VI fits are piloted only when neither the prior nor the Laplace start reaches 32); "
        "*gradients*: everything the call spent (fits, pilots, run).",
        "",
        "| model | seed | picked | pilot ESS per start | error | SE | warned | gradients |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(data.get("part3", [])):
        ess = ", ".join(f"{k} {v:.1f}" for k, v in r["choice"].items())
        lines.append(
            f"| {r['model']} | {i % seeds} | {r['initial']} | {ess} | {r['error']:+.3f} | "
            f"{r['se']:.3f} | {'yes' if r['warned'] else 'no'} | {r['gradients']:,} |"
        )
    if data.get("part4"):
        lines += [
            "",
            "## 4. The energy-model fitters: plain against `natural_gradient=True`",
            "",
            "The diagonal energy-approximation metric (⟨(∂F/∂θ)²⟩ over each minibatch, a running "
            "average, over its mean plus a ridge of 0.1) divides each step. 8×8 digits binarized "
            "at 8/16 (1,500 train, 297 test), 16 hidden units (exact log Z), learning rate 0.05, "
            "batch 100, seed 0; mean log p(v) in nats.",
            "",
            "| fitter | gradient | epochs | train | test | time (s) |",
            "|---|---|---|---|---|---|",
        ]
        for r in data["part4"]:
            lines.append(
                f"| `{r['fitter']}` | {'natural' if r['natural'] else 'plain'} | {r['epochs']} "
                f"| {r['train']:.3f} | {r['test']:.3f} | {r['seconds']:.2f} |"
            )
    lines += ["", _summary(data), ""]
    return "\n".join(lines)


def _summary(data):
    nat = [r for r in data["part1"] if r["method"] == "natural"]
    ratios = []
    for r in nat:
        adam = next(x for x in data["part1"] if x["model"] == r["model"]
                    and x["family"] == r["family"] and x["method"] == "adam")  # fmt: skip
        ratios.append(adam["gradients"] / r["gradients"])
    better = sum(
        r["fresh"] >= next(x for x in data["part1"] if x["model"] == r["model"]
                           and x["family"] == r["family"] and x["method"] == "adam")["fresh"]
        - 0.01
        for r in nat
    )  # fmt: skip
    return (
        f"Summary: the natural gradient converged with {min(ratios):.1f}–{max(ratios):.1f}× "
        f"fewer gradients than Adam (median {np.median(ratios):.1f}×) and its fit was as good "
        f"or better on fresh draws in {better} of {len(nat)} fits (within 0.01 nat)."
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default="docs/natural_gradient.md")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--energy-only", action="store_true",
                   help="rerun part 4 alone, keeping parts 1-3 from the stored JSON")
    args = p.parse_args()
    store = args.out.replace(".md", ".json")
    ctx = multiprocessing.get_context("spawn")
    if args.report_only or args.energy_only:
        with open(store) as f:
            data = json.load(f)
    else:
        data = dict(machine=_machine.describe(), date=time.strftime("%Y-%m-%d"), part1=[],
                    part2=[], part3=[])  # fmt: skip
        for name in CASES:  # one process per model: compiled code does not pile up
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                p1, p2, p3 = pool.submit(_run, name, args.seeds).result()
            data["part1"] += p1
            data["part2"] += p2
            data["part3"] += p3
            print(name, "done", flush=True)
    if not args.report_only:
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            data["part4"] = pool.submit(part4).result()
        with open(store, "w") as f:
            json.dump(data, f, indent=1)
    _machine.write(args.out, report(data))


if __name__ == "__main__":
    main()
