"""Simulation-based calibration of Bayes factors, and Bayes-factor design analysis.

A Bayes factor estimate is accurate for a design when, over data sets simulated from the
models' joint prior (a model drawn with its prior probability, its parameters from their
prior, data from its likelihood), the posterior model probabilities are calibrated
(Schad, Nicenboim, Bürkner, Betancourt & Vasishth 2022; Schad, Modrák & Vasishth 2024):

- **marginally**: the average posterior probability of each model equals its prior
  probability (E[p(M | y)] = p(M) under the joint prior, whatever the design);
- **conditionally**: among data sets given posterior probability p for a model, that model
  is the true one a share p of the time (the calibration plot).

Both hold exactly for exact evidences, so a departure beyond Monte Carlo error is the
estimator's. This module holds the arithmetic over arrays: given which model made each data
set and every model's log evidence ± SE on it, :class:`BayesFactorCalibration` gives the
posterior probabilities, both checks, the design analysis (the share of data sets whose Bayes
factor reaches a threshold, by true model; Schönbrodt & Wagenmakers 2018), a plot and ArviZ
output. The adapters draw the data sets with the PPL's own prior predictive and fill it
(``phn.calibrate_bayes_factors``, ``php.calibrate_bayes_factors``).

Example
-------
>>> import numpy as np
>>> from ppl_hais.workflow.calibration import BayesFactorCalibration
>>> rng = np.random.default_rng(0)
>>> true = rng.integers(0, 2, size=400)
>>> log_bf = np.where(true == 1, 1.0, -1.0) + rng.normal(size=400)  # log p(y|M1) - log p(y|M0)
>>> cal = BayesFactorCalibration(("M0", "M1"), np.array([0.5, 0.5]), true,
...     np.stack([np.zeros(400), log_bf], axis=1), np.zeros((400, 2)))
>>> float(cal.marginal().loc["M1", "prior"])
0.5
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from ..checks.record import warn
from ..results.arviz import assemble
from .datasets import BATCH_SIZE, estimate_all

__all__ = ["BayesFactorCalibration", "calibrate", "check_models", "check_prior_probs",
           "draw_models", "simulate"]


def draw_models(rng: np.random.Generator, prior_probs, num_datasets: int,
                stratified: bool = False) -> np.ndarray:  # fmt: skip
    """Which model makes each data set: drawn with the prior probabilities, or (``stratified``,
    for a design analysis) the same number from each model, in blocks."""
    prior = np.asarray(prior_probs, dtype=float)
    if stratified:
        return np.repeat(np.arange(len(prior)), -(-int(num_datasets) // len(prior)))[
            : int(num_datasets)]  # fmt: skip
    return rng.choice(len(prior), size=int(num_datasets), p=prior / prior.sum())


def check_models(models, data_sites, what: str) -> list[str]:
    """The data's site names, after refusing fewer than two models (``models``, a dict; ``what``
    names them in the error) or models whose ``data_sites`` (name -> site names) differ."""
    if not isinstance(models, Mapping) or len(models) < 2:
        raise TypeError(f"calibrate_bayes_factors takes a dict {{name: model}} of two or more "
                        f"{what}")  # fmt: skip
    sites = {n: sorted(s) for n, s in data_sites.items()}
    first = next(iter(sites.values()))
    if not first or any(s != first for s in sites.values()):
        raise ValueError(
            "the models must observe the same sites (the data every model is fitted to): "
            + "; ".join(f"{n}: {s}" for n, s in sites.items()) + "."
        )
    return first


def simulate(true, num_models: int, draw) -> dict:
    """Each data set's observed values from the model ``true`` names for it: ``draw(m, n)``
    gives model ``m``'s ``n`` prior-predictive data sets as ``{site: (n, ...)}``; the result
    holds (N, ...) arrays by site."""
    true = np.asarray(true)
    data = {}
    for m in range(num_models):
        idx = np.flatnonzero(true == m)
        if not len(idx):
            continue
        for site, values in draw(m, len(idx)).items():
            v = np.asarray(values)
            if site not in data:
                data[site] = np.zeros((len(true),) + v.shape[1:], dtype=v.dtype)
            data[site][idx] = v
    return data


def check_prior_probs(names, prior_probs) -> np.ndarray:
    """The prior model probabilities as an array in ``names``' order (equal by default)."""
    if prior_probs is None:
        return np.full(len(names), 1.0 / len(names))
    missing = [n for n in names if n not in prior_probs]
    if missing:
        raise ValueError(f"prior_probs gives no probability for model(s) {missing}")
    prior = np.array([float(prior_probs[n]) for n in names])
    if np.any(prior < 0) or not prior.sum() > 0:
        raise ValueError("prior_probs must be non-negative and not all zero")
    return prior / prior.sum()


