"""What a bridge estimate returns: :class:`BridgeResult`, the estimate with its checks and,
after a cross-check, the forward and reverse anneals beside it.

Example
-------
>>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
>>> draws = np.random.default_rng(0).normal(size=(2, 400, 1))  # exact N(0, 1) draws
>>> res = ph.bridge_sampling(jax.random.key(0), lambda z: -0.5 * jnp.sum(z**2), draws)
>>> type(res).__name__, res.warning, res.num_draws  # the second half of each chain
('BridgeResult', False, 400)
>>> bool(np.isnan(res.bias_gap))  # no cross-check, so no reverse anneal to compare with
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks.record import names
from ..model.observed import ObservedData
from ..model.target import Gaussian
from .checks import CrossCheck, tolerance
from .modes import ModeCheck

__all__ = ["BridgeResult"]


@dataclass(frozen=True, eq=False)
class BridgeResult:
    """The bridge-sampling estimate of log Z and everything needed to judge it.

    Attributes
    ----------
    log_z, log_z_se : float
        The estimate and its standard error (Frühwirth-Schnatter's relative error, counting the
        chains' autocorrelation).
    checks : tuple of str
        The failed trust checks, each raised as an :class:`~ppl_hais.EvidenceWarning`.
    method : str
        ``"normal"``, ``"warp3"`` or ``"student_t"``.
    iterations : (K,) array
        log Ẑ after each step of the fixed-point iteration (the first is the start).
    converged : bool
        Whether the iteration met its tolerance within ``max_iter`` steps.
    ess : float
        The draws' median effective sample size over coordinates (bridge half): N₁,eff.
    min_ess, rhat : float
        The draws' smallest ESS and largest split-R̂ over coordinates (bridge half).
    pareto_k : float
        Pareto k̂ of the proposal's importance weights q/g at its own draws.
    chain_log_z, chain_log_z_se : (C,) arrays
        Each chain's bridge estimate (the shared proposal draws, that chain's draws).
    num_draws, num_proposal : int
        N₁ (posterior draws in the bridge) and N₂ (proposal draws).
    evaluations : int
        Log-density evaluations (no gradients are needed).
    proposal : Gaussian or StudentT
        The fitted proposal (location and scale; warp3 standardizes by them).
    cross_check : CrossCheck or None
        With ``cross_check=True``: the forward and reverse anneals beside the estimate.
    observed_data : ObservedData or None
        The observations the estimate conditions on (a model's bridge; None over a bare
        density): :func:`ppl_hais.compare_evidence` refuses results over different data.
    modes : ModeCheck or None
        From a model's bridge (``mode_search=True``): the modes a Laplace search found, those
        the draws visit, and the nats the others may add (:mod:`ppl_hais.bridge.modes`).
    """

    log_z: float
    log_z_se: float
    checks: tuple
    method: str
    iterations: np.ndarray
    converged: bool
    ess: float
    min_ess: float
    rhat: float
    pareto_k: float
    chain_log_z: np.ndarray
    chain_log_z_se: np.ndarray
    num_draws: int
    num_proposal: int
    evaluations: int
    proposal: Gaussian
    wall_time: float = float("nan")
    cross_check: CrossCheck | None = None
    divergences: int | None = None  # the sampler's divergent transitions among the draws
    modes: ModeCheck | None = None  # the draws against a mode search (bridge_evidence)
    observed_data: ObservedData | None = None  # what it conditions on (a model's bridge)

    @property
    def warning(self) -> bool:
        return bool(self.checks)

    @property
    def log_z_upper(self) -> float:
        """The cross-check's reverse anneal from the draws; NaN without a cross-check."""
        return float("nan") if self.cross_check is None else self.cross_check.log_z_reverse

    @property
    def log_z_lower(self) -> float:
        """The cross-check's forward anneal; NaN without a cross-check."""
        return float("nan") if self.cross_check is None else self.cross_check.log_z_forward

    @property
    def bias_gap(self) -> float:
        """``log_z_upper − log_z`` in nats (NaN without a cross-check)."""
        return self.log_z_upper - self.log_z

    @property
    def shortfall(self) -> float:
        """Nats the estimate may lie too low, by what was checked: the cross-check's forward
        anneal above it beyond their noise (the ``cross_check`` warning) and the unvisited
        modes' share where it exceeds the noise (the ``modes`` warning); 0 where neither
        shows one; NaN where neither ran."""
        stated = []
        if self.cross_check is not None:
            below = self.log_z_lower - self.log_z
            noise = tolerance(self.log_z_se, self.cross_check.log_z_forward_se)
            stated.append(float(below) if below > noise else 0.0)
        if self.modes is not None:
            failed = "modes" in names(self.checks)
            stated.append(self.modes.shortfall if failed else 0.0)
        return max(stated) if stated else float("nan")

    def summary(self) -> str:
        """Plain-text summary: estimate, error bar, the draws' and the proposal's checks."""
        lines = [
            f"log Z = {self.log_z:.4f} ± {self.log_z_se:.4f} (bridge sampling, {self.method}; "
            f"{'converged' if self.converged else 'NOT converged'} in "
            f"{len(self.iterations) - 1} iterations)",
            f"  draws: {self.num_draws} in the bridge, ESS median {self.ess:.0f} / min "
            f"{self.min_ess:.0f}, split-R̂ max {self.rhat:.3f}"
            f"{'' if self.divergences is None else f', {self.divergences} divergent'}; "
            f"proposal: {self.num_proposal} "
            f"draws, Pareto k̂ {self.pareto_k:.2f}",
            "  per chain: "
            + ", ".join(f"{z:.3f} ± {s:.3f}" for z, s in zip(self.chain_log_z,
                                                            self.chain_log_z_se, strict=True)),
            f"  density evaluations: {self.evaluations}  wall time: {self.wall_time:.2f} s",
        ]  # fmt: skip
        cc = self.cross_check
        if cc is not None:
            lines.append(
                f"  cross-check: forward anneal {cc.log_z_forward:.4f} ± {cc.log_z_forward_se:.4f}"
                f" (lower), reverse from the draws {cc.log_z_reverse:.4f} ± "
                f"{cc.log_z_reverse_se:.4f}; {cc.gradients} gradients"
            )
        if self.modes is not None:
            lines.append(f"  mode search: {self.modes.num_modes} mode(s), "
                         f"{self.modes.num_visited} visited by the draws")  # fmt: skip
        lines += [f"  WARNING {c}" for c in self.checks]
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def to_arviz(self):
        """ArviZ output (a DataTree on ArviZ ≥ 1, an InferenceData on 0.x) whose sample_stats
        read as every other evidence estimate here (``log_marginal_likelihood`` per chain and
        its SE, the checks), so :func:`ppl_hais.compare_evidence` takes it."""
        from ..results.arviz import from_bridge

        return from_bridge(self)
