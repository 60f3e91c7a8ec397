"""The reverse anneal and the bridge of both directions.

A forward anneal from the initial distribution to the posterior estimates Z; run backwards,
from posterior draws to the initial distribution over the same schedule, it estimates 1/Z
without bias, so its log estimate is a stochastic upper bound of log Z (Grosse et al. 2015).
:func:`reverse_anneal` runs it; :func:`bennett` bridges the two directions' weights (Bennett's
acceptance ratio), which reads both tails where each bound alone is biased by its own. The bias
check (:mod:`.bias`) runs both on MCMC draws; the model bridge
(:mod:`ppl_hais.workflow.model_bridge`) runs the reverse anneal on draws the user has.

Example
-------
>>> import numpy as np
>>> weights = np.array([np.log(0.5), np.log(2.0), -np.inf])  # a failed chain weighs 0
>>> est = reverse_estimate(weights, 0.0, 0)  # their mean, 5/6, estimates 1/Z: Z = 6/5
>>> round(est.log_z_upper, 4) == round(float(np.log(1.2)), 4)
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..annealing.execution import run
from ..annealing.kernels import hais_kernel
from ..annealing.pilot import Pilot, survey
from ..stats.estimators import bridge_fixed_point, bridge_relative_se, log_mean_exp_se

__all__ = ["Reverse", "bennett", "reverse_anneal", "reverse_estimate"]


class Reverse(NamedTuple):
    """What :func:`reverse_anneal` returns."""

    log_z_upper: float  # the reverse estimate (an upper bound from exact draws)
    log_z_upper_se: float
    gradients: int
    log_weights: np.ndarray  # per reverse chain: E[exp] = 1/Z × the initial's normalizer


def bennett(log_w_forward, log_w_reverse, *, log_z_initial: float = 0.0, tol: float = 1e-10,
            max_iter: int = 1000) -> tuple[float, float]:  # fmt: skip
    """(log Ẑ, SE) bridging forward and reverse anneals over one schedule: ``log_w_forward``
    (E[exp] = Z / Z_initial) and ``log_w_reverse`` (E[exp] = Z_initial / Z), the fixed point of
    the optimal bridge between the two path distributions (Bennett's acceptance ratio; Meng
    & Wong 1996), with Frühwirth-Schnatter's error bar (each path independent). Non-finite
    weights are dropped; (NaN, NaN) when a direction has fewer than two.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> fwd = rng.normal(-0.5, 1.0, 4000)  # log-normal weights: Crooks' pair for log Z = 0
    >>> rev = -rng.normal(0.5, 1.0, 4000)
    >>> log_z, se = bennett(fwd, rev)
    >>> bool(abs(log_z) < 4 * se), bool(se < 0.05)
    (True, True)
    """
    xf = np.asarray(log_w_forward, dtype=float)
    xr = -np.asarray(log_w_reverse, dtype=float)  # each reverse path's forward log weight
    xf, xr = xf[np.isfinite(xf)], xr[np.isfinite(xr)]
    if len(xf) < 2 or len(xr) < 2:
        return float("nan"), float("nan")
    shift = float(np.median(np.concatenate([xf, xr])))
    l_rev, l_fwd = xr - shift, xf - shift
    s_rev, s_fwd = len(xr) / (len(xr) + len(xf)), len(xf) / (len(xr) + len(xf))
    start = float(np.logaddexp.reduce(l_fwd) - np.log(len(l_fwd)))  # the forward estimate
    path, converged = bridge_fixed_point(l_rev, l_fwd, s_rev, s_fwd, start, tol, max_iter)
    if not converged:
        return float("nan"), float("nan")
    se = bridge_relative_se(l_rev, l_fwd, s_rev, s_fwd, float(path[-1]), len)
    return float(path[-1] + shift + log_z_initial), se


def reverse_anneal(
    rng_key, target, betas, starts, pilot: Pilot | None = None, *, kernel=None,
    refresh: float = 0.5, num_leapfrog: int = 1, step_size="auto", progress_bar: bool = False,
):  # fmt: skip
    """Anneal posterior draws ``starts`` (an (n, D) array) back to the initial distribution
    over ``betas`` (the forward schedule, 0 → 1) and return the :class:`Reverse` estimate
    (log Ẑ upper, its SE, gradients, the reverse log weights): an unbiased estimate of 1/Z
    from exact posterior draws, so a stochastic upper bound of log Z (Grosse et al. 2015).
    ``pilot``: the forward run's frozen tuning (``None`` with ``step_size="auto"``: a new
    pilot is run, discarded); ``kernel``: default HAIS with ``refresh`` and
    ``num_leapfrog``."""
    betas = np.asarray(betas, dtype=float)
    if kernel is None:  # the forward run's HAIS kernel, as the evidence workflow builds it
        kernel = hais_kernel(float(refresh), int(num_leapfrog), 1, "standard")
    gradients = 0
    if step_size == "auto":
        if pilot is None:  # tune one, as the forward run did (discarded: the bound stays valid)
            pilot = survey(rng_key, target, kernel, num_steps=len(betas) - 1)
            used = pilot.gradients_per_particle(kernel.gradients_per_step)
            gradients += used * (0 if pilot.log_weights is None else len(pilot.log_weights))
        ref_betas, ref_log_step, scale = pilot.betas, pilot.log_step, pilot.scale
    else:
        ref_betas, ref_log_step = np.array([0.0, 1.0]), np.full(2, np.log(float(step_size)))
        scale = None
    out = run(
        rng_key, target, kernel, betas[::-1].copy(), ref_betas, ref_log_step,
        np.asarray(starts), num_bins=100, progress_bar=progress_bar,
        desc="reverse anneal", scale_ref=scale,
    )  # fmt: skip
    rev = np.asarray(out.log_weights, dtype=float)
    gradients += int(len(starts) * (len(betas) - 1) * kernel.gradients_per_step)
    rev = np.where(np.isnan(rev), -np.inf, rev)
    return reverse_estimate(rev, float(target.log_z_initial), gradients)


def reverse_estimate(rev, log_z_initial, gradients) -> Reverse:
    """The :class:`Reverse` estimate of reverse log weights ``rev`` (-inf where a chain failed)
    from an initial distribution of log normalizer ``log_z_initial``, at ``gradients`` spent."""
    if not np.any(np.isfinite(rev)):
        return Reverse(float("inf"), float("inf"), gradients, rev)
    log_inv, upper_se = log_mean_exp_se(rev)
    return Reverse(log_z_initial - log_inv, float(upper_se), gradients, rev)
