"""``refine_guide``: a fitted ``AutoNormal`` guide's local factors refined per datum by adaptive
importance sampling (:func:`ppl_hais.refine`), for models with local latent variables (sample
sites inside a plate over the data).

Given the global sites at the guide's location (their factors are left as they are), the model
factorizes over the plate, p(x, z | θ) = Π_n p(x_n, z_n | θ), so each datum's Gaussian factor
q(z_n) moves toward the weighted moments of its own posterior draws. The refined parameters are
used as the fitted ones are: ``phn.HAIS(model, initial=(guide, refined.params))``,
``Predictive(model, guide=guide, params=refined.params)``.

Example
-------
>>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from numpyro.infer.autoguide import AutoNormal
>>> from ppl_hais.adapters import numpyro as phn
>>> def model(y):
...     with numpyro.plate("data", y.shape[0]):
...         z = numpyro.sample("z", dist.Normal(0.0, 1.0))
...         numpyro.sample("y", dist.Normal(z, 0.5), obs=y)
>>> y = jnp.array([1.0, -2.0, 0.5])
>>> guide = AutoNormal(model)
>>> params = {  # as SVI would fit them; here the prior
...     "z_auto_loc": jnp.zeros(3), "z_auto_scale": jnp.ones(3)}
>>> refined = phn.refine_guide(jax.random.key(0), guide, params, y, num_iterations=30)
>>> [round(float(v), 1) for v in refined.params["z_auto_loc"]]  # exact: 0.8 y
[0.8, -1.6, 0.4]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.distributions.transforms import biject_to

import ppl_hais as ph
from ppl_hais.research.refinement import DiagonalNormal
from ppl_hais.runtime.precision import float64


class RefinedGuide(NamedTuple):
    """``params``: the guide's parameters with the local sites' loc/scale refined;
    ``refinement``: the :class:`~ppl_hais.research.refinement.Refinement` (ESS and bound per
    step)."""

    params: dict
    refinement: Any


def _frames(site):
    return {f.name: f for f in site["cond_indep_stack"]}


def _data_plate(tr, plate):
    """The plate over the data and the local latent sites in it."""
    sample = {n: s for n, s in tr.items() if s["type"] == "sample"}
    latent = sorted(n for n, s in sample.items() if not s["is_observed"])
    observed = [n for n, s in sample.items() if s["is_observed"]]
    plates = set.intersection(*(set(_frames(sample[n])) for n in observed)) if observed else set()
    if plate is not None:
        if plate not in plates:
            raise ValueError(f"plate {plate!r} does not hold every observed site {observed}")
        plates = {plate}
    local = {p: [n for n in latent if p in _frames(sample[n])] for p in plates}
    local = {p: names for p, names in local.items() if names}
    if not local:
        raise ValueError(
            "refine_guide refines the guide per datum over local latent variables (sample "
            "sites inside a plate that holds the observed data); this model has none: "
            f"{latent} are global (outside every plate over {observed}). Use the fitted "
            "guide as it is: initial=(guide, params)"
        )
    if len(local) > 1:
        raise ValueError(f"several plates hold the data and latent sites: {sorted(local)}; "
                         "name one with plate=")  # fmt: skip
    (name, sites), = local.items()
    return _frames(sample[sites[0]])[name], sites, [n for n in latent if n not in sites]


@float64
def refine_guide(rng_key, guide, params, *args, num_iterations: int = 20,
                 num_samples: int = 100, damping: float = 0.3, plate=None, **kwargs):  # fmt: skip
    """Refine a fitted ``AutoNormal`` guide's local factors, datum by datum.

    ``args``/``kwargs`` are the model's (with the observed data). The global sites are held at
    the guide's location while the local sites' Gaussian factors are refined
    ``num_iterations`` steps of ``num_samples`` draws each (damping γ; :func:`ppl_hais.refine`).
    Returns a :class:`RefinedGuide`. A model without latent sites in a plate over the data is
    refused by name (there is nothing per datum to refine).
    """
    from numpyro.infer.autoguide import AutoNormal

    if not isinstance(guide, AutoNormal):
        raise TypeError(
            f"refine_guide refines AutoNormal's per-site factors; got {type(guide).__name__}"
        )
    model, prefix = guide.model, guide.prefix
    seeded = handlers.seed(model, jax.random.key(0))
    frame, local, globals_ = _data_plate(handlers.trace(seeded).get_trace(*args, **kwargs), plate)

    def loc(n):
        return jnp.asarray(params[f"{n}_{prefix}_loc"])

    fixed = {}
    for n in globals_:  # constrained values, in trace order (a support may depend on them)
        tr = handlers.trace(handlers.substitute(seeded, data=fixed)).get_trace(*args, **kwargs)
        fixed[n] = biject_to(tr[n]["fn"].support)(loc(n))
    tr = handlers.trace(handlers.substitute(seeded, data=fixed)).get_trace(*args, **kwargs)
    axes = {n: len(tr[n]["fn"].batch_shape) + frame.dim for n in local}
    shapes = {n: jnp.moveaxis(loc(n), axes[n], 0).shape for n in local}
    num_data = frame.size

    def rows(prefixed):
        return jnp.concatenate([
            jnp.moveaxis(jnp.asarray(params[f"{n}_{prefix}_{prefixed}"]), axes[n], 0)
            .reshape(num_data, -1) for n in local
        ], axis=1)  # fmt: skip

    def split(z):
        out, start = {}, 0
        for n in local:
            size = int(np.prod(shapes[n][1:]))
            out[n] = jnp.moveaxis(z[:, start : start + size].reshape(shapes[n]), 0, axes[n])
            start += size
        return out

    def per_datum(lp, site_dim):  # sum a log density over every axis but the plate's
        axis = lp.ndim + site_dim
        return jnp.sum(jnp.moveaxis(lp, axis, 0).reshape(num_data, -1), axis=1)

    def log_joint(z):
        total, values = jnp.zeros(num_data), dict(fixed)
        for n, u in split(z).items():
            t = biject_to(tr[n]["fn"].support)
            values[n] = t(u)
            ldj = t.log_abs_det_jacobian(u, values[n])
            total = total + per_datum(jnp.broadcast_to(ldj, tr[n]["fn"].batch_shape), frame.dim)
        run = handlers.trace(handlers.substitute(seeded, data=values)).get_trace(*args, **kwargs)
        for n, site in run.items():
            if site["type"] != "sample" or n in fixed or frame.name not in _frames(site):
                continue
            lp = site["fn"].log_prob(site["value"])
            if site.get("scale") is not None:
                lp = lp * site["scale"]
            total = total + per_datum(jnp.broadcast_to(lp, site["fn"].batch_shape), frame.dim)
        return total

    q = DiagonalNormal(rows("loc"), rows("scale"))
    fit = ph.refine(rng_key, log_joint, q, num_iterations=num_iterations,
                    num_samples=num_samples, damping=damping)  # fmt: skip
    new = dict(params)
    for which, value in (("loc", fit.q.loc), ("scale", fit.q.scale)):
        for n, v in split(value).items():
            new[f"{n}_{prefix}_{which}"] = v
    return RefinedGuide(new, fit)
