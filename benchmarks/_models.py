"""The benchmarks' shared targets with known log Z: flat densities over R^D, each returned as
``(ph.AnnealingTarget, exact log Z)``, so every script that anneals a funnel anneals this one."""

import jax.numpy as jnp
import numpy as np
from scipy import special

import ppl_hais as ph


def funnel_log_density(z, sd_v=3.0):
    """Neal's funnel, unnormalized: v = z[0] ~ N(0, sd_v²), z[1:] ~ N(0, eᵛ)."""
    v, x = z[0], z[1:]
    return -0.5 * (v / sd_v) ** 2 - 0.5 * jnp.sum(x * x) * jnp.exp(-v) - 0.5 * x.shape[0] * v


def funnel(dim=10, sd_v=3.0):
    exact = 0.5 * dim * np.log(2 * np.pi) + np.log(sd_v)
    target = ph.AnnealingTarget(lambda z: funnel_log_density(z, sd_v), ph.Gaussian(np.zeros(dim)))
    return target, float(exact)


def student(dim, nu):
    """Independent Student-t coordinates (ν degrees of freedom), unnormalized."""

    def log_density(z):
        return jnp.sum(-(nu + 1) / 2 * jnp.log1p(z * z / nu))

    one = special.gammaln(nu / 2) + 0.5 * np.log(nu * np.pi) - special.gammaln((nu + 1) / 2)
    return ph.AnnealingTarget(log_density, ph.Gaussian(np.zeros(dim))), float(dim * one)


def scaled_gaussian(dim, s):
    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / s) ** 2), ph.Gaussian(np.zeros(dim)))
    return target, float(dim * np.log(s * np.sqrt(2 * np.pi)))


def laplace(dim, b):
    target = ph.AnnealingTarget(lambda z: -jnp.sum(jnp.abs(z)) / b, ph.Gaussian(np.zeros(dim)))
    return target, float(dim * np.log(2 * b))


def mixture(dim=5, sep=4.0, sd=0.5):
    """Two well-separated Gaussian modes at ±sep, equal weights."""
    m = jnp.full(dim, sep)

    def log_density(z):
        a = -0.5 * jnp.sum(((z - m) / sd) ** 2)
        b = -0.5 * jnp.sum(((z + m) / sd) ** 2)
        return jnp.logaddexp(a, b)

    exact = np.log(2.0) + 0.5 * dim * np.log(2 * np.pi * sd * sd)
    return ph.AnnealingTarget(log_density, ph.Gaussian(np.zeros(dim), 3.0)), float(exact)
