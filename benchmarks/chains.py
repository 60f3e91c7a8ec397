"""Chains: what a call with C chains costs against one chain, through both adapters' default
calls, and ``ph.hais(..., num_chains=C)`` (one population of C·P particles, one dispatch)
against C calls of P particles.

    python benchmarks/chains.py [--out docs/chains.md] [--repeats 5]

Adapters: the trust suite's 50-D regression (``benchmarks/trust_suite.py``), default calls
(``phn.HAIS(model, num_chains=C).run``, ``php.sample_hais(chains=C)``: 512 particles a
chain, the convergence ladder, ``bias_check="auto"``), C = 1, 2, 4 in one process after a
first call with C = 1. For each C: the first call with that C (and the programs it compiled
or read from the persistent cache, from JAX's log), then the median of ``--repeats`` calls
(new seeds), the model gradients they spent (everything counted), and both as ratios to C = 1.

Populations: the 5-D vague regression through NumPyro with 512, 2048, 8192 and 4096 particles in
one process: what each new size compiles (two group sizes serve every population).

Core: a 36-D Laplace product of experts, 1000 temperatures, one shared pilot, warm calls.
"""

import argparse
import logging
import sys
import time
import warnings

import _machine
import jax
import numpy as np
import trust_suite

import ppl_hais as ph
from ppl_hais.annealing import survey
from ppl_hais.annealing.execution import layout
from ppl_hais.annealing.options import NUM_PARTICLES
from ppl_hais.model.validation import product_of_experts

CHAINS = (1, 2, 4)


