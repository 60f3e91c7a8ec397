"""Bridge sampling: the evidence from posterior draws a user already has.

Given draws θ₁…θ_N from a posterior p(θ | y) ∝ q(θ) = p(y | θ) p(θ) (here: flat unconstrained
vectors, several MCMC chains) and the unnormalized log density log q, the **optimal bridge**
of Meng & Wong (1996) estimates Z = ∫ q from both directions at once: a proposal g (a Gaussian
fitted to the first half of each chain) is sampled N₂ times, the second half of each chain gives
N₁ posterior draws, and Z solves the fixed point (Gronau et al. 2017, eq. 4)

    Z = [1/N₂ Σⱼ q(θ̃ⱼ) / (s₁ q(θ̃ⱼ) + s₂ Z g(θ̃ⱼ))] / [1/N₁ Σᵢ g(θᵢ) / (s₁ q(θᵢ) + s₂ Z g(θᵢ))],

s₁ = N₁,eff / (N₁,eff + N₂) with N₁,eff the draws' median effective sample size (as R's
``bridgesampling``). ``method="warp3"`` (Meng & Schilling 2002) bridges a standard normal to
the posterior standardized by the proposal's location and scale *and symmetrized*
(½[q(μ + Lη) + q(μ − Lη)]·det L): it matches the first three moments, not two, at twice the
density evaluations; ``method="student_t"`` uses a multivariate t (5 degrees of freedom) as
the proposal, for heavy tails.

**Error bar**: the relative mean squared error of Frühwirth-Schnatter (2004, as
``bridgesampling::error_measures``), whose posterior-draw term uses the effective, not the
nominal, number of draws of the chains (:func:`~ppl_hais.stats.estimators.chain_ess`); the SE of
log Ẑ is its square root (delta method). It is the Monte Carlo error given the draws; draws
that never visited part of the posterior (a mode, a funnel's neck) make an estimate that is
off by more than any error bar. Hence the checks, each an :class:`~ppl_hais.EvidenceWarning`
naming its remedy: the draws' ESS and split-R̂, the per-chain estimates' disagreement, the
fixed point's convergence, and, with :func:`ppl_hais.workflow.model_bridge.bridge_evidence`'s
``cross_check=True``, a forward anneal (a stochastic lower bound of log Z that needs no draws)
and a reverse anneal from the draws beside the bridge estimate.

The Pareto k̂ of the proposal's importance weights q/g is reported, not warned on: the
bridge's summands are bounded (by 1/s₁ and 1/s₂), so a proposal with lighter tails than the
posterior does not give it the infinite variance it gives importance sampling (measured,
docs/bridge.md: k̂ up to 0.8 on right answers; the wrong runs with k̂ ≥ 0.7 failed the ESS
check too).

Example
-------
>>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
>>> rng = np.random.default_rng(0)  # "MCMC draws": exact ones from N(1, 0.5²) in 2-D
>>> draws = 1.0 + 0.5 * rng.normal(size=(4, 1000, 2))
>>> log_q = lambda z: -0.5 * jnp.sum(((z - 1.0) / 0.5) ** 2)  # Z = 2π · 0.25
>>> res = ph.bridge_sampling(jax.random.key(0), log_q, draws)
>>> bool(abs(res.log_z - np.log(2 * np.pi * 0.25)) < 4 * res.log_z_se), res.warning
(True, False)
"""

from .checks import CrossCheck
from .result import BridgeResult
from .sampling import MIN_DRAWS, bridge_sampling

__all__ = ["BridgeResult", "CrossCheck", "bridge_sampling", "MIN_DRAWS"]

