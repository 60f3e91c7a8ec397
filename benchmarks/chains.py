"""Chains in one call against separate calls: ``ph.hais(..., num_chains=C)`` (one population of
C·P particles, one dispatch) against C calls of P particles, all with one shared pilot.

    python benchmarks/chains.py > docs/chains.md

36-D Laplace product of experts, 1000 temperatures, warm calls (the second of two rounds).
"""

import sys
import time
import warnings

import _machine
import jax

import ppl_hais as ph
from ppl_hais.annealing import survey
from ppl_hais.validation import product_of_experts


def main():
    warnings.simplefilter("ignore", ph.EvidenceWarning)
    target = product_of_experts("laplace", 36).target
    pilot = survey(jax.random.key(0), target, ph.hais_kernel(), num_steps=1000)
    kw = dict(num_steps=1000, pilot=pilot, progress_bar=False)
    print("# Chains in one call against separate calls\n")
    print(f"`python benchmarks/chains.py` · {_machine.describe()} · Python "
          f"{sys.version.split()[0]} · {time.strftime('%Y-%m-%d')}\n")  # fmt: skip
    print("| particles per chain | chains | separate calls (s) | one call (s) | speed-up |")
    print("|---|---|---|---|---|")
    for p, c in [(128, 4), (256, 4)]:
        for _ in range(2):
            start = time.perf_counter()
            for i in range(c):
                ph.hais(jax.random.key(i), target, num_particles=p, **kw)
            separate = time.perf_counter() - start
            start = time.perf_counter()
            ph.hais(jax.random.key(9), target, num_particles=p, num_chains=c, **kw)
            one = time.perf_counter() - start
        print(f"| {p} | {c} | {separate:.2f} | {one:.2f} | {separate / one:.2f}× |")


if __name__ == "__main__":
    main()
