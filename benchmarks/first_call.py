"""First calls: what a user waits for in a fresh Python process, with and without the persistent
compilation cache, and whether a new budget compiles anything.

    python benchmarks/first_call.py [--out docs/first_call.md] [--models regression banana ...]
    python benchmarks/first_call.py --python .venv/bin/python --python .venv-oldest/bin/python
    python benchmarks/first_call.py --before ../old-checkout [--out FILE]   # an A/B, printed
    python benchmarks/first_call.py --before ../old-checkout --cache off [--out ...]

Each cell is a fresh Python process (imports excluded from the times) that builds one model (by
default the README's regression, centered eight schools and a logistic regression) and calls,
in order: the default call (the first call: tracing, compiling, running), the same call
with three new seeds (warm: the median of the three), and a call with another number of
temperatures (3000 instead of 1000: a new budget). ``pm.sample_smc`` (its defaults,
``cores=1``) is called four times in a fresh process of its own, so its first call pays what a
user's does (importing Numba, compiling its functions), as ours do, and its warm call is the
median of the other three.
Three cache states per model and adapter: ``off`` (``PPL_HAIS_COMPILATION_CACHE=0``), ``cold``
(empty cache directories, ours and PyTensor's: the first process on a new machine) and ``warm``
(a second process on the same directories). ``pm.sample_smc``'s first call is measured twice:
with PyTensor's compilation cache (``~/.pytensor``) warm, as on any machine that ran the model
once, and on a new machine (an empty PyTensor compile directory), the one a cold row of ours
compares with. Each call's seconds are also
split into the workflow's phases, clocked around the functions that run them: the profile of
where a default call's time goes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

import _machine

OWN = ["readme_regression", "eight_schools_centered", "regression", "eight_schools", "logistic"]
MODELS = ["readme_regression", "eight_schools_centered", "logistic"]

CHILD = textwrap.dedent(
    r"""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    import numpy as np
    adapter, name = sys.argv[1], sys.argv[2]
    case, chains = None, 1  # a trust-suite model by part of its name, else one of three here
    if name not in ("readme_regression", "eight_schools_centered", "regression", "eight_schools",
                    "logistic"):
        sys.path.insert(0, sys.argv[3])
        import trust_suite
        case = next(c for n, c in trust_suite.cases().items() if name in n)
        chains = case["chains"]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 5)); y = X @ rng.normal(size=5) + rng.normal(size=50)
    Xr = np.random.default_rng(0).normal(size=(100, 3))  # the README's regression
    yr = Xr @ np.array([1.0, -0.5, 0.2]) + 0.3 * np.random.default_rng(0).normal(size=100)
    Xl = rng.normal(size=(100, 3))
    yl = (rng.random(100) < 1 / (1 + np.exp(-Xl @ [1.0, -1.0, 0.5]))) * 1
    school_y = np.array([28., 8., -3., 7., -1., 1., 18., 12.])
    school_s = np.array([15., 10., 16., 11., 9., 11., 10., 18.])
    import logging, re
    import jax, ppl_hais
    times = {}
    # what the first call's seconds are made of: JAX logs each trace, lowering and compilation
    # (or persistent-cache read) with its duration when jax_log_compiles is on
    phases = {"trace": 0.0, "lower": 0.0, "compile": 0.0}
    class Phases(logging.Handler):
        def emit(self, record):
            msg = record.getMessage()
            m = re.search(r"in ([0-9.e+-]+) sec", msg)
            if m is None or not msg.startswith("Finished"):
                return
            kind = ("trace" if "tracing" in msg else "lower" if "MLIR" in msg
                    else "compile" if "compilation" in msg else None)
            if kind:
                phases[kind] += float(m.group(1))
    # where a call's seconds go: the workflow's phases and the adapter's own work, clocked
    spent = {}
    def clock(module, name, phase):
        import importlib
        mod = importlib.import_module(module)
        fn = getattr(mod, name)
        def clocked(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - t
        setattr(mod, name, clocked)
    def timed(label, fn):
        spent.clear()
        t = time.perf_counter(); fn(); times[label] = time.perf_counter() - t
        times.update({f"{label}: {k}": v for k, v in spent.items()})
    def median(label, fns):  # the call of median time, with its phases
        runs = []
        for fn in fns:
            for k in [k for k in times if k == label or k.startswith(label + ": ")]:
                del times[k]
            timed(label, fn)
            runs.append({k: v for k, v in times.items()
                         if k == label or k.startswith(label + ": ")})
        times.update(sorted(runs, key=lambda r: r[label])[len(runs) // 2])
    if adapter == "numpyro":
        import numpyro, numpyro.distributions as dist
        from ppl_hais.adapters import numpyro as phn
        def regression(X, y):
            w = numpyro.sample("w", dist.Normal(0, 1).expand([5]).to_event(1))
            numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)
        def eight_schools(s, y):
            mu = numpyro.sample("mu", dist.Normal(0, 5))
            tau = numpyro.sample("tau", dist.HalfCauchy(5))
            th = numpyro.sample("th", dist.Normal(0, 1).expand([8]).to_event(1))
            numpyro.sample("y", dist.Normal(mu + tau * th, s), obs=y)
        def logistic(X, y):
            w = numpyro.sample("w", dist.Normal(0, 2).expand([3]).to_event(1))
            numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)
        def readme_regression(X, y):
            w = numpyro.sample("w", dist.Normal(0, 1).expand([3]).to_event(1))
            sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
            numpyro.sample("y", dist.Normal(X @ w, sigma), obs=y)
        def eight_schools_centered(s, y):
            mu = numpyro.sample("mu", dist.Normal(0, 5))
            tau = numpyro.sample("tau", dist.HalfCauchy(5))
            th = numpyro.sample("th", dist.Normal(mu, tau).expand([8]).to_event(1))
            numpyro.sample("y", dist.Normal(th, s), obs=y)
        model, args = {"regression": (regression, (X, y)),
                       "readme_regression": (readme_regression, (Xr, yr)),
                       "eight_schools_centered": (eight_schools_centered, (school_s, school_y)),
                       "eight_schools": (eight_schools, (school_s, school_y)),
                       "logistic": (logistic, (Xl, yl))}.get(name) or case["numpyro"]
        def call(seed, **kw):
            h = phn.HAIS(model, progress_bar=False, num_chains=chains, **kw)
            h.run(jax.random.key(seed), *args)
            return h.log_evidence
    else:  # "pymc" or "smc"
        import pymc as pm
        from ppl_hais.adapters import pymc as php
        with pm.Model() as m:
            if name == "regression":
                w = pm.Normal("w", 0, 1, shape=5)
                pm.Normal("y", X @ w, 1.0, observed=y)
            elif name == "eight_schools":
                mu = pm.Normal("mu", 0, 5); tau = pm.HalfCauchy("tau", 5)
                th = pm.Normal("th", 0, 1, shape=8)
                pm.Normal("y", mu + tau * th, school_s, observed=school_y)
            elif name == "readme_regression":
                w = pm.Normal("w", 0, 1, shape=3)
                sigma = pm.HalfNormal("sigma", 1.0)
                pm.Normal("y", pm.math.dot(Xr, w), sigma, observed=yr)
            elif name == "eight_schools_centered":
                mu = pm.Normal("mu", 0, 5); tau = pm.HalfCauchy("tau", 5)
                th = pm.Normal("th", mu, tau, shape=8)
                pm.Normal("y", th, school_s, observed=school_y)
            elif name == "logistic":
                w = pm.Normal("w", 0, 2, shape=3)
                pm.Bernoulli("y", logit_p=pm.math.dot(Xl, w), observed=yl)
        if case is not None:
            m = case["pymc"]()
        def call(seed, **kw):
            return php.sample_hais(model=m, random_seed=seed, progressbar=False, chains=chains,
                                   **kw)
    if adapter != "smc":
        for module, name, phase in [
            ("ppl_hais.workflow.evidence", "_tuned", "start and tuning"),
            ("ppl_hais.workflow.climb", "chains", "anneals"),
            ("ppl_hais.workflow.climb", "check_bias", "bias check"),
            ("ppl_hais.adapters.numpyro.hais", "NumPyroTarget", "model to JAX"),
            ("ppl_hais.adapters.pymc.smc", "cached_target", "model to JAX"),
            ("ppl_hais.adapters.pymc.smc", "from_ais", "ArviZ"),
        ]:
            # each adapter's own modules only: importing PyMC 5 sets XLA_FLAGS to 100 host
            # devices, under which JAX 0.10 anneals at half speed (a NumPyro user's process
            # does not import it)
            if module.startswith("ppl_hais.adapters.") and adapter not in module:
                continue
            clock(module, name, phase)
        jax.config.update("jax_log_compiles", True)
        handler = Phases(); log = logging.getLogger("jax")
        level, propagate = log.level, log.propagate  # restored for the calls after
        log.addHandler(handler); log.setLevel(logging.DEBUG); log.propagate = False
        timed("first", lambda: call(0))
        log.removeHandler(handler); jax.config.update("jax_log_compiles", False)
        log.setLevel(level); log.propagate = propagate
        times.update({f"first {k}": v for k, v in phases.items()})
        median("warm", [lambda s=s: call(s) for s in (1, 2, 3)])
        timed("new budget", lambda: call(2, num_steps=3000))
    else:
        smc = lambda s: pm.sample_smc(model=m, random_seed=s, progressbar=False, cores=1,
                                      compute_convergence_checks=False)
        timed("smc first", lambda: smc(0))
        median("smc warm", [lambda s=s: smc(s) for s in (1, 2, 3)])
    print("RESULT", json.dumps(times))
    """
)


def child(adapter, model, env, cwd=None, python=sys.executable):
    out = subprocess.run(
        [python, "-c", CHILD, adapter, model, os.path.dirname(os.path.abspath(__file__))],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{adapter}/{model} failed:\n{out.stderr[-3000:]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/first_call.md")
    p.add_argument("--models", nargs="*", default=MODELS,
                   help=f"{', '.join(OWN)}, or part of a trust-suite model's name "
                        "(benchmarks/trust_suite.py: funnel, two-mode, banana, ...)")
    p.add_argument("--python", action="append", default=None,
                   help="an interpreter (a virtual environment's python) whose stack is "
                        "measured; several side by side, each model in turn (default: this "
                        "one)")  # fmt: skip
    p.add_argument("--before", default=None,
                   help="a checkout of an earlier commit: compare its warm-cache first calls "
                        "with this one's, alternating, instead of the full table")  # fmt: skip
    p.add_argument("--repeats", type=int, default=1,
                   help="with --before: processes per version, alternating; medians reported")
    p.add_argument("--cache", choices=["warm", "off"], default="warm",
                   help="with --before: the first call on a warm persistent cache (a second "
                        "process) or without the cache (every process compiles)")  # fmt: skip
    args = p.parse_args()
    if args.before:
        return compare(args)
    rows, smc = [], {}
    stacks = {python: stack(python) for python in args.python or [sys.executable]}
    for model in args.models:
        for python, label in stacks.items():
            # a new machine's first process: an empty PyTensor compile directory, which it
            # fills with the model's C code; then a process of its own fills ~/.pytensor, so
            # the measured process's first call reads it, as on a machine that ran the model
            with tempfile.TemporaryDirectory() as fresh:
                new = child("smc", model, _pytensor_dir(fresh), python=python)["smc first"]
            child("smc", model, {}, python=python)
            t = child("smc", model, {}, python=python)
            smc[label, model] = (t["smc first"], t["smc warm"], new)
            print(label, model, "pm.sample_smc", smc[label, model], flush=True)
            for adapter in ("numpyro", "pymc"):
                with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as pt:
                    on = {"PPL_HAIS_COMPILATION_CACHE": "1", "PPL_HAIS_CACHE_DIR": cache,
                          **_pytensor_dir(pt)}  # fmt: skip
                    off = {"PPL_HAIS_COMPILATION_CACHE": "0"}
                    states = [(state, child(adapter, model, env, python=python))
                              for state, env in (("off", off), ("cold", on), ("warm", on))]
                for state, t in states:
                    rows.append((label, model, adapter, state, t))
                    print(label, model, adapter, state, {k: round(v, 2) for k, v in t.items()},
                          flush=True)  # fmt: skip
    lines = [
        "# First calls: compilation paid once per machine",
        "",
        f"Command: `python benchmarks/first_call.py {' '.join(sys.argv[1:])}`".rstrip() + "  ",
        f"Machine: {_machine.describe()}; {datetime.date.today()}.",
        "",
        __doc__.split("\n\n", 2)[2].strip().replace("\n", " "),
        "",
        "Seconds per call (whole calls: the default ladder, whose first rung anneals 512 "
        "particles over 250 temperatures, PyMC's `draws=1000` resampled from them; "
        '`initial="auto"`, `bias_check="auto"`).',
        "",
        "| stack | model | adapter | cache | first call | of which trace / lower / compile or "
        "read | warm call | new budget (3000 temperatures) "
        "| pm.sample_smc first | pm.sample_smc first, new machine | pm.sample_smc warm "
        "| first call / sample_smc first |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, model, adapter, state, t in rows:
        f = lambda k, t=t: f"{t[k]:.2f}" if k in t else ""  # noqa: E731
        s_first, s_warm, s_new = smc[label, model]
        lines.append(
            f"| {label} | {model} | {adapter} | {state} | {f('first')} "
            f"| {f('first trace')} / {f('first lower')} / {f('first compile')} "
            f"| {f('warm')} | {f('new budget')} "
            f"| {s_first:.2f} | {s_new:.2f} | {s_warm:.2f} | {t['first'] / s_first:.2f} |"
        )
    phases = ("model to JAX", "start and tuning", "anneals", "bias check", "ArviZ")
    lines += [
        "",
        "Where the seconds go: each call's time in the workflow's phases (the model turned "
        "into a JAX density; the start's choice, its fits and pilots, or the memory of them; "
        "the anneals of every rung; the bias check; the ArviZ output), the rest being the "
        "adapter's and the workflow's own host work (resampling, constraining the draws, the "
        "checks). Warm-cache rows (a second process).",
        "",
        "| stack | model | adapter | call | total | " + " | ".join(phases) + " | rest |",
        "|---|---|---|---|---|" + "---|" * (len(phases) + 1),
    ]
    for label, model, adapter, state, t in rows:
        if state != "warm":
            continue
        for call in ("first", "warm"):
            parts = [t.get(f"{call}: {p}", 0.0) for p in phases]
            cells = " | ".join(f"{v:.2f}" for v in parts)
            lines.append(f"| {label} | {model} | {adapter} | {call} | {t[call]:.2f} | {cells} | "
                         f"{t[call] - sum(parts):.2f} |")
    cold = {(r[0], r[1], r[2]): r[4] for r in rows if r[3] == "cold"}
    lines += [
        "",
        "The same rows as ratios: a second process's first call (warm cache) over the first "
        "process's (cold cache); how many times faster than `pm.sample_smc`'s warm call a warm "
        "call is (the warm-cache process's); a cold first call (a new machine's) over "
        "`pm.sample_smc`'s first on a new machine, and over its first with PyTensor's cache "
        "warm.",
        "",
        "| stack | model | adapter | second process / first process | warm call: × faster "
        "than pm.sample_smc | cold first call / pm.sample_smc first, new machine "
        "| cold first call / pm.sample_smc first, PyTensor cache warm |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, model, adapter, state, t in rows:
        if state != "warm":
            continue
        first = cold[label, model, adapter]["first"]
        s_first, s_warm, s_new = smc[label, model]
        lines.append(f"| {label} | {model} | {adapter} | {t['first'] / first:.2f} "
                     f"| {s_warm / t['warm']:.1f} | {first / s_new:.2f} | {first / s_first:.2f} |")
    lines += [
        "",
        "The first call without the cache is tracing + compiling + running; with a warm cache "
        "the compiling is read from disk (tracing and lowering remain: JAX hashes the lowered "
        "program to find it). The anneal takes the number of temperatures as data, so a new "
        "budget compiles no anneal; a new-budget call can still compile something the earlier "
        'calls did not need, e.g. the bias check\'s MCMC when `bias_check="auto"` runs it '
        "for the first time in the process. The split of the first call is JAX's own log "
        "(`jax_log_compiles`): time spent tracing Python into jaxprs, lowering them to "
        "StableHLO, and compiling with XLA or reading the compiled program from the cache; the "
        "rest of the first call is running (pilots, Laplace fit, main run, checks) and Python.",
    ]
    _machine.write(args.out, lines)


def _pytensor_dir(path):
    """The environment that gives a child PyTensor's compile directory ``path``."""
    flags = ",".join(f for f in (os.environ.get("PYTENSOR_FLAGS", ""), f"base_compiledir={path}")
                     if f)  # fmt: skip
    return {"PYTENSOR_FLAGS": flags}


def stack(python):
    """A short label of an interpreter's stack: Python, JAX and PyMC versions."""
    code = ("import sys, jax, pymc; v = sys.version_info; "
            "print(f'Python {v.major}.{v.minor}, JAX {jax.__version__}, PyMC {pymc.__version__}')")
    return subprocess.run([python, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def compare(args):
    """Warm-cache first calls of an earlier checkout and of this one, side by side: each
    version fills its own empty cache in one process, then a second process makes the timed
    first call. The children run from a neutral directory with the version's root first on
    ``PYTHONPATH`` (the earlier checkout needs ``ppl_hais/adapters`` linked to its
    ``adapters/``, as an editable install maps it)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    versions = [("before", os.path.abspath(args.before)), ("after", here)]
    commits = [
        subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                       text=True).stdout.strip() or "?"
        for _, root in versions
    ]  # fmt: skip
    lines = [
        "# First calls before and after: the same machine, alternating",
        "",
        f"Command: `python benchmarks/first_call.py --before CHECKOUT --cache {args.cache} "
        f"--repeats {args.repeats} --models {' '.join(args.models)}` (before: {commits[0]}, "
        f"after: {commits[1]} and the working tree)  ",
        f"Machine: {_machine.describe()}; {datetime.date.today()}.",
        "",
        (
            "The first call in a second process on a warm persistent cache (the one a user "
            "meets every time after the first)"
            if args.cache == "warm"
            else "The first call in a fresh process without the persistent cache (what the "
            "first process on a machine pays, or every process with the cache switched off)"
        )
        + ", seconds (the median of --repeats processes per version, the versions alternating; "
        "each process's first call in brackets); its trace / lower / compile-or-read split "
        "from JAX's log; the warm call after it.",
        "",
        "| model | adapter | version | first call | trace / lower / compile or read "
        "| warm call | pm.sample_smc first |",
        "|---|---|---|---|---|---|---|",
    ]
    firsts = {}
    with tempfile.TemporaryDirectory() as neutral:
        for model in args.models:
            smc = f"{child('smc', model, {})['smc first']:.2f}"
            for adapter in ("numpyro", "pymc"):
                runs = {label: [] for label, _ in versions}
                for _ in range(args.repeats):  # the versions alternate, repeat by repeat
                    for label, root in versions:
                        with tempfile.TemporaryDirectory() as cache:
                            env = {"PPL_HAIS_COMPILATION_CACHE": "1", "PPL_HAIS_CACHE_DIR": cache,
                                   "PYTHONPATH": root}  # fmt: skip
                            if args.cache == "off":
                                env["PPL_HAIS_COMPILATION_CACHE"] = "0"
                            else:
                                child(adapter, model, env, cwd=neutral)  # fills the cache
                            runs[label].append(child(adapter, model, env, cwd=neutral))
                for label, _ in versions:
                    t = {k: statistics.median(r[k] for r in runs[label]) for k in runs[label][0]
                         if isinstance(runs[label][0][k], (int, float))}
                    firsts[model, adapter, label] = t["first"]
                    spread = " ".join(f"{r['first']:.2f}" for r in runs[label])
                    lines.append(
                        f"| {model} | {adapter} | {label} | {t['first']:.2f}"
                        + (f" ({spread})" if args.repeats > 1 else "")
                        + f" | {t['first trace']:.2f} / {t['first lower']:.2f} / "
                        f"{t['first compile']:.2f} | {t['warm']:.2f} | {smc} |"
                    )
                    print(lines[-1], flush=True)
    ratios = [firsts[m, a, "after"] / firsts[m, a, "before"] for m in args.models
              for a in ("numpyro", "pymc")]  # fmt: skip
    lines += ["", f"First call after / before: {min(ratios):.2f}–{max(ratios):.2f}."]
    # an A/B of two checkouts is a measurement for a change, not a page of the site
    _machine.report(args.out if args.out != "docs/first_call.md" else None, lines)


if __name__ == "__main__":
    main()
