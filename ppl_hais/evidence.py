"""The evidence workflow both adapters call: a model's densities in, a trusted estimate out.

An adapter translates a model into a :class:`ModelDensity` (flat unconstrained z: log prior,
log likelihood, the prior as an initial distribution) and calls :func:`evidence`, which

1. chooses the initial distribution (``initial="auto"``: the prior or a Gaussian fitted at the
   posterior mode, whichever anneals better on a discarded pilot run; any normalized initial
   keeps Ẑ unbiased for p(data | model));
2. runs the chains (independent annealing runs sharing that pilot's tuning);
3. pools them, checks the pooled estimate and raises one :class:`~ppl_hais.EvidenceWarning`
   naming every failed check;
4. resamples posterior draws from the user's key.

The targets it builds are kept on the model object, and the annealer compiles once per target
*structure* (``ppl_hais.structure``), so a second call, or a new model object of the same
structure over data of the same shapes, compiles nothing.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.evidence import evidence
>>> class Model:  # y = 1 observed under N(z, 1), prior z ~ N(0, 1): evidence N(1; 0, 2)
...     dim, improper = 1, ()
...     prior = ph.Gaussian(jnp.zeros(1), 1.0)
...     def log_likelihood(self, z):
...         return -0.5 * jnp.sum((1.0 - z) ** 2) - 0.5 * jnp.log(2 * jnp.pi)
...     def log_joint(self, z):
...         return self.prior.log_density(z) + self.log_likelihood(z)
>>> ev = evidence(jax.random.key(0), Model(), num_particles=128, num_steps=200,
...               progress_bar=False)
>>> exact = -0.25 - 0.5 * jnp.log(4 * jnp.pi)
>>> bool(abs(ev.log_z - exact) < 5 * ev.log_z_se + 0.02)
True
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import numpy as np

from . import diagnostics
from ._renamed import refuse_unknown
from .annealing import ais, hais, survey
from .annealing.bias import BiasCheck, check_bias, needs_check
from .annealing.kernels import hais_kernel, mixed_kernel
from .budget import SE_SLACK, choose_num_steps
from .density import ModelDensity
from .laplace import laplace_gaussian
from .mcmc.fast_random import check_key
from .precision import float64
from .result import AISResult
from .target import AnnealingTarget

__all__ = ["Evidence", "ModelDensity", "evidence", "choose_initial", "choose_num_steps"]

_LAPLACE_RESTARTS = 8  # prior draws the mode search also starts from (modes: laplace.py)


def _discrete(model):
    mask = getattr(model, "discrete", None)
    return None if mask is None or not any(mask) else tuple(bool(x) for x in mask)


@dataclass(frozen=True, eq=False)
class Evidence:
    """The pooled evidence of one model: estimate, error bar, the chains' results, the checks."""

    results: list[AISResult]
    target: AnnealingTarget  # what the chains annealed
    initial: str  # "prior", "laplace" or "user"
    log_z: float
    log_z_se: float
    checks: tuple[str, ...]
    choice: dict  # initial distribution -> the pilot's importance ESS (initial="auto")
    budget: dict | None = None  # target_se=: the probe's SE and the number of steps chosen
    bias: BiasCheck | None = None  # the reverse anneal from MCMC draws (ppl_hais.annealing.bias)

    @property
    def log_z_upper(self) -> float:
        """The bias check's reverse (upper) estimate; NaN when it did not run."""
        return float("nan") if self.bias is None else self.bias.log_z_upper

    @property
    def bias_gap(self) -> float:
        """``log_z_upper − log_z`` in nats; NaN when the bias check did not run."""
        return float("nan") if self.bias is None else self.bias.gap

    @property
    def warning(self) -> bool:
        return bool(self.checks)

    @property
    def pareto_k(self) -> float:
        return float(max(r.pareto_k for r in self.results))

    @property
    def ess(self) -> float:
        """Importance ESS summed over the chains."""
        return float(sum(r.ess for r in self.results))

    def resample(self, rng_key) -> np.ndarray:
        """(chains, particles) indices drawn by weight, from the user's key."""
        keys = jax.random.split(rng_key, len(self.results))
        return np.stack([r.resample(k) for r, k in zip(self.results, keys, strict=True)])


