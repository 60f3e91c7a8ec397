"""PyMC adapter: ``sample_hais()``, a drop-in for ``pm.sample_smc`` with an error bar.

>>> import numpy as np, pymc as pm
>>> from ppl_hais.adapters import pymc as php
>>> with pm.Model() as model:
...     mu = pm.Normal("mu", 0.0, 2.0)
...     y = pm.Normal("y", mu, 1.0, observed=np.array([0.3, -0.5, 1.1]))
...     idata = php.sample_hais(draws=128, num_steps=300, random_seed=0, progressbar=False)
>>> round(float(idata.sample_stats["log_marginal_likelihood"][0]), 1)   # exact: -4.69
-4.7

The model is split as ``pm.sample_smc`` tempers it: the initial distribution is the prior over
the transformed (unconstrained) value variables, ``model.varlogp`` (Jacobians included); the
likelihood is ``model.datalogp`` (observed variables **and Potentials**: a Potential has no
prior to draw from, so it is annealed). Both are compiled to JAX with PyMC's own
``get_jaxified_graph`` and annealed by the ppl_hais core.
"""

from __future__ import annotations

import hashlib
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np
import pymc as pm

# PyMC module functions that `pm.` does not re-export (no public equivalent on PyMC 5.28 or 6.4):
# the coords/dims/observed/constant helpers pm.sample uses for its own ArviZ output, the prior
# initial-point expression pm.sample_smc draws its population with, the JAX graph of
# pymc.sampling.jax. Same names and behaviour on both versions, pinned by tests/test_pymc.py
# (evidence against exact values, coords/dims) and tests/test_stack.py (constant_data).
from pymc.backends.arviz import coords_and_dims_for_inferencedata, find_constants, find_observations
from pymc.initial_point import make_initial_point_expression
from pymc.pytensorf import collect_default_updates, reseed_rngs
from pymc.pytensorf import compile as compile_pytensor
from pymc.sampling.jax import get_jaxified_graph
from pymc.util import get_default_varnames
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph import graph_inputs

import ppl_hais as ph
from ppl_hais.arviz import from_ais, from_mcmc
from ppl_hais.evidence import evidence
from ppl_hais.precision import float64

__all__ = ["sample_hais", "sample_reduced_flip_hmc", "PyMCTarget"]


class PyMCTarget:
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
        self._logp = get_jaxified_graph(
            inputs=self.value_vars, outputs=[model.varlogp, model.datalogp]
        )
        self._outputs = list(
            get_default_varnames(model.unobserved_value_vars, include_transformed=False)
        )
        self._constrain = get_jaxified_graph(inputs=self.value_vars, outputs=self._outputs)

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

    def log_prior(self, z):
        return self.log_parts(z)[0]

    def log_likelihood(self, z):
        return self.log_parts(z)[1]

    def log_joint(self, z):
        prior, lik = self.log_parts(z)
        return prior + lik

    def sample_prior(self, num, seed):
        """Exact prior draws in the transformed space, as pm.sample_smc draws its population."""
        if self.improper:
            raise ValueError(
                f"variable(s) {self.improper} have an improper prior (pm.Flat/pm.HalfFlat) that "
                "cannot be sampled: pass initial='laplace' or initial=ph.Gaussian(mean, scale) "
                f"over the {self.dim} transformed coordinates."
            )
        draw_one, rngs = self._prior_sampler
        reseed_rngs(rngs, seed)
        draws = [draw_one() for _ in range(num)]  # as pm.draw does, without compiling each call
        # make_initial_point_expression follows free_RVs order = value_vars order
        return self.ravel(
            [
                np.stack([np.asarray(d[i]) for d in draws]).reshape((num,) + shape)
                for i, shape in enumerate(self.shapes)
            ]
        )

    @cached_property
    def _prior_sampler(self):
        """One compiled PyTensor function for a prior draw in the transformed space, and its
        random generators (reseeded per call): pm.draw would compile it on every call."""
        expr = make_initial_point_expression(
            free_rvs=self.model.free_RVs,
            rvs_to_transforms=self.model.rvs_to_transforms,
            initval_strategies={},
            default_strategy="prior",
            return_transformed=True,
        )
        rngs = list(collect_default_updates(inputs=[], outputs=expr))
        return compile_pytensor(inputs=[], outputs=expr), rngs

    def constrain(self, z):
        return self._constrain(*self.unravel(z))

    @cached_property
    def constrain_batch(self):
        """Constrained values (and deterministics) of a batch of flat vectors, compiled once."""
        return jax.jit(jax.vmap(self.constrain))

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

    def sample(self, rng_key, num):
        seed = int(jax.random.randint(rng_key, (), 0, 2**31 - 1))
        return jnp.asarray(self.target.sample_prior(num, seed))

    def log_density(self, z):
        return self.target.log_prior(z)


