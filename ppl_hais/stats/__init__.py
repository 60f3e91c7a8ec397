"""Statistics on arrays of weights and draws: log-mean-exp and its error, effective sample
sizes, resampling, the excess of a weighted mean (:mod:`.estimators`, including the bridge
fixed point of Meng & Wong) and the generalized Pareto fit behind k̂ (:mod:`.pareto`).

Imports only :mod:`ppl_hais.runtime`.

Example
-------
>>> import numpy as np
>>> from ppl_hais.stats import estimators
>>> round(float(estimators.log_mean_exp(np.log([1.0, 2.0, 3.0]))), 4)  # log of the mean, 2
0.6931
"""
