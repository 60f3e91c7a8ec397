"""Front ends that translate NumPyro and PyMC models for the PPL-free core, and results back
to each library's idiom (NumPyro ``MCMC``-like objects, PyMC ``pm.sample``-like functions).

Example
-------
>>> from ppl_hais.adapters import numpyro as phn, pymc as php
>>> phn.HAIS.__name__, php.sample_hais.__name__
('HAIS', 'sample_hais')
"""
