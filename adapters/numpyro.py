"""NumPyro adapter: the evidence of a continuous NumPyro model in one call.

>>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from ppl_hais.adapters import numpyro as phn
>>> def model(y=None):
...     mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
>>> hais = phn.HAIS(model, num_particles=128, num_steps=300, progress_bar=False)
>>> hais.run(jax.random.key(0), y=jnp.array([0.3, -0.5, 1.1]))
>>> round(hais.log_evidence, 1)   # exact: -4.69
-4.7

The model is split as NumPyro's own potential energy is built (``_unconstrain_params`` +
``compute_log_probs``): the **initial distribution** is the prior in unconstrained space (latent
sites and the log-Jacobians of ``biject_to(support)``), the **likelihood** is every observed site
plus every ``numpyro.factor`` (a factor has no prior to draw from, so it is annealed, as
``pm.sample_smc`` does with Potentials). Then log Z = log p(data | model).
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer.util import (
    _unconstrain_params,
    compute_log_probs,
    constrain_fn,
    init_to_uniform,
    potential_energy,
)
from numpyro.infer.util import log_likelihood as _pointwise_log_likelihood

import ppl_hais as ph
from ppl_hais.adapters._numpyro_exchange import BoundedEnergyDist, Exchange  # noqa: F401
from ppl_hais.adapters._numpyro_mcmc import ReducedFlipHMC, ReducedFlipHMCState  # noqa: F401
from ppl_hais.arviz import from_ais
from ppl_hais.evidence import evidence
from ppl_hais.precision import float64
from ppl_hais.random import check_key
from ppl_hais.structure import compile_once, merge, split

__all__ = [
    "HAIS",
    "bdmc",
    "BoundedEnergyDist",
    "Exchange",
    "ReducedFlipHMC",
    "NumPyroTarget",
    "guide_initial",
]


# ---------------------------------------------------------------------------------------------
# model -> flat densities


def _base(fn):
    while True:
        inner = getattr(fn, "base_dist", None)
        if inner is None or inner is fn:
            return fn
        fn = inner


class _MissingData(numpyro.primitives.Messenger):
    """Missing observations the NumPyro way, made exact for the evidence.

    - An observed site under a mask (``handlers.mask`` or ``obs_mask``) may hold NaN where the
      mask is False: those entries are replaced by a value in the support (they are masked out
      of the likelihood either way, but a NaN there would make the gradient NaN).
    - ``obs_mask`` adds a latent site ``{name}_unobserved`` masked to the missing entries: its
      other entries are free coordinates with a flat density, which no normalized initial
      distribution covers. Unmasking it gives them the site's own (normalized) distribution;
      they enter nothing else, so they integrate to 1 and the estimate stays p(observed data).
    """

    def __init__(self, fn=None):
        self._observed = set()
        super().__init__(fn)

    def __enter__(self):
        self._observed = set()
        return super().__enter__()

    def process_message(self, msg):
        if msg["type"] != "sample":
            return
        fn = msg["fn"]
        if msg["is_observed"] and isinstance(fn, dist.MaskedDistribution):
            if msg["name"].endswith("_observed"):
                self._observed.add(msg["name"][: -len("_observed")])
            value = msg["value"]
            if value is not None and jnp.issubdtype(jnp.result_type(value), jnp.floating):
                mask = jnp.broadcast_to(
                    jnp.reshape(fn._mask, jnp.shape(fn._mask) + (1,) * fn.event_dim),
                    jnp.shape(value),
                )
                feasible = fn.support.feasible_like(value)
                msg["value"] = jnp.where(mask | ~jnp.isnan(value), value, feasible)
        elif (
            not msg["is_observed"]
            and isinstance(fn, dist.MaskedDistribution)
            and msg["name"].endswith("_unobserved")
            and msg["name"][: -len("_unobserved")] in self._observed
        ):
            msg["fn"] = fn.base_dist


def _with_missing_data(model):
    def wrapped(*args, **kwargs):
        with _MissingData():
            return model(*args, **kwargs)

    return wrapped


def _check_sites(tr):
    """Refuse what a prior/likelihood split cannot honour, naming the site and the remedy."""
    latent, observed, factors, improper, enumerated = [], [], [], [], []
    for name, site in tr.items():
        if site["type"] == "param":
            raise ValueError(
                f"site '{name}' is a numpyro.param: HAIS integrates over latent variables only. "
                "Give it a prior (numpyro.sample) or fix it with handlers.substitute/condition."
            )
        if site["type"] == "plate":
            size, subsample_size = site["args"][:2]
            if subsample_size is not None and subsample_size != size:
                raise ValueError(
                    f"plate '{name}' has subsample_size={subsample_size} < size={size}: the "
                    "evidence needs the full data; remove subsample_size."
                )
        if site["type"] != "sample":
            continue
        if site["is_observed"]:
            if isinstance(_base(site["fn"]), dist.Unit):
                factors.append(name)
                continue
            bad = int(np.sum(~np.isfinite(np.asarray(site["value"], dtype=float))))
            if bad:
                raise ValueError(
                    f"observed site '{name}' has {bad} NaN/inf value(s) that are not masked: "
                    "drop them, or mark them missing with obs_mask=~jnp.isnan(y) (the "
                    "evidence is then that of the observed entries)."
                )
            observed.append(name)
            continue
        fn = site["fn"]
        if fn.support.is_discrete:
            enumerated.append(_check_enumerable(name, site))
            continue
        if site["scale"] is not None and not np.all(np.asarray(site["scale"]) == 1):
            raise ValueError(
                f"latent site '{name}' has scale {site['scale']}: a scaled prior is not a "
                "normalized distribution, so the evidence would be wrong; remove the scale."
            )
        mask = site.get("mask")
        if isinstance(fn, dist.MaskedDistribution) or (mask is not None and mask is not True):
            raise ValueError(
                f"latent site '{name}' is masked: a masked prior is not normalized. Mask the "
                "observed sites instead, or split the latent site."
            )
        if isinstance(_base(fn), dist.ImproperUniform):
            improper.append(name)
        latent.append(name)
    if not observed and not factors:
        raise ValueError(
            "the model has neither an observed site (obs=...) nor a numpyro.factor: there is "
            "no likelihood, so the evidence is 1. Pass the data to run(...)."
        )
    if not latent:
        raise ValueError(
            "the model has no continuous latent sample site to integrate over"
            + (f" (its discrete site(s) {enumerated} are summed out)" if enumerated else "")
        )
    return latent, observed, factors, improper, enumerated


_MAX_ENUMERATED = 100_000  # values of one enumerated site: more is refused (memory per particle)


def _support_size(fn) -> int:
    """How many values a discrete site's enumeration holds, without building it."""
    base = _base(fn)
    if hasattr(base, "low") and hasattr(base, "high"):  # DiscreteUniform
        return int(np.max(np.asarray(base.high)) - np.min(np.asarray(base.low)) + 1)
    if hasattr(base, "total_count"):  # Binomial and relatives
        return int(np.max(np.asarray(base.total_count)) + 1)
    return int(np.shape(fn.enumerate_support(expand=False))[0])


