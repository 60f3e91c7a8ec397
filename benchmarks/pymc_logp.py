"""What one gradient of a PyMC model costs through the PyMC adapter, beside NumPyro's.

A logistic regression (100 rows, 3 weights) and a linear regression (50 rows, 5 weights),
each written in NumPyro and in PyMC, as ``jit(vmap(value_and_grad(log joint)))`` over 512
particles in float64: NumPyro's density, PyMC's through ``pymc.sampling.jax.get_jaxified_graph``
and PyMC's through the adapter's ``jaxified_graph`` (the same, plus the Bernoulli and
matrix-vector rewrites of ``ppl_hais.adapters.pymc.rewrites``). The three are timed in
alternation, so load on the machine falls on all of them alike; the median of the rounds is
reported.

    python benchmarks/pymc_logp.py --out docs/pymc_logp.md
"""

from __future__ import annotations

import argparse
import time

import _machine
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pymc as pm
from pymc.sampling.jax import get_jaxified_graph

from ppl_hais.adapters.pymc.rewrites import jaxified_graph

ROUNDS, CALLS = 15, 50


def models():
    rng = np.random.default_rng(0)
    xl = rng.normal(size=(100, 3))
    yl = (rng.random(100) < 1 / (1 + np.exp(-xl @ [1.0, -1.0, 0.5]))).astype(np.int64)
    xr = rng.normal(size=(50, 5))
    yr = xr @ rng.normal(size=5) + rng.normal(size=50)
    with pm.Model() as logistic:
        w = pm.Normal("w", 0, 2, shape=3)
        pm.Bernoulli("y", logit_p=pm.math.dot(xl, w), observed=yl)
    with pm.Model() as regression:
        w = pm.Normal("w", 0, 1, shape=5)
        pm.Normal("y", pm.math.dot(xr, w), 1.0, observed=yr)

    def numpyro_logistic(z):
        return (dist.Normal(0, 2).log_prob(z).sum()
                + dist.Bernoulli(logits=xl @ z).log_prob(yl).sum())  # fmt: skip

    def numpyro_regression(z):
        return dist.Normal(0, 1).log_prob(z).sum() + dist.Normal(xr @ z, 1.0).log_prob(yr).sum()

    return {
        "logistic regression (Bernoulli, logit_p)": (numpyro_logistic, logistic, 3),
        "linear regression (Normal)": (numpyro_regression, regression, 5),
    }


def _pymc_joint(compile_graph, model):
    fn = compile_graph(model.value_vars, [model.varlogp, model.datalogp])
    return lambda z: sum(fn(z))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/pymc_logp.md")
    args = p.parse_args()
    jax.config.update("jax_enable_x64", True)
    lines = [
        "# One gradient of a PyMC model, beside NumPyro's",
        "",
        f"`python benchmarks/pymc_logp.py` · {_machine.describe()} · "
        f"{time.strftime('%Y-%m-%d')} · µs per `jit(vmap(value_and_grad))` call over 512 "
        f"particles, float64; median of {ROUNDS} rounds of {CALLS} calls, the three timed in "
        "alternation.",
        "",
        "| model | NumPyro | PyMC, `get_jaxified_graph` | PyMC, the adapter's graph | "
        "PyMC / NumPyro before | after |",
        "|---|---|---|---|---|---|",
    ]
    for name, (numpyro_fn, model, dim) in models().items():
        fns = {
            "numpyro": numpyro_fn,
            "pymc": _pymc_joint(lambda i, o: get_jaxified_graph(inputs=i, outputs=o), model),
            "adapter": _pymc_joint(jaxified_graph, model),
        }
        z = jnp.asarray(np.random.default_rng(1).normal(size=(512, dim)))
        grads = {k: jax.jit(jax.vmap(jax.value_and_grad(f))) for k, f in fns.items()}
        values = {k: g(z) for k, g in grads.items()}
        for k in ("pymc", "adapter"):  # the same density and gradient
            np.testing.assert_allclose(values[k][0], values["numpyro"][0], rtol=1e-8)
            np.testing.assert_allclose(values[k][1], values["numpyro"][1], rtol=1e-8, atol=1e-10)
        times = {k: [] for k in grads}
        for _ in range(ROUNDS):
            for k, g in grads.items():
                start = time.perf_counter()
                for _ in range(CALLS):
                    out = g(z)
                jax.block_until_ready(out)
                times[k].append((time.perf_counter() - start) / CALLS * 1e6)
        us = {k: float(np.median(v)) for k, v in times.items()}
        lines.append(
            f"| {name} | {us['numpyro']:.0f} | {us['pymc']:.0f} | {us['adapter']:.0f} | "
            f"{us['pymc'] / us['numpyro']:.2f} | {us['adapter'] / us['numpyro']:.2f} |"
        )
        print(lines[-1], flush=True)
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
