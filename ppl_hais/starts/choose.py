"""Where annealing starts: the initial distributions the evidence workflow builds from a
model, and the choice among them by a discarded pilot run.

``initial="auto"`` pilots the prior. A prior whose pilot works (``PRIOR_WORKS``) is kept unless
a Laplace fit's pilot is near exact (``NEAR_EXACT``; a well-determined posterior, where the fit
is right at a tenth of the prior's gradients) and nothing else is fitted; otherwise a Laplace
fit at the posterior mode is piloted too, and when
neither reaches half the pilot's particles in importance ESS (a hard path: a funnel, heavy
tails), a Gaussian and a Student-t fitted by natural-gradient variational inference
(:mod:`ppl_hais.starts.vi`) are piloted as well. The start whose pilot weights have the largest
importance ESS wins, a fit only where it beats the prior's beyond its noise. Where the target's
tails along the Laplace fit's axes read heavy, independent Student-t marginals with those tails
(:mod:`ppl_hais.model.tails`) are piloted as well, and a start whose tails are too light for weights
of finite variance there is not chosen, whatever its pilot's ESS. Any normalized start keeps Ẑ
unbiased for p(data | model): the start only changes the path. Each target is kept on the model
object, so a second call compiles nothing and fits nothing.

The starts themselves are built in :mod:`ppl_hais.starts.fits`.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.starts import choose_initial
>>> class Model:  # y = 1 under N(z, 1), z ~ N(0, 1): the prior holds the posterior
...     dim, improper, prior = 1, (), ph.Gaussian(jnp.zeros(1), 1.0)
...     def log_likelihood(self, z):
...         return -0.5 * jnp.sum((1.0 - z) ** 2) - 0.5 * jnp.log(2 * jnp.pi)
...     def log_joint(self, z):
...         return self.prior.log_prob(z) + self.log_likelihood(z)
>>> name, target, pilot, choice = choose_initial(jax.random.key(0), Model())
>>> name, sorted(choice)
('prior', ['prior'])
"""

from __future__ import annotations

import warnings

import jax
import numpy as np

from ..annealing import PilotOptions, survey
from ..annealing.kernels import HAISOptions, mixed_kernel
from ..annealing.options import INITIALS
from ..checks import diagnostics
from ..estimate.bias import suspect_outside
from ..model.density import ModelDensity, improper_error, outside_support_note
from ..model.tails import has_heavy_tails, too_light
from ..model.target import AnnealingTarget, Gaussian
from ..results.result import InitialSupportError
from ..runtime import progress
from ..runtime.names import refuse_unknown
from ..runtime.precision import float64
from ..stats import estimators
from .fits import laplace_t_target, laplace_target, model_cache, prior_target, vi_target

__all__ = ["NAMES", "choose_initial", "prior_target", "laplace_target", "laplace_t_target",
           "vi_target"]

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
# 0.07-0.10 nat lower at 20x the gradients (docs/trust_suite.md). A prior pilot that
# reaches it, with no more outside than the noise of its own draws' 5% (8 of 64), is kept:
# eight schools' reached 62.4-63.0 with 7 outside, and a fit was made for nothing.
# Beyond that a fit may pay: a target twice the prior's width ends none outside its Laplace.
# A working prior short of it is raced by the Laplace fit, which replaces it only where its own
# pilot reaches it: the front page's regression (prior pilots 16-31 of 64, Laplace 63.8-63.9;
# from the prior 1.2-4.1 M gradients, two of eight seeds 2.4-2.7 SE off; from Laplace 0.27 M,
# all within 1.3 SE), never the centered funnel (its Laplace pilots reached about 47).
NEAR_EXACT = 0.9
# A fitted start replaces the prior only when its pilot's importance ESS exceeds the prior's by
# more than this many jackknife SEs of the difference. On the 10-D funnel a Laplace start won
# ties such as 5.4 against 4.8 (of 64) and 47.5 against 47.4; every run from it ended warned
# and one was 1.2 nat low without a warning (benchmarks/trust_suite.py, key 733). Fits that
# pay win by far more: the regressions' Laplace starts 56-64 against the prior's 1-21.
FIT_BEATS = 2.0


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
    return choose_initial_counted(rng_key, model, initial, num_steps=num_steps,
                                  kernel_options=HAISOptions.of(hais_kwargs),
                                  pilot_options=PilotOptions.of(hais_kwargs))[:4]  # fmt: skip


def _named_candidates(model, initial):
    """{name: target} for a string ``initial`` and {name: error} for the starts that failed."""
    if initial not in NAMES:
        raise ValueError(f"unknown initial {initial!r}: use one of {NAMES} or a distribution")
    if discrete(model) and initial in ("laplace", "laplace_t", "vi", "student_t"):
        raise ValueError(
            f"initial={initial!r} needs continuous coordinates; this model has discrete ones "
            f"({getattr(model, 'discrete_names', '')}): use initial='prior' (or 'auto')"
        )
    if model.prior is None and initial in ("auto", "prior"):
        try:  # the remedy the error names first must work here; the fit is kept if it does
            laplace_target(model)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as err:
            raise improper_error(model, str(err)) from None
        raise improper_error(model)
    candidates, errors = {}, {}
    if initial in ("auto", "prior"):
        candidates["prior"] = prior_target(model)
    builders = {"laplace": laplace_target, "laplace_t": laplace_t_target, "vi": vi_target,
                "student_t": lambda m: vi_target(m, "student_t")}  # fmt: skip
    if (initial == "auto" or initial in builders) and not discrete(model):
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
            + ". Pass "
            + ("initial='vi' (a Gaussian fitted by variational inference, which needs no "
               "Hessian) or " if "laplace" in errors and "vi" not in errors else "")
            + f"initial=ph.Gaussian(mean, scale) over the {model.dim} unconstrained coordinates."
        )
    return candidates, errors


