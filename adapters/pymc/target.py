"""``PyMCTarget``: a PyMC model compiled to JAX as flat log prior and log likelihood over its
unconstrained value variables, its prior as an initial distribution, and the per-model cache.

Example
-------
>>> import pymc as pm
>>> from ppl_hais.adapters.pymc import PyMCTarget
>>> with pm.Model() as model:
...     sigma = pm.HalfNormal("sigma", 1.0)
...     y = pm.Normal("y", 0.0, sigma, observed=[0.5])
>>> target = PyMCTarget(model)
>>> target.dim, target.names
(1, ['sigma_log__'])
"""

from __future__ import annotations

import copy
import hashlib
import weakref
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm

# PyMC module functions that `pm.` does not re-export (no public equivalent on PyMC 5.28 or 6.4):
# the observed-data helper pm.sample uses for its own ArviZ output (the prior's draws:
# prior.py; the JAX graph of pymc.sampling.jax: rewrites.py). Same names and behaviour on both
# versions, pinned by tests/test_pymc.py (evidence against exact values).
from pymc.backends.arviz import find_observations
from pymc.util import get_default_varnames
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph import graph_inputs
from pytensor.graph.basic import equal_computations

from ppl_hais.mcmc.fast_random import host_randint
from ppl_hais.model.density import SplitDensity
from ppl_hais.model.observed import ObservedData, observed_data
from ppl_hais.model.target import num_draws, sample_shape_of

from .graph import centered_variables, check_inputs
from .prior import PriorSampler
from .rewrites import jaxified_graph


