"""The data a NumPyro model is run on, checked before anything compiles: observations that
broadcast against their distribution, and array arguments with NaN values that are not
observations. Each refusal names the argument or site, both shapes, and the remedy. Also the
arguments' form for a float64 call, and the record of what an evidence conditions on.

Example
-------
>>> import numpy as np, numpyro, numpyro.distributions as dist
>>> from numpyro import handlers
>>> from ppl_hais.adapters.numpyro.data import check_data
>>> def model(x, y=None):
...     numpyro.sample("y", dist.Normal(x, 1.0), obs=y)
>>> y = np.zeros(2)
>>> tr = handlers.trace(handlers.seed(model, 0)).get_trace(np.zeros(2), y=y)
>>> check_data(model, (np.array([1.5, np.nan]),), {"y": y}, tr)
Traceback (most recent call last):
    ...
ValueError: model argument 'x' has 1 NaN value(s) of 2: ...
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.infer.initialization import init_to_uniform

from ppl_hais.model.observed import ObservedData, observed_data

__all__ = ["as_jax_arrays", "as_jax_data", "check_broadcast", "check_data", "observed_record"]


def check_broadcast(name, site):
    """Refuse observations that broadcast against their distribution: the likelihood would
    count more terms than there are data (y of shape (N, 1) against a mean of shape (N,)
    gives N² terms), and the evidence would be that of another data set, with no error."""
    data = tuple(np.shape(site["value"]))
    dist_shape = tuple(site["fn"].shape())
    terms = np.broadcast_shapes(data, dist_shape)
    if int(np.prod(terms)) > int(np.prod(data)):
        raise ValueError(
            f"observed site '{name}': the data have shape {data} and its distribution "
            f"{dist_shape}; they broadcast to {terms}, so the likelihood would count "
            f"{int(np.prod(terms))} terms for {int(np.prod(data))} observed values. Give the "
            f"data the distribution's shape (e.g. y.reshape({dist_shape}), or "
            "y.squeeze() for a trailing axis of 1) or the distribution the data's."
        )


def _observed_values(tr):
    """The observed sites' values that are data (a factor's value is computed, and in an
    abstract trace a tracer)."""
    for site in tr.values():
        if site["type"] == "sample" and site["is_observed"] and site["value"] is not None:
            try:
                yield np.asarray(site["value"])
            except Exception:  # a traced value: not data
                continue


def check_data(model, args, kwargs, tr):
    """Refuse a model argument (an array) with NaN values that is not an observed site's value
    (a predictor with missing entries): every density evaluation would be NaN where it enters,
    and the run would end in zero weights with nothing pointing at the data. An observation's
    missing entries are the model's to mask (``obs_mask``, ``handlers.mask``)."""
    try:
        bound = inspect.signature(model).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {**{f"argument {i}": a for i, a in enumerate(args)}, **kwargs}
    for name, value in bound.items():
        try:
            x = np.asarray(value)
        except Exception:  # not an array: nothing to check
            continue
        if not np.issubdtype(x.dtype, np.floating) or x.ndim == 0 or not np.isnan(x).any():
            continue
        seen = ~np.isnan(x)
        if any(o.shape == x.shape and np.array_equal(o[seen], x[seen])
               for o in _observed_values(tr)):  # fmt: skip
            continue  # observations (missing entries masked in the model, or the observed
            # site's own check names obs_mask)
        raise ValueError(
            f"model argument '{name}' has {int(np.sum(~seen))} NaN value(s) of "
            f"{x.size}: the model's density is NaN wherever they enter, so no run could weigh "
            "its particles. Impute them or drop the rows that hold them (missing "
            "observations, rather than predictors, are marked with obs_mask=...)."
        )


def as_jax_arrays(arrays) -> list:
    """A model's data arrays for a float64 call (every entry point's): NumPy leaves as JAX
    float64 arrays. Left to JAX's dispatch, NumPy leaves reached a float64 program as float32
    after NUTS had run the same model in float32 in the process (eight schools, then bridge
    sampling). Outside float64 they stay as given."""
    if not jax.config.jax_enable_x64:
        return list(arrays)
    return [a if isinstance(a, jax.Array) else jnp.asarray(a) for a in arrays]


def as_jax_data(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A model's arguments for its first trace in a float64 call: numeric NumPy arrays and
    scalars as JAX arrays of this call's precision (int64 stays int64). Left as NumPy, an
    int64 index array that NUTS had used in float32 in the same process reached the model's
    eager first run as int32 beside int64 sizes, and JAX's indexing refused to add them.
    Other leaves (JAX arrays, strings, objects) stay as given; outside float64 nothing
    changes. Only the first trace takes them: a model that needs concrete data (Python control
    flow on its values) keeps its NumPy arguments, which stay concrete inside ``jit``, where
    JAX arrays closed over become tracers."""
    if not jax.config.jax_enable_x64:
        return tuple(args), dict(kwargs)

    def leaf(x):
        if isinstance(x, np.ndarray | np.generic) and x.dtype.kind in "biufc":
            return jnp.asarray(x)
        return x

    return jax.tree.map(leaf, tuple(args)), jax.tree.map(leaf, dict(kwargs))


def _data_sites(nt) -> dict:
    # latent sites at NumPyro's init values: no draw, so an improper prior runs too
    run = handlers.substitute(handlers.seed(nt.model, jax.random.key(0)),
                              substitute_fn=init_to_uniform)  # fmt: skip
    tr = handlers.trace(run).get_trace(*nt.args, **nt.kwargs)
    return {name: site["value"] for name, site in tr.items() if site["type"] == "sample"
            and site["is_observed"] and name not in nt.factors}  # fmt: skip


_data_sites_jit = jax.jit(_data_sites)


def observed_record(nt) -> ObservedData:
    """What a ``NumPyroTarget``'s evidence conditions on: its observed sites' values, as the
    model computes them from its arguments (:mod:`ppl_hais.model.observed`; factors are not
    data), traced with the data as arguments (one small program per model structure), or run
    eagerly for a model that runs on concrete data only."""
    traced = nt._st.baked is None
    return observed_data((_data_sites_jit if traced else _data_sites)(nt))
