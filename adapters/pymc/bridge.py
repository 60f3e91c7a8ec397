"""``bridge_sampling``: the evidence of a PyMC (or Bambi) model from the ``pm.sample`` draws you
already have.

Example
-------
>>> import numpy as np, pymc as pm
>>> from ppl_hais.adapters import pymc as php
>>> with pm.Model() as model:
...     mu = pm.Normal("mu", 0.0, 2.0)
...     y = pm.Normal("y", mu, 1.0, observed=np.array([0.3, -0.5, 1.1]))
...     idata = pm.sample(1000, chains=2, cores=1, random_seed=0, progressbar=False)
>>> res = php.bridge_sampling(idata, model)
>>> round(res.log_z, 1), res.warning   # exact: -4.69
(-4.7, False)
"""

from __future__ import annotations

import jax
import numpy as np
import xarray as xr
from pytensor.graph.replace import clone_replace

from ppl_hais.results.arviz import group, group_names
from ppl_hais.runtime.precision import float64
from ppl_hais.workflow.model_bridge import bridge_evidence

from .rewrites import jaxified_graph
from .target import cached_target, is_bambi, pymc_model

__all__ = ["bridge_sampling"]


def shift_intercepts(fit, post, sign=1):
    """Bambi samples the intercept of centered predictors and reports it uncentered
    (``Intercept − x̄·β``, in its ``_clean_results``): ``sign=1`` adds ``x̄·β`` back (what Bambi
    reported → the model's own variable), ``sign=-1`` takes it off (the model's variable → what
    Bambi reports). ``post``: an xarray Dataset or a dict of (chain, draw, ...) arrays. Uses
    Bambi's own design matrices and term names."""
    if not getattr(fit, "center_predictors", False):
        return post
    from bambi.utils import get_aliased_name

    post = post.copy()
    for comp in fit.backend.distributional_components.values():
        term = comp.component
        if not (term.intercept_term and term.common_terms):
            continue
        response = getattr(fit, "response_term", None) or fit.response_component.term
        if getattr(response, "coords", None):
            raise ValueError(
                "a Bambi model with a multi-level response and centered predictors: fit it "
                "with bmb.Model(..., center_predictors=False) for bridge sampling"
            )
        xbar = np.asarray(comp.design_matrix_without_intercept).mean(axis=0)
        names = [get_aliased_name(t) for t in term.common_terms.values()]
        dataset = isinstance(post, xr.Dataset)
        arrays = [post[n].transpose("chain", "draw", ...).values if dataset
                  else np.asarray(post[n]) for n in names]  # fmt: skip
        coefs = np.concatenate([np.reshape(a, a.shape[:2] + (-1,)) for a in arrays], axis=-1)
        name = get_aliased_name(term.intercept_term)
        shift = sign * (coefs @ xbar)
        if isinstance(post, xr.Dataset):
            shift = xr.DataArray(shift, dims=("chain", "draw"))
        post[name] = post[name] + shift
    return post


@float64
def bridge_sampling(
    idata,
    model=None,
    *,
    random_seed=None,
    method: str = "normal",
    cross_check: bool = False,
    mode_search: bool = True,
    progressbar: bool = True,
    options=None,
):
    """log p(data | model) from ``pm.sample``'s draws by bridge sampling
    (:mod:`ppl_hais.bridge`), inside or outside ``with model:``.

    Parameters
    ----------
    idata : InferenceData or DataTree
        What ``pm.sample`` returned (ArviZ 0.x or 1.x): its ``posterior`` group, the values the
        user sees, is mapped to the model's unconstrained value variables by the model's own
        transforms (Jacobians included). Deterministics are ignored; no ``log_likelihood``
        group is needed.
    model : pm.Model or bambi.Model, optional
        Default: the model of the ``with`` context. A fitted Bambi model goes in as it is.
    random_seed : int, optional
        For the proposal's draws (and the cross-check's anneals).
    method : {"normal", "warp3", "student_t"}
        The proposal (:func:`ppl_hais.bridge_sampling`).
    cross_check : bool
        Also anneal: forward from the prior (a stochastic lower bound, no draws needed, as
        ``php.sample_hais``) and back from the draws; the three estimates are reported side by
        side and a disagreement warns.
    mode_search : bool
        Compare the draws with the modes a Laplace search finds (a few BFGS runs, cached on
        the model): a mode no chain visited that holds more mass than the error bar allows
        warns (``modes``), stating by how many nats the estimate may be low.
    options : ppl_hais.EvidenceOptions or dict, optional
        The cross-check's forward anneal's options (``num_particles``, ``num_steps``, ...).

    Returns
    -------
    ppl_hais.BridgeResult
        ``log_z``, ``log_z_se``, the checks (raised as one ``EvidenceWarning``),
        ``summary()``, ``to_arviz()``; ``ph.compare_evidence`` takes it beside
        ``php.sample_hais`` and ``pm.sample_smc`` results.
    """
    bambi = model if is_bambi(model) else None
    model = pymc_model(model)
    target = cached_target(model)
    draws = unconstrained_draws(target, idata, bambi)
    key = jax.random.key(0 if random_seed is None else int(random_seed))
    return bridge_evidence(
        key, target, draws, method=method, cross_check=cross_check, mode_search=mode_search,
        progress_bar=progressbar, diverging=_diverging(idata), options=options,
    )  # fmt: skip


