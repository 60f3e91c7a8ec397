"""A Gaussian fitted at the mode of a log density (Laplace), as an initial distribution."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .structure import compile_once
from .target import Gaussian

__all__ = ["laplace_gaussian"]


@compile_once
def _mode(log_density, z0):
    """BFGS from z0: (mode, −log density there); compiled once per density structure."""
    from jax.scipy.optimize import minimize

    res = minimize(lambda z: -log_density(z), z0, method="BFGS", options=dict(maxiter=500))
    return res.x, -log_density(res.x)


@compile_once
def _neg_hessian(log_density, z):
    return jax.hessian(lambda x: -log_density(x))(z)


def laplace_gaussian(log_density, starts, scale_inflation: float = 1.2) -> Gaussian:
    """N(mode, inflation² · H⁻¹) with H the negative Hessian of ``log_density`` at its mode.

    The mode is found by BFGS from each of ``starts`` (an (S, D) array); the best finite one is
    kept. ``scale_inflation`` widens the Gaussian so that its tails cover the target's, which
    keeps the annealing weights well behaved. Annealing from it still estimates the target's own
    normalizer: the initial only changes the path.
    """
    best, best_val = None, np.inf
    for z0 in jnp.atleast_2d(jnp.asarray(starts, dtype=jnp.result_type(float))):
        mode, val = _mode(log_density, z0)
        val = float(val)
        if np.isfinite(val) and val < best_val:
            best, best_val = mode, val
    if best is None:
        raise ValueError("the Laplace fit found no finite mode: give initial= explicitly")
    hess = np.asarray(_neg_hessian(log_density, best))
    try:
        tril = np.linalg.cholesky(np.linalg.inv(0.5 * (hess + hess.T))) * scale_inflation
    except np.linalg.LinAlgError as err:
        raise ValueError(
            "the Hessian at the mode is not positive definite: the Laplace approximation "
            "fails; give initial= explicitly"
        ) from err
    return Gaussian(np.asarray(best), scale_tril=tril)
