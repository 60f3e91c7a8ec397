"""Exchange sampling for doubly-intractable posteriors with bounded partition functions ([Adams]).

The model p(x | θ) = π(x) σ(−E(x; θ)) / Z(θ), with σ the logistic function and π an envelope
that is easy to sample: since 0 < σ(−E) < 1, rejection from π gives exact draws, and
Z(θ) = E_π[σ(−E(x; θ))] ∈ (0, 1] is the acceptance rate. The exchange algorithm (Murray,
Ghahramani & MacKay 2006) then samples θ from p(θ | x₁…x_N) without Z(θ): propose θ', draw N
fantasy data w ~ p(· | θ'), and accept with ([Adams], "Baby and Toy")

    a = q(θ ← θ') p(θ') / (q(θ' ← θ) p(θ))
        · Π_n σ(−E(x_n; θ')) σ(−E(w_n; θ)) / (σ(−E(x_n; θ)) σ(−E(w_n; θ'))),

computed in log space with log σ(−E) = −softplus(E). Rejection sampling costs 1/Z(θ)
proposals per draw, which grows exponentially with the dimension of x ([Adams]): every sampler
here has a proposal budget and fails with :class:`RejectionBudgetError` when it is spent.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> envelope = ph.research.exchange.GaussianEnvelope(jnp.zeros(2))
>>> model = ph.BoundedEnergy(lambda x, th: th * jnp.sum(x), envelope)
>>> draws, used = model.sample(jax.random.key(0), 1.0, 100)
>>> draws.shape
(100, 2)
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import mcmc
from ..runtime.progress import QUIET_CALLBACK_ERRORS, close_bar, open_run, pace
from .envelopes import BernoulliEnvelope, GaussianEnvelope, UniformEnvelope

__all__ = [
    "BernoulliEnvelope",
    "BoundedEnergy",
    "ExchangeInfo",
    "GaussianEnvelope",
    "RejectionBudgetError",
    "UniformEnvelope",
    "budget_errors",
    "exchange_step",
    "gibbs_fantasy",
    "hmc_fantasy",
]


class RejectionBudgetError(RuntimeError):
    """Exact sampling by rejection ran out of proposals."""


QUIET_CALLBACK_ERRORS.append(RejectionBudgetError)  # raised from callbacks on purpose


@contextlib.contextmanager
def budget_errors():
    """Raise a spent rejection budget as :class:`RejectionBudgetError` from compiled code too.

    Inside a compiled loop the library does not own (NumPyro's ``MCMC``, ``Predictive``), a
    spent budget is raised from a host callback, and JAX re-raises every callback error as
    its own ``JaxRuntimeError`` (ours only as the text at its end, not chained). Within this
    context such an error comes out as ``RejectionBudgetError`` with our message (the JAX
    error as its ``__cause__``); every other error passes unchanged.

    Example
    -------
    >>> import jax, ppl_hais as ph
    >>> with ph.research.exchange.budget_errors():   # around mcmc.run(...) or Predictive(...)(...)
    ...     pass
    """
    try:
        yield
    except jax.errors.JaxRuntimeError as err:
        marker = f"{RejectionBudgetError.__name__}: "
        text = str(err)
        if marker not in text:
            raise
        raise RejectionBudgetError(text.rsplit(marker, 1)[1].strip()) from err


def budget_message(accepted, needed, proposals):
    rate = accepted / max(proposals, 1)
    return (
        f"rejection sampling spent its budget of {proposals} proposals and produced only "
        f"{accepted} of {needed} exact draws (acceptance rate {rate:.3g} = Z(θ), so about "
        f"{1 / max(rate, 1e-300):.3g} proposals per draw). Rejection from the envelope is "
        "exponentially inefficient as the dimension of x grows ([Adams]): raise max_proposals, "
        "choose an envelope closer to the model, or use the approximate (MCMC fantasy) mode."
    )


# ---------------------------------------------------------------------------- the model
@dataclass(frozen=True, eq=False)
class BoundedEnergy:
    """p(x | θ) = π(x) / (Z(θ) (1 + exp E(x; θ))), sampled exactly by rejection from π.

    Parameters
    ----------
    energy_fn : callable
        ``energy_fn(x, theta) -> scalar`` for one x of the envelope's event shape.
    envelope : distribution
        Has ``sample(key, sample_shape)`` and ``log_prob(x)`` (the envelopes here, or any
        NumPyro distribution).
    """

    energy_fn: Any
    envelope: Any

    def log_factor(self, x, theta):
        """log σ(−E(x; θ)) = −softplus(E) per datum (x has a leading batch axis)."""
        return -jax.nn.softplus(jax.vmap(lambda xi: self.energy_fn(xi, theta))(x))

    def log_prob_unnormalized(self, x, theta):
        """log π(x) + log σ(−E(x; θ)): log p(x | θ) + log Z(θ), per datum."""
        return self.envelope.log_prob(x) + self.log_factor(x, theta)

    def check_data(self, data):
        """Refuse data outside the envelope's support: p(x | θ) is 0 there for every θ, so no
        exchange chain could explain them (and rejection never proposes them)."""
        with warnings.catch_warnings():  # NumPyro's out-of-support note: the error says it
            warnings.simplefilter("ignore", UserWarning)
            log_pi = np.asarray(self.envelope.log_prob(jnp.asarray(data)))
        bad = int(np.sum(~np.isfinite(log_pi)))
        if bad:
            raise ValueError(
                f"{bad} of {data.shape[0]} observed data lie outside the envelope's support "
                "(log π(x) is not finite there): p(x | θ) = π(x)σ(−E)/Z(θ) is 0 at them. Choose "
                "an envelope whose support covers the data."
            )

    def sample(self, rng_key, theta, num: int, *, max_proposals: int = 1_000_000,
               batch_size=None):  # fmt: skip
        """``num`` exact draws; returns ``(draws, proposals_used)``.

        Raises :class:`RejectionBudgetError` when ``max_proposals`` are spent first. Under
        ``jit`` use :meth:`sample_with_status` and check its status.
        """
        draws, used, filled = self.sample_with_status(
            rng_key, theta, num, max_proposals=max_proposals, batch_size=batch_size
        )
        if int(filled) < num:
            raise RejectionBudgetError(budget_message(int(filled), num, int(used)))
        return draws, used

    def sample_with_status(self, rng_key, theta, num: int, *, max_proposals=1_000_000,
                           batch_size=None):  # fmt: skip
        """Jittable rejection sampler: ``(draws, proposals_used, number_filled)``.

        Proposals come in batches; the count stops at the proposal that completed the last
        draw, so ``proposals_used / num`` estimates 1/Z(θ). Rows past ``number_filled`` are
        undefined when the budget ran out.
        """
        num = int(num)
        batch = int(batch_size or max(2 * num, 256))
        proto = self.envelope.sample(jax.random.key(0), (1,))
        out0 = jnp.zeros((num,) + proto.shape[1:], proto.dtype)

        def cond(c):
            _, _, filled, used = c
            return (filled < num) & (used < max_proposals)

        def body(c):
            key, out, filled, used = c
            key, k_x, k_u = jax.random.split(key, 3)
            x = self.envelope.sample(k_x, (batch,))
            log_u = jnp.log(jax.random.uniform(k_u, (batch,), minval=1e-300))
            accept = log_u < self.log_factor(x, theta)
            rank = filled + jnp.cumsum(accept) - 1
            idx = jnp.where(accept & (rank < num), rank, num)
            out = out.at[idx].set(x, mode="drop")
            needed = num - filled
            total = jnp.cumsum(accept)
            done_here = total[-1] >= needed
            used_here = jnp.where(done_here, jnp.argmax(total >= needed) + 1, batch)
            filled = jnp.minimum(filled + total[-1], num).astype(jnp.int32)
            return key, out, filled, (used + used_here).astype(jnp.int32)

        _, out, filled, used = jax.lax.while_loop(
            cond, body, (rng_key, out0, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
        )
        return out, used, filled

    def partition_function(self, rng_key, theta, num: int = 100_000):
        """Monte Carlo Z(θ) = E_π[σ(−E)] (the rejection sampler's acceptance rate)."""
        x = self.envelope.sample(rng_key, (num,))
        return jnp.mean(jnp.exp(self.log_factor(x, theta)))


# ---------------------------------------------------------------------------- approximate mode
def gibbs_fantasy(rng_key, model: BoundedEnergy, theta, start, num_sweeps: int):
    """Approximate fantasy data for binary x: ``num_sweeps`` single-site Gibbs sweeps of
    p(x | θ) from ``start`` (N, D). Not exact: an exchange chain using it is approximate."""
    D = start.shape[-1]

    def site(x, args):
        key, d = args
        x1, x0 = x.at[:, d].set(1.0), x.at[:, d].set(0.0)
        logit = model.log_prob_unnormalized(x1, theta) - model.log_prob_unnormalized(x0, theta)
        bit = jax.random.uniform(key, (x.shape[0],)) < jax.nn.sigmoid(logit)
        return x.at[:, d].set(bit.astype(x.dtype)), None

    keys = jax.random.split(rng_key, num_sweeps * D)
    sites = jnp.tile(jnp.arange(D), num_sweeps)
    x, _ = jax.lax.scan(site, start, (keys, sites))
    return x


def hmc_fantasy(rng_key, model: BoundedEnergy, theta, start, num_sweeps: int,
                num_leapfrog: int = 8):  # fmt: skip
    """Approximate fantasy data for continuous x: ``num_sweeps`` HMC transitions (full momentum
    refresh, ``num_leapfrog`` steps) of p(x | θ) per datum from ``start`` (N, D). The step size
    is a fixed fraction of the envelope's scale (Gaussian or uniform box). Not exact: an
    exchange chain using it is approximate."""
    env = model.envelope
    if isinstance(env, GaussianEnvelope):
        step = 0.25 * jnp.min(jnp.asarray(env.scale, start.dtype))
    elif isinstance(env, UniformEnvelope):
        step = 0.05 * jnp.min(jnp.asarray(env.upper, start.dtype) - jnp.asarray(env.lower))
    else:
        raise ValueError(
            "the approximate mode needs a Bernoulli envelope (Gibbs) or a Gaussian/uniform one "
            f"(HMC, step size from its scale); got {type(env).__name__}"
        )
    kernel = mcmc.build_kernel(num_leapfrog=num_leapfrog, lookahead=1, flips="standard")

    def logp(x):
        return model.log_prob_unnormalized(x[None], theta)[0]

    def one(key, x0):
        k_init, k_run = jax.random.split(key)
        state = mcmc.init(x0, logp, k_init)

        def sweep(state, k):
            return kernel(k, state, logp, step, refresh=1.0)[0], None

        state, _ = jax.lax.scan(sweep, state, jax.random.split(k_run, num_sweeps))
        return state.position

    return jax.vmap(one)(jax.random.split(rng_key, start.shape[0]), start)


# ---------------------------------------------------------------------------- the transition
class ExchangeInfo(NamedTuple):
    acceptance_rate: Any
    is_accepted: Any
    proposals_per_draw: Any  # rejection proposals per exact fantasy datum (≈ 1/Z(θ'))
    budget_exhausted: Any  # True: the move used incomplete fantasy data (a run must fail)


def exchange_step(
    key,
    theta,
    log_prior,
    data,
    model_at,
    scale,
    *,
    max_proposals: int = 1_000_000,
    approximate_sweeps: int = 0,
):
    """One exchange update of the flat parameter vector ``theta``.

    ``log_prior(theta)`` is the prior log density (with Jacobians in an unconstrained space);
    ``model_at(theta) -> (BoundedEnergy, theta_model)`` gives the model and the parameter the
    energy takes. Symmetric Gaussian random-walk proposal with per-coordinate ``scale``.
    ``approximate_sweeps > 0`` draws the fantasy data by MCMC started at the observed data
    instead of exactly (Gibbs sweeps for a Bernoulli envelope, HMC transitions for a Gaussian or
    uniform one; approximate).
    """
    k_prop, k_fant, k_acc = jax.random.split(key, 3)
    proposal = theta + scale * jax.random.normal(k_prop, theta.shape, theta.dtype)
    model, th = model_at(theta)
    _, th_new = model_at(proposal)
    n = data.shape[0]
    if approximate_sweeps > 0:
        fantasy_fn = gibbs_fantasy if isinstance(model.envelope, BernoulliEnvelope) else hmc_fantasy
        fantasy = fantasy_fn(k_fant, model, th_new, data, approximate_sweeps)
        used, filled = jnp.zeros((), jnp.int32), jnp.asarray(n, jnp.int32)
    else:
        fantasy, used, filled = model.sample_with_status(
            k_fant, th_new, n, max_proposals=max_proposals
        )
    log_a = (
        log_prior(proposal)
        - log_prior(theta)
        + jnp.sum(model.log_factor(data, th_new) - model.log_factor(data, th))
        + jnp.sum(model.log_factor(fantasy, th) - model.log_factor(fantasy, th_new))
    )
    exhausted = filled < n
    log_a = jnp.where(jnp.isnan(log_a) | exhausted, -jnp.inf, log_a)
    accept = jnp.log(jax.random.uniform(k_acc, (), theta.dtype)) < log_a
    info = ExchangeInfo(jnp.exp(jnp.minimum(log_a, 0.0)), accept, used / n, exhausted)
    return jnp.where(accept, proposal, theta), info


def adapt_log_scale(log_scale, acceptance, t, target=0.3):
    """Robbins–Monro on the log proposal scale toward ``target`` acceptance (warmup only)."""
    return log_scale + (acceptance - target) / jnp.sqrt(t + 1.0)


def sample(
    key,
    model: BoundedEnergy,
    data,
    log_prior,
    theta0,
    *,
    num_warmup: int = 500,
    num_samples: int = 2000,
    scale: float = 0.5,
    max_proposals: int = 1_000_000,
    approximate_sweeps: int = 0,
    progress_bar: bool = False,
    desc: str = "exchange",
):
    """A single exchange chain over flat θ (the model takes θ as it is); returns
    ``(samples (num_samples, dim), stats dict)``. Raises :class:`RejectionBudgetError`
    when any fantasy draw ran out of proposals. ``progress_bar``: a tqdm bar over the
    warm-up and sampling steps, labelled ``desc``."""
    theta0 = jnp.atleast_1d(jnp.asarray(theta0, jnp.result_type(float)))
    data = jnp.asarray(data)

    def model_at(th):
        return model, (th[0] if theta0.shape[0] == 1 else th)

    def lp(th):
        return log_prior(th[0] if theta0.shape[0] == 1 else th)

    total = num_warmup + num_samples
    @jax.jit
    def run(key, run_id):
        def step(carry, i):
            theta, log_scale, bad, due = carry
            if progress_bar:  # ticks paced by time
                due = pace(run_id, i, due)
            theta, info = exchange_step(
                jax.random.fold_in(key, i), theta, lp, data, model_at, jnp.exp(log_scale),
                max_proposals=max_proposals, approximate_sweeps=approximate_sweeps,
            )  # fmt: skip
            log_scale = jnp.where(
                i < num_warmup, adapt_log_scale(log_scale, info.acceptance_rate, i), log_scale
            )
            return (theta, log_scale, bad | info.budget_exhausted, due), (theta, info)

        carry = (
            theta0, jnp.log(jnp.asarray(scale, theta0.dtype)), jnp.zeros((), bool),
            jnp.zeros((), jnp.int32),
        )  # fmt: skip
        return jax.lax.scan(step, carry, jnp.arange(num_warmup + num_samples))

    run_id = open_run(total, desc, bar=progress_bar)
    done = False
    try:
        (theta, log_scale, bad, _), (thetas, info) = run(key, run_id)
        done = True
    finally:
        close_bar(run_id, complete=done)
    info = jax.tree.map(lambda a: np.asarray(a[num_warmup:]), info)
    if bool(bad):
        raise RejectionBudgetError(
            "an exchange move ran out of rejection proposals; "
            f"mean proposals per exact draw so far: {float(np.mean(info.proposals_per_draw)):.3g}. "
            + budget_message(0, 1, max_proposals)
        )
    stats = dict(info._asdict(), scale=float(np.exp(log_scale)), approximate=approximate_sweeps > 0)
    return np.asarray(thetas[num_warmup:]), stats
