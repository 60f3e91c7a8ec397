"""ppl_hais: log marginal likelihood by Hamiltonian annealed importance sampling, in pure JAX.

The core knows no PPL: it anneals an :class:`AnnealingTarget` (an initial distribution and a
target density over flat vectors) with a transition kernel and returns an :class:`AISResult`.
Adapters for NumPyro and PyMC live in :mod:`ppl_hais.adapters`.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(3), 2.0))
>>> result = ph.hais(jax.random.key(0), target, num_particles=128, num_steps=200,
...                  progress_bar=False)
>>> bool(abs(result.log_z - 1.5 * jnp.log(2 * jnp.pi)) < 5 * result.log_z_se + 0.05)
True
"""

from . import (
    arviz,
    bridge,
    compilation_cache,
    diagnostics,
    energy,
    exchange,
    ladder,
    mcmc,
    plots,
    refinement,
    sbn,
    vi,
)
from .annealing import ais, bdmc, hais
from .annealing.kernels import (
    TransitionKernel,
    hais_kernel,
    mixed_kernel,
    random_walk_kernel,
    resampled_hmc_kernel,
)
from .bridge import BridgeResult, bridge_sampling
from .compare import compare_evidence
from .diagnostics import EvidenceWarning
from .exchange import BoundedEnergy, RejectionBudgetError
from .laplace import laplace_gaussian
from .likelihood import LogLikelihoodEstimate, analysis_log_likelihood, generative_log_likelihood
from .mcmc.hmc import refresh_fraction
from .precision import enable_x64
from .refinement import refine
from .result import AISResult, AnnealingError, AnnealingTrace
from .schedules import (
    adaptive_schedule,
    geometric_schedule,
    linear_schedule,
    make_schedule,
    sigmoid_schedule,
    survey_schedule,
)
from .tails import IndependentStudentT
from .target import AnnealingTarget, Gaussian, GaussianMixture, Potential, StudentT

__version__ = "0.1.0"

compilation_cache.enable_by_default()

__all__ = [
    "arviz",
    "bridge",
    "compilation_cache",
    "diagnostics",
    "energy",
    "exchange",
    "ladder",
    "mcmc",
    "plots",
    "refinement",
    "sbn",
    "vi",
    "AISResult",
    "BridgeResult",
    "AnnealingError",
    "AnnealingTarget",
    "AnnealingTrace",
    "BoundedEnergy",
    "EvidenceWarning",
    "RejectionBudgetError",
    "Gaussian",
    "GaussianMixture",
    "IndependentStudentT",
    "StudentT",
    "LogLikelihoodEstimate",
    "Potential",
    "TransitionKernel",
    "ais",
    "analysis_log_likelihood",
    "bdmc",
    "bridge_sampling",
    "compare_evidence",
    "enable_x64",
    "generative_log_likelihood",
    "adaptive_schedule",
    "geometric_schedule",
    "hais",
    "hais_kernel",
    "mixed_kernel",
    "laplace_gaussian",
    "linear_schedule",
    "make_schedule",
    "random_walk_kernel",
    "refine",
    "refresh_fraction",
    "resampled_hmc_kernel",
    "sigmoid_schedule",
    "survey_schedule",
]
