"""What every benchmark report shares: the machine line it carries, and how it is written."""

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


def write(path: str, report) -> None:
    """Write a report (its text, or its lines) to ``path``, ending in one newline."""
    text = report if isinstance(report, str) else "\n".join(report)
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n")
    print("wrote", path)


def report(path, lines) -> None:
    """Write a report to ``path`` when one is given (:func:`write`), else print it."""
    if path:
        write(path, lines)
    else:
        print("\n".join(lines))