class PyMCTarget(SplitDensity):
    """A PyMC model as flat log prior / log likelihood over its transformed value variables."""

    def __init__(self, model, needs_likelihood=True):
        self._model = model
        self._check(needs_likelihood)
        point = model.initial_point()
        self.value_vars = list(model.value_vars)
        self.names = [v.name for v in self.value_vars]
        self.shapes = [np.shape(point[n]) for n in self.names]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.dim = int(sum(self.sizes))
        self.dtypes = [np.dtype(v.dtype) for v in self.value_vars]
        # integer variables (pm.DiscreteUniform, Bernoulli, Poisson, ...): stored as whole
        # numbers in the flat float vector and moved by a Metropolis step (kernels.mixed_kernel)
        mask = np.concatenate(
            [np.full(size, np.issubdtype(dt, np.integer)) for size, dt in
             zip(self.sizes, self.dtypes, strict=True)]
        )  # fmt: skip
        self.discrete = tuple(bool(x) for x in mask) if mask.any() else None
        self.discrete_names = [
            n
            for n, dt in zip(self.names, self.dtypes, strict=True)
            if np.issubdtype(dt, np.integer)
        ]
        # the observed values are inputs of the compiled density, not constants: a model over
        # new data of the same shapes (pm.observe, built again, with_data) compiles nothing
        _, outputs, _, self._data_inputs = _graphs(model)
        self._observed_names = tuple(rv.name for rv in model.observed_RVs)
        self._data = tuple(np.asarray(_value(model.rvs_to_values[rv]))  # cast in each call
                           for rv in model.observed_RVs)  # fmt: skip
        # through jit, so the graph is traced once per shape, not once per program using it
        # (pilots, main run, Laplace fit, bias check)
        self._graph = outputs[:2]  # log prior, log likelihood
        self._baked = _fingerprint(model)  # the shared variables' values the graph bakes in
        self._logp = jax.jit(jaxified_graph(self.value_vars + self._data_inputs, self._graph))
        self._outputs = list(
            get_default_varnames(model.unobserved_value_vars, include_transformed=False)
        )
        self._constrain = jaxified_graph(self.value_vars, self._outputs)

    def _signature(self):
        return (tuple(self.names), tuple(self.shapes), tuple(map(str, self.dtypes)),
                self.discrete, self._baked)  # fmt: skip

    def __hash__(self):
        return hash(self._signature())

    def __eq__(self, other):
        """Equal where the compiled code is: the same value variables and an equal log density
        graph, constants (observed data) compared by value and shared variables (``pm.Data``)
        only where they are the same object holding the same values (``jaxified_graph`` bakes
        them in: ``pm.set_data`` must recompile). A new model object built the same way over the
        same data then reuses every compiled program (``ppl_hais.runtime.structure``) instead of
        tracing and lowering them again (0.52 → 0.32 s a call on small models)."""
        if other is self:
            return True
        if type(other) is not type(self) or other._signature() != self._signature():
            return False
        return bool(equal_computations(self._graph, other._graph,
                                       in_xs=self.value_vars + self._data_inputs,
                                       in_ys=other.value_vars + other._data_inputs))  # fmt: skip

    def with_data(self, values) -> PyMCTarget:
        """The same model over other observed values (``{name: array}`` of the observed
        variables, each of its present shape): the compiled programs are reused."""
        missing = set(self._observed_names) - set(values)
        if missing:
            raise ValueError(f"with_data needs values for observed variable(s) {sorted(missing)}")
        data = []
        for name, old in zip(self._observed_names, self._data, strict=True):
            new = np.asarray(values[name], dtype=old.dtype)
            if new.shape != old.shape:
                raise ValueError(f"observed variable {name!r} has shape {old.shape}: got "
                                 f"{new.shape}")  # fmt: skip
            data.append(new)
        return _with_data(self, tuple(data))

    @property
    def model(self):
        """The PyMC model. A target from the adapter's cache holds it weakly (the cache entry
        goes with the model), so it is an error to use one after its model was freed."""
        model = self._model() if isinstance(self._model, weakref.ref) else self._model
        if model is None:
            raise RuntimeError("the PyMC model of this target was freed: build the target "
                               "again from a live model")  # fmt: skip
        return model

    def _check(self, needs_likelihood=True):
        m = self.model
        improper = [
            rv.name
            for rv in m.free_RVs
            if type(rv.owner.op).__name__ in ("FlatRV", "HalfFlatRV", "Flat", "HalfFlat")
        ]
        self.improper = improper
        if needs_likelihood and not m.observed_RVs and not m.potentials:
            raise ValueError(
                "the model has neither observed variables nor Potentials: there is no "
                "likelihood, so the evidence is 1. Add observed=... data."
            )
        if not m.free_RVs:
            raise ValueError("the model has no free random variable to integrate over")
        for name, data in find_observations(m).items():
            bad = int(np.sum(~np.isfinite(np.asarray(data, dtype=float))))
            if bad:
                raise ValueError(f"observed variable '{name}' has {bad} NaN/inf value(s)")
        check_inputs(m)

    @property
    def observed_data(self) -> ObservedData:
        """What the evidence conditions on: the observed variables' values, as ``pm.sample``
        puts them in ``observed_data`` (:mod:`ppl_hais.model.observed`; Potentials are not
        data)."""
        return observed_data(dict(zip(self._observed_names, self._data, strict=True)))

    # -- flat vectors
    def unravel(self, z):
        out, i = [], 0
        for shape, size, dtype in zip(self.shapes, self.sizes, self.dtypes, strict=True):
            part = jnp.reshape(z[i : i + size], shape)
            if np.issubdtype(dtype, np.integer):
                part = jnp.round(part).astype(dtype)
            out.append(part)
            i += size
        return out

    def ravel(self, values):
        return np.concatenate([np.reshape(v, (np.shape(v)[0], -1)) for v in values], axis=1)

    def log_parts(self, z):
        prior, lik = self._logp(*self.unravel(z), *self._data)
        return prior, lik

    def sample_prior(self, num, seed):
        """Exact prior draws in the transformed space, as pm.sample_smc draws its population."""
        if self.improper:
            raise ValueError(
                f"variable(s) {self.improper} have an improper prior (pm.Flat/pm.HalfFlat) that "
                "cannot be sampled: pass initial='laplace', initial='vi' or "
                "initial=ph.Gaussian(mean, scale) "
                f"over the {self.dim} transformed coordinates."
            )
        # make_initial_point_expression follows free_RVs order = value_vars order
        return self.ravel(self._prior_sampler(num, seed))

    @cached_property
    def _prior_sampler(self):
        """Prior draws in the transformed space, a population per call (prior.py)."""
        return PriorSampler(self.model, self.shapes)

    def constrain(self, z):
        return self._constrain(*self.unravel(z))

    def posterior(self, flat, chains: int, draws: int) -> dict:
        """Constrained variables and deterministics by name, shaped (chains, draws, ...), from
        flat draws whose leading axes hold chains × draws."""
        values = self.constrain_batch(jnp.asarray(np.reshape(flat, (-1, self.dim))))
        return {
            v.name: np.asarray(val).reshape((int(chains), int(draws)) + np.shape(val)[1:])
            for v, val in zip(self._outputs, values, strict=True)
        }

    @cached_property
    def constrain_batch(self):
        """Constrained values (and deterministics) of a batch of flat vectors, compiled once."""
        return jax.jit(jax.vmap(self.constrain))

    @property
    def remedy_note(self) -> str | None:
        """What the evidence warning adds for this model: its centered hierarchical variables
        and how to non-center them (the evidence is unchanged), or None."""
        try:
            names = centered_variables(self.model)
        except Exception:  # a graph this reading does not know: no note, never a failed call
            return None
        if not names:
            return None
        n = names[0]
        return (
            f"the scale of {names} depends on other free variables (a centered hierarchy: a "
            "funnel, whose neck the anneals under-explore, leaving the estimate low). "
            "Non-centering changes the coordinates, not the evidence; where the data say little "
            f"about them it removes the neck: e.g. for pm.Normal('{n}', mu, sigma), "
            f"{n}_z = pm.Normal('{n}_z', 0, 1, ...) and "
            f"{n} = pm.Deterministic('{n}', mu + sigma * {n}_z)."
        )

    @cached_property
    def _host_prior(self):
        return _HostPrior(self)

    @property
    def prior(self):
        """The prior as an initial distribution (None when a prior is improper)."""
        return None if self.improper else self._host_prior