class _Programs(logging.Handler):
    """Counts the programs JAX compiles or reads from its persistent cache (its log, with
    ``jax_log_compiles``), tiny conversion programs (``jit(stage)``) aside."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("Finished XLA compilation") and "jit(stage)" not in msg:
            self.count += 1


def _caller(adapter):
    """A function (chains, seed) → model gradients of one default call on the 50-D
    regression."""
    case = trust_suite.cases()["regression 50-D, chains=4"]
    if adapter == "numpyro":
        from ppl_hais.adapters import numpyro as phn

        model, args = case["numpyro"]

        def call(chains, seed):
            hais = phn.HAIS(model, num_chains=chains, progress_bar=False)
            hais.run(jax.random.key(seed), *args)
            return hais.evidence.gradients

        return call
    from ppl_hais.adapters import pymc as php

    model = case["pymc"]()

    def call(chains, seed):
        idata = php.sample_hais(model=model, chains=chains, random_seed=seed, progressbar=False)
        return int(idata["sample_stats"].attrs["gradients"])

    return call


def adapters_table(repeats):
    lines = [
        "| adapter | chains | particles | first call with these chains (s) | programs it "
        "compiled or read | warm call (s) | time / one chain's | gradients | gradients / one "
        "chain's |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    log = logging.getLogger("jax")
    for adapter in ("numpyro", "pymc"):
        call = _caller(adapter)
        call(1, 0)  # the process's first call: compiles what any chain count shares
        per_chain = NUM_PARTICLES  # both adapters' default
        base = None
        for chains in CHAINS:
            counter = _Programs()
            log.addHandler(counter)
            log.setLevel(logging.DEBUG)
            with jax.log_compiles(True):
                start = time.perf_counter()
                call(chains, 100)
                first = time.perf_counter() - start
            log.removeHandler(counter)
            times, grads = [], []
            for seed in range(1, repeats + 1):
                start = time.perf_counter()
                grads.append(call(chains, seed))
                times.append(time.perf_counter() - start)
            warm, gradients = float(np.median(times)), float(np.mean(grads))
            base = base or (warm, gradients)
            lines.append(
                f"| {adapter} | {chains} | {chains * per_chain} | {first:.2f} | {counter.count} "
                f"| {warm:.2f} | {warm / base[0]:.2f}× | {gradients / 1e6:.2f} M "
                f"| {gradients / base[1]:.2f}× |"
            )
            print(lines[-1], flush=True)
    return lines


def populations_table(repeats):
    """The 5-D vague regression through NumPyro with 512, 2048, 8192 and 4096 particles in one
    process: what each new population size compiles, and its warm calls (a cheap model, whose
    steps are mostly the particle groups' per-step overhead)."""
    from ppl_hais.adapters import numpyro as phn

    model, args = trust_suite.cases()["regression 5-D, vague N(0, 100²)"]["numpyro"]
    lines = [
        "| particles | groups × size | first call with this many (s) | programs it compiled or "
        "read | warm call (s) |",
        "|---|---|---|---|---|",
    ]
    log = logging.getLogger("jax")
    for n in (512, 2048, 8192, 4096):
        call = lambda seed, n=n: phn.HAIS(model, num_particles=n, progress_bar=False).run(  # noqa: E731
            jax.random.key(seed), *args
        )
        counter = _Programs()
        log.addHandler(counter)
        log.setLevel(logging.DEBUG)
        with jax.log_compiles(True):
            start = time.perf_counter()
            call(100)
            first = time.perf_counter() - start
        log.removeHandler(counter)
        times = []
        for seed in range(1, repeats + 1):
            start = time.perf_counter()
            call(seed)
            times.append(time.perf_counter() - start)
        groups, size = layout(n)
        lines.append(f"| {n} | {groups} × {size} | {first:.2f} | {counter.count} "
                     f"| {np.median(times):.2f} |")  # fmt: skip
        print(lines[-1], flush=True)
    return lines


def core_table():
    target = product_of_experts("laplace", 36).target
    pilot = survey(jax.random.key(0), target, ph.hais_kernel(), num_steps=1000)
    kw = dict(num_steps=1000, pilot=pilot, progress_bar=False)
    lines = [
        "| particles per chain | chains | separate calls (s) | one call (s) | speed-up |",
        "|---|---|---|---|---|",
    ]
    for p, c in [(128, 4), (256, 4)]:
        for _ in range(2):  # the second round is reported: the first compiles
            start = time.perf_counter()
            for i in range(c):
                ph.hais(jax.random.key(i), target, num_particles=p, **kw)
            separate = time.perf_counter() - start
            start = time.perf_counter()
            ph.hais(jax.random.key(9), target, num_particles=p, num_chains=c, **kw)
            one = time.perf_counter() - start
        lines.append(f"| {p} | {c} | {separate:.2f} | {one:.2f} | {separate / one:.2f}× |")
        print(lines[-1], flush=True)
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="docs/chains.md")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    warnings.simplefilter("ignore")  # EvidenceWarning and PyMC's own chatter
    head = [
        "# Chains: what C chains cost against one",
        "",
        f"`python benchmarks/chains.py --repeats {args.repeats}` · {_machine.describe()} · "
        f"Python {sys.version.split()[0]} · {time.strftime('%Y-%m-%d')}",
        "",
        "## Through the adapters' default calls",
        "",
        "The trust suite's 50-D regression (100 rows), `phn.HAIS(model, num_chains=C).run` and "
        "`php.sample_hais(chains=C)` with their defaults (512 particles a chain), in one "
        "process after a first call with one chain. *programs*: what the first call with C "
        "chains compiled (or read from the persistent cache) beyond what earlier calls did; "
        f"*warm call*: the median of {args.repeats} calls with new seeds; *gradients*: their "
        "mean, everything counted (pilots, fits, checks).",
        "",
    ]
    lines = head + adapters_table(args.repeats)
    lines += [
        "",
        "## New population sizes of a cheap model",
        "",
        "The trust suite's 5-D regression with a vague N(0, 100²) prior, "
        "`phn.HAIS(model, num_particles=N).run` with its defaults, N in the order shown in one "
        "process (each first call after the earlier sizes'), the median of "
        f"{args.repeats} warm calls; *groups × size*: the main run's particle groups on this "
        "machine (`execution.layout`).",
        "",
    ]
    lines += populations_table(args.repeats)
    lines += [
        "",
        "## In the core: one call against separate calls",
        "",
        "`ph.hais(..., num_chains=4)` against 4 calls of `ph.hais`, a 36-D Laplace product of "
        "experts, 1000 temperatures, one shared pilot, warm calls.",
        "",
    ]
    lines += core_table()
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
