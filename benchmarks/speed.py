"""Speed against the limit: one HAIS step vs one vmap(value_and_grad) of the same density
plus the random numbers a step needs; and whole calls over the dimension.

    python benchmarks/speed.py [--rounds 5] [--out docs/speed.md]
    python benchmarks/speed.py --over-dim [--dims 10,50,200,500,1000] [--out docs/cost_over_dim.md]

All run inside a jitted lax.scan of the same length on the same (P, D) batch, warm (compile
excluded), alternating rounds; the median of the rounds is reported. The limit of a step is
one vmap(value_and_grad) plus the step's draws (D normals and one uniform per particle, by the
same generator and per-step keys the annealer uses). Also times the paper's headline
configuration (36-D POE, N = 100,000 temperatures, 200 particles) against 10⁵ limits.

``--over-dim``: a conjugate linear regression with D coefficients, 2D data and a known noise
scale (its posterior exactly Gaussian, so a Laplace start is exact; its evidence in closed
form), through ``phn.HAIS`` defaults: a first call, then warm calls with new seeds, each
against its bare limit, the gradients the call spent as one ``vmap(value_and_grad)`` of the
same density over 512 particles in a jitted scan: how the cost of a call grows with D.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np

import ppl_hais as ph
from ppl_hais.annealing.execution import (
    _scale_args,
    _schedule_args,
    _switches,
    compiled,
    layout,
    run,
)
from ppl_hais.mcmc import fast_random
from ppl_hais.model import validation as ex
from ppl_hais.runtime.structure import split

ph.enable_x64()


def _log_density(target):
    """The target's density: its own, or prior × likelihood."""
    if target.log_density is not None:
        return target.log_density
    return lambda z: target.initial.log_prob(z) + target.log_likelihood(z)


def time_gradient(target, num_particles, num_steps):
    z0 = target.initial.sample(jax.random.key(0), num_particles)
    vg = jax.vmap(jax.value_and_grad(_log_density(target)))

    @jax.jit
    def run(z):
        def body(c, _):
            v, g = vg(c)
            return c + 1e-12 * g + 1e-12 * v[:, None], None

        return jax.lax.scan(body, z, None, length=num_steps)[0]

    jax.block_until_ready(run(z0))

    def timed():
        t = time.perf_counter()
        jax.block_until_ready(run(z0))
        return (time.perf_counter() - t) / num_steps

    return timed


def time_limit(target, num_particles, num_steps):
    """One vmap(value_and_grad) plus the draws of a HAIS step: per-particle keys for the step,
    D normals (the momentum refresh) and one uniform (the Metropolis test) per particle."""
    z0 = target.initial.sample(jax.random.key(0), num_particles)
    dim = z0.shape[1]
    vg = jax.vmap(jax.value_and_grad(_log_density(target)))

    @jax.jit
    def run(z, key):
        def body(c, i):
            v, g = vg(c)
            keys = fast_random.split_particles(key, num_particles, step=i)
            r = jax.vmap(lambda k: fast_random.normal(k, (dim,), salt=0))(keys)
            u = jax.vmap(lambda k: fast_random.uniform(k, (), salt=1, dtype=c.dtype))(keys)
            return c + 1e-12 * (g + v[:, None] + r + u[:, None]), None

        return jax.lax.scan(body, z, jnp.arange(num_steps))[0]

    jax.block_until_ready(run(z0, jax.random.key(0)))

    def timed():
        t = time.perf_counter()
        jax.block_until_ready(run(z0, jax.random.key(1)))
        return (time.perf_counter() - t) / num_steps

    return timed


def time_hais(target, num_particles, num_steps, kernel):
    """The main run's compiled program (``execution.compiled``) called once on all the
    particles: a linear schedule padded as every run's, a fixed ε = 0.2, no adaptation."""
    structure, arrays = split(target)
    fn = compiled(structure, kernel, num_particles=num_particles)
    pos = target.initial.sample(jax.random.key(2), num_particles)
    schedule = _schedule_args(ph.linear_schedule(num_steps), np.array([0.0, 1.0]),
                              np.full(2, np.log(0.2)))  # fmt: skip
    args = (*schedule, 0, pos, 0, _scale_args(None, pos.shape[-1]), *_switches(None, False),
            jnp.asarray(num_particles, jnp.int32))  # fmt: skip
    jax.block_until_ready(fn(arrays, jax.random.key(0), *args))

    def timed():
        t = time.perf_counter()
        jax.block_until_ready(fn(arrays, jax.random.key(1), *args))
        return (time.perf_counter() - t) / num_steps

    return timed


