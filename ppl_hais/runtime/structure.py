"""Compile once per structure: jit over a pytree's arrays, keyed on everything else.

A target is a pytree (``AnnealingTarget``, ``Gaussian`` and the adapters' model densities are
registered) whose leaves are either arrays (data, a Gaussian's mean) or static objects
(functions, models, Python numbers). :func:`split` separates the two; the static part, a
hashable :class:`Structure`, keys the caches of compiled functions, and the arrays are passed
as arguments. So a new target over new data of the same shapes reuses the compiled scans
(NumPyro's ``jit_model_args`` idea), while a different function or model compiles anew.
Objects that are not registered pytrees are static leaves, compared by identity where they
cannot be hashed.
"""

from __future__ import annotations

from functools import lru_cache

import jax
import numpy as np

__all__ = ["Structure", "split", "merge", "compile_once"]


class _Id:
    """An unhashable static leaf, compared by identity."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Id) and other.obj is self.obj


def _static_leaf(leaf):
    try:
        hash(leaf)
    except TypeError:
        return _Id(leaf)
    return leaf


def _unwrap(leaf):
    return leaf.obj if isinstance(leaf, _Id) else leaf


class Structure:
    """The static part of a pytree: its tree definition, its non-array leaves and the
    positions of its array leaves. Hashable; equal structures compile to the same code."""

    __slots__ = ("treedef", "leaves", "_hash")

    def __init__(self, treedef, leaves):
        self.treedef = treedef
        self.leaves = leaves  # a static leaf, or None where an array goes
        self._hash = hash((treedef, tuple(type(v) for v in leaves)))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if not isinstance(other, Structure) or other.treedef != self.treedef:
            return False
        return all(a is b or _equal(a, b) for a, b in zip(self.leaves, other.leaves, strict=True))


def _equal(a, b):
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:  # noqa: BLE001 - an object whose == is not a truth value
        return False


_ARRAY = object()  # marks an array position in Structure.leaves


def _is_array(leaf) -> bool:
    return isinstance(leaf, np.ndarray | jax.Array)


def split(tree) -> tuple[Structure, list]:
    """(structure, array leaves) of a pytree."""
    leaves, treedef = jax.tree.flatten(tree)
    static = tuple(_ARRAY if _is_array(v) else _static_leaf(v) for v in leaves)
    return Structure(treedef, static), [v for v in leaves if _is_array(v)]


def merge(structure: Structure, arrays) -> object:
    """The pytree back from its structure and its (possibly traced) array leaves."""
    it = iter(arrays)
    leaves = [next(it) if v is _ARRAY else _unwrap(v) for v in structure.leaves]
    return jax.tree.unflatten(structure.treedef, leaves)


def compile_once(fn):
    """``fn(tree, *args)`` jitted once per structure of ``tree`` (and shapes of its arrays and
    of ``args``, as ``jax.jit`` does); ``static`` keyword arguments are part of the key.

    >>> import jax.numpy as jnp
    >>> from ppl_hais.runtime.structure import compile_once
    >>> total = compile_once(lambda t, x: t["w"] @ x)
    >>> float(total({"w": jnp.ones(3)}, jnp.arange(3.0)))
    3.0
    """

    @lru_cache(maxsize=64)
    def jitted(structure, static):
        kwargs = dict(static)

        def program(arrays, *args):
            return fn(merge(structure, arrays), *args, **kwargs)

        program.__name__ = program.__qualname__ = getattr(fn, "__name__", "program")
        return jax.jit(program)  # named as fn in JAX's logs and profiles

    def call(tree, *args, **static):
        structure, arrays = split(tree)
        return jitted(structure, tuple(sorted(static.items())))(arrays, *args)

    call.__wrapped__ = fn
    call.__doc__ = fn.__doc__
    return call
