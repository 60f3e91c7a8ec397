"""Bad input gets a clear error, never a silent wrong answer."""

import jax.numpy as jnp
import numpy as np
import pytest

import ppl_hais as ph


def test_all_weights_zero_raises(key):
    t = ph.AnnealingTarget(
        log_density=lambda z: -jnp.inf * jnp.sum(z**2 + 1), initial=ph.Gaussian(np.zeros(2))
    )
    with pytest.raises(ph.AnnealingError, match="all 16 importance weights are zero"):
        ph.hais(key, t, num_particles=16, num_steps=20, step_size=0.1, progress_bar=False)


def test_nan_regions_are_rejected_and_counted(key):
    # NaN for z_0 > 1: the target is effectively truncated there; moves into it are rejected
    def log_density(z):
        return jnp.where(z[0] > 1.0, jnp.nan, -0.5 * jnp.sum(z**2))

    t = ph.AnnealingTarget(log_density=log_density, initial=ph.Gaussian(np.zeros(2), 0.5))
    with pytest.warns(ph.EvidenceWarning, match="nonfinite: .* NaN/inf density"):
        r = ph.hais(key, t, num_particles=64, num_steps=300, step_size=0.3, progress_bar=False)
    assert r.num_nonfinite > 0
    assert np.all(r.particles[np.isfinite(r.log_weights), 0] <= 1.0)
    assert "non-finite proposals rejected" in r.summary()


def test_target_needs_exactly_one_density():
    with pytest.raises(ValueError, match="exactly one of"):
        ph.AnnealingTarget(initial=ph.Gaussian(np.zeros(2)))
    with pytest.raises(ValueError, match="needs an initial distribution"):
        ph.AnnealingTarget(log_density=lambda z: 0.0)


def test_initial_outside_bounds_is_refused(key):
    t = ph.AnnealingTarget(
        log_density=lambda z: -jnp.sum(z), initial=ph.Gaussian(np.zeros(2)), bounds=(0.0, None)
    )
    with pytest.raises(ValueError, match="outside the target's bounds"):
        ph.hais(key, t, num_particles=8, num_steps=10, progress_bar=False)


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(num_particles=1), "at least 2"),
        (dict(step_size=-1.0), "positive"),
        (dict(step_size="adaptive"), "'auto'"),
        (dict(step_size_jitter=1.5), r"step_size_jitter must be in \[0, 1\]"),
        (dict(local_steps="yes"), "local_steps must be True or False"),
        (dict(local_steps=True, flips="reduced"), "local_steps needs lookahead=1"),
        # the core's own options, named where they are given (2.5 particles ran as 2, an
        # acceptance target of 1.5 was chased, num_pilot_steps=0 divided by zero)
        (dict(num_particles=2.5), "num_particles must be an integer of at least 2"),
        (dict(num_chains=0), "num_chains must be a positive integer"),
        (dict(target_accept=1.5), r"target_accept must lie in \(0, 1\)"),
        (dict(num_leapfrog=0), "num_leapfrog must be a positive integer"),
        (dict(num_bins=0), "num_bins must be a positive integer"),
        (dict(num_pilot_particles=1), "num_pilot_particles must be an integer of at least 2"),
        (dict(num_pilot_steps=0), "num_pilot_steps must be a positive integer"),
    ],
)
def test_bad_settings(key, kwargs, msg):
    t = ph.AnnealingTarget(log_density=lambda z: -jnp.sum(z**2), initial=ph.Gaussian(np.zeros(2)))
    with pytest.raises(ValueError, match=msg):
        ph.hais(key, t, **{"num_steps": 10, "progress_bar": False, **kwargs})


def test_bad_gaussian():
    with pytest.raises(ValueError, match="positive"):
        ph.Gaussian(np.zeros(2), -1.0)


BAD_OPTIONS = [
    (dict(num_particles=1), "num_particles must be an integer of at least 2"),
    (dict(step_size=-1.0), "step_size must be a positive number"),
    (dict(refresh=2.0), r"refresh .* must be in \(0, 1\]"),
    (dict(flips="reduce"), "did you mean 'reduced'"),
    (dict(initial="lapalce"), "did you mean 'laplace'"),
    (dict(schedule="sigmiod"), "did you mean 'sigmoid'"),
    (dict(max_gradients=0), "max_gradients must be a positive number"),
    (dict(num_leapfrog=0), "num_leapfrog must be a positive integer"),
    (dict(bias_check="yes"), "bias_check must be True, False or 'auto'"),
]


@pytest.mark.parametrize("kwargs, msg", BAD_OPTIONS)
def test_bad_options_fail_where_they_are_given(kwargs, msg):
    """``phn.HAIS(num_particles=1)`` once failed only inside ``run`` after the pilots
    (36.7 s); every option is now checked by the call that takes it, before any compilation,
    with the same message through NumPyro, PyMC and the core workflow."""
    import time

    numpyro = pytest.importorskip("numpyro")
    pm = pytest.importorskip("pymc")
    from ppl_hais.adapters import numpyro as phn
    from ppl_hais.adapters import pymc as php

    start = time.perf_counter()
    with pytest.raises(ValueError, match=msg):
        phn.HAIS(lambda: numpyro.sample("x", numpyro.distributions.Normal()), **kwargs)
    with pm.Model(), pytest.raises(ValueError, match=msg):
        pm.Normal("x")
        php.sample_hais(**kwargs)
    assert time.perf_counter() - start < 2.0  # nothing compiled
