"""The evidence workflow a user calls: :func:`~.evidence.evidence` picks a start, climbs the
convergence ladder (:mod:`.runs`) within a gradient budget (:mod:`.budget`) and clears or warns;
:func:`~.model_bridge.bridge_evidence` does the same from posterior draws; and
:func:`~.compare.compare_evidence` sets several models' answers side by side.

Example
-------
>>> import ppl_hais as ph
>>> table = ph.compare_evidence({"a": (-10.0, 0.1), "b": (-12.0, 0.2)})
>>> list(table.index)
['a', 'b']
"""

from . import compare, evidence, memory, options

__all__ = ["compare", "evidence", "memory", "options"]