def time_hais_groups(target, num_particles, num_steps, kernel):
    """The main run as ph.hais does it: on CPU, two particle groups per core, from threads."""
    betas = ph.linear_schedule(num_steps)
    ref_b, ref_l = np.array([0.0, 1.0]), np.full(2, np.log(0.2))
    pos = target.initial.sample(jax.random.key(2), num_particles)
    run(jax.random.key(0), target, kernel, betas, ref_b, ref_l, pos, num_bins=100)

    def timed():
        t = time.perf_counter()
        run(jax.random.key(1), target, kernel, betas, ref_b, ref_l, pos, num_bins=100)
        return (time.perf_counter() - t) / num_steps

    return timed


NOISE = 0.5  # the conjugate regression's known noise scale


def conjugate_regression(dim: int):
    """(X, y, exact log evidence): w ~ N(0, I_D), y = X w + N(0, NOISE²) with 2D data,
    X's entries N(0, 1/D); the evidence is N(y; 0, X Xᵀ + NOISE² I)."""
    from scipy import stats

    rng = np.random.default_rng(dim)
    x = rng.normal(size=(2 * dim, dim)) / np.sqrt(dim)
    y = x @ rng.normal(size=dim) + NOISE * rng.normal(size=2 * dim)
    cov = x @ x.T + NOISE**2 * np.eye(2 * dim)
    return x, y, float(stats.multivariate_normal(np.zeros(2 * dim), cov).logpdf(y))


def regression_model(x, y=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Normal(x @ w, NOISE), obs=y)


def one_call(seed, x, y, exact):
    """A default ``phn.HAIS`` call: (seconds, error, SE, warned, gradients, temperatures of
    each rung, the start, the target)."""
    from ppl_hais.adapters import numpyro as phn

    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ph.EvidenceWarning)
        hais = phn.HAIS(regression_model, progress_bar=False)
        hais.run(jax.random.key(seed), jnp.asarray(x), jnp.asarray(y))
    wall = time.perf_counter() - t
    ev = hais.evidence
    warned = any(issubclass(w.category, ph.EvidenceWarning) for w in caught)
    rungs = "+".join(str(r.num_steps) for r in ev.trajectory)
    return (wall, hais.log_evidence - exact, hais.log_evidence_se, warned, ev.gradients, rungs,
            ev.initial, ev.target)  # fmt: skip


