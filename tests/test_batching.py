"""Estimates over many data sets of one design, side by side: their anneals run as vmapped
calls over the data sets, and each estimate is the one it would be on its own."""

import threading

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from ppl_hais.adapters import numpyro as phn
from ppl_hais.annealing import batching
from ppl_hais.workflow.datasets import estimate_all

N, TAU = 10, 1.5
FIXED = dict(num_steps=100, num_particles=128)  # one run of each estimate, its checks kept


def null_mean(y=None):
    with numpyro.plate("n", N):
        numpyro.sample("y", dist.Normal(0.0, 1.0), obs=y)


def normal_mean(y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, TAU))
    with numpyro.plate("n", N):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def wide_mean(y=None):  # a second structure: rounds hold requests of two programs
    mu = numpyro.sample("mu", dist.Normal(0.0, 3.0))
    scale = numpyro.sample("scale", dist.HalfNormal(2.0))
    with numpyro.plate("n", N):
        numpyro.sample("y", dist.Normal(mu, scale), obs=y)


def _exact(y):
    """log p(y | normal_mean) in closed form."""
    n, s, ss = y.shape[-1], y.sum(-1), (y**2).sum(-1)
    post_prec = 1 / TAU**2 + n
    return (-0.5 * n * np.log(2 * np.pi) - 0.5 * np.log(TAU**2 * post_prec)
            - 0.5 * (ss - s**2 / post_prec))  # fmt: skip


def _calibrate(batch_size, models=None, num=6, key=5):
    models = models or {"H0": null_mean, "H1": normal_mean}
    return phn.calibrate_bayes_factors(jax.random.key(key), models, num_datasets=num,
                                       observed=["y"], options=FIXED, progress_bar=False,
                                       batch_size=batch_size)  # fmt: skip


def test_side_by_side_is_each_estimate_alone_and_exact():
    """Six data sets × two models, side by side and one after another: the same estimates
    (to floating-point rounding), each within 4 SE + 0.02 of the exact evidence; and a batched
    anneal really ran several data sets in one call."""
    calls = []
    real = batching._call

    def counted(program_key, until, width, part):
        calls.append((width, len(part)))
        return real(program_key, until, width, part)

    alone = _calibrate(batch_size=1)
    batching._call = counted
    try:
        together = _calibrate(batch_size=6)
    finally:
        batching._call = real
    assert max(n for _, n in calls) > 1  # several data sets' groups in one vmapped call
    np.testing.assert_allclose(together.log_evidence, alone.log_evidence, rtol=0, atol=1e-8)
    np.testing.assert_allclose(together.log_evidence_se, alone.log_evidence_se, atol=1e-8)
    assert (together.checks == alone.checks).all()
    exact = _exact(np.asarray(together.datasets["y"]))
    err = np.abs(together.log_evidence[:, 1] - exact)
    assert np.all(err <= 4 * together.log_evidence_se[:, 1] + 0.02), err


@pytest.mark.filterwarnings("ignore::UserWarning")  # five data sets: calibration is not the point
def test_two_structures_side_by_side_repeat_exactly():
    """Models of two structures (and a point null) in the same rounds: a second calibration
    with the same key gives the same figures to the last digit, whatever the threads' timing."""
    models = {"H0": null_mean, "H1": normal_mean, "H2": wide_mean}
    first, second = _calibrate(4, models, num=5), _calibrate(4, models, num=5)
    np.testing.assert_array_equal(first.log_evidence, second.log_evidence)
    np.testing.assert_array_equal(first.log_evidence_se, second.log_evidence_se)


def test_an_estimate_that_raises_stops_the_others_without_a_hang():
    """An unexpected error in one estimate reaches the caller; the estimates beside it finish
    their current one and stop (no member waits for a round that never comes)."""

    def fit(key, data):
        if float(data["y"][0]) == 2.0:
            raise RuntimeError("boom")
        hais = phn.HAIS(normal_mean, FIXED, progress_bar=False)
        hais.run(key, y=data["y"])
        return hais.evidence.log_z, 0.0, "", 0

    data = {"y": np.zeros((5, N))}
    data["y"][3, 0] = 2.0
    outcome = []

    def call():
        try:
            estimate_all(jax.random.key(0), ["H1"], data, {"H1": fit}, batch_size=3,
                         progress_bar=False)  # fmt: skip
        except RuntimeError as err:
            outcome.append(str(err))

    worker = threading.Thread(target=call)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive() and outcome == ["boom"]


def test_a_failed_estimate_is_kept_and_bad_sizes_are_refused():
    def fit(key, data):
        if data["y"][0] > 0:
            raise ValueError("no mode")
        return 1.0, 0.1, "", 5

    out = estimate_all(jax.random.key(0), ["M"], {"y": np.array([[0.0], [1.0]])}, {"M": fit},
                       progress_bar=False)  # fmt: skip
    assert out.log_z[0, 0] == 1.0 and np.isnan(out.log_z[1, 0])
    assert out.checks[1, 0] == "failed (no mode)" and out.log_z_se[1, 0] == np.inf
    for bad in (0, 2.5, "4"):
        with pytest.raises(ValueError, match="batch_size must be a whole number"):
            estimate_all(None, ["M"], {"y": np.zeros((2, 1))}, {"M": fit}, batch_size=bad)


def test_widths_are_few_and_fill_the_threads():
    assert batching.widths(3, threads=4) == [1, 1, 1]
    assert batching.widths(10, threads=4) == [4, 4, 4]
    assert batching.widths(64, threads=4) == [16] * 4
    assert batching.widths(5, threads=1) == [4, 4]
    assert {w for n in range(1, 300) for w in batching.widths(n, 4)} <= {1, 4, batching.WIDEST}


def test_one_programs_runs_over_arrays_of_other_shapes_run_in_calls_of_their_own():
    """Four estimates whose starts are Gaussian mixtures of 2 and 3 components (a Laplace fit
    keeps one per mode it finds, so two data sets of one design can differ so) share their
    compiled program but not their arrays' shapes: side by side, each shape runs in calls of
    its own (stacked into one call of 4, the arrays raised "all input arrays must have the same
    shape") and each estimate is what it is alone, within 4 SE + 0.02 of the exact log Z = 0."""
    import jax.numpy as jnp

    import ppl_hais as ph

    def log_density(z):  # one function: the estimates share their program
        return -0.5 * jnp.sum(z * z) - jnp.log(2 * jnp.pi)

    def estimate(seed, k):
        means = np.linspace(-1.0, 1.0, k)[:, None] * np.ones((k, 2))
        start = ph.GaussianMixture(means, np.tile(1.5 * np.eye(2), (k, 1, 1)), np.ones(k))
        target = ph.AnnealingTarget(log_density, start)
        return ph.hais(jax.random.key(seed), target, num_particles=64, num_steps=60,
                       progress_bar=False)  # fmt: skip

    runs = [(0, 2), (1, 3), (2, 2), (3, 3)]
    alone = {seed: estimate(seed, k).log_z for seed, k in runs}
    batch, side, errors = batching.Batch(len(runs)), {}, []

    def member(seed, k):
        try:
            with batch.member():
                side[seed] = estimate(seed, k)
        except Exception as err:  # noqa: BLE001 - the test reports it below
            errors.append(err)

    threads = [threading.Thread(target=member, args=run) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and set(side) == set(alone)
    for seed, res in side.items():
        assert res.log_z == pytest.approx(alone[seed], abs=1e-8)
        assert abs(res.log_z) < 4 * res.log_z_se + 0.02