def _check_enumerable(name, site) -> str:
    """A discrete latent site that NumPyro's enumeration can sum out, or a clear refusal."""
    fn = site["fn"]
    kind = type(_base(fn)).__name__
    if not fn.has_enumerate_support:
        raise ValueError(
            f"latent site '{name}' is discrete ({kind}) with an unbounded support, which cannot "
            "be enumerated: marginalize it out analytically in the model (e.g. a Poisson count "
            "under a Poisson likelihood) or condition on it."
        )
    if site["infer"].get("enumerate") != "parallel":
        raise ValueError(
            f"latent site '{name}' is discrete ({kind}): mark it for enumeration with "
            "infer={'enumerate': 'parallel'} or decorate the model with "
            "numpyro.contrib.funsor.config_enumerate. HAIS then sums it out exactly, as "
            "NUTS does, anneals the continuous sites, and draws it afterwards (infer_discrete)."
        )
    size = _support_size(fn)
    if size > _MAX_ENUMERATED:
        raise ValueError(
            f"latent site '{name}' ({kind}) has {size} values to enumerate (more than "
            f"{_MAX_ENUMERATED}): every density evaluation would hold that many terms per "
            "particle. Marginalize it analytically, coarsen it, or reparameterize."
        )
    try:
        import funsor  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"latent site '{name}' is enumerated, which needs funsor: "
            "pip install 'ppl_hais[numpyro]' (or pip install funsor)"
        ) from err
    return name


