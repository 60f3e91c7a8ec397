"""Plots of annealing results (matplotlib, imported lazily).

``plot_trace`` and ``plot_weights`` take an :class:`AISResult` or the ArviZ output of any
entry point (InferenceData or DataTree: one chain of its ``sample_stats``, ``chain=``).

Example
-------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> result = ph.hais(jax.random.key(0), target, num_particles=64, num_steps=100,
...                  progress_bar=False)
>>> ax = ph.results.plots.plot_weights(result)
>>> type(ax).__name__
'Axes'
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


def _run(obj, chain=0):
    """An AISResult, or the fields the plots need read from ArviZ output's sample_stats."""
    if hasattr(obj, "trace") and hasattr(obj, "log_weights"):
        return obj
    try:
        ss = obj["sample_stats"]
    except (KeyError, TypeError):
        raise TypeError(
            f"expected an AISResult or ppl_hais's ArviZ output, got {type(obj).__name__}"
        ) from None
    if "log_weight" not in ss:
        raise TypeError("this ArviZ output has no annealing sample_stats (log_weight, beta)")
    at = lambda name: np.asarray(ss[name].values)[chain]  # noqa: E731
    lw = at("log_weight")
    return SimpleNamespace(
        trace=SimpleNamespace(
            beta=at("beta"),
            acceptance_rate=at("acceptance_rate"),
            step_size=at("step_size"),
            ess=at("ess_by_temperature"),
        ),
        log_weights=lw,
        ess=float(at("importance_ess")),
        num_particles=lw.size,
    )


__all__ = ["plot_convergence", "plot_trace", "plot_weights"]


def _ladder(obj):
    """The convergence ladder's rungs as arrays (num_steps, log_z, se, bias_gap, warned) and
    the bridge, (estimate, shortfall, excess, SE, warned) or None, from an Evidence, an object
    holding one (``phn.HAIS``) or ArviZ output."""
    ev = getattr(obj, "evidence", obj)
    if getattr(ev, "trajectory", None):
        t = ev.trajectory
        get = lambda f: np.array([getattr(r, f) for r in t], dtype=float)  # noqa: E731
        warned = np.array([bool(r.failed) for r in t])
        bridge = ((ev.log_z, ev.shortfall, ev.excess, ev.log_z_se, bool(ev.checks))
                  if ev.bridged else None)  # fmt: skip
        return get("num_steps"), get("log_z"), get("log_z_se"), get("bias_gap"), warned, bridge
    try:
        ss = obj["sample_stats"]
        at = lambda name: np.asarray(ss[name].values, dtype=float)  # noqa: E731
        lines = ss.attrs["ladder_checks"].split("\n")
        bridge = ((float(ss["log_evidence"]), ss.attrs["shortfall"], ss.attrs["excess"],
                   float(ss["log_evidence_se"]), bool(ss.attrs["evidence_checks"]))
                  if ss.attrs.get("bridged") else None)  # fmt: skip
        return (at("ladder_num_steps"), at("ladder_log_marginal_likelihood"),
                at("ladder_log_marginal_likelihood_se"), at("ladder_bias_gap"),
                np.array([bool(x) for x in lines]), bridge)  # fmt: skip
    except (KeyError, TypeError, AttributeError):
        raise TypeError(
            "plot_convergence(x) draws a convergence ladder: x must be the evidence workflow's "
            "result (ev, hais.evidence) or ArviZ output of php.sample_hais / HAIS.to_arviz() "
            f"run with num_steps=None; got {type(obj).__name__}"
        ) from None


