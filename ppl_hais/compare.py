"""Model comparison by log evidence, shaped like ``arviz.compare``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.special import logsumexp

__all__ = ["compare_evidence", "evidence_of"]


def _from_idata(idata):
    ss = idata.sample_stats
    lml = np.asarray(ss["log_marginal_likelihood"].values)
    if lml.dtype == object:  # pm.sample_smc: (chain, stage) objects, NaN until beta = 1
        lml = np.array([[np.asarray(v, float).ravel()[-1] for v in row] for row in lml])
    lml = np.asarray(lml, dtype=float)
    if lml.ndim == 2:  # (chain, draw): the last finite value of each chain is its estimate
        lml = np.array([row[np.isfinite(row)][-1] for row in lml])
    if "log_marginal_likelihood_se" in ss:
        se = np.asarray(ss["log_marginal_likelihood_se"].values, float)
        est, var = _pool(lml, se)
        return est, np.sqrt(var)
    if lml.size > 1:  # independent chains without their own error bars: their spread
        return float(logsumexp(lml) - np.log(lml.size)), float(
            np.std(lml, ddof=1) / np.sqrt(lml.size)
        )
    return float(lml[0]), float("nan")


def _pool(log_z, se):
    """Pool independent runs of equal size: log of the mean of the Ẑ's, and the variance of it.

    The variance is the larger of two estimates: the runs' own (delta method on each run's SE
    from its weights) and the runs' spread, Var_c(Ẑ_c/Ẑ)/C. Runs that disagree by more than
    their weights say (heavy-tailed weights, a mode one run missed) widen the error bar.
    """
    log_z, se = np.atleast_1d(log_z), np.atleast_1d(se)
    c = log_z.size
    est = float(logsumexp(log_z) - np.log(c))
    rel = np.exp(log_z - est)  # Ẑ_c / Ẑ
    var = float(np.sum((rel * se) ** 2) / c**2)
    if c > 1:
        var = max(var, float(np.var(rel, ddof=1) / c))
    return est, var


def evidence_of(obj):
    """(log evidence, standard error) of an AISResult, an adapter object or InferenceData."""
    if hasattr(obj, "log_evidence") and hasattr(obj, "log_evidence_se"):
        return float(obj.log_evidence), float(obj.log_evidence_se)
    if hasattr(obj, "log_z") and hasattr(obj, "log_z_se"):
        return float(obj.log_z), float(obj.log_z_se)
    if hasattr(obj, "sample_stats"):
        return _from_idata(obj)
    if isinstance(obj, tuple) and len(obj) == 2:
        return float(obj[0]), float(obj[1])
    raise TypeError(f"cannot read a log evidence from {type(obj).__name__}")


def compare_evidence(models: Mapping, prior_probs: Mapping | None = None) -> pd.DataFrame:
    """Rank models by log marginal likelihood, with Bayes factors and model probabilities.

    Parameters
    ----------
    models : dict
        ``{name: AISResult | phn.HAIS | InferenceData | (log_z, se)}``. InferenceData may come
        from ppl_hais or from ``pm.sample_smc`` (its ``log_marginal_likelihood``).
    prior_probs : dict, optional
        Prior model probabilities (default: equal).

    Returns
    -------
    pandas.DataFrame
        Sorted best first, like ``arviz.compare``: ``rank``, ``log_evidence``, ``se``,
        ``d_log_evidence`` (best minus this model), ``dse`` (its SE, the runs being independent),
        ``bayes_factor`` (evidence of the best model over this one), ``prob`` (posterior model
        probability).

    Examples
    --------
    >>> import ppl_hais as ph
    >>> ph.compare_evidence({"a": (-10.0, 0.1), "b": (-12.0, 0.2)})["prob"].round(3).tolist()
    [0.881, 0.119]
    """
    if not models:
        raise ValueError("compare_evidence needs at least one model")
    names = list(models)
    est = np.array([evidence_of(models[n]) for n in names])
    log_z, se = est[:, 0], est[:, 1]
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
    df = pd.DataFrame(
        {
            "rank": np.arange(len(names)),
            "log_evidence": log_z[order],
            "se": se[order],
            "d_log_evidence": log_z[best] - log_z[order],
            "dse": np.where(order == best, 0.0, np.sqrt(se[order] ** 2 + se[best] ** 2)),
            "bayes_factor": np.exp(log_z[best] - log_z[order]),
            "prob": prob[order],
        },
        index=[names[i] for i in order],
    )
    return df
