"""Models and estimators beside the evidence workflow, on the same core: RBM and Ising partition
functions (:mod:`.energy`), the exchange sampler for doubly intractable models
(:mod:`.exchange`, with :mod:`.envelopes`), sigmoid belief networks (:mod:`.sbn`), fitted
starts refined by natural gradient (:mod:`.refinement`) and the log likelihood of generative
models (:mod:`.likelihood`). Nothing below imports them.

Example
-------
>>> import numpy as np, ppl_hais as ph
>>> rbm = ph.research.energy.RBM(np.zeros((3, 2)), np.zeros(3), np.zeros(2))  # 2^5 equal states
>>> bool(np.isclose(ph.research.energy.log_partition_exact(rbm), 5 * np.log(2)))
True
"""

from . import energy, exchange, refinement, sbn

__all__ = ["energy", "exchange", "refinement", "sbn"]
