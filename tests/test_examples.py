"""The scripts in examples/ run as their docstrings say, and print what is exact."""

import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy import integrate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_multihost_example_on_two_local_processes():
    """Two processes over loopback, as the script's docstring runs it; process 0 prints the
    pooled estimate, which matches the exact log Z (a product of 1-D integrals)."""
    address = f"127.0.0.1:{_free_port()}"
    script = str(EXAMPLES / "multihost_evidence.py")
    # one CPU device per process, whatever XLA_FLAGS another test left in this worker's env
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PPL_HAIS_COMPILATION_CACHE"] = "0"
    procs = [
        subprocess.Popen(
            [sys.executable, script, "--coordinator", address, "--processes", "2", "--id",
             str(i), "--particles", "256", "--steps", "500"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    line = outs[0][0].strip().splitlines()[-1]
    m = re.match(r"2 processes, 2 devices: log Z = (\S+) ± (\S+)", line)
    assert m, line
    log_z, se = float(m.group(1)), float(m.group(2))
    # the target exp(−Σ|z−1| − ½Σz²) over the initial N(0, I): 20 equal 1-D integrals
    f = lambda z: math.exp(-abs(z - 1.0) - 0.5 * z * z)  # noqa: E731
    one = integrate.quad(f, -np.inf, 1.0)[0] + integrate.quad(f, 1.0, np.inf)[0]
    exact = 20 * math.log(one)
    assert abs(log_z - exact) < 4 * se + 0.05, (log_z, se, exact)
    assert "log Z" not in outs[1][0]  # only process 0 prints the result


def test_pymc_model_comparison_example():
    """The PyMC comparison script runs, and each sample_hais evidence it prints is within its
    own error bar of the exact evidence it prints beside it."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "pymc_model_comparison.py")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = re.findall(r"exact\s+(\S+) \| sample_hais\s+(\S+) ± (\S+)", out.stdout)
    assert len(rows) == 3, out.stdout
    for exact, est, se in ((float(a), float(b), float(c)) for a, b, c in rows):
        assert abs(est - exact) < 4 * se + 0.05, out.stdout
    assert "ph.compare_evidence" in out.stdout
