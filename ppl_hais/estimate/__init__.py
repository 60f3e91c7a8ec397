"""Checked estimates from one anneal: the public annealers :func:`~.annealers.ais`,
:func:`~.annealers.hais` and :func:`~.annealers.bdmc` run :mod:`ppl_hais.annealing`, then the
reverse-anneal bias check (:mod:`.bias`) where asked, and raise every failed check as an
:class:`~ppl_hais.EvidenceWarning`.

Example
-------
>>> import jax, jax.numpy as jnp, ppl_hais as ph
>>> target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
...                             initial=ph.Gaussian(jnp.zeros(2), 2.0))
>>> res = ph.hais(jax.random.key(0), target, num_particles=64, num_steps=100,
...               progress_bar=False)
>>> bool(abs(res.log_z - jnp.log(2 * jnp.pi)) < 5 * res.log_z_se + 0.1)
True
"""
