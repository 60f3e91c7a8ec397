"""What the estimators return and how it leaves the library: :class:`~.result.AISResult` with
its trace and checks (:mod:`.result`), ArviZ groups in ``pm.sample_smc``'s and NumPyro's
layout (:mod:`.arviz`) and the plots (:mod:`.plots`).

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> result = ph.hais(jax.random.key(0), target, num_particles=64, num_steps=50,
...                  progress_bar=False)
>>> "sample_stats" in ph.results.arviz.group_names(result.to_arviz())
True
"""

from . import arviz, plots, settings

__all__ = ["arviz", "plots", "settings"]
