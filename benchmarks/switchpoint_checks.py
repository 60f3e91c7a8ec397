"""The trust checks of one fixed-budget run on the enumerated two-switchpoint model, key by key:
whether a check fires on a right answer, and whether the bias check clears it.

    python benchmarks/switchpoint_checks.py [--keys 40] [--num-steps 1000] [--out FILE]

The model and data are ``benchmarks/switchpoint.py``'s (NumPyro, the switchpoints summed out by
enumeration, 111² terms per density: about 2 minutes a call on 2 CPU cores, under a second on
a GPU). Per key: ``phn.HAIS(two_switch, num_particles=512, num_steps=N)``, its error against the
exact evidence, SE, Pareto k̂, importance ESS, largest weight over the mean, the checks that
fired, the checks the bias check cleared (``ppl_hais.ladder.clears``) and its gap.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import warnings

import _machine
import jax
import jax.numpy as jnp
import numpy as np
import switchpoint as sp
from scipy.special import logsumexp

from ppl_hais.adapters import numpyro as phn


def one(key, y, num_steps, exact):
    """One call's figures: (table row, error, warned, cleared)."""
    t = time.perf_counter()
    h = phn.HAIS(sp.two_switch, num_particles=512, num_steps=num_steps, progress_bar=False)
    h.run(jax.random.key(key), jnp.asarray(y))
    r, ev = h.results[0], h.evidence
    lw = np.asarray(r.log_weights)
    top = float(np.exp(lw.max() - (logsumexp(lw) - np.log(lw.size))))
    names = lambda checks: ", ".join(c.split(":")[0] for c in checks) or "—"  # noqa: E731
    seconds = time.perf_counter() - t
    return (f"| {key} | {h.log_evidence - exact:+.4f} | {h.log_evidence_se:.4f} | "
            f"{r.pareto_k:.2f} | {r.ess:.0f} | {top:.1f} | {names(ev.checks)} | "
            f"{names(ev.cleared)} | {ev.bias_gap:+.3f} | {seconds:.1f} |",
            h.log_evidence - exact, bool(ev.checks), bool(ev.cleared))  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=40)
    p.add_argument("--num-steps", type=int, default=1000)
    p.add_argument("--out", default="docs/switchpoint_checks.md")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    y = sp.simulate()
    exact = sp.exact(y, 2)
    runs = []
    for key in range(args.keys):
        runs.append(one(key, y, args.num_steps, exact))
        print(runs[-1][0], flush=True)
    err = np.array([r[1] for r in runs])
    warned, cleared = np.array([r[2] for r in runs]), np.array([r[3] for r in runs])
    lines = [
        "# The trust checks of fixed-budget runs on the enumerated two-switchpoint model",
        "",
        f"`{shlex.join(['python', 'benchmarks/switchpoint_checks.py', *sys.argv[1:]])}` · "
        f"{_machine.describe()} · {time.strftime('%Y-%m-%d')}",
        "",
        __doc__.split("\n\n", 2)[2].strip().replace("\n", " "),
        "",
        f"Exact log evidence {exact:.3f}; {args.num_steps} temperatures. *top*: the largest "
        "weight over the mean; *gap*: the bias check's reverse estimate − the estimate (NaN: "
        "it did not run); *seconds*: the first call compiles.",
        "",
        "| key | error | SE | k̂ | ESS | top | warned by | cleared | gap | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *[r[0] for r in runs],
        "",
        f"{len(runs)} keys: {int(warned.sum())} warned ({int(np.sum(warned & (abs(err) <= 0.1)))} "
        f"of them within 0.1 nat), {int(cleared.sum())} cleared by their bias check; the "
        f"largest error {err[np.argmax(abs(err))]:+.4f}.",
    ]
    _machine.write(args.out, lines)


if __name__ == "__main__":
    main()
