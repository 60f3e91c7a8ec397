"""Exact prior draws of a PyMC model over its transformed value variables, a population per call.

``pm.sample_smc`` draws its initial population as ``pm.draw`` does: one call of a compiled
function per particle, about 31 µs each on PyMC 6 (a third of a warm ``sample_hais`` call on
eight schools with its 1000 draws and 64 pilot particles). :class:`PriorSampler` instead
rewrites the initial-point expression (``make_initial_point_expression``, the one
``pm.sample_smc`` uses) to draw ``n`` particles at once, ``n`` an input: every random variable
with no random ancestor gets ``n`` more leading draws (PyMC's ``change_dist_size``) and the rest
of the graph is vectorized over them (PyTensor's ``vectorize_graph``: a child's parameters
then carry the batch, one child draw per parent draw). It runs on PyTensor's Python linker,
which compiles nothing: built, rewritten and run for 64 and 1000 draws in 0.39 s on a
process's first call, against 0.5 s for the per-draw function with PyTensor's Numba cache
warm (1.7 s cold); later populations take 0.6 ms for 1064 draws, against 31 ms.

A graph that cannot be vectorized (a random variable whose parameters are random and whose op
PyTensor cannot vectorize, e.g. ``pm.LKJCholeskyCov``'s ``sd_dist``), or one whose vectorized
draws do not come out with one leading draw per particle for every random variable, falls back
to the per-draw loop.

PyTensor draws HalfNormal, HalfCauchy, Cauchy and Student-t variables through ``scipy.stats``,
whose import (0.5–1.7 s on 2 cores; nothing else on the evidence path needs it) a process's
first call paid for every model with such a prior. Those draws are NumPy's generator's here
(:func:`_numpy_draws`: the same ops as subclasses, PyMC's symbolic HalfCauchy inlined as
|Cauchy|, which also batches below another variable, where PyTensor 3.3 could not).

Example
-------
>>> import pymc as pm
>>> from ppl_hais.adapters.pymc.prior import PriorSampler
>>> with pm.Model() as model:
...     mu = pm.Normal("mu", 0.0, 1.0)
...     theta = pm.Normal("theta", mu, 0.1, shape=3)
>>> draw = PriorSampler(model, [(), (3,)])
>>> draw.vectorized
True
>>> [x.shape for x in draw(1000, seed=0)]
[(1000,), (1000, 3)]
"""

from __future__ import annotations

import copy

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.distribution import SymbolicRandomVariable
from pymc.distributions.shape_utils import change_dist_size
from pymc.initial_point import make_initial_point_expression
from pymc.pytensorf import collect_default_updates, reseed_rngs
from pymc.pytensorf import compile as compile_pytensor
from pytensor.compile.mode import Mode
from pytensor.graph import ancestors, graph_inputs
from pytensor.graph.replace import vectorize_graph
from pytensor.tensor.random.basic import CauchyRV, HalfCauchyRV, HalfNormalRV, StudentTRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomType

try:  # PyTensor 3 moved the graph walks to a module of their own
    from pytensor.graph.traversal import io_toposort
except ImportError:  # PyTensor 2
    from pytensor.graph.basic import io_toposort

_RANDOM = (RandomVariable, SymbolicRandomVariable)
# each op's NumPy implementation after PyTensor's light rewrites: nothing compiled for a function
# called once per population. Its "fast_run" rewrites made the draws slower, not faster: 8.4 ms
# for 1000 eight-schools draws against 0.56 ms (PyTensor 3.3; 10.1 and 0.48 ms on 2.38)
_PYTHON = Mode(linker="py", optimizer="fast_compile")


def _shape(size, *params):
    return size if size is not None else np.broadcast_shapes(*(np.shape(p) for p in params))


class _HalfNormal(HalfNormalRV):
    @classmethod
    def rng_fn_scipy(cls, rng, loc, scale, size):
        return loc + scale * np.abs(rng.standard_normal(_shape(size, loc, scale)))


class _HalfCauchy(HalfCauchyRV):
    @classmethod
    def rng_fn_scipy(cls, rng, loc, scale, size):
        return loc + scale * np.abs(rng.standard_cauchy(_shape(size, loc, scale)))


class _Cauchy(CauchyRV):
    @classmethod
    def rng_fn_scipy(cls, rng, loc, scale, size):
        return loc + scale * rng.standard_cauchy(_shape(size, loc, scale))


class _StudentT(StudentTRV):
    @classmethod
    def rng_fn_scipy(cls, rng, df, loc, scale, size):
        return loc + scale * rng.standard_t(df, _shape(size, df, loc, scale))


# PyTensor draws these through scipy.stats, whose import (0.5-1.7 s on 2 cores) a process's
# first call would pay for a model with a HalfNormal, HalfCauchy, Cauchy or Student-t prior;
# NumPy's generator draws them as exactly
_NUMPY_DRAWS = {HalfNormalRV: _HalfNormal, HalfCauchyRV: _HalfCauchy, CauchyRV: _Cauchy,
                StudentTRV: _StudentT}  # fmt: skip


