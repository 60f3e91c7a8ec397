"""The starts the evidence workflow builds from a model, each kept on the model object: the
prior, the Laplace fit at the mode, independent Student-t marginals with the tails read along
its axes (:mod:`ppl_hais.model.tails`), and natural-gradient variational fits
(:mod:`ppl_hais.starts.vi`).
:mod:`ppl_hais.starts` pilots them and chooses.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.starts.fits import vi_target
>>> class Model:  # y = 1 under N(z, 1), z ~ N(0, 1): the posterior is N(0.5, 0.5)
...     dim, improper, prior = 1, (), ph.Gaussian(jnp.zeros(1), 1.0)
...     def log_joint(self, z):
...         return -0.5 * jnp.sum(z**2) - 0.5 * jnp.sum((1.0 - z) ** 2)
>>> q = vi_target(Model()).initial  # the fit, widened by 1.2 as the Laplace start is
>>> round(float(q.mean[0]), 3), round(float(q.scale_tril[0, 0] / 1.2) ** 2, 3)
(0.5, 0.5)
"""

from __future__ import annotations

import jax
import numpy as np

from ..annealing.execution import initial_sampler
from ..mcmc.fast_random import host_key
from ..model.density import ModelDensity
from ..model.tails import read_tails, tail_start
from ..model.target import AnnealingTarget, Gaussian
from .laplace import inflation, laplace_fit
from .vi import fit_vi

__all__ = ["prior_target", "laplace_target", "laplace_t_target", "vi_target"]

VI_FULL_RANK_UP_TO = 100  # coordinates; a diagonal Gaussian above
STUDENT_T_DF = 3.0
SCALE_INFLATION = 1.2  # the Student-t starts' widening (the Gaussian fits': laplace.inflation)

_LAPLACE_RESTARTS = 8  # prior draws the mode search also starts from (modes: laplace.py)


def bound_method(model, name):
    """``model.<name>`` as a pytree (the unbound function, partially applied to the model), so
    that a model registered as a pytree (its data as leaves: the NumPyro adapter's) gives
    targets that compile once per structure, not once per object
    (``ppl_hais.runtime.structure``)."""
    func = getattr(type(model), name, None)
    if callable(func) and not isinstance(func, staticmethod | classmethod):
        return jax.tree_util.Partial(func, model)
    return getattr(model, name)


def model_cache(model) -> dict:
    return model.__dict__.setdefault("_ppl_hais_targets", {})


def _cached(model, name, build):
    """A target kept on the model object: the same object ⇒ the annealer's compiled scans hit.
    A fit that failed is kept as its error (under ``name + "_error"``), raised again without
    refitting; what it spent (``LaplaceError.gradients``, ``VIError.gradients``) is counted by
    the call that tried it."""
    cache = model_cache(model)
    if name + "_error" in cache:
        raise cache[name + "_error"]
    if name not in cache:
        try:
            cache[name] = build()
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as err:
            # a failed fit's gradients, counted by its call, once: the Student-t fit builds on
            # the Gaussian one and raises its error again
            if hasattr(err, "gradients") and not any(v is err for v in cache.values()):
                cache[name + "_gradients"] = err.gradients
            cache[name + "_error"] = err
            raise
    return cache[name]


def prior_target(model: ModelDensity) -> AnnealingTarget:
    """Anneal prior → posterior (the likelihood form: one density evaluation less per step)."""
    return _cached(
        model,
        "prior",
        lambda: AnnealingTarget(
            initial=model.prior, log_likelihood=bound_method(model, "log_likelihood")
        ),
    )


