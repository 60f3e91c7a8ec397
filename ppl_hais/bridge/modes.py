"""Modes the draws never visited: a check of a bridge estimate against a mode search.

Bridge sampling estimates the mass of the region its draws cover. When every chain sits in one
mode of a posterior with several, the estimate is the visited modes' mass, with an error bar
that only knows the draws (on a two-mode mixture: 0.033 nat low at an SE of 0.001, the missing
mode's share). A Laplace fit from several starts (the evidence workflow's, a few BFGS searches:
cheap next to the sampler that made the draws) finds the modes it can; a mode whose 99.9%
ellipsoid holds no draw was not visited, and its Laplace mass, beside the bridge estimate,
says how much the estimate may miss: log(1 + Σ unvisited masses / Ẑ) nats.

Example
-------
>>> import numpy as np
>>> from ppl_hais.bridge.modes import unvisited_modes
>>> means = np.array([[2.0, 2.0], [-2.0, -2.0]])
>>> trils = np.stack([0.3 * np.eye(2)] * 2)
>>> draws = 2.0 + 0.3 * np.random.default_rng(0).normal(size=(4, 500, 2))  # one mode only
>>> found = unvisited_modes(draws, means, trils, np.log([0.5, 0.5]), log_z=np.log(0.5))
>>> found.num_modes, found.num_visited, round(found.shortfall, 3)  # log 2: half is missing
(2, 1, 0.693)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from ..checks.record import Check

__all__ = ["ModeCheck", "VISITED_QUANTILE", "mode_check", "unvisited_modes"]

VISITED_QUANTILE = 0.999  # a draw inside a mode's ellipsoid of this probability visits it
SHORTFALL_FLOOR = 0.01  # nats: a smaller stated shortfall never warns


class ModeCheck(NamedTuple):
    """What the mode search found beside the draws."""

    num_modes: int  # modes the search found (Laplace fits with a positive-definite Hessian)
    num_visited: int  # of them, those with a draw inside their 99.9% ellipsoid
    missing_log_mass: float  # log of the unvisited modes' Laplace masses (-inf: none)
    shortfall: float  # nats the estimate may be low: log(1 + missing mass / Ẑ)


def unvisited_modes(draws, means, scale_trils, log_masses, log_z) -> ModeCheck:
    """The modes (``means``, Cholesky factors of their covariances, Laplace log masses) that
    no draw (chains, draws, D) visits, and what they add to an estimate ``log_z`` of the
    visited mass."""
    x = np.asarray(draws, dtype=float).reshape(-1, np.shape(means)[-1])
    limit = stats.chi2.ppf(VISITED_QUANTILE, x.shape[-1])
    visited = []
    for mean, tril in zip(np.atleast_2d(means), np.asarray(scale_trils), strict=True):
        white = np.linalg.solve(tril, (x - mean).T)  # L⁻¹ (x − m)
        visited.append(bool(np.min(np.sum(white * white, axis=0)) < limit))
    missing = [m for m, seen in zip(log_masses, visited, strict=True) if not seen]
    missing_log_mass = float(logsumexp(missing)) if missing else float("-inf")
    shortfall = float(np.logaddexp(0.0, missing_log_mass - log_z)) if missing else 0.0
    return ModeCheck(len(visited), int(sum(visited)), missing_log_mass, shortfall)


def mode_check(found: ModeCheck, log_z_se: float) -> tuple[Check, ...]:
    """The ``modes`` check: a failed one when the unvisited modes' share exceeds the estimate's
    noise (two SEs) and ``SHORTFALL_FLOOR``."""
    if not found.shortfall > max(SHORTFALL_FLOOR, 2.0 * log_z_se):
        return ()
    return (Check(
        "modes",
        f"a mode search found {found.num_modes} modes and the draws visit "
        f"{found.num_visited}; by their Laplace approximations the others hold enough mass "
        f"that the estimate may be about {found.shortfall:.3f} nats too low (its SE "
        f"{log_z_se:.3f} knows only the draws). Remedy: chains started in every mode, or the "
        "evidence by annealing from the prior or the fitted modes (php.sample_hais(), "
        "phn.HAIS(model)), whose start covers them.", figure=found.num_modes - found.num_visited,
        short=found.shortfall),)
