"""A rung's runs topped up with particles (ppl_hais.workflow.runs) and
runs pooled into one result."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy.special import logsumexp

from ppl_hais.checks.diagnostics import lag_correlation
from ppl_hais.checks.ladder import FIRST_NUM_STEPS
from ppl_hais.results.result import AISResult, AnnealingTrace
from ppl_hais.results.settings import RunSettings
from ppl_hais.workflow.runs import (
    MAX_PARTICLES,
    MOST_SE,
    PRECISE_SE,
    more_particles,
    pooled_checks,
    precise_se,
    topped_up,
)


def _run(rng, num=256, heavy=False, log_z_initial=0.5, steps=250):
    """A run whose weights are Gamma(½) (light tails; SE ≈ √(2/num)), or log-normal with a
    log SD of 3 (heavy: k̂ fails)."""
    lw = rng.normal(0.0, 3.0, num) if heavy else np.log(rng.gamma(0.5, size=num))
    trace = AnnealingTrace(np.linspace(0.1, 1, 3), np.full(3, 0.8), np.full(3, 0.1),
                           np.full(3, num / 2.0), rng.normal(size=3))  # fmt: skip
    return AISResult.from_log_weights(
        lw, particles=rng.normal(size=(num, 2)), betas=np.linspace(0, 1, steps + 1), trace=trace,
        particle_nonfinite=np.zeros(num, int), log_z_initial=log_z_initial,
        settings=RunSettings(num_particles=num, num_steps=steps,
                             gradients_per_particle=float(steps)),
        final_log_ratio=lw + rng.normal(0, 50.0, num), outside=rng.uniform(0, 0.05),
        wall_time=1.0,
    )  # fmt: skip


def test_pooled_runs_are_one_run_of_all_their_particles():
    rng = np.random.default_rng(0)
    runs = [_run(rng) for _ in range(3)]
    both = AISResult.pooled(runs)
    lw = np.concatenate([r.log_weights for r in runs])
    assert both.num_particles == 768 and both.settings.num_particles == 768
    assert both.settings.num_runs == 3 and both.wall_time == 3.0
    assert both.log_z == pytest.approx(logsumexp(lw) - math.log(768) + 0.5, abs=1e-12)
    assert both.log_z == pytest.approx(logsumexp([r.log_z for r in runs]) - math.log(3))
    assert both.log_z_se < min(r.log_z_se for r in runs)
    flr = np.concatenate([r.final_log_ratio for r in runs])
    assert both.lag == pytest.approx(lag_correlation(lw, flr))
    assert both.outside_initial == pytest.approx(np.mean([r.outside_initial for r in runs]))
    assert np.array_equal(both.particles, np.concatenate([r.particles for r in runs]))
    assert np.allclose(both.trace.ess, 3 * 128.0)
    want = logsumexp([r.trace.log_z for r in runs], axis=0) - math.log(3)
    assert np.allclose(both.trace.log_z, want)
    # pooling a pooled result with one more run counts every run
    assert AISResult.pooled([both, _run(rng)]).settings.num_runs == 4


def test_pooled_runs_of_different_sizes_weigh_each_particle_once():
    rng = np.random.default_rng(2)
    big, small = _run(rng, num=256), _run(rng, num=64)
    both = AISResult.pooled([big, small])
    lw = np.concatenate([big.log_weights, small.log_weights])
    assert both.log_z == pytest.approx(logsumexp(lw) - math.log(320) + 0.5, abs=1e-12)
    want = logsumexp([big.trace.log_z, small.trace.log_z], axis=0, b=[[0.8], [0.2]])
    assert np.allclose(both.trace.log_z, want)
    out = 0.8 * big.outside_initial + 0.2 * small.outside_initial
    assert both.outside_initial == pytest.approx(out)
    # the call's particles per chain: the first run's, however many top-ups follow
    assert both.settings.run_particles == 256
    assert AISResult.pooled([both, _run(rng, num=128)]).settings.run_particles == 256


def test_more_particles_aims_at_the_precise_se_in_whole_units_within_the_budget():
    assert more_particles(PRECISE_SE, 512, unit=128, cost=1, room=1e9) == 0
    assert more_particles(float("inf"), 512, unit=128, cost=1, room=1e9) == 0  # no SE to aim from
    # 512 × (0.026² / 0.025² − 1) = 42 particles: one unit, not a second run of 512
    assert PRECISE_SE == 0.025
    assert more_particles(0.026, 512, unit=128, cost=1, room=1e9) == 128
    assert more_particles(0.04, 512, unit=128, cost=1, room=1e9) == 896  # 799 → 7 units
    assert more_particles(0.04, 512, unit=512, cost=1, room=1e9) == 1024  # whole runs
    assert more_particles(1.0, 512, unit=128, cost=1, room=1e9, most=3584) == 3584
    assert more_particles(0.04, 512, unit=128, cost=10, room=2600) == 256  # the budget
    assert more_particles(0.04, 512, unit=128, cost=10, room=1279) == 0


def test_topped_up_reaches_the_precise_se_with_fresh_keys_and_counts_its_gradients():
    rng = np.random.default_rng(1)
    keys, sizes = [], []

    def run(key, num_particles):
        seed = [int(x) for x in np.asarray(jax.random.key_data(key)).ravel()]
        keys.append(tuple(seed))
        sizes.append(num_particles)
        return [_run(np.random.default_rng(seed), num=num_particles)]

    first = [_run(rng, num=512)]
    se = first[0].log_z_se
    # about √(2/512) = 0.063: a top-up within MAX_PARTICLES × the run reaches PRECISE_SE
    assert not first[0].checks and PRECISE_SE < se < PRECISE_SE * MAX_PARTICLES**0.5
    out, spent = topped_up(jax.random.key(3), first, run, room=1e9, unit=64)
    assert PRECISE_SE * 0.8 < out[0].log_z_se <= PRECISE_SE
    runs = out[0].settings.num_runs
    assert runs - 1 == len(keys) == len(sizes) and len(set(keys)) == len(keys)
    assert all(n % 64 == 0 for n in sizes) and spent == 250 * sum(sizes)
    assert out[0].num_particles == 512 + sum(sizes) >= 512 * (se / PRECISE_SE) ** 2 * 0.9
    assert out[0].settings.run_particles == 512
    # the budget stops it: room for 128 more particles
    keys.clear(), sizes.clear()
    out, spent = topped_up(jax.random.key(3), first, run, room=128 * 250, unit=64)
    assert sizes == [128] and out[0].num_particles == 640 and spent == 128 * 250
    # at most MAX_PARTICLES times the run's particles however large the SE
    sizes.clear()
    small = [_run(rng, num=64)]  # SE about √(2/64) = 0.18: 0.18² / 0.025² = 51 × the particles
    assert not pooled_checks(small)
    out, _ = topped_up(jax.random.key(3), small, run, room=1e9, unit=64)
    assert out[0].num_particles == MAX_PARTICLES * 64 and sizes
    # weights that fail a check are not topped up (more temperatures, not particles)
    heavy = [_run(rng, num=256, heavy=True)]
    assert pooled_checks(heavy)
    assert topped_up(jax.random.key(3), heavy, run, room=1e9, unit=64) == (heavy, 0)


def test_a_later_rung_is_topped_up_to_an_se_that_grows_as_the_root_of_its_temperatures():
    """A particle of a rung of 1000 temperatures costs 4× one of the first rung's 250: its
    target SE is twice as large, so that a top-up from a given SE costs the same gradients; a
    rung whose bias check is due is topped up only to ``MOST_SE``."""
    assert precise_se(FIRST_NUM_STEPS) == PRECISE_SE
    assert precise_se(4 * FIRST_NUM_STEPS) == pytest.approx(2 * PRECISE_SE) == MOST_SE
    assert precise_se(64 * FIRST_NUM_STEPS) == MOST_SE
    for steps in (FIRST_NUM_STEPS, 4 * FIRST_NUM_STEPS):
        more = more_particles(0.1, 512, unit=1, cost=steps, room=1e12, target=precise_se(steps))
        assert more * steps == pytest.approx(512 * FIRST_NUM_STEPS * (0.1**2 / PRECISE_SE**2)
                                             - 512 * steps, rel=1e-3)  # fmt: skip
    rng = np.random.default_rng(4)
    first = [_run(rng, num=512, steps=1000)]  # SE about √(2/512) = 0.063
    assert MOST_SE < first[0].log_z_se < 2 * MOST_SE
    out, spent = topped_up(jax.random.key(3), first, lambda key, num_particles: [
        _run(np.random.default_rng(num_particles), num=num_particles, steps=1000)],
        room=1e12, unit=64)  # fmt: skip
    assert spent > 0 and 0.8 * MOST_SE < out[0].log_z_se <= MOST_SE  # not on to 0.025
    # a first rung whose bias check is due may move on: topped up to what the check needs
    first = [_run(rng, num=256)]  # SE about √(2/256) = 0.088
    assert first[0].log_z_se > MOST_SE and first[0].settings.num_steps == FIRST_NUM_STEPS
    out, spent = topped_up(jax.random.key(3), first, lambda key, num_particles: [
        _run(np.random.default_rng(num_particles), num=num_particles)], room=1e12, unit=64,
        final=lambda pooled: False)  # fmt: skip
    assert spent > 0 and 0.8 * MOST_SE < out[0].log_z_se <= MOST_SE


def test_a_check_that_drew_more_predicts_the_next_check_at_its_usual_draws():
    """The reserve for the next rung's bias check reads the last check's MCMC cost per draw: a
    check that drew four times the chains (in doubt by its noise, ``bias.EXTEND``) and paid
    four times the MCMC predicts what a check of the usual 256 draws after it costs."""
    from ppl_hais.workflow.budget import Spent, bias_reserve

    mcmc, gps = 150_000, 1.0
    usual = Spent(mcmc + 256 * 250, 256, 250)
    more = Spent(4 * mcmc + 1024 * 250, 1024, 250)
    assert bias_reserve(1000, gps, more) == bias_reserve(1000, gps, usual)
    assert bias_reserve(1000, gps, usual) == 256 * 1000 + mcmc * 250 // 200
