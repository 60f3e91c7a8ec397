"""What an adapter hands the evidence workflow: a model as densities over a flat vector z of
its unconstrained latent variables (``ModelDensity``), and a base class that derives the three
densities from one ``log_parts`` (``SplitDensity``).

Example
-------
>>> import jax.numpy as jnp
>>> from ppl_hais.model.density import SplitDensity
>>> class Model(SplitDensity):
...     dim, improper = 1, ()
...     def log_parts(self, z):  # (log prior, log likelihood)
...         return -0.5 * jnp.sum(z**2), -0.5 * jnp.sum((1.0 - z) ** 2)
>>> float(Model().log_joint(jnp.ones(1)))
-0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

__all__ = ["ModelDensity", "SplitDensity", "improper_error", "improper_note",
           "outside_support_note"]


class ModelDensity(Protocol):
    """What an adapter provides: a model over flat unconstrained vectors z of size ``dim``."""

    dim: int
    improper: Sequence[str]  # latent variables whose prior cannot be sampled (empty if none)

    def log_likelihood(self, z): ...  # observed sites and factors/Potentials

    def log_joint(self, z): ...  # log prior (with Jacobians) + log likelihood

    @property
    def prior(self) -> Any: ...  # sample(rng_key, sample_shape), log_prob(z); None if improper

    # optional: ``discrete``, booleans per coordinate (True: integer-valued, moved by a
    # Metropolis step, kernels.mixed_kernel), or None; ``remedy_note``, a sentence the
    # evidence warning adds (a remedy particular to the model, e.g. which sites to
    # non-center), or None, read only when a warning is raised; ``observed_data``, the
    # ObservedData the evidence conditions on (ppl_hais.model.observed), recorded on the result


class SplitDensity:
    """A base for ``ModelDensity`` implementations: ``log_prior``, ``log_likelihood`` and
    ``log_joint`` from one ``log_parts(z) -> (log prior with Jacobians, log likelihood)``."""

    def log_parts(self, z):
        raise NotImplementedError

    def log_prior(self, z):
        return self.log_parts(z)[0]

    def log_likelihood(self, z):
        return self.log_parts(z)[1]

    def log_joint(self, z):
        prior, lik = self.log_parts(z)
        return prior + lik


def improper_note(model) -> str:
    """What an estimate over an improper (flat) prior means, for the warning it comes with."""
    return (
        f"variable(s) {list(model.improper)} have an improper (flat) prior: the estimate is the "
        "likelihood integrated against that flat density taken as 1 per unit of the "
        "unconstrained coordinate(s), an arbitrary constant. It compares only with models that "
        "put the same flat prior on the same coordinates (the constants cancel), not with "
        "models whose priors are proper: give the variable(s) a proper prior for a Bayes factor."
    )


def improper_error(model, laplace_failure: str | None = None) -> ValueError:
    """The error for annealing from a prior that cannot be sampled: never guess a start for an
    improper prior, the user says which. ``laplace_failure``: why the Laplace fit failed on
    this model, when it was tried, so the remedy named first is one that works."""
    where = f"over the {model.dim} unconstrained coordinates"
    if laplace_failure is None:
        remedy = ("pass initial='laplace' (a Gaussian fitted at the posterior mode), "
                  f"initial='vi' or initial=ph.Gaussian(mean, scale) {where}")  # fmt: skip
    else:
        remedy = ("pass initial='vi' (a Gaussian fitted by variational inference) or "
                  f"initial=ph.Gaussian(mean, scale) {where}; initial='laplace' fails on this "
                  f"model ({laplace_failure})")  # fmt: skip
    return ValueError(
        f"variable(s) {list(model.improper)} have an improper prior that cannot be "
        f"sampled, so annealing cannot start from the prior: {remedy}."
    )


def outside_support_note(bad: int, num: int) -> str:
    """Why ``initial="auto"`` set the prior aside, and what the estimate then means."""
    kept = (num - bad) / num
    return (
        f"initial='auto' set the model's prior aside as a start: {bad} of {num} of its draws "
        "lie outside the support of the model's density (their log density is not finite), as "
        "when a transform restricts a variable's support (PyMC's ordered), which drawing from "
        "the prior does not apply; it anneals from a fitted start instead. The estimate is the "
        "evidence of the model's density as written, which restricts the prior to that support "
        f"without renormalizing it: the prior keeps about {kept:.3f} of its mass there "
        f"({num - bad} of {num} draws), so with the prior renormalized there (what a Bayes "
        "factor against a model without the restriction needs) the log evidence would be "
        + (f"{-np.log(kept):.3f} ± {np.sqrt((1 - kept) / (kept * num)):.3f} higher" if kept > 0
           else f"at least {np.log(num):.1f} higher")
        + " (for K exchangeable ordered coordinates exactly log K!)."
    )
