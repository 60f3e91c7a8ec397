"""Adaptive importance refinement of an approximate posterior, per datum (Hjelm et al. 2016,
"Iterative refinement of the approximate posterior for directed belief networks", §3.2).

A latent-variable model p(x, h) = p(h) p(x | h) and a factorized proposal q(h) for each datum
(a recognition network's output, or the prior). One refinement step draws M samples from q,
weights them by w = p(x, h) / q(h), and moves q's parameters part of the way (the *damping*
γ) to the weighted statistics:

    Bernoulli:  μ ← (1 − γ) μ + γ Σ W_m h_m                       (the paper's eq. 9)
    Gaussian:   m ← (1 − γ) m + γ Σ W_m z_m,  s² ← (1 − γ) s² + γ Σ W_m (z_m − m̄)²

with W the self-normalized weights (the Gaussian case, which the paper leaves for later, is the
same moment matching on the first two moments). Each step targets the inclusive KL(p ‖ q),
so the importance ESS of q rises; the log mean weight of each step is the importance-weighted
lower bound on log p(x) (Burda et al. 2015) and is recorded with the ESS.

Every datum is refined independently (``vmap``); the K steps are one ``lax.scan``.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> def log_joint(z, x):  # z ~ N(0, 1), x | z ~ N(z, 0.5²): posterior N(0.8 x, 0.2)
...     return (jax.scipy.stats.norm.logpdf(z, 0.0, 1.0)
...             + jax.scipy.stats.norm.logpdf(x, z, 0.5)).sum()
>>> data = jnp.array([[1.0], [-2.0]])
>>> q0 = ph.research.refinement.DiagonalNormal(jnp.zeros((2, 1)), jnp.ones((2, 1)))
>>> fit = ph.refine(jax.random.key(0), log_joint, q0, data, num_iterations=30,
...                 num_samples=200, damping=0.5)
>>> [round(float(m), 1) for m in fit.q.loc[:, 0]]
[0.8, -1.6]
>>> bool(fit.ess[:, -1].min() > fit.ess[:, 0].max())  # the proposal got better
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..model.target import lift, sample_shape_of
from ..runtime.precision import float64
from ..stats.estimators import ess as _ess
from ..stats.estimators import log_mean_exp

__all__ = ["Bernoulli", "DiagonalNormal", "Refinement", "RefinementError", "refine"]

PROB_FLOOR = 1e-3  # Bernoulli means stay in [floor, 1 − floor]: q keeps proposing both values
VAR_FLOOR = 1e-8  # relative to the starting variance: a Gaussian never collapses to a point


class RefinementError(ValueError):
    """A refinement step had no draw with a finite weight (zero effective samples)."""


class Bernoulli(NamedTuple):
    """Factorized Bernoulli proposals: ``probs`` (..., H), the mean of each unit."""

    probs: jax.Array

    @property
    def dim(self) -> int:
        return int(self.probs.shape[-1])

    def sample(self, rng_key, sample_shape=()):
        shape = sample_shape_of(sample_shape) + self.probs.shape
        u = jax.random.uniform(rng_key, shape, dtype=self.probs.dtype)
        return (u < jnp.broadcast_to(self.probs, u.shape)).astype(self.probs.dtype)

    def log_prob(self, h):
        p = jnp.broadcast_to(self.probs, jnp.shape(h))
        return jnp.sum(h * jnp.log(p) + (1 - h) * jnp.log1p(-p), axis=-1)

    def refit(self, draws, weights, damping, floor):
        del floor
        target = jnp.einsum("mn,mnd->nd", weights, draws)
        probs = (1 - damping) * self.probs + damping * target
        return Bernoulli(jnp.clip(probs, PROB_FLOOR, 1 - PROB_FLOOR))


class DiagonalNormal(NamedTuple):
    """Factorized Gaussian proposals: ``loc`` and ``scale`` (..., D)."""

    loc: jax.Array
    scale: jax.Array

    @property
    def dim(self) -> int:
        return int(self.loc.shape[-1])

    def sample(self, rng_key, sample_shape=()):
        shape = sample_shape_of(sample_shape) + self.loc.shape
        eps = jax.random.normal(rng_key, shape, dtype=self.loc.dtype)
        return lift(self.loc, eps.ndim) + eps * lift(self.scale, eps.ndim)

    def log_prob(self, z):
        loc, scale = (jnp.broadcast_to(a, jnp.shape(z)) for a in (self.loc, self.scale))
        w = (z - loc) / scale
        return jnp.sum(-0.5 * w * w - jnp.log(scale) - 0.5 * jnp.log(2 * jnp.pi), axis=-1)

    def refit(self, draws, weights, damping, floor):
        mean = jnp.einsum("mn,mnd->nd", weights, draws)
        var = jnp.einsum("mn,mnd->nd", weights, (draws - mean[None]) ** 2)
        loc = (1 - damping) * self.loc + damping * mean
        var = (1 - damping) * self.scale**2 + damping * var
        return DiagonalNormal(loc, jnp.sqrt(jnp.maximum(var, floor)))


class Refinement(NamedTuple):
    """The refined proposals and how each step went, per datum.

    ``q``: the refined proposals (same family and shapes as the start). ``ess`` (num_data,
    K + 1): the importance ESS of q_k over the M draws, as a fraction of M (1 = q is the exact
    posterior); ``bound``: log mean w of q_k's draws, a stochastic lower bound on log p(x);
    ``num_finite``: how many of the M draws had a finite weight. Column k is q_k (column 0
    the start, column K the refined proposal).
    """

    q: Bernoulli | DiagonalNormal
    ess: np.ndarray
    bound: np.ndarray
    num_finite: np.ndarray


def _weigh(rng_key, log_joint, q, num_samples):
    draws = q.sample(rng_key, (num_samples,))  # (M, N, D)
    log_w = jax.vmap(log_joint)(draws) - q.log_prob(draws)  # (M, N)
    log_w = jnp.where(jnp.isnan(log_w), -jnp.inf, log_w)
    return draws, log_w, jnp.sum(jnp.isfinite(log_w), axis=0)


def _stats(log_w, num_samples):
    return jax.vmap(_ess, in_axes=1)(log_w) / num_samples, log_mean_exp(log_w)


def refine_traced(rng_key, log_joint, q, num_iterations, num_samples, damping, floor=0.0):
    """The refinement inside a trace, without checks: q's parameters (N, D), ``log_joint``
    (N, D) → (N,); returns ``(q, ess, bound, num_finite)``, each statistic (K + 1, N). What
    :func:`refine` runs, and what a training step calls (:func:`ppl_hais.research.sbn.fit`)."""

    def step(q, key):
        draws, log_w, finite = _weigh(key, log_joint, q, num_samples)
        new = q.refit(draws, jax.nn.softmax(log_w, axis=0), damping, floor)
        # a datum without a finite weight keeps its q (the host raises; no NaN spreads)
        new = jax.tree_util.tree_map(
            lambda a, b: jnp.where((finite > 0)[:, None], a, b), new, q
        )
        return new, (*_stats(log_w, num_samples), finite)

    keys = jax.random.split(rng_key, num_iterations + 1)
    q, history = jax.lax.scan(step, q, keys[:-1])
    _, log_w, finite = _weigh(keys[-1], log_joint, q, num_samples)
    last = (*_stats(log_w, num_samples), finite)
    return q, *(jnp.concatenate([h, l[None]]) for h, l in zip(history, last, strict=True))


@float64
def refine(
    rng_key,
    log_joint: Callable,
    q: Bernoulli | DiagonalNormal,
    data=None,
    *,
    num_iterations: int = 20,
    num_samples: int = 20,
    damping: float = 0.1,
) -> Refinement:
    """Refine a proposal q(h | x) for each datum by adaptive importance sampling.

    Parameters
    ----------
    rng_key : jax.random key
    log_joint : callable
        ``(h, x) -> log p(x, h)`` for one latent vector h (H,) and one datum x; with
        ``data=None``, ``h -> log p(x_n, h_n)`` for all data at once: (N, H) → (N,) (a model
        that evaluates its data together, e.g. a NumPyro model's plate).
    q : Bernoulli or DiagonalNormal
        The starting proposals with a leading data axis: ``probs`` (or ``loc``/``scale``) of
        shape (num_data, H), e.g. a recognition network's output for each datum.
    data : array (num_data, ...), optional
    num_iterations : int
        Refinement steps K (0 returns q with its ESS measured).
    num_samples : int
        Draws per step M.
    damping : float
        The inference rate γ in (0, 1]: how far each step moves toward the weighted statistics.

    Returns
    -------
    Refinement

    Raises
    ------
    RefinementError
        When a step had zero effective samples: no draw of some datum's q had a finite
        p(x, h) (q's support misses the posterior's, or the model's density is NaN there).
    """
    if not 0.0 < float(damping) <= 1.0:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    if int(num_iterations) < 0 or int(num_samples) < 2:
        raise ValueError("num_iterations must be ≥ 0 and num_samples ≥ 2")
    if not isinstance(q, Bernoulli | DiagonalNormal):
        raise TypeError(f"q must be refinement.Bernoulli or DiagonalNormal, got {type(q).__name__}")
    q = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.result_type(float)), q)
    if isinstance(q, Bernoulli):  # a mean of exactly 0 or 1 would never propose the other value
        q = Bernoulli(jnp.clip(q.probs, PROB_FLOOR, 1 - PROB_FLOOR))
    leaves = jax.tree_util.tree_leaves(q)
    num_data = leaves[0].shape[0] if data is None else jnp.shape(data)[0]
    if any(a.ndim != 2 or a.shape[0] != num_data for a in leaves):
        raise ValueError(
            f"q's parameters must have shape (num_data, H) = ({num_data}, H), one row per "
            f"datum; got {[tuple(a.shape) for a in leaves]}"
        )
    if data is not None:
        data, per_datum = jnp.asarray(data), log_joint
        log_joint = lambda h: jax.vmap(per_datum)(h, data)  # noqa: E731
    floor = VAR_FLOOR * q.scale**2 if isinstance(q, DiagonalNormal) else 0.0
    run = jax.jit(
        lambda key, q, floor: refine_traced(
            key, log_joint, q, int(num_iterations), int(num_samples), float(damping), floor
        )
    )
    refined, ess, bound, finite = run(rng_key, q, floor)
    ess, bound, finite = (np.asarray(a).T for a in (ess, bound, finite))
    finite = np.asarray(finite)
    dead = np.argwhere(finite == 0)
    if dead.size:
        i, k = (int(v) for v in dead[0])
        raise RefinementError(
            f"refinement had zero effective samples: none of the {num_samples} draws of q for "
            f"datum {i} had a finite log p(x, h) (step {k}; {len(np.unique(dead[:, 0]))} "
            "datum/data affected). Start q nearer the posterior (or from the prior, whose "
            "support is the model's), check the model's density there, or draw more samples."
        )
    return Refinement(refined, np.asarray(ess), np.asarray(bound), finite)