def _numpy_draws(outputs):
    """``outputs`` with the random variables of ``_NUMPY_DRAWS`` drawn by NumPy's generator
    (the same op and parameters, another class), also inside a symbolic random variable (PyMC's
    HalfCauchy is |Cauchy|), which is inlined then."""
    memo = {}
    for node in io_toposort(graph_inputs(outputs), outputs):
        inputs = [memo.get(v, v) for v in node.inputs]
        swap = _NUMPY_DRAWS.get(type(node.op))
        if swap is not None:
            op = copy.copy(node.op)
            op.__class__ = swap
            new = op.make_node(*inputs).outputs
        elif isinstance(node.op, SymbolicRandomVariable) and any(
            type(inner.op) in _NUMPY_DRAWS for inner in node.op.fgraph.apply_nodes
        ):
            new = _numpy_draws(_inlined(node.op, inputs))
        elif any(i is not v for i, v in zip(inputs, node.inputs, strict=True)):
            new = node.clone_with_new_inputs(inputs).outputs
        else:
            continue
        memo.update(zip(node.outputs, new, strict=True))
    return [memo.get(v, v) for v in outputs]


def _inlined(op, inputs):
    """The outputs of ``op`` (an op from a graph) at ``inputs``, computed by its inner graph's
    ops."""
    memo = dict(zip(op.inner_inputs, inputs, strict=True))
    for inner in op.fgraph.toposort():
        outs = inner.op.make_node(*(memo.get(v, v) for v in inner.inputs)).outputs
        memo.update(zip(inner.outputs, outs, strict=True))
    return [memo.get(v, v) for v in op.inner_outputs]


def _expression(model):
    """The transformed initial point of every free variable drawn from its prior (value_vars
    order)."""
    return make_initial_point_expression(
        free_rvs=model.free_RVs,
        rvs_to_transforms=model.rvs_to_transforms,
        initval_strategies={},
        default_strategy="prior",
        return_transformed=True,
    )


def _random_nodes(outputs):
    nodes = {v.owner for v in ancestors(outputs) if v.owner is not None}
    return [nd for nd in nodes if isinstance(nd.op, _RANDOM)], nodes


def _batched(expr, n):
    """``expr`` with ``n`` leading draws of every random variable, or None where the graph has a
    random op this cannot batch."""
    rvs, nodes = _random_nodes(expr)
    consumers = {nd for nd in nodes if any(isinstance(i.type, RandomType) for i in nd.inputs)}
    if not consumers <= set(rvs):  # an op drawing random numbers that is not a variable
        return None
    roots = {}
    for nd in rvs:
        out = nd.default_output()
        if not any(a.owner in consumers for a in ancestors(nd.inputs)):
            roots[out] = change_dist_size(out, (n,), expand=True)
    batched = vectorize_graph(expr, replace=roots)
    # every random variable of the new graph must carry the batch: one more dimension each
    new_rvs, _ = _random_nodes(batched)
    before = sorted(nd.default_output().ndim + 1 for nd in rvs)
    if sorted(nd.default_output().ndim for nd in new_rvs) != before:
        return None
    return batched


class PriorSampler:
    """``draw(num, seed)``: ``num`` prior draws per value variable, shaped ``(num, *shape)``
    (``vectorize=False``: always the per-draw loop)."""

    def __init__(self, model, shapes, vectorize: bool = True):
        self.shapes = [tuple(s) for s in shapes]  # the value variables' (value_vars order)
        expr = _expression(model)
        try:
            expr = _numpy_draws(expr)
        except Exception:  # noqa: BLE001 - a graph this cannot rewrite draws through PyTensor's ops
            pass
        n = pt.iscalar("num_draws")
        try:
            batched = _batched(expr, n) if vectorize else None
        except Exception:  # noqa: BLE001 - any graph this cannot batch is drawn per particle
            batched = None
        self.vectorized = batched is not None
        if self.vectorized:
            self._fn = compile_pytensor(inputs=[n], outputs=batched, mode=_PYTHON)
            self._rngs = list(collect_default_updates(inputs=[n], outputs=batched))
            self.vectorized = self._check()
        if not self.vectorized:
            self._fn = compile_pytensor(inputs=[], outputs=expr)
            self._rngs = list(collect_default_updates(inputs=[], outputs=expr))

    def _check(self) -> bool:
        """Whether the batched function gives every variable its ``num`` leading draws."""
        try:
            out = self._fn(3)
        except Exception:  # noqa: BLE001 - an op that fails batched runs per draw instead
            return False
        return [np.shape(x) for x in out] == [(3, *s) for s in self.shapes]

    def __call__(self, num: int, seed: int) -> list[np.ndarray]:
        reseed_rngs(self._rngs, seed)
        if self.vectorized:
            return [np.asarray(x) for x in self._fn(int(num))]
        draws = [self._fn() for _ in range(num)]  # as pm.draw does, compiled once
        return [
            np.stack([np.asarray(d[i]) for d in draws]).reshape((num, *shape))
            for i, shape in enumerate(self.shapes)
        ]
