"""``NumPyroTarget``: a NumPyro model as flat log prior and log likelihood over unconstrained z
(a pytree compiled once per structure), its prior as an initial distribution, ``bdmc``.

Example
-------
>>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from ppl_hais.adapters import numpyro as phn
>>> def model(y=None):
...     sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
...     numpyro.sample("y", dist.Normal(0.0, sigma), obs=y)
>>> nt = phn.NumPyroTarget(model, model_kwargs={"y": jnp.array(0.5)})
>>> nt.latent, nt.observed, nt.dim
(['sigma'], ['y'], 1)
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer.util import (
    compute_log_probs,
    constrain_fn,
    init_to_uniform,
    potential_energy,
)

import ppl_hais as ph
from ppl_hais.mcmc.fast_random import check_key
from ppl_hais.model.density import SplitDensity
from ppl_hais.model.target import num_draws, sample_shape_of
from ppl_hais.runtime.precision import float64
from ppl_hais.runtime.structure import compile_once, merge

from .data import as_jax_arrays, as_jax_data, check_data, observed_record
from .model import (
    Structure,
    centered_sites,
    check_sites,
    flat_value,
    plate_nesting,
    structure_for,
    unconstrained,
    with_missing_data,
)


def _first_trace(model, args, kwargs, key):
    """One run of the model: (its trace, its checked sites, its latent values unconstrained,
    flattened, and the unflattening), for the sites' names, kinds and shapes.

    Traced abstractly first (``jax.eval_shape``: the values are shapes, and nothing compiles);
    run eagerly, as NumPyro's own MCMC initialization runs it, where that fails: where a site
    check reads a value the model computes (masked observations, whose mask the adapter
    applies in the model) or a prior cannot be sampled (an improper one). Eagerly, each
    operation compiles a program on first use (0.3-0.55 s of a small model's first call)."""
    box = {}

    def abstract(key):
        tr = handlers.trace(handlers.seed(with_missing_data(model), key)).get_trace(
            *args, **kwargs
        )
        sites = tuple(tuple(x) for x in check_sites(tr))
        unconstrained = {n: flat_value(tr[n]) for n in sites[0]}
        flat, box["unravel"] = ravel_pytree(unconstrained)
        box["trace"], box["sites"] = tr, sites
        return unconstrained, flat

    try:
        unconstrained, flat = jax.eval_shape(abstract, key)
        return box["trace"], box["sites"], unconstrained, flat, box["unravel"]
    except Exception:  # the eager run below raises what is the model's own error, if any
        pass
    seeded = handlers.seed(with_missing_data(model), key)
    try:
        tr = handlers.trace(seeded).get_trace(*args, **kwargs)
    except NotImplementedError:
        # ImproperUniform cannot be sampled: find the sites with NumPyro's own init strategy
        tr = handlers.trace(
            handlers.substitute(seeded, substitute_fn=init_to_uniform)
        ).get_trace(*args, **kwargs)
    sites = tuple(tuple(x) for x in check_sites(tr))
    unconstrained = {n: flat_value(tr[n]) for n in sites[0]}
    flat, unravel = ravel_pytree(unconstrained)
    return tr, sites, unconstrained, flat, unravel


class NumPyroTarget(SplitDensity):
    """A NumPyro model seen as flat log prior / log likelihood over unconstrained z.

    ``log_prior(z)`` includes the log-Jacobians of the constraining transforms; the order of z is
    ``jax.flatten_util.ravel_pytree`` of the dict of unconstrained latent values (sorted names).

    A pytree: its leaves are the array arguments of the model (the data), everything else is
    static, so the annealer compiles once per model and data *shapes* (NumPyro's
    ``jit_model_args``); a model that cannot run on traced data (Python control flow on data
    values) falls back to compiling per data set. Its data are checked first (``.data``)."""

    def __init__(self, model, model_args=(), model_kwargs=None, rng_key=None):
        args, kwargs = tuple(model_args), dict(model_kwargs or {})
        key = jax.random.key(0) if rng_key is None else rng_key
        tr, sites, unconstrained, flat, unravel = _first_trace(model, *as_jax_data(args, kwargs),
                                                               key)  # fmt: skip
        check_data(model, args, kwargs, tr)
        shapes = tuple((n, tuple(v.shape)) for n, v in sorted(unconstrained.items()))
        nesting = plate_nesting(tr, sites[4])
        self._st, arrays = structure_for(model, args, kwargs, sites, unravel, int(flat.size),
                                         shapes, nesting)  # fmt: skip
        self._arrays = as_jax_arrays(arrays)  # in this call's precision
        if self._st.baked is None and self._arrays and not self._runs_traced(flat):
            self._st = Structure(model, None, *sites, unravel, int(flat.size), nesting)
            self._st.baked = (args, kwargs)
            self._arrays = []
        if sites[5]:  # integer coordinates, moved by a Metropolis step (ph.mixed_kernel)
            mask = [np.full(int(np.prod(v.shape)), n in sites[5])  # ravel_pytree's order
                    for n, v in sorted(unconstrained.items())]  # fmt: skip
            self._st.discrete_mask = tuple(bool(b) for b in np.concatenate(mask))
        if self.enumerated and self._st.baked is not None and not self._runs_traced(flat):
            raise ValueError(
                f"the enumerated site(s) {self.enumerated} cannot be summed out with the "
                "continuous sites as traced values: a discrete support that depends on a "
                "latent value (e.g. DiscreteUniform(0, n) with n sampled) cannot be enumerated. "
                "Give the discrete site a support fixed by the data."
            )

    def _runs_traced(self, z) -> bool:
        """Whether the model's densities trace with the data as abstract values."""
        try:
            jax.eval_shape(lambda t, z: _log_parts(t, z), self, z)
        except jax.errors.JAXTypeError:
            return False
        return True

    # the data, and the structure's fields
    @property
    def model(self):
        return self._st.model

    @property
    def args(self):
        return self._data[0]

    @property
    def kwargs(self):
        return self._data[1]

    @property
    def _data(self):
        if self._st.baked is not None:
            return self._st.baked
        return merge(self._st.data_structure, self._arrays)

    latent = property(lambda self: list(self._st.latent))
    observed = property(lambda self: list(self._st.observed))
    factors = property(lambda self: list(self._st.factors))
    improper = property(lambda self: list(self._st.improper))
    enumerated = property(lambda self: list(self._st.enumerated))
    discrete_names = property(lambda self: list(self._st.discrete))
    discrete = property(lambda self: self._st.discrete_mask)  # per coordinate, or None
    dim = property(lambda self: self._st.dim)
    unravel = property(lambda self: self._st.unravel)
    observed_data = property(observed_record)  # what the evidence conditions on

    @property
    def remedy_note(self) -> str | None:
        """What the evidence warning adds for this model: its centered hierarchical sites and
        how to non-center them (the evidence is unchanged), or None."""
        names = centered_sites(self.model, *self._data, self.latent, self.unravel, self.dim)
        if not names:
            return None
        config = ", ".join(f"{n!r}: LocScaleReparam(0)" for n in names)
        return (
            f"the scale of {names} depends on other latent variables (a centered hierarchy: a "
            "funnel, whose neck the anneals under-explore, leaving the estimate low). "
            "Non-centering changes the coordinates, not the evidence; where the data say little "
            "about them it removes the neck: "
            f"numpyro.handlers.reparam(model, config={{{config}}}), LocScaleReparam from "
            "numpyro.infer.reparam."
        )

    def log_parts(self, z):
        """(log prior incl. Jacobians, log likelihood incl. factors) at flat unconstrained z."""
        return _log_parts(self, z)

    def sample_prior(self, rng_key, num):
        """Exact prior draws, flattened in unconstrained space, (num, D)."""
        if self.improper:
            raise ValueError(
                f"site(s) {self.improper} have an improper prior (ImproperUniform) that cannot "
                "be sampled: pass an explicit initial distribution, e.g. "
                "initial='laplace', initial='vi' or initial=ph.Gaussian(mean, scale) over the "
                f"{self.dim} unconstrained coordinates."
            )
        args, kwargs = self._data

        def one(key):
            tr = handlers.trace(handlers.seed(self.model, key)).get_trace(*args, **kwargs)
            vals = {n: flat_value(tr[n]) for n in self.latent}
            return ravel_pytree(vals)[0]

        return jax.vmap(one)(jax.random.split(rng_key, num))

    @property
    def prior(self):
        """The prior as an initial distribution (None when a prior is improper)."""
        if self.improper:
            return None
        return _PriorInitial(self)

    def constrain(self, z, rng_key=None):
        """Constrained values of every latent and deterministic site at flat z (vmappable).

        With enumerated discrete sites, those are drawn from their conditional posterior given
        the continuous values (NumPyro's ``infer_discrete``, with ``rng_key``) and the
        deterministic sites computed from them."""
        args, kwargs = self._data
        if self.discrete_names:  # NumPyro's constrain_fn has no transform for them
            run = handlers.seed(unconstrained(self.model, self.unravel(z)), jax.random.key(0))
            tr = handlers.trace(run).get_trace(*args, **kwargs)
            return {
                name: site["value"]
                for name, site in tr.items()
                if name in self._st.latent or site["type"] == "deterministic"
            }
        if not self.enumerated:
            return constrain_fn(
                self.model, args, kwargs, self.unravel(z), return_deterministic=True
            )
        from numpyro.contrib.funsor import config_enumerate, infer_discrete

        key = jax.random.key(0) if rng_key is None else rng_key
        seeded = handlers.seed(self.model, jax.random.fold_in(key, 1))
        cont = constrain_fn(seeded, args, kwargs, self.unravel(z))
        cont = {k: v for k, v in cont.items() if k in self._st.latent}
        model = infer_discrete(
            handlers.condition(config_enumerate(self.model), data=cont),
            rng_key=key,
            first_available_dim=self._st.first_available_dim,
        )
        tr = handlers.trace(model).get_trace(*args, **kwargs)
        keep = set(self._st.latent) | set(self._st.enumerated)
        return {
            name: site["value"]
            for name, site in tr.items()
            if name in keep or site["type"] == "deterministic"
        }


def _log_parts(nt: NumPyroTarget, z):
    """Through ``jit``: the model is traced once per structure and shape of z, and the pilots,
    the main run, the Laplace fit and the bias check reuse the traced density (and its vmapped
    and differentiated forms): 21 runs of the model's body on a first call became a few."""
    return _log_parts_jit(nt, z)


def _log_parts_traced(nt: NumPyroTarget, z):
    args, kwargs = nt._data
    if nt._st.enumerated:  # discrete sites summed out by NumPyro's enumeration (funsor)
        params = nt.unravel(z)
        joint = -potential_energy(nt._st.enum_model, args, kwargs, params, enum=True)
        prior = -potential_energy(nt._st.enum_prior, args, kwargs, params, enum=True)
        return prior, joint - prior
    log_probs, _ = compute_log_probs(unconstrained(nt.model, nt.unravel(z)), args, kwargs, {})
    names = nt._st.prior_names
    prior = sum((v for k, v in log_probs.items() if k in names), start=0.0)
    lik = sum((v for k, v in log_probs.items() if k not in names), start=0.0)
    return prior, lik


_log_parts_jit = jax.jit(_log_parts_traced)


jax.tree_util.register_pytree_node(NumPyroTarget, lambda nt: (tuple(nt._arrays), nt._st),
                                   lambda st, arrays: _rebuild(st, arrays))


def _rebuild(st, arrays):
    nt = object.__new__(NumPyroTarget)
    nt._st, nt._arrays = st, list(arrays)
    return nt


constrain_batch = compile_once(lambda nt, flat, keys: jax.vmap(nt.constrain)(flat, keys))


def refuse_foreign_model(model):
    """A clear error for what is not a NumPyro model function."""
    kind = type(model).__module__.split(".")[0]
    if kind == "pymc":
        raise TypeError(
            "phn.HAIS got a PyMC model: use ppl_hais.adapters.pymc.sample_hais inside "
            "`with model:` (phn.HAIS takes a NumPyro model function)"
        )
    if not callable(model):
        raise TypeError(f"phn.HAIS needs a NumPyro model function, got {type(model).__name__}")


class _PriorInitial:
    """The prior in unconstrained space as a (normalized, exactly sampled) initial distribution."""

    def __init__(self, nt: NumPyroTarget):
        self.nt = nt
        self.dim = nt.dim

    def sample(self, rng_key, sample_shape=()):
        shape = sample_shape_of(sample_shape)
        return self.nt.sample_prior(rng_key, num_draws(shape)).reshape(shape + (self.dim,))

    def log_prob(self, z):
        return self.nt.log_prior(z)


jax.tree_util.register_pytree_node(
    _PriorInitial, lambda q: ((q.nt,), None), lambda _, children: _PriorInitial(children[0])
)


@float64
def bdmc(rng_key, model, *args, num_particles=512, num_steps=1000, **kwargs):
    """Bidirectional Monte Carlo on data simulated from the model (Grosse et al. 2015).

    Draws parameters from the prior and data from the model given them
    (``handlers.uncondition``), then anneals prior → posterior of the simulated data forward
    from the prior and in reverse from the parameters that generated it (an exact posterior
    draw): ``result.log_z`` is a stochastic lower bound and ``result.log_z_upper`` a
    stochastic upper bound on the log evidence of the simulated data, so their gap bounds
    the bias of the annealer on data like the user's. ``args``/``kwargs`` are the model's
    (the observed values in them are replaced by simulated ones, shapes kept). Returns an
    :class:`~ppl_hais.AISResult` with ``settings.simulated`` holding the simulated data
    and the true parameters.
    """
    rng_key = check_key(rng_key)
    refuse_foreign_model(model)
    k_sim, k_trace, k_run = jax.random.split(rng_key, 3)
    observed_nt = NumPyroTarget(model, args, kwargs, k_trace)
    if observed_nt.factors:
        raise ValueError(
            f"bdmc simulates data from the model, but numpyro.factor site(s) {observed_nt.factors} "
            "have no generative process"
        )
    sim = handlers.trace(handlers.seed(handlers.uncondition(model), k_sim)).get_trace(
        *args, **kwargs
    )
    data = {n: sim[n]["value"] for n in observed_nt.observed}
    conditioned = handlers.condition(handlers.uncondition(model), data=data)
    nt = NumPyroTarget(conditioned, args, kwargs, k_trace)
    if nt.discrete_names or nt.enumerated:
        raise ValueError(
            f"bdmc anneals continuous sites only; the model's discrete site(s) "
            f"{nt.discrete_names or nt.enumerated} have no reverse path here"
        )
    truth = {n: flat_value(sim[n]) for n in nt.latent}
    z_true = ravel_pytree(truth)[0]
    target = ph.AnnealingTarget(
        initial=nt.prior, log_likelihood=jax.tree_util.Partial(NumPyroTarget.log_likelihood, nt)
    )
    result = ph.bdmc(
        k_run, target, np.asarray(z_true)[None, :], num_particles=num_particles,
        num_steps=num_steps, progress_bar=False,
    )  # fmt: skip
    return dataclasses.replace(result, settings=result.settings.replace(simulated={
        "data": {k: np.asarray(v) for k, v in data.items()},
        "parameters": {n: np.asarray(sim[n]["value"]) for n in nt.latent},
    }))  # fmt: skip


def guide_initial(nt: NumPyroTarget, guide, params):
    """A Gaussian initial distribution from a fitted NumPyro autoguide (after SVI).

    Supports ``AutoNormal`` (per-site loc/scale) and the ``AutoContinuous`` guides
    ``AutoDiagonalNormal``/``AutoMultivariateNormal``/``AutoLowRankMultivariateNormal``
    (their flattening order, trace order, is permuted to ours, sorted names).
    """
    from numpyro.infer import autoguide

    if isinstance(guide, autoguide.AutoNormal):
        locs = {n: params[f"{n}_{guide.prefix}_loc"] for n in nt.latent}
        scales = {n: params[f"{n}_{guide.prefix}_scale"] for n in nt.latent}
        return ph.Gaussian(np.asarray(ravel_pytree(locs)[0]), np.asarray(ravel_pytree(scales)[0]))
    if isinstance(guide, autoguide.AutoContinuous):
        post = guide.get_posterior(params)
        index = guide._unpack_latent(jnp.arange(nt.dim, dtype=float))
        perm = np.asarray(ravel_pytree({n: index[n] for n in nt.latent})[0]).astype(int)
        loc = np.asarray(post.loc)[perm]
        if isinstance(post, dist.MultivariateNormal | dist.LowRankMultivariateNormal):
            cov = np.asarray(post.covariance_matrix)[np.ix_(perm, perm)]
            return ph.Gaussian(loc, scale_tril=np.linalg.cholesky(cov))
        return ph.Gaussian(loc, np.asarray(post.base_dist.scale)[perm])
    raise TypeError(
        f"unsupported guide {type(guide).__name__}: use AutoNormal or an "
        "AutoContinuous guide, or pass initial=ph.Gaussian(...)"
    )