def calibrate(rng_key, names, prior, true, datasets, fits, *, progress_bar=True,
              settings=None, started=None, batch_size=BATCH_SIZE):  # fmt: skip
    """Every model's evidence on every data set (``fits[name](key, data)``, ``batch_size``
    data sets side by side: :func:`~ppl_hais.workflow.datasets.estimate_all`), then the
    :class:`BayesFactorCalibration`, warning where it misses."""
    start = time.perf_counter() if started is None else started
    est = estimate_all(rng_key, list(names), datasets, fits, batch_size=batch_size,
                       progress_bar=progress_bar)  # fmt: skip
    out = BayesFactorCalibration(tuple(names), np.asarray(prior, float), np.asarray(true),
                                 est.log_z, est.log_z_se, est.checks != "", est.checks,
                                 est.gradients, time.perf_counter() - start,
                                 dict(settings or {}), dict(datasets))  # fmt: skip
    out.warn_if_miscalibrated()
    return out


@dataclass(frozen=True, eq=False)
class BayesFactorCalibration:
    """Every model's evidence on every simulated data set, and what they say of calibration.

    Attributes
    ----------
    models : tuple of str
    prior_probs : (M,) array
        The prior model probabilities the data sets were drawn with.
    true_model : (N,) int array
        The index of the model that made each data set.
    log_evidence, log_evidence_se : (N, M) arrays
        Each model's log evidence on each data set and its standard error.
    warning : (N, M) bool array
        Whether that estimate raised an ``EvidenceWarning`` (its checks in ``checks``).
    checks : (N, M) array of str
        The failed checks' names, comma-separated ("" where none failed).
    gradients : (N, M) array
        The model gradients each estimate spent (0 for an exact one).
    wall_time : float
        Seconds for the whole calibration, data included.
    datasets : dict
        The simulated data by observed site, each (N, ...).
    """

    models: tuple
    prior_probs: np.ndarray
    true_model: np.ndarray
    log_evidence: np.ndarray
    log_evidence_se: np.ndarray
    warning: np.ndarray = None
    checks: np.ndarray = None
    gradients: np.ndarray = None
    wall_time: float = float("nan")
    settings: dict = field(default_factory=dict)
    datasets: dict = field(default_factory=dict)

    def __post_init__(self):
        shape = np.shape(self.log_evidence)
        if self.warning is None:
            object.__setattr__(self, "warning", np.zeros(shape, dtype=bool))
        if self.checks is None:
            object.__setattr__(self, "checks", np.full(shape, "", dtype=object))
        if self.gradients is None:
            object.__setattr__(self, "gradients", np.zeros(shape))

    @property
    def num_datasets(self) -> int:
        return int(len(self.true_model))

    @property
    def posterior_probs(self) -> np.ndarray:
        """(N, M) posterior model probabilities on each data set."""
        log_post = np.asarray(self.log_evidence, float) + np.log(self.prior_probs)
        return np.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))

    @property
    def warned(self) -> np.ndarray:
        """(N,) whether any model's estimate on the data set warned (or failed)."""
        return np.asarray(self.warning, bool).any(axis=1)

    @property
    def failed(self) -> np.ndarray:
        """(N,) whether some model's evidence on the data set could not be estimated (its
        error in ``checks``): its posterior probabilities are NaN, and the calibration's
        figures leave it out, counting it."""
        return ~np.isfinite(np.asarray(self.log_evidence, float)).all(axis=1)

    def log_bayes_factor(self, numerator=1, denominator=0) -> np.ndarray:
        """(N,) log Bayes factor of model ``numerator`` over ``denominator`` (names or
        indices) on each data set."""
        i, j = self._index(numerator), self._index(denominator)
        return self.log_evidence[:, i] - self.log_evidence[:, j]

    def _index(self, model) -> int:
        if isinstance(model, str):
            if model not in self.models:
                raise ValueError(f"no model {model!r}: the models are {list(self.models)}")
            return self.models.index(model)
        return int(model)

    def marginal(self, include_warned: bool = True) -> pd.DataFrame:
        """Marginal calibration: per model its prior probability, the mean posterior
        probability over the data sets, that mean's Monte Carlo SE, and ``z`` = (mean −
        prior) / SE; exact evidences keep z within ±2 in 95% of calibrations. ``include_warned``
        False drops the data sets where an estimate warned (their share is ``warned``); data
        sets where an estimate failed are left out either way (``failed`` counts them)."""
        keep = ~self.failed & (True if include_warned else ~self.warned)
        post = self.posterior_probs[keep]
        n = max(int(keep.sum()), 1)
        mean = post.mean(axis=0)
        se = post.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.full(len(mean), np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (mean - self.prior_probs) / se
        return pd.DataFrame(
            {"prior": self.prior_probs, "mean_posterior": mean, "mcse": se, "z": z,
             "true_share": np.bincount(self.true_model[keep], minlength=len(self.models)) / n,
             "datasets": n, "warned": float(np.mean(self.warned)),
             "failed": int(self.failed.sum())},
            index=list(self.models),
        )  # fmt: skip

    def calibration(self, num_bins: int = 10, model=None) -> pd.DataFrame:
        """Conditional calibration: the data sets' posterior probabilities for a model in
        ``num_bins`` equal bins of [0, 1], each bin's mean probability (``predicted``), the
        share of its data sets that model made (``observed``), its count and that share's
        binomial SE. ``model`` None pools every model's probabilities (each data set counts
        once per model)."""
        ok = ~self.failed
        post, true = self.posterior_probs[ok], self.true_model[ok]
        models = range(len(self.models)) if model is None else [self._index(model)]
        p = np.concatenate([post[:, m] for m in models])
        hit = np.concatenate([(true == m).astype(float) for m in models])
        edges = np.linspace(0.0, 1.0, int(num_bins) + 1)
        which = np.clip(np.digitize(p, edges[1:-1]), 0, int(num_bins) - 1)
        rows = []
        for b in range(int(num_bins)):
            sel = which == b
            k = int(sel.sum())
            obs = float(hit[sel].mean()) if k else float("nan")
            pred = float(p[sel].mean()) if k else float("nan")
            se = float(np.sqrt(max(pred * (1 - pred), 1e-12) / k)) if k else float("nan")
            rows.append((edges[b], edges[b + 1], pred, obs, k, se))
        return pd.DataFrame(rows, columns=["lower", "upper", "predicted", "observed", "count",
                                           "se"])  # fmt: skip

    def design(self, numerator=1, denominator=0, threshold: float = 10.0) -> pd.DataFrame:
        """Bayes-factor design analysis (Schönbrodt & Wagenmakers 2018): for each true model,
        the share of its data sets whose Bayes factor of ``numerator`` over ``denominator``
        reaches ``threshold`` (evidence for the numerator), falls to 1/``threshold`` (for the
        denominator) or lies between (inconclusive), with the median log Bayes factor and the
        shares' binomial SEs."""
        log_bf, cut = self.log_bayes_factor(numerator, denominator), np.log(float(threshold))
        rows = {}
        for m, name in enumerate(self.models):
            sel = (self.true_model == m) & ~self.failed
            n = int(sel.sum())
            if n == 0:
                continue
            up, down = float(np.mean(log_bf[sel] >= cut)), float(np.mean(log_bf[sel] <= -cut))
            rows[name] = dict(datasets=n, median_log_bf=float(np.median(log_bf[sel])),
                              for_numerator=up, for_denominator=down,
                              inconclusive=1.0 - up - down,
                              se=float(np.sqrt(max(up * (1 - up), down * (1 - down)) / n)))
        return pd.DataFrame.from_dict(rows, orient="index")

    def warn_if_miscalibrated(self) -> None:
        """An ``EvidenceWarning`` where the marginal calibration misses beyond 3 Monte Carlo
        SEs (exact evidences do so in 0.3% of calibrations) or data sets warned: the estimated
        Bayes factors are then not accurate for this design, by the table's figures."""
        table = self.marginal()
        off = table[np.abs(table["z"]) > 3]
        msgs = []
        if len(off):
            msgs.append(
                "calibration: the mean posterior probability of "
                + ", ".join(f"{n} is {r.mean_posterior:.3f} ± {r.mcse:.3f} against its prior "
                            f"{r.prior:.3f}" for n, r in off.iterrows())
                + ", beyond 3 Monte Carlo SEs: the Bayes factors are biased for this design. "
                "Remedy: more temperatures or initial='laplace' for the evidences "
                "(the warned data sets show which model's estimates fail)."
            )
        if self.warned.any():
            failed = int(self.failed.sum())
            msgs.append(
                f"warned: {int(self.warned.sum())} of {self.num_datasets} data sets have an "
                "evidence estimate that failed a trust check (kept in every figure; "
                "marginal(include_warned=False) drops them)"
                + (f"; on {failed} an estimate failed outright (left out of the figures, its "
                   "error in checks)" if failed else "") + "."
            )
        warn(msgs, "Bayes-factor calibration")

    def plot(self, num_bins: int = 10, model=None, ax=None):
        """The calibration plot: each bin's share of data sets made by the model against its
        mean posterior probability, ±2 binomial SEs, the diagonal where calibration holds."""
        import matplotlib.pyplot as plt

        table = self.calibration(num_bins, model).dropna()
        ax = ax or plt.subplots(figsize=(4.5, 4.5))[1]
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="calibrated")
        ax.errorbar(table["predicted"], table["observed"], yerr=2 * table["se"], fmt="o",
                    capsize=3, label="data sets (±2 SE)")  # fmt: skip
        which = "every model" if model is None else str(self.models[self._index(model)])
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel=f"posterior probability ({which})",
               ylabel="share of data sets from that model",
               title=f"{self.num_datasets} simulated data sets")  # fmt: skip
        ax.legend(loc="upper left", frameon=False)
        return ax

    def to_arviz(self):
        """ArviZ output (DataTree on ArviZ >= 1, InferenceData on 0.x) with one group,
        ``sample_stats``, over dims ``dataset`` and ``model``: ``true_model``,
        ``log_evidence``, ``log_evidence_se``, ``posterior_prob``, ``evidence_warning``,
        ``checks``, ``gradients``; ``prior_prob`` over ``model``."""
        import xarray as xr

        data = {
            "true_model": (["dataset"], np.asarray(self.models)[self.true_model]),
            "log_evidence": (["dataset", "model"], np.asarray(self.log_evidence, float)),
            "log_evidence_se": (["dataset", "model"], np.asarray(self.log_evidence_se, float)),
            "posterior_prob": (["dataset", "model"], self.posterior_probs),
            "evidence_warning": (["dataset", "model"], np.asarray(self.warning, bool)),
            "checks": (["dataset", "model"], np.asarray(self.checks, dtype=str)),
            "gradients": (["dataset", "model"], np.asarray(self.gradients, float)),
            "prior_prob": (["model"], np.asarray(self.prior_probs, float)),
        }
        ds = xr.Dataset(data, coords={"dataset": np.arange(self.num_datasets),
                                      "model": list(self.models)})  # fmt: skip
        ds.attrs.update(wall_time=float(self.wall_time),
                        **{k: str(v) for k, v in self.settings.items()})  # fmt: skip
        return assemble({"sample_stats": ds})
