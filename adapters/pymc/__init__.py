"""PyMC adapter: ``sample_hais()``, a drop-in for ``pm.sample_smc`` with an error bar.

>>> import numpy as np, pymc as pm
>>> from ppl_hais.adapters import pymc as php
>>> with pm.Model() as model:
...     mu = pm.Normal("mu", 0.0, 2.0)
...     y = pm.Normal("y", mu, 1.0, observed=np.array([0.3, -0.5, 1.1]))
...     idata = php.sample_hais(draws=128, num_steps=300, random_seed=0, progressbar=False)
>>> round(float(idata.sample_stats["log_marginal_likelihood"][0]), 1)   # exact: -4.69
-4.7

The model is split as ``pm.sample_smc`` tempers it: the initial distribution is the prior over
the transformed (unconstrained) value variables, ``model.varlogp`` (Jacobians included); the
likelihood is ``model.datalogp`` (observed variables **and Potentials**: a Potential has no
prior to draw from, so it is annealed). Both are compiled to JAX as PyMC's own
``get_jaxified_graph`` compiles them, with one rewrite of a Bernoulli's logit-scale log
probability (:mod:`ppl_hais.adapters.pymc.rewrites`), and annealed by the ppl_hais core.
"""


from ppl_hais.workflow.memory import Memory

from .bridge import bridge_sampling
from .calibration import calibrate_bayes_factors
from .exchange import sample_exchange
from .mcmc import sample_reduced_flip_hmc
from .smc import sample_hais
from .target import PyMCTarget

__all__ = [
    "bridge_sampling",
    "calibrate_bayes_factors",
    "sample_hais",
    "sample_reduced_flip_hmc",
    "sample_exchange",
    "PyMCTarget",
    "Memory",
]