def _laplace_candidate(model):
    """{"laplace": target} for auto when the prior does not work; {} when the fit fails."""
    try:
        return {"laplace": laplace_target(model)}
    except (ValueError, np.linalg.LinAlgError, FloatingPointError):
        return {}


def _tail_candidate(model):
    """{"laplace_t": target} for auto where some axis of the Laplace fit reads heavy tails."""
    try:
        target = laplace_t_target(model)
    except (ValueError, np.linalg.LinAlgError, FloatingPointError):
        return {}
    return {"laplace_t": target} if has_heavy_tails(model_cache(model)["laplace_t_fit"]) else {}


def _too_light(model, candidates, names) -> set:
    """The starts among ``names`` too light-tailed for the tails read along the Laplace axes
    (:func:`ppl_hais.model.tails.too_light`); none where no tail start was piloted."""
    reading = model_cache(model).get("laplace_t_fit")
    if reading is None or "laplace_t" not in names:
        return set()
    light = set()
    for name in set(names) - {"laplace_t"}:
        start = candidates[name].initial
        log_prob = getattr(type(start), "log_prob", None)
        try:  # an unbound method over the start as a pytree: compiled once per structure
            if callable(log_prob) and too_light(jax.tree_util.Partial(log_prob, start), reading):
                light.add(name)
        except (TypeError, ValueError, FloatingPointError):
            pass  # a start that cannot be read is kept
    return light


def _vi_candidates(model):
    """The VI starts ``auto`` adds on a hard path, or {} (they failed, or several modes)."""
    laplace = model_cache(model).get("laplace")
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
    the convergence ladder's switch, :func:`ppl_hais.checks.ladder.needs_local_steps`), its pilot on
    ``target`` (the step sizes tuned for it) and the gradients that pilot spent."""
    options = kernel_options._replace(local_steps=True)
    kernel = transition(model, options)
    pilot, used = _survey(rng_key, target, kernel, num_steps, pilot_options,
                          "pilot (local steps)")  # fmt: skip
    return options, kernel, pilot, used


def _near_exact(choice, name, size) -> bool:
    """Whether the start's pilot reached ``NEAR_EXACT`` of its particles in importance ESS."""
    return bool(np.nan_to_num(choice.get(name, 0.0), nan=0.0) >= NEAR_EXACT * size)


def _beats(fit, prior) -> bool:
    """Whether a fitted start's pilot beats the prior's ESS by over ``FIT_BEATS`` jackknife SEs."""
    ess = [estimators.importance_ess(p.log_weights) for p in (fit, prior)]
    se = [estimators.importance_ess_se(p.log_weights) for p in (fit, prior)]
    se = np.nan_to_num(se, posinf=np.inf)  # an SE that overflowed stays inf
    return bool(ess[0] - np.nan_to_num(ess[1]) > FIT_BEATS * np.hypot(*se))


@float64
def choose_initial_counted(rng_key, model, initial, *, num_steps, kernel_options, pilot_options):
    """:func:`choose_initial` and the model gradients it spent (its pilots, the fits it made)."""
    fitted_before = {k for k in model_cache(model) if k.endswith("_gradients")}
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
    auto = initial == "auto" and not discrete(model)
    refit = auto and prior_works and not _near_exact(choice, "prior", size)
    if auto and not prior_works:
        pilot(_laplace_candidate(model))
        if np.nan_to_num(choice.get("laplace", np.inf), nan=0.0) < NEAR_EXACT * size:
            pilot(_tail_candidate(model))  # tails a Gaussian start would not reach
    elif refit:  # a working prior gives way only to a fit whose pilot is near exact
        pilot(_laplace_candidate(model))
        if _near_exact(choice, "laplace", size):
            pilot(_tail_candidate(model))  # and whose tails are not too light
    light = _too_light(model, candidates, choice)
    if initial == "auto" and not discrete(model) and not clears and max(
        np.nan_to_num([v for n, v in choice.items() if n not in light], nan=0.0), default=0.0
    ) < VI_BELOW * size:
        pilot(_vi_candidates(model))
        light = _too_light(model, candidates, choice)
    for key, value in model_cache(model).items():  # the fits this call made
        if key.endswith("_gradients") and key not in fitted_before:
            gradients += value
    if outside is not None:  # the prior set aside: a fitted start, or the prior's error
        if not choice:
            raise outside
        warnings.warn(outside_support_note(outside.bad, outside.num), UserWarning,
                      stacklevel=diagnostics.user_stacklevel())  # fmt: skip
    best = max(set(choice) - light or choice,
               key=lambda n: (np.nan_to_num(choice[n], nan=0.0), n == "prior"))
    fit_wins = refit and best == "laplace" and _near_exact(choice, best, size)
    if initial == "auto" and outside is None and "prior" not in light and (
            (prior_works and not fit_wins) or not _beats(pilots[best], pilots["prior"])
            or (marginal and choice[best] < NEAR_EXACT * size)):  # fmt: skip
        best = "prior"
    return best, candidates[best], pilots[best], choice, int(gradients)