def _method(model, name):
    """``model.<name>`` as a pytree (the unbound function, partially applied to the model), so
    that a model registered as a pytree (its data as leaves: the NumPyro adapter's) gives
    targets that compile once per structure, not once per object (``ppl_hais.structure``)."""
    func = getattr(type(model), name, None)
    if callable(func) and not isinstance(func, staticmethod | classmethod):
        return jax.tree_util.Partial(func, model)
    return getattr(model, name)


def _cached(model, name, build):
    """A target kept on the model object: the same object ⇒ the annealer's compiled scans hit."""
    cache = model.__dict__.setdefault("_ppl_hais_targets", {})
    if name not in cache:
        cache[name] = build()
    return cache[name]


def prior_target(model: ModelDensity) -> AnnealingTarget:
    """Anneal prior → posterior (the likelihood form: one density evaluation less per step)."""
    return _cached(
        model,
        "prior",
        lambda: AnnealingTarget(
            initial=model.prior, log_likelihood=_method(model, "log_likelihood")
        ),
    )


def laplace_target(model: ModelDensity) -> AnnealingTarget:
    """Anneal N(mode, 1.2² H⁻¹) → prior × likelihood; the mode is searched from zeros and a few
    prior draws (a fixed key, so the fit, and the compiled target, are the same every call).
    Raises ValueError when no finite mode or no positive-definite Hessian is found."""

    def build():
        starts = np.zeros((1, model.dim))
        if model.prior is not None:
            draws = model.prior.sample(jax.random.key(1), _LAPLACE_RESTARTS)
            starts = np.concatenate([starts, np.asarray(draws)])
        log_joint = _method(model, "log_joint")
        gaussian = laplace_gaussian(log_joint, starts)
        return AnnealingTarget(initial=gaussian, log_density=log_joint)

    return _cached(model, "laplace", build)


def _user_target(model, initial):
    if not (
        callable(getattr(initial, "sample", None))
        and callable(getattr(initial, "log_density", None))
    ):
        raise TypeError(
            "initial must be 'auto', 'prior', 'laplace', or a normalized distribution with "
            f"sample(key, n) and log_density(z); got {type(initial).__name__}"
        )
    dim = getattr(initial, "dim", None)
    if dim is not None and dim != model.dim:
        raise ValueError(
            f"the initial distribution has dimension {dim}; the model has {model.dim} "
            "unconstrained coordinates"
        )
    return AnnealingTarget(initial=initial, log_density=model.log_joint)


