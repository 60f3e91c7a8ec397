"""Simulation-based calibration of a Bayes factor on a random-intercept design: what it costs
per data set, side by side with the ways a user would otherwise get the evidences.

    python benchmarks/bf_calibration.py [--datasets 200] [--default-datasets 40] \
        [--nuts-datasets 6] [--out docs/bf_calibration.md]

The design (the first of Schad, Modrák & Vasishth 2024): 20 subjects × 10 trials, a condition
coded ±½ within subjects; H1: y = α + u_subject + β·condition + ε, H0 the same without β
(u ~ N(0, τ), non-centered; α ~ N(0, 1), β ~ N(0, 0.3), τ ~ N⁺(0, 0.5), σ ~ N⁺(0, 1)).
Data sets come from the models' joint prior with equal prior probabilities.

Rows, each in this process after a warm-up calibration that compiles what it needs:

- ``phn.calibrate_bayes_factors`` and ``php.calibrate_bayes_factors`` on all ``--datasets``
  data sets × 2 models with a fixed evidence: one run of 250 temperatures from the start
  ``initial="auto"`` chooses, its checks kept (``num_steps=250``), each model compiled once,
  16 data sets side by side (``batch_size=16``, the default);
- the same through NumPyro one data set after another (``batch_size=1``) on the first
  ``--default-datasets`` data sets;
- the same through NumPyro with the default evidence (the convergence ladder) on the first
  ``--default-datasets`` data sets;
- a loop of default calls a PyMC user would write (``pm.observe`` on each data set, then
  ``php.sample_hais``): every data set a new model graph, so every call compiles;
- NUTS (4 chains × 1000 draws after 1000 warm-up, NumPyro, chains vectorized) and
  ``phn.bridge_sampling`` on each data set.

The loop and NUTS run on the first ``--nuts-datasets`` data sets of the NumPyro calibration
(the same data), and every row's seconds per data set are set against NUTS + bridge's.
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import _machine
import numpy as np

S, T = 20, 10  # subjects, trials per subject


def design():
    subject = np.repeat(np.arange(S), T)
    condition = np.tile([-0.5, 0.5], S * T // 2)
    return subject, condition


def numpyro_models():
    import numpyro
    import numpyro.distributions as dist

    def make(effect):
        def model(subject, condition, y=None):
            alpha = numpyro.sample("alpha", dist.Normal(0.0, 1.0))
            beta = numpyro.sample("beta", dist.Normal(0.0, 0.3)) if effect else 0.0
            tau = numpyro.sample("tau", dist.HalfNormal(0.5))
            sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
            with numpyro.plate("subjects", S):
                raw = numpyro.sample("u_raw", dist.Normal(0.0, 1.0))
            mean = alpha + tau * raw[subject] + beta * condition
            numpyro.sample("y", dist.Normal(mean, sigma), obs=y)

        return model

    return {"H0": make(False), "H1": make(True)}


def pymc_model(effect, y):
    import pymc as pm

    subject, condition = design()
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 1.0)
        beta = pm.Normal("beta", 0.0, 0.3) if effect else 0.0
        tau = pm.HalfNormal("tau", 0.5)
        sigma = pm.HalfNormal("sigma", 1.0)
        raw = pm.Normal("u_raw", 0.0, 1.0, shape=S)
        pm.Normal("y", alpha + tau * raw[subject] + beta * condition, sigma, observed=y)
    return model


FIXED = dict(num_steps=250)  # the fixed evidence of the main rows: one run, its checks kept


def calibrations(num, num_default, seed=0):
    import jax

    from ppl_hais.adapters import numpyro as phn
    from ppl_hais.adapters import pymc as php

    subject, condition = design()
    out, models = {}, numpyro_models()

    def numpyro_run(n, key, opts, batch_size=16):
        return phn.calibrate_bayes_factors(jax.random.key(key), models, subject, condition,
                                           observed=["y"], num_datasets=n, options=opts,
                                           progress_bar=False, batch_size=batch_size)  # fmt: skip

    for name, n, opts, batch in (("numpyro", num, FIXED, 16),
                                 ("numpyro_one_by_one", num_default, FIXED, 1),
                                 ("numpyro_default", num_default, None, 16)):  # fmt: skip
        numpyro_run(8, seed + 1, opts, batch)  # compiles
        start = time.perf_counter()
        out[name] = numpyro_run(n, seed, opts, batch)
        out[f"{name}_s"] = time.perf_counter() - start
    models = {"H0": pymc_model(False, np.zeros(S * T)), "H1": pymc_model(True, np.zeros(S * T))}
    php.calibrate_bayes_factors(models, num_datasets=8, random_seed=seed + 1, progressbar=False,
                                **FIXED)  # fmt: skip
    start = time.perf_counter()
    out["pymc"] = php.calibrate_bayes_factors(models, num_datasets=num, random_seed=seed,
                                              progressbar=False, **FIXED)  # fmt: skip
    out["pymc_s"] = time.perf_counter() - start
    return out


def pymc_loop(data, true):
    """Seconds per data set of a user's loop: a new model per data set, php.sample_hais."""
    import pymc as pm

    from ppl_hais.adapters import pymc as php

    base = {"H0": pymc_model(False, np.zeros(S * T)), "H1": pymc_model(True, np.zeros(S * T))}
    start, values = time.perf_counter(), []
    for d in range(len(data)):
        row = []
        for model in base.values():
            with pm.observe(model, {"y": data[d]}):
                idata = php.sample_hais(random_seed=d, progressbar=False)
            row.append(float(idata["sample_stats"]["log_evidence"]))
        values.append(row)
    return (time.perf_counter() - start) / len(data), np.array(values)


