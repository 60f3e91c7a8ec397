"""JAX's persistent compilation cache, on by default, so a compiled anneal is paid once per
machine rather than once per Python process.

On the first call of its entry points (every one that computes in float64:
:func:`ppl_hais.runtime.precision.float64`; importing the package changes nothing), ppl_hais
points JAX's compilation cache at a user cache directory
(``$PPL_HAIS_CACHE_DIR``, else ``$XDG_CACHE_HOME/ppl_hais/jax``, else
``~/.cache/ppl_hais/jax``) unless the user configured one already
(``jax_compilation_cache_dir``) or switched it off with ``PPL_HAIS_COMPILATION_CACHE=0``.
The cache is JAX's own: it applies to every ``jit`` in the process whose compilation takes
longer than ``min_compile_time`` seconds (default 0: every program), and JAX keys each entry
by the program, the JAX/XLA version and the device, so a stale entry is never used. Like
JAX's own default it is not bounded (entries average ~45 kB; :func:`clear` empties it):
JAX's least-recently-used eviction (``jax_compilation_cache_max_size``, left to the user)
scans the whole directory on every write, 0.24–0.34 s with 9,128 entries, and JAX 0.10 stops
writing altogether once one entry lacks its access-time file (an entry written without
eviction on, or by a process interrupted mid-write).
(JAX 0.10 does not store programs that contain host callbacks, the anneal's progress bar
among them; 0.12 does.) A directory that
cannot be written warns once and the process runs without the cache. Measured first-call times
with and without it: docs/first_call.md.

Example
-------
>>> import ppl_hais as ph
>>> from ppl_hais.runtime import compilation_cache
>>> compilation_cache.cache_dir() is None or isinstance(compilation_cache.cache_dir(), str)
True
"""

from __future__ import annotations

import os
import tempfile
import warnings

import jax
from jax.experimental.compilation_cache.compilation_cache import reset_cache

__all__ = ["cache_dir", "clear", "default_cache_dir", "disable", "enable", "ensure"]

ENV_SWITCH = "PPL_HAIS_COMPILATION_CACHE"
ENV_DIR = "PPL_HAIS_CACHE_DIR"
# every program is stored: a first call compiles ~60 small programs (the model's density, the
# Laplace fit, the starts' draws) at ~0.03 s each besides the scans, and reading one back takes
# ~0.01 s (eight schools through NumPyro, warm cache: first call 5.2 → 4.1 s)
MIN_COMPILE_TIME = 0.0

_ours: str | None = None  # the directory ppl_hais set, if it set one
_asked = False  # whether this process's first call has applied the default (ensure)


def default_cache_dir() -> str:
    """Where ppl_hais keeps compiled programs by default."""
    if os.environ.get(ENV_DIR):
        return os.environ[ENV_DIR]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ppl_hais", "jax")


def cache_dir() -> str | None:
    """The directory JAX's persistent compilation cache uses now (None: off)."""
    return jax.config.jax_compilation_cache_dir or None


def _writable(path: str) -> str | None:
    """None if ``path`` can hold cache files, else why not."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as err:
        return f"{type(err).__name__}: {err}"
    return None


def enable(path: str | None = None, *, min_compile_time: float = MIN_COMPILE_TIME) -> str | None:
    """Turn JAX's persistent compilation cache on at ``path`` (default
    :func:`default_cache_dir`); returns the directory, or None (with a warning) when it cannot
    be written. Programs that compile faster than ``min_compile_time`` seconds are not stored."""
    global _ours, _asked
    _asked = True  # the user's choice, or the default applied: the first call leaves it
    path = os.path.abspath(os.path.expanduser(path or default_cache_dir()))
    problem = _writable(path)
    if problem is not None:
        warnings.warn(
            f"ppl_hais: the compilation cache directory {path} cannot be written ({problem}); "
            f"running without a persistent cache (every new process compiles again). Set "
            f"{ENV_DIR} to a writable directory, or {ENV_SWITCH}=0 to silence this.",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    if cache_dir() not in (None, path):
        reset_cache()
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time))
    _ours = path
    return path


def disable() -> None:
    """Turn off the persistent cache that ppl_hais turned on (a directory the user configured
    through JAX is left alone); the first call of an entry point then leaves it off."""
    global _ours, _asked
    _asked = True
    if _ours is not None and cache_dir() == _ours:
        jax.config.update("jax_compilation_cache_dir", None)
        reset_cache()  # JAX opens its cache once per process: forget the open one
    _ours = None


def clear() -> int:
    """Delete the compiled programs in the directory ppl_hais uses (the next call of each model
    compiles again); returns how many files were removed. A directory the user configured
    through JAX is left alone (0)."""
    ensure()
    if _ours is None or cache_dir() != _ours or not os.path.isdir(_ours):
        return 0
    removed = 0
    for entry in os.scandir(_ours):
        if entry.is_file() and not entry.name.startswith("."):
            os.remove(entry.path)
            removed += 1
    reset_cache()  # JAX keeps the open cache's state per process
    jax.config.update("jax_compilation_cache_dir", _ours)
    return removed


def ensure() -> None:
    """What the first call of an entry point does, once per process:
    :func:`enable_by_default` (a later :func:`enable` or :func:`disable` is the user's)."""
    global _asked
    if not _asked:
        _asked = True
        enable_by_default()


def enable_by_default() -> str | None:
    """:func:`enable` unless switched off (``PPL_HAIS_COMPILATION_CACHE=0``) or already set."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "off", "no"):
        return None
    if cache_dir() is not None:  # the user's own choice
        return None
    return enable()
