"""Where an anneal starts: fitted initial distributions (Laplace, :mod:`.laplace`; variational,
:mod:`.vi`; their heavy-tailed widenings, cached per model, :mod:`.fits`) and the choice between
them and the prior by short pilot anneals (:mod:`.choose`).

Example
-------
>>> from ppl_hais import starts
>>> sorted(starts.NAMES)[:3]
['auto', 'laplace', 'laplace_t']
"""

from . import vi
from .choose import NAMES, choose_initial, laplace_t_target, laplace_target, prior_target, vi_target

__all__ = [
    "vi",
    "NAMES",
    "choose_initial",
    "prior_target",
    "laplace_target",
    "laplace_t_target",
    "vi_target",
]
