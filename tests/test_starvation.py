"""The guard against old jaxlib's LAPACK deadlock (ppl_hais.annealing.starvation): which models
run their particle groups one at a time, and that doing so changes no estimate."""

import jax
import jax.numpy as jnp
import numpy as np

import ppl_hais as ph
from ppl_hais.annealing import execution, starvation
from ppl_hais.runtime.structure import split

X = jnp.linspace(0.0, 5.0, 12)


def gp_log_density(z):  # a GP's marginal likelihood in its log lengthscale: Cholesky + solve
    k = jnp.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / jnp.exp(z[0]) ** 2) + 0.04 * jnp.eye(12)
    c = jnp.linalg.cholesky(k)
    a = jax.scipy.linalg.solve_triangular(c, jnp.sin(X), lower=True)
    return -0.5 * a @ a - jnp.sum(jnp.log(jnp.diag(c))) - 0.5 * z[0] ** 2


def test_only_models_that_call_lapack_run_their_groups_one_at_a_time_and_only_on_old_jaxlib():
    gp = ph.AnnealingTarget(gp_log_density, ph.Gaussian(jnp.zeros(1)))
    plain = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z - 1.0) ** 2), ph.Gaussian(jnp.zeros(1)))
    assert starvation.calls(jax.make_jaxpr(jax.grad(gp_log_density))(jnp.zeros(1)).jaxpr,
                            starvation.LINALG)  # fmt: skip
    assert starvation.serial_groups(split(gp)[0], gp) == starvation.OLD_LAPACK
    assert not starvation.serial_groups(split(plain)[0], plain)


def test_groups_one_at_a_time_give_the_same_estimate(monkeypatch):
    """Each group's random numbers are its particles' own, so the order changes nothing."""
    gp = ph.AnnealingTarget(gp_log_density, ph.Gaussian(jnp.zeros(1)))
    monkeypatch.setattr(execution, "layout", lambda n, **kw: (4, n // 4))
    runs = []
    for serial in (False, True):
        monkeypatch.setattr(execution, "serial_groups", lambda s, t, serial=serial: serial)
        runs.append(ph.hais(jax.random.key(3), gp, num_particles=128, num_steps=50,
                            progress_bar=False))  # fmt: skip
    np.testing.assert_array_equal(runs[0].log_weights, runs[1].log_weights)
