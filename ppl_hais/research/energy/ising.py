"""Fully visible Boltzmann machines (Ising models): exact log Z by enumeration, log Z by AIS
with Gibbs sweeps, and fitting by minimum probability flow ([SD12] ch. 2–3) or exact ML.

Example
-------
>>> import numpy as np, ppl_hais as ph
>>> model = ph.research.energy.Ising(np.array([[0.0, 0.5], [0.5, 0.0]]), np.zeros(2))
>>> round(ph.research.energy.ising_log_partition_exact(model), 4)  # states {0,1}²: log(3 + e^½)
1.5366
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from ...mcmc import fast_random
from ...results.result import AISResult
from ...results.settings import RunSettings
from ...runtime.precision import float64
from ...stats import estimators
from .ais import independent_draws, make_result, prepare_run
from .rbm import METRIC_RIDGE, add_bias, check_binary

# ---------------------------------------------------------------------------------------------
# fully visible Boltzmann machines (Ising models): AIS with Gibbs sweeps, learning by MPF


@dataclass(frozen=True, eq=False)
class Ising:
    """A fully visible Boltzmann machine over x ∈ {0, 1}^D: log p*(x) = ½ xᵀJx + hᵀx, with J
    symmetric and zero on the diagonal (``couplings``) and ``fields`` h."""

    couplings: np.ndarray
    fields: np.ndarray

    def __post_init__(self):
        j = np.asarray(self.couplings, dtype=float)
        h = np.asarray(self.fields, dtype=float)
        if j.ndim != 2 or j.shape[0] != j.shape[1] or h.shape != (j.shape[0],):
            raise ValueError(f"couplings must be (D, D) and fields (D,); got {j.shape}, {h.shape}")
        if not (np.all(np.isfinite(j)) and np.all(np.isfinite(h))):
            raise ValueError("couplings and fields must be finite")
        if not np.allclose(j, j.T) or np.any(np.diag(j) != 0):
            raise ValueError("couplings must be symmetric with a zero diagonal")
        object.__setattr__(self, "couplings", j)
        object.__setattr__(self, "fields", h)

    @property
    def dim(self) -> int:
        return int(self.fields.size)

    def unnormalized_log_prob(self, x):
        x = jnp.asarray(x, dtype=jnp.result_type(float))
        return 0.5 * jnp.sum((x @ self.couplings) * x, axis=-1) + x @ self.fields


jax.tree_util.register_pytree_node(
    Ising, lambda m: ((m.couplings, m.fields), None), lambda _, ch: _unchecked_ising(*ch)
)


def _unchecked_ising(j, h):
    m = object.__new__(Ising)
    object.__setattr__(m, "couplings", j)
    object.__setattr__(m, "fields", h)
    return m


def ising_log_partition_exact(model: Ising) -> float:
    """log Z by enumerating all 2^D states (D ≤ 24)."""
    if model.dim > 24:
        raise ValueError(f"{model.dim} units: 2^{model.dim} states are too many")
    idx = np.arange(2**model.dim)
    x = ((idx[:, None] >> np.arange(model.dim)) & 1).astype(float)
    return float(logsumexp(0.5 * np.sum((x @ model.couplings) * x, 1) + x @ model.fields))


@jax.jit
def _ising_anneal(rng_key, model, x0, betas):
    """AIS along log p*_β = β·½xᵀJx + hᵀx with one sequential Gibbs sweep per temperature."""
    d = x0.shape[1]

    def sweep(x, beta, key):
        def site(i, x):
            field = beta * (x @ model.couplings[:, i]) + model.fields[i]
            u = fast_random.bits(jax.random.fold_in(key, i), x.shape[:1], 7).astype(x.dtype) + 0.5
            xi = (u * 2.0**-32 < jax.nn.sigmoid(field)).astype(x.dtype)
            return x.at[:, i].set(xi)

        return jax.lax.fori_loop(0, d, site, x)

    def bin_(carry, xs):
        bin_betas, bin_index = xs
        n = bin_betas.shape[0] - 1

        def temperature(carry, xs):
            x, lw = carry
            beta_prev, beta, i = xs
            pair = 0.5 * jnp.sum((x @ model.couplings) * x, axis=-1)
            lw = lw + (beta - beta_prev) * pair
            x = sweep(x, beta, jax.random.fold_in(rng_key, bin_index * n + i))
            return (x, lw), None

        carry, _ = jax.lax.scan(temperature, carry, (bin_betas[:-1], bin_betas[1:], jnp.arange(n)))
        lw = carry[1]
        return carry, (estimators.ess(lw), estimators.log_mean_exp(lw))

    lw0 = jnp.zeros(x0.shape[0], dtype=x0.dtype)
    (x, lw), (ess, log_z) = jax.lax.scan(bin_, (x0, lw0), (betas, jnp.arange(betas.shape[0])))
    return lw, x, ess, log_z


@float64
def ising_log_partition(
    rng_key,
    model: Ising,
    *,
    num_particles: int = 100,
    num_steps: int = 1000,
    schedule="linear",
    num_bins: int = 100,
) -> AISResult:
    """log Z of an Ising model / fully visible Boltzmann machine by AIS from the independent
    model with the same fields (exactly normalized and sampled) to the coupled one, with one
    sequential Gibbs sweep over the units per temperature. Same result and checks as
    :func:`log_partition`."""
    rng_key = fast_random.check_key(rng_key)
    if not isinstance(model, Ising):
        raise TypeError(f"model must be a ph.research.energy.Ising, got {type(model).__name__}")
    betas, binned, key_start, key_run = prepare_run(
        rng_key, num_particles, num_steps, schedule, num_bins
    )
    start = time.perf_counter()
    x0 = independent_draws(key_start, model.fields, num_particles)
    lw, x, ess, log_z = jax.block_until_ready(
        _ising_anneal(key_run, model, x0, jnp.asarray(binned))
    )
    log_z0 = float(np.sum(np.logaddexp(0.0, model.fields)))
    settings = RunSettings(
        kernel="Gibbs sweep", schedule=schedule if isinstance(schedule, str) else "given",
        num_particles=int(num_particles), num_steps=betas.size - 1, step_size="none",
        gradients_per_particle=0,
        remedy="more temperatures (num_steps) or more particles",
    )  # fmt: skip
    return make_result(lw, x, ess, log_z, betas, binned, log_z0, settings,
                   time.perf_counter() - start)  # fmt: skip


def _ising_from_params(theta, d):
    iu = np.triu_indices(d, 1)
    j = jnp.zeros((d, d)).at[iu].set(theta[: len(iu[0])])
    return j + j.T, theta[len(iu[0]) :]


@float64
def fit_mpf(data, *, l2: float = 0.0, natural_gradient: bool = False) -> Ising:
    """Fit an Ising model (fully visible Boltzmann machine) by minimum probability flow
    (Sohl-Dickstein et al.; [SD12] ch. 2–3) with single-bit-flip connectivity: minimize

        K(J, h) = mean over data x of Σ_i exp(½ [log p*(x with bit i flipped) − log p*(x)]),

    which needs no partition function and no sampling (BFGS on K, one compile). ``l2`` adds
    ``l2 · Σ J²``. ``natural_gradient=True`` runs BFGS in whitened coordinates ([SD12]
    §4.2.7): θ scaled by the square root of the diagonal energy-approximation metric
    ⟨(∂ log p*/∂θ)²⟩ over the data (⟨x_i x_j⟩ for J_ij, ⟨x_i⟩ for h_i; over its mean, plus
    the RBM fitters' ridge 0.1), so BFGS's first steps are natural-gradient steps."""
    from jax.scipy.optimize import minimize

    x = jnp.asarray(check_binary(data))
    d = x.shape[1]
    sign = 1.0 - 2.0 * x  # +1 where a bit flips 0 → 1

    def objective(theta):
        j, h = _ising_from_params(theta, d)
        delta = sign * add_bias(x @ j, h)  # log p*(flipped) − log p*(x), per unit
        return jnp.mean(jnp.sum(jnp.exp(0.5 * delta), axis=1)) + l2 * jnp.sum(j * j)

    scale = jnp.ones(d * (d - 1) // 2 + d)
    if natural_gradient:
        iu = np.triu_indices(d, 1)
        g = jnp.concatenate([jnp.mean(x[:, iu[0]] * x[:, iu[1]], axis=0), jnp.mean(x, axis=0)])
        scale = jnp.sqrt(g / jnp.mean(g) + METRIC_RIDGE)
    res = jax.jit(
        lambda t: minimize(lambda phi: objective(phi / scale), t, method="BFGS",
                           options=dict(maxiter=1000))  # fmt: skip
    )(jnp.zeros_like(scale))
    j, h = _ising_from_params(res.x / scale, d)
    return Ising(np.asarray(j), np.asarray(h))


@float64
def fit_ising_ml(data) -> Ising:
    """Exact maximum likelihood of a small Ising model (the partition function by enumerating
    all 2^D states, D ≤ 16): the reference MPF is compared against."""
    from jax.scipy.optimize import minimize

    x = jnp.asarray(check_binary(data))
    d = x.shape[1]
    if d > 16:
        raise ValueError(f"exact maximum likelihood enumerates 2^{d} states: at most 16 units")
    states = jnp.asarray(((np.arange(2**d)[:, None] >> np.arange(d)) & 1).astype(float))

    def neg_log_lik(theta):
        j, h = _ising_from_params(theta, d)
        log_p = lambda s: 0.5 * jnp.sum((s @ j) * s, axis=-1) + s @ h  # noqa: E731
        return jax.scipy.special.logsumexp(log_p(states)) - jnp.mean(log_p(x))

    theta0 = jnp.zeros(d * (d - 1) // 2 + d)
    res = jax.jit(lambda t: minimize(neg_log_lik, t, method="BFGS", options=dict(maxiter=1000)))(
        theta0
    )
    j, h = _ising_from_params(res.x, d)
    return Ising(np.asarray(j), np.asarray(h))
