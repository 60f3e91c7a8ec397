"""Model comparison by log evidence, shaped like ``arviz.compare``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from ..checks.diagnostics import pool, warn
from ..model.observed import ObservedData, differences, from_attrs, observed_data

__all__ = ["EvidenceTable", "compare_evidence", "evidence_of", "observed_of"]


def _last_finite(values) -> float:
    a = np.asarray(values, dtype=float).ravel()
    a = a[np.isfinite(a)]
    return float(a[-1]) if a.size else float("nan")


DRAWS_ONLY = (
    "holds posterior draws but no evidence (what pm.sample or NUTS returns): turn the draws "
    "into evidence by bridge sampling and pass its result instead — through PyMC "
    "`php.bridge_sampling(idata, model)` (inside `with model:` the model may be left out), "
    "through NumPyro `phn.bridge_sampling(mcmc, model, *args)` — or estimate it by annealing "
    "with `php.sample_hais()` / `phn.HAIS(model)`"
)


def _from_idata(idata):
    """(log evidence, SE, warned) from ppl_hais's or pm.sample_smc's InferenceData."""
    if "sample_stats" not in idata:
        raise ValueError(f"this InferenceData has no sample_stats group: it {DRAWS_ONLY}")
    ss = idata["sample_stats"]
    if "log_marginal_likelihood" not in ss and "log_evidence" not in ss:
        raise ValueError(f"this InferenceData {DRAWS_ONLY}")
    gap = float(ss["bias_gap"].values) if "bias_gap" in ss else float("nan")
    short = float(ss.attrs.get("shortfall", float("nan")))
    up = float(ss.attrs.get("excess", float("nan")))
    if "log_evidence" in ss:  # the evidence workflow's own pooled estimate and its checks
        return (float(ss["log_evidence"].values), float(ss["log_evidence_se"].values),
                bool(ss.attrs.get("evidence_checks")), gap, short, up)  # fmt: skip
    lml = np.asarray(ss["log_marginal_likelihood"].values)
    if lml.dtype == object:
        # pm.sample_smc: per chain its stages' values (NaN until β = 1), as (chain, stage)
        # objects, or as one array per chain when the chains ran different numbers of stages
        lml = np.array([_last_finite(v) for v in lml.ravel()]).reshape(lml.shape)
    lml = np.asarray(lml, dtype=float)
    if lml.ndim == 2:  # (chain, draw): the last finite value of each chain is its estimate
        lml = np.array([row[np.isfinite(row)][-1] for row in lml])
    warned = bool(
        ("evidence_warning" in ss and np.any(np.asarray(ss["evidence_warning"].values)))
        or ss.attrs.get("evidence_checks")
    )
    if "log_marginal_likelihood_se" in ss:
        se = np.asarray(ss["log_marginal_likelihood_se"].values, float)
        est, var = pool(lml, se)
        return est, float(np.sqrt(var)), warned, gap, short, up
    if lml.size > 1:  # independent chains without their own error bars: their spread
        est = float(logsumexp(lml) - np.log(lml.size))
        return est, float(np.std(lml, ddof=1) / np.sqrt(lml.size)), warned, gap, short, up
    return float(lml[0]), float("nan"), warned, gap, short, up


def evidence_of(obj):
    """(log evidence, standard error) of an AISResult, an adapter object, the evidence
    workflow's result, InferenceData (ppl_hais's or ``pm.sample_smc``'s) or a (log Z, SE)
    pair."""
    return _estimate(obj)[:2]


def _estimate(obj):
    """(log evidence, standard error, warned, bias gap, shortfall, excess): ``warned`` is
    whether a trust check of that estimate failed; the gap is its bias check's, the shortfall
    the convergence ladder's (:func:`ppl_hais.checks.ladder.shortfall`) and the excess the fall
    without its largest weights (:func:`ppl_hais.stats.estimators.excess`), NaN when none ran."""
    nan = float("nan")
    gap = float(getattr(obj, "bias_gap", nan))
    short = float(getattr(getattr(obj, "evidence", obj), "shortfall", nan))
    up = float(getattr(getattr(obj, "evidence", obj), "excess", nan))
    if hasattr(obj, "log_evidence") and hasattr(obj, "log_evidence_se"):
        return (float(obj.log_evidence), float(obj.log_evidence_se), bool(obj.warning), gap,
                short, up)  # fmt: skip
    if hasattr(obj, "log_z") and hasattr(obj, "log_z_se"):
        warned = bool(getattr(obj, "warning", False))
        return float(obj.log_z), float(obj.log_z_se), warned, gap, short, up
    if hasattr(obj, "sample_stats") or hasattr(obj, "posterior") or hasattr(obj, "children"):
        return _from_idata(obj)  # InferenceData (ArviZ 0.x) or DataTree (1.x)
    if isinstance(obj, tuple) and len(obj) == 2:
        return float(obj[0]), float(obj[1]), False, nan, nan, nan
    if callable(getattr(obj, "get_samples", None)):  # numpyro.infer.MCMC
        raise ValueError(f"a {type(obj).__name__} {DRAWS_ONLY}")
    raise TypeError(
        f"cannot read a log evidence from {type(obj).__name__}: pass an AISResult, a "
        "phn.HAIS that has run, InferenceData from php.sample_hais or pm.sample_smc, a "
        "BridgeResult, or a (log_z, se) pair"
    )


def observed_of(obj) -> ObservedData | None:
    """The observations an evidence result conditions on (:mod:`ppl_hais.model.observed`):
    the record of an adapter's result, a bridge's, or an ArviZ output's attributes; for
    ArviZ output without one (``pm.sample_smc``'s), its ``observed_data`` group; None where
    nothing says (a user's ``AnnealingTarget``, a ``(log_z, se)`` pair)."""
    for holder in (obj, getattr(obj, "evidence", None)):
        record = getattr(holder, "observed_data", None)
        if isinstance(record, ObservedData):
            return record
    if not (hasattr(obj, "sample_stats") or hasattr(obj, "children")):
        return None
    if "sample_stats" in obj:
        record = from_attrs(obj["sample_stats"].attrs)
        if record is not None:
            return record
    if "observed_data" in obj:
        data = obj["observed_data"]
        data = getattr(data, "dataset", data)  # a DataTree node (ArviZ 1.x) or a Dataset
        return observed_data({str(n): np.asarray(data[n].values) for n in data.data_vars})
    return None


class EvidenceTable(pd.DataFrame):
    """:func:`compare_evidence`'s table: a ``pandas.DataFrame`` that prints every column (in a
    terminal pandas would fold the columns past its width into ``...``, hiding the Bayes
    factors and model probabilities); it wraps long rows instead."""

    @property
    def _constructor(self):
        return EvidenceTable

    def __repr__(self) -> str:
        with pd.option_context("display.max_columns", None, "display.expand_frame_repr", True):
            return super().__repr__()

    __str__ = __repr__


def compare_evidence(
    models: Mapping, prior_probs: Mapping | None = None, *, require_same_data: bool = True
) -> pd.DataFrame:
    """Rank models by log marginal likelihood, with Bayes factors and model probabilities.

    Parameters
    ----------
    models : dict
        ``{name: AISResult | phn.HAIS | InferenceData | (log_z, se)}``. InferenceData may come
        from ppl_hais or from ``pm.sample_smc`` (its ``log_marginal_likelihood``).
    prior_probs : dict, optional
        Prior model probabilities (default: equal).
    require_same_data : bool
        Refuse results that condition on different observed data (``True``, default): every
        adapter's result and bridge records a digest of its observations and their number
        (:mod:`ppl_hais.model.observed`; ``pm.sample_smc``'s output is read from its
        ``observed_data`` group), and a difference of evidences over different data is no
        Bayes factor. ``False`` skips the check, for the same data held differently (one
        observed site in one model, several in another). Results that record nothing (a
        ``(log_z, se)`` pair, a user's ``AnnealingTarget``) are not checked.

    Returns
    -------
    EvidenceTable
        A ``pandas.DataFrame`` that prints whole, sorted best first, like ``arviz.compare``:
        ``rank``, ``log_evidence``, ``se``, ``d_log_evidence`` (best minus this model),
        ``dse`` (its SE, the runs being independent), ``bayes_factor`` (evidence of the best
        model over this one), ``prob`` (posterior model probability), ``warning``, ``gap``
        (the bias check's reverse estimate minus the estimate, in nats; NaN where none ran:
        :mod:`ppl_hais.estimate.bias`), ``shortfall`` (nats the estimate may be too low by
        its convergence ladder, :func:`ppl_hais.checks.ladder.shortfall`; inf where that cannot be
        sized, NaN where no ladder ran), ``excess`` (nats it may be too high: its fall
        without its two largest weights, :func:`ppl_hais.stats.estimators.excess`; NaN where
        unknown).

    Examples
    --------
    >>> import ppl_hais as ph
    >>> ph.compare_evidence({"a": (-10.0, 0.1), "b": (-12.0, 0.2)})["prob"].round(3).tolist()
    [0.881, 0.119]
    """
    if not isinstance(models, Mapping):
        raise TypeError(
            "compare_evidence takes a dict {name: result}, as arviz.compare does; got "
            f"{type(models).__name__}"
        )
    if not models:
        raise ValueError("compare_evidence needs at least one model")
    names = list(models)
    est = []
    for n in names:
        try:
            est.append(_estimate(models[n]))
        except (ValueError, TypeError) as err:  # name the entry the user passed
            raise type(err)(f"model {n!r}: {err}") from None
    if require_same_data:
        why = differences({n: observed_of(models[n]) for n in names})
        if why is not None:
            raise ValueError(why)
    log_z = np.array([e[0] for e in est])
    se = np.array([e[1] for e in est])
    warned = np.array([e[2] for e in est], dtype=bool)
    prior = (
        np.ones(len(names))
        if prior_probs is None
        else np.array([float(prior_probs[n]) for n in names])
    )
    if np.any(prior < 0) or prior.sum() <= 0:
        raise ValueError("prior_probs must be non-negative and not all zero")
    log_post = log_z + np.log(prior / prior.sum())
    prob = np.exp(log_post - logsumexp(log_post))
    order = np.argsort(-log_z, kind="stable")
    best = order[0]
    df = EvidenceTable(
        {
            "rank": np.arange(len(names)),
            "log_evidence": log_z[order],
            "se": se[order],
            "d_log_evidence": log_z[best] - log_z[order],
            "dse": np.where(order == best, 0.0, np.sqrt(se[order] ** 2 + se[best] ** 2)),
            "bayes_factor": np.exp(log_z[best] - log_z[order]),
            "prob": prob[order],
            "warning": warned[order],
            "gap": np.array([e[3] for e in est])[order],
            "shortfall": np.array([e[4] for e in est])[order],
            "excess": np.array([e[5] for e in est])[order],
        },
        index=[names[i] for i in order],
    )
    untrusted = [n for n, w, e in zip(names, warned, se, strict=True) if w or np.isinf(e)]
    if untrusted:
        df["prob"] = np.nan
        warn(
            [
                f"model(s) {untrusted}: their evidence estimate failed a trust check or has an "
                "infinite SE, so no model probability is reported. Remedy: rerun them with "
                "more temperatures/particles or initial='laplace' until they pass."
            ],
            "model comparison",
        )
    return df
