"""Reading a NumPyro model: its sites (latent, observed, factors, enumerated), the checks that
refuse what cannot be annealed, and the structure kept across runs on data of the same shapes.

Example
-------
>>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from numpyro.infer.util import compute_log_probs
>>> from ppl_hais.adapters.numpyro.model import unconstrained
>>> def model():
...     numpyro.sample("s", dist.LogNormal(0.0, 1.0))
>>> log_probs, _ = compute_log_probs(unconstrained(model, {"s": jnp.array(0.0)}), (), {}, {})
>>> sorted(log_probs)  # the site at exp(0) = 1, and log |d exp(u)/du| at u = 0
['_ppl_hais_log_det_s', 's']
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.distributions import constraints
from numpyro.distributions.transforms import biject_to

from ppl_hais.runtime.structure import split

from .data import check_broadcast

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


def with_missing_data(model):
    def wrapped(*args, **kwargs):
        with _MissingData():
            return model(*args, **kwargs)

    return wrapped


def is_factor(site) -> bool:
    """Whether a sample site is a ``numpyro.factor`` (a Unit distribution: no data, no prior)."""
    return site["is_observed"] and isinstance(_base(site["fn"]), dist.Unit)


def check_sites(tr):
    """Refuse what a prior/likelihood split cannot honour, naming the site and the remedy."""
    latent, observed, factors, improper, enumerated, discrete = [], [], [], [], [], []
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
            if is_factor(site):
                factors.append(name)
                continue
            bad = int(np.sum(~np.isfinite(np.asarray(site["value"], dtype=float))))
            if bad:
                raise ValueError(
                    f"observed site '{name}' has {bad} NaN/inf value(s) that are not masked: "
                    "drop them, or mark them missing with obs_mask=~jnp.isnan(y) (the "
                    "evidence is then that of the observed entries)."
                )
            check_broadcast(name, site)
            observed.append(name)
            continue
        fn = site["fn"]
        if fn.support.is_discrete and site["infer"].get("enumerate") == "parallel":
            enumerated.append(_check_enumerable(name, site))
            continue
        if fn.support.is_discrete:  # moved by a Metropolis step, as DiscreteHMCGibbs would
            discrete.append(name)
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
    if enumerated and discrete:
        raise ValueError(
            f"the discrete site(s) {enumerated} are marked for enumeration and {discrete} are "
            "not: mark all of them (config_enumerate: summed out exactly) or none (moved by a "
            "Metropolis step on their integer values)"
        )
    if not latent:
        raise ValueError(
            "the model has no continuous latent sample site to integrate over"
            + (f" (its discrete site(s) {enumerated} are summed out)" if enumerated else "")
        )
    return latent, observed, factors, improper, enumerated, discrete


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


JACOBIAN = "_ppl_hais_log_det_"  # prefix of the factor sites that carry the log-Jacobians


def flat_value(site):
    """A latent site's value as the flat vector holds it: unconstrained by
    ``biject_to(support)``; a discrete site's integer as a float."""
    if site["fn"].support.is_discrete:
        return jnp.asarray(site["value"], jnp.result_type(float))
    return biject_to(site["fn"].support).inv(site["value"])


def unconstrained(model, params):
    """The model run at the unconstrained values ``params`` (a dict by latent site): each site's
    value is ``biject_to(support)(params[name])``, its support read in the running model (so
    one may depend on another site), and the log-Jacobian enters as a factor site named
    ``JACOBIAN + name``. NumPyro's potential energy is built the same way; this uses only
    its public handlers and transforms. A discrete site's value is ``params[name]`` rounded to
    an integer, and the factor is 0 inside its support and −inf outside (NumPyro's
    ``log_prob`` does not check the support: a Metropolis proposal outside it must be
    rejected)."""

    def value(site):
        name = site["name"]
        if site["type"] != "sample" or site["is_observed"] or name not in params:
            return None
        u = params[name]
        support = site["fn"].support
        if support.is_discrete:
            x = jnp.round(u).astype(jnp.result_type(int))
            numpyro.factor(JACOBIAN + name, jnp.sum(jnp.where(support(x), 0.0, -jnp.inf)))
            return x
        if support is constraints.real or (
            isinstance(support, constraints.independent)
            and support.base_constraint is constraints.real
        ):
            return u
        transform = biject_to(support)
        x = transform(u)
        log_det = transform.log_abs_det_jacobian(u, x)
        extra = jnp.ndim(log_det) - jnp.ndim(x) + len(site["fn"].event_shape)
        if extra > 0:
            log_det = jnp.sum(log_det, axis=tuple(range(-extra, 0)))
        numpyro.factor(JACOBIAN + name, log_det)
        return x

    return handlers.substitute(model, substitute_fn=value)


