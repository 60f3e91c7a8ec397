"""Where annealing starts: the initial distributions the evidence workflow builds from a
model, and the choice among them by a discarded pilot run.

``initial="auto"`` pilots the prior. A prior whose pilot works (``PRIOR_WORKS``) is kept and
nothing is fitted; otherwise a Laplace fit at the posterior mode is piloted too, and when
neither reaches half the pilot's particles in importance ESS (a hard path: a funnel, heavy
tails), a Gaussian and a Student-t fitted by natural-gradient variational inference
(:mod:`ppl_hais.vi`) are piloted as well. The start whose pilot weights have the largest
importance ESS wins, a fit only where it beats the prior's beyond its noise. Any normalized
start keeps Ẑ unbiased for p(data | model): the start only changes the path. Each target is
kept on the model object, so a second call compiles nothing and fits nothing.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.starts import vi_target
>>> class Model:  # y = 1 under N(z, 1), z ~ N(0, 1): the posterior is N(0.5, 0.5)
...     dim, improper, prior = 1, (), ph.Gaussian(jnp.zeros(1), 1.0)
...     def log_joint(self, z):
...         return -0.5 * jnp.sum(z**2) - 0.5 * jnp.sum((1.0 - z) ** 2)
>>> q = vi_target(Model()).initial  # the fit, widened by 1.2 as the Laplace start is
>>> round(float(q.mean[0]), 3), round(float(q.scale_tril[0, 0] / 1.2) ** 2, 3)
(0.5, 0.5)
"""

from __future__ import annotations

import warnings

import jax
import numpy as np

from . import diagnostics, estimators, progress
from ._names import refuse_unknown
from .annealing import PilotOptions, survey
from .annealing.bias import suspect_outside
from .annealing.execution import initial_sampler
from .annealing.kernels import HAISOptions, mixed_kernel
from .density import ModelDensity, improper_error, outside_support_note
from .laplace import laplace_fit
from .mcmc.fast_random import host_key
from .options import INITIALS
from .precision import float64
from .result import InitialSupportError
from .target import AnnealingTarget, Gaussian
from .vi import fit_vi

__all__ = ["NAMES", "choose_initial", "prior_target", "laplace_target", "vi_target"]

NAMES = INITIALS  # the names initial= takes besides a distribution
VI_BELOW = 0.5  # "auto" fits VI starts when the best pilot ESS is below this fraction
# A prior whose pilot reaches this fraction in ESS, its particles ending within its central 95%
# (the posterior lies inside the prior), is kept over any fitted start, and no VI fit is made. A
# Gaussian at the mode or a fit by reverse KL is mode-seeking: in a funnel's neck it holds less
# mass than the posterior, so its pilot's ESS is *higher* than the prior's precisely because it
# does not see what it misses. On a centered 10-D funnel with weak data (prior pilot ESS 41-52%)
# the fitted starts won most pilots and 4 of 10 NumPyro runs (VI starts) and 5 of 10 PyMC runs
# (Laplace) were 0.10-0.16 nat low without a warning; from the prior, all right. A quarter was
# too low: a vague N(0, 100²) regression's prior pilot reached 3-25% and, kept at 25%, gave an
# error bar 45x wider than Laplace's (benchmarks/trust_suite.py).
PRIOR_WORKS = 1 / 3
# A prior whose pilot reaches PRIOR_WORKS within one jackknife SE of its ESS gets the Laplace
# fit piloted too (no VI fit) and gives way only to a pilot near exact, this fraction: the vague
# regression's prior pilot once reached 22.2 of 64 (SE 3.0), was kept, and its ladder climbed
# to 16,000 temperatures (45x the gradients of its other calls, whose Laplace pilots reach 63.8).
# Giving way to any fit that beats it moved 2 of 40 held-out centered-funnel runs to VI starts,
# 0.07-0.10 nat lower at 20x the gradients (stop 60, docs/trust_suite.md). A prior pilot that
# reaches it, with no more outside than the noise of its own draws' 5% (8 of 64), is kept:
# eight schools' reached 62.4-63.0 with 7 outside, and a fit was made for nothing (stop 61).
# Beyond that a fit may pay: a target twice the prior's width ends none outside its Laplace.
NEAR_EXACT = 0.9
# A fitted start replaces the prior only when its pilot's importance ESS exceeds the prior's by
# more than this many jackknife SEs of the difference. On the 10-D funnel a Laplace start won
# ties such as 5.4 against 4.8 (of 64) and 47.5 against 47.4; every run from it ended warned
# and one was 1.2 nat low without a warning (benchmarks/trust_suite.py, key 733). Fits that
# pay win by far more: the regressions' Laplace starts 56-64 against the prior's 1-21.
FIT_BEATS = 2.0
VI_FULL_RANK_UP_TO = 100  # coordinates; a diagonal Gaussian above
STUDENT_T_DF = 3.0
SCALE_INFLATION = 1.2  # as the Laplace start's: fits are narrower than the posterior