@float64
def choose_initial(rng_key, model: ModelDensity, initial="auto", **hais_kwargs):
    """(name, target, pilot, choice) for ``initial``.

    ``"auto"`` tries the prior and the Laplace Gaussian: a discarded pilot run (the one the
    main run would make anyway) on each, and the one whose pilot weights have the larger
    importance ESS wins (the prior on ties). A vague prior over many data has a pilot ESS
    near 1 and the Laplace start near the pilot's size; a hierarchical model whose mode is at
    the edge (a funnel) fails the fit or anneals worse from it and keeps the prior.
    """
    if isinstance(initial, str):
        if initial not in ("auto", "prior", "laplace"):
            raise ValueError(
                f"unknown initial {initial!r}: use 'auto', 'prior', 'laplace' or a distribution"
            )
        candidates, errors = {}, {}
        if model.prior is None and initial != "laplace":
            # never guess a start for an improper prior: the user says which (DESIGN.md)
            raise ValueError(
                f"variable(s) {list(model.improper)} have an improper prior that cannot be "
                "sampled, so annealing cannot start from the prior: pass initial='laplace' (a "
                "Gaussian fitted at the posterior mode) or initial=ph.Gaussian(mean, scale) "
                f"over the {model.dim} unconstrained coordinates."
            )
        if initial in ("auto", "prior"):
            if model.prior is None:
                errors["prior"] = (
                    f"variable(s) {list(model.improper)} have an improper prior that cannot be "
                    "sampled"
                )
            else:
                candidates["prior"] = prior_target(model)
        if initial == "laplace" and _discrete(model):
            raise ValueError(
                "initial='laplace' needs continuous coordinates; this model has discrete ones "
                f"({getattr(model, 'discrete_names', '')}): use initial='prior' (or 'auto')"
            )
        if initial in ("auto", "laplace") and not _discrete(model):
            try:
                candidates["laplace"] = laplace_target(model)
            except (ValueError, np.linalg.LinAlgError, FloatingPointError) as err:
                errors["laplace"] = str(err)
        if not candidates:
            raise ValueError(
                "no initial distribution could be built: "
                + "; ".join(f"{k}: {v}" for k, v in errors.items())
                + f". Pass initial=ph.Gaussian(mean, scale) over the {model.dim} "
                "unconstrained coordinates."
            )
    else:
        if _discrete(model):
            raise ValueError(
                "a model with discrete variables anneals from its prior (initial='prior' or "
                "'auto'): an initial distribution over the flat vector would not draw the "
                "whole numbers the discrete coordinates need"
            )
        candidates = {"user": _user_target(model, initial)}
    kernel_kwargs = {k: hais_kwargs.pop(k) for k in ("refresh",) if k in hais_kwargs}
    kernel = hais_kernel(float(kernel_kwargs.get("refresh", 0.5)), 1, 1, "standard")
    if _discrete(model):
        kernel = mixed_kernel(_discrete(model), kernel)
    pilot_kwargs = {
        k: hais_kwargs[k]
        for k in (
            "num_steps", "schedule", "step_size", "target_accept", "num_pilot_steps",
            "adapt_mass_matrix", "num_pilot_particles",
        )
        if k in hais_kwargs
    }  # fmt: skip
    choice, pilots = {}, {}
    for name, target in candidates.items():
        with np.errstate(all="ignore"):
            pilots[name] = survey(rng_key, target, kernel, **pilot_kwargs)
        choice[name] = diagnostics.importance_ess(pilots[name].log_weights)
    best = max(choice, key=lambda n: (np.nan_to_num(choice[n], nan=0.0), n == "prior"))
    return best, candidates[best], pilots[best], choice


