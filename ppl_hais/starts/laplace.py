"""A Gaussian fitted at the mode of a log density (Laplace), as an initial distribution.

Example
-------
>>> import jax.numpy as jnp
>>> from ppl_hais.starts.laplace import laplace_gaussian
>>> g = laplace_gaussian(lambda z: -0.5 * jnp.sum((z - 1.0) ** 2 / 4.0), jnp.zeros((1, 2)),
...                      scale_inflation=1.0)
>>> [round(float(m), 3) for m in g.mean]
[1.0, 1.0]
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ..model.target import Gaussian, GaussianMixture
from ..runtime import progress
from ..runtime.structure import compile_once

__all__ = ["SCALE_INFLATION", "LaplaceError", "inflation", "laplace_fit", "laplace_gaussian"]


class LaplaceError(ValueError):
    """The Laplace fit failed (no finite mode, or no positive-definite Hessian at one);
    ``gradients`` is what its searches spent all the same."""

    def __init__(self, message: str, gradients: int):
        super().__init__(message)
        self.gradients = gradients


@compile_once
def _mode(log_density, z0):
    """BFGS from z0: (mode, −log density there, gradients it evaluated); compiled once per
    density structure."""
    from jax.scipy.optimize import minimize

    res = minimize(lambda z: -log_density(z), z0, method="BFGS", options=dict(maxiter=500))
    return res.x, -log_density(res.x), res.njev, res.success


@compile_once
def _neg_hessian(log_density, z):
    return jax.hessian(lambda x: -log_density(x))(z)


@compile_once
def _grad(log_density, z):
    return jax.grad(log_density)(z)


@compile_once
def _neg_log_density(log_density, z):
    return -log_density(z)


def _newton(log_density, mode, val):
    """Newton steps from where BFGS stopped, halved until −log density falls, while the
    negative Hessian is positive definite: (mode, −log density, gradients, converged). BFGS's
    line search stops far from the mode where the likelihood's scale is far from the start's
    (a 500-coefficient regression: 52 gradients in, −log p 5.7e4 above its minimum); one Newton
    step lands on a Gaussian posterior's mode, where four BFGS restarts still left a gradient
    of norm 2."""
    spent, size = 0, np.size(mode)
    for _ in range(_NEWTON_STEPS):
        hess = np.asarray(_neg_hessian(log_density, mode))
        grad, spent = np.asarray(_grad(log_density, mode)), spent + size + 1
        if not (np.all(np.isfinite(hess)) and np.all(np.isfinite(grad))):
            break
        if np.linalg.norm(grad) <= _GRADIENT_TOL * max(1.0, abs(val)):
            return mode, val, spent, True
        try:
            tril = np.linalg.cholesky(0.5 * (hess + hess.T))
        except np.linalg.LinAlgError:  # not a maximum's curvature here: BFGS goes on
            break
        step, length = np.linalg.solve(tril.T, np.linalg.solve(tril, grad)), 1.0
        while length >= _SHORTEST:
            new = np.asarray(mode) + length * step
            new_val = float(_neg_log_density(log_density, new))
            spent += 1
            if new_val < val:
                break
            length /= 2
        if not length >= _SHORTEST:  # no step lowers it: as near the mode as steps get
            return mode, val, spent, True
        mode, val = new, new_val
    return mode, val, spent, False


SCALE_INFLATION = 1.2  # each component's scale × this up to INFLATION_DIM coordinates
INFLATION_DIM = 10  # above, the widening shrinks as 1/√D (inflation)
_SAME_MODE = 1.0  # squared Mahalanobis distance below which two optima are one mode
_MODE_MASS_RANGE = 20.0  # nats: modes whose Laplace mass is further below the best are dropped


def inflation(dim: int) -> float:
    """How much a fitted Gaussian start in ``dim`` coordinates is widened: ``SCALE_INFLATION``
    up to ``INFLATION_DIM`` coordinates, then 1 + 0.2·√(10 / dim).

    The widening lets the start's tails cover a target's that are somewhat heavier than its
    curvature says. Its price is paid in every coordinate: between N(μ, s²Σ) and N(μ, Σ) the
    log importance weights have variance D (1 − s²)² / 2, which grows with D at a fixed s. At
    1.2 that is 0.97 nat² in 10 coordinates and 48 in 500, where the exact start of a conjugate
    regression (its Laplace fit exact) failed its first rung's k̂ check and sent the ladder to
    4× the temperatures. Shrinking s − 1 as 1/√D holds the variance near its 10-coordinate
    value (0.8–1.0 nat² at any D): 1.089 at 50 coordinates, 1.028 at 500, 1.020 at 1000
    (``python benchmarks/speed.py --over-dim``).

    >>> from ppl_hais.starts.laplace import inflation
    >>> inflation(4), round(inflation(500), 3)
    (1.2, 1.028)
    """
    return 1.0 + (SCALE_INFLATION - 1.0) * math.sqrt(min(1.0, INFLATION_DIM / max(int(dim), 1)))


def laplace_gaussian(log_density, starts, scale_inflation: float | None = None):
    """N(mode, s² · H⁻¹) with H the negative Hessian of ``log_density`` at its mode and ``s``
    the ``scale_inflation`` (default :func:`inflation` of the dimension).

    The mode is searched by BFGS from each of ``starts`` (an (S, D) array). When the searches
    end at several distinct modes (squared Mahalanobis distance ≥ 1 under each other's
    Hessian) whose Laplace masses lie within 20 nats of the best, the result is a
    :class:`~ppl_hais.GaussianMixture` with one component per mode, weighted by those masses:
    a start from one mode of a multimodal posterior would anneal within it and miss the
    others' mass without any sign in the weights (measured: a two-component mixture with
    per-datum assignments, 0.69 nats low at an SE of 0.002). ``scale_inflation`` widens each
    component so that its tails cover the target's. Annealing from it still estimates the
    target's own normalizer: the initial only changes the path.
    """
    return laplace_fit(log_density, starts, scale_inflation)[0]


_RESTARTS = 4  # BFGS searches resumed from where the last stopped without converging
_NEWTON_STEPS = 8  # Newton steps from BFGS's stop before any restart
_GRADIENT_TOL = 1e-8  # |∇ log p| ≤ this × max(1, |log p|): at the mode
_SHORTEST = 1e-3  # the shortest fraction of a Newton step tried


def _fit_one(log_density, z0, bar, i):
    """(mode, log density there, negative Hessian, gradients spent) from one BFGS start;
    ``mode`` None where the search ended at a non-finite density or Hessian.

    JAX's BFGS stops, unconverged, where its line search fails (a first step far too long for
    a likelihood whose scale starts far from its fit: a regression's noise scale under a flat
    prior on its weights stopped after 4 gradients at a saddle). Resuming from that point with
    a fresh inverse Hessian, as long as the density improves, finds the mode."""
    mode, val, njev, converged = _mode(log_density, z0)
    if not bool(converged) and np.isfinite(float(val)):
        mode, val, more, converged = _newton(log_density, np.asarray(mode), float(val))
        njev = njev + more
    for _ in range(_RESTARTS):
        if bool(converged) or not np.isfinite(float(val)):
            break
        again, new, more, converged = _mode(log_density, mode)
        njev = njev + more
        if not float(new) < float(val):  # no progress: keep what the search reached
            break
        mode, val = again, new
    val = -float(val)
    if bar is not None:
        progress.tick(bar, i + 1)
    if not np.isfinite(val):
        return None, val, None, int(njev)
    mode = np.asarray(mode)
    hess = np.asarray(_neg_hessian(log_density, mode))
    hess = 0.5 * (hess + hess.T)
    spent = int(njev) + mode.size
    if not np.all(np.isfinite(hess)):
        return None, val, None, spent
    return mode, val, hess, spent


def laplace_fit(log_density, starts, scale_inflation: float | None = None):
    """:func:`laplace_gaussian` and the model gradients the fit spent (BFGS's gradient
    evaluations from every start, and D per Hessian: one forward-over-reverse pass each);
    raises :class:`LaplaceError`, carrying those gradients, when the fit fails."""
    modes, gradients = [], 0  # (mode, log density there, negative Hessian)
    # NumPy: iterating over a device array compiles a slicing program
    starts = np.atleast_2d(np.asarray(starts, dtype=jnp.result_type(float)))
    if scale_inflation is None:
        scale_inflation = inflation(starts.shape[1])
    bar = progress.open_bar(len(starts), "Laplace fit") if progress.showing() else None
    try:
        found = [_fit_one(log_density, z0, bar, i) for i, z0 in enumerate(starts)]
    finally:
        if bar is not None:
            progress.close_bar(bar)
    for mode, val, hess, spent in found:
        gradients += spent
        if mode is None:
            continue
        same = [
            i for i, (m, _, h) in enumerate(modes)
            if min((mode - m) @ h @ (mode - m), (mode - m) @ hess @ (mode - m)) < _SAME_MODE
        ]  # fmt: skip
        if same:
            i = same[0]
            if val > modes[i][1]:
                modes[i] = (mode, val, hess)
            continue
        modes.append((mode, val, hess))
    if not modes:
        raise LaplaceError(
            "the Laplace fit found no finite mode: give initial= explicitly", gradients
        )
    modes.sort(key=lambda m: -m[1])
    comps = []
    for mode, val, hess in modes:
        try:
            cov = np.linalg.inv(hess)
            tril = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            continue
        log_mass = val + np.sum(np.log(np.diag(tril))) + 0.5 * mode.size * np.log(2 * np.pi)
        comps.append((mode, tril * scale_inflation, log_mass))
    if not comps:
        raise LaplaceError(
            "the Hessian at the mode is not positive definite: the Laplace approximation "
            "fails; give initial= explicitly",
            gradients,
        )
    best = max(c[2] for c in comps)
    comps = [c for c in comps if c[2] > best - _MODE_MASS_RANGE]
    if len(comps) == 1:
        return Gaussian(comps[0][0], scale_tril=comps[0][1]), gradients
    log_mass = np.array([c[2] for c in comps])
    mixture = GaussianMixture(
        np.stack([c[0] for c in comps]),
        np.stack([c[1] for c in comps]),
        np.exp(log_mass - log_mass.max()),
    )
    return mixture, gradients
