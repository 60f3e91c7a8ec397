"""float64 for the estimators, scoped to their calls.

Log weights accumulate over up to 10⁵ temperatures, so every entry point computes in float64.
It does so inside ``jax.enable_x64(True)`` for the duration of the call only: the user's
process keeps its own setting (``jnp.arange(3).dtype`` is still int32 afterwards). JAX's
setting is per thread, so code that dispatches from worker threads passes it on
(:func:`in_thread`). :func:`enable_x64` is the explicit, process-wide switch for users who
want float64 everywhere (e.g. to build data in float64 before a call).

Example
-------
>>> import jax.numpy as jnp
>>> from ppl_hais.runtime.precision import float64
>>> float64(lambda: jnp.ones(1).dtype)()
dtype('float64')
"""

from __future__ import annotations

import functools

import jax

from . import compilation_cache

__all__ = ["enable_x64", "float64", "in_thread"]


def enable_x64():
    """Switch JAX to float64 for the whole process (explicit; the estimators do not need it:
    they compute in float64 within their own calls)."""
    if not jax.config.read("jax_enable_x64"):
        jax.config.update("jax_enable_x64", True)


def float64(fn):
    """Run ``fn`` with JAX in float64, restoring the caller's setting afterwards. Every entry
    point computes so, and its first call turns on the persistent compilation cache
    (:func:`ppl_hais.runtime.compilation_cache.ensure`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        compilation_cache.ensure()
        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    return wrapper


def in_thread(fn):
    """``fn`` for a worker thread, with the calling thread's float64 setting."""
    x64 = bool(jax.config.jax_enable_x64)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(x64):
            return fn(*args, **kwargs)

    return wrapper
