"""The evidence of one model on several hosts: every process runs this same script.

    # on one machine, two processes over loopback (CPU devices; what tests/test_devices.py does)
    python examples/multihost_evidence.py --coordinator 127.0.0.1:12345 --processes 2 --id 0 &
    python examples/multihost_evidence.py --coordinator 127.0.0.1:12345 --processes 2 --id 1

    # under SLURM (one task per node or per GPU): jax.distributed reads the job's variables
    srun python examples/multihost_evidence.py

Every process draws the same initial particles from the same key; `ph.hais` shards the main
run's particles over every device of every process (`jax.devices()`), and every process gets
the whole result, identical to a one-process run with the same key.
"""

import argparse

import jax


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coordinator", default=None)
    ap.add_argument("--processes", type=int, default=None)
    ap.add_argument("--id", type=int, default=None)
    ap.add_argument("--particles", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    # CPU devices of several processes talk through gloo (GPUs use NCCL either way); both
    # calls must come before anything touches a JAX device
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(args.coordinator, args.processes, args.id)

    import jax.numpy as jnp
    import numpy as np

    import ppl_hais as ph

    dim = 20
    target = ph.AnnealingTarget(
        log_density=lambda z: -jnp.sum(jnp.abs(z - 1.0)) - 0.5 * jnp.sum(z**2),
        initial=ph.Gaussian(np.zeros(dim)),
    )
    result = ph.hais(jax.random.key(0), target, num_particles=args.particles,
                     num_steps=args.steps, progress_bar=jax.process_index() == 0)  # fmt: skip
    if jax.process_index() == 0:
        print(f"{jax.process_count()} processes, {result.settings.num_devices} devices: "
              f"log Z = {result.log_z:.4f} ± {result.log_z_se:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
