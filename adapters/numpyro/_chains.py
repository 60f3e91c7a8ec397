"""Plumbing shared by our NumPyro ``MCMCKernel`` classes (chain batching, running statistics)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity, is_prng_key


def split_init_key(rng_key):
    """``(batched, state_key, model_key)``; NumPyro's vectorized chains pass a batch of keys."""
    batched = not is_prng_key(rng_key)
    if batched:
        state_key, model_key = jnp.swapaxes(jax.vmap(jax.random.split)(rng_key), 0, 1)
    else:
        state_key, model_key = jax.random.split(rng_key)
    return batched, state_key, model_key


def first_chain(tree, batched):
    return jax.tree.map(lambda a: a[0], tree) if batched else tree


def phase_mean(i, num_warmup, previous, value):
    """Running mean of ``value`` over the current phase (restarted when sampling begins)."""
    n = jnp.where(i < num_warmup, i + 1, i - num_warmup + 1).astype(jnp.result_type(previous))
    prev = jnp.where(i == num_warmup, 0.0, previous)
    return prev + (value - prev) / n


def init_chains(init_one, sample_one, batched, keys, params):
    """Initial state(s) and the (vmapped, for batched chains) sample function."""
    if batched:
        return jax.vmap(init_one)(keys, params), jax.vmap(sample_one, in_axes=(0, None, None))
    return init_one(keys, params), sample_one


class ModelKernel(MCMCKernel):
    """What our NumPyro kernels share: the model, NumPyro's postprocessing of unconstrained
    values (set by ``init``) and the sample function ``init`` builds (vmapped over chains)."""

    _model = None
    _postprocess = None
    _sample_fn = None

    @property
    def model(self):
        return self._model

    def postprocess_fn(self, model_args, model_kwargs):
        return identity if self._postprocess is None else self._postprocess

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state, model_args, model_kwargs)
