"""Pareto k̂ (ppl_hais.stats.pareto): the same number as ArviZ's PSIS at ArviZ's own tail length, on
both ArviZ generations, and the right shape on weights whose tail is known."""

import math

import numpy as np
import pytest
from scipy import stats

from ppl_hais.checks import diagnostics
from ppl_hais.stats import weights
from ppl_hais.stats.pareto import tail_length, tail_shape


def _weights(kind, size, seed):
    rng = np.random.default_rng(seed)
    if kind == "lognormal":
        return rng.normal(0.0, 1.5, size)
    return np.log(rng.pareto(1 / kind, size) + 1)  # a Pareto tail of shape k = kind


def _arviz_khat(lw):
    """ArviZ's k̂ and the tail length it used."""
    try:
        from arviz_stats.base import array_stats
    except ImportError:  # ArviZ 0.x
        import arviz as az

        return float(az.psislw(lw)[1]), math.ceil(min(lw.size / 5, 3 * math.sqrt(lw.size)))
    # arviz_stats smooths the negated input (LOO's log likelihood); its tail is ours
    return float(array_stats.psislw(-lw)[1]), tail_length(lw.size)


@pytest.mark.parametrize("kind", ["lognormal", 0.2, 0.6, 0.95])
@pytest.mark.parametrize("size", [100, 512, 4000])
def test_khat_is_arvizs_at_arvizs_tail_length(kind, size):
    lw = _weights(kind, size, seed=size)
    theirs, length = _arviz_khat(lw)
    assert tail_shape(lw, length) == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize("k", [0.2, 0.5, 0.9])
def test_khat_recovers_a_known_tail(k):
    # 4000 weights: a tail of 189; the shape's MLE has sd (1 + k)/√189 ≈ 0.09–0.14, and the
    # prior's 10 pseudo-observations at ½ move it by at most 0.02
    lw = _weights(k, 4000, seed=int(100 * k))
    sd = (1 + k) / math.sqrt(tail_length(4000))
    assert abs(diagnostics.pareto_khat(lw) - k) < 4 * sd + 0.02


def test_khat_tail_length_is_arviz_1s():
    assert tail_length(512) == 67  # ⌊3√512⌋
    assert tail_length(100) == 20  # ⌊100/5⌋
    assert tail_length(4000) == 189


def test_rank_correlation_matches_scipy_with_ties():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 6, 300).astype(float)  # many ties
    b = a + rng.normal(0.0, 2.0, 300)
    ours = diagnostics.lag_correlation(a, b)
    assert ours == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)
    assert np.array_equal(weights.ranks(a), stats.rankdata(a))