def laplace_target(model: ModelDensity) -> AnnealingTarget:
    """Anneal N(mode, s² H⁻¹) → prior × likelihood, widened by s =
    :func:`~ppl_hais.starts.laplace.inflation`; the mode is searched from zeros and a few
    prior draws (a fixed key, so the fit, and the compiled target, are the same every call).
    Raises ValueError when no finite mode or no positive-definite Hessian is found."""

    def build():
        starts = np.zeros((1, model.dim))
        if model.prior is not None:
            # the pilot's compiled prior sampler (its first draws are these), not an eager
            # run of the model's sampler, which compiled a program per operation (0.5 s)
            draws = initial_sampler(prior_target(model), _LAPLACE_RESTARTS)(host_key(1))
            starts = np.concatenate([starts, draws])
        log_joint = bound_method(model, "log_joint")
        gaussian, gradients = laplace_fit(log_joint, starts)  # LaplaceError: _cached counts
        model_cache(model)["laplace_gradients"] = gradients  # counted by the call that fits it
        return AnnealingTarget(initial=gaussian, log_density=log_joint)

    return _cached(model, "laplace", build)


def laplace_t_target(model: ModelDensity) -> AnnealingTarget:
    """Anneal from independent Student-t marginals along the Laplace fit's axes, each with the
    tail index the model's density shows there (:func:`ppl_hais.model.tails.read_tails`: 4 D + 1
    density evaluations, counted as gradients); at its heaviest mode where the fit found
    several (heavy tails end BFGS searches far out). Raises ValueError where the fit fails."""

    def build():
        laplace = laplace_target(model)
        fit = laplace.initial
        if not isinstance(fit, Gaussian):  # a GaussianMixture: its heaviest component
            k = int(np.argmax(fit.weights))
            fit = Gaussian(fit.means[k], scale_tril=fit.scale_trils[k])
        reading = read_tails(laplace.log_density, fit, inflation(model.dim))  # its own curvature
        model_cache(model)["laplace_t_gradients"] = 4 * model.dim + 1  # the tail probe
        model_cache(model)["laplace_t_fit"] = reading  # the tails read: which starts are too light
        start = tail_start(reading, SCALE_INFLATION)
        return AnnealingTarget(initial=start, log_density=laplace.log_density)

    return _cached(model, "laplace_t", build)


def _fit_start(model):
    """(mean, scale_tril) to start a VI fit from: the Laplace fit when it found one mode (it
    is cached when ``auto`` tried it), else zeros and the identity."""
    laplace = model_cache(model).get("laplace")
    if laplace is not None and isinstance(laplace.initial, Gaussian):
        g = laplace.initial
        tril = g.scale_tril if g.scale_tril is not None else np.diag(g.scale)
        return np.asarray(g.mean), np.asarray(tril) / inflation(model.dim)
    return np.zeros(model.dim), np.eye(model.dim)


def vi_target(model: ModelDensity, family: str = "gaussian") -> AnnealingTarget:
    """Anneal from a natural-gradient variational fit (:func:`ppl_hais.starts.vi.fit_vi`) →
    prior × likelihood: ``family="gaussian"`` (full rank up to 100 coordinates, diagonal
    above), widened as the Laplace start is (:func:`~ppl_hais.starts.laplace.inflation`), or
    ``"student_t"`` (ν = 3, fitted from the Gaussian fit), widened by 1.2. Raises
    :class:`~ppl_hais.starts.vi.VIError` when the fit's ELBO is not finite."""

    def build():
        log_joint = bound_method(model, "log_joint")
        key = host_key(2)  # a fixed key: the same fit, and compiled target, every call
        if family == "student_t":
            gaussian = vi_target(model).initial
            tril = gaussian.scale_tril if gaussian.scale_tril is not None else np.diag(
                gaussian.scale
            )
            fit = fit_vi(key, log_joint, gaussian.mean, tril / inflation(model.dim),
                         family="student_t", df=STUDENT_T_DF, scale_inflation=SCALE_INFLATION)
        else:
            mean, tril = _fit_start(model)
            fam = "gaussian" if model.dim <= VI_FULL_RANK_UP_TO else "diagonal"
            fit = fit_vi(key, log_joint, mean, tril, family=fam,
                         scale_inflation=inflation(model.dim))  # fmt: skip
        model_cache(model)[f"{name}_gradients"] = fit.gradients
        model_cache(model)[f"{name}_fit"] = fit
        return AnnealingTarget(initial=fit.distribution, log_density=log_joint)

    name = "vi" if family == "gaussian" else family
    return _cached(model, name, build)
