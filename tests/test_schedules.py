import numpy as np
import pytest

import ppl_hais as ph


@pytest.mark.parametrize("name", ["linear", "sigmoid", "geometric"])
def test_named_schedules(name):
    b = ph.make_schedule(name, 50)
    assert b.shape == (51,) and b[0] == 0 and b[-1] == 1 and np.all(np.diff(b) > 0)


def test_linear_is_the_seeds():
    np.testing.assert_allclose(ph.linear_schedule(4), [0, 0.25, 0.5, 0.75, 1])


@pytest.mark.parametrize(
    "bad,msg",
    [
        ([0.1, 1.0], "start at beta=0"),
        ([0, 0.5, 0.4, 1], "non-decreasing"),
        ([0, 0.5], "end at beta=1"),
    ],
)
def test_bad_schedules_are_refused(bad, msg):
    with pytest.raises(ValueError, match=msg):
        ph.make_schedule(bad, None)


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown schedule"):
        ph.make_schedule("cosine", 10)


def test_adaptive_schedule_has_equal_thermodynamic_length():
    # sd_β(log L) = 1 / (0.01 + β): the length ∫ sd dβ is log((0.01 + β) / 0.01), so equal
    # steps in length are equal steps in log(0.01 + β)
    ref = np.linspace(0.0, 1.0, 20001)
    b = ph.adaptive_schedule(ref, 1.0 / (0.01 + ref), 10)
    expected = 0.01 * (101.0 ** np.linspace(0, 1, 11)) - 0.01
    # the floor of 1e-3 × the mean spread (so no stretch gets zero steps) moves them < 0.3%
    np.testing.assert_allclose(b, expected, rtol=3e-3, atol=1e-6)
    assert b[0] == 0 and b[-1] == 1 and np.all(np.diff(b) > 0)


def test_adaptive_schedule_spreads_steps_where_the_spread_is_zero():
    ref = np.linspace(0.0, 1.0, 101)
    spread = np.where(ref < 0.5, 1.0, 0.0)  # a likelihood that stops changing at β = 0.5
    b = ph.adaptive_schedule(ref, spread, 100)
    assert np.all(np.diff(b) >= 0) and b[-1] == 1
    assert np.sum(b <= 0.5) > 90  # nearly all steps where log L still varies


def test_adaptive_schedule_checks_its_input():
    with pytest.raises(ValueError, match="same length"):
        ph.adaptive_schedule(np.linspace(0, 1, 5), np.ones(4), 10)
    with pytest.raises(ValueError, match="increase from 0 to 1"):
        ph.adaptive_schedule(np.linspace(0.1, 1, 5), np.ones(5), 10)