_LAPLACE_RESTARTS = 8  # prior draws the mode search also starts from (modes: laplace.py)


def discrete(model):
    """The model's discrete-coordinate mask as a tuple, or None when it has none."""
    mask = getattr(model, "discrete", None)
    return None if mask is None or not any(mask) else tuple(bool(x) for x in mask)


def transition(model, kernel_options: HAISOptions):
    """The model's transition: the HAIS kernel of ``kernel_options``, with Metropolis moves of
    the integer coordinates where the model has discrete ones (``mixed_kernel``)."""
    kernel = kernel_options.kernel()
    mask = discrete(model)
    return kernel if mask is None else mixed_kernel(mask, kernel)


def _method(model, name):
    """``model.<name>`` as a pytree (the unbound function, partially applied to the model), so
    that a model registered as a pytree (its data as leaves: the NumPyro adapter's) gives
    targets that compile once per structure, not once per object (``ppl_hais.structure``)."""
    func = getattr(type(model), name, None)
    if callable(func) and not isinstance(func, staticmethod | classmethod):
        return jax.tree_util.Partial(func, model)
    return getattr(model, name)


def _cache(model) -> dict:
    return model.__dict__.setdefault("_ppl_hais_targets", {})


def _cached(model, name, build):
    """A target kept on the model object: the same object ⇒ the annealer's compiled scans hit.
    A fit that failed is kept as its error (under ``name + "_error"``), raised again without
    refitting; what it spent (``LaplaceError.gradients``, ``VIError.gradients``) is counted by
    the call that tried it."""
    cache = _cache(model)
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
            # the pilot's compiled prior sampler (its first draws are these), not an eager
            # run of the model's sampler, which compiled a program per operation (0.5 s)
            draws = initial_sampler(prior_target(model), _LAPLACE_RESTARTS)(host_key(1))
            starts = np.concatenate([starts, draws])
        log_joint = _method(model, "log_joint")
        gaussian, gradients = laplace_fit(log_joint, starts)  # LaplaceError: _cached counts
        _cache(model)["laplace_gradients"] = gradients  # counted by the call that fits it
        return AnnealingTarget(initial=gaussian, log_density=log_joint)

    return _cached(model, "laplace", build)


def _fit_start(model):
    """(mean, scale_tril) to start a VI fit from: the Laplace fit when it found one mode (it
    is cached when ``auto`` tried it), else zeros and the identity."""
    laplace = _cache(model).get("laplace")
    if laplace is not None and isinstance(laplace.initial, Gaussian):
        g = laplace.initial
        tril = g.scale_tril if g.scale_tril is not None else np.diag(g.scale)
        return np.asarray(g.mean), np.asarray(tril) / SCALE_INFLATION
    return np.zeros(model.dim), np.eye(model.dim)


