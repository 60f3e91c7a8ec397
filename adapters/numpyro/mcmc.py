"""``ReducedFlipHMC``: the core's reduced-flip / look-ahead HMC as a NumPyro ``MCMCKernel``.

Only translation lives here: the model becomes a flat log density through NumPyro's own
``initialize_model``; the transition is :func:`ppl_hais.mcmc.build_kernel` and the warmup
:mod:`ppl_hais.mcmc.adaptation`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer.util import init_to_uniform, initialize_model
from numpyro.util import is_prng_key

from ppl_hais.mcmc import ReducedFlipState, build_kernel, find_reasonable_step_size
from ppl_hais.mcmc import init as core_init
from ppl_hais.mcmc.adaptation import (
    AdaptationState,
    adaptation_init,
    adaptation_schedule,
    adaptation_update,
    damping_refresh,
    max_eigenvalue,
)
from ppl_hais.mcmc.kernel import resolve_uniform
from ppl_hais.mcmc.sampler import MIN_CHAINS_FOR_DAMPING

from ._chains import ModelKernel, first_chain, init_chains, phase_mean, split_init_key

__all__ = ["ReducedFlipHMC", "ReducedFlipHMCState"]


class ReducedFlipHMCState(NamedTuple):
    """NumPyro-facing state; every field can be requested with ``extra_fields``."""

    i: Any
    z: Any  # unconstrained sample (the sample field)
    potential_energy: Any
    core: ReducedFlipState
    step_size: Any
    accept_prob: Any
    mean_accept_prob: Any
    is_flipped: Any
    lookahead_depth: Any
    num_steps: Any  # gradient evaluations of this transition (NumPyro's name for HMC's count)
    diverging: Any
    adapt_state: AdaptationState
    refresh: Any  # momentum power replaced per unit time in this transition
    log_max_eigenvalue: Any  # running estimate over the chains (refresh="auto")
    rng_key: Any


def _refuse_discrete(model_trace):
    for name, site in model_trace.items():
        if site["type"] == "sample" and not site["is_observed"] and site["fn"].support.is_discrete:
            raise ValueError(
                f"latent site '{name}' is discrete: ReducedFlipHMC needs continuous latent "
                "variables. Marginalize it (numpyro.contrib.funsor) or use "
                "numpyro.infer.MixedHMC / DiscreteHMCGibbs."
            )


class ReducedFlipHMC(ModelKernel):
    """HMC with persistent momentum and reduced momentum flips ([SD12] ch. 6; LAHMC).

    Each transition partially refreshes the momentum, then leaps along one of up to
    ``lookahead`` trajectories of ``num_steps`` leapfrog steps; after a rejection the
    momentum is negated only as often as invariance requires (``flips="reduced"``) or always
    (``flips="standard"``). With one trajectory the accept/reject uniform is Neal's (2020)
    persistent one (``uniform``). Warmup adapts the step size (dual averaging to
    ``target_accept_prob``) and a diagonal mass matrix, as NumPyro's HMC does, and with
    ``refresh="auto"`` the refresh by MEADS's damping rule from the spread of the chains
    (``chain_method="vectorized"`` with 4 or more chains; otherwise ½). Under NumPyro's
    ``MCMC`` every chain makes one transition per step, so a vectorized batch waits for
    its slowest chain: :func:`ppl_hais.mcmc.sample` (or PyMC's front end) lets each chain
    work through its own transitions.

    Parameters
    ----------
    model, potential_fn : callable
        Exactly one of the two, as for :class:`numpyro.infer.HMC`.
    step_size : float
        Initial step size (adapted during warmup unless ``adapt_step_size=False``).
    num_steps : int
        Leapfrog steps per trajectory (default 1, as in [SD12] §6.1.3).
    refresh : float or "auto"
        Fraction of the momentum power replaced per unit simulated time ([SD12]: ½), or
        MEADS's damping rule adapted in warmup.
    lookahead : int
        Trajectories tried before a flip is considered (1: [SD12] ch. 6).
    flips : {"reduced", "standard"}
    uniform : {"persistent", "fresh"} or None
        As :func:`ppl_hais.mcmc.build_kernel` (None: persistent for ``lookahead=1``).

    Notes
    -----
    Extra fields: ``accept_prob``, ``is_flipped``, ``lookahead_depth``, ``num_steps``
    (gradients used), ``step_size``, ``refresh``, ``potential_energy``, ``diverging``.

    Example
    -------
    >>> import jax, numpyro, numpyro.distributions as dist
    >>> from numpyro.infer import MCMC
    >>> from ppl_hais.adapters import numpyro as phn
    >>> def model():
    ...     numpyro.sample("x", dist.Normal(0.0, 1.0))
    >>> mcmc = MCMC(phn.ReducedFlipHMC(model), num_warmup=200, num_samples=200,
    ...             progress_bar=False)
    >>> mcmc.run(jax.random.key(0), extra_fields=("is_flipped",))
    >>> mcmc.get_samples()["x"].shape
    (200,)
    """

    sample_field = "z"

    def __init__(
        self,
        model=None,
        potential_fn=None,
        *,
        step_size: float = 0.1,
        num_steps: int = 1,
        refresh="auto",
        lookahead: int = 1,
        flips: str = "reduced",
        uniform: str | None = None,
        adapt_step_size: bool = True,
        adapt_mass_matrix: bool = True,
        target_accept_prob: float = 0.9,
        init_strategy=init_to_uniform,
        find_heuristic_step_size: bool = True,
    ):
        if (model is None) == (potential_fn is None):
            raise ValueError("give exactly one of model= or potential_fn=")
        if isinstance(refresh, str):
            if refresh != "auto":
                raise ValueError(f"refresh must be a number in (0, 1] or 'auto', got {refresh!r}")
        elif not 0.0 < refresh <= 1.0:
            raise ValueError("refresh must be in (0, 1]")
        if not (np.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be a positive number, got {step_size!r}")
        for name, value in (("num_steps", num_steps), ("lookahead", lookahead)):
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 < target_accept_prob < 1.0:
            raise ValueError(f"target_accept_prob must be in (0, 1), got {target_accept_prob!r}")
        self._model = model
        self._potential_fn = potential_fn
        self._step_size = float(step_size)
        self._num_steps = int(num_steps)
        self._refresh = refresh
        self._lookahead = int(lookahead)
        self._flips = flips
        self._adapt_step_size = bool(adapt_step_size)
        self._adapt_mass = bool(adapt_mass_matrix)
        self._target_accept = float(target_accept_prob)
        self._init_strategy = init_strategy
        self._find_step = bool(find_heuristic_step_size)
        uniform = resolve_uniform(uniform, self._lookahead)
        self._kernel = build_kernel(self._num_steps, self._lookahead, flips, uniform)

    @property
    def default_fields(self):
        return ("z", "diverging")

    def get_diagnostics_str(self, state):
        return (
            f"{int(state.num_steps)} grads of size {float(state.step_size):.2e}. "
            f"acc. prob={float(state.mean_accept_prob):.2f}"
        )

    def _density(self, rng_key, init_params, model_args, model_kwargs):
        if self._model is not None:
            key_model_trace = first_chain(rng_key, not is_prng_key(rng_key))
            tr = handlers.trace(handlers.seed(self._model, key_model_trace)).get_trace(
                *model_args, **model_kwargs
            )
            _refuse_discrete(tr)
            info = initialize_model(
                rng_key,
                self._model,
                init_strategy=self._init_strategy,
                model_args=model_args,
                model_kwargs=model_kwargs,
            )
            self._postprocess = info.postprocess_fn
            potential_fn = info.potential_fn
            if init_params is None:
                init_params = info.param_info.z
        else:
            if init_params is None:
                raise ValueError("with potential_fn=, give init_params to MCMC.run")
            potential_fn = self._potential_fn
        return potential_fn, init_params

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        batched, rng_key, key_model = split_init_key(rng_key)
        potential_fn, init_params = self._density(key_model, init_params, model_args, model_kwargs)
        one = first_chain(init_params, batched)
        _, unravel = ravel_pytree(one)

        def logdensity(x):
            return -potential_fn(unravel(x))

        self._logdensity, self._unravel = logdensity, unravel
        num_warmup = int(num_warmup)
        in_slow, ends = adaptation_schedule(num_warmup, self._adapt_mass)
        in_slow, ends = jnp.asarray(in_slow), jnp.asarray(ends)
        kernel, target = self._kernel, self._target_accept
        adapt_step, find_step = self._adapt_step_size, self._find_step
        chains = rng_key.shape[0] if batched else 1
        damping = (self._refresh == "auto" and batched and chains >= MIN_CHAINS_FOR_DAMPING
                   and num_warmup > 0)  # fmt: skip
        fixed = 0.5 if self._refresh == "auto" else float(self._refresh)

        def init_one(key, params):
            k_init, k_eps, key = jax.random.split(key, 3)
            x = ravel_pytree(params)[0]
            inv_mass = jnp.ones_like(x)
            core = core_init(x, logdensity, k_init, inv_mass)
            eps = jnp.asarray(self._step_size, x.dtype)
            if find_step and adapt_step:
                eps = find_reasonable_step_size(k_eps, core, logdensity, inv_mass, eps)
            adapt = adaptation_init(eps, inv_mass)
            zero = jnp.zeros((), x.dtype)
            return ReducedFlipHMCState(
                jnp.zeros((), jnp.int32), unravel(x), -core.logdensity, core, eps, zero, zero,
                jnp.zeros((), bool), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32),
                jnp.zeros((), bool), adapt, jnp.asarray(fixed, x.dtype), zero, key,
            )  # fmt: skip

        def sample_one(state, model_args, model_kwargs):
            key, sub = jax.random.split(state.rng_key)
            warm = state.i < num_warmup
            adapt = state.adapt_state
            if adapt_step:
                eps = jnp.exp(jnp.where(warm, adapt.log_step_size, adapt.log_step_size_avg))
            else:
                eps = state.step_size
            if damping:
                count = jnp.minimum(state.i, num_warmup).astype(eps.dtype)
                refresh = damping_refresh(state.log_max_eigenvalue, eps, count)
            else:
                refresh = state.refresh
            core, info = kernel(sub, state.core, logdensity, eps, refresh, adapt.inverse_mass)
            if num_warmup > 0:
                j = jnp.minimum(state.i, num_warmup - 1)
                new = adaptation_update(
                    adapt, info.acceptance_rate, core.position, core.logdensity_grad,
                    in_slow[j], ends[j], target,
                )  # fmt: skip
                adapt = jax.tree.map(lambda a, b: jnp.where(warm, a, b), new, adapt)
            mean_acc = phase_mean(state.i, num_warmup, state.mean_accept_prob, info.acceptance_rate)
            return ReducedFlipHMCState(
                state.i + 1, unravel(core.position), -core.logdensity, core, eps,
                info.acceptance_rate, mean_acc, info.is_flipped, info.lookahead_depth,
                info.num_gradients, info.is_divergent, adapt, refresh, state.log_max_eigenvalue,
                key,
            )  # fmt: skip

        state, self._sample_fn = init_chains(init_one, sample_one, batched, rng_key, init_params)
        if damping:
            per_chain = self._sample_fn

            def sample_population(states, model_args, model_kwargs):
                # a running mean of log λ_max over the chains' positions, whitened by their
                # metrics, while warmup lasts (the same for every chain)
                i = states.i[0]
                whitened = states.core.position / jnp.sqrt(states.adapt_state.inverse_mass)
                est = jnp.log(max_eigenvalue(whitened))
                rate = jnp.maximum(1.0 / (i + 1.0), 0.02)
                old = states.log_max_eigenvalue
                new = jnp.where(i < num_warmup, old + rate * (est - old), old)
                return per_chain(states._replace(log_max_eigenvalue=new), model_args,
                                 model_kwargs)  # fmt: skip

            self._sample_fn = sample_population
        return state
