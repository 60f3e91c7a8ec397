"""Annealed importance sampling: transition kernels, the pure scan, the pilot, execution over
particle groups or devices, and the public annealers.

============  ================================================================================
module        one job
============  ================================================================================
``kernels``   per-particle ``(init, step)`` pairs: HAIS (the shared HMC transition of
              :mod:`ppl_hais.mcmc.hmc`), resampled-momentum HMC, random-walk Metropolis,
              HAIS with Metropolis moves of integer coordinates
``scan``      :func:`~.scan.anneal`: bins of a ``lax.scan`` under a ``while_loop`` over temperatures
``pilot``     the discarded pilot anneal that tunes step size and scale as functions of β
``execution`` the compile cache, CPU particle groups, device sharding
``outputs``   host-side: the groups' outputs merged, the scan's bins merged for the result
``api``       :func:`ais`, :func:`hais`, :func:`bdmc`: validation, pilot, main run, result;
              :class:`~.api.RunOptions`, the main run's options besides the pilot's
============  ================================================================================

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> result = ph.annealing.hais(jax.random.key(0), target, num_particles=64, num_steps=100,
...                      progress_bar=False)
>>> bool(abs(result.log_z - jnp.log(2 * jnp.pi)) < 5 * result.log_z_se + 0.1)
True
"""

from .api import RunOptions, ais, bdmc, hais
from .pilot import Pilot, PilotOptions, survey

__all__ = ["Pilot", "PilotOptions", "RunOptions", "ais", "bdmc", "hais", "survey"]