def vi_target(model: ModelDensity, family: str = "gaussian") -> AnnealingTarget:
    """Anneal from a natural-gradient variational fit (:func:`ppl_hais.vi.fit_vi`) →
    prior × likelihood: ``family="gaussian"`` (full rank up to 100 coordinates, diagonal
    above) or ``"student_t"`` (ν = 3, fitted from the Gaussian fit). Widened by 1.2. Raises
    :class:`~ppl_hais.vi.VIError` when the fit's ELBO is not finite."""

    def build():
        log_joint = _method(model, "log_joint")
        key = host_key(2)  # a fixed key: the same fit, and compiled target, every call
        if family == "student_t":
            gaussian = vi_target(model).initial
            tril = gaussian.scale_tril if gaussian.scale_tril is not None else np.diag(
                gaussian.scale
            )
            fit = fit_vi(key, log_joint, gaussian.mean, tril / SCALE_INFLATION,
                         family="student_t", df=STUDENT_T_DF, scale_inflation=SCALE_INFLATION)
        else:
            mean, tril = _fit_start(model)
            fam = "gaussian" if model.dim <= VI_FULL_RANK_UP_TO else "diagonal"
            fit = fit_vi(key, log_joint, mean, tril, family=fam,
                         scale_inflation=SCALE_INFLATION)  # fmt: skip
        _cache(model)[f"{name}_gradients"] = fit.gradients
        _cache(model)[f"{name}_fit"] = fit
        return AnnealingTarget(initial=fit.distribution, log_density=log_joint)

    name = "vi" if family == "gaussian" else family
    return _cached(model, name, build)


def _user_target(model, initial):
    if not (
        callable(getattr(initial, "sample", None))
        and callable(getattr(initial, "log_prob", None))
    ):
        raise TypeError(
            "initial must be 'auto', 'prior', 'laplace', or a normalized distribution with "
            "NumPyro's sample(rng_key, sample_shape) and log_prob(z); got "
            f"{type(initial).__name__}"
        )
    dim = getattr(initial, "dim", None)
    if dim is not None and dim != model.dim:
        raise ValueError(
            f"the initial distribution has dimension {dim}; the model has {model.dim} "
            "unconstrained coordinates"
        )
    return AnnealingTarget(initial=initial, log_density=model.log_joint)


def choose_initial(rng_key, model: ModelDensity, initial="auto", *, num_steps=1000,
                   **hais_kwargs):  # fmt: skip
    """(name, target, pilot, choice) for ``initial``; ``hais_kwargs`` are the transition's
    and the pilot's options of :func:`ppl_hais.hais` (:class:`HAISOptions`,
    :class:`~ppl_hais.annealing.PilotOptions`), for a main run of ``num_steps`` temperatures.

    ``"auto"`` pilots the prior first (the pilot the main run needs anyway) and keeps it, fitting
    nothing, when its pilot reaches ``PRIOR_WORKS`` of its particles in importance ESS with
    fewer than 10% ending outside its central 95% (or, at ``NEAR_EXACT``, within the noise of
    the 5% its own draws leave): a mode-seeking fit can miss mass (a funnel's neck) without its
    ESS showing it. Otherwise the Laplace Gaussian is piloted too and wins by more than
    ``FIT_BEATS`` jackknife SEs of the ESS difference; when neither reaches ``VI_BELOW``, the
    natural-gradient VI fits (a Gaussian, a Student-t) are piloted as well (not when the
    Laplace fit found several modes). A prior drawn outside the model's support (PyMC's
    ``ordered`` transform) is set aside with a warning. ``"vi"`` and ``"student_t"`` use those
    fits alone (falling back to ``"auto"`` with a warning when the fit fails).
    """
    known = HAISOptions._fields + PilotOptions._fields
    refuse_unknown({k: v for k, v in hais_kwargs.items() if k not in known}, "choose_initial",
                   known)  # fmt: skip
    return _choose_initial(rng_key, model, initial, num_steps=num_steps,
                           kernel_options=HAISOptions.of(hais_kwargs),
                           pilot_options=PilotOptions.of(hais_kwargs))[:4]  # fmt: skip


