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

import hashlib
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
from ppl_hais.model.target import num_draws, sample_shape_of

from .prior import PriorSampler
from .rewrites import jaxified_graph


class PyMCTarget(SplitDensity):
    """A PyMC model as flat log prior / log likelihood over its transformed value variables."""

    def __init__(self, model, needs_likelihood=True):
        self.model = model
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
        # through jit, so the graph is traced once per shape, not once per program using it
        # (pilots, main run, Laplace fit, bias check)
        self._graph = _graphs(model)[1][:2]  # log prior, log likelihood
        self._baked = _fingerprint(model)  # the shared variables' values the graph bakes in
        self._logp = jax.jit(jaxified_graph(self.value_vars, self._graph))
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
        return bool(equal_computations(self._graph, other._graph, in_xs=self.value_vars,
                                       in_ys=other.value_vars))  # fmt: skip

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
        prior, lik = self._logp(*self.unravel(z))
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


def _ancestors(outputs):
    try:
        from pytensor.graph.traversal import ancestors
    except ImportError:  # PyTensor before 2.32
        from pytensor.graph.basic import ancestors
    return ancestors(outputs)


def check_inputs(model):
    """Refuse an array written into the model with NaN values that enters the observed
    variables' distributions, a predictor with missing entries: the density is NaN wherever
    they enter, and no run could weigh its particles (``pm.Data`` refuses NaN itself)."""
    observed = set(model.observed_RVs)
    for rv in model.observed_RVs:
        for var in _ancestors(rv.owner.inputs):
            value = getattr(var, "data", None)  # a TensorConstant's
            if value is None and hasattr(var, "get_value"):  # pm.Data, a shared variable
                value = var.get_value(borrow=True)
            x = np.asarray(value) if value is not None else None
            # arrays only: a scalar inf or NaN is how graphs write bounds and guards
            if (x is None or var in observed or x.ndim == 0
                    or not np.issubdtype(x.dtype, np.floating) or not np.isnan(x).any()):
                continue
            what = f"pm.Data '{var.name}'" if var.name else f"an array of shape {x.shape}"
            raise ValueError(
                f"{what} that enters observed variable '{rv.name}' has "
                f"{int(np.sum(np.isnan(x)))} NaN value(s): the model's density is NaN "
                "wherever they enter, so no run could weigh its particles. Impute them or drop "
                "the rows that hold them (missing observations, rather than predictors, PyMC "
                "imputes when observed= holds NaN)."
            )


_LOC_SCALE = ("NormalRV", "StudentTRV", "CauchyRV", "LaplaceRV")  # scale: the last parameter


def centered_variables(model) -> list[str]:
    """The free variables of a location-scale family whose scale depends on other free
    variables (a hierarchical prior written centered: a funnel)."""
    free = set(model.free_RVs)
    found = []
    for rv in model.free_RVs:
        node = rv.owner
        if type(node.op).__name__ in _LOC_SCALE:
            scale = node.op.dist_params(node)[-1]
            if any(a in free for a in _ancestors([scale])):
                found.append(rv.name)
    return found


def _fingerprint(model):
    """What the compiled target depends on: the variables and the current values of every
    shared variable in the model's graph, named (``pm.Data``) or not (``pytensor.shared``).
    ``jaxified_graph`` bakes them in as constants, so a changed value must recompile."""
    names, _, shared_vars = _graphs(model)
    shared = []
    for var in shared_vars:
        value = np.asarray(var.get_value(borrow=True))
        digest = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()
        shared.append((var.name, str(value.dtype), value.shape, digest))
    return names, tuple(shared)


def _graphs(model):
    """(names, [log prior, log likelihood, *deterministics], the shared variables they read,
    random generators aside), built once per set of variables: each graph cost 0.1-0.25 s to
    build, and the fingerprint and the target both need them. A new variable changes the
    names; new data (``pm.set_data``) changes a value, not the graphs."""
    names = tuple(model.named_vars)
    hit = getattr(model, "_ppl_hais_graphs", None)
    if hit is None or hit[0] != names:
        outputs = [model.varlogp, model.datalogp, *model.deterministics]
        found = [
            var
            for var in graph_inputs(outputs)
            if isinstance(var, SharedVariable)
            and not isinstance(var.get_value(borrow=True), np.random.Generator)
        ]
        model._ppl_hais_graphs = hit = (names, outputs, found)
    return hit


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
    hit = getattr(model, "_ppl_hais_target", None)  # kept on the model: freed with it
    if hit is not None and hit[0] == key:
        return hit[1]
    target = PyMCTarget(model)
    model._ppl_hais_target = (key, target)
    return target


