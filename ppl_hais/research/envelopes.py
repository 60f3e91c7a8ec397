"""Envelopes π(x) for bounded-energy models (:mod:`ppl_hais.research.exchange`): distributions that
are easy to sample exactly and to evaluate, with NumPyro's ``sample(key, sample_shape)`` /
``log_prob(x)`` interface (so any NumPyro distribution can stand in for them).

Example
-------
>>> import jax, jax.numpy as jnp
>>> from ppl_hais.research.envelopes import UniformEnvelope
>>> env = UniformEnvelope(jnp.zeros(2), 2.0 * jnp.ones(2))
>>> env.sample(jax.random.key(0), (5,)).shape, round(float(env.log_prob(jnp.ones((1, 2)))[0]), 4)
((5, 2), -1.3863)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["BernoulliEnvelope", "GaussianEnvelope", "UniformEnvelope"]


def _like(a, x):
    """``a`` (event-shaped or scalar) reshaped to broadcast against ``x`` (batch + event)."""
    a = jnp.asarray(a, x.dtype)
    return a.reshape((1,) * (x.ndim - a.ndim) + a.shape)


@dataclass(frozen=True, eq=False)
class GaussianEnvelope:
    """π(x) = N(mean, diag(scale²)) over x of shape (D,)."""

    mean: Any
    scale: Any = 1.0

    def sample(self, rng_key, sample_shape=()):
        mean = jnp.asarray(self.mean, jnp.result_type(float))
        eps = jax.random.normal(rng_key, tuple(sample_shape) + mean.shape, mean.dtype)
        return _like(mean, eps) + eps * _like(self.scale, eps)

    def log_prob(self, x):
        scale = _like(self.scale, x) * jnp.ones_like(x)
        z = (x - _like(self.mean, x)) / scale
        return jnp.sum(-0.5 * z**2 - jnp.log(scale) - 0.5 * np.log(2 * np.pi), -1)


@dataclass(frozen=True, eq=False)
class UniformEnvelope:
    """π(x) uniform on the box [lower, upper]."""

    lower: Any
    upper: Any

    def sample(self, rng_key, sample_shape=()):
        lo = jnp.asarray(self.lower, jnp.result_type(float))
        u = jax.random.uniform(rng_key, tuple(sample_shape) + lo.shape, lo.dtype)
        return _like(lo, u) + u * (_like(self.upper, u) - _like(lo, u))

    def log_prob(self, x):
        lo, hi = _like(self.lower, x), _like(self.upper, x)
        inside = jnp.all((x >= lo) & (x <= hi), -1)
        width = jnp.sum(jnp.log(hi - lo) * jnp.ones_like(x), -1)
        return jnp.where(inside, -width, -jnp.inf)


@dataclass(frozen=True, eq=False)
class BernoulliEnvelope:
    """Independent Bernoulli(probs) bits (binary x, e.g. Ising models with probs = ½)."""

    probs: Any

    def sample(self, rng_key, sample_shape=()):
        p = jnp.asarray(self.probs, jnp.result_type(float))
        shape = tuple(sample_shape) + p.shape
        return jax.random.bernoulli(rng_key, jnp.broadcast_to(p, shape)).astype(p.dtype)

    def log_prob(self, x):
        p = _like(self.probs, x)
        return jnp.sum(x * jnp.log(p) + (1 - x) * jnp.log1p(-p), -1)
