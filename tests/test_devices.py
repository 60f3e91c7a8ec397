"""Particles sharded over devices (here: 2 XLA host devices in a subprocess, since the device
count is fixed when JAX starts): the same key gives the same weights on 1 or 2 devices."""

import os
import subprocess
import sys
import textwrap

import jax
import pytest

import ppl_hais as ph


def test_same_key_same_estimate_on_one_or_two_devices():
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
        assert len(jax.devices()) == 2
        target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / 2.0) ** 2),
                                    ph.Gaussian(np.zeros(3)))
        kw = dict(num_particles=64, num_steps=200, progress_bar=False)
        one = ph.hais(jax.random.key(3), target, devices=jax.devices()[:1], **kw)
        two = ph.hais(jax.random.key(3), target, devices=jax.devices(), **kw)
        assert one.settings["num_devices"] == 1 and two.settings["num_devices"] == 2
        np.testing.assert_allclose(one.log_weights, two.log_weights, rtol=0, atol=1e-12)
        np.testing.assert_allclose(one.particles, two.particles, rtol=0, atol=1e-12)
        exact = 3 * np.log(2.0 * np.sqrt(2 * np.pi))
        assert abs(two.log_z - exact) < 4 * two.log_z_se
        # the CPU default is one device with particle groups on threads (docs/devices.md)
        assert ph.hais(jax.random.key(3), target, **kw).settings["num_devices"] == 1
        try:
            ph.hais(jax.random.key(3), target, devices=jax.devices(), num_particles=63,
                    num_steps=50, progress_bar=False)
        except ValueError as err:
            assert "do not split evenly over 2 devices" in str(err)
        else:
            raise AssertionError("63 particles on 2 devices were accepted")
        print("ok")
        """
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_devices_must_be_jax_devices():
    import jax.numpy as jnp
    import numpy as np

    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum(z**2), ph.Gaussian(np.zeros(2)))
    with pytest.raises(TypeError, match="devices must be a non-empty list of jax.Device"):
        ph.hais(jax.random.key(0), target, num_particles=32, num_steps=50, devices=["cpu"])