class _MaskSites(numpyro.primitives.Messenger):
    """Zero the log density of the named sites (the observed ones: what remains, with the
    discrete sites enumerated, is the marginal prior of the continuous sites)."""

    def __init__(self, fn=None, names=()):
        self.names = frozenset(names)
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["name"] in self.names:
            msg["fn"] = msg["fn"].mask(False)


def _plate_nesting(tr, enumerated) -> int:
    """The number of plates a site sits in, at most; with enumerated sites, every batch
    dimension must be a plate's (enumeration allocates its dimensions left of them)."""
    for name, site in tr.items():
        if enumerated and site["type"] == "sample":
            plates = len(site["cond_indep_stack"])
            if len(site["fn"].batch_shape) > plates:
                raise ValueError(
                    f"site '{name}' has batch shape {tuple(site['fn'].batch_shape)} but sits in "
                    f"{plates} plate(s): with enumerated discrete sites ({list(enumerated)}) "
                    "every batch dimension must be declared by a numpyro.plate (or moved to the "
                    "event shape with .to_event), as for NUTS's enumeration."
                )
    return max(
        (len(site["cond_indep_stack"]) for site in tr.values() if site["type"] == "sample"),
        default=0,
    )


class _Structure:
    """What a NumPyroTarget keeps across runs of one model on data of the same shapes: the
    model, the static part of its arguments, and the latent sites' flattening. One object per
    such key (kept in ``_STRUCTURES``), so equal keys give equal pytree definitions and the
    compiled scans are reused. ``baked`` holds the data itself for a model that cannot run on
    traced data (then every new data set compiles anew, as before)."""

    def __init__(
        self, model, data_structure, latent, observed, factors, improper, enumerated, unravel,
        dim, nesting=0,
    ):  # fmt: skip
        self.model = _with_missing_data(model)
        self.enumerated = enumerated
        if enumerated:
            from numpyro.contrib.funsor import config_enumerate, enum

            first = -nesting - 1
            self.enum_model = enum(config_enumerate(self.model), first_available_dim=first)
            masked = _MaskSites(self.model, names=tuple(observed) + tuple(factors))
            self.enum_prior = enum(config_enumerate(masked), first_available_dim=first)
            self.first_available_dim = first
        self.data_structure = data_structure
        self.latent, self.observed, self.factors, self.improper = (
            latent,
            observed,
            factors,
            improper,
        )
        self.unravel = unravel
        self.dim = dim
        self.prior_names = set(latent) | {f"_{n}_log_det" for n in latent}
        self.baked = None


_STRUCTURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _structure_for(
    model, args, kwargs, sites, unravel, dim, shapes, nesting
) -> tuple[_Structure, list]:
    data_structure, arrays = split((tuple(args), dict(kwargs)))
    key = (data_structure, sites, shapes)
    try:
        per_model = _STRUCTURES.setdefault(model, {})
    except TypeError:  # a model that cannot be weakly referenced: no reuse across objects
        per_model = {}
    st = per_model.get(key)
    if st is None:
        st = _Structure(model, data_structure, *sites, unravel, dim, nesting)
        per_model[key] = st
    return st, arrays


