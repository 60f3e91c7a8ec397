"""The trust rules: pure functions from an estimate's figures to the names of the checks it
fails, the sentence each failure states, and :class:`~.diagnostics.EvidenceWarning`
(:mod:`.diagnostics`); the rules over a convergence ladder's rungs and the shortfall they state
(:mod:`.ladder`). Nothing here runs a sampler: the layers above measure, these rules judge.

Example
-------
>>> from ppl_hais.checks import diagnostics
>>> failed = diagnostics.evidence_checks(khat=0.9, num_particles=100, ess=50)
>>> [sentence.split(":")[0] for sentence in failed]
['pareto_k']
"""

from . import diagnostics, ladder

__all__ = ["diagnostics", "ladder"]
