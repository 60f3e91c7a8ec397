"""The evidence workflow's options, checked where they are given, before anything compiles.

Both front ends (``phn.HAIS(...)``, ``php.sample_hais(...)``) and
:func:`ppl_hais.workflow.evidence.evidence` call :func:`check`, so a bad value fails in the call
that gave it, with the same message on every path, instead of inside a pilot run seconds later.

Example
-------
>>> from ppl_hais.annealing import options
>>> options.check(num_particles=512, refresh=0.5, flips="reduced")
>>> options.check(num_particles=1)
Traceback (most recent call last):
    ...
ValueError: num_particles must be an integer of at least 2 (the error bar needs a spread), got 1
"""

from __future__ import annotations

import numbers

import numpy as np

from ..mcmc.lookahead import FLIPS
from ..model.schedules import NAMED_SCHEDULES
from ..runtime.names import did_you_mean

__all__ = ["NUM_PARTICLES", "check", "of_keywords"]

# particles per chain when a call names none (evidence(), phn.HAIS, and php.sample_hais up to its
# draws): the ladder's 4x temperatures per rung buy accuracy that more particles would not
NUM_PARTICLES = 512

SCHEDULES = ("adaptive", *sorted(NAMED_SCHEDULES))  # "adaptive" is measured on the pilot, not named
INITIALS = ("auto", "prior", "laplace", "laplace_t", "vi", "student_t")  # ppl_hais.starts.NAMES


def of_keywords(cls, keywords):
    """An options NamedTuple (``HAISOptions``, ``PilotOptions``, ``RunOptions``) of the fields
    present in a mapping of keyword arguments, defaults for the rest: a call's keywords
    parsed once into the typed objects its runs share."""
    return cls(**{k: keywords[k] for k in cls._fields if k in keywords})


def _integer(name, value, least):
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not float(value).is_integer() or value < least):  # fmt: skip
        need = "a positive integer" if least == 1 else f"an integer of at least {least}"
        why = {"num_particles": " (the error bar needs a spread)",
               "num_pilot_particles": " (the pilot tunes on its population's spread)"}.get(
                   name, "")  # fmt: skip
        raise ValueError(f"{name} must be {need}{why}, got {value!r}")


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _choice(name, value, names):
    if value not in names:
        raise ValueError(f"unknown {name} {value!r}{did_you_mean(str(value), names)}: use one "
                         f"of {names}")  # fmt: skip


def check(
    *,
    num_particles=None,
    num_chains=None,
    num_steps=None,
    max_gradients=None,
    target_se=None,
    step_size=None,
    target_accept=None,
    refresh=None,
    num_leapfrog=None,
    lookahead=None,
    flips=None,
    step_size_jitter=None,
    local_steps=None,
    initial=None,
    schedule=None,
    bias_check=None,
    num_pilot_particles=None,
    num_pilot_steps=None,
    num_bins=None,
    max_num_steps=None,
) -> None:
    """Raise ``ValueError`` naming the first option whose value cannot work (``None``: not
    given, nothing to check)."""
    for name, value in (("num_particles", num_particles),
                        ("num_pilot_particles", num_pilot_particles)):  # fmt: skip
        if value is not None:
            _integer(name, value, 2)
    for name, value in (("num_chains", num_chains), ("num_steps", num_steps),
                        ("num_leapfrog", num_leapfrog), ("lookahead", lookahead),
                        ("num_pilot_steps", num_pilot_steps), ("num_bins", num_bins),
                        ("max_num_steps", max_num_steps)):  # fmt: skip
        if value is not None:
            _integer(name, value, 1)
    for name, value in (("max_gradients", max_gradients), ("target_se", target_se)):
        if value is not None:
            _positive(name, value)
    if step_size is not None and not (isinstance(step_size, str) and step_size == "auto"):
        if isinstance(step_size, str):
            raise ValueError(f"step_size must be 'auto' or a positive number, got {step_size!r}")
        _positive("step_size", step_size)
    if target_accept is not None and not (
        isinstance(target_accept, numbers.Real) and 0 < target_accept < 1
    ):
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept!r}")
    if refresh is not None and not (isinstance(refresh, numbers.Real) and 0 < refresh <= 1):
        raise ValueError(
            f"refresh (momentum power replaced per unit time) must be in (0, 1], got {refresh!r}"
        )
    if flips is not None:
        _choice("flips", flips, FLIPS)
    if step_size_jitter is not None and not (
        isinstance(step_size_jitter, numbers.Real) and 0 <= step_size_jitter <= 1
    ):
        raise ValueError(f"step_size_jitter must be in [0, 1], got {step_size_jitter!r}")
    if local_steps is not None and not isinstance(local_steps, bool | np.bool_):
        raise ValueError(f"local_steps must be True or False, got {local_steps!r}")
    if local_steps and ((lookahead is not None and int(lookahead) > 1)
                        or (flips is not None and flips != "standard")):  # fmt: skip
        raise ValueError("local_steps needs lookahead=1 and flips='standard'")
    if isinstance(initial, str):
        _choice("initial", initial, INITIALS)
    if isinstance(schedule, str):
        _choice("schedule", schedule, SCHEDULES)
    elif schedule is not None and np.ndim(schedule) != 1:
        raise ValueError("a schedule is a name or a 1-D array of betas from 0 to 1")
    if bias_check is not None and bias_check not in (True, False, "auto"):
        raise ValueError(f"bias_check must be True, False or 'auto', got {bias_check!r}")
