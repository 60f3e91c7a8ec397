"""Persistent-momentum HMC: the one transition (:mod:`.hmc`) that the annealer and the MCMC
sampler share, its parts, and reduced-flip HMC as an MCMC sampler.

=================  ===========================================================================
module             one job
=================  ===========================================================================
``fast_random``    counter-based (Threefry) normals and uniforms for the inner loop
``integrators``    velocity-Verlet leapfrog with cached gradients; reflection off box walls
``lookahead``      leap / flip / stay with reduced flips and look-ahead ([SD12] ch. 6)
``hmc``            the transition: :func:`~.hmc.move` and :func:`~.hmc.partial_refresh`
``kernel``         BlackJAX-style ``init`` / ``build_kernel`` of reduced-flip HMC
``adaptation``     warmup: dual averaging of ε, diagonal mass in Stan's windows, MEADS damping
``lanes``          chains that work through their own transitions (one trajectory per step)
``sampler``        :func:`sample`: warmup and draws of many chains in one compiled loop
=================  ===========================================================================

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> logdensity = lambda x: -0.5 * jnp.sum(x**2)
>>> state = ph.mcmc.init(jnp.zeros(2), logdensity, jax.random.key(0))
>>> state, info = ph.mcmc.build_kernel()(jax.random.key(1), state, logdensity, 0.3)
>>> info.num_gradients >= 1
Array(True, dtype=bool)
"""

from .kernel import ReducedFlipInfo, ReducedFlipState, build_kernel, find_reasonable_step_size, init
from .sampler import MCMCResult, sample

__all__ = [
    "MCMCResult",
    "ReducedFlipInfo",
    "ReducedFlipState",
    "build_kernel",
    "find_reasonable_step_size",
    "init",
    "sample",
]
