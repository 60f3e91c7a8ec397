"""Where the first call's convergence ladder stopped, kept in a :class:`~.memory.Memory` for the
next calls given it on the same model, data and options, which begin at that rung instead of
climbing to it.

What is kept is what the ladder's rules read: the rungs below the last (their estimates, checks,
bias-check gaps), the last rung's temperatures, the per-particle step sizes the ladder switched
to (:func:`ppl_hais.checks.ladder.needs_local_steps`, with their pilot) and the cost of the last
bias check (the reserve the next rung keeps for its own). The rungs a call resumes above are marked
``Rung.remembered``; their gradients and seconds are the earlier call's.

Example
-------
>>> import numpy as np
>>> from ppl_hais.checks.ladder import Rung
>>> from ppl_hais.workflow import resume
>>> from ppl_hais.workflow.memory import Memory
>>> memory = Memory()
>>> model = {"y": np.arange(3.0)}  # anything the memory can fingerprint: structure and arrays
>>> rungs = [Rung(250, -3.2, 0.05, ("bias",), 0.4, 200_000, 0.1),
...          Rung(1000, -2.9, 0.05, (), float("nan"), 800_000, 0.4)]
>>> resume.keep(memory, model, ("auto", 512), rungs, None, None)
>>> state = resume.resumed(memory, model, ("auto", 512))
>>> state.num_steps, [r.remembered for r in state.rungs]
(1000, [True])
>>> resume.resumed(memory, {"y": np.arange(4.0)}, ("auto", 512)) is None  # other data: none kept
True
"""

from __future__ import annotations

from typing import NamedTuple


class Resume(NamedTuple):
    """A ladder's state where its call stopped."""

    rungs: tuple  # ppl_hais.checks.ladder.Rung, the rungs below the last
    num_steps: int  # the last rung's temperatures: where the next call begins
    local: tuple | None  # (kernel options, kernel, pilot) with local step sizes, if switched to
    last_check: tuple | None  # ppl_hais.workflow.budget.Spent of the last bias check


def resumed(memory, model, key) -> Resume | None:
    """The state ``memory`` keeps for ``model`` and ``key``, its rungs marked remembered; None
    if none (or no memory)."""
    kept = None if memory is None else memory.kept(model, ("ladder", *key))
    if kept is None:
        return None
    return kept._replace(rungs=tuple(r._replace(remembered=True) for r in kept.rungs))


def keep(memory, model, key, trajectory, local, last_check) -> None:
    """Keep in ``memory`` where a ladder with ``trajectory`` stopped, for the next calls on
    ``model``, unless an earlier call's stop is kept: a call that began there and climbed on (a
    check failing by chance) does not raise where every later call begins."""
    if memory is not None and memory.kept(model, ("ladder", *key)) is None:
        state = Resume(tuple(trajectory[:-1]), int(trajectory[-1].num_steps), local, last_check)
        memory.keep(model, ("ladder", *key), state)