class NumPyroTarget:
    """A NumPyro model seen as flat log prior / log likelihood over unconstrained z.

    ``log_prior(z)`` includes the log-Jacobians of the constraining transforms; the order of z is
    ``jax.flatten_util.ravel_pytree`` of the dict of unconstrained latent values (sorted names).

    A pytree: its leaves are the array arguments of the model (the data), everything else is
    static, so the driver compiles once per model and data *shapes* (NumPyro's
    ``jit_model_args``); a model that cannot run on traced data (Python control flow on data
    values) falls back to compiling per data set.
    """

    def __init__(self, model, model_args=(), model_kwargs=None, rng_key=None):
        args, kwargs = tuple(model_args), dict(model_kwargs or {})
        key = jax.random.key(0) if rng_key is None else rng_key
        seeded = handlers.seed(_with_missing_data(model), key)
        try:
            tr = handlers.trace(seeded).get_trace(*args, **kwargs)
        except NotImplementedError:
            # ImproperUniform cannot be sampled: find the sites with NumPyro's own init strategy
            tr = handlers.trace(
                handlers.substitute(seeded, substitute_fn=init_to_uniform)
            ).get_trace(*args, **kwargs)
        sites = tuple(tuple(x) for x in _check_sites(tr))
        unconstrained = {n: biject_to(tr[n]["fn"].support).inv(tr[n]["value"]) for n in sites[0]}
        flat, unravel = ravel_pytree(unconstrained)
        shapes = tuple((n, tuple(jnp.shape(v))) for n, v in sorted(unconstrained.items()))
        nesting = _plate_nesting(tr, sites[4])
        self._st, self._arrays = _structure_for(
            model, args, kwargs, sites, unravel, int(flat.size), shapes, nesting
        )
        if self._st.baked is None and self._arrays and not self._runs_traced(flat):
            self._st = _Structure(model, None, *sites, unravel, int(flat.size), nesting)
            self._st.baked = (args, kwargs)
            self._arrays = []
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
    dim = property(lambda self: self._st.dim)
    unravel = property(lambda self: self._st.unravel)

    def log_parts(self, z):
        """(log prior incl. Jacobians, log likelihood incl. factors) at flat unconstrained z."""
        return _log_parts(self, z)

    def log_prior(self, z):
        return self.log_parts(z)[0]

    def log_likelihood(self, z):
        return self.log_parts(z)[1]

    def log_joint(self, z):
        prior, lik = self.log_parts(z)
        return prior + lik

    def sample_prior(self, rng_key, num):
        """Exact prior draws, flattened in unconstrained space, (num, D)."""
        if self.improper:
            raise ValueError(
                f"site(s) {self.improper} have an improper prior (ImproperUniform) that cannot "
                "be sampled: pass an explicit initial distribution, e.g. "
                "initial='laplace' or initial=ph.Gaussian(mean, scale) over the "
                f"{self.dim} unconstrained coordinates."
            )
        args, kwargs = self._data

        def one(key):
            tr = handlers.trace(handlers.seed(self.model, key)).get_trace(*args, **kwargs)
            vals = {n: biject_to(tr[n]["fn"].support).inv(tr[n]["value"]) for n in self.latent}
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
    args, kwargs = nt._data
    if nt._st.enumerated:  # discrete sites summed out by NumPyro's enumeration (funsor)
        params = nt.unravel(z)
        joint = -potential_energy(nt._st.enum_model, args, kwargs, params, enum=True)
        prior = -potential_energy(nt._st.enum_prior, args, kwargs, params, enum=True)
        return prior, joint - prior
    log_probs, _ = compute_log_probs(_unconstrain_params(nt.model, nt.unravel(z)), args, kwargs, {})
    names = nt._st.prior_names
    prior = sum((v for k, v in log_probs.items() if k in names), start=0.0)
    lik = sum((v for k, v in log_probs.items() if k not in names), start=0.0)
    return prior, lik


