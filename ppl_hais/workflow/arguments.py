"""The evidence call's arguments, refused with a named reason before anything compiles: a
keyword that no annealer takes (with the closest name), a value out of range, a gradient
budget too small for one run.

Example
-------
>>> from ppl_hais.workflow.arguments import check_room
>>> check_room(1e3, num_chains=1, num_particles=512, num_leapfrog=1, num_steps=250)
Traceback (most recent call last):
    ...
ValueError: max_gradients=1000 is too small for one run: ... need 128,000 gradients
"""

from __future__ import annotations

import inspect

from ..annealing import options
from ..checks import ladder
from ..estimate.annealers import ais, hais
from ..runtime.names import refuse_unknown

__all__ = ["CHECKED", "check_call", "check_keywords", "check_room", "gradient_cap"]

# the annealers' keywords whose values options.check refuses when out of range
CHECKED = ("step_size", "target_accept", "refresh", "num_leapfrog", "lookahead", "flips",
           "step_size_jitter", "local_steps", "schedule", "num_pilot_particles", "num_pilot_steps",
           "num_bins")  # fmt: skip


def check_keywords(hais_kwargs, evidence) -> None:
    """Refuse a keyword that neither :func:`hais` nor :func:`~ppl_hais.ais` takes, naming
    the closest one (``num_particle=`` was reported only after the pilots had run)."""
    taken = set(inspect.signature(ais).parameters) | set(inspect.signature(hais).parameters)
    taken -= {"rng_key", "target", "kernel", "kwargs", "pilot", "discrete", "num_chains"}
    own = set(inspect.signature(evidence).parameters) - {"rng_key", "model", "hais_kwargs"}
    refuse_unknown(
        {k: v for k, v in hais_kwargs.items() if k not in taken}, "evidence", taken | own
    )


def check_room(max_gradients, *, num_chains, num_particles, num_leapfrog, num_steps) -> None:
    """Refuse a gradient budget too small for one run (``num_leapfrog``: model gradients per
    particle and temperature)."""
    need = num_particles * num_chains * num_leapfrog * num_steps
    if max_gradients is not None and not max_gradients >= need:
        raise ValueError(
            f"max_gradients={max_gradients:g} is too small for one run: {num_chains} chain(s) × "
            f"{num_particles} particles × {num_steps} temperatures need {int(need):,} gradients"
        )


def check_call(hais_kwargs, evidence, **own) -> dict:
    """The call's keywords, refused with a named reason before anything compiles (a typo, a
    value out of range; ``evidence``: the function whose own keywords count as known);
    ``local_steps=None`` dropped (as not given: the ladder may switch)."""
    check_keywords(hais_kwargs, evidence)
    if hais_kwargs.get("local_steps", False) is None:
        hais_kwargs = {k: v for k, v in hais_kwargs.items() if k != "local_steps"}
    given = {k: hais_kwargs[k] for k in CHECKED if k in hais_kwargs}
    options.check(**own, **given)
    return hais_kwargs


def gradient_cap(max_gradients, ladder_on, target_se, num_chains, num_particles, num_leapfrog,
                 num_steps):  # fmt: skip
    """The call's gradient budget: the ladder's default where none is given
    (:func:`ppl_hais.checks.ladder.default_max_gradients`), refused when too small for one run of
    ``num_steps`` temperatures (unless ``target_se`` chooses the temperatures)."""
    if max_gradients is None and ladder_on:
        max_gradients = ladder.default_max_gradients(num_particles, num_chains, num_leapfrog)
    if target_se is None:
        check_room(max_gradients, num_chains=num_chains, num_particles=num_particles,
                   num_leapfrog=num_leapfrog, num_steps=num_steps)  # fmt: skip
    return max_gradients
