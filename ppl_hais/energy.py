"""Energy-based models with binary states: restricted Boltzmann machines and their partition
functions by AIS with Gibbs transitions (Salakhutdinov & Murray 2008, seed 002 §3).

A binary RBM with weights W (visible × hidden), visible bias b and hidden bias c has energy
E(v, h) = −vᵀWh − bᵀv − cᵀh; summing the hidden units out gives the unnormalized marginal
log p*(v) = bᵀv + Σ_j softplus(c_j + (vᵀW)_j) = −F(v), F the free energy.

To anneal from RBM A to RBM B, seed 002 eq. 13–17 keeps both hidden layers: the intermediate
distribution at β has energy (1 − β)·E_A(v, h_A) + β·E_B(v, h_B), so both hidden layers sum out
in closed form (eq. 12),

    log p*_β(v) = (1 − β)·b_Aᵀv + Σ_j softplus((1 − β)(c_A + vᵀW_A)_j)
                + β·b_Bᵀv + Σ_j softplus(β(c_B + vᵀW_B)_j),

and block Gibbs (h_A, h_B given v; then v given both) leaves it invariant. From the base-rate
model (independent visible units, no hidden units, exactly normalized and sampled) this gives
log Z of any RBM; between two RBMs it gives log Z_B − log Z_A. Each temperature costs two
matrix products of the particles with W_B (one per Gibbs half-step; the weight increment reuses
the first). One ``lax.scan`` over bins of temperatures, particles batched, one compile per
shape; the result is an :class:`~ppl_hais.AISResult` with the same checks and warnings as every
estimator.

>>> import jax, numpy as np, ppl_hais as ph
>>> rbm = ph.energy.RBM(np.full((6, 3), 0.3), np.zeros(6), np.zeros(3))
>>> res = ph.energy.log_partition(jax.random.key(0), rbm, num_particles=200, num_steps=300)
>>> bool(abs(res.log_z - ph.energy.log_partition_exact(rbm)) < 4 * res.log_z_se)
True
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from . import diagnostics
from . import random as fast_random
from .driver import _ess, _log_mean_exp  # the annealer's per-bin weight summaries
from .precision import float64
from .result import AISResult, AnnealingTrace

__all__ = [
    "RBM",
    "Ising",
    "base_rate",
    "dbn_lower_bound",
    "fit_ising_ml",
    "fit_mpf",
    "ising_log_partition",
    "ising_log_partition_exact",
    "fit_cd",
    "log_partition",
    "log_partition_exact",
    "log_partition_ratio",
    "mean_log_prob",
    "seed_002_schedule",
]


def _add(x, bias):
    """x + bias over x's last axis, without implicit rank promotion."""
    return x + jnp.reshape(bias, (1,) * (jnp.ndim(x) - 1) + (-1,))


