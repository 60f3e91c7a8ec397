"""Long statistical runs: `make test-slow` (pytest -m slow). Not in the default run.

Coverage: over 20 seeds, how often the reported ±2 SE interval covers the exact log Z, and
that long runs (N = 10⁵) stay unbiased — the run length at which the float32-rounding bug of
the fast normals froze particles (see tests/test_random.py).
"""

import warnings

import jax
import numpy as np
import pytest

import ppl_hais as ph
from ppl_hais.model import validation as ex

pytestmark = pytest.mark.slow


def test_long_run_is_unbiased():
    case = ex.product_of_experts("laplace", dim=36)
    errs, ses = [], []
    for seed in range(3):
        r = ph.hais(
            jax.random.key(seed),
            case.target,
            num_particles=200,
            num_steps=100_000,
            step_size=0.2,
            progress_bar=False,
        )
        errs.append(r.log_z - case.log_z)
        ses.append(r.log_z_se)
        assert r.acceptance.mean() > 0.9
    # the mean of 3 independent errors: SE = sqrt(Σ se²)/3; 4-sigma bound
    assert abs(np.mean(errs)) < 4 * np.sqrt(np.sum(np.square(ses))) / 3


@pytest.mark.parametrize(
    "expert,lam,scale,steps",
    [
        ("laplace", None, 1.0, 10_000),
        pytest.param(
            "student",
            np.linspace(1.0, 3.0, 36),
            2.0,
            30_000,
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "known open problem, measured 2026-11-22: ±2 SE covers the exact log Z in "
                    "35% of 20 seeds; the delta-method SE misses the downward bias from heavy "
                    "tails the anneal does not reach. Remove this mark when the error bar "
                    "accounts for it."
                ),
            ),
        ),
    ],
)
def test_coverage_over_seeds(expert, lam, scale, steps):
    case = ex.product_of_experts(expert, dim=36, lam=lam, initial_scale=scale)
    covered = []
    for seed in range(20):
        r = ph.hais(
            jax.random.key(100 + seed),
            case.target,
            num_particles=200,
            num_steps=steps,
            progress_bar=False,
        )
        covered.append(abs(r.log_z - case.log_z) < 2 * r.log_z_se)
    rate = np.mean(covered)
    print(f"{expert}: ±2 SE covers the truth in {rate:.0%} of 20 seeds")
    # nominal 95%; with 20 seeds P(≤ 14 covered | 95%) ≈ 3e-4
    assert rate >= 0.75



@pytest.mark.xfail(
    strict=True,
    reason=(
        "known limitation, measured 2026-11-29: a Gamma(0.7) has an infinite density at the "
        "wall z = 0, and reflected leapfrog steps do not enter the region where its gradient "
        "diverges (about 3% of that component's mass lies below z = 0.01). 12 of 20 runs warn; "
        "the other 8 sit 2.0 SE low on average and ±2 SE covers the truth in 3 of them. "
        "Anneal log z instead."
    ),
)
def test_unwarned_runs_cover_the_truth_at_a_singular_wall():
    case = ex.gamma_positive(shape=(2.0, 5.0, 0.7))
    z = []
    for seed in range(20):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ph.EvidenceWarning)
            r = ph.hais(
                jax.random.key(100 + seed),
                case.target,
                num_particles=400,
                num_steps=3000,
                progress_bar=False,
            )
        if not r.checks:
            z.append((r.log_z - case.log_z) / r.log_z_se)
    rate = np.mean(np.abs(z) < 2)
    print(f"Gamma(0.7) at the wall: {20 - len(z)} of 20 runs warned; the unwarned sit "
          f"{np.mean(z):+.1f} SE off on average and ±2 SE covers {rate:.0%} of them")
    assert len(z) >= 5 and rate >= 0.75
