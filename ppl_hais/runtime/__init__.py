"""What every layer runs on: float64 scopes (:mod:`.precision`), the persistent compilation
cache (:mod:`.compilation_cache`), progress bars (:mod:`.progress`), the structure of a model's
inputs as a cache key (:mod:`.structure`) and keyword-name suggestions (:mod:`.names`).

Imports nothing else of ``ppl_hais``.

Example
-------
>>> from ppl_hais.runtime.names import did_you_mean
>>> did_you_mean("num_particle", ["num_particles", "num_steps"])
" (did you mean 'num_particles'?)"
"""

from . import compilation_cache

__all__ = ["compilation_cache"]