@dataclass(frozen=True, eq=False)
class RBM:
    """A binary restricted Boltzmann machine.

    Parameters
    ----------
    weights : array (visible, hidden)
    visible_bias : array (visible,)
    hidden_bias : array (hidden,)
    """

    weights: np.ndarray
    visible_bias: np.ndarray
    hidden_bias: np.ndarray

    def __post_init__(self):
        w = np.asarray(self.weights, dtype=float)
        b = np.asarray(self.visible_bias, dtype=float)
        c = np.asarray(self.hidden_bias, dtype=float)
        if w.ndim != 2:
            raise ValueError(f"weights must be a (visible, hidden) matrix, got shape {w.shape}")
        if b.shape != (w.shape[0],) or c.shape != (w.shape[1],):
            raise ValueError(
                f"weights {w.shape} need visible_bias of shape ({w.shape[0]},) and hidden_bias "
                f"of shape ({w.shape[1]},); got {b.shape} and {c.shape}"
            )
        for name, x in (("weights", w), ("visible_bias", b), ("hidden_bias", c)):
            if not np.all(np.isfinite(x)):
                raise ValueError(f"{name} has {int(np.sum(~np.isfinite(x)))} NaN/inf value(s)")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "visible_bias", b)
        object.__setattr__(self, "hidden_bias", c)

    @property
    def num_visible(self) -> int:
        return int(self.weights.shape[0])

    @property
    def num_hidden(self) -> int:
        return int(self.weights.shape[1])

    def free_energy(self, v):
        """F(v) = −bᵀv − Σ_j softplus(c_j + (vᵀW)_j), for v of shape (..., visible)."""
        v = jnp.asarray(v, dtype=jnp.result_type(float))
        return -(v @ self.visible_bias) - jnp.sum(
            jax.nn.softplus(_add(v @ self.weights, self.hidden_bias)), axis=-1
        )

    def unnormalized_log_prob(self, v):
        """log p*(v) = −F(v): log p(v) up to log Z."""
        return -self.free_energy(v)

    def sample_hidden(self, rng_key, v):
        """h ~ p(h | v), for v of shape (..., visible)."""
        p = jax.nn.sigmoid(_add(jnp.asarray(v, float) @ self.weights, self.hidden_bias))
        return (jax.random.uniform(rng_key, p.shape) < p).astype(p.dtype)

    def sample_visible(self, rng_key, h):
        """v ~ p(v | h), for h of shape (..., hidden)."""
        p = jax.nn.sigmoid(_add(jnp.asarray(h, float) @ self.weights.T, self.visible_bias))
        return (jax.random.uniform(rng_key, p.shape) < p).astype(p.dtype)

    def gibbs(self, rng_key, v, num_steps: int = 1):
        """``num_steps`` sweeps of block Gibbs sampling (h given v, then v given h) from v."""

        def sweep(v, key):
            kh, kv = jax.random.split(key)
            return self.sample_visible(kv, self.sample_hidden(kh, v)), None

        v, _ = jax.lax.scan(sweep, jnp.asarray(v, float), jax.random.split(rng_key, num_steps))
        return v


jax.tree_util.register_pytree_node(
    RBM,
    lambda m: ((m.weights, m.visible_bias, m.hidden_bias), None),
    lambda _, ch: _unchecked_rbm(*ch),
)


def _unchecked_rbm(w, b, c):
    m = object.__new__(RBM)
    object.__setattr__(m, "weights", w)
    object.__setattr__(m, "visible_bias", b)
    object.__setattr__(m, "hidden_bias", c)
    return m


def _check_binary(data, num_visible=None) -> np.ndarray:
    x = np.asarray(data, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"data must be a (cases, visible) array of 0/1, got shape {x.shape}")
    if num_visible is not None and x.shape[1] != num_visible:
        raise ValueError(f"data has {x.shape[1]} visible units, the model {num_visible}")
    if not np.all((x == 0) | (x == 1)):
        bad = int(np.sum((x != 0) & (x != 1)))
        raise ValueError(f"data must be binary (0/1): {bad} value(s) are neither")
    return x


def base_rate(data, smoothing: float = 1.0) -> RBM:
    """Seed 002's base-rate model: independent visible units whose biases match the data's
    marginals, smoothed by ``smoothing`` pseudo-counts per state (no 0 or 1 probabilities).
    An RBM without hidden units, so exactly normalized: log Z = Σ_i softplus(b_i)."""
    x = _check_binary(data)
    p = (x.sum(0) + smoothing) / (x.shape[0] + 2 * smoothing)
    return RBM(np.zeros((x.shape[1], 0)), np.log(p) - np.log1p(-p), np.zeros(0))


