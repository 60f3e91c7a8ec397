"""Command line: ``ppl-hais demo`` runs a validation case with a known answer.

Example
-------
>>> from ppl_hais.cli import main
>>> main(["--help"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
SystemExit: 0
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings


def demo(args) -> int:
    import jax
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import ppl_hais as ph

    from .checks.record import names
    from .model import validation as ex

    ph.enable_x64()
    case = ex.product_of_experts(args.expert, dim=args.dim)
    grid = [100, 300, 1000, 3000, 10_000]
    print(
        f"HAIS demo: {args.dim}-D product of {args.expert} experts ([HAIS12] §3), "
        f"{args.particles} particles, exact log Z = {case.log_z:.4f}"
    )
    print(f"{'N':>7} {'log Z estimate':>20} {'error':>9} {'time (s)':>9}  failed checks")
    results = []
    start = time.perf_counter()
    for i, n in enumerate(grid):
        with warnings.catch_warnings():  # shown in the table's last column instead
            warnings.simplefilter("ignore", ph.EvidenceWarning)
            r = ph.hais(
                jax.random.key(args.seed + i),
                case.target,
                num_particles=args.particles,
                num_steps=n,
                step_size=0.2,
                progress_bar=False,
            )
        results.append(r)
        failed = ", ".join(names(r.checks)) or "-"
        print(
            f"{n:>7} {r.log_z:>11.4f} ± {r.log_z_se:<6.4f} {r.log_z - case.log_z:>+9.4f} "
            f"{r.wall_time:>9.2f}  {failed}"
        )
    if any(r.checks for r in results):
        print("(failed checks are expected at small N: too few temperatures for the particles "
              "to keep up; each is explained by AISResult.summary())")  # fmt: skip
    total = time.perf_counter() - start
    best = results[-1]
    err = best.log_z - case.log_z
    print(
        f"\nestimate {best.log_z:.4f} ± {best.log_z_se:.4f}   truth {case.log_z:.4f}   "
        f"error {err:+.4f} ({err / best.log_z_se:+.1f} SE)"
        f"   wall time {total:.1f} s (compilation included)"
    )
    ax = ph.results.plots.plot_convergence(
        grid,
        {"HAIS": results},
        truth=case.log_z,
        title=f"HAIS on the {args.dim}-D {args.expert} POE",
    )
    ax.figure.tight_layout()
    ax.figure.savefig(args.out, dpi=120)
    plt.close(ax.figure)
    print(f"convergence plot written to {args.out}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ppl-hais", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run HAIS on a model with an exactly known normalizer")
    d.add_argument("--expert", choices=["laplace", "student"], default="laplace")
    d.add_argument("--dim", type=int, default=36)
    d.add_argument("--particles", type=int, default=200)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default="hais_demo.png")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(args)
    return 1


if __name__ == "__main__":
    sys.exit(main())