def over_dim(dims, warm_calls, out):
    """Whole default calls on the conjugate regression against their bare limits, by D."""
    rows = []
    for dim in dims:
        x, y, exact = conjugate_regression(dim)
        calls = [one_call(seed, x, y, exact) for seed in range(1 + warm_calls)]
        warm = calls[1:]
        wall = statistics.median(c[0] for c in warm)
        grads = statistics.median(c[4] for c in warm)
        steps = max(int(round(grads / 512)), 1)
        bare = time_gradient(warm[0][7], 512, steps)() * steps
        rows.append((dim, calls[0][0], calls[0][4], wall, grads, bare, calls))
        print(rows[-1][:6], [c[1:7] for c in calls], flush=True)
    date = datetime.date.today().isoformat()
    lines = [
        "# The cost of a call over the dimension",
        "",
        f"Command: `python benchmarks/speed.py --over-dim --dims {','.join(map(str, dims))} "
        f"--warm-calls {warm_calls}`  ",
        f"Machine: {_machine.describe()}; {date}.",
        "",
        "A conjugate linear regression with D coefficients (w ~ N(0, I)), 2D data and a known "
        f"noise scale ({NOISE}): its posterior is exactly Gaussian, so a Laplace start is "
        "exact, and its log evidence is N(y; 0, X Xᵀ + σ² I). Each row is one D, in one "
        "process: the first call of `phn.HAIS(model).run(key, X, y)` with its defaults "
        '(512 particles, the ladder, `initial="auto"`), then '
        f"{warm_calls} warm calls with new seeds (compiled, each choosing its start and tuning "
        "anew from its own key). The *bare limit* is the warm calls' median gradients spent as one "
        "`vmap(value_and_grad)` of the same density over 512 particles in a jitted "
        "`lax.scan` (warm): what those gradients cost with nothing around them.",
        "",
        "| D | first call (s) | its gradients | warm call (s, median) | its gradients "
        "| bare limit (s) | warm / bare | rungs (temperatures) | start | errors (nats) "
        "| SEs | warned |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dim, first, first_grads, wall, grads, bare, calls in rows:
        errors = ", ".join(f"{c[1]:+.3f}" for c in calls)
        ses = ", ".join(f"{c[2]:.3f}" for c in calls)
        rungs = ", ".join(dict.fromkeys(c[5] for c in calls))
        lines.append(
            f"| {dim} | {first:.2f} | {first_grads / 1e6:.2f} M | {wall:.2f} | "
            f"{grads / 1e6:.2f} M | {bare:.2f} | {wall / bare:.2f} | {rungs} | "
            f"{calls[0][6]} | {errors} | {ses} | {sum(c[3] for c in calls)}/{len(calls)} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        _machine.write(out, text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--particles", default="200,1000")
    ap.add_argument("--out", default=None)
    ap.add_argument("--over-dim", action="store_true", help="whole calls over D (docstring)")
    ap.add_argument("--dims", default="10,50,200,500,1000")
    ap.add_argument("--warm-calls", type=int, default=2)
    args = ap.parse_args()
    if args.over_dim:
        over_dim([int(d) for d in args.dims.split(",")], args.warm_calls, args.out)
        return
    rows = []
    for expert in ["laplace", "student"]:
        case = ex.product_of_experts(expert, dim=36)
        for num_particles in [int(p) for p in args.particles.split(",")]:
            g = time_gradient(case.target, num_particles, args.steps)
            timers = {
                "limit": time_limit(case.target, num_particles, args.steps),
                "hais": time_hais(case.target, num_particles, args.steps, ph.hais_kernel(0.5)),
                "resampled_hmc": time_hais(
                    case.target, num_particles, args.steps, ph.resampled_hmc_kernel()
                ),
                "random_walk": time_hais(
                    case.target, num_particles, args.steps, ph.random_walk_kernel()
                ),
                "hais_groups": time_hais_groups(
                    case.target, num_particles, args.steps, ph.hais_kernel(0.5)
                ),
            }
            tg, tk = [], {k: [] for k in timers}
            for _ in range(args.rounds):
                tg.append(g())
                for k, f in timers.items():
                    tk[k].append(f())
            mg = np.median(tg)
            rows.append(
                (expert, num_particles, mg * 1e6, *(np.median(tk[k]) * 1e6 for k in timers))
            )
            print(rows[-1], flush=True)

    # the paper's headline configuration: 36-D POE (Laplace), N = 100,000, 200 particles
    case = ex.product_of_experts("laplace", dim=36)
    t0 = time.perf_counter()
    r = ph.hais(
        jax.random.key(0),
        case.target,
        num_particles=200,
        num_steps=100_000,
        step_size=0.2,
        progress_bar=False,
    )
    cold = time.perf_counter() - t0
    warm = []
    for seed in (1, 2, 3):  # best of three warm calls (the machine's noise is ±10%)
        t0 = time.perf_counter()
        r = ph.hais(
            jax.random.key(seed),
            case.target,
            num_particles=200,
            num_steps=100_000,
            step_size=0.2,
            progress_bar=False,
        )
        warm.append(time.perf_counter() - t0)
    warm = min(warm)
    headline = (cold, warm, r.log_z, r.log_z_se, case.log_z)
    print("headline", headline)

    date = datetime.date.today().isoformat()
    lines = [
        "# Speed of one annealing step against its limit",
        "",
        f"Machine: {_machine.describe()}; {date}.",
        f"Command: `python benchmarks/speed.py --rounds {args.rounds} --steps {args.steps} "
        f"--particles {args.particles}`.",
        "",
        "Time per step (µs), median of alternating warm rounds inside a jitted `lax.scan` of "
        f"{args.steps} steps. The limit of a step is one `vmap(value_and_grad)` of the same "
        "36-D density on the same batch plus the step's random draws (per-particle keys, D "
        "normals and one uniform per particle, the annealer's own generator), in the same kind "
        "of scan. The step columns are one compiled scan of all particles on one thread; "
        "'particle groups' is the HAIS main run as `ph.hais` runs it (on CPU: "
        f"{layout(200)[0]} particle group(s) at 200 particles, two per core, dispatched from "
        "threads).",
        "",
        "| experts | particles | vmap(value_and_grad) | limit (gradient + draws) | HAIS step "
        "| resampled-HMC step | random-walk step | HAIS step, particle groups "
        "| one scan / limit | groups / limit |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e, p, g, lim, h, rh, rw, hg in rows:
        lines.append(
            f"| {e} | {p} | {g:.1f} | {lim:.1f} | {h:.1f} | {rh:.1f} | {rw:.1f} | {hg:.1f} | "
            f"{h / lim:.2f} | {hg / lim:.2f} |"
        )
    cold, warm, lz, se, truth = headline
    per_step = [r[3] for r in rows if r[0] == "laplace" and r[1] == 200]
    limit = 100_000 * per_step[0] * 1e-6 if per_step else float("nan")
    lines += [
        "",
        "Seed 000's headline configuration (36-D Laplace POE, N = 100,000 temperatures, "
        "200 particles, ε = 0.2; ≈170 s in 2011), `ph.hais` with its defaults otherwise "
        "(the adaptive schedule's 1,000-temperature pilot included):",
        "",
        f"- first call (with compilation): {cold:.2f} s; warm call (best of 3): {warm:.2f} s",
        f"- its limit, 10⁵ × (gradient + draws) at 200 particles: {limit:.2f} s; warm call / "
        f"limit: {warm / limit:.2f}",
        f"- log Ẑ = {lz:.4f} ± {se:.4f}, exact {truth:.4f} (error {lz - truth:+.4f})",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        _machine.write(args.out, text)


if __name__ == "__main__":
    main()