def _named_candidates(model, initial):
    """{name: target} for a string ``initial`` and {name: error} for the starts that failed."""
    if initial not in NAMES:
        raise ValueError(f"unknown initial {initial!r}: use one of {NAMES} or a distribution")
    if discrete(model) and initial in ("laplace", "vi", "student_t"):
        raise ValueError(
            f"initial={initial!r} needs continuous coordinates; this model has discrete ones "
            f"({getattr(model, 'discrete_names', '')}): use initial='prior' (or 'auto')"
        )
    if model.prior is None and initial in ("auto", "prior"):
        raise improper_error(model)
    candidates, errors = {}, {}
    if initial in ("auto", "prior"):
        candidates["prior"] = prior_target(model)
    builders = {"laplace": laplace_target, "vi": vi_target,
                "student_t": lambda m: vi_target(m, "student_t")}  # fmt: skip
    if initial in ("auto", "laplace", "vi", "student_t") and not discrete(model):
        name = "laplace" if initial == "auto" else initial
        try:
            candidates[name] = builders[name](model)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as err:
            errors[name] = str(err)
    if errors and initial in ("vi", "student_t"):
        warnings.warn(
            f"the variational fit for initial={initial!r} failed ({errors[initial]}); "
            "falling back to initial='auto'",
            UserWarning,
            stacklevel=diagnostics.user_stacklevel(),
        )
        return _named_candidates(model, "auto" if model.prior is not None else "laplace")
    if not candidates:
        raise ValueError(
            "no initial distribution could be built: "
            + "; ".join(f"{k}: {v}" for k, v in errors.items())
            + f". Pass initial=ph.Gaussian(mean, scale) over the {model.dim} "
            "unconstrained coordinates."
        )
    return candidates, errors


def _laplace_candidate(model):
    """{"laplace": target} for auto when the prior does not work; {} when the fit fails."""
    try:
        return {"laplace": laplace_target(model)}
    except (ValueError, np.linalg.LinAlgError, FloatingPointError):
        return {}


def _vi_candidates(model):
    """The VI starts ``auto`` adds on a hard path, or {} (they failed, or several modes)."""
    laplace = _cache(model).get("laplace")
    if laplace is not None and not isinstance(laplace.initial, Gaussian):
        return {}
    out = {}
    for name, family in (("vi", "gaussian"), ("student_t", "student_t")):
        try:
            out[name] = vi_target(model, family)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            break  # a failed Gaussian fit leaves no start for the Student-t fit either
    return out


def _survey(rng_key, target, kernel, num_steps, pilot_options, desc):
    """A pilot of ``kernel`` on ``target`` and the model gradients it spent."""
    with np.errstate(all="ignore"):
        pilot = survey(rng_key, target, kernel, num_steps=num_steps, options=pilot_options,
                       progress_bar=progress.showing(), desc=desc)  # fmt: skip
    used = pilot.gradients_per_particle(kernel.gradients_per_step) * len(pilot.log_weights)
    return pilot, int(used)


def with_local_steps(rng_key, model, target, kernel_options, pilot_options, num_steps):
    """The transition of ``kernel_options`` with a step size per particle (``local_steps``;
    the convergence ladder's switch, :func:`ppl_hais.ladder.needs_local_steps`), its pilot on
    ``target`` (the step sizes tuned for it) and the gradients that pilot spent."""
    options = kernel_options._replace(local_steps=True)
    kernel = transition(model, options)
    pilot, used = _survey(rng_key, target, kernel, num_steps, pilot_options,
                          "pilot (local steps)")  # fmt: skip
    return options, kernel, pilot, used


