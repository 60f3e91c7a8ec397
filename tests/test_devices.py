"""Particles sharded over devices (here: 4 XLA host devices in a subprocess, since the device
count is fixed when JAX starts): the same key gives the same weights on 1 or 4 devices."""

import os
import subprocess
import sys
import textwrap

import jax
import pytest

import ppl_hais as ph


def test_same_key_same_estimate_on_one_or_four_devices():
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
        assert len(jax.devices()) == 4
        target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / 2.0) ** 2),
                                    ph.Gaussian(np.zeros(3)))
        kw = dict(num_particles=64, num_steps=200, progress_bar=False)
        one = ph.hais(jax.random.key(3), target, devices=jax.devices()[:1], **kw)
        four = ph.hais(jax.random.key(3), target, devices=jax.devices(), **kw)
        assert one.settings.num_devices == 1 and four.settings.num_devices == 4
        # the particles really lived on four devices, 16 rows each
        assert four.settings.particles_per_device == (16,) * 4
        assert one.settings.particles_per_device == (64,)
        np.testing.assert_allclose(one.log_weights, four.log_weights, rtol=0, atol=1e-12)
        np.testing.assert_allclose(one.particles, four.particles, rtol=0, atol=1e-12)
        exact = 3 * np.log(2.0 * np.sqrt(2 * np.pi))
        assert abs(four.log_z - exact) < 4 * four.log_z_se
        # two chains in one call, sharded: each chain's estimate is the single-device one
        chains = ph.hais(jax.random.key(3), target, devices=jax.devices(), num_chains=2, **kw)
        alone = ph.hais(jax.random.key(3), target, devices=jax.devices()[:1], num_chains=2,
                        **kw)
        for a, b in zip(chains, alone):
            assert abs(a.log_z - b.log_z) < 1e-12
        # the CPU default is one device with particle groups on threads (faster than host devices)
        assert ph.hais(jax.random.key(3), target, **kw).settings.num_devices == 1
        for n, message in ((63, "do not split evenly over 4 devices"),
                           (2, "2 particles cannot be sharded over 4 devices")):
            try:
                ph.hais(jax.random.key(3), target, devices=jax.devices(), num_particles=n,
                        num_steps=50, progress_bar=False)
            except ValueError as err:
                assert message in str(err), str(err)
            else:
                raise AssertionError(f"{n} particles on 4 devices were accepted")
        print("ok")
        """
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
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


_MULTIHOST = """
import sys
pid, port = int(sys.argv[1]), sys.argv[2]
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)
import jax.numpy as jnp, numpy as np, ppl_hais as ph
target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / 2.0) ** 2), ph.Gaussian(np.zeros(3)))
r = ph.hais(jax.random.key(3), target, num_particles=64, num_steps=200, progress_bar=False)
assert len(jax.devices()) == 2 and len(jax.local_devices()) == 1
print("RESULT", r.settings.num_devices, repr(float(r.log_z)), repr(float(r.log_weights.sum())))
"""


def test_two_processes_under_jax_distributed_give_the_single_process_estimate():
    """The multi-host path, simulated: two processes on this machine joined by
    jax.distributed over loopback (CPU collectives by gloo), one CPU device each. Every process
    runs the same script; the particles are sharded over both processes' devices and each gets
    the whole result, equal to one process's run with the same key."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    procs = [
        subprocess.Popen([sys.executable, "-c", _MULTIHOST, str(i), port], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    results = [line.split()[1:] for out, _ in outs for line in out.splitlines()
               if line.startswith("RESULT")]  # fmt: skip
    assert len(results) == 2 and results[0] == results[1], results
    assert results[0][0] == "2"
    import jax.numpy as jnp
    import numpy as np

    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / 2.0) ** 2), ph.Gaussian(np.zeros(3)))
    one = ph.hais(jax.random.key(3), target, num_particles=64, num_steps=200, progress_bar=False)
    assert abs(float(results[0][1]) - one.log_z) < 1e-9
    assert abs(float(results[0][2]) - float(one.log_weights.sum())) < 1e-7