def _fingerprint(model):
    """What the compiled target depends on: the variables and the current values of every
    shared variable in the model's graph, named (``pm.Data``) or not (``pytensor.shared``).
    ``get_jaxified_graph`` bakes them in as constants, so a changed value must recompile."""
    outputs = [model.varlogp, model.datalogp, *model.deterministics]
    shared = []
    for var in graph_inputs(outputs):
        if isinstance(var, SharedVariable) and not isinstance(
            var.get_value(borrow=True), np.random.Generator
        ):
            value = np.asarray(var.get_value(borrow=True))
            digest = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()
            shared.append((var.name, str(value.dtype), value.shape, digest))
    return tuple(model.named_vars), tuple(shared)


def _cached_target(model) -> PyMCTarget:
    """One PyMCTarget per model (and data): a second call on the same model reuses the compiled
    JAX graphs and the annealer's compiled scans instead of compiling them again."""
    key = _fingerprint(model)
    hit = getattr(model, "_ppl_hais_target", None)  # kept on the model: freed with it
    if hit is not None and hit[0] == key:
        return hit[1]
    target = PyMCTarget(model)
    model._ppl_hais_target = (key, target)
    return target


# pm.sample_smc's keywords that have no meaning here, and what to use instead
_SMC_ONLY = {
    "kernel": "HAIS moves particles by persistent-momentum HMC; tune it with step_size=/refresh=",
    "start": "annealing starts from the initial distribution: use initial=",
    "threshold": "the temperatures are set by schedule= (equal thermodynamic length by default)",
    "correlation_threshold": "the number of temperatures is num_steps=",
    "blas_cores": "sample_hais runs the model compiled to JAX, not PyTensor's C backend",
    "backend": "sample_hais compiles the model to JAX itself",
    "compile_kwargs": "sample_hais compiles the model to JAX itself",
    "mp_ctx": "chains run in this process (vectorized over particles), not in subprocesses",
    "progressbar_theme": "the progress bar is tqdm's",
}