@float64
def evidence(
    rng_key,
    model: ModelDensity,
    *,
    initial="auto",
    num_chains: int = 1,
    num_particles: int = 512,
    num_steps: int = 1000,
    target_se: float | None = None,
    max_num_steps: int = 100_000,
    max_gradients: float | None = None,
    progress_bar: bool = True,
    bias_check="auto",
    **hais_kwargs,
) -> Evidence:
    """The log evidence of a model by HAIS, checked, over ``num_chains`` independent runs.

    Keyword arguments go to :func:`ppl_hais.hais` (``schedule``, ``step_size``, ``refresh``,
    ``target_accept``, ``adapt_mass_matrix``, ``bidirectional``, ...). The chains share one
    pilot (tuning is fixed before any chain starts, so each chain's Ẑ is unbiased and the
    chains are independent given it). Raises one :class:`~ppl_hais.EvidenceWarning` listing
    every failed check of the pooled estimate.

    ``target_se``: choose the number of temperatures for this standard error instead of
    ``num_steps`` (see :func:`choose_num_steps`): easy models get few, hard ones up to
    ``max_num_steps`` and, when given, ``max_gradients`` model gradients for the probes and
    the main run together; missing the target is reported as a failed check.

    ``bias_check``: anneal back from MCMC-refreshed posterior draws and report the gap to the
    estimate in nats (:mod:`ppl_hais.annealing.bias`); a gap beyond its noise is a failed check that
    states it. ``"auto"`` (default) checks runs that give a reason to (a target reaching past
    the start, a lag, a tail in the weights, a failed check), so easy models pay nothing;
    ``True`` always, ``False`` never. Not run for models with discrete coordinates or with a
    reverse run of their own (``bidirectional``).
    """
    if bias_check not in (True, False, "auto"):
        raise ValueError(f"bias_check must be True, False or 'auto', got {bias_check!r}")
    _check_keywords(hais_kwargs)  # a typo fails here, before any compilation
    rng_key = check_key(rng_key)
    num_chains = int(num_chains)
    if num_chains < 1:
        raise ValueError(f"num_chains must be a positive integer, got {num_chains}")
    key_pilot, key_chains = jax.random.split(rng_key)
    pilot_kwargs = dict(hais_kwargs, num_steps=num_steps)
    pilot_kwargs.pop("bidirectional", None)
    name, target, pilot, choice = choose_initial(key_pilot, model, initial, **pilot_kwargs)
    budget = None
    if target_se is not None:
        key_probe, key_chains = jax.random.split(key_chains)
        budget = choose_num_steps(
            key_probe, target, pilot, target_se, num_particles=num_particles,
            num_chains=num_chains, max_num_steps=max_num_steps, max_gradients=max_gradients,
            discrete=_discrete(model),
            **hais_kwargs,
        )  # fmt: skip
        num_steps = budget["num_steps"]
    results = []
    with warnings.catch_warnings():  # one pooled warning below instead of one per chain
        warnings.simplefilter("ignore", diagnostics.EvidenceWarning)
        run = dict(num_particles=num_particles, num_steps=num_steps, pilot=pilot,
                   progress_bar=progress_bar, discrete=_discrete(model), **hais_kwargs)  # fmt: skip
        if hais_kwargs.get("bidirectional") or "reverse_from" in hais_kwargs:
            for key in jax.random.split(key_chains, num_chains):  # a reverse run per chain
                results.append(hais(key, target, **run))
        else:  # the chains as one population: one dispatch, particle groups shared
            out = hais(key_chains, target, num_chains=num_chains, **run)
            results = out if num_chains > 1 else [out]
    log_z, var = diagnostics.pool([r.log_z for r in results], [r.log_z_se for r in results])
    checks = pooled_checks(results)
    if budget is not None and not np.sqrt(var) <= SE_SLACK * target_se:
        checks = checks + (
            f"target_se: the standard error {np.sqrt(var):.3g} missed target_se={target_se:g} "
            f"with {num_steps} temperatures (the probe predicted {budget['predicted_se']:.3g}). "
            "Remedy: more particles or chains, or a larger max_num_steps.",
        )
    bias = None
    own_reverse = hais_kwargs.get("bidirectional") or "reverse_from" in hais_kwargs
    if bias_check and not own_reverse and not _discrete(model):
        if bias_check is True or needs_check(results):
            bias = check_bias(
                jax.random.fold_in(rng_key, 29), target, results, pilot, log_z=log_z,
                log_z_se=float(np.sqrt(var)), refresh=hais_kwargs.get("refresh", 0.5),
                num_leapfrog=hais_kwargs.get("num_leapfrog", 1),
                step_size=hais_kwargs.get("step_size", "auto"), progress_bar=progress_bar,
            )  # fmt: skip
            checks = checks + diagnostics.evidence_checks(
                bias_gap=bias.gap, bias_gap_se=bias.gap_se
            )
    out = Evidence(
        results, target, name, log_z, float(np.sqrt(var)), checks, choice, budget, bias
    )
    diagnostics.warn(checks, "log evidence")
    return out


def _check_keywords(hais_kwargs) -> None:
    """Refuse a keyword that neither :func:`hais` nor :func:`~ppl_hais.ais` takes, naming
    the closest one (``num_particle=`` was reported only after the pilots had run)."""
    taken = set(inspect.signature(ais).parameters) | set(inspect.signature(hais).parameters)
    taken -= {"rng_key", "target", "kernel", "kwargs", "pilot", "discrete", "num_chains"}
    own = set(inspect.signature(evidence).parameters) - {"rng_key", "model", "hais_kwargs"}
    refuse_unknown(
        {k: v for k, v in hais_kwargs.items() if k not in taken}, "evidence", taken | own
    )


def pooled_checks(results: Sequence[AISResult]) -> tuple[str, ...]:
    """Every chain's failed checks (labelled by chain when there are several) and whether the
    chains disagree beyond their own error bars."""
    if len(results) == 1:
        return tuple(results[0].checks)
    checks = [f"chain {c}: {msg}" for c, r in enumerate(results) for msg in r.checks]
    se = np.array([r.log_z_se for r in results])
    if np.all(np.isfinite(se)):
        log_z = np.array([r.log_z for r in results])
        rel = np.exp(log_z - np.max(log_z))
        rel = rel / rel.mean()  # Ẑ_c / Ẑ
        own = np.sum((rel * se) ** 2) / len(results) ** 2
        spread = np.var(rel, ddof=1) / len(results)
        ratio = float(np.sqrt(spread / own)) if own > 0 else float("inf")
        checks.extend(diagnostics.evidence_checks(disagreement=ratio))
    return tuple(checks)