def _diverging(idata):
    """pm.sample's divergent transitions (sample_stats ``diverging``), or None."""
    if "sample_stats" not in group_names(idata):
        return None
    ss = group(idata, "sample_stats")
    return np.asarray(ss["diverging"].values) if "diverging" in ss else None


def unconstrained_draws(target, idata, bambi=None) -> np.ndarray:
    """The posterior draws of ``target.model``'s free variables as flat vectors of its value
    variables (transformed as PyMC samples them): (chains, draws, D)."""
    model = target.model
    if target.discrete_names:
        raise ValueError(
            f"variable(s) {target.discrete_names} are discrete: bridge sampling needs a density "
            "over continuous variables only. Marginalize them in the model (a pm.Mixture, or "
            "pymc_extras' marginalize) or use php.sample_hais, which anneals discrete variables."
        )
    if type(idata).__name__ not in ("InferenceData", "DataTree"):
        raise TypeError(f"expected an InferenceData or DataTree, got {type(idata).__name__}")
    if "posterior" not in group_names(idata):
        raise ValueError(
            "the InferenceData has no posterior group: pass what pm.sample() returned "
            "(prior or posterior-predictive draws are not posterior draws)"
        )
    post = group(idata, "posterior")
    if bambi is not None:
        post = shift_intercepts(bambi, post)
    names = [rv.name for rv in model.free_RVs]
    missing = [n for n in names if n not in post.data_vars]
    if missing:
        raise ValueError(
            f"the posterior lacks the model's free variable(s) {missing} (it holds "
            f"{sorted(post.data_vars)}; deterministics cannot stand for the variables they "
            "are computed from): pass the idata that pm.sample returned for this model"
            + ("; a Bambi fit needs fit(..., omit_offsets=False)" if bambi is not None else "")
        )
    values = []
    for rv in model.free_RVs:
        v = np.asarray(post[rv.name].transpose("chain", "draw", ...).values, dtype=float)
        expected = tuple(int(d) for d in rv.shape.eval())
        if v.shape[2:] != expected:
            raise ValueError(
                f"variable '{rv.name}' has draws of shape {v.shape[2:]}, the model's is "
                f"{expected}: the draws do not come from this model (or its data changed)"
            )
        values.append(v)
    chains, per_chain = values[0].shape[:2]
    forward = _forward(target)
    flat = forward(
        *[v.reshape((chains * per_chain,) + v.shape[2:]) for v in values]
    )
    out = np.concatenate(
        [np.reshape(np.asarray(f), (chains * per_chain, -1)) for f in flat], axis=1
    )
    if out.shape[1] != target.dim:
        raise ValueError(f"the draws give {out.shape[1]} coordinates, the model {target.dim}")
    return out.reshape(chains, per_chain, target.dim)


def _forward(target):
    """JAX function: the free variables' values → their value variables (PyMC's transforms),
    compiled once per target (a model's data change makes a new target: ``cached_target``)."""
    fn = getattr(target, "_forward", None)
    if fn is None:
        model = target.model
        inputs = [rv.type() for rv in model.free_RVs]
        outputs = []
        for rv, x in zip(model.free_RVs, inputs, strict=True):
            transform = model.rvs_to_transforms.get(rv)
            outputs.append(x if transform is None else transform.forward(x, *rv.owner.inputs))
        outputs = clone_replace(outputs, replace=dict(zip(model.free_RVs, inputs, strict=True)))
        fn = jax.jit(jax.vmap(jaxified_graph(inputs, outputs)))
        target._forward = fn
    return fn
