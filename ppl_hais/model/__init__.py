"""What is annealed: the target (an initial distribution and a log density over flat vectors,
:mod:`.target`), split densities (:mod:`.density`), heavy-tailed initial distributions
(:mod:`.tails`), temperature schedules (:mod:`.schedules`) and the checks of a target's input
(:mod:`.validation`).

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2)))
>>> target.initial.sample(jax.random.key(0), (3,)).shape
(3, 2)
"""
