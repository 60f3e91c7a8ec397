"""A rung's runs topped up with particles (ppl_hais.workflow.runs) and
runs pooled into one result."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy.special import logsumexp

from ppl_hais.diagnostics import lag_correlation
from ppl_hais.results.result import AISResult, AnnealingTrace
from ppl_hais.workflow.runs import MAX_RUNS, PRECISE_SE, pooled_checks, repeats_for, topped_up


def _run(rng, num=256, heavy=False, log_z_initial=0.5, steps=10):
    """A run whose weights are Gamma(½) (light tails; SE ≈ √(2/num)), or log-normal with a
    log SD of 3 (heavy: k̂ fails)."""
    lw = rng.normal(0.0, 3.0, num) if heavy else np.log(rng.gamma(0.5, size=num))
    trace = AnnealingTrace(np.linspace(0.1, 1, 3), np.full(3, 0.8), np.full(3, 0.1),
                           np.full(3, num / 2.0), rng.normal(size=3))  # fmt: skip
    return AISResult.from_log_weights(
        lw, particles=rng.normal(size=(num, 2)), betas=np.linspace(0, 1, steps + 1), trace=trace,
        particle_nonfinite=np.zeros(num, int), log_z_initial=log_z_initial,
        settings=dict(num_particles=num, num_steps=steps, gradients_per_particle=float(steps)),
        final_log_ratio=lw + rng.normal(0, 50.0, num), outside=rng.uniform(0, 0.05),
        wall_time=1.0,
    )  # fmt: skip


def test_pooled_runs_are_one_run_of_all_their_particles():
    rng = np.random.default_rng(0)
    runs = [_run(rng) for _ in range(3)]
    both = AISResult.pooled(runs)
    lw = np.concatenate([r.log_weights for r in runs])
    assert both.num_particles == 768 and both.settings["num_particles"] == 768
    assert both.settings["num_runs"] == 3 and both.wall_time == 3.0
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
    assert AISResult.pooled([both, _run(rng)]).settings["num_runs"] == 4


def test_repeats_for_aims_at_the_precise_se_within_the_budget():
    assert repeats_for(PRECISE_SE, cost=1, room=100) == 0
    assert repeats_for(float("inf"), cost=1, room=100) == 0  # no SE to aim from
    assert repeats_for(0.08, cost=1, room=100) == 2  # 0.08² / 0.05² = 2.56 runs → 3
    assert repeats_for(0.06, runs=3, cost=1, room=100) == 2  # 3 × 1.44 = 4.32 → 5
    assert repeats_for(1.0, cost=1, room=100) == MAX_RUNS - 1
    assert repeats_for(0.08, cost=10, room=15) == 1 and repeats_for(0.08, cost=10, room=9) == 0


def test_topped_up_reaches_the_precise_se_with_fresh_keys_and_counts_its_gradients():
    rng = np.random.default_rng(1)
    keys = []

    def run(key):
        seed = [int(x) for x in np.asarray(jax.random.key_data(key)).ravel()]
        keys.append(tuple(seed))
        return [_run(np.random.default_rng(seed), num=256)]

    first = [_run(rng, num=256)]
    se = first[0].log_z_se
    assert not first[0].checks and se > PRECISE_SE  # about √(2/256) = 0.088
    out, spent = topped_up(jax.random.key(3), first, run, room=1e9)
    assert PRECISE_SE * 0.8 < out[0].log_z_se <= PRECISE_SE
    runs = out[0].settings["num_runs"]
    assert runs - 1 == len(keys) == spent // 2560 and len(set(keys)) == len(keys)
    assert runs >= math.ceil((se / PRECISE_SE) ** 2) and out[0].num_particles == 256 * runs
    # the budget stops it: room for one more run
    out, spent = topped_up(jax.random.key(3), first, run, room=2560)
    assert out[0].settings["num_runs"] == 2 and spent == 2560
    # weights that fail a check are not topped up (more temperatures, not particles)
    heavy = [_run(rng, num=256, heavy=True)]
    assert pooled_checks(heavy)
    assert topped_up(jax.random.key(3), heavy, run, room=1e9) == (heavy, 0)