def _plot_ladder(obj, truth, ax, title):
    import matplotlib.pyplot as plt

    steps, log_z, se, gap, warned, bridge = _ladder(obj)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4.2))
    bars = np.where(np.isfinite(se), 2 * se, 0.0)
    ax.errorbar(steps, log_z, yerr=bars, fmt="o-", capsize=3, label="estimate (± 2 SE)")
    for n, z, s in zip(steps, log_z, se, strict=True):
        if not np.isfinite(s):
            ax.annotate("SE = ∞", (n, z), textcoords="offset points", xytext=(6, 4),
                        fontsize=7, color="tab:red")  # fmt: skip
    if warned.any():
        ax.scatter(steps[warned], log_z[warned], s=110, facecolors="none",
                   edgecolors="tab:red", linewidths=1.2, zorder=3,
                   label="a check failed (EvidenceWarning)")  # fmt: skip
    checked = np.isfinite(gap)
    if checked.any():
        ax.scatter(steps[checked], (log_z + gap)[checked], marker="v", color="tab:orange",
                   zorder=3, label="bias check: reverse anneal")  # fmt: skip
    if bridge is not None:  # the estimate: the last rung's two directions bridged
        value, low, high, bridge_se, bridge_warned = bridge
        up = low if np.isfinite(low) else 0.0
        bar, what = ([[high], [up]], "stated interval") if bridge_warned else (
            2 * bridge_se, "± 2 SE: cleared, its doubt in its SE")  # fmt: skip
        ax.errorbar([steps[-1] * 1.15], [value], yerr=bar, fmt="*", ms=11, color="tab:green",
                    capsize=3, zorder=4,
                    label=f"the estimate: forward and reverse bridged ({what})")
        if bridge_warned and not np.isfinite(low):
            ax.annotate("shortfall = ∞", (steps[-1] * 1.15, value), textcoords="offset points",
                        xytext=(6, 4), fontsize=7, color="tab:red")  # fmt: skip
    if truth is not None:
        ax.axhline(truth, ls="--", color="k", lw=1, label="exact")
    ax.set_xscale("log")
    ax.set_xlabel("temperatures (rungs of the convergence ladder)")
    ax.set_ylabel("log Z estimate")
    ax.set_title(title or ("convergence ladder: the estimate bridges the last rung's two "
                           "directions" if bridge is not None else
                           "convergence ladder: the last rung is the estimate"))
    ax.legend(fontsize=8)
    return ax


def plot_convergence(data, results_by_method=None, truth=None, ax=None, title=None):
    """log Ẑ ± 2 SE against the number of temperatures.

    ``plot_convergence(ev)``: the convergence ladder of one call (``ev`` the evidence
    workflow's result, ``hais.evidence``, a ``phn.HAIS`` or the ArviZ output of
    ``php.sample_hais``/``HAIS.to_arviz()``): each rung's estimate, the rungs whose checks
    failed ringed in red, the bias check's reverse estimate where it ran and, where the
    estimate is the bridge of the last rung's forward and reverse anneals
    (``Evidence.bridged``), the estimate with the interval its warning states (± 2 SE where it
    was cleared: :func:`ppl_hais.checks.ladder.bridge_clears`).

    ``plot_convergence(num_steps, results_by_method)``: one series per method;
    ``results_by_method`` maps a label to a list of AISResult (one per entry of ``num_steps``,
    or several per entry as a list of lists: every run is drawn, as in [HAIS12] Fig. 2–3).
    A run whose trust checks failed (an ``EvidenceWarning``) is ringed in red, and one whose
    SE is infinite is marked "SE = ∞" instead of a bar: neither looks like an exact value.
    """
    import matplotlib.pyplot as plt

    if results_by_method is None:
        return _plot_ladder(data, truth, ax, title)
    num_steps = data
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4.2))
    markers = ["x", "*", "o", "s", "^"]
    warned_x, warned_y = [], []
    for i, (label, runs) in enumerate(results_by_method.items()):
        xs, ys, es = [], [], []
        for n, rs in zip(num_steps, runs, strict=True):
            for r in rs if isinstance(rs, list | tuple) else [rs]:
                se = float(r.log_z_se)
                xs.append(n)
                ys.append(r.log_z)
                es.append(2 * se if np.isfinite(se) else 0.0)
                if getattr(r, "warning", False) or not np.isfinite(se):
                    warned_x.append(n)
                    warned_y.append(r.log_z)
                if not np.isfinite(se):
                    ax.annotate("SE = ∞", (n, r.log_z), textcoords="offset points",
                                xytext=(6, 4), fontsize=7, color="tab:red")  # fmt: skip
        ax.errorbar(
            xs, ys, yerr=es, fmt=markers[i % len(markers)], label=label, alpha=0.8, capsize=2
        )
    if warned_x:
        ax.scatter(warned_x, warned_y, s=110, facecolors="none", edgecolors="tab:red",
                   linewidths=1.2, label="warned (EvidenceWarning)", zorder=3)  # fmt: skip
    if truth is not None:
        ax.axhline(truth, ls="--", color="k", lw=1, label="exact")
    ax.set_xscale("log")
    ax.set_xlabel("number of intermediate distributions N")
    ax.set_ylabel("log Z estimate (± 2 SE)")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def plot_trace(result, axes=None, chain=0):
    """Acceptance rate, step size and weight ESS against β for one run."""
    import matplotlib.pyplot as plt

    result = _run(result, chain)
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(11, 3))
    t = result.trace
    axes[0].plot(t.beta, t.acceptance_rate)
    axes[0].set_ylabel("acceptance rate")
    axes[1].plot(t.beta, t.step_size)
    axes[1].set_ylabel("step size")
    axes[2].plot(t.beta, t.ess / result.num_particles)
    axes[2].set_ylabel("ESS / particles")
    for ax in axes:
        ax.set_xlabel("β")
    axes[2].set_ylim(0, 1.05)
    return np.asarray(axes)