_LOC_SCALE = (dist.Normal, dist.Cauchy, dist.Laplace)  # LocScaleReparam(0) takes them as is


def centered_sites(model, args, kwargs, latent, unravel, dim) -> list[str]:
    """The latent sites of a location-scale family whose scale depends on other latent sites
    (a hierarchical prior written centered: a funnel): those whose scale moves when the latent
    values move (a forward derivative along a fixed random direction, away from z = 0; a site
    NumPyro's ``LocScaleReparam`` decentered keeps a scale that is constant in z)."""

    def scales(z):
        run = handlers.seed(unconstrained(model, unravel(z)), 0)
        out = {}
        for name, site in handlers.trace(run).get_trace(*args, **kwargs).items():
            fn = site.get("fn")
            while isinstance(fn, (dist.ExpandedDistribution, dist.Independent,
                                  dist.MaskedDistribution)):  # fmt: skip
                fn = fn.base_dist
            if name in latent and isinstance(fn, _LOC_SCALE):
                out[name] = jnp.asarray(fn.scale) + 0.0  # a float, whose tangent exists
        return out

    z = jnp.full(dim, 0.1)
    v = jnp.asarray(np.random.default_rng(0).normal(size=dim), dtype=z.dtype)
    try:
        moved = jax.jit(lambda z, v: jax.jvp(scales, (z,), (v,))[1])(z, v)
    except Exception:  # a model that does not trace: no note, as before
        return []
    return [n for n, t in moved.items() if bool(jnp.any(jnp.abs(t) > 0))]


class _MaskSites(numpyro.primitives.Messenger):
    """Zero the log density of the named sites (the observed ones: what remains, with the
    discrete sites enumerated, is the marginal prior of the continuous sites)."""

    def __init__(self, fn=None, names=()):
        self.names = frozenset(names)
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["name"] in self.names:
            msg["fn"] = msg["fn"].mask(False)


def plate_nesting(tr, enumerated) -> int:
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


class Structure:
    """What a NumPyroTarget keeps across runs of one model on data of the same shapes: the
    model, the static part of its arguments, and the latent sites' flattening. One object per
    such key (kept in ``_STRUCTURES``), so equal keys give equal pytree definitions and the
    compiled scans are reused. ``baked`` holds the data itself for a model that cannot run on
    traced data (then every new data set compiles anew, as before)."""

    def __init__(
        self, model, data_structure, latent, observed, factors, improper, enumerated, discrete,
        unravel, dim, nesting=0,
    ):  # fmt: skip
        self.model = with_missing_data(model)
        self.enumerated, self.discrete = enumerated, discrete
        self.discrete_mask = None  # per flat coordinate, set by NumPyroTarget
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
        self.prior_names = set(latent) | {JACOBIAN + n for n in latent}
        self.baked = None


_STRUCTURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def structure_for(
    model, args, kwargs, sites, unravel, dim, shapes, nesting
) -> tuple[Structure, list]:
    data_structure, arrays = split((tuple(args), dict(kwargs)))
    key = (data_structure, sites, shapes)
    try:
        per_model = _STRUCTURES.setdefault(model, {})
    except TypeError:  # a model that cannot be weakly referenced: no reuse across objects
        per_model = {}
    st = per_model.get(key)
    if st is None:
        st = Structure(model, data_structure, *sites, unravel, dim, nesting)
        per_model[key] = st
    return st, arrays


