"""What the annealing scan carries and returns: the per-particle carry, the per-bin sums and
rows, the loop between two calls of :func:`~ppl_hais.annealing.scan.advance`, and the output.

Example
-------
>>> from ppl_hais.annealing.state import AnnealOutput
>>> AnnealOutput._fields[:2]
('log_weights', 'particles')
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["AnnealOutput", "BinSums", "Carry", "Loop", "ScaleSums", "Summaries"]


class Carry(NamedTuple):
    """What the scan carries from one bin to the next."""

    states: Any  # the kernel's per-particle states (each with its cached Potential)
    log_w: Any  # (P,) log weights
    offset: Any  # the pilot's adaptation offset on log(step size)
    nonfinite: Any  # (P,) each particle's proposals with a non-finite density or gradient
    grads: Any  # (3,) gradients per particle: own (mean), executed (max); integer moves taken


class BinSums(NamedTuple):
    """Per-temperature sums inside one bin (reset at each bin)."""

    acceptance: Any
    step_size: Any
    log_scale: Any  # (D,) with adapt_scale, else (0,)
    beta: Any


class Summaries(NamedTuple):
    """Per-bin diagnostics, one row per bin (``bin_count`` 0: a bin past β_N)."""

    acceptance: Any
    step_size: Any
    ess: Any
    log_z: Any
    bin_beta: Any  # β at the bin's last temperature
    bin_count: Any


class ScaleSums(NamedTuple):
    """The measured scale's sums over temperatures, ``SCALE_ROWS`` rows of merged bins."""

    beta: Any  # (SCALE_ROWS,) Σ β
    log_scale: Any  # (SCALE_ROWS, D) Σ log scale per coordinate
    count: Any  # (SCALE_ROWS,) temperatures summed (0: an empty row)


class AnnealOutput(NamedTuple):
    """What :func:`anneal` returns (arrays; per-bin rows before
    :func:`~ppl_hais.annealing.execution.run` merges them)."""

    log_weights: Any  # (P,) final log weights
    particles: Any  # (P, D) final positions
    log_ratio: Any  # (P,) log likelihood ratio at the final positions
    log_initial: Any  # (P,) initial log density at the final positions
    start_log_initial: Any  # (P,) initial log density at the starting positions
    initial_nonfinite: Any  # starting positions with a non-finite initial density
    num_nonfinite: Any  # proposals with a non-finite density or gradient
    particle_nonfinite: Any  # (P,) those of each particle
    acceptance: Any  # per bin: mean acceptance
    step_size: Any  # per bin: mean step size
    ess: Any  # per bin: ESS of the weights at the bin's end
    log_z: Any  # per bin: log mean weight at the bin's end (without log Z_initial)
    bin_beta: Any  # per bin: β at its last temperature
    bin_count: Any  # per bin: temperatures in it (0: past β_N); None once merged
    log_steps: Any  # per temperature log(step size) (in bins of BIN_STEPS of the scan)
    log_ratio_sd: Any  # per temperature spread of the log ratio over the particles
    gradients: Any  # (3,) per particle: own (mean), executed (max), integer moves taken
    scale_betas: Any  # per scale row Σ β (``SCALE_ROWS``); once merged, each group's mean β
    log_scale: Any  # per row Σ log scale per coordinate (``adapt_scale``); once merged, means
    scale_count: Any  # per row: temperatures summed; None once merged
    particles_per_device: Any = None  # set by execution.run: rows per device


class Loop(NamedTuple):
    """An anneal between two calls of :func:`advance`: the next bin and all that it needs."""

    bin: Any  # the next bin to run (int32)
    carry: Carry
    summaries: Summaries  # one row per bin
    scale: ScaleSums
    rec: Any  # per-temperature log(step size) and log-ratio spread, (bins, BIN_STEPS) each
    start_log_initial: Any  # (P,) initial log density at the starting positions
