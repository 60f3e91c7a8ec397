"""How long XLA takes to compile the reduced-flip sampler's program, as the bias check runs it.

The bias check's MCMC (``ppl_hais.mcmc.sample``: 64 chains, standard flips, warmup with a
mass matrix) is the largest program a first call compiles when it reaches the check. Each
timing is a fresh process without the persistent compilation cache that lowers the program
for one log density and times ``compile()`` alone (tracing and lowering excluded). With
``--before CHECKOUT`` the checkout's processes and this one's alternate, and medians are
reported side by side.

    python benchmarks/mcmc_compile.py [--before ../old-checkout] [--repeats 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import textwrap

import _machine

CHILD = textwrap.dedent(
    r"""
    import json, time
    import numpy as np, jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    from ppl_hais.mcmc import sampler
    from ppl_hais.structure import split
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(100, 10))); y = jnp.asarray((rng.random(100) < 0.5) * 1.0)
    def logistic(w):  # 10 coefficients, 100 rows
        z = X @ w
        return -0.5 * jnp.sum(w**2) + jnp.sum(y * z - jnp.logaddexp(0, z))
    def banana(x):  # the twisted Gaussian of the trust suite's shape, 5-D
        return (-0.5 * x[0] ** 2 / 100 - 0.5 * (x[1] + 0.03 * x[0] ** 2 - 3) ** 2
                - 0.5 * jnp.sum(x[2:] ** 2))
    out = {}
    for name, ld, dim in (("logistic regression", logistic, 10), ("banana", banana, 5)):
        structure, arrays = split(ld)
        fn = sampler._compiled(structure, 100, 100, 1, 1, "standard", "fresh", True, True, 1,
                               "vectorized")
        args = (arrays, jax.random.split(jax.random.key(0), 64), jnp.zeros((64, dim)),
                np.float64(0.0), np.float64(0.5), np.float64(0.9), 0)
        lowered = fn.lower(*args)
        start = time.perf_counter()
        lowered.compile()
        out[name] = time.perf_counter() - start
    print("RESULT", json.dumps(out))
    """
)


def child(root):
    env = {**os.environ, "PPL_HAIS_COMPILATION_CACHE": "0", "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(root), timeout=600)  # fmt: skip
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(out.stderr[-3000:])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default=None, help="a checkout of an earlier commit")
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--out", default=None, help="write the table here (default: print it)")
    args = p.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    versions = ([("before", os.path.abspath(args.before))] if args.before else []) + [
        ("after" if args.before else "this checkout", here)]  # fmt: skip
    runs = {label: [] for label, _ in versions}
    for _ in range(args.repeats):  # the versions alternate, repeat by repeat
        for label, root in versions:
            runs[label].append(child(root))
            print(label, runs[label][-1], flush=True)
    models = list(runs[versions[0][0]][0])
    lines = [
        "# The bias check's MCMC: XLA compile time",
        "",
        f"Command: `python benchmarks/mcmc_compile.py {' '.join(sys.argv[1:])}`".rstrip() + "  ",
        f"Machine: {_machine.describe()}; {datetime.date.today()}.",
        "",
        "Seconds of `compile()` for the sampler's program (64 chains, 100 warmup and 100 "
        "sampling transitions, standard flips), each a fresh process without the persistent "
        "cache: the median of the processes, each process's time in brackets.",
        "",
        "| version | " + " | ".join(models) + " |",
        "|---|" + "---|" * len(models),
    ]
    for label, _ in versions:
        cells = [f"{statistics.median(r[m] for r in runs[label]):.2f} ("
                 + " ".join(f"{r[m]:.2f}" for r in runs[label]) + ")" for m in models]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    _machine.report(args.out, lines)


if __name__ == "__main__":
    main()
