"""What a call learns before its first run, kept for the next call on the same model: a
:class:`Memory` the user holds.

Before any chain runs, a call chooses its start and tunes the transition for it: the pilots of
the candidate starts (:func:`ppl_hais.starts.choose.choose_initial_counted`), the Laplace or
variational fit where one is raced. Their random numbers come from the call's own key. A call
given a :class:`Memory` keeps what they returned there, and a later call given the same memory
on the same model structure and data (a new seed, another ``max_gradients``, another number of
particles or chains) takes it instead of tuning again: the same start, the same frozen step
sizes and scale, so the later call's estimate is the one a call with the first call's pilot
would give (where ``max_gradients`` binds, a remembered call, which spends nothing on its
tuning, has that much more room for the ladder). Nothing about the estimate's honesty changes:
the tuning is still a pilot independent of the main run's random numbers, frozen before it
starts (Ẑ unbiased), and every check still runs on what the main run gives. What changes is
that calls sharing a memory share one pilot's luck: for independent calls (several seeds to see
the spread) give none, which is the default of every entry point.

The ladder is kept as well: where the first call's stopped (the rungs below its last one, its
last rung's temperatures, the per-particle step sizes it switched to), so a later call begins at
that rung instead of climbing to it again (:mod:`ppl_hais.workflow.resume`).

The key is the model's structure (its code, as the compiled programs' caches key it) with a
digest of its arrays (the data), the initial distribution's name and every option the tuning
reads (for the ladder, the particles, chains, ``max_gradients`` and ``bias_check`` too); a call
with anything else new tunes anew. Entries beyond ``size`` are dropped, least recently used
first. A memory lives as long as the object that holds it (``phn.HAIS(remember=True)``, or the
``memory=`` a PyMC user passes to ``php.sample_hais``); there is no memory shared by a process.

Example
-------
>>> from ppl_hais.workflow.memory import Memory
>>> memory = Memory()
>>> memory.recall({"y": 1.0}, ("an option",), lambda: "tuned")
('tuned', False)
>>> memory.recall({"y": 1.0}, ("an option",), lambda: "tuned again")  # kept: not run again
('tuned', True)
>>> memory.recall({"y": 2.0}, ("an option",), lambda: "other data")  # other data: tuned anew
('other data', False)
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from ..runtime.structure import split

__all__ = ["SIZE", "Memory"]

SIZE = 32  # entries kept at once, two per model: its tuning (its pilots' final particles: ~P·D
# numbers) and where its ladder stopped


def _fingerprint(model, options):
    """A hashable key for ``model`` (structure and a digest of its arrays) and ``options``;
    None where some part cannot be hashed (the call then neither reads nor writes)."""
    if model is None:
        return None
    try:
        structure, arrays = split(model)
        digest = hashlib.sha1()
        for a in arrays:
            a = np.ascontiguousarray(np.asarray(a))
            digest.update(f"{a.dtype}{a.shape}".encode())
            digest.update(a.tobytes())
        key = (structure, digest.hexdigest(), options)
        hash(key)
    except TypeError:  # an option or leaf without a hash (an array schedule, say)
        return None
    return key


class Memory:
    """The tuning and ladder stops of earlier calls, for later calls given the same memory.

    Parameters
    ----------
    size : int
        Entries kept at once (two per model); beyond it the least recently used is dropped.
    """

    def __init__(self, size: int = SIZE):
        self.size = int(size)
        self._entries: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Memory({len(self)} of {self.size} entries)"

    def clear(self) -> None:
        """Forget everything: the next call on any model tunes anew."""
        self._entries.clear()

    def recall(self, model, options, tune):
        """``(tune(), False)`` the first time for ``model`` and ``options``; ``(the same value,
        True)`` on later calls while kept."""
        value = self.kept(model, options)
        if value is not None:
            return value, True
        value = tune()
        self.keep(model, options, value)
        return value, False

    def kept(self, model, options):
        """What :meth:`keep` or :meth:`recall` kept for ``model`` and ``options``; None when
        nothing is."""
        key = _fingerprint(model, options)
        if key is None or key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key]

    def keep(self, model, options, value) -> None:
        """Keep ``value`` for ``model`` and ``options`` (replacing what was kept)."""
        key = _fingerprint(model, options)
        if key is None:
            return
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
