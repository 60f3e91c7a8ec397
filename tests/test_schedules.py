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


def test_the_pilots_spread_follows_the_bulk_of_the_particles():
    """The spread that spaces the adaptive schedule leaves out the particles farthest from the
    median (1 in 32, at least one): one log ratio far in a heavy tail among 64 moves it by
    little, where it multiplies the plain standard deviation; values that are not finite are
    not counted; with nothing to leave out it is the plain standard deviation of the rest."""
    import jax.numpy as jnp

    from ppl_hais.annealing.scan import _trimmed_std

    bulk = np.random.default_rng(0).normal(size=63)
    tail = np.append(bulk, 1000.0)
    assert float(_trimmed_std(jnp.asarray(tail))) == pytest.approx(np.std(bulk), rel=0.1)
    assert np.std(tail) > 50 * np.std(bulk)
    with_nan = np.concatenate([tail, [np.nan, -np.inf]])
    assert float(_trimmed_std(jnp.asarray(with_nan))) == float(_trimmed_std(jnp.asarray(tail)))
    far = np.abs(bulk - np.median(bulk)).argmax()
    assert float(_trimmed_std(jnp.asarray(bulk))) == pytest.approx(np.std(np.delete(bulk, far)))