@float64
def fit_cd(
    rng_key,
    data,
    num_hidden: int,
    *,
    num_epochs: int = 50,
    batch_size: int = 100,
    learning_rate: float = 0.05,
    cd_steps: int = 1,
    weight_decay: float = 1e-4,
    init_scale: float = 0.01,
) -> RBM:
    """Fit a binary RBM to ``data`` by contrastive divergence (CD-k, Hinton 2002), how seed
    002's models were trained: the gradient E_data[v hᵀ] − E_k[v hᵀ], with the model term from
    ``cd_steps`` Gibbs sweeps started at the data. Visible biases start at the base rate,
    weights at N(0, init_scale²); one compiled scan over epochs and minibatches."""
    rng_key = fast_random.check_key(rng_key)
    x = _check_binary(data)
    n, num_visible = x.shape
    batch_size = min(int(batch_size), n)
    num_batches = n // batch_size
    k_init, k_run = jax.random.split(rng_key)
    init = RBM(
        init_scale * np.asarray(jax.random.normal(k_init, (num_visible, int(num_hidden)))),
        base_rate(x).visible_bias,
        np.zeros(int(num_hidden)),
    )

    def batch_step(model, xs):
        v0, key = xs
        k1, k2 = jax.random.split(key)
        p0 = jax.nn.sigmoid(_add(v0 @ model.weights, model.hidden_bias))
        vk = (
            model.gibbs(k1, v0, int(cd_steps))
            if cd_steps > 1
            else model.sample_visible(k1, model.sample_hidden(k2, v0))
        )
        pk = jax.nn.sigmoid(_add(vk @ model.weights, model.hidden_bias))
        m = v0.shape[0]
        grad_w = (v0.T @ p0 - vk.T @ pk) / m - weight_decay * model.weights
        grad_b = jnp.mean(v0 - vk, axis=0)
        grad_c = jnp.mean(p0 - pk, axis=0)
        return _unchecked_rbm(
            model.weights + learning_rate * grad_w,
            model.visible_bias + learning_rate * grad_b,
            model.hidden_bias + learning_rate * grad_c,
        ), None

    def epoch(model, key):
        k_perm, k_steps = jax.random.split(key)
        order = jax.random.permutation(k_perm, n)[: num_batches * batch_size]
        batches = jnp.asarray(x)[order].reshape(num_batches, batch_size, num_visible)
        model, _ = jax.lax.scan(
            batch_step, model, (batches, jax.random.split(k_steps, num_batches))
        )
        return model, None

    fitted, _ = jax.jit(lambda m, keys: jax.lax.scan(epoch, m, keys))(
        init, jax.random.split(k_run, int(num_epochs))
    )
    return RBM(*(np.asarray(a) for a in (fitted.weights, fitted.visible_bias, fitted.hidden_bias)))


def log_partition_exact(model: RBM) -> float:
    """log Z by enumerating the smaller layer (at most 2²⁴ states): for tests and benchmarks."""
    w, b, c = model.weights, model.visible_bias, model.hidden_bias
    if model.num_hidden <= model.num_visible:
        n, field, bias, other = model.num_hidden, w, c, b  # sum v out, enumerate h
    else:
        n, field, bias, other = model.num_visible, w.T, b, c  # sum h out, enumerate v
    if n > 24:
        raise ValueError(f"the smaller layer has {n} units: 2^{n} states are too many")
    total = []
    for start in range(0, 2**n, 2**16):  # chunks keep memory at 2^16 × units
        idx = np.arange(start, min(2**n, start + 2**16))
        states = ((idx[:, None] >> np.arange(n)) & 1).astype(float)
        total.append(logsumexp(states @ bias + np.logaddexp(0.0, states @ field.T + other).sum(1)))
    return float(logsumexp(total))


def mean_log_prob(model: RBM, data, log_z) -> float:
    """Average log p(v) over ``data`` (cases × visible, binary) given log Z (in float64)."""
    x = _check_binary(data, model.num_visible)
    field = x @ model.weights + model.hidden_bias
    return float(np.mean(x @ model.visible_bias + np.logaddexp(0.0, field).sum(1)) - log_z)


def seed_002_schedule(num_steps: int = 14_500) -> np.ndarray:
    """Seed 002's temperatures: 500 uniform steps over [0, ½], 4,000 over [½, 0.9] and
    10,000 over [0.9, 1] (14,500 in all); another ``num_steps`` keeps the proportions."""
    n1 = max(1, round(num_steps * 500 / 14_500))
    n2 = max(1, round(num_steps * 4_000 / 14_500))
    n3 = max(1, num_steps - n1 - n2)
    return np.concatenate(
        [
            np.linspace(0.0, 0.5, n1 + 1)[:-1],
            np.linspace(0.5, 0.9, n2 + 1)[:-1],
            np.linspace(0.9, 1.0, n3 + 1),
        ]
    )


