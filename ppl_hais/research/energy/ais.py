"""log Z of RBMs and log Z_B − log Z_A by AIS with Gibbs transitions ([SM08] §3), and the
DBN lower bound of [SM08] §4.

Example
-------
>>> import jax, numpy as np, ppl_hais as ph
>>> a = ph.research.energy.RBM(np.full((5, 2), 0.2), np.zeros(5), np.zeros(2))
>>> b = ph.research.energy.RBM(np.full((5, 2), 0.4), np.zeros(5), np.zeros(2))
>>> res = ph.research.energy.log_partition_ratio(jax.random.key(0), a, b, num_particles=200,
...                                     num_steps=300)
>>> exact = ph.research.energy.log_partition_exact(b) - ph.research.energy.log_partition_exact(a)
>>> bool(abs(res.log_z - exact) < 5 * res.log_z_se + 0.01)
True
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from ...checks import diagnostics
from ...mcmc import fast_random
from ...results.result import AISResult, AnnealingTrace
from ...results.settings import RunSettings
from ...runtime.precision import float64
from ...stats import estimators
from .rbm import RBM, add_bias, check_binary


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
    a = c_A + vᵀW_A, b = c_B + vᵀW_B ([SM08] eq. 12)."""
    return (
        (1 - beta) * va
        + jnp.sum(jax.nn.softplus((1 - beta) * a), axis=-1)
        + beta * vb
        + jnp.sum(jax.nn.softplus(beta * b), axis=-1)
    )


def _bernoulli(key, p, salt):
    """Bernoulli(p) from a counter-based 32-bit uniform (resolution 2⁻³², so probabilities
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
            add_bias(v @ model_a.weights, model_a.hidden_bias),
            add_bias(v @ model_b.weights, model_b.hidden_bias),
        )

    def temperature(carry, xs):
        v, lw = carry
        beta_prev, beta, key = xs
        a, b = pre(v)
        va, vb = v @ model_a.visible_bias, v @ model_b.visible_bias
        lw = lw + _log_p(beta, va, vb, a, b)
        lw = lw - _log_p(beta_prev, va, vb, a, b)
        # block Gibbs at beta: both hidden layers given v, then v given both ([SM08] eq. 15-17)
        ha = _bernoulli(key, jax.nn.sigmoid((1 - beta) * a), 1)
        hb = _bernoulli(key, jax.nn.sigmoid(beta * b), 2)
        field = (1 - beta) * add_bias(ha @ model_a.weights.T, model_a.visible_bias)
        field = field + beta * add_bias(hb @ model_b.weights.T, model_b.visible_bias)
        v = _bernoulli(key, jax.nn.sigmoid(field), 3)
        return (v, lw), None

    def bin_(carry, xs):
        bin_betas, bin_index = xs
        n = bin_betas.shape[0] - 1
        keys = jax.vmap(lambda i: jax.random.fold_in(rng_key, bin_index * n + i))(jnp.arange(n))
        carry, _ = jax.lax.scan(temperature, carry, (bin_betas[:-1], bin_betas[1:], keys))
        lw = carry[1]
        return carry, (estimators.ess(lw), estimators.log_mean_exp(lw))

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


def make_result(lw, v, ess, log_z, betas, binned, log_z_a, settings, wall):
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


def prepare_run(rng_key, num_particles, num_steps, schedule, num_bins):
    """Validated sizes, the schedule and its bins, and the keys of the start and the run."""
    for name, value in (("num_particles", num_particles), ("num_steps", num_steps)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    betas = _betas(schedule, int(num_steps))
    binned = _binned(betas, min(int(num_bins), betas.size - 1))
    return (betas, binned, *jax.random.split(rng_key))


def independent_draws(rng_key, bias, num):
    """Exact draws of independent binary units with logits ``bias``: (num, units)."""
    p = jax.nn.sigmoid(jnp.asarray(bias))
    u = jax.random.uniform(rng_key, (int(num), p.size), dtype=p.dtype)
    return (u < p[None, :]).astype(p.dtype)


def _check_model(model, name):
    if not isinstance(model, RBM):
        raise TypeError(f"{name} must be a ph.research.energy.RBM, got {type(model).__name__}")


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
    """log Z_B − log Z_A by annealing from RBM A to RBM B ([SM08] §3.2).

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
    """log Z of an RBM by AIS from a base-rate model with Gibbs transitions ([SM08] §3.3).

    ``base``: the initial model, an RBM without hidden units (default: visible biases 0, i.e.
    uniform; :func:`base_rate` of the training data is [SM08]'s choice and anneals better).
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
        raise ValueError("base must have no hidden units (e.g. ph.research.energy.base_rate(data))")
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
    betas, binned, key_start, key_run = prepare_run(rng_key, num_particles, num_steps, schedule,
                                                    bins)  # fmt: skip
    start = time.perf_counter()
    if model_a.num_hidden == 0:  # independent visible units: exact draws
        v0 = independent_draws(key_start, model_a.visible_bias, num_particles)
    else:
        k1, k2 = jax.random.split(key_start)
        v0 = jax.random.bernoulli(k1, 0.5, (int(num_particles), model_a.num_visible))
        v0 = model_a.gibbs(k2, v0.astype(float), int(burn_in))
    lw, v, ess, log_z = jax.block_until_ready(
        _anneal(key_run, model_a, model_b, v0, jnp.asarray(binned))
    )
    settings = RunSettings(
        kernel="block Gibbs", schedule=schedule if isinstance(schedule, str) else "given",
        num_particles=int(num_particles), num_steps=betas.size - 1, step_size="none",
        gradients_per_particle=0, matrix_products_per_temperature=2,
        remedy="more temperatures (num_steps), more particles, or a start closer to the model "
        "(base=ph.research.energy.base_rate(training data))",
    )  # fmt: skip
    return make_result(lw, v, ess, log_z, betas, binned, log_z_a, settings,
                   time.perf_counter() - start)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# deep belief nets: the variational lower bound of [SM08] §4


@float64
def dbn_lower_bound(rng_key, bottom: RBM, top: RBM, data, log_z_top, *, num_samples: int = 5):
    """Seed 002's lower bound (eq. 22–24) on the average log p(v) of a two-layer DBN.

    The DBN is p(v, h₁, h₂) = p(v | h₁) · p(h₁, h₂): ``bottom`` gives p(v | h₁) and the
    recognition distribution Q(h₁ | v) = Π_j σ(c_j + (vᵀW)_j); ``top`` is the RBM over (h₁, h₂)
    (its visible layer is h₁). For each data vector, ``num_samples`` draws h₁ ~ Q give

        log p(v) ≥ E_Q[log p(v | h₁) + log p*_top(h₁)] + H(Q(h₁ | v)) − log Z_top,

    with ``log_z_top`` from :func:`log_partition`. Returns (the bound averaged over the data,
    its Monte Carlo standard error); the error of ``log_z_top`` adds to it ([SM08]'s
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
    x = jnp.asarray(check_binary(data, bottom.num_visible))
    q = jax.nn.sigmoid(add_bias(x @ bottom.weights, bottom.hidden_bias))  # (N, H1)
    h = jax.random.bernoulli(rng_key, q[None], (int(num_samples),) + q.shape).astype(x.dtype)
    a = add_bias(h @ bottom.weights.T, bottom.visible_bias)  # (M, N, V): p(v = 1 | h1) = σ(a)
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


