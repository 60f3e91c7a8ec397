"""Model comparison for PyMC users: which predictors does the data support?

    python examples/pymc_model_comparison.py

Three nested regressions on data generated from the middle one; the evidence of each by
php.sample_hais (with an error bar) and by pm.sample_smc, side by side, then the
ph.compare_evidence tables. Every model has a closed-form evidence, printed too.
"""

import time
import warnings

import numpy as np
import pymc as pm
from scipy.stats import multivariate_normal

import ppl_hais as ph
from ppl_hais.adapters import pymc as php

warnings.filterwarnings("ignore")

rng = np.random.default_rng(42)
X = rng.normal(size=(80, 4))
y = 1.0 * X[:, 0] - 0.7 * X[:, 1] + rng.normal(size=80)  # the truth uses two predictors

hais_runs, smc_runs, exact = {}, {}, {}
for k in (1, 2, 4):
    name = f"{k} predictor{'s' * (k > 1)}"
    with pm.Model():
        w = pm.Normal("w", 0.0, 1.0, shape=k)
        pm.Normal("y", pm.math.dot(X[:, :k], w), 1.0, observed=y)
        t = time.perf_counter()
        hais_runs[name] = php.sample_hais(draws=512, num_steps=2000, random_seed=1,
                                          progressbar=False)
        t_hais = time.perf_counter() - t
        t = time.perf_counter()
        smc_runs[name] = pm.sample_smc(random_seed=1, progressbar=False)
        t_smc = time.perf_counter() - t
    exact[name] = multivariate_normal(np.zeros(80), np.eye(80) + X[:, :k] @ X[:, :k].T).logpdf(y)
    h, hse = ph.workflow.compare.evidence_of(hais_runs[name])
    s, sse = ph.workflow.compare.evidence_of(smc_runs[name])
    print(f"{name:13s} exact {exact[name]:9.3f} | sample_hais {h:9.3f} ± {hse:.3f} "
          f"({t_hais:4.1f} s) | sample_smc {s:9.3f} ± {sse:.3f} ({t_smc:4.1f} s)")

print("\nph.compare_evidence, sample_hais:")
print(ph.compare_evidence(hais_runs).round(3))
print("\nph.compare_evidence, pm.sample_smc (SE from the spread of its chains):")
print(ph.compare_evidence(smc_runs).round(3))