jax.tree_util.register_pytree_node(
    NumPyroTarget,
    lambda nt: (tuple(nt._arrays), nt._st),
    lambda st, arrays: _rebuild(st, arrays),
)


def _rebuild(st, arrays):
    nt = object.__new__(NumPyroTarget)
    nt._st, nt._arrays = st, list(arrays)
    return nt


_constrain_batch = compile_once(lambda nt, flat, keys: jax.vmap(nt.constrain)(flat, keys))


def _refuse_foreign_model(model):
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

    def sample(self, rng_key, num):
        return self.nt.sample_prior(rng_key, num)

    def log_density(self, z):
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
    :class:`~ppl_hais.AISResult` with ``settings["simulated"]`` holding the simulated data
    and the true parameters.
    """
    rng_key = check_key(rng_key)
    _refuse_foreign_model(model)
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
    truth = {n: biject_to(sim[n]["fn"].support).inv(sim[n]["value"]) for n in nt.latent}
    z_true = ravel_pytree(truth)[0]
    target = ph.AnnealingTarget(
        initial=nt.prior, log_likelihood=jax.tree_util.Partial(NumPyroTarget.log_likelihood, nt)
    )
    result = ph.bdmc(
        k_run, target, np.asarray(z_true)[None, :], num_particles=num_particles,
        num_steps=num_steps, progress_bar=False,
    )  # fmt: skip
    result.settings["simulated"] = {
        "data": {k: np.asarray(v) for k, v in data.items()},
        "parameters": {n: np.asarray(sim[n]["value"]) for n in nt.latent},
    }
    return result


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


# ---------------------------------------------------------------------------------------------
# the MCMC-shaped front end


class HAIS:
    """Log marginal likelihood of a NumPyro model by HAIS, shaped like ``numpyro.infer.MCMC``.

    Parameters
    ----------
    model : callable
        A NumPyro model with continuous latent sites.
    num_particles : int
        Particles per chain (independent annealing runs).
    num_steps : int
        Number of temperatures N.
    num_chains : int
        Independent runs; their estimates are pooled and shown as ArviZ chains.
    schedule : str or array
        ``"adaptive"`` (default: equal thermodynamic length, from the spread of the log
        likelihood measured on the pilot run), ``"sigmoid"`` (dense at both ends, as in Grosse
        et al. 2015), ``"geometric"``, ``"linear"`` or an array of betas.
    step_size : float or "auto"
        ``"auto"`` tunes a step size per β on a discarded pilot run (estimate stays unbiased).
    adapt_mass_matrix : bool
        With ``step_size="auto"``, a diagonal mass matrix per β from the pilot's population
        (as NUTS's ``adapt_mass_matrix``, but following the annealing).
    initial : "auto", "prior", "laplace", a ``ph.Gaussian``, or ``(guide, params)``
        Where annealing starts. ``"auto"`` (default) runs the discarded pilot from the prior
        and from a Gaussian fitted at the posterior mode (Laplace) and keeps the one whose
        weights degenerate less (:func:`ppl_hais.evidence.choose_initial`): with a vague
        prior the Laplace start is orders of magnitude more accurate; with a hierarchical
        model the prior usually wins. Any of them estimates p(data | model) with the model's
        own prior: the initial only changes the path.
    bidirectional : bool
        Also anneal back from a quarter of the final particles and report the gap (a bias
        diagnostic; :func:`bdmc` gives the bounds on simulated data).
    target_se : float, optional
        Choose the number of temperatures for this standard error of the log evidence
        (a discarded 200-temperature probe measures how hard the path is; ``num_steps`` is then
        ignored): easy models cost little, hard ones get up to 100,000 temperatures.
    progress_bar : bool

    The estimate comes with its trust checks (Pareto k̂, importance ESS, chains' agreement):
    a failed check raises :class:`ppl_hais.EvidenceWarning` and shows in ``print_summary``.

    Examples
    --------
    See the module docstring.
    """

    def __init__(
        self,
        model,
        *,
        num_particles=512,
        num_steps=1000,
        num_chains=1,
        schedule="adaptive",
        step_size="auto",
        refresh=0.5,
        initial="auto",
        target_accept=None,
        adapt_mass_matrix=True,
        bidirectional=False,
        target_se=None,
        progress_bar=True,
    ):
        _refuse_foreign_model(model)
        for name, value in (
            ("num_particles", num_particles), ("num_steps", num_steps), ("num_chains", num_chains),
        ):  # fmt: skip
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.model = model
        self.num_particles = int(num_particles)
        self.num_steps = int(num_steps)
        self.num_chains = int(num_chains)
        self.schedule = schedule
        self.step_size = step_size
        self.refresh = refresh
        self.initial = initial
        self.target_accept = target_accept
        self.adapt_mass_matrix = adapt_mass_matrix
        self.bidirectional = bidirectional
        self.target_se = target_se
        self.progress_bar = progress_bar
        self.evidence = None
        self._samples = None

    # -- running
    def run(self, rng_key, *args, extra_fields=(), init_params=None, **kwargs):
        """Anneal from the initial distribution to the posterior of ``model(*args, **kwargs)``.

        Like ``MCMC.run``, ``extra_fields`` and ``init_params`` are not passed to the model:
        ``init_params`` is refused (annealing starts from the initial distribution, see
        ``initial=``) and so is ``extra_fields`` (every per-temperature diagnostic is already
        in ``results[c].trace`` and ``to_arviz()``'s sample_stats). Runs in float64 (scoped:
        the process's JAX setting is unchanged afterwards). A second run, or a new ``HAIS``,
        on the same model and data shapes reuses the compiled code.
        """
        if extra_fields:
            raise TypeError(
                "HAIS.run takes no extra_fields (MCMC.run's): the per-temperature diagnostics "
                "are in hais.results[c].trace and in to_arviz()'s sample_stats"
            )
        if init_params is not None:
            raise TypeError(
                "HAIS.run takes no init_params: annealing starts from the initial "
                "distribution (HAIS(initial='prior' | 'laplace' | ph.Gaussian | (guide, params)))"
            )
        _refuse_foreign_model(self.model)
        rng_key = check_key(rng_key)
        with jax.enable_x64(True):
            key_trace, key_run, self._key_draws = jax.random.split(rng_key, 3)
            nt = NumPyroTarget(self.model, args, kwargs, key_trace)
            initial = self.initial
            if isinstance(initial, tuple) and len(initial) == 2:
                initial = guide_initial(nt, *initial)
            self.evidence = evidence(
                key_run,
                nt,
                initial=initial,
                num_chains=self.num_chains,
                num_particles=self.num_particles,
                num_steps=self.num_steps,
                schedule=self.schedule,
                step_size=self.step_size,
                refresh=self.refresh,
                target_accept=self.target_accept,
                adapt_mass_matrix=self.adapt_mass_matrix,
                bidirectional=self.bidirectional,
                target_se=self.target_se,
                progress_bar=self.progress_bar,
            )
        self._nt = nt
        self._samples = None

    def _require(self):
        if self.evidence is None:
            raise RuntimeError("call .run(rng_key, *args, **kwargs) first")

    # -- estimates
    @property
    def results(self):
        """The chains' :class:`ppl_hais.AISResult` (None before ``run``)."""
        return None if self.evidence is None else self.evidence.results

    @property
    def log_evidence(self) -> float:
        """log p(data | model): the pooled estimate over chains."""
        self._require()
        return self.evidence.log_z

    @property
    def log_evidence_se(self) -> float:
        """Its standard error (inf when the weights' variance does not exist)."""
        self._require()
        return self.evidence.log_z_se

    @property
    def warning(self) -> bool:
        """True when a trust check failed (see ``evidence.checks``)."""
        self._require()
        return self.evidence.warning

    # -- posterior
    @float64
    def _draws(self):
        """Resampled particles per chain, constrained, deterministic sites included."""
        if self._samples is None:
            self._require()
            idx = self.evidence.resample(self._key_draws)
            zs = np.stack([r.particles[i] for r, i in zip(self.results, idx, strict=True)])
            flat = jnp.asarray(zs.reshape(-1, zs.shape[-1]))
            keys = jax.random.split(jax.random.fold_in(self._key_draws, 1), flat.shape[0])
            values = _constrain_batch(self._nt, flat, keys)
            self._samples = jax.tree.map(
                lambda v: np.asarray(v).reshape(zs.shape[:2] + np.shape(v)[1:]), values
            )
        return self._samples

    def get_samples(self, group_by_chain=False):
        """Posterior draws (particles resampled by weight), like ``MCMC.get_samples``."""
        s = self._draws()
        if group_by_chain:
            return dict(s)
        return {k: v.reshape((-1,) + v.shape[2:]) for k, v in s.items()}

    def print_summary(self, prob=0.9):
        """The evidence with its error bar and checks, per-chain diagnostics, and the posterior
        summary. The posterior draws are particles resampled by weight: copies of a particle
        sit next to each other, so ``n_eff`` stays near the importance ESS printed above."""
        self._require()
        ev = self.evidence
        print(
            f"log marginal likelihood = {self.log_evidence:.4f} ± {self.log_evidence_se:.4f}"
            f"  ({self.num_chains} chain(s) × {self.num_particles} particles, "
            f"{self.num_steps} temperatures, initial: {ev.initial})"
        )
        for c, r in enumerate(self.results):
            print(
                f"  chain {c}: {r.log_z:.4f} ± {r.log_z_se:.4f}, importance ESS {r.ess:.1f}, "
                f"Pareto k {r.pareto_k:.2f}, lag {r.lag:.2f}, "
                f"acceptance {np.mean(r.acceptance):.2f}, {r.wall_time:.1f} s"
            )
        for check in ev.checks:
            print(f"  WARNING {check}")
        numpyro.diagnostics.print_summary(
            {k: v for k, v in self.get_samples(group_by_chain=True).items()},
            prob=prob,
            group_by_chain=True,
        )

    @float64
    def to_arviz(self, pointwise_log_likelihood=True):
        """ArviZ output (``xarray.DataTree`` on ArviZ >= 1, ``InferenceData`` on 0.x) with
        posterior, sample_stats, log_likelihood and observed_data."""
        self._require()
        posterior = self.get_samples(group_by_chain=True)
        log_lik = None
        # with enumerated sites the pointwise likelihood would be conditional on the drawn
        # discrete values, not the marginal one that LOO needs: left out
        if pointwise_log_likelihood and not self._nt.enumerated:
            latent = {k: jnp.asarray(v) for k, v in posterior.items() if k in self._nt.latent}
            ll = _pointwise_log_likelihood(
                self._nt.model, latent, *self._nt.args, batch_ndims=2, **self._nt.kwargs
            )
            log_lik = {k: np.asarray(v) for k, v in ll.items() if k in self._nt.observed}
        obs = {}
        tr = handlers.trace(
            handlers.seed(
                handlers.substitute(
                    self._nt.model, data={k: v[0, 0] for k, v in posterior.items()}
                ),
                jax.random.key(0),
            )
        ).get_trace(*self._nt.args, **self._nt.kwargs)
        for name in self._nt.observed:
            obs[name] = np.asarray(tr[name]["value"])
        return from_ais(
            self.results,
            posterior,
            log_likelihood=log_lik,
            observed_data=obs,
            library="ppl_hais (numpyro)",
            checks=self.evidence.checks,
            initial=self.evidence.initial,
        )

    # -- the core's pieces, for users who want them
    @property
    def target(self):
        """The core ``AnnealingTarget`` the last run annealed."""
        self._require()
        return self.evidence.target
