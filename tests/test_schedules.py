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
