"""A guard against a deadlock of old jaxlib: particle groups run one at a time where the model
calls LAPACK.

jaxlib before 0.12 splits a batched LAPACK call (Cholesky, triangular solve, ...) into tasks on
XLA's intra-op thread pool (one thread per core) and waits for them on that pool. When every
thread of the pool waits so, nothing runs the tasks and the process hangs with every thread
idle. Concurrent particle groups (:func:`ppl_hais.annealing.execution.run`) of a Gaussian-process
model did this on the oldest stack (jax 0.10.2, 2 cores): both
pool threads in ``ParallelBatchMap`` under ``lapack_dpotrf_ffi`` and ``lapack_dtrsm_ffi``, four
executions waiting on them. There, a model whose density calls LAPACK runs its groups one at a
time; every other model, and every newer jaxlib, keeps them concurrent.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> from ppl_hais.annealing.starvation import LINALG, calls
>>> jaxpr = jax.make_jaxpr(lambda a: jnp.linalg.cholesky(a @ a.T + jnp.eye(2)))(jnp.eye(2))
>>> calls(jaxpr.jaxpr, LINALG)
True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["LINALG", "calls", "serial_groups"]

OLD_LAPACK = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 12)
LINALG = {"cholesky", "triangular_solve", "lu", "eigh", "eig", "qr", "householder_product",
          "svd", "schur", "hessenberg", "tridiagonal", "tridiagonal_solve"}  # fmt: skip
_USES: dict = {}  # structure -> whether its density calls LAPACK


def serial_groups(structure, target) -> bool:
    """Whether ``target``'s particle groups must run one at a time: on a jaxlib that starves
    (``OLD_LAPACK``), when its density and gradient call LAPACK (traced once per structure)."""
    if not OLD_LAPACK:
        return False
    if structure not in _USES:
        try:
            jaxpr = jax.make_jaxpr(target.potential_and_grad)(jnp.zeros(target.dim)).jaxpr
            _USES[structure] = calls(jaxpr, LINALG)
        except Exception:  # a density this cannot trace abstractly: the safe side
            _USES[structure] = True
    return _USES[structure]


def calls(jaxpr, names) -> bool:
    """Whether ``jaxpr`` applies a primitive named in ``names``, at any depth."""

    def subs(value):
        if hasattr(value, "eqns"):  # a Jaxpr
            yield value
        elif hasattr(getattr(value, "jaxpr", None), "eqns"):  # a ClosedJaxpr
            yield value.jaxpr
        elif isinstance(value, (tuple, list)):
            for v in value:
                yield from subs(v)

    return any(eqn.primitive.name in names
               or any(calls(j, names) for v in eqn.params.values() for j in subs(v))
               for eqn in jaxpr.eqns)  # fmt: skip
