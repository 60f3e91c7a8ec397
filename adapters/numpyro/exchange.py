"""``BoundedEnergyDist`` and the ``Exchange`` MCMC kernel for NumPyro (translation only).

The model's prior on θ comes from NumPyro (``initialize_model`` on the model with the bounded
site blocked); the update is :func:`ppl_hais.research.exchange.exchange_step`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions import constraints
from numpyro.distributions.distribution import (
    ExpandedDistribution,
    Independent,
    MaskedDistribution,
)
from numpyro.infer.initialization import init_to_sample
from numpyro.infer.util import initialize_model

from ppl_hais.research.exchange import (
    BoundedEnergy,
    RejectionBudgetError,
    adapt_log_scale,
    budget_message,
    exchange_step,
)

from ._chains import ModelKernel, first_chain, init_chains, phase_mean, split_init_key

__all__ = ["BoundedEnergyDist", "Exchange", "ExchangeState"]


class BoundedEnergyDist(dist.Distribution):
    """p(x | θ) = π(x) / (Z(θ)(1 + exp E(x; θ))) with an intractable Z(θ) ([Adams]).

    ``envelope`` π: the envelopes of :mod:`ppl_hais.research.exchange`, or any NumPyro distribution
    (its batch dimensions become event dimensions: one x is one draw of the whole envelope).
    Use with ``obs=`` — inside ``numpyro.plate`` (one datum per plate entry), or with data of
    shape (N,) + event shape — and sample θ with :class:`Exchange`. ``log_prob`` raises:
    without Z(θ) it cannot be normalized, and an unnormalized value would silently give
    gradient samplers (NUTS) a wrong posterior. ``sample`` draws exactly by rejection from the
    envelope, also under ``jit``/``vmap`` (``numpyro.infer.Predictive``): a spent budget
    raises :class:`~ppl_hais.RejectionBudgetError` (from compiled code, through a host
    callback).
    """

    arg_constraints = {}
    support = constraints.real_vector

    def __init__(self, energy_fn, envelope, theta, *, max_proposals=1_000_000, validate_args=None):
        if isinstance(envelope, dist.Distribution) and envelope.batch_shape:
            envelope = envelope.to_event(len(envelope.batch_shape))
        if not (hasattr(envelope, "sample") and hasattr(envelope, "log_prob")):
            raise TypeError(
                "envelope must have sample(key, sample_shape) and log_prob(x): a NumPyro "
                "distribution or an envelope of ppl_hais.research.exchange, got "
                f"{type(envelope).__name__}"
            )
        self.model = BoundedEnergy(energy_fn, envelope)
        self.theta = theta
        self.max_proposals = int(max_proposals)
        shape = jnp.shape(envelope.sample(jax.random.key(0), (1,)))[1:]
        super().__init__(batch_shape=(), event_shape=shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        n = 1
        for s in sample_shape:
            n *= s
        draws, used, filled = self.model.sample_with_status(
            key, self.theta, n, max_proposals=self.max_proposals
        )
        if isinstance(filled, jax.core.Tracer):  # jit / vmap (Predictive): check on the host
            jax.debug.callback(_raise_if_short, filled, n, used)
        elif int(filled) < n:
            raise RejectionBudgetError(budget_message(int(filled), n, int(used)))
        return draws.reshape(tuple(sample_shape) + self.event_shape)

    def log_prob_unnormalized(self, value):
        return self.model.log_prob_unnormalized(value.reshape((-1,) + self.event_shape), self.theta)

    def log_prob(self, value):
        raise NotImplementedError(
            "BoundedEnergyDist has an intractable normalizer Z(θ): sample θ with "
            "phn.Exchange (az.from_numpyro(mcmc, log_likelihood=False) for ArviZ)."
        )


def _raise_if_short(filled, needed, used):
    if int(np.min(filled)) < needed:
        raise RejectionBudgetError(budget_message(int(np.min(filled)), needed, int(np.max(used))))


def _unwrap(fn):
    """The BoundedEnergyDist inside a plate's expansion, ``.to_event`` or ``.mask``, and the
    mask that applies to its batch entries (None: all)."""
    mask = None
    while True:
        if isinstance(fn, MaskedDistribution):
            m = fn._mask
            mask = m if mask is None else mask & m
            fn = fn.base_dist
        elif isinstance(fn, ExpandedDistribution | Independent):
            fn = fn.base_dist
        else:
            return fn, mask


class ExchangeState(NamedTuple):
    i: Any
    z: Any
    theta_flat: Any
    accept_prob: Any
    mean_accept_prob: Any
    proposals_per_draw: Any
    log_scale: Any
    budget_exhausted: Any
    diverging: Any
    rng_key: Any


def _raise_if_exhausted(flag, per_draw, budget, num_data):
    if np.any(flag):
        raise RejectionBudgetError(
            f"phn.Exchange: the fantasy data of a proposed θ could not all be drawn within "
            f"max_proposals={int(budget):,} proposals for {int(num_data)} data "
            f"(at least {int(budget) // max(int(num_data), 1):,} proposals per datum needed; "
            "Z(θ) is too small there). Raise max_proposals, choose an envelope closer to the "
            "model, or pass approximate_sweeps=k for MCMC fantasies (approximate)."
        )


class Exchange(ModelKernel):
    """The exchange algorithm (Murray, Ghahramani & MacKay 2006) as a NumPyro ``MCMCKernel``.

    The model must have exactly one observed :class:`BoundedEnergyDist` site; every latent
    site is a parameter θ, updated jointly by a Gaussian random walk in NumPyro's
    unconstrained space (scale adapted toward ``target_accept_prob`` during warmup). Each move
    draws N exact fantasy data from p(· | θ') by rejection; a move whose rejection budget runs
    out stops the run with an error (never a silent partial draw). ``approximate_sweeps=k``
    replaces exact fantasies by k MCMC sweeps from the data (Gibbs for binary x, HMC for
    continuous x; *approximate*).

    Extra fields: ``accept_prob``, ``proposals_per_draw`` (≈ 1/Z(θ')), ``log_scale``.

    Example
    -------
    >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
    >>> from numpyro.infer import MCMC
    >>> from ppl_hais.adapters import numpyro as phn
    >>> from ppl_hais.research.exchange import GaussianEnvelope
    >>> def model(x):
    ...     theta = numpyro.sample("theta", dist.Normal(0.0, 2.0))
    ...     energy = lambda xi, th: th * jnp.sum(xi**2) - 1.0
    ...     numpyro.sample("x", phn.BoundedEnergyDist(energy, GaussianEnvelope(jnp.zeros(1)),
    ...                                               theta), obs=x)
    >>> mcmc = MCMC(phn.Exchange(model), num_warmup=100, num_samples=100, progress_bar=False)
    >>> mcmc.run(jax.random.key(0), jnp.ones((5, 1)))
    >>> mcmc.get_samples()["theta"].shape
    (100,)
    """

    sample_field = "z"

    def __init__(
        self,
        model,
        *,
        scale: float = 0.5,
        target_accept_prob: float = 0.3,
        max_proposals: int = 1_000_000,
        approximate_sweeps: int = 0,
        init_strategy=init_to_sample,
    ):
        self._model = model
        self._scale = float(scale)
        self._target = float(target_accept_prob)
        self._budget = int(max_proposals)
        self._sweeps = int(approximate_sweeps)
        self._init_strategy = init_strategy

    @property
    def default_fields(self):
        return ("z",)

    @property
    def approximate(self) -> bool:
        return self._sweeps > 0

    def get_diagnostics_str(self, state):
        return (
            f"acc. prob={float(state.mean_accept_prob):.2f}, "
            f"proposals/draw={float(state.proposals_per_draw):.3g}"
        )

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        batched, rng_key, key_model = split_init_key(rng_key)
        one_key = first_chain(key_model, batched)
        tr = handlers.trace(handlers.seed(self._model, one_key)).get_trace(
            *model_args, **model_kwargs
        )
        name, bounded, data = _energy_site(tr)
        bounded.model.check_data(data)
        prior_model = handlers.block(self._model, hide=[name])
        info = initialize_model(
            key_model, prior_model, init_strategy=self._init_strategy,
            model_args=model_args, model_kwargs=model_kwargs,
        )  # fmt: skip
        self._postprocess = info.postprocess_fn
        potential_fn = info.potential_fn
        params = info.param_info.z if init_params is None else init_params
        one = first_chain(params, batched)
        _, unravel = ravel_pytree(one)
        postprocess = info.postprocess_fn
        model = self._model

        def model_at(theta_flat):
            values = postprocess(unravel(theta_flat))
            t = handlers.trace(handlers.substitute(handlers.seed(model, 0), data=values))
            site = _unwrap(t.get_trace(*model_args, **model_kwargs)[name]["fn"])[0]
            return site.model, site.theta

        def log_prior(theta_flat):
            return -potential_fn(unravel(theta_flat))

        num_warmup = int(num_warmup)
        budget, sweeps, target = self._budget, self._sweeps, self._target

        def init_one(key, p):
            x = ravel_pytree(p)[0]
            zero = jnp.zeros((), x.dtype)
            return ExchangeState(
                jnp.zeros((), jnp.int32), unravel(x), x, zero, zero, zero,
                jnp.log(jnp.asarray(self._scale, x.dtype)), jnp.zeros((), bool),
                jnp.zeros((), bool), key,
            )  # fmt: skip

        def sample_one(state, model_args, model_kwargs):
            key, sub = jax.random.split(state.rng_key)
            theta, info = exchange_step(
                sub, state.theta_flat, log_prior, data, model_at, jnp.exp(state.log_scale),
                max_proposals=budget, approximate_sweeps=sweeps,
            )  # fmt: skip
            jax.debug.callback(
                _raise_if_exhausted, info.budget_exhausted, info.proposals_per_draw, budget,
                data.shape[0],
            )
            warm = state.i < num_warmup
            log_scale = jnp.where(
                warm,
                adapt_log_scale(state.log_scale, info.acceptance_rate, state.i, target),
                state.log_scale,
            )
            return ExchangeState(
                state.i + 1, unravel(theta), theta, info.acceptance_rate.astype(theta.dtype),
                phase_mean(state.i, num_warmup, state.mean_accept_prob, info.acceptance_rate),
                jnp.asarray(info.proposals_per_draw, theta.dtype), log_scale,
                info.budget_exhausted, jnp.zeros((), bool), key,
            )  # fmt: skip

        state, self._sample_fn = init_chains(init_one, sample_one, batched, rng_key, params)
        return state


def _energy_site(tr):
    """(name, distribution, observed data as rows) of the one observed BoundedEnergyDist site of
    a model's trace: masked-out entries are not data; a latent discrete site is refused."""
    sites = [
        n for n, s in tr.items()
        if s["type"] == "sample" and s["is_observed"]
        and isinstance(_unwrap(s["fn"])[0], BoundedEnergyDist)
    ]  # fmt: skip
    if len(sites) != 1:
        raise ValueError(
            "phn.Exchange needs exactly one observed BoundedEnergyDist site (it may sit "
            f"in plates, be masked or .to_event'ed), found {len(sites)}"
        )
    name = sites[0]
    for n, s in tr.items():
        if s["type"] == "sample" and not s["is_observed"] and s["fn"].support.is_discrete:
            raise ValueError(f"latent site '{n}' is discrete: Exchange needs continuous θ")
    bounded, mask = _unwrap(tr[name]["fn"])
    event = tuple(bounded.event_shape)
    value = jnp.asarray(tr[name]["value"])
    batch = value.shape[: value.ndim - len(event)]
    data = value.reshape((-1,) + event)
    if mask is not None:  # masked-out data are not data: keep the observed entries only
        keep = np.broadcast_to(np.asarray(mask, bool), batch).reshape(-1)
        data = data[keep]
    if data.shape[0] == 0:
        raise ValueError(f"site '{name}' has no observed (unmasked) data")
    return name, bounded, data
