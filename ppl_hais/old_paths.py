"""Module paths from before the package was layered, still importable.

``ppl_hais.diagnostics``, ``ppl_hais.ladder`` and the other namespaces in ``ppl_hais.__all__``
are public names of their modules (``import ppl_hais.ladder`` keeps working, silently); every
other old path (``ppl_hais.result``, ``ppl_hais.annealing.bias``, …) imports the module from
its new place with a :class:`DeprecationWarning` naming it. One object either way: a module
imported under both names is the same module, so ``monkeypatch`` on either reaches it.

Example
-------
>>> import ppl_hais.ladder, ppl_hais.checks.ladder
>>> ppl_hais.ladder is ppl_hais.checks.ladder
True
>>> new_name("ppl_hais.annealing.bias")
'ppl_hais.estimate.bias'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings  # stacklevel 2: the import system's frames are not counted

# namespaces of the public API: the old path is their public name
PUBLIC = {
    "ppl_hais.arviz": "ppl_hais.results.arviz",
    "ppl_hais.compare": "ppl_hais.workflow.compare",
    "ppl_hais.compilation_cache": "ppl_hais.runtime.compilation_cache",
    "ppl_hais.diagnostics": "ppl_hais.checks.diagnostics",
    "ppl_hais.energy": "ppl_hais.research.energy",
    "ppl_hais.evidence": "ppl_hais.workflow.evidence",
    "ppl_hais.exchange": "ppl_hais.research.exchange",
    "ppl_hais.ladder": "ppl_hais.checks.ladder",
    "ppl_hais.plots": "ppl_hais.results.plots",
    "ppl_hais.refinement": "ppl_hais.research.refinement",
    "ppl_hais.sbn": "ppl_hais.research.sbn",
    "ppl_hais.vi": "ppl_hais.starts.vi",
}
DEPRECATED = {
    "ppl_hais.annealing.api": "ppl_hais.estimate.annealers",
    "ppl_hais.annealing.bias": "ppl_hais.estimate.bias",
    "ppl_hais.budget": "ppl_hais.workflow.budget",
    "ppl_hais.density": "ppl_hais.model.density",
    "ppl_hais.envelopes": "ppl_hais.research.envelopes",
    "ppl_hais.estimators": "ppl_hais.stats.estimators",
    "ppl_hais.fits": "ppl_hais.starts.fits",
    "ppl_hais.laplace": "ppl_hais.starts.laplace",
    "ppl_hais.likelihood": "ppl_hais.research.likelihood",
    "ppl_hais.model_bridge": "ppl_hais.workflow.model_bridge",
    "ppl_hais.options": "ppl_hais.annealing.options",
    "ppl_hais.pareto": "ppl_hais.stats.pareto",
    "ppl_hais.precision": "ppl_hais.runtime.precision",
    "ppl_hais.progress": "ppl_hais.runtime.progress",
    "ppl_hais.result": "ppl_hais.results.result",
    "ppl_hais.runs": "ppl_hais.workflow.runs",
    "ppl_hais.schedules": "ppl_hais.model.schedules",
    "ppl_hais.structure": "ppl_hais.runtime.structure",
    "ppl_hais.tails": "ppl_hais.model.tails",
    "ppl_hais.target": "ppl_hais.model.target",
    "ppl_hais.validation": "ppl_hais.model.validation",
}


def new_name(name: str) -> str | None:
    """The module's path now, for an old path (or a module inside an old package); else None."""
    for table in (PUBLIC, DEPRECATED):
        for old, new in table.items():
            if name == old or name.startswith(old + "."):
                return new + name[len(old):]
    return None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old path with the module at its new one."""

    def find_spec(self, fullname, path=None, target=None):
        if new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = new_name(spec.name)
        if not any(spec.name == o or spec.name.startswith(o + ".") for o in PUBLIC):
            warnings.warn(f"{spec.name} is now {new}: import it from there (or the name from "
                          "ppl_hais itself)", DeprecationWarning, stacklevel=2)  # fmt: skip
        module = importlib.import_module(new)
        self._spec = module.__spec__  # the import system sets __spec__ to the old path's
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
