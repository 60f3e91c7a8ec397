"""Where an annealing step's time goes on an accelerator: the HAIS main-run program timed with
and without its progress callback, with bins of 8 (the default) and 64 temperatures, and a
plain ``lax.scan`` of the same kernel without the bins' bookkeeping (scratch for the H100
regression noted in docs/speed_gpu_h100.md).

    python benchmarks/gpu_step.py [--particles 200,10000] [--steps 5000]
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import ppl_hais as ph
from ppl_hais import validation as ex
from ppl_hais.annealing import scan
from ppl_hais.mcmc import fast_random


def timed(fn, *args, rounds=3):
    jax.block_until_ready(fn(*args))
    best = np.inf
    for _ in range(rounds):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--particles", default="200,10000")
    ap.add_argument("--steps", type=int, default=5000)
    args = ap.parse_args()
    ph.enable_x64()
    target = ex.product_of_experts("laplace", dim=36).target
    kernel = ph.hais_kernel(0.5)
    n = args.steps
    betas = jnp.asarray(ph.linear_schedule(n))
    log_step = jnp.full(n + 1, np.log(0.2))
    print(jax.devices(), jax.__version__)
    for p in [int(x) for x in args.particles.split(",")]:
        for k, v in measure(target, kernel, betas, log_step, n, p).items():
            print(f"particles {p}: {k}: {v:.1f} us/step", flush=True)


def measure(target, kernel, betas, log_step, n, p):
    """µs per temperature of each variant at ``p`` particles and ``n`` temperatures."""
    pos = target.initial.sample(jax.random.key(2), (p,))
    out = {}
    for bins in (8, 64):
        scan.BIN_STEPS = bins
        for prog in (None, 0):
            fn = jax.jit(lambda key, pos, prog=prog: scan.anneal(
                key, target, kernel, betas, log_step, num_particles=p, num_steps=n,
                progress=prog, positions=pos))  # fmt: skip
            out[f"bins {bins}, progress {'on' if prog is not None else 'off'}"] = timed(
                fn, jax.random.key(0), pos) / n * 1e6
    scan.BIN_STEPS = 8

    def plain(key, pos):  # the kernel alone in a scan: no bins, weights or records
        states = jax.vmap(kernel.init, (0, 0, None))(
            fast_random.split_particles(key, p, 0), pos, target)

        def body(s, i):
            keys = fast_random.split_particles(key, p, 0, step=i)
            s, _ = jax.vmap(kernel.step, (0, 0, None, None, None, None))(
                keys, s, target, betas[i], 0.2, 1.0)
            return s, None

        return jax.lax.scan(body, states, jnp.arange(1, n + 1))[0].position

    out["plain scan of the kernel"] = timed(jax.jit(plain), jax.random.key(0), pos) / n * 1e6
    knots = (jnp.linspace(0.0, 1.0, 128), jnp.zeros((128, pos.shape[-1])))
    for label, kw in (
        ("given scale (interpolated per temperature)", dict(scale_ref=knots)),
        ("adapt_scale traced (measured scale computed)",
         dict(scale_ref=knots, adapt_scale=jnp.asarray(False))),
        ("adapt_target traced", dict(adapt_target=jnp.asarray(-1.0))),
    ):
        fn = jax.jit(lambda key, pos, kw=kw: scan.anneal(
            key, target, kernel, betas, log_step, num_particles=p, num_steps=n,
            progress=0, positions=pos, **kw))  # fmt: skip
        out[label] = timed(fn, jax.random.key(0), pos) / n * 1e6
    return out

if __name__ == "__main__":
    main()
