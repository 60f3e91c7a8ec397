"""Bridge sampling over an adapter's model from the draws a user already has, optionally
cross-checked by the evidence workflow's forward anneal and a reverse anneal of the draws.

It sits above the evidence workflow (it calls it) and the bridge estimator over arrays
(:mod:`ppl_hais.bridge`), so neither of those imports the other.

Example
-------
>>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
>>> from ppl_hais.model.density import SplitDensity
>>> from ppl_hais.workflow.model_bridge import bridge_evidence
>>> class Model(SplitDensity):  # prior N(0, 1), one observation 1.0 with noise 1
...     dim, improper, prior = 1, (), ph.Gaussian(jnp.zeros(1))
...     def log_parts(self, z):
...         log_lik = -0.5 * (1.0 - z) ** 2 - 0.5 * jnp.log(2 * jnp.pi)
...         return self.prior.log_prob(z), jnp.sum(log_lik)
>>> draws = 0.5 + np.sqrt(0.5) * np.random.default_rng(0).normal(size=(2, 500, 1))  # posterior
>>> res = bridge_evidence(jax.random.key(0), Model(), draws)
>>> exact = -0.25 - 0.5 * np.log(2 * np.pi * 2)  # y ~ N(0, 2)
>>> bool(abs(res.log_z - exact) < 4 * res.log_z_se)
True
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import numpy as np

from ..bridge.checks import CrossCheck, cross_checks
from ..bridge.modes import ModeCheck, mode_check, unvisited_modes
from ..bridge.result import BridgeResult
from ..bridge.sampling import bridge
from ..checks import diagnostics
from ..estimate.reverse import reverse_anneal
from ..model.density import improper_note
from ..model.target import Gaussian
from ..starts.fits import bound_method, laplace_target
from ..starts.laplace import inflation
from .evidence import evidence
from .options import EvidenceOptions

__all__ = ["NUM_REVERSE", "bridge_evidence"]

NUM_REVERSE = 256  # draws annealed back by the cross-check


def bridge_evidence(
    rng_key, model, draws, *, method="normal", cross_check=False, num_reverse=NUM_REVERSE,
    progress_bar=True, diverging=None, mode_search=True, options=None, **keywords,
) -> BridgeResult:  # fmt: skip
    """Bridge sampling over an adapter's model (a :class:`~ppl_hais.model.density.ModelDensity`)
    from its unconstrained draws (chains, draws, D), warning as :func:`bridge_sampling` does.

    ``cross_check=True`` also runs the evidence workflow's forward anneal
    (:func:`ppl_hais.workflow.evidence.evidence` with ``options``, an
    :class:`~ppl_hais.workflow.options.EvidenceOptions`, and its fields in ``keywords``) and a
    reverse anneal of ``num_reverse`` of the draws (evenly spaced over the bridge half of every
    chain) over the forward run's schedule, and reports the three estimates side by side
    (:class:`CrossCheck`), warning where they disagree beyond their noise.

    ``mode_search=True`` (default) compares the draws with the modes the evidence workflow's
    Laplace fit finds (BFGS from several starts, cached on the model): a mode no draw visits
    whose Laplace mass would lift the estimate beyond its noise is the failed ``modes`` check,
    stating by how much (:mod:`ppl_hais.bridge.modes`; ``BridgeResult.modes``).
    """
    options = EvidenceOptions.of(options, "bridge_evidence", **keywords)
    key_bridge, key_fwd, key_rev = jax.random.split(rng_key, 3)
    result = bridge(key_bridge, model.log_joint, draws, method=method, diverging=diverging)
    result = dataclasses.replace(result, observed_data=getattr(model, "observed_data", None))
    checks = result.checks
    found = _modes(model, draws, result.log_z) if mode_search else None
    if found is not None:
        checks = checks + mode_check(found, result.log_z_se)
        result = dataclasses.replace(result, modes=found, checks=checks)
    if cross_check:
        with warnings.catch_warnings():  # its checks are kept in the CrossCheck instead
            warnings.simplefilter("ignore", UserWarning)
            ev = evidence(key_fwd, model, options, progress_bar=progress_bar)
        x = np.asarray(draws, dtype=float)
        x = x[None] if x.ndim == 2 else x
        post = x[:, x.shape[1] // 2 :].reshape(-1, x.shape[-1])
        pick = np.linspace(0, len(post) - 1, min(int(num_reverse), len(post))).astype(int)
        upper, upper_se, used, _ = reverse_anneal(
            key_rev, ev.target, ev.results[0].betas, post[pick], progress_bar=progress_bar
        )
        cc = CrossCheck(ev.log_z, ev.log_z_se, upper, upper_se, tuple(ev.checks),
                        int(ev.gradients + used))  # fmt: skip
        checks = checks + cross_checks(result.log_z, result.log_z_se, cc)
        result = dataclasses.replace(result, cross_check=cc, checks=checks)
    diagnostics.warn(checks, "log evidence (bridge sampling)")
    if getattr(model, "improper", ()):
        warnings.warn(improper_note(model), UserWarning, stacklevel=diagnostics.user_stacklevel())
    return result


def _modes(model, draws, log_z) -> ModeCheck | None:
    """The draws against the modes of the model's Laplace fit; None where the fit fails (no
    finite mode, no positive-definite Hessian: nothing to compare with)."""
    try:
        fit = laplace_target(model).initial
    except ValueError:
        return None
    if isinstance(fit, Gaussian):
        means, trils = fit.mean[None], fit.scale_tril[None]
    else:
        means, trils = fit.means, fit.scale_trils
    trils = np.asarray(trils) / inflation(model.dim)  # the fit's own curvature
    log_joint = bound_method(model, "log_joint")
    log_masses = [float(log_joint(jax.numpy.asarray(m))) + np.sum(np.log(np.abs(np.diag(t))))
                  + 0.5 * len(m) * np.log(2 * np.pi) for m, t in zip(means, trils, strict=True)]
    x = np.asarray(draws, dtype=float)
    return unvisited_modes(x, means, trils, log_masses, log_z)
