"""NumPyro adapter: the evidence of a continuous NumPyro model in one call.

>>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from ppl_hais.adapters import numpyro as phn
>>> def model(y=None):
...     mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
>>> hais = phn.HAIS(model, num_particles=128, num_steps=300, progress_bar=False)
>>> hais.run(jax.random.key(0), y=jnp.array([0.3, -0.5, 1.1]))
>>> round(hais.log_evidence, 1)   # exact: -4.69
-4.7

The model is split as NumPyro's own potential energy is built (values substituted from
unconstrained space with their log-Jacobians as factors, then ``compute_log_probs``): the
**initial distribution** is the prior in unconstrained space (latent sites and the
log-Jacobians of ``biject_to(support)``), the **likelihood** is every observed site plus every
``numpyro.factor`` (a factor has no prior to draw from, so it is annealed, as
``pm.sample_smc`` does with Potentials). Then log Z = log p(data | model).
"""

import numpyro as _numpyro

# ArviZ >= 1 (arviz_base) registers numpyro as a lazy module when ArviZ is imported first;
# importing numpyro's submodules through that half-loaded module leaves
# numpyro.distributions without its `distribution` attribute, and numpyro.factor then fails
# (seen with arviz-base 1.3.1, numpyro 0.22). Touching an attribute loads numpyro fully first.
_numpyro.__version__  # noqa: B018

from ppl_hais.research.exchange import budget_errors  # noqa: E402

from .bridge import bridge_sampling  # noqa: E402
from .calibration import calibrate_bayes_factors  # noqa: E402
from .exchange import BoundedEnergyDist, Exchange  # noqa: E402
from .hais import HAIS  # noqa: E402
from .mcmc import ReducedFlipHMC, ReducedFlipHMCState  # noqa: E402
from .refine import RefinedGuide, refine_guide  # noqa: E402
from .target import NumPyroTarget, bdmc, guide_initial  # noqa: E402

__all__ = [
    "HAIS",
    "bdmc",
    "bridge_sampling",
    "calibrate_bayes_factors",
    "BoundedEnergyDist",
    "Exchange",
    "budget_errors",
    "ReducedFlipHMC",
    "ReducedFlipHMCState",
    "NumPyroTarget",
    "guide_initial",
    "refine_guide",
    "RefinedGuide",
]
