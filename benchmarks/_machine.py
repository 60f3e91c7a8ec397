"""The machine line every benchmark report carries."""

import os


def describe() -> str:
    import jax

    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    dev = jax.devices()[0]
    return (
        f"{cpu}, {os.cpu_count()} cores, {dev.platform} ({dev.device_kind}), jax {jax.__version__}"
    )