def _beats(fit, prior) -> bool:
    """Whether a fitted start's pilot beats the prior's ESS by over ``FIT_BEATS`` jackknife SEs."""
    ess = [estimators.importance_ess(p.log_weights) for p in (fit, prior)]
    se = [estimators.importance_ess_se(p.log_weights) for p in (fit, prior)]
    se = np.nan_to_num(se, posinf=np.inf)  # an SE that overflowed stays inf
    return bool(ess[0] - np.nan_to_num(ess[1]) > FIT_BEATS * np.hypot(*se))


@float64
def _choose_initial(rng_key, model, initial, *, num_steps, kernel_options, pilot_options):
    """:func:`choose_initial` and the model gradients it spent (its pilots, the fits it made)."""
    fitted_before = {k for k in _cache(model) if k.endswith("_gradients")}
    if isinstance(initial, str):
        # auto pilots the prior first: the Laplace fit is made only where the prior fails
        candidates, _ = _named_candidates(model, "prior" if initial == "auto" else initial)
    else:
        if discrete(model):
            raise ValueError(
                "a model with discrete variables anneals from its prior (initial='prior' or "
                "'auto'): an initial distribution over the flat vector would not draw the "
                "whole numbers the discrete coordinates need"
            )
        candidates = {"user": _user_target(model, initial)}
    kernel = transition(model, kernel_options)  # the main run's: the pilot tunes for it
    choice, pilots, gradients, outside = {}, {}, 0, None

    def pilot(more):
        nonlocal gradients, outside
        candidates.update(more)
        for name in more:
            try:
                pilots[name], used = _survey(rng_key, candidates[name], kernel, num_steps,
                                             pilot_options, f"pilot ({name})")  # fmt: skip
            except InitialSupportError as err:  # auto: a prior drawn outside the support
                if name != "prior" or initial != "auto" or discrete(model):
                    raise
                outside = err
                continue
            choice[name] = diagnostics.importance_ess(pilots[name].log_weights)
            gradients += used

    pilot(dict(candidates))
    size = int(pilot_options.num_pilot_particles)
    clears = "prior" in pilots and (  # the posterior within the prior, its pilot working
        np.nan_to_num(choice["prior"], nan=0.0) >= PRIOR_WORKS * size
        and (pilots["prior"].outside < diagnostics.OUTSIDE_WARN  # or within its own noise,
             or (choice["prior"] >= NEAR_EXACT * size  # near exact: NEAR_EXACT's note
                 and pilots["prior"].outside < suspect_outside(size))))  # fmt: skip
    noise = estimators.importance_ess_se(pilots["prior"].log_weights) if clears else 0.0
    marginal = clears and bool(choice["prior"] - noise < PRIOR_WORKS * size)  # NEAR_EXACT
    prior_works = clears and not marginal
    if initial == "auto" and not discrete(model) and not prior_works:
        pilot(_laplace_candidate(model))
    if initial == "auto" and not discrete(model) and not clears and max(
        np.nan_to_num(list(choice.values()), nan=0.0), default=0.0
    ) < VI_BELOW * size:
        pilot(_vi_candidates(model))
    for key, value in _cache(model).items():  # the fits this call made
        if key.endswith("_gradients") and key not in fitted_before:
            gradients += value
    if outside is not None:  # the prior set aside: a fitted start, or the prior's error
        if not choice:
            raise outside
        warnings.warn(outside_support_note(outside.bad, outside.num), UserWarning,
                      stacklevel=diagnostics.user_stacklevel())  # fmt: skip
    best = max(choice, key=lambda n: (np.nan_to_num(choice[n], nan=0.0), n == "prior"))
    if initial == "auto" and outside is None and (prior_works or not _beats(
            pilots[best], pilots["prior"]) or (marginal and choice[best] < NEAR_EXACT * size)):
        best = "prior"
    return best, candidates[best], pilots[best], choice, int(gradients)
