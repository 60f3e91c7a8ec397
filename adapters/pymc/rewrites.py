"""A PyMC graph compiled to JAX as ``pymc.sampling.jax.get_jaxified_graph`` compiles it, plus one
rewrite that halves the transcendental work of a Bernoulli's log likelihood on the logit scale.

PyMC writes ``Bernoulli(logit_p=η)``'s log probability as ``switch(y, −softplus(−η),
−softplus(η))``. XLA computes both branches of a select, so every datum costs two softplus
and their gradients. Since ``−softplus(−η) = η − softplus(η)``, the switch equals
``switch(y, η, 0) − softplus(η)``: one softplus, the same value up to rounding (for η ≫ 0,
η − softplus(η) ≈ −e^−η cancels to 0: an absolute error below 1e-15). Measured on a 100-row
logistic regression, a gradient of the model cost 1.4–1.7× NumPyro's before and 1.0–1.2×
after, on PyMC 6 and 5 (``benchmarks/pymc_logp.py``, docs/pymc_logp.md). The rewrite runs
before the fusion pass and the full JAX rewrites once more after it: 20–50 ms more per graph.

Example
-------
>>> import numpy as np, pymc as pm
>>> from ppl_hais.adapters.pymc.rewrites import jaxified_graph
>>> with pm.Model() as model:
...     w = pm.Normal("w", 0.0, 1.0)
...     y = pm.Bernoulli("y", logit_p=w * np.array([1.0, -2.0]), observed=[1, 0])
>>> logp = jaxified_graph(model.value_vars, [model.datalogp])
>>> round(float(logp(np.array(0.5))[0]), 6)  # log σ(0.5) + log σ(1.0)
-0.787339
"""

from __future__ import annotations

import pytensor.scalar as ps
import pytensor.scalar.math as psm
import pytensor.tensor as pt

# private on PyMC 5.28 and 6.4 alike (get_jaxified_graph's own first step); pinned by the tests
# of the PyMC adapter against exact evidence and by tests/test_pymc.py's rewrite test
from pymc.sampling.jax import _replace_shared_variables
from pytensor.compile import mode
from pytensor.graph import FunctionGraph
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.link.jax.dispatch import jax_funcify
from pytensor.tensor.elemwise import Elemwise

__all__ = ["jaxified_graph", "rewritten", "switch_of_softplus"]


def _scalar_op(var, kind):
    """The single input of ``var`` if it is an elementwise ``kind`` (a scalar op class)."""
    node = var.owner
    if node is not None and isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, kind):
        return node.inputs[0]
    return None


def _neg_softplus(var):
    """x where ``var`` is −softplus(x), else None."""
    inner = _scalar_op(var, ps.Neg)
    return None if inner is None else _scalar_op(inner, psm.Softplus)


@node_rewriter([pt.switch])
def switch_of_softplus(fgraph, node):
    """``switch(c, −softplus(−x), −softplus(x))`` → ``switch(c, x, 0) − softplus(x)``."""
    cond, yes, no = node.inputs
    x = _neg_softplus(no)
    minus_x = _neg_softplus(yes)
    if x is None or minus_x is None or _scalar_op(minus_x, ps.Neg) is not x:
        return None
    out = pt.switch(cond, x, pt.zeros_like(x)) - pt.softplus(x)
    return [pt.cast(out, node.outputs[0].dtype)]


def rewritten(inputs, outputs, *, ours=True, fuse=True) -> FunctionGraph:
    """The graph ``pymc.sampling.jax.get_jaxified_graph`` compiles (shared variables as
    constants, PyTensor's JAX rewrites) with :func:`switch_of_softplus` applied before the
    elementwise fusion (PyTensor 2.31, PyMC 5's, fuses elementwise chains into ``Composite``
    ops inside which the rewrite cannot see the switch). ``ours=False``: PyMC's graph as it
    is; ``fuse=False``: stop before the fusion."""
    fgraph = FunctionGraph(inputs=inputs, outputs=_replace_shared_variables(outputs), clone=True)
    mode.JAX.excluding("fusion").optimizer.rewrite(fgraph)
    if ours:
        in2out(switch_of_softplus).rewrite(fgraph)
    if fuse:
        mode.JAX.optimizer.rewrite(fgraph)
    return fgraph


def jaxified_graph(inputs, outputs):
    """A JAX function of ``inputs`` returning ``outputs``: :func:`rewritten`'s graph."""
    return jax_funcify(rewritten(inputs, outputs))
