"""Annealed importance sampling's machinery: transition kernels, the pure scan, the pilot,
execution over particle groups or devices. It returns weights, particles and raw figures; the
checked estimate (bias check, warnings) is :mod:`ppl_hais.estimate`'s.

===============  ===============================================================================
module           one job
===============  ===============================================================================
``options``      each option's value checked where it is given, with "did you mean"
``config``       :class:`AnnealOptions`: the kernel's, pilot's and run's options in one object
``kernels``      per-particle ``(init, step)`` pairs: HAIS (the shared HMC transition of
                 :mod:`ppl_hais.mcmc.hmc`), resampled-momentum HMC, random-walk Metropolis,
                 HAIS with Metropolis moves of integer coordinates
``scan``         :func:`~.scan.anneal`: bins of a ``lax.scan`` under a ``while_loop`` over
                 temperatures (``start``, ``advance`` to a bin, ``output``)
``state``        what the scan carries from bin to bin and returns
``program``      the scan compiled once per target structure, and the host loop that runs it
                 a chunk of bins at a time (progress and Ctrl-C between calls)
``pilot``        the discarded pilot anneal that tunes step size and scale as functions of β
``execution``    CPU particle groups, device sharding
``batching``     several estimates' anneals side by side, as vmapped calls (one design's data sets)
``outputs``      host-side: the groups' outputs merged, the scan's bins merged for the result
``starvation``   particle groups one at a time where an old jaxlib would deadlock in LAPACK
===============  ===============================================================================

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> pilot = ph.annealing.survey(jax.random.key(0), target, ph.hais_kernel(), num_steps=100)
>>> bool(pilot.log_step.shape == pilot.betas.shape)
True
"""

from .config import AnnealOptions, RunOptions
from .pilot import Pilot, PilotOptions, survey

__all__ = ["AnnealOptions", "Pilot", "PilotOptions", "RunOptions", "survey"]