def plot_weights(result, ax=None, chain=0):
    """Histogram of the log importance weights relative to the largest, with the ESS.

    A long left tail with a few weights near 0 means the estimate rests on few particles:
    increase ``num_steps``.
    """
    import matplotlib.pyplot as plt

    result = _run(result, chain)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    lw = np.asarray(result.log_weights)
    lw = lw[np.isfinite(lw)] - np.max(lw[np.isfinite(lw)])
    ax.hist(lw, bins=min(50, max(10, lw.size // 10)))
    ax.set_xlabel("log weight − max log weight")
    ax.set_ylabel("particles")
    ax.set_title(f"ESS {result.ess:.0f} of {result.num_particles}")
    return ax


def plot_bridge(result, axes=None, truth=None):
    """Bridge sampling (:class:`~ppl_hais.BridgeResult`, or its ``to_arviz()``) on two panels:
    the fixed point's iterations of log Ẑ (a path that wanders or does not settle: proposal
    and posterior barely overlap), and each chain's estimate with ±2 SE beside the pooled one
    and, after ``cross_check=True``, the forward (lower) and reverse anneals (chains or
    anneals off the pooled band: draws that do not stand for the whole posterior)."""
    import matplotlib.pyplot as plt

    if hasattr(result, "iterations"):
        path, lz, se = np.asarray(result.iterations), result.log_z, result.log_z_se
        chains, chain_se = result.chain_log_z, result.chain_log_z_se
        cc = result.cross_check
        fwd = None if cc is None else (cc.log_z_forward, cc.log_z_forward_se)
        rev = None if cc is None else (cc.log_z_reverse, cc.log_z_reverse_se)
        warned = bool(result.checks)
    else:
        try:
            ss = result["sample_stats"]
        except (KeyError, TypeError):
            raise TypeError(f"expected a BridgeResult, got {type(result).__name__}") from None
        if "bridge_iterations" not in ss:
            raise TypeError("this ArviZ output holds no bridge-sampling estimate")
        val = lambda name: np.asarray(ss[name].values)  # noqa: E731
        path, lz, se = val("bridge_iterations"), float(val("log_marginal_likelihood")), float(
            val("log_marginal_likelihood_se"))  # fmt: skip
        chains, chain_se = val("chain_log_marginal_likelihood"), val(
            "chain_log_marginal_likelihood_se")  # fmt: skip
        fwd = (float(val("log_marginal_likelihood_forward")),
               float(val("log_marginal_likelihood_forward_se"))) if (
            "log_marginal_likelihood_forward" in ss) else None  # fmt: skip
        rev = (float(val("log_marginal_likelihood_reverse")),
               float(val("log_marginal_likelihood_reverse_se"))) if (
            "log_marginal_likelihood_reverse" in ss) else None  # fmt: skip
        warned = bool(val("evidence_warning"))
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    ax0, ax1 = axes
    ax0.plot(np.arange(len(path)), path, "o-", ms=3)
    ax0.set_xlabel("iteration")
    ax0.set_ylabel("log Ẑ")
    ax0.set_title("bridge fixed point" + (" (warned)" if warned else ""))
    labels = [f"chain {c}" for c in range(len(chains))] + ["pooled"]
    values, errs = list(chains) + [lz], list(chain_se) + [se]
    for name, est in (("forward anneal", fwd), ("reverse anneal", rev)):
        if est is not None:
            labels.append(name)
            values.append(est[0])
            errs.append(est[1])
    y = np.arange(len(values))
    finite = np.where(np.isfinite(errs), errs, 0.0)
    ax1.errorbar(values, y, xerr=2 * finite, fmt="o", capsize=3)
    ax1.axvspan(lz - 2 * se, lz + 2 * se, alpha=0.15, color="C0")
    if truth is not None:
        ax1.axvline(truth, color="k", ls="--", lw=1, label="exact")
        ax1.legend()
    ax1.set_yticks(y, labels)
    ax1.set_xlabel("log evidence (±2 SE)")
    return axes
