"""Host-side: the outputs of a run's particle groups merged into one, the scan's bins of
temperatures merged into a result's ``num_bins`` groups (:mod:`.execution` runs the scan), and
one :class:`~ppl_hais.AISResult` per chain from them.

Example
-------
>>> import numpy as np
>>> from ppl_hais.annealing.outputs import _grouped
>>> sums, counts = np.array([2.0, 4.0, 8.0, 0.0]), np.array([1, 1, 2, 0])  # 3 bins, 1 empty
>>> _grouped(sums, counts, 2)  # per-temperature means of 2 groups: bin 1; bins 2 and 3
array([2., 4.])
"""

from __future__ import annotations

import numpy as np

from ..checks import diagnostics
from ..results.result import AISResult, AnnealingTrace

__all__ = ["chain_results", "finish", "merge_groups"]


_PER_PARTICLE = ("log_weights", "particles", "log_ratio", "log_initial", "start_log_initial",
                 "particle_nonfinite")  # fmt: skip


def merge_groups(outs, num_particles):
    """One output from the outputs of particle groups (same betas, same step sizes), the
    padding beyond ``num_particles`` dropped (its groups' figures never counted it)."""
    if len(outs) == 1:
        return outs[0]._replace(**{f: getattr(outs[0], f)[:num_particles] for f in _PER_PARTICLE})
    size = outs[0].log_weights.shape[0]
    sizes = np.clip(num_particles - size * np.arange(len(outs)), 0, size).astype(float)
    share = sizes / sizes.sum()
    # per-bin log Ẑ and ESS of the whole population from each group's: with a_g = log Σ w_g,
    # Σw = Σ_g e^{a_g} and Σw² = Σ_g e^{2 a_g} / ESS_g
    log_sum = np.stack([np.asarray(o.log_z) for o in outs]) + np.log(sizes)[:, None]
    ess = np.stack([np.asarray(o.ess) for o in outs])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_sq = np.where(ess > 0, 2 * log_sum - np.log(ess), -np.inf)
        total = np.logaddexp.reduce(log_sum, axis=0)
        merged_ess = np.exp(2 * total - np.logaddexp.reduce(log_sq, axis=0))
    grads = np.stack([np.asarray(o.gradients) for o in outs])

    def joined(field):
        return np.concatenate([np.asarray(getattr(o, field)) for o in outs])[:num_particles]

    return outs[0]._replace(
        **{f: joined(f) for f in _PER_PARTICLE},
        initial_nonfinite=sum(int(o.initial_nonfinite) for o in outs),
        num_nonfinite=sum(int(o.num_nonfinite) for o in outs),
        acceptance=np.tensordot(share, np.stack([np.asarray(o.acceptance) for o in outs]), 1),
        ess=np.where(np.isfinite(merged_ess), merged_ess, 0.0),
        log_z=total - np.log(sizes.sum()),
        gradients=np.array([share @ grads[:, 0], grads[:, 1].max(), share @ grads[:, 2]]),
    )


def finish(out, num_steps, num_bins):
    """Host-side: the scan's bins of ``BIN_STEPS`` temperatures merged into ``num_bins`` near-
    equal groups (means weighted by temperatures; the ESS, log Ẑ and β at a group's end), the
    measured scale's rows likewise, the per-temperature records cut to N."""
    out = type(out)(*(None if v is None else np.asarray(v) for v in out))
    count = out.bin_count
    used = int(np.sum(count > 0))
    groups = min(int(num_bins), used)
    ends = (np.arange(1, groups + 1) * used) // groups - 1
    weights = count.astype(float)
    merged = {
        k: _grouped(getattr(out, k) * weights, count, num_bins) for k in ("acceptance", "step_size")
    }
    for k in ("ess", "log_z", "bin_beta"):
        merged[k] = getattr(out, k)[ends]
    for k in ("log_steps", "log_ratio_sd"):
        if getattr(out, k) is not None:
            merged[k] = getattr(out, k)[:num_steps]
    merged["scale_betas"] = _grouped(out.scale_betas, out.scale_count, num_bins)
    merged["log_scale"] = _grouped(out.log_scale, out.scale_count, num_bins)
    return out._replace(bin_count=None, scale_count=None, **merged)


def _grouped(sums, counts, num_bins):
    """Rows of sums over ``counts`` temperatures each (0: an empty row) merged into at most
    ``num_bins`` near-equal groups of consecutive rows: each group's mean."""
    rows = counts > 0
    n = int(rows.sum())
    groups = max(min(int(num_bins), n), 1)
    at = (np.arange(groups) * n) // groups
    total = np.add.reduceat(counts[rows].astype(float), at)
    merged = np.add.reduceat(sums[rows], at, axis=0)
    return merged / total.reshape(-1, *[1] * (merged.ndim - 1))


def chain_results(out, reverse, target, betas, settings, num_chains, wall):
    """One :class:`AISResult` per chain from the main run's outputs (chain c: particles
    c·P … (c+1)·P − 1), each with its own checks; the trace is the whole population's."""
    trace = AnnealingTrace(
        beta=np.asarray(out.bin_beta),
        acceptance_rate=np.asarray(out.acceptance),
        step_size=np.asarray(out.step_size),
        ess=np.asarray(out.ess),
        log_z=np.asarray(out.log_z) + target.log_z_initial,
    )
    num_particles = len(out.log_weights) // num_chains
    results = []
    for c in range(num_chains):
        part = slice(c * num_particles, (c + 1) * num_particles)
        results.append(AISResult.from_log_weights(
            np.asarray(out.log_weights)[part],
            particles=np.asarray(out.particles)[part],
            final_log_ratio=np.asarray(out.log_ratio)[part],
            outside=diagnostics.outside_fraction(
                np.asarray(out.start_log_initial)[part], np.asarray(out.log_initial)[part]
            ),
            betas=betas,
            trace=trace,
            particle_nonfinite=np.asarray(out.particle_nonfinite)[part],
            log_z_initial=target.log_z_initial,
            settings=settings.replace(chain=c) if num_chains > 1 else settings,
            wall_time=wall / num_chains,
            reverse_log_weights=None if reverse is None else np.asarray(reverse.log_weights),
        ))  # fmt: skip
    return results
