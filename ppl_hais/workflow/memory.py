"""What a call learns before its first run, remembered for the next call on the same model.

Before any chain runs, a call chooses its start and tunes the transition for it: the pilots of
the candidate starts (:func:`ppl_hais.starts.choose.choose_initial_counted`), the Laplace or
variational fit where one is raced. Their random numbers come from :func:`pilot_key`, not from
the call's key, so what they return is a function of the model, its data and the call's
options alone. A second call on the same model structure and data (a new seed, another
``max_gradients``, another number of particles or chains) then takes it from here instead of
running it again: the same start, the same frozen step sizes and scale, so, rung for rung,
the same estimates to the last digit as without the memory (where ``max_gradients`` binds, a
remembered call, which spends nothing on its tuning, has that much more room for the
ladder). Nothing about the estimate's honesty changes: the tuning is still a pilot independent
of the main run's random numbers, frozen before it starts (Ẑ unbiased), and every check still
runs on what the main run gives.

The ladder is remembered as well: where the first call's stopped (the rungs below its last
one, its last rung's temperatures, the per-particle step sizes it switched to), so a later call
begins at that rung instead of climbing to it again. The run at that rung is the one a call
without the memory makes there (the same keys per rung); what the ladder's rules conclude
from it reads the rungs below, which come from the first call (independent runs under the same
tuning), so a cleared check or a widened SE can differ from a cold call's. Every check still
runs on its own rung, which climbs on where it fails.

The key is the model's structure (its code, as the compiled programs' caches key it) with a
digest of its arrays (the data), the initial distribution's name and every option the tuning
reads (for the ladder, the particles, chains, ``max_gradients`` and ``bias_check`` too); a
call with anything else new tunes anew. ``PPL_HAIS_REMEMBER=0`` (read at each call) or
:func:`forget` turns the memory off or empties it; entries beyond :data:`SIZE` are dropped,
least recently used first.

Example
-------
>>> from ppl_hais.workflow import memory
>>> memory.forget()
>>> memory.recall(None, ("an option",), lambda: "tuned")  # a key it cannot read: not kept
('tuned', False)
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict

import numpy as np

from ..mcmc.fast_random import host_key
from ..runtime.structure import split

__all__ = ["PILOT_SEED", "SIZE", "enabled", "forget", "keep", "kept", "pilot_key", "recall"]

PILOT_SEED = 20_250_917  # the pilots' random numbers: the same for every call
SIZE = 32  # entries kept at once, two per model: its tuning (its pilots' final particles: ~P·D
# numbers) and where its ladder stopped

_MEMORY: OrderedDict = OrderedDict()


def pilot_key():
    """The key of every call's pilots (a JAX key of :data:`PILOT_SEED`)."""
    return host_key(PILOT_SEED)


def enabled() -> bool:
    """Whether calls remember (``PPL_HAIS_REMEMBER`` unset or not ``0``)."""
    return os.environ.get("PPL_HAIS_REMEMBER", "1") != "0"


def forget() -> None:
    """Empty the memory: the next call on any model tunes anew."""
    _MEMORY.clear()


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


def recall(model, options, tune):
    """``(tune(), False)`` the first time for ``model`` and ``options``; ``(the same value,
    True)`` on later calls while remembered. ``tune`` must be a function of the model, its
    data and ``options`` alone (its random numbers from :func:`pilot_key`)."""
    value = kept(model, options)
    if value is not None:
        return value, True
    value = tune()
    keep(model, options, value)
    return value, False


def kept(model, options):
    """What :func:`keep` or :func:`recall` kept for ``model`` and ``options``; None when nothing
    is (or the memory is off)."""
    key = _fingerprint(model, options) if enabled() else None
    if key is None or key not in _MEMORY:
        return None
    _MEMORY.move_to_end(key)
    return _MEMORY[key]


def keep(model, options, value) -> None:
    """Keep ``value`` for ``model`` and ``options`` (replacing what was kept), the least recently
    used model dropped beyond :data:`SIZE`."""
    key = _fingerprint(model, options) if enabled() else None
    if key is None:
        return
    _MEMORY[key] = value
    _MEMORY.move_to_end(key)
    while len(_MEMORY) > SIZE:
        _MEMORY.popitem(last=False)