class _HostPrior:
    """The prior as an initial distribution: exact draws by PyMC on the host, density in JAX."""

    jittable = False  # pm.draw runs compiled PyTensor code, not JAX: the core calls it as is

    def __init__(self, target: PyMCTarget):
        self.target = target
        self.dim = target.dim

    def __hash__(self):
        return hash(self.target)

    def __eq__(self, other):
        return type(other) is type(self) and other.target == self.target

    def sample(self, rng_key, sample_shape=()):
        seed = host_randint(rng_key, 0, 2**31 - 1)  # JAX's draw, without compiling it
        shape = sample_shape_of(sample_shape)
        draws = self.target.sample_prior(num_draws(shape), seed)
        return jnp.asarray(draws).reshape(shape + (self.dim,))

    def log_prob(self, z):
        return self.target.log_prior(z)


def _value(var):
    """The value of an observed variable's data node: a constant's or a shared variable's."""
    return var.data if hasattr(var, "data") else var.get_value(borrow=True)


def _with_data(target: PyMCTarget, data: tuple) -> PyMCTarget:
    """A copy of ``target`` over ``data`` (its compiled programs shared), without the fits
    cached on the original (they belong to its data)."""
    new = copy.copy(target)
    new.__dict__.pop("_ppl_hais_targets", None)
    new._data = data
    return new


# a pytree whose leaves are the observed values (ppl_hais.runtime.structure): the annealer
# compiles once per model structure, the data its arguments
jax.tree_util.register_pytree_node(PyMCTarget, lambda t: (t._data, t), lambda t, d: _with_data(
    t, tuple(d)))


# What is built once per model, kept beside it rather than written onto it: entries go with
# their model (weak keys); neither holds the model strongly. They change no result, only what a
# second call on the same model compiles.
_GRAPHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its log densities
_TARGETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its PyMCTarget


def _fingerprint(model):
    """What the compiled target depends on: the variables and the current values of every
    shared variable in the model's graph, named (``pm.Data``) or not (``pytensor.shared``);
    observed values are inputs of the graph, not in it. ``jaxified_graph`` bakes the shared
    values in as constants, so a changed value must recompile."""
    names, _, shared_vars, _ = _graphs(model)
    shared = []
    for var in shared_vars:
        value = np.asarray(var.get_value(borrow=True))
        digest = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()
        shared.append((var.name, str(value.dtype), value.shape, digest))
    return names, tuple(shared)


def _graphs(model):
    """(names, [log prior, log likelihood, *deterministics], the shared variables they read,
    random generators aside, the inputs that stand for the observed values), built once per
    set of variables: each graph cost 0.1-0.25 s to build, and the fingerprint and the target
    both need them. A new variable changes the names; new data (``pm.set_data``) changes a
    value, not the graphs.

    The log densities are built with a fresh input as each observed variable's value (the
    model's own mapping of variables to values, swapped for the build): replacing the data
    constant in the finished graph would also replace every equal constant PyTensor merged
    with it (a model's ``0.0 * x`` folded to zeros, over zeros as data)."""
    names = tuple(model.named_vars)
    hit = _GRAPHS.get(model)
    if hit is None or hit[0] != names:
        observed = list(model.observed_RVs)
        values = [model.rvs_to_values[rv] for rv in observed]
        inputs = [v.type(name=f"{rv.name}_observed_input") for rv, v in
                  zip(observed, values, strict=True)]  # fmt: skip
        try:
            model.rvs_to_values.update(zip(observed, inputs, strict=True))
            outputs = [model.varlogp, model.datalogp]
        finally:
            model.rvs_to_values.update(zip(observed, values, strict=True))
        outputs += list(model.deterministics)
        found = [
            var
            for var in graph_inputs(outputs)
            if isinstance(var, SharedVariable)
            and not isinstance(var.get_value(borrow=True), np.random.Generator)
        ]
        _GRAPHS[model] = hit = (names, outputs, found, inputs)
    return hit


def log_likelihood_of_data(model):
    """The model's log likelihood as a compiled function of its observed values (in
    ``model.observed_RVs``' order), for a model without free variables: its exact evidence."""
    import pytensor

    _, outputs, _, inputs = _graphs(model)
    return pytensor.function(inputs, outputs[1])


def is_bambi(model) -> bool:
    """Whether ``model`` is a Bambi model (it builds a PyMC model in its ``backend``)."""
    return model is not None and not isinstance(model, pm.Model) and hasattr(model, "backend")


def pymc_model(model):
    """A pm.Model from ``model``: itself, a Bambi model's (built if it is not), or the one of
    the ``with`` context."""
    if is_bambi(model):
        if getattr(model, "backend", None) is None or not hasattr(model.backend, "model"):
            model.build()
        return model.backend.model
    return pm.modelcontext(model)


def cached_target(model) -> PyMCTarget:
    """One PyMCTarget per model (and data): a second call on the same model reuses the compiled
    JAX graphs and the annealer's compiled scans instead of compiling them again."""
    key = _fingerprint(model)
    hit = _TARGETS.get(model)
    if hit is not None and hit[0] == key:
        return hit[1]
    target = PyMCTarget(model)
    target._model = weakref.ref(model)  # the entry must not keep its own key alive
    _TARGETS[model] = (key, target)
    return target


