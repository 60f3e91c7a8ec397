"""Binary restricted Boltzmann machines: free energy, block Gibbs, the base-rate model, exact
log Z by enumerating the hidden layer, and CD-k training.

Example
-------
>>> import numpy as np, ppl_hais as ph
>>> data = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1]])
>>> base = ph.research.energy.base_rate(data)  # independent units, exactly normalized
>>> exact = float(np.sum(np.logaddexp(0.0, base.visible_bias)))  # Π_i (1 + e^{b_i})
>>> bool(np.isclose(ph.research.energy.log_partition_exact(base), exact))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from ...mcmc import fast_random
from ...runtime.precision import float64


def add_bias(x, bias):
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
            jax.nn.softplus(add_bias(v @ self.weights, self.hidden_bias)), axis=-1
        )

    def unnormalized_log_prob(self, v):
        """log p*(v) = −F(v): log p(v) up to log Z."""
        return -self.free_energy(v)

    def sample_hidden(self, rng_key, v):
        """h ~ p(h | v), for v of shape (..., visible)."""
        p = jax.nn.sigmoid(add_bias(jnp.asarray(v, float) @ self.weights, self.hidden_bias))
        return (jax.random.uniform(rng_key, p.shape) < p).astype(p.dtype)

    def sample_visible(self, rng_key, h):
        """v ~ p(v | h), for h of shape (..., hidden)."""
        p = jax.nn.sigmoid(add_bias(jnp.asarray(h, float) @ self.weights.T, self.visible_bias))
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


def check_binary(data, num_visible=None) -> np.ndarray:
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
    x = check_binary(data)
    p = (x.sum(0) + smoothing) / (x.shape[0] + 2 * smoothing)
    return RBM(np.zeros((x.shape[1], 0)), np.log(p) - np.log1p(-p), np.zeros(0))


def _fit(rng_key, data, num_hidden, *, num_epochs, batch_size, init_scale, update, extra):
    """The training loop fit_cd and fit_mpf_rbm share: visible biases at the base rate,
    weights N(0, init_scale²), then for each epoch a fresh shuffle into minibatches and
    ``(model, extra) = update((model, extra), v, key)`` per minibatch; one compiled scan."""
    rng_key = fast_random.check_key(rng_key)
    x = check_binary(data)
    n, num_visible = x.shape
    batch_size = min(int(batch_size), n)
    num_batches = n // batch_size
    k_init, k_run = jax.random.split(rng_key)
    init = _unchecked_rbm(
        init_scale * jax.random.normal(k_init, (num_visible, int(num_hidden))),
        jnp.asarray(base_rate(x).visible_bias),
        jnp.zeros(int(num_hidden)),
    )

    def batch_step(carry, xs):
        v, key = xs
        return update(carry, v, key), None

    def epoch(carry, key):
        k_perm, k_steps = jax.random.split(key)
        order = jax.random.permutation(k_perm, n)[: num_batches * batch_size]
        batches = jnp.asarray(x)[order].reshape(num_batches, batch_size, num_visible)
        keys = jax.random.split(k_steps, num_batches)
        carry, _ = jax.lax.scan(batch_step, carry, (batches, keys))
        return carry, None

    (fitted, _), _ = jax.jit(lambda c, keys: jax.lax.scan(epoch, c, keys))(
        (init, extra(init)), jax.random.split(k_run, int(num_epochs))
    )
    return RBM(*(np.asarray(a) for a in (fitted.weights, fitted.visible_bias, fitted.hidden_bias)))


_METRIC_DECAY = 0.95  # running average of the metric over minibatches
METRIC_RIDGE = 0.1  # G / mean(G) + this: the chapter's regularization (§4.2.6); 0.01 diverged
# (MPF with momentum 0.9 on the digits: rare units took 100× steps)


def _energy_metric(model, v):
    """The diagonal of the "energy approximation" metric (Sohl-Dickstein 2012, eqs. 4.33–4.34):
    the mean over the rows of ``v`` of (∂F(v)/∂θ)² for the free energy F, per parameter, as an
    RBM (∂F/∂W = −v σ(a)ᵀ, ∂F/∂b = −v, ∂F/∂c = −σ(a))."""
    p = jax.nn.sigmoid(add_bias(v @ model.weights, model.hidden_bias))
    m = v.shape[0]
    return _unchecked_rbm((v * v).T @ (p * p) / m, jnp.mean(v * v, 0), jnp.mean(p * p, 0))


def _natural(grads, metric, model, v):
    """(grads preconditioned by the running diagonal metric, the updated metric): each
    parameter's step divided by its metric over the metric's mean (the learning rate keeps
    its meaning: only the relative scaling between parameters changes, as whitening does)."""
    new = _energy_metric(model, v)
    metric = jax.tree.map(lambda a, b: _METRIC_DECAY * a + (1 - _METRIC_DECAY) * b, metric, new)
    leaves = jax.tree.leaves(metric)
    mean = sum(jnp.sum(x) for x in leaves) / sum(x.size for x in leaves)
    grads = jax.tree.map(lambda g, gm: g / (gm / mean + METRIC_RIDGE), grads, metric)
    return grads, metric


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
    natural_gradient: bool = False,
) -> RBM:
    """Fit a binary RBM to ``data`` by contrastive divergence (CD-k, Hinton 2002), how seed
    002's models were trained: the gradient E_data[v hᵀ] − E_k[v hᵀ], with the model term from
    ``cd_steps`` Gibbs sweeps started at the data. Visible biases start at the base rate,
    weights at N(0, init_scale²); one compiled scan over epochs and minibatches.
    ``natural_gradient=True`` preconditions each step by the diagonal energy-approximation
    metric (:func:`_natural`; Sohl-Dickstein 2012 §4.2.4–4.2.6)."""

    def update(carry, v0, key):
        model, metric = carry
        k1, k2 = jax.random.split(key)
        p0 = jax.nn.sigmoid(add_bias(v0 @ model.weights, model.hidden_bias))
        vk = (
            model.gibbs(k1, v0, int(cd_steps))
            if cd_steps > 1
            else model.sample_visible(k1, model.sample_hidden(k2, v0))
        )
        pk = jax.nn.sigmoid(add_bias(vk @ model.weights, model.hidden_bias))
        m = v0.shape[0]
        grad_w = (v0.T @ p0 - vk.T @ pk) / m - weight_decay * model.weights
        grad_b = jnp.mean(v0 - vk, axis=0)
        grad_c = jnp.mean(p0 - pk, axis=0)
        grads = _unchecked_rbm(grad_w, grad_b, grad_c)
        if natural_gradient:
            grads, metric = _natural(grads, metric, model, v0)
        model = jax.tree.map(lambda p, g: p + learning_rate * g, model, grads)
        return model, metric

    return _fit(rng_key, data, num_hidden, num_epochs=num_epochs, batch_size=batch_size,
                init_scale=init_scale, update=update,
                extra=lambda m: jax.tree.map(jnp.ones_like, m))  # fmt: skip


def mpf_objective(model: RBM, v):
    """Minimum probability flow's objective for an RBM with single-bit-flip connectivity
    ([SD12] ch. 2–3): the mean over the rows of ``v`` of Σ_i exp(½ [log p*(v with bit i
    flipped) − log p*(v)]), with log p* = −F the unnormalized visible marginal. Flipping bit i
    moves the hidden pre-activations by ±W_i, so all V flips of a batch cost one
    (batch, V, H) softplus; no partition function, no sampling."""
    sign = 1.0 - 2.0 * v  # +1 where bit i flips 0 → 1
    a = add_bias(v @ model.weights, model.hidden_bias)  # (batch, H)
    flipped = a[:, None, :] + sign[:, :, None] * model.weights[None, :, :]  # (batch, V, H)
    delta = sign * model.visible_bias[None, :] + jnp.sum(
        jax.nn.softplus(flipped) - jax.nn.softplus(a)[:, None, :], axis=-1
    )
    return jnp.mean(jnp.sum(jnp.exp(0.5 * delta), axis=1))


@float64
def fit_mpf_rbm(
    rng_key,
    data,
    num_hidden: int,
    *,
    num_epochs: int = 50,
    batch_size: int = 100,
    learning_rate: float = 0.05,
    momentum: float = 0.9,
    weight_decay: float = 1e-4,
    init_scale: float = 0.01,
    natural_gradient: bool = False,
) -> RBM:
    """Fit a binary RBM by minimum probability flow ([SD12] ch. 2–3) with single-bit-flip
    connectivity: minibatch gradient descent with momentum on :func:`mpf_objective` (plus
    ``weight_decay`` · ½ΣW²), gradients by autodiff. Same start and minibatches as
    :func:`fit_cd` (visible biases at the base rate, weights N(0, init_scale²)); one compiled
    scan over epochs and minibatches. Measure the result with :func:`ppl_hais.research.energy.
    log_partition` and :func:`mean_log_prob`, as for CD. ``natural_gradient=True``:
    as :func:`fit_cd`'s."""

    def loss(model, v):
        return mpf_objective(model, v) + 0.5 * weight_decay * jnp.sum(model.weights**2)

    grad = jax.grad(loss)

    def update(carry, v, key):
        del key
        model, (velocity, metric) = carry
        g = grad(model, v)
        if natural_gradient:
            g, metric = _natural(g, metric, model, v)
        velocity = jax.tree.map(lambda u, gi: momentum * u - learning_rate * gi, velocity, g)
        return jax.tree.map(lambda p, u: p + u, model, velocity), (velocity, metric)

    return _fit(rng_key, data, num_hidden, num_epochs=num_epochs, batch_size=batch_size,
                init_scale=init_scale, update=update,
                extra=lambda m: (jax.tree.map(jnp.zeros_like, m),
                                 jax.tree.map(jnp.ones_like, m)))  # fmt: skip


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
    x = check_binary(data, model.num_visible)
    field = x @ model.weights + model.hidden_bias
    return float(np.mean(x @ model.visible_bias + np.logaddexp(0.0, field).sum(1)) - log_z)


