"""ArviZ output shared by the core and both adapters (one place that builds InferenceData)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import arviz as az
import numpy as np
import xarray as xr

__all__ = ["from_ais", "sample_stats_dataset"]


def sample_stats_dataset(results: Sequence, checks: Sequence[str] | None = None) -> xr.Dataset:
    """Per-chain evidence, its checks and weights, per-temperature diagnostics, one chain per
    result. ``checks``: the pooled estimate's failed checks (default: the chains' own)."""
    chains = np.arange(len(results))
    num_bins = min(len(r.trace.beta) for r in results)
    stack = lambda f: np.stack([np.asarray(f(r))[:num_bins] for r in results])  # noqa: E731
    per_chain = lambda f: xr.DataArray(  # noqa: E731
        np.array([f(r) for r in results], dtype=float), dims=["chain"]
    )
    data = {
        "log_marginal_likelihood": per_chain(lambda r: r.log_z),
        "log_marginal_likelihood_se": per_chain(lambda r: r.log_z_se),
        "importance_ess": per_chain(lambda r: r.ess),
        "pareto_k": per_chain(lambda r: r.pareto_k),
        "evidence_warning": xr.DataArray(np.array([r.warning for r in results]), dims=["chain"]),
        "num_nonfinite": per_chain(lambda r: r.num_nonfinite),
        "log_weight": xr.DataArray(
            np.stack([r.log_weights for r in results]), dims=["chain", "particle"]
        ),
    }
    for name, f in [
        ("beta", lambda r: r.trace.beta),
        ("acceptance_rate", lambda r: r.trace.acceptance_rate),
        ("step_size", lambda r: r.trace.step_size),
        ("ess_by_temperature", lambda r: r.trace.ess),
        ("log_marginal_likelihood_by_temperature", lambda r: r.trace.log_z),
    ]:
        data[name] = xr.DataArray(stack(f), dims=["chain", "temperature_bin"])
    if any(np.isfinite(r.log_z_upper) for r in results):
        data["log_marginal_likelihood_upper"] = per_chain(lambda r: r.log_z_upper)
    ds = xr.Dataset(data, coords={"chain": chains})
    if checks is None:
        checks = [msg for r in results for msg in r.checks]
    ds.attrs["evidence_checks"] = "\n".join(checks)
    ds.attrs.update(az.data.base.make_attrs(library=__import__("ppl_hais")))
    return ds


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
) -> az.InferenceData:
    """Build ``InferenceData`` from annealing results (one per chain) and resampled draws.

    ``posterior`` (and ``log_likelihood``) map names to arrays shaped (chain, draw, ...).
    ``checks``: the pooled estimate's failed trust checks; ``initial``: where annealing started.
    """
    groups = {
        "posterior": az.dict_to_dataset(
            dict(posterior), coords=coords, dims=dims, library=__import__("ppl_hais")
        ),
        "sample_stats": sample_stats_dataset(results, checks),
    }
    if log_likelihood:
        groups["log_likelihood"] = az.dict_to_dataset(
            dict(log_likelihood), coords=coords, dims=dims, library=__import__("ppl_hais")
        )
    if observed_data:
        groups["observed_data"] = az.dict_to_dataset(
            dict(observed_data),
            coords=coords,
            dims=dims,
            default_dims=[],
            library=__import__("ppl_hais"),
        )
    settings = dict(results[0].settings) if results else {}
    all_attrs = {f"hais_{k}": str(v) for k, v in settings.items()}
    if initial is not None:
        all_attrs["hais_initial"] = initial
    all_attrs.update(attrs or {})
    for ds in groups.values():
        ds.attrs.update(all_attrs)
    return az.InferenceData(**groups)