def _betas(schedule, num_steps):
    if isinstance(schedule, str):
        if schedule == "seed_002":
            return seed_002_schedule(num_steps)
        if schedule == "linear":
            return np.linspace(0.0, 1.0, num_steps + 1)
        raise ValueError(f"unknown schedule {schedule!r}: use 'seed_002', 'linear' or an array")
    betas = np.asarray(schedule, dtype=float)
    if betas.ndim != 1 or betas.size < 2 or betas[0] != 0.0 or betas[-1] != 1.0:
        raise ValueError("a schedule must be a 1-D array of betas from 0 to 1, ending at 1")
    if np.any(np.diff(betas) < 0):
        raise ValueError("a schedule must be non-decreasing")
    return betas


def _log_p(beta, va, vb, a, b):
    """log p*_β(v) for a batch, from va = b_Aᵀv, vb = b_Bᵀv and the hidden pre-activations
    a = c_A + vᵀW_A, b = c_B + vᵀW_B (seed 002 eq. 12)."""
    return (
        (1 - beta) * va
        + jnp.sum(jax.nn.softplus((1 - beta) * a), axis=-1)
        + beta * vb
        + jnp.sum(jax.nn.softplus(beta * b), axis=-1)
    )


def _bernoulli(key, p, salt):
    """Bernoulli(p) from a counter-hashed 32-bit uniform (resolution 2⁻³², so probabilities
    down to ~1e-10 are honoured; ``salt`` picks an independent stream of the same key)."""
    u = (fast_random.bits(key, p.shape, salt).astype(p.dtype) + 0.5) * 2.0**-32
    return (u < p).astype(p.dtype)


@jax.jit
def _anneal(rng_key, model_a, model_b, v0, betas):
    """AIS from A to B: (final log weights, final states, per-bin ESS and log Z ratio).

    ``betas`` has shape (bins, steps per bin + 1 overlap): bin i covers betas[i, 0] → betas[i, -1].
    """

    def pre(v):
        return (
            _add(v @ model_a.weights, model_a.hidden_bias),
            _add(v @ model_b.weights, model_b.hidden_bias),
        )

    def temperature(carry, xs):
        v, lw = carry
        beta_prev, beta, key = xs
        a, b = pre(v)
        va, vb = v @ model_a.visible_bias, v @ model_b.visible_bias
        lw = lw + _log_p(beta, va, vb, a, b)
        lw = lw - _log_p(beta_prev, va, vb, a, b)
        # block Gibbs at beta: both hidden layers given v, then v given both (seed 002 eq. 15-17)
        ha = _bernoulli(key, jax.nn.sigmoid((1 - beta) * a), 1)
        hb = _bernoulli(key, jax.nn.sigmoid(beta * b), 2)
        field = (1 - beta) * _add(ha @ model_a.weights.T, model_a.visible_bias) + beta * _add(
            hb @ model_b.weights.T, model_b.visible_bias
        )
        v = _bernoulli(key, jax.nn.sigmoid(field), 3)
        return (v, lw), None

    def bin_(carry, xs):
        bin_betas, bin_index = xs
        n = bin_betas.shape[0] - 1
        keys = jax.vmap(lambda i: jax.random.fold_in(rng_key, bin_index * n + i))(jnp.arange(n))
        carry, _ = jax.lax.scan(temperature, carry, (bin_betas[:-1], bin_betas[1:], keys))
        lw = carry[1]
        return carry, (_ess(lw), _log_mean_exp(lw))

    lw0 = jnp.zeros(v0.shape[0], dtype=v0.dtype)
    (v, lw), (ess, log_z) = jax.lax.scan(bin_, (v0, lw0), (betas, jnp.arange(betas.shape[0])))
    return lw, v, ess, log_z