def nuts_bridge(data):
    """Seconds per data set of NUTS (4 × 1000 after 1000) + phn.bridge_sampling, both models."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from ppl_hais.adapters import numpyro as phn

    subject, condition = design()
    models = numpyro_models()
    start, values = time.perf_counter(), []
    for d in range(len(data)):
        row = []
        for model in models.values():
            mcmc = MCMC(NUTS(model), num_warmup=1000, num_samples=1000, num_chains=4,
                        chain_method="vectorized", progress_bar=False)  # fmt: skip
            mcmc.run(jax.random.key(d), subject, condition, y=data[d])
            res = phn.bridge_sampling(mcmc, model, subject, condition, y=data[d],
                                      progress_bar=False)  # fmt: skip
            row.append(res.log_z)
        values.append(row)
    return (time.perf_counter() - start) / len(data), np.array(values)


def versus(reference, seconds) -> str:
    """A row's seconds against the reference's, as "n× faster" or "n× slower"."""
    ratio = reference / seconds
    return f"{ratio:.1f}× faster" if ratio >= 1 else f"{1 / ratio:.1f}× slower"


def table(df) -> list[str]:
    """A DataFrame as Markdown table lines (index first)."""
    cols = [str(c) for c in df.columns]
    out = ["| | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for idx, row in df.iterrows():
        out.append(f"| {idx} | " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                                             for v in row) + " |")  # fmt: skip
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=int, default=200)
    p.add_argument("--default-datasets", type=int, default=40)
    p.add_argument("--nuts-datasets", type=int, default=6)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    warnings.simplefilter("ignore")
    cal = calibrations(a.datasets, a.default_datasets)
    first = cal["numpyro"].datasets["y"][: a.nuts_datasets]
    loop_s, loop_z = pymc_loop(first, cal["numpyro"].true_model[: a.nuts_datasets])
    nuts_s, nuts_z = nuts_bridge(first)
    ours = cal["numpyro"].log_evidence[: a.nuts_datasets]
    command = (f"python benchmarks/bf_calibration.py --datasets {a.datasets} "
               f"--default-datasets {a.default_datasets} --nuts-datasets {a.nuts_datasets}")
    lines = [
        "# Calibrating a Bayes factor: a random-intercept design",
        "",
        f"`{command}`",
        "",
        f"Machine: {_machine.describe()}; {datetime.date.today().isoformat()}.",
        "",
        f"{S} subjects × {T} trials, a condition within subjects; H1 with its effect, H0 without "
        "(the first design of Schad, Modrák & Vasishth 2024), data sets from the models' joint "
        "prior, equal prior probabilities. *fixed*: every evidence one run of 250 temperatures "
        "from the start the call chooses, its checks kept (`num_steps=250`); *default*: the "
        "evidence workflow's defaults (the convergence ladder). The calibrations estimate 16 "
        "data sets side by side (`batch_size=16`: their anneals run as vmapped calls over the "
        "data sets); `batch_size=1` estimates them one after another. Each row runs after a "
        "calibration of 8 data sets of the same models, which compiles what it needs.",
        "",
        "| | evidence | data sets × models | seconds | s per data set | vs NUTS + bridge |",
        "|---|---|---|---|---|---|",
    ]
    rows = [("`phn.calibrate_bayes_factors`", "fixed", "numpyro", a.datasets),
            ("`phn.calibrate_bayes_factors(batch_size=1)`", "fixed", "numpyro_one_by_one",
             a.default_datasets),
            ("`php.calibrate_bayes_factors`", "fixed", "pymc", a.datasets),
            ("`phn.calibrate_bayes_factors`", "default", "numpyro_default", a.default_datasets)]
    for label, kind, name, n in rows:
        per = cal[f"{name}_s"] / n
        lines.append(f"| {label} | {kind} | {n} × 2 | {cal[f'{name}_s']:.0f} | {per:.2f} | "
                     f"{versus(nuts_s, per)} |")  # fmt: skip
    lines += [
        f"| loop of `pm.observe` + `php.sample_hais` | default | {a.nuts_datasets} × 2 | "
        f"{loop_s * a.nuts_datasets:.0f} | {loop_s:.2f} | {versus(nuts_s, loop_s)} |",
        f"| NUTS 4 × 1000 + `phn.bridge_sampling` | bridge | {a.nuts_datasets} × 2 | "
        f"{nuts_s * a.nuts_datasets:.0f} | {nuts_s:.2f} | 1 |",
        "",
        f"On the first {a.nuts_datasets} data sets (log evidence, nats): fixed − NUTS + bridge "
        f"rms {np.sqrt(np.mean((ours - nuts_z) ** 2)):.3f}, fixed − default loop rms "
        f"{np.sqrt(np.mean((ours - loop_z) ** 2)):.3f}.",
        "",
        "## Calibration",
        "",
    ]
    for name in ("numpyro", "pymc", "numpyro_default"):
        c = cal[name]
        lines += [f"### {name.replace('_', ', ')}", "", *table(c.marginal()), "",
                  f"Gradients per data set and model: median {np.median(c.gradients):.3g}; "
                  f"warned data sets {int(c.warned.sum())} of {c.num_datasets}.", "",
                  "Design analysis (BF₁₀ threshold 10):", "",
                  *table(c.design("H1", "H0")), ""]  # fmt: skip
    _machine.report(a.out, lines)


if __name__ == "__main__":
    main()
