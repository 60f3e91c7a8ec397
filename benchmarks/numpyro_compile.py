"""NumPyro compiles once per model: first call against repeated calls, and against PyMC's.

One Bayesian linear regression (5 coefficients, 50 rows, known noise), the adapters' defaults
(512 particles × 1000 temperatures, initial="auto"). Timed in one process, NumPyro first:
its first ``HAIS.run`` (tracing and compiling everything), a second run on the same data, a
new ``HAIS`` on new data of the same shapes with the progress bar switched, then PyMC's
``sample_hais`` first call and repeated calls on the same model. Goal (issue 15): the NumPyro
second run costs < 30% of the first and within 1.5× of PyMC's repeated call.

    python benchmarks/numpyro_compile.py --out docs/numpyro_compile.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import _machine
import jax
import numpy as np


def data(seed, n=50, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + rng.normal(size=n)


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--particles", type=int, default=512)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--out", default="docs/numpyro_compile.md")
    args = p.parse_args()
    warnings.simplefilter("ignore")

    import numpyro
    import numpyro.distributions as dist

    from ppl_hais.adapters import numpyro as phn

    def model(X, y=None):
        w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)

    opts = dict(num_particles=args.particles, num_steps=args.steps)
    X, y = data(0)
    h = phn.HAIS(model, progress_bar=False, **opts)
    first = timed(lambda: (h.run(jax.random.key(0), X, y=y), h.get_samples()))
    rows = {"NumPyro first call": first}
    rows["NumPyro second run, same data"] = np.median(
        [timed(lambda k=k: (h.run(jax.random.key(k), X, y=y), h.get_samples()))
         for k in range(1, args.repeats + 1)]
    )  # fmt: skip

    def new_data(k):
        X2, y2 = data(100 + k)
        h2 = phn.HAIS(model, progress_bar=k % 2 == 0, **opts)
        h2.run(jax.random.key(k), X2, y=y2)
        h2.get_samples()

    rows["NumPyro new HAIS, new data, bar switched"] = np.median(
        [timed(lambda k=k: new_data(k)) for k in range(args.repeats)]
    )

    import pymc as pm

    from ppl_hais.adapters import pymc as php

    with pm.Model() as pmodel:
        w = pm.Normal("w", 0, 1, shape=5)
        pm.Normal("y", pm.math.dot(X, w), 1.0, observed=y)

    def pymc_call(seed):
        with pmodel:
            php.sample_hais(draws=args.particles, num_steps=args.steps, random_seed=seed,
                            progressbar=False)  # fmt: skip

    rows["PyMC first call"] = timed(lambda: pymc_call(0))
    rows["PyMC repeated call"] = np.median(
        [timed(lambda s=s: pymc_call(s)) for s in range(1, args.repeats + 1)]
    )
    second = rows["NumPyro second run, same data"]
    lines = [
        "# NumPyro compiles once per model",
        "",
        f"`python benchmarks/numpyro_compile.py` · {_machine.describe()} · Python "
        f"{sys.version.split()[0]} · {time.strftime('%Y-%m-%d')} · "
        f"{args.particles} particles × {args.steps} temperatures, initial='auto' · "
        f"median of {args.repeats} repeated calls",
        "",
        "| call | seconds |",
        "|---|---|",
        *[f"| {k} | {v:.2f} |" for k, v in rows.items()],
        "",
        f"- NumPyro second run / first call: {second / rows['NumPyro first call']:.2f} "
        "(goal < 0.30)",
        f"- NumPyro second run / PyMC repeated call: {second / rows['PyMC repeated call']:.2f} "
        "(goal ≤ 1.5)",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    _machine.write(args.out, text)


if __name__ == "__main__":
    main()
