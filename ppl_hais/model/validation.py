"""Validation models with exactly known normalizers ([HAIS12] §3, §5.1).

Each builder returns a :class:`ValidationCase` (target, exact log Z, a description), drawn from
a fixed ``seed`` so that tests, benchmarks and the demo all see the same model.

Example
-------
>>> from ppl_hais.model import validation
>>> case = validation.correlated_gaussian(dim=4)
>>> case.target.dim, round(float(case.log_z), 3) == round(float(case.log_z), 3)
(4, True)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln

from .target import AnnealingTarget, Gaussian

__all__ = [
    "ValidationCase",
    "product_of_experts",
    "linear_generative",
    "gamma_positive",
    "correlated_gaussian",
]


class ValidationCase(NamedTuple):
    name: str
    target: AnnealingTarget
    log_z: float
    info: dict


def _filters(dim, rng, condition=4.0):
    """Rows Φ_l: a random rotation with singular values log-spaced over ``condition``."""
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    s = np.exp(rng.uniform(-0.5, 0.5, size=dim) * np.log(condition))
    return q * s[:, None]


def product_of_experts(expert="laplace", dim=36, seed=0, lam=None, initial_scale=1.0):
    """Complete (L = M) product of experts p(x) ∝ Π_l exp(−E(Φ_l·x; λ_l)), [HAIS12] model 3.

    log Z = −log|det Φ| + Σ_l log z(λ_l), with z = 2/λ (Laplace, E = λ|u|) or
    z = √π Γ(λ − ½)/Γ(λ) (Student-t, E = λ log(1 + u²), λ > ½). The Student-t experts get λ
    from 0.75 to 3 by default: those with λ ≤ 1 have an infinite mean, the hard case of [HAIS12].
    """
    rng = np.random.default_rng(seed)
    phi = _filters(dim, rng)
    if expert == "laplace":
        lam = np.ones(dim) if lam is None else np.broadcast_to(np.asarray(lam, float), (dim,))
        log_z1 = np.log(2.0 / lam)

        def energy(u):
            return lam * jnp.abs(u)

    elif expert == "student":
        lam = (
            np.linspace(0.75, 3.0, dim)
            if lam is None
            else np.broadcast_to(np.asarray(lam, float), (dim,))
        )
        if np.any(lam <= 0.5):
            raise ValueError("Student-t experts need lambda > 1/2 to be normalizable")
        log_z1 = 0.5 * np.log(np.pi) + gammaln(lam - 0.5) - gammaln(lam)

        def energy(u):
            return lam * jnp.log1p(u * u)

    else:
        raise ValueError("expert must be 'laplace' or 'student'")
    log_z = float(-np.linalg.slogdet(phi)[1] + np.sum(log_z1))
    phi_j = jnp.asarray(phi)

    def log_density(x):
        return -jnp.sum(energy(phi_j @ x))

    target = AnnealingTarget(
        log_density=log_density, initial=Gaussian(np.zeros(dim), initial_scale)
    )
    return ValidationCase(f"poe_{expert}_{dim}d", target, log_z, dict(phi=phi, lam=lam))


def linear_generative(
    dim=36, latent_dim=None, sigma=0.1, prior="gaussian", seed=0, num_data=10, zero_bases=False
):
    """Linear generative model p(x|a) = N(x; Φa, σ²I), [HAIS12] model 1.

    Returns a dict with ``log_likelihood(a, x)``, ``prior`` (an initial distribution over a),
    ``data`` drawn from the model, and the exact ``log_p`` of each datum: N(0, ΦΦᵀ + σ²I) for
    the Gaussian prior; for ``zero_bases=True`` (Φ = 0, any prior) p(x) = N(0, σ²I).
    Laplace prior: p(a) = Π ½ exp(−|a_l|) — its initial distribution is a unit Gaussian and
    the Laplace prior enters the annealed likelihood term (annealed from N(0, I)).
    """
    latent_dim = dim if latent_dim is None else latent_dim
    rng = np.random.default_rng(seed)
    phi = (
        np.zeros((dim, latent_dim))
        if zero_bases
        else rng.normal(size=(dim, latent_dim)) / np.sqrt(latent_dim)
    )
    phi_j = jnp.asarray(phi)
    if prior == "gaussian":
        a = rng.normal(size=(num_data, latent_dim))
        initial = Gaussian(np.zeros(latent_dim))
        extra = lambda a_: 0.0  # noqa: E731
    elif prior == "laplace":
        a = rng.laplace(size=(num_data, latent_dim))
        initial = Gaussian(np.zeros(latent_dim))

        def extra(a_):  # log Laplace(a) − log N(a; 0, I)
            return jnp.sum(
                -jnp.abs(a_) - math.log(2.0) + 0.5 * a_ * a_ + 0.5 * math.log(2 * math.pi)
            )
    else:
        raise ValueError("prior must be 'gaussian' or 'laplace'")
    data = a @ phi.T + sigma * rng.normal(size=(num_data, dim))

    def log_likelihood(a_, x):
        r = x - phi_j @ a_
        log_lik = -0.5 * jnp.sum(r * r) / sigma**2 - dim * (
            math.log(sigma) + 0.5 * math.log(2 * math.pi)
        )
        return log_lik + extra(a_)

    if prior == "gaussian" or zero_bases:
        cov = phi @ phi.T + sigma**2 * np.eye(dim)
        _, logdet = np.linalg.slogdet(cov)
        sol = np.linalg.solve(cov, data.T).T
        log_p = -0.5 * np.sum(data * sol, axis=1) - 0.5 * logdet - 0.5 * dim * np.log(2 * np.pi)
    else:
        log_p = None
    return dict(log_likelihood=log_likelihood, prior=initial, data=data, log_p=log_p, phi=phi)


def gamma_positive(shape=(2.0, 5.0, 1.5), rate=(1.0, 2.0, 0.5), initial_scale=3.0):
    """Independent Gamma(α, β) densities on z > 0, unnormalized: log Z = Σ log Γ(α) − α log β.

    Needs the box constraint z > 0 (handled by reflection); the initial distribution is a
    half-normal-like Gaussian folded onto z > 0 (|N(0, s²)|, normalized: 2 N(z; 0, s²)).
    A shape α < 1 puts an infinite density at the wall, which reflected HMC does not reach:
    the estimate then sits low by a few SEs (tests/test_slow.py measures it).
    """
    alpha = np.asarray(shape, float)
    beta = np.asarray(rate, float)
    dim = alpha.size

    def log_density(z):
        return jnp.sum(jnp.where(z > 0, (alpha - 1) * jnp.log(jnp.abs(z)) - beta * z, -jnp.inf))

    log_z = float(np.sum(gammaln(alpha) - alpha * np.log(beta)))
    target = AnnealingTarget(
        log_density=log_density, initial=HalfNormal(np.full(dim, initial_scale)), bounds=(0.0, None)
    )
    return ValidationCase("gamma_positive", target, log_z, dict(alpha=alpha, beta=beta))


def correlated_gaussian(dim=10, condition=100.0, seed=0):
    """N(μ, Σ) unnormalized with an ill-conditioned Σ: log Z = ½ log det(2πΣ)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    eig = np.geomspace(1.0, 1.0 / condition, dim)
    cov = (q * eig) @ q.T
    prec = jnp.asarray(np.linalg.inv(cov))
    mean = rng.normal(size=dim) * 0.5
    mean_j = jnp.asarray(mean)

    def log_density(x):
        d = x - mean_j
        return -0.5 * d @ prec @ d

    log_z = float(0.5 * np.linalg.slogdet(2 * np.pi * cov)[1])
    target = AnnealingTarget(log_density=log_density, initial=Gaussian(np.zeros(dim)))
    return ValidationCase(
        f"gaussian_{dim}d_cond{condition:g}", target, log_z, dict(cov=cov, mean=mean)
    )


class HalfNormal:
    """|N(0, s²)| per coordinate, normalized on z > 0: an initial distribution for z > 0."""

    def __init__(self, scale):
        self.scale = np.atleast_1d(np.asarray(scale, float))

    @property
    def dim(self) -> int:
        return int(self.scale.size)

    def sample(self, rng_key, sample_shape=()):
        import jax

        from .target import lift, sample_shape_of

        shape = sample_shape_of(sample_shape) + (self.dim,)
        draws = jnp.abs(jax.random.normal(rng_key, shape, jnp.result_type(float)))
        return draws * lift(self.scale, len(shape))

    def log_prob(self, z):
        s = self.scale
        return jnp.sum(
            jnp.where(
                z >= 0, -0.5 * (z / s) ** 2 - jnp.log(s) + 0.5 * math.log(2 / math.pi), -jnp.inf
            )
        )
