"""Speed against the limit: one HAIS step vs one vmap(value_and_grad) of the same density.

    python benchmarks/speed.py [--rounds 5] [--out docs/speed.md]

Both run inside a jitted lax.scan of the same length on the same (P, D) batch, warm (compile
excluded), alternating rounds; the ratio of medians is reported. Also times the seed's
headline configuration (36-D POE, N = 100,000 temperatures, 200 particles).
"""

from __future__ import annotations

import argparse
import datetime
import time

import _machine
import jax
import jax.numpy as jnp
import numpy as np

import ppl_hais as ph
from ppl_hais import validation as ex
from ppl_hais.annealing.execution import compiled, num_groups, run
from ppl_hais.structure import split

ph.enable_x64()


def time_gradient(target, num_particles, num_steps):
    z0 = target.initial.sample(jax.random.key(0), num_particles)
    vg = jax.vmap(jax.value_and_grad(target.log_density))

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


def time_hais(target, num_particles, num_steps, kernel):
    betas = jnp.asarray(ph.linear_schedule(num_steps))
    structure, arrays = split(target)
    fn = compiled(
        structure, kernel, num_particles=num_particles, num_bins=100, adapt_target=None,
        record=False, adapt_scale=False,
    )
    ref_b, ref_l = jnp.array([0.0, 1.0]), jnp.full(2, np.log(0.2))
    pos = target.initial.sample(jax.random.key(2), num_particles)
    args = (betas, ref_b, ref_l, 0, pos, 0, None)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--particles", default="200,1000")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for expert in ["laplace", "student"]:
        case = ex.product_of_experts(expert, dim=36)
        for num_particles in [int(p) for p in args.particles.split(",")]:
            g = time_gradient(case.target, num_particles, args.steps)
            timers = {
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
                (
                    expert,
                    num_particles,
                    mg * 1e6,
                    *(np.median(tk[k]) * 1e6 for k in timers),
                    np.median(tk["hais"]) / mg,
                )
            )
            print(rows[-1], flush=True)

    # the seed's headline configuration: 36-D POE (Laplace), N = 100,000, 200 particles
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
    t0 = time.perf_counter()
    r = ph.hais(
        jax.random.key(1),
        case.target,
        num_particles=200,
        num_steps=100_000,
        step_size=0.2,
        progress_bar=False,
    )
    warm = time.perf_counter() - t0
    headline = (cold, warm, r.log_z, r.log_z_se, case.log_z)
    print("headline", headline)

    date = datetime.date.today().isoformat()
    lines = [
        "# Speed of one annealing step against the gradient limit",
        "",
        f"Machine: {_machine.describe()}; {date}.",
        f"Command: `python benchmarks/speed.py --rounds {args.rounds} --steps {args.steps} "
        f"--particles {args.particles}`.",
        "",
        "Time per step (µs), median of alternating warm rounds inside a jitted `lax.scan` of "
        f"{args.steps} steps; the limit is one `vmap(value_and_grad)` of the same 36-D density on "
        "the same batch in the same kind of scan. The step columns are one compiled scan of all "
        "particles; the last two are the HAIS main run as `ph.hais` runs it (on CPU: "
        f"{num_groups(200)} particle group(s) at 200 particles, two per core, dispatched from "
        "threads) and its speed-up over one scan.",
        "",
        "| experts | particles | vmap(value_and_grad) | HAIS step | resampled-HMC step | "
        "random-walk step | HAIS / gradient | HAIS step, particle groups | groups speed-up |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e, p, g, h, rh, rw, hg, ratio in rows:
        lines.append(
            f"| {e} | {p} | {g:.1f} | {h:.1f} | {rh:.1f} | {rw:.1f} | {ratio:.2f} | {hg:.1f} | "
            f"{h / hg:.2f}× |"
        )
    cold, warm, lz, se, truth = headline
    lines += [
        "",
        "Seed 000's headline configuration (36-D Laplace POE, N = 100,000 temperatures, "
        "200 particles, ε = 0.2; ≈170 s in 2011):",
        "",
        f"- first call (with compilation): {cold:.2f} s; warm call: {warm:.2f} s",
        f"- log Ẑ = {lz:.4f} ± {se:.4f}, exact {truth:.4f} (error {lz - truth:+.4f})",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
