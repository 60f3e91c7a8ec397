"""ArviZ output for the core and both adapters: the one module that builds it.

Each group is an ``xarray.Dataset`` built here with public xarray API; the groups are then
assembled into what the installed ArviZ uses: ``xarray.DataTree`` on ArviZ >= 1,
``arviz.InferenceData`` on ArviZ 0.x. Shared code reads either with ``obj["group"]["var"]``.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> result = ph.hais(jax.random.key(0), target, num_particles=64, num_steps=100,
...                  progress_bar=False)
>>> draws = {"z": target.initial.sample(jax.random.key(1), (64,))[None]}  # (chain, draw, 2)
>>> idata = ph.results.arviz.from_ais([result], draws)
>>> sorted(ph.results.arviz.group_names(idata))[:2]
['posterior', 'sample_stats']
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping, Sequence
from importlib import metadata

import numpy as np
import xarray as xr

from ..checks.diagnostics import pool
from ..checks.ladder import shortfall
from ..checks.record import names

__all__ = [
    "ARVIZ_1",
    "assemble",
    "check_attrs",
    "dataset",
    "from_ais",
    "from_mcmc",
    "group",
    "group_names",
    "sample_stats_dataset",
]


def _arviz_major() -> int:
    try:
        return int(metadata.version("arviz").split(".")[0])
    except metadata.PackageNotFoundError:  # pragma: no cover - arviz is a dependency
        return 0


ARVIZ_1 = _arviz_major() >= 1
"""Whether the installed ArviZ is 1.x (DataTree) rather than 0.x (InferenceData)."""


@functools.cache
def _versions() -> tuple[str, str]:
    """ppl_hais's and ArviZ's versions, read from their metadata once per process (a read
    costs about a millisecond, a tenth of a small model's warm call's conversion)."""
    try:
        version = metadata.version("ppl_hais")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        version = "unknown"
    return version, metadata.version("arviz")


def _library_attrs(library: str) -> dict:
    version, arviz_version = _versions()
    return {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "inference_library": library,
        "inference_library_version": version,
        "arviz_version": arviz_version,
    }


def dataset(
    data: Mapping[str, np.ndarray],
    *,
    coords: Mapping | None = None,
    dims: Mapping | None = None,
    sample_dims: Sequence[str] = ("chain", "draw"),
) -> xr.Dataset:
    """One group as a Dataset, named the ArviZ way.

    Arrays are shaped ``sample_dims + event shape``; ``dims`` names the event dimensions of
    a variable (the rest are ``{name}_dim_{i}``, as ArviZ names them); ``coords`` labels them.
    Coordinates of dimensions a variable does not use are dropped, as ArviZ does.
    """
    coords = dict(coords or {})
    dims = dict(dims or {})
    variables = {}
    used = set()
    for name, value in data.items():
        if isinstance(value, xr.DataArray):
            variables[name] = value
            used.update(value.dims)
            continue
        value = np.asarray(value)
        event_ndim = value.ndim - len(sample_dims)
        if event_ndim < 0:
            raise ValueError(
                f"{name!r} has shape {value.shape}; "
                f"expected leading dimensions {tuple(sample_dims)}"
            )
        names = list(dims.get(name, []))[:event_ndim]
        names += [f"{name}_dim_{i}" for i in range(len(names), event_ndim)]
        variables[name] = (tuple(sample_dims) + tuple(names), value)
        used.update(sample_dims)
        used.update(names)
    ds = xr.Dataset(variables)
    for d in sample_dims:
        if d in ds.dims and d not in coords:
            ds = ds.assign_coords({d: np.arange(ds.sizes[d])})
    keep = {
        k: np.asarray(v)
        for k, v in coords.items()
        if k in used and k in ds.dims and np.size(v) == ds.sizes[k]
    }
    return ds.assign_coords(keep)


def assemble(groups: Mapping[str, xr.Dataset], attrs: Mapping | None = None):
    """Groups (name → Dataset) into a DataTree (ArviZ >= 1) or an InferenceData (ArviZ 0.x),
    with ``attrs`` stamped on every group."""
    groups = {k: v for k, v in groups.items() if v is not None}
    for ds in groups.values():
        ds.attrs.update(attrs or {})
    if ARVIZ_1:
        return xr.DataTree.from_dict(dict(groups))
    import arviz as az

    return az.InferenceData(**groups)


def group(obj, name: str) -> xr.Dataset:
    """The ``name`` group of an InferenceData or a DataTree, as a Dataset."""
    g = obj[name]
    return g.to_dataset() if hasattr(g, "to_dataset") else g


def group_names(obj) -> list[str]:
    """The group names of an InferenceData or a DataTree."""
    return list(obj.children) if hasattr(obj, "children") else list(obj.groups())


def sample_stats_dataset(
    results: Sequence, checks: Sequence[str] | None = None, bias=None, trajectory=(),
    evidence=None,
) -> xr.Dataset:
    """Per-chain evidence, its checks and weights, per-temperature diagnostics, one chain per
    result. ``checks``: the pooled estimate's failed checks (default: the chains' own);
    ``bias``: the pooled estimate's :class:`~ppl_hais.estimate.bias.BiasCheck` (scalars
    ``log_marginal_likelihood_reverse``, ``bias_gap``, ``bias_gap_se``,
    ``log_marginal_likelihood_bennett`` and its ``_se``; what to know of its draws in the
    ``bias_check_note`` attribute); ``trajectory``: the
    convergence ladder's rungs (:class:`~ppl_hais.checks.ladder.Rung`; ``ladder_*`` over dim
    ``rung``, the failed checks' names in the ``ladder_checks`` attribute, one line per rung,
    and the call's ``gradients`` as an attribute); ``evidence``: the call's
    :class:`~ppl_hais.workflow.evidence.Evidence`, whose pooled estimate (the chains pooled, a
    cleared rung's SE, or the bridge of a last rung whose bias check ran) becomes the scalars
    ``log_evidence`` and ``log_evidence_se``, with its ``shortfall``, ``excess`` and
    ``bridged`` as attributes; ``evidence_warning`` is then the call's verdict on every chain,
    and where the answer is not the chains' own estimates, ``log_marginal_likelihood`` holds
    it on every chain (the chains' own: ``chain_log_marginal_likelihood``)."""
    # every variable as (dims, values), one Dataset built at the end: each DataArray, each
    # assignment to a Dataset aligns and merges (a third of a warm call's conversion)
    chains = np.arange(len(results))
    num_bins = min(len(r.trace.beta) for r in results)
    stack = lambda f: (["chain", "temperature_bin"],  # noqa: E731
                       np.stack([np.asarray(f(r))[:num_bins] for r in results]))  # fmt: skip
    per_chain = lambda f: (["chain"], np.array([f(r) for r in results], dtype=float))  # noqa: E731
    data = {
        "log_marginal_likelihood": per_chain(lambda r: r.log_z),
        "log_marginal_likelihood_se": per_chain(lambda r: r.log_z_se),
        "importance_ess": per_chain(lambda r: r.ess),
        "pareto_k": per_chain(lambda r: r.pareto_k),
        "lag": per_chain(lambda r: getattr(r, "lag", float("nan"))),
        "evidence_warning": (["chain"], np.array([r.warning for r in results])),
        "num_nonfinite": per_chain(lambda r: r.num_nonfinite),
        "log_weight": (["chain", "particle"], np.stack([r.log_weights for r in results])),
    }
    for name, f in [
        ("beta", lambda r: r.trace.beta),
        ("acceptance_rate", lambda r: r.trace.acceptance_rate),
        ("step_size", lambda r: r.trace.step_size),
        ("ess_by_temperature", lambda r: r.trace.ess),
        ("log_marginal_likelihood_by_temperature", lambda r: r.trace.log_z),
    ]:
        data[name] = stack(f)
    if any(np.isfinite(r.log_z_upper) for r in results):
        data["log_marginal_likelihood_upper"] = per_chain(lambda r: r.log_z_upper)
    if bias is not None:
        data["log_marginal_likelihood_reverse"] = ((), bias.log_z_upper)
        data["log_marginal_likelihood_bennett"] = ((), bias.log_z_bennett)
        data["log_marginal_likelihood_bennett_se"] = ((), bias.log_z_bennett_se)
        data["bias_gap"] = ((), bias.gap)
        data["bias_gap_se"] = ((), bias.gap_se)
    fields = ("num_steps", "log_z", "log_z_se", "bias_gap", "bias_gap_se", "gradients", "wall_time",
              "remembered")  # fmt: skip
    for field in fields if trajectory else ():
        name = field.replace("log_z", "log_marginal_likelihood")
        data[f"ladder_{name}"] = (["rung"], np.array([getattr(r, field) for r in trajectory]))
    if evidence is not None:
        data["log_evidence"] = ((), float(evidence.log_z))
        data["log_evidence_se"] = ((), float(evidence.log_z_se))
        # one signal: the fields a pm.sample_smc user reads carry the call's answer. Where it
        # is not the chains' own estimates pooled (a bridge of both directions, an SE from the
        # rungs' spread that cleared the weights' checks, an SE widened by the bias check's
        # gap), every chain holds the answer and the chains' own estimates move to
        # chain_log_marginal_likelihood (as bridge sampling's output names them); a chain is
        # flagged exactly when the call warned
        log_z, var = pool([r.log_z for r in results], [r.log_z_se for r in results])
        own = (np.isclose(log_z, evidence.log_z, rtol=0, atol=1e-12)
               and np.isclose(np.sqrt(var), evidence.log_z_se, rtol=1e-9, atol=0))  # fmt: skip
        if evidence.bridged or evidence.cleared or not own:
            for name, value in (("", evidence.log_z), ("_se", evidence.log_z_se)):
                data[f"chain_log_marginal_likelihood{name}"] = data[
                    f"log_marginal_likelihood{name}"]  # fmt: skip
                data[f"log_marginal_likelihood{name}"] = (["chain"],
                                                          np.full(len(results), float(value)))
        data["evidence_warning"] = (["chain"], np.full(len(results), bool(evidence.checks)))
    ds = xr.Dataset(data, coords={"chain": chains})
    if bias is not None and bias.note:  # the check's draws were redrawn, or it could not run
        ds.attrs["bias_check_note"] = bias.note
    if trajectory:
        ds.attrs["ladder_checks"] = "\n".join(",".join(r.failed) for r in trajectory)
        ds.attrs["gradients"] = int(trajectory[-1].gradients)
        ds.attrs["shortfall"] = shortfall(trajectory)
        ds.attrs["excess"] = float(trajectory[-1].excess)
        ds.attrs["cleared_checks"] = ",".join(trajectory[-1].cleared)
    if evidence is not None:
        ds.attrs["shortfall"] = float(evidence.shortfall)
        ds.attrs["excess"] = float(evidence.excess)
        ds.attrs["bridged"] = int(evidence.bridged)
        if evidence.observed_data is not None:  # what it conditions on (compare_evidence)
            ds.attrs.update(evidence.observed_data.attrs())
    if checks is None:
        checks = [check for r in results for check in r.checks]
    ds.attrs.update(check_attrs(checks))
    return ds


def check_attrs(checks) -> dict:
    """The failed checks as attributes: their sentences one per line (``evidence_checks``)
    and their names (``evidence_check_names``, comma-separated), for code to read."""
    return {"evidence_checks": "\n".join(checks), "evidence_check_names": ",".join(names(checks))}


def _data_groups(observed_data, constant_data, coords, dims):
    out = {}
    for name, data in (("observed_data", observed_data), ("constant_data", constant_data)):
        if data:
            out[name] = dataset(data, coords=coords, dims=dims, sample_dims=())
    return out


def from_ais(
    results: Sequence,
    posterior: Mapping[str, np.ndarray],
    *,
    log_likelihood: Mapping[str, np.ndarray] | None = None,
    observed_data: Mapping[str, np.ndarray] | None = None,
    constant_data: Mapping[str, np.ndarray] | None = None,
    coords: Mapping | None = None,
    dims: Mapping | None = None,
    attrs: Mapping | None = None,
    checks: Sequence[str] | None = None,
    initial: str | None = None,
    bias=None,
    trajectory=(),
    evidence=None,
    library: str = "ppl_hais",
):
    """ArviZ output of annealing results (one per chain) and their resampled draws.

    ``posterior`` (and ``log_likelihood``) map names to arrays shaped (chain, draw, ...);
    ``observed_data``/``constant_data`` to arrays without sample dimensions. ``checks``: the
    pooled estimate's failed trust checks; ``initial``: where annealing started; ``bias``: its
    bias check (:mod:`ppl_hais.estimate.bias`); ``trajectory``: the convergence ladder's
    rungs (:mod:`ppl_hais.checks.ladder`); ``evidence``: the evidence workflow's result, whose
    pooled estimate becomes ``log_evidence``/``log_evidence_se`` (:func:`sample_stats_dataset`).
    Returns a DataTree on ArviZ >= 1, an InferenceData on ArviZ 0.x.
    """
    groups = {
        "posterior": dataset(posterior, coords=coords, dims=dims),
        "sample_stats": sample_stats_dataset(results, checks, bias, trajectory, evidence),
    }
    if log_likelihood:
        groups["log_likelihood"] = dataset(log_likelihood, coords=coords, dims=dims)
    groups.update(_data_groups(observed_data, constant_data, coords, dims))
    all_attrs = _library_attrs(library)
    if results:
        all_attrs.update({f"hais_{k}": v for k, v in results[0].settings.attrs().items()})
    if initial is not None:
        all_attrs["hais_initial"] = initial
    all_attrs.update(attrs or {})
    return assemble(groups, all_attrs)


def from_mcmc(
    posterior: Mapping[str, np.ndarray],
    sample_stats: Mapping[str, np.ndarray],
    *,
    observed_data: Mapping[str, np.ndarray] | None = None,
    constant_data: Mapping[str, np.ndarray] | None = None,
    coords: Mapping | None = None,
    dims: Mapping | None = None,
    attrs: Mapping | None = None,
    library: str = "ppl_hais",
):
    """ArviZ output of MCMC draws (``posterior`` and ``sample_stats`` shaped (chain, draw, ...)),
    as ``pm.sample`` returns it on the installed ArviZ."""
    groups = {
        "posterior": dataset(posterior, coords=coords, dims=dims),
        "sample_stats": dataset(sample_stats),
    }
    groups.update(_data_groups(observed_data, constant_data, coords, dims))
    all_attrs = _library_attrs(library)
    all_attrs.update({k: v for k, v in (attrs or {}).items() if v is not None})
    return assemble(groups, all_attrs)


def bridge_dataset(result) -> xr.Dataset:
    """sample_stats of a bridge-sampling estimate (:class:`~ppl_hais.bridge.BridgeResult`):
    ``log_marginal_likelihood`` and its ``_se`` (the pooled estimate), each chain's own
    (``chain_log_marginal_likelihood``), the draws' ESS/R̂, the proposal's k̂, the fixed
    point's path (``bridge_iterations``, dim ``iteration``), the cross-check's anneals when
    they ran, and the failed checks in ``evidence_checks``."""
    scalar = lambda v: xr.DataArray(float(v))  # noqa: E731
    data = {
        "log_marginal_likelihood": scalar(result.log_z),
        "log_marginal_likelihood_se": scalar(result.log_z_se),
        "chain_log_marginal_likelihood": xr.DataArray(result.chain_log_z, dims=["chain"]),
        "chain_log_marginal_likelihood_se": xr.DataArray(result.chain_log_z_se, dims=["chain"]),
        "ess": scalar(result.ess),
        "min_ess": scalar(result.min_ess),
        "rhat": scalar(result.rhat),
        "pareto_k": scalar(result.pareto_k),
        "bridge_iterations": xr.DataArray(result.iterations, dims=["iteration"]),
        "evidence_warning": xr.DataArray(bool(result.checks)),
    }
    if result.divergences is not None:
        data["divergences"] = xr.DataArray(int(result.divergences))
    cc = result.cross_check
    if cc is not None:
        data["log_marginal_likelihood_forward"] = scalar(cc.log_z_forward)
        data["log_marginal_likelihood_forward_se"] = scalar(cc.log_z_forward_se)
        data["log_marginal_likelihood_reverse"] = scalar(cc.log_z_reverse)
        data["log_marginal_likelihood_reverse_se"] = scalar(cc.log_z_reverse_se)
        data["bias_gap"] = scalar(result.bias_gap)
    ds = xr.Dataset(data, coords={"chain": np.arange(len(result.chain_log_z))})
    ds.attrs.update(
        **check_attrs(result.checks), method=f"bridge_sampling:{result.method}",
        converged=int(result.converged), num_draws=result.num_draws,
        num_proposal=result.num_proposal, evaluations=result.evaluations,
    )  # fmt: skip
    if cc is not None or result.modes is not None:
        ds.attrs["shortfall"] = result.shortfall
    if result.observed_data is not None:  # what it conditions on (compare_evidence)
        ds.attrs.update(result.observed_data.attrs())
    if result.modes is not None:  # the mode search beside the draws
        ds.attrs.update(modes_found=result.modes.num_modes,
                        modes_visited=result.modes.num_visited)  # fmt: skip
    return ds


def from_bridge(result, library: str = "ppl_hais"):
    """ArviZ output of a bridge-sampling estimate: its ``sample_stats`` (:func:`bridge_dataset`)
    with the attributes every output here carries (library, version, time)."""
    return assemble({"sample_stats": bridge_dataset(result)}, _library_attrs(library))