def _binned(betas, num_bins):
    """(bins, k + 1) windows of the schedule that share their ends; pads by repeating β = 1
    (a repeated β adds 0 to the weights and applies one more invariant Gibbs sweep)."""
    n = betas.size - 1
    k = -(-n // num_bins)
    padded = np.concatenate([betas, np.full(num_bins * k - n, betas[-1])])
    starts = np.arange(num_bins) * k
    return padded[starts[:, None] + np.arange(k + 1)]


def _result(lw, v, ess, log_z, betas, binned, log_z_a, settings, wall):
    trace = AnnealingTrace(
        beta=binned[:, -1],
        acceptance_rate=np.ones(binned.shape[0]),
        step_size=np.full(binned.shape[0], np.nan),
        ess=np.asarray(ess),
        log_z=np.asarray(log_z) + log_z_a,
    )
    result = AISResult.from_log_weights(
        np.asarray(lw),
        particles=np.asarray(v),
        betas=betas,
        trace=trace,
        log_z_initial=log_z_a,
        settings=settings,
        wall_time=wall,
    )
    diagnostics.warn(result.checks, "log Z")
    return result


def _prepare(rng_key, num_particles, num_steps, schedule, num_bins):
    """Validated sizes, the schedule and its bins, and the keys of the start and the run."""
    for name, value in (("num_particles", num_particles), ("num_steps", num_steps)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    betas = _betas(schedule, int(num_steps))
    binned = _binned(betas, min(int(num_bins), betas.size - 1))
    return (betas, binned, *jax.random.split(rng_key))


def _independent(rng_key, bias, num):
    """Exact draws of independent binary units with logits ``bias``: (num, units)."""
    p = jax.nn.sigmoid(jnp.asarray(bias))
    u = jax.random.uniform(rng_key, (int(num), p.size), dtype=p.dtype)
    return (u < p[None, :]).astype(p.dtype)


def _check_model(model, name):
    if not isinstance(model, RBM):
        raise TypeError(f"{name} must be a ph.energy.RBM, got {type(model).__name__}")


@float64
def log_partition_ratio(
    rng_key,
    model_a: RBM,
    model_b: RBM,
    *,
    num_particles: int = 100,
    num_steps: int = 14_500,
    schedule="seed_002",
    num_burn_in: int = 1000,
    num_bins: int = 100,
) -> AISResult:
    """log Z_B − log Z_A by annealing from RBM A to RBM B (seed 002 §3.2).

    The particles start from p_A: exactly when A has no hidden units (a base-rate model),
    otherwise after ``num_burn_in`` block Gibbs sweeps of A from uniform random states (seed
    002's condition C4 relaxed; the estimator stays consistent, but its error bar assumes
    independent starts). The result's ``log_z`` is the log ratio.
    """
    rng_key = fast_random.check_key(rng_key)
    _check_model(model_a, "model_a")
    _check_model(model_b, "model_b")
    if model_a.num_visible != model_b.num_visible:
        raise ValueError(
            f"the models have {model_a.num_visible} and {model_b.num_visible} visible units"
        )
    return _run(rng_key, model_a, model_b, 0.0, num_particles, num_steps, schedule, num_burn_in,
                num_bins)  # fmt: skip


def _path_offset(model_a, model_b):
    """log Z_0 − log Z_A and log Z_1 − log Z_B of the path of eq. 13: at β = 0 each of B's hidden
    units contributes softplus(0) = log 2 to log p*_0, at β = 1 each of A's."""
    return model_b.num_hidden * np.log(2.0), model_a.num_hidden * np.log(2.0)


@float64
def log_partition(
    rng_key,
    model: RBM,
    *,
    base: RBM | None = None,
    num_particles: int = 100,
    num_steps: int = 14_500,
    schedule="seed_002",
    num_bins: int = 100,
) -> AISResult:
    """log Z of an RBM by AIS from a base-rate model with Gibbs transitions (seed 002 §3.3).

    ``base``: the initial model, an RBM without hidden units (default: visible biases 0, i.e.
    uniform; :func:`base_rate` of the training data is seed 002's choice and anneals better).
    ``schedule``: ``"seed_002"`` (its 500 / 4,000 / 10,000 split of [0, ½, 0.9, 1], scaled
    to ``num_steps``), ``"linear"``, or an array of betas from 0 to 1. Returns an
    :class:`~ppl_hais.AISResult` (log Z, SE, ESS, Pareto k̂, checks; an EvidenceWarning when
    a check fails); ``particles`` are the final visible states.
    """
    rng_key = fast_random.check_key(rng_key)
    _check_model(model, "model")
    if base is None:
        base = RBM(np.zeros((model.num_visible, 0)), np.zeros(model.num_visible), np.zeros(0))
    _check_model(base, "base")
    if base.num_hidden:
        raise ValueError("base must have no hidden units (e.g. ph.energy.base_rate(data))")
    if base.num_visible != model.num_visible:
        raise ValueError(
            f"base has {base.num_visible} visible units, the model {model.num_visible}"
        )
    log_z_a = float(np.sum(np.logaddexp(0.0, base.visible_bias)))
    return _run(rng_key, base, model, log_z_a, num_particles, num_steps, schedule, 0, num_bins)


def _run(rng_key, model_a, model_b, log_z_a, num_particles, num_steps, schedule, burn_in, bins):
    """AIS along eq. 13's path; the weights estimate Z_1 / Z_0, and the result reports
    log Z_B − (log Z_A − ``log_z_a``) (the known log Z_A goes in ``log_z_a``)."""
    start_offset, end_offset = _path_offset(model_a, model_b)
    log_z_a = log_z_a + start_offset - end_offset
    betas, binned, key_start, key_run = _prepare(rng_key, num_particles, num_steps, schedule, bins)
    start = time.perf_counter()
    if model_a.num_hidden == 0:  # independent visible units: exact draws
        v0 = _independent(key_start, model_a.visible_bias, num_particles)
    else:
        k1, k2 = jax.random.split(key_start)
        v0 = jax.random.bernoulli(k1, 0.5, (int(num_particles), model_a.num_visible))
        v0 = model_a.gibbs(k2, v0.astype(float), int(burn_in))
    lw, v, ess, log_z = jax.block_until_ready(
        _anneal(key_run, model_a, model_b, v0, jnp.asarray(binned))
    )
    settings = dict(
        kernel="block Gibbs", schedule=schedule if isinstance(schedule, str) else "given",
        num_particles=int(num_particles), num_steps=betas.size - 1, step_size="none",
        gradients_per_particle=0, matrix_products_per_temperature=2,
        remedy="more temperatures (num_steps), more particles, or a start closer to the model "
        "(base=ph.energy.base_rate(training data))",
    )  # fmt: skip
    return _result(lw, v, ess, log_z, betas, binned, log_z_a, settings,
                   time.perf_counter() - start)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# deep belief nets: the variational lower bound of seed 002 §4


@float64
def dbn_lower_bound(rng_key, bottom: RBM, top: RBM, data, log_z_top, *, num_samples: int = 5):
    """Seed 002's lower bound (eq. 22–24) on the average log p(v) of a two-layer DBN.

    The DBN is p(v, h₁, h₂) = p(v | h₁) · p(h₁, h₂): ``bottom`` gives p(v | h₁) and the
    recognition distribution Q(h₁ | v) = Π_j σ(c_j + (vᵀW)_j); ``top`` is the RBM over (h₁, h₂)
    (its visible layer is h₁). For each data vector, ``num_samples`` draws h₁ ~ Q give

        log p(v) ≥ E_Q[log p(v | h₁) + log p*_top(h₁)] + H(Q(h₁ | v)) − log Z_top,

    with ``log_z_top`` from :func:`log_partition`. Returns (the bound averaged over the data,
    its Monte Carlo standard error); the error of ``log_z_top`` adds to it (seed 002's
    Var(r̂_Bound) = Var(r̂_B) + Var(log Ẑ)).
    """
    rng_key = fast_random.check_key(rng_key)
    _check_model(bottom, "bottom")
    _check_model(top, "top")
    if top.num_visible != bottom.num_hidden:
        raise ValueError(
            f"the top RBM has {top.num_visible} visible units, the bottom {bottom.num_hidden} "
            "hidden units: they must be the same layer"
        )
    x = jnp.asarray(_check_binary(data, bottom.num_visible))
    q = jax.nn.sigmoid(_add(x @ bottom.weights, bottom.hidden_bias))  # (N, H1)
    h = jax.random.bernoulli(rng_key, q[None], (int(num_samples),) + q.shape).astype(x.dtype)
    a = _add(h @ bottom.weights.T, bottom.visible_bias)  # (M, N, V): p(v = 1 | h1) = σ(a)
    log_p_v = jnp.sum(x[None] * a - jax.nn.softplus(a), axis=-1)
    log_p_h = top.unnormalized_log_prob(h)
    entropy = -jnp.sum(
        jax.scipy.special.xlogy(q, q) + jax.scipy.special.xlogy(1 - q, 1 - q), axis=-1
    )
    per_datum = np.asarray(jnp.mean(log_p_v + log_p_h, axis=0) + entropy) - float(log_z_top)
    terms = np.asarray(log_p_v + log_p_h)  # (M, N): the Monte Carlo part
    m, n = terms.shape
    se = float(np.sqrt(np.sum(np.var(terms, axis=0, ddof=1) / m)) / n) if m > 1 else float("nan")
    return float(per_datum.mean()), se


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
        return carry, (_ess(lw), _log_mean_exp(lw))

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
        raise TypeError(f"model must be a ph.energy.Ising, got {type(model).__name__}")
    betas, binned, key_start, key_run = _prepare(
        rng_key, num_particles, num_steps, schedule, num_bins
    )
    start = time.perf_counter()
    x0 = _independent(key_start, model.fields, num_particles)
    lw, x, ess, log_z = jax.block_until_ready(
        _ising_anneal(key_run, model, x0, jnp.asarray(binned))
    )
    log_z0 = float(np.sum(np.logaddexp(0.0, model.fields)))
    settings = dict(
        kernel="Gibbs sweep", schedule=schedule if isinstance(schedule, str) else "given",
        num_particles=int(num_particles), num_steps=betas.size - 1, step_size="none",
        gradients_per_particle=0,
        remedy="more temperatures (num_steps) or more particles",
    )  # fmt: skip
    return _result(lw, x, ess, log_z, betas, binned, log_z0, settings,
                   time.perf_counter() - start)  # fmt: skip


def _ising_from_params(theta, d):
    iu = np.triu_indices(d, 1)
    j = jnp.zeros((d, d)).at[iu].set(theta[: len(iu[0])])
    return j + j.T, theta[len(iu[0]) :]


@float64
def fit_mpf(data, *, l2: float = 0.0) -> Ising:
    """Fit an Ising model (fully visible Boltzmann machine) by minimum probability flow
    (Sohl-Dickstein et al.; seed 001 ch. 2–3) with single-bit-flip connectivity: minimize

        K(J, h) = mean over data x of Σ_i exp(½ [log p*(x with bit i flipped) − log p*(x)]),

    which needs no partition function and no sampling (BFGS on K, one compile). ``l2`` adds
    ``l2 · Σ J²``."""
    from jax.scipy.optimize import minimize

    x = jnp.asarray(_check_binary(data))
    d = x.shape[1]
    sign = 1.0 - 2.0 * x  # +1 where a bit flips 0 → 1

    def objective(theta):
        j, h = _ising_from_params(theta, d)
        delta = sign * _add(x @ j, h)  # log p*(flipped) − log p*(x), per unit
        return jnp.mean(jnp.sum(jnp.exp(0.5 * delta), axis=1)) + l2 * jnp.sum(j * j)

    theta0 = jnp.zeros(d * (d - 1) // 2 + d)
    res = jax.jit(lambda t: minimize(objective, t, method="BFGS", options=dict(maxiter=1000)))(
        theta0
    )
    j, h = _ising_from_params(res.x, d)
    return Ising(np.asarray(j), np.asarray(h))


@float64
def fit_ising_ml(data) -> Ising:
    """Exact maximum likelihood of a small Ising model (the partition function by enumerating
    all 2^D states, D ≤ 16): the reference MPF is compared against."""
    from jax.scipy.optimize import minimize

    x = jnp.asarray(_check_binary(data))
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
