"""Sigmoid belief networks (Neal 1992) with one hidden layer: the model, its exact likelihood by
enumeration, AIS over its binary latents, and training by reweighted wake-sleep with or without
adaptive importance refinement (Hjelm et al. 2016, the paper :mod:`ppl_hais.research.refinement`
implements).

    h_j ~ Bernoulli(σ(c_j)),   x_i | h ~ Bernoulli(σ(Σ_j W_ij h_j + b_i))

A recognition network q(h | x) = Π_j Bernoulli(σ(R (x − x̄) + d)_j) proposes the latents.

* :func:`log_likelihood` estimates log p(x) per datum by AIS from q(h | x) to p(h | x) ∝
  p(x, h) along the geometric path, moving the particles by Gibbs sweeps over the hidden units
  (each unit's conditional in closed form, the activations W h + b updated one column at a time);
  ``num_steps=0`` is plain importance sampling from q (the importance-weighted bound of
  Burda et al. 2015). Per-datum Pareto k̂ and ESS run through the evidence checks.
* :func:`log_marginal_exact` sums over all 2^H hidden states (H ≤ 24).
* :func:`fit` trains the network and its recognition model: reweighted wake-sleep (RWS,
  Bornschein & Bengio 2015; ``refine_steps=0``) or AIR (Hjelm et al.: q refined per datum
  before each update, the model's gradient from the refined q's weighted draws, the
  recognition network pulled toward the refined means).

Example
-------
>>> import jax, numpy as np, ppl_hais as ph
>>> rng = np.random.default_rng(0)
>>> net = ph.research.sbn.SBN(rng.normal(size=(6, 3)), rng.normal(size=6), rng.normal(size=3))
>>> x = np.asarray(net.sample(jax.random.key(1), 4))
>>> est = ph.research.sbn.log_likelihood(jax.random.key(2), net, x, num_particles=64, num_steps=100)
>>> exact = ph.research.sbn.log_marginal_exact(net, x)
>>> bool(np.all(np.abs(est.per_datum - exact) < 5 * est.per_datum_se + 0.02))
True
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..runtime.precision import float64
from .likelihood import per_datum_estimate
from .refinement import Bernoulli, refine_traced

__all__ = ["SBN", "Recognition", "log_joint", "log_marginal_exact", "log_likelihood", "fit"]

MAX_ENUMERATED = 24


class SBN(NamedTuple):
    """A one-hidden-layer sigmoid belief network: ``weights`` (V, H), ``visible_bias`` (V,),
    ``hidden_bias`` (H,)."""

    weights: jax.Array
    visible_bias: jax.Array
    hidden_bias: jax.Array

    @property
    def num_hidden(self) -> int:
        return int(np.shape(self.hidden_bias)[0])

    def sample(self, rng_key, num: int):
        """``num`` visible vectors drawn ancestrally (h from the prior, then x | h)."""
        k1, k2 = jax.random.split(rng_key)
        prior = jax.nn.sigmoid(jnp.asarray(self.hidden_bias))
        h = jax.random.bernoulli(k1, jnp.broadcast_to(prior, (num, self.num_hidden)))
        return jax.random.bernoulli(k2, jax.nn.sigmoid(_activations(self, h))).astype(float)


class Recognition(NamedTuple):
    """q(h | x) = Bernoulli(σ(weights (x − center) + bias)): ``weights`` (H, V)."""

    weights: jax.Array
    bias: jax.Array
    center: jax.Array

    def proposal(self, data) -> Bernoulli:
        """The factorized proposals for each row of ``data``, as :func:`ppl_hais.refine` takes."""
        x = jnp.asarray(data)
        logits = (x - jnp.broadcast_to(jnp.asarray(self.center), x.shape)) @ jnp.asarray(
            self.weights
        ).T
        bias = jnp.broadcast_to(jnp.asarray(self.bias), logits.shape)
        return Bernoulli(jax.nn.sigmoid(logits + bias))


def _log_bernoulli(x, logits):
    shape = jnp.broadcast_shapes(jnp.shape(x), jnp.shape(logits))
    x, logits = jnp.broadcast_to(x, shape), jnp.broadcast_to(logits, shape)
    return jnp.sum(x * logits - jax.nn.softplus(logits), axis=-1)


def _activations(net, h):
    """W h + b for h (..., H)."""
    a = h @ jnp.asarray(net.weights).T
    return a + jnp.broadcast_to(jnp.asarray(net.visible_bias), a.shape)


def log_joint(net: SBN, h, x):
    """log p(x, h) (h and x may carry leading batch axes)."""
    return _log_bernoulli(h, jnp.asarray(net.hidden_bias)) + _log_bernoulli(x, _activations(net, h))


@float64
def log_marginal_exact(net: SBN, data) -> np.ndarray:
    """log p(x) for each row of ``data`` by summing p(x, h) over all 2^H hidden states."""
    num_hidden = net.num_hidden
    if num_hidden > MAX_ENUMERATED:
        raise ValueError(f"{num_hidden} hidden units: 2^{num_hidden} states are too many to sum")
    data = jnp.asarray(data, float)
    block = min(num_hidden, 14)
    low = jnp.asarray((np.arange(2**block)[:, None] >> np.arange(block)) & 1, float)

    @jax.jit
    def chunk(high_bits):
        high = jnp.broadcast_to(high_bits, (low.shape[0], num_hidden - block))
        states = jnp.concatenate([low, high], axis=1)
        lj = jax.vmap(lambda x: log_joint(net, states, x))(data)  # (N, 2^block)
        return jax.scipy.special.logsumexp(lj, axis=1)

    parts = [
        chunk(jnp.asarray((i >> np.arange(num_hidden - block)) & 1, float))
        for i in range(2 ** (num_hidden - block))
    ]
    return np.asarray(jax.scipy.special.logsumexp(jnp.stack(parts), axis=0))


def _gibbs_sweep(key, net, x, h, a, sp, beta, logit_q):
    """One sweep over the hidden units at β, keeping the activations a = W h + b and their
    softplus current (one softplus per unit and particle: the other state's activations)."""
    w, c = jnp.asarray(net.weights), jnp.asarray(net.hidden_bias)
    u = jax.random.uniform(key, h.shape, dtype=a.dtype)

    def unit(state, column):  # a scan over the units: no dynamic indexing
        a, sp = state
        w_j, c_j, logit_q_j, u_j, h_j = column
        sign = 1 - 2 * h_j  # +1: the other state switches unit j on
        other = a + sign[:, None] * w_j[None, :]
        sp_other = jax.nn.softplus(other)
        # log p(x | h_j = 1) − log p(x | h_j = 0)
        gain = jnp.dot(x, w_j) - sign * jnp.sum(sp_other - sp, axis=-1)
        logit = (1 - beta) * logit_q_j + beta * (c_j + gain)
        new = (u_j < jax.nn.sigmoid(logit)).astype(a.dtype)
        moved = (new != h_j)[:, None]
        return (jnp.where(moved, other, a), jnp.where(moved, sp_other, sp)), new

    (a, sp), h = jax.lax.scan(unit, (a, sp), (w.T, c, logit_q, u.T, h.T))
    return h.T, a, sp


def _ais_one(key, net, x, probs, betas, num_particles):
    q = Bernoulli(probs)
    logit_q = jnp.log(probs) - jnp.log1p(-probs)
    k0, k1 = jax.random.split(key)
    h = q.sample(k0, (num_particles,))
    a = _activations(net, h)
    prior_logit = jnp.asarray(net.hidden_bias)

    def log_ratio(h, a, sp):
        log_px = jnp.sum(jnp.broadcast_to(x, a.shape) * a - sp, axis=-1)
        return _log_bernoulli(h, prior_logit) + log_px - q.log_prob(h)

    def step(carry, inputs):
        h, a, sp, log_w = carry
        key, b_prev, b = inputs
        log_w = log_w + (b - b_prev) * log_ratio(h, a, sp)
        h, a, sp = _gibbs_sweep(key, net, x, h, a, sp, b, logit_q)
        return (h, a, sp, log_w), None

    sp = jax.nn.softplus(a)
    if betas.shape[0] == 1:  # plain importance sampling from q
        return log_ratio(h, a, sp)
    keys = jax.random.split(k1, betas.shape[0] - 1)
    log_w0 = jnp.zeros(num_particles, a.dtype)
    carry, _ = jax.lax.scan(step, (h, a, sp, log_w0), (keys, betas[:-1], betas[1:]))
    return carry[3]


@float64
def log_likelihood(rng_key, net: SBN, data, q: Bernoulli | None = None, *,
                   num_particles: int = 100, num_steps: int = 1000):  # fmt: skip
    """log p(x) of each datum by AIS from ``q`` (a :class:`~ppl_hais.research.refinement.Bernoulli`
    with one row per datum: a recognition network's :meth:`Recognition.proposal`, refined or
    not; default the prior) to the posterior, ``num_steps`` temperatures with one Gibbs sweep
    each (0: importance sampling from q).

    Returns a :class:`~ppl_hais.LogLikelihoodEstimate` whose ``details`` hold the per-datum
    log weights, Pareto k̂ and ESS; failed checks raise an ``EvidenceWarning``.
    """
    data = jnp.asarray(data, float)
    if q is None:
        q = Bernoulli(jnp.broadcast_to(jax.nn.sigmoid(jnp.asarray(net.hidden_bias)),
                                       (data.shape[0], net.num_hidden)))  # fmt: skip
    probs = jnp.clip(jnp.asarray(q.probs, float), 1e-6, 1 - 1e-6)
    if probs.shape != (data.shape[0], net.num_hidden):
        raise ValueError(f"q.probs must have shape {(data.shape[0], net.num_hidden)}, "
                         f"got {tuple(probs.shape)}")  # fmt: skip
    betas = jnp.linspace(0.0, 1.0, int(num_steps) + 1) if num_steps > 0 else jnp.ones(1)
    keys = jax.random.split(rng_key, data.shape[0])
    run = jax.jit(jax.vmap(lambda k, x, p: _ais_one(k, net, x, p, betas, int(num_particles))))
    log_w = np.asarray(run(keys, data, probs))
    remedy = "more temperatures (num_steps), more particles, or a refined q (ph.refine)"
    return per_datum_estimate(log_w, remedy=remedy)


def _grads(net, rec, x, key, num_samples, refine_steps, damping, reweight):
    """Per-datum gradient of the model (ascent) and of the recognition network (ascent)."""
    q0 = rec.proposal(x[None, :])
    if refine_steps:
        q = refine_traced(key, lambda h: log_joint(net, h, x), q0, refine_steps, num_samples,
                          damping)[0]  # fmt: skip
        q = Bernoulli(q.probs[0])
    else:
        q = Bernoulli(q0.probs[0])
    h = q.sample(jax.random.fold_in(key, 1), num_samples)
    log_w = log_joint(net, h, x) - q.log_prob(h)
    # RWS and AIR+RW: self-normalized weights (Eq. 4); vanilla AIR: the refined q's draws as if
    # they were posterior draws (Eq. 2)
    uniform = jnp.full(num_samples, 1.0 / num_samples)
    weights = uniform if refine_steps and not reweight else jax.nn.softmax(log_w)
    g_net = jax.grad(lambda n: jnp.sum(weights * log_joint(n, h, x)))(net)
    if refine_steps:  # pull q0 toward the refined means (cross-entropy, closed form)
        target = q.probs
        g_rec = jax.grad(
            lambda r: jnp.sum(target * jnp.log(r.proposal(x[None, :]).probs[0])
                              + (1 - target) * jnp.log1p(-r.proposal(x[None, :]).probs[0]))
        )(rec)  # fmt: skip
    else:  # wake-phase q update: Σ W ∇ log q(h | x)
        g_rec = jax.grad(lambda r: jnp.sum(weights * r.proposal(x[None, :]).log_prob(h)))(rec)
    return g_net, g_rec._replace(center=jnp.zeros_like(rec.center)), log_w


@float64
def fit(rng_key, train, num_hidden: int, *, num_epochs: int = 50, batch_size: int = 50,
        learning_rate: float = 3e-3, num_samples: int = 10, refine_steps: int = 0,
        damping: float = 0.1, reweight: bool = True):  # fmt: skip
    """Train an SBN and its recognition network on binary ``train`` (N, V) by Adam.

    ``refine_steps=0``: reweighted wake-sleep with ``num_samples`` draws per datum.
    ``refine_steps=K``: AIR(K), each datum's q refined K steps (``num_samples`` draws each,
    damping γ) before the update; the model's gradient weights the refined q's draws by
    p(x, h)/q(h) (the paper's AIR+RW; ``reweight=False``: its unweighted "vanilla" AIR, which
    measured 0.6 nats worse on the digits, docs/refinement.md), and the recognition network
    is pulled toward the refined means. Returns ``(net, recognition, history)``, ``history`` the
    mean log weight of each epoch's draws (a lower bound on the training log likelihood).
    """
    train = jnp.asarray(train, float)
    num_data, num_visible = train.shape
    k_init, k_run = jax.random.split(rng_key)
    mean = jnp.clip(train.mean(0), 1e-3, 1 - 1e-3)
    net = SBN(0.01 * jax.random.normal(k_init, (num_visible, num_hidden)),
              jnp.log(mean) - jnp.log1p(-mean), jnp.zeros(num_hidden))  # fmt: skip
    rec = Recognition(jnp.zeros((num_hidden, num_visible)), jnp.zeros(num_hidden), train.mean(0))
    params = (net, rec)
    zeros = jax.tree.map(jnp.zeros_like, params)
    state = (zeros, zeros)
    num_batches = num_data // batch_size

    def batch_step(carry, inputs):
        params, (m, v), t = carry
        key, idx = inputs
        keys = jax.random.split(key, batch_size)
        g_net, g_rec, log_w = jax.vmap(
            lambda k, x: _grads(*params, x, k, num_samples, refine_steps, damping, reweight)
        )(keys, train[idx])
        grad = jax.tree.map(lambda g: jnp.mean(g, axis=0), (g_net, g_rec))
        t = t + 1
        m = jax.tree.map(lambda a, g: 0.9 * a + 0.1 * g, m, grad)
        v = jax.tree.map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grad)
        params = jax.tree.map(
            lambda p, a, b: p + learning_rate * (a / (1 - 0.9**t))
            / (jnp.sqrt(b / (1 - 0.999**t)) + 1e-8), params, m, v,
        )  # fmt: skip
        bound = jnp.mean(jax.scipy.special.logsumexp(log_w, axis=1) - jnp.log(num_samples))
        return (params, (m, v), t), bound

    @jax.jit
    def epoch(carry, key):
        k_perm, k_steps = jax.random.split(key)
        order = jax.random.permutation(k_perm, num_data)[: num_batches * batch_size]
        idx = order.reshape(num_batches, batch_size)
        keys = jax.random.split(k_steps, num_batches)
        carry, bounds = jax.lax.scan(batch_step, carry, (keys, idx))
        return carry, jnp.mean(bounds)

    carry, history = (params, state, jnp.zeros((), float)), []
    for key in jax.random.split(k_run, num_epochs):
        carry, bound = epoch(carry, key)
        history.append(float(bound))
    net, rec = carry[0]
    return net, rec, np.asarray(history)
