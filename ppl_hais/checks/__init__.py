"""The trust rules: pure functions from an estimate's figures to the checks it fails
(:mod:`.diagnostics`), each a :class:`~.record.Check` record (its name, figure and the nats it
states, and the sentence a warning shows; :class:`~.record.EvidenceWarning` states them
together, :mod:`.record`); the rules over a convergence ladder's rungs and the shortfall they
state (:mod:`.ladder`). Nothing here runs a sampler: the layers above measure, these rules
judge.

Example
-------
>>> from ppl_hais.checks import diagnostics
>>> failed = diagnostics.evidence_checks(khat=0.9, num_particles=100, ess=50)
>>> [(check.name, check.figure) for check in failed]
[('pareto_k', 0.9)]
"""

from . import diagnostics, ladder, record

__all__ = ["diagnostics", "ladder", "record"]
