"""Energy-based models with binary states: restricted Boltzmann machines and their partition
functions by AIS with Gibbs transitions (Salakhutdinov & Murray 2008, [SM08] §3).

A binary RBM with weights W (visible × hidden), visible bias b and hidden bias c has energy
E(v, h) = −vᵀWh − bᵀv − cᵀh; summing the hidden units out gives the unnormalized marginal
log p*(v) = bᵀv + Σ_j softplus(c_j + (vᵀW)_j) = −F(v), F the free energy.

To anneal from RBM A to RBM B, [SM08] eq. 13–17 keeps both hidden layers: the intermediate
distribution at β has energy (1 − β)·E_A(v, h_A) + β·E_B(v, h_B), so both hidden layers sum out
in closed form (eq. 12),

    log p*_β(v) = (1 − β)·b_Aᵀv + Σ_j softplus((1 − β)(c_A + vᵀW_A)_j)
                + β·b_Bᵀv + Σ_j softplus(β(c_B + vᵀW_B)_j),

and block Gibbs (h_A, h_B given v; then v given both) leaves it invariant. From the base-rate
model (independent visible units, no hidden units, exactly normalized and sampled) this gives
log Z of any RBM; between two RBMs it gives log Z_B − log Z_A. Each temperature costs two
matrix products of the particles with W_B (one per Gibbs half-step; the weight increment reuses
the first). One ``lax.scan`` over bins of temperatures, particles batched, one compile per
shape; the result is an :class:`~ppl_hais.AISResult` with the same checks and warnings as every
estimator.

>>> import jax, numpy as np, ppl_hais as ph
>>> rbm = ph.research.energy.RBM(np.full((6, 3), 0.3), np.zeros(6), np.zeros(3))
>>> res = ph.research.energy.log_partition(jax.random.key(0), rbm, num_particles=200, num_steps=300)
>>> bool(abs(res.log_z - ph.research.energy.log_partition_exact(rbm)) < 4 * res.log_z_se)
True
"""


from .ais import dbn_lower_bound, log_partition, log_partition_ratio, seed_002_schedule
from .ising import Ising, fit_ising_ml, fit_mpf, ising_log_partition, ising_log_partition_exact
from .rbm import (
    RBM,
    base_rate,
    fit_cd,
    fit_mpf_rbm,
    log_partition_exact,
    mean_log_prob,
    mpf_objective,
)

__all__ = [
    "RBM",
    "Ising",
    "base_rate",
    "dbn_lower_bound",
    "fit_ising_ml",
    "fit_mpf",
    "fit_mpf_rbm",
    "mpf_objective",
    "ising_log_partition",
    "ising_log_partition_exact",
    "fit_cd",
    "log_partition",
    "log_partition_exact",
    "log_partition_ratio",
    "mean_log_prob",
    "seed_002_schedule",
]
