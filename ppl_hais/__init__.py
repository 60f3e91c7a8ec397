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

from . import annealing, bridge, checks, mcmc, research, results, runtime, starts, workflow
from .annealing.kernels import (
    TransitionKernel,
    hais_kernel,
    mixed_kernel,
    random_walk_kernel,
    resampled_hmc_kernel,
)
from .bridge import BridgeResult, bridge_sampling
from .checks.diagnostics import EvidenceWarning
from .estimate.annealers import ais, bdmc, hais
from .mcmc.hmc import refresh_fraction
from .model.schedules import (
    adaptive_schedule,
    geometric_schedule,
    linear_schedule,
    make_schedule,
    sigmoid_schedule,
    survey_schedule,
)
from .model.tails import IndependentStudentT
from .model.target import AnnealingTarget, Gaussian, GaussianMixture, Potential, StudentT
from .research.exchange import BoundedEnergy, RejectionBudgetError
from .research.likelihood import (
    LogLikelihoodEstimate,
    analysis_log_likelihood,
    generative_log_likelihood,
)
from .research.refinement import refine
from .results.result import AISResult, AnnealingError, AnnealingTrace
from .runtime.precision import enable_x64
from .starts.laplace import laplace_gaussian
from .workflow.calibration import BayesFactorCalibration
from .workflow.compare import compare_evidence
from .workflow.options import EvidenceOptions

__version__ = "0.1.0"

__all__ = [
    "annealing",
    "bridge",
    "checks",
    "mcmc",
    "research",
    "results",
    "runtime",
    "starts",
    "workflow",
    "AISResult",
    "BayesFactorCalibration",
    "BridgeResult",
    "AnnealingError",
    "AnnealingTarget",
    "AnnealingTrace",
    "BoundedEnergy",
    "EvidenceOptions",
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
