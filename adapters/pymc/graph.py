"""What the PyMC adapter reads off a model's graph: arrays with missing values that enter the
observed variables (refused), and the free variables of a centered hierarchy (named by the
evidence warning's remedy).

Example
-------
>>> import pymc as pm
>>> from ppl_hais.adapters.pymc.graph import centered_variables
>>> with pm.Model() as model:
...     sigma = pm.HalfNormal("sigma", 1.0)
...     theta = pm.Normal("theta", 0.0, sigma, shape=3)
>>> centered_variables(model)
['theta']
"""

from __future__ import annotations

import numpy as np

__all__ = ["centered_variables", "check_inputs"]


def _ancestors(outputs):
    try:
        from pytensor.graph.traversal import ancestors
    except ImportError:  # PyTensor before 2.32
        from pytensor.graph.basic import ancestors
    return ancestors(outputs)


def check_inputs(model):
    """Refuse an array written into the model with NaN values that enters the observed
    variables' distributions, a predictor with missing entries: the density is NaN wherever
    they enter, and no run could weigh its particles (``pm.Data`` refuses NaN itself)."""
    observed = set(model.observed_RVs)
    for rv in model.observed_RVs:
        for var in _ancestors(rv.owner.inputs):
            value = getattr(var, "data", None)  # a TensorConstant's
            if value is None and hasattr(var, "get_value"):  # pm.Data, a shared variable
                value = var.get_value(borrow=True)
            x = np.asarray(value) if value is not None else None
            # arrays only: a scalar inf or NaN is how graphs write bounds and guards
            if (x is None or var in observed or x.ndim == 0
                    or not np.issubdtype(x.dtype, np.floating) or not np.isnan(x).any()):
                continue
            what = f"pm.Data '{var.name}'" if var.name else f"an array of shape {x.shape}"
            raise ValueError(
                f"{what} that enters observed variable '{rv.name}' has "
                f"{int(np.sum(np.isnan(x)))} NaN value(s): the model's density is NaN "
                "wherever they enter, so no run could weigh its particles. Impute them or drop "
                "the rows that hold them (missing observations, rather than predictors, PyMC "
                "imputes when observed= holds NaN)."
            )


_LOC_SCALE = ("NormalRV", "StudentTRV", "CauchyRV", "LaplaceRV")  # scale: the last parameter


def centered_variables(model) -> list[str]:
    """The free variables of a location-scale family whose scale depends on other free
    variables (a hierarchical prior written centered: a funnel)."""
    free = set(model.free_RVs)
    found = []
    for rv in model.free_RVs:
        node = rv.owner
        if type(node.op).__name__ in _LOC_SCALE:
            scale = node.op.dist_params(node)[-1]
            if any(a in free for a in _ancestors([scale])):
                found.append(rv.name)
    return found