def _check_arguments(model, draws, chains, cores, return_inferencedata, smc_kwargs):
    if model is not None and not isinstance(model, pm.Model):
        hint = (
            " (a NumPyro model function? use ppl_hais.adapters.numpyro.HAIS)"
            if callable(model)
            else ""
        )
        raise TypeError(f"model must be a pm.Model, got {type(model).__name__}{hint}")
    for name in smc_kwargs:
        reason = _SMC_ONLY.get(name, "it is not a keyword of sample_hais")
        raise TypeError(f"sample_hais does not take {name}=: {reason}")
    if not return_inferencedata:
        raise ValueError(
            "return_inferencedata=False (a MultiTrace) is not supported: sample_hais returns "
            "ArviZ output (DataTree on ArviZ >= 1, InferenceData on 0.x)"
        )
    for name, value in (("draws", draws), ("chains", chains)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if cores is not None and (isinstance(cores, bool) or int(cores) != cores or cores < 1):
        raise ValueError(f"cores must be a positive integer or None, got {cores!r}")


@float64
def sample_hais(
    draws: int = 1000,
    num_steps: int = 1000,
    *,
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    model=None,
    progressbar: bool = True,
    compute_convergence_checks: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    schedule="adaptive",
    step_size="auto",
    refresh: float = 0.5,
    initial="auto",
    bidirectional: bool = False,
    target_se: float | None = None,
    **smc_kwargs,
):
    """Log marginal likelihood and posterior of a PyMC model by HAIS, like ``pm.sample_smc``.

    Parameters
    ----------
    draws : int
        Particles per chain (as in ``pm.sample_smc``); the posterior has ``draws`` resampled
        draws per chain.
    num_steps : int
        Number of temperatures.
    chains : int, optional
        Independent runs (their evidence estimates are pooled by ``ph.compare_evidence``);
        default 1 (each chain is already ``draws`` independent annealing runs).
    cores : int, optional
        Accepted as ``pm.sample_smc`` accepts it; the chains run one after another in this
        process, each vectorized over its particles and split over the CPU cores by the driver.
    random_seed : int, optional
    model : pm.Model, optional
        Default: the model from the ``with`` context.
    progressbar : bool
    schedule, step_size, refresh
        As in :func:`ppl_hais.hais`. The default schedule places the temperatures at equal
        thermodynamic length and the step size follows a target acceptance, both measured on
        a discarded pilot run before the main run (the estimate stays unbiased).
    initial : "auto", "prior", "laplace" or ph.Gaussian
        Where annealing starts. ``"auto"`` (default) runs the discarded pilot from the prior
        and from a Gaussian fitted at the posterior mode and keeps the one whose weights
        degenerate less (:func:`ppl_hais.evidence.choose_initial`); ``"prior"`` needs proper
        priors; or a given Gaussian over the transformed coordinates. The estimate is of
        p(data | model) with the model's own prior whatever the start.
    bidirectional : bool
        Also anneal back from a quarter of the final particles and report the gap
        (``log_marginal_likelihood_upper`` in sample_stats; a bias diagnostic).
    target_se : float, optional
        Choose the number of temperatures for this standard error of the log evidence (a
        discarded 200-temperature probe measures how hard the path is; ``num_steps`` is then
        ignored): easy models cost little, hard ones get up to 100,000 temperatures.
    compute_convergence_checks : bool
        Accepted as ``pm.sample_smc`` accepts it. The evidence's trust checks always run and
        warn: they are what makes the error bar trustworthy.
    return_inferencedata : bool
        Must be True (ArviZ output only).
    idata_kwargs : dict, optional
        ``{"log_likelihood": True}`` adds the pointwise log likelihood (for ``az.loo``).

    Other keywords of ``pm.sample_smc`` (``kernel``, ``start``, ``threshold``, ``backend``,
    ``mp_ctx``, ...) are refused by name with what to use instead.

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ >= 1), as ``pm.sample_smc``
        ``posterior`` (constrained variables and deterministics, model coords/dims),
        ``sample_stats`` with ``log_marginal_likelihood`` and its standard error
        ``log_marginal_likelihood_se`` (dims: chain; ``pm.sample_smc`` stores one object
        array per stage instead; ``inf`` when the weights' variance does not exist),
        ``importance_ess``, ``pareto_k``, ``lag`` and ``evidence_warning`` per chain, the failed
        checks in the group's ``evidence_checks`` attribute; ``observed_data``,
        ``constant_data``. The posterior draws are particles resampled by weight, copies
        side by side, so ``az.ess`` of them stays near the importance ESS.

    A failed trust check (Pareto k̂, importance ESS, chains' agreement) raises
    :class:`ppl_hais.EvidenceWarning` naming the check and the remedy.
    """
    _check_arguments(model, draws, 1 if chains is None else chains, cores, return_inferencedata,
                     smc_kwargs)  # fmt: skip
    chains = 1 if chains is None else int(chains)
    model = pm.modelcontext(model)
    seed = np.random.default_rng(random_seed).integers(2**31 - 1)
    target = _cached_target(model)
    key_run, key_draws = jax.random.split(jax.random.key(int(seed)))
    ev = evidence(
        key_run,
        target,
        initial=initial,
        num_chains=chains,
        num_particles=draws,
        num_steps=num_steps,
        schedule=schedule,
        step_size=step_size,
        refresh=refresh,
        bidirectional=bidirectional,
        target_se=target_se,
        progress_bar=progressbar,
    )
    results = ev.results
    idx = ev.resample(key_draws)
    zs = np.stack([r.particles[i] for r, i in zip(results, idx, strict=True)])
    values = target.constrain_batch(jnp.asarray(zs.reshape(-1, target.dim)))
    posterior = {
        v.name: np.asarray(val).reshape((chains, draws) + np.shape(val)[1:])
        for v, val in zip(target._outputs, values, strict=True)
    }
    coords, dims = coords_and_dims_for_inferencedata(model)
    idata = from_ais(
        results,
        posterior,
        observed_data=find_observations(model),
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
        library="ppl_hais (pymc)",
        checks=ev.checks,
        initial=ev.initial,
    )
    if (idata_kwargs or {}).get("log_likelihood", False):
        pm.compute_log_likelihood(idata, model=model, progressbar=False)
    return idata


@float64
def sample_reduced_flip_hmc(
    draws: int = 1000,
    tune: int = 1000,
    *,
    chains: int = 4,
    random_seed=None,
    model=None,
    progressbar: bool = True,
    step_size: float | None = None,
    num_steps: int = 1,
    lookahead: int = 1,
    flips: str = "reduced",
    refresh: float = 0.5,
    target_accept: float = 0.9,
    thinning: int = 1,
    idata_kwargs: dict | None = None,
):
    """Sample a PyMC model with HMC with reduced momentum flips, like ``pm.sample``.

    Persistent-momentum HMC (``num_steps`` leapfrog steps per transition, a fraction
    ``refresh`` of the momentum power replaced per unit time) whose rejections negate the
    momentum only as often as invariance needs (seed 001 ch. 6), optionally trying
    ``lookahead`` trajectories first (LAHMC). ``tune`` warmup iterations adapt the step size
    (toward ``target_accept``) and a diagonal mass matrix; chains run vectorized in one
    compiled call (:func:`ppl_hais.mcmc.sample`).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` (constrained variables and deterministics, model coords/dims),
        ``sample_stats`` (``acceptance_rate``, ``step_size``, ``diverging``, ``lp``,
        ``n_steps`` = gradients per draw, ``is_flipped``, ``lookahead_depth``),
        ``observed_data``, ``constant_data``; ``log_likelihood`` with
        ``idata_kwargs={"log_likelihood": True}``.

    Example
    -------
    >>> import pymc as pm
    >>> from ppl_hais.adapters import pymc as php
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     pm.Normal("y", mu, 1.0, observed=[0.2, 0.4])
    ...     idata = php.sample_reduced_flip_hmc(draws=200, tune=200, chains=2,
    ...                                         random_seed=1, progressbar=False)
    >>> idata.posterior["mu"].shape
    (2, 200)
    """
    if model is not None and not isinstance(model, pm.Model):
        raise TypeError(f"model must be a pm.Model, got {type(model).__name__}")
    if isinstance(chains, bool) or int(chains) != chains or chains < 1:
        raise ValueError(f"chains must be a positive integer, got {chains!r}")
    model = pm.modelcontext(model)
    rng = np.random.default_rng(random_seed)
    target = PyMCTarget(model, needs_likelihood=False)
    if target.discrete:
        raise ValueError(
            f"discrete free variable(s) {target.discrete_names}: HMC moves continuous "
            "variables only. Use pm.sample (it assigns a Metropolis step to them), or "
            "marginalize them out; php.sample_hais anneals them for the evidence."
        )
    # start like pm.sample's "jitter+adapt_diag": the initial point plus U(-1, 1) jitter
    point = model.initial_point()
    start = target.ravel([np.asarray(point[n])[None] for n in target.names])[0]
    x0 = start[None, :] + rng.uniform(-1.0, 1.0, size=(chains, target.dim))
    logp = jax.jit(jax.vmap(target.log_joint))(jnp.asarray(x0))
    x0 = np.where(np.isfinite(np.asarray(logp))[:, None], x0, start[None, :])
    result = ph.mcmc.sample(
        jax.random.key(int(rng.integers(2**31 - 1))),
        target.log_joint,
        x0,
        num_warmup=tune,
        num_samples=draws,
        step_size=step_size,
        num_steps=num_steps,
        lookahead=lookahead,
        flips=flips,
        refresh=refresh,
        target_accept=target_accept,
        thinning=thinning,
        progress_bar=progressbar,
    )
    values = target.constrain_batch(jnp.asarray(result.samples.reshape(-1, target.dim)))
    posterior = {
        v.name: np.asarray(val).reshape((chains, draws) + np.shape(val)[1:])
        for v, val in zip(target._outputs, values, strict=True)
    }
    st = result.stats
    sample_stats = {
        "acceptance_rate": st["acceptance_rate"],
        "step_size": np.broadcast_to(result.step_size[:, None], (chains, draws)),
        "diverging": st["is_divergent"],
        "lp": st["logdensity"],
        "n_steps": st["num_gradients"],
        "is_flipped": st["is_flipped"],
        "lookahead_depth": st["lookahead_depth"],
    }
    coords, dims = coords_and_dims_for_inferencedata(model)
    idata = from_mcmc(
        posterior,
        sample_stats,
        observed_data=find_observations(model),
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
        attrs={
            "sampling_time": result.wall_time,
            "tuning_steps": tune,
            "sampler": f"reduced-flip HMC (lookahead={lookahead}, flips={flips})",
        },
        library="ppl_hais (pymc)",
    )
    if (idata_kwargs or {}).get("log_likelihood", False):
        pm.compute_log_likelihood(idata, model=model, progressbar=False)
    return idata
