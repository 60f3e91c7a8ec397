"""The convergence ladder — 4× the temperatures while a check fails, within a
gradient budget that counts every gradient; the trajectory in the result, ArviZ and a plot;
the remaining gap stated in nats when the budget runs out."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_bias import _funnel, _TargetModel

import ppl_hais as ph
from ppl_hais.checks.ladder import (
    BRIDGE_CLEAR,
    CLEAR_GAP,
    CLEAR_MOVE,
    DEFAULT_BUDGET,
    FIRST_NUM_STEPS,
    FIXED_NUM_STEPS,
    Rung,
    bridge_figures,
    bridge_se,
    cleared_se,
    clears,
    ends,
    needs_local_steps,
    remaining_gap,
    settled,
    shortfall,
    unsizable,
)
from ppl_hais.results import arviz as arviz_out
from ppl_hais.workflow.evidence import evidence
from ppl_hais.workflow.runs import MOST_SE, PRECISE_SE


def _gaussian(dim=3, sd=2.0):
    """N(0, sd²I) unnormalized: log Z = dim·log(sd·√(2π))."""
    return (lambda z: -0.5 * jnp.sum((z / sd) ** 2)), dim * math.log(sd * math.sqrt(2 * math.pi))


def _student(dim=30, df=2.0):
    """A product of Student-t(ν) densities, unnormalized:
    log Z = dim·log(√(νπ)Γ(ν/2)/Γ((ν+1)/2))."""

    def log_density(z):
        return jnp.sum(-(df + 1) / 2 * jnp.log1p(z * z / df))

    log_c = math.lgamma(df / 2) - math.lgamma((df + 1) / 2) + 0.5 * math.log(df * math.pi)
    return log_density, dim * log_c


def test_an_easy_model_takes_one_rung_and_counts_every_gradient():
    """The default (num_steps=None) costs a quarter of the fixed 1000 where the checks pass
    (its pilots survey as for 1000); the gradients counted are the two pilots' (prior and
    Laplace starts), the Laplace fit's, the main run's and, where ``bias_check="auto"`` found
    a reason to run it (a tail in the weights, a lag), the bias check's; and the estimate is
    that of a fixed 250 whose pilots survey as for 1000 (same keys)."""
    f, exact = _gaussian()
    ev = evidence(jax.random.key(0), _TargetModel(f, 3), num_particles=256, progress_bar=False)
    assert len(ev.trajectory) == 1 and ev.trajectory[0].num_steps == 250 == ev.num_steps
    assert FIRST_NUM_STEPS == 250
    assert not ev.checks and abs(ev.log_z - exact) < 4 * ev.log_z_se + 0.01
    main = 256 * 250 + (0 if ev.bias is None else ev.bias.gradients)
    pilots = 2 * 64 * (1000 + 100)  # two candidates, 64 particles, ~1000 βs + 100 warm-up
    assert main + 0.9 * pilots < ev.gradients < main + 1.2 * pilots + 20_000  # + Laplace fit
    assert ev.max_gradients == DEFAULT_BUDGET * 256 * 250 == 40 * 256 * 1000
    fixed = evidence(jax.random.key(0), _TargetModel(f, 3), num_particles=256, num_steps=250,
                     progress_bar=False)  # fmt: skip
    assert fixed.log_z != ev.log_z and fixed.max_gradients is None  # its pilots: 250 βs
    assert abs(fixed.log_z - ev.log_z) < 4 * np.hypot(fixed.log_z_se, ev.log_z_se)
    assert fixed.trajectory[0].gradients == fixed.gradients  # the Laplace fit: counted again
    # ... because a new model object fits it again; the same object reuses it and counts 0
    model = _TargetModel(f, 3)
    a = evidence(jax.random.key(0), model, num_particles=256, num_steps=1000, progress_bar=False)
    b = evidence(jax.random.key(0), model, num_particles=256, num_steps=1000, progress_bar=False)
    assert 0 < a.gradients - b.gradients < 20_000 and b.log_z == a.log_z


def test_a_passing_rung_whose_se_particles_bound_is_topped_up_with_particles():
    """A 10-D Gaussian from the prior with 64 particles: the first rung's weights pass at
    an SE above ``MOST_SE``; the ladder anneals more particles over the same 250
    temperatures with fresh keys (no more temperatures) and pools them, to a weights' SE at
    most ``MOST_SE``, what the bias check then due needs (the call's SE adds half the shortfall
    it states), every particle's gradients counted. A fixed ``num_steps`` makes one run, as it
    says."""
    f, exact = _gaussian(10, 3.0)
    model = _TargetModel(f, 10)
    run = dict(num_particles=64, initial="prior", progress_bar=False)
    ev = evidence(jax.random.key(1), model, **run)
    (rung,) = ev.trajectory
    res = ev.results[0]
    assert rung.num_steps == 250 and res.settings.num_runs > 1 and res.num_particles > 64
    assert res.settings.run_particles == 64
    assert np.isfinite(rung.bias_gap) and PRECISE_SE < rung.log_z_se <= MOST_SE
    assert not ev.checks and abs(ev.log_z - exact) < 4 * ev.log_z_se
    assert ev.bridged and ev.log_z_se == pytest.approx(bridge_se(ev.trajectory), rel=1e-12)
    assert ev.gradients > res.num_particles * res.settings.gradients_per_particle
    fixed = evidence(jax.random.key(1), model, num_steps=250, **run)
    assert fixed.results[0].settings.num_runs == 1 and fixed.log_z_se > MOST_SE
    assert fixed.results[0].num_particles == 64


def test_a_passing_rung_whose_bias_check_ran_gives_the_bridge_and_its_interval():
    """A last rung that passes every check with its bias check run gives the bridge of its
    forward and reverse anneals (Bennett's: on every model of the trust suites its rms error
    was below the forward estimate's), the forward estimate kept as ``log_z_forward``. Its SE
    carries its own and half its stated interval (the truth may lie anywhere in it; a reverse
    estimate below, key 2's −0.004, pulls the bridge within it), so its ±2 SE reaches the
    stated shortfall."""
    f, exact = _gaussian()
    for key, above in ((0, True), (2, False)):
        ev = evidence(jax.random.key(key), _TargetModel(f, 3), num_particles=256,
                      bias_check=True, progress_bar=False)  # fmt: skip
        last = ev.trajectory[-1]
        assert not ev.checks and not ev.cleared and ev.bridged and (last.bias_gap > 0) == above
        assert ev.log_z == last.bridge and ev.log_z_forward == last.log_z
        low, high = bridge_figures(ev.trajectory, ev.log_z)
        want = np.hypot(last.bridge_se, (low + high) / 2)
        assert ev.log_z_se == pytest.approx(want, rel=1e-12)
        assert ev.shortfall == pytest.approx(low) and 0 < ev.shortfall < 2 * ev.log_z_se
        assert abs(ev.log_z - exact) < 3 * ev.log_z_se + 0.01


def test_the_ladder_climbs_while_checks_fail_and_states_the_gap_when_the_budget_ends():
    """Neal's funnel from N(0, I), the transition fixed (``local_steps=False``): every rung's
    lag check fails (the neck is not reached), so the ladder runs 250, 1000, ... until
    max_gradients; the estimate rises on the way, the last rung's warning states a shortfall in
    nats that covers its error, and no gradient is spent past the budget. With room for a
    third rung, its bridge agrees with the second's: no warning, an SE that carries their
    spread."""
    f, exact = _funnel()
    budget = 1_500_000
    with pytest.warns(ph.EvidenceWarning, match=r"converged: after 2 rungs .* too low"):
        ev = evidence(jax.random.key(1), _TargetModel(f, 10), initial="prior",
                      num_particles=256, max_gradients=budget, progress_bar=False,
                      local_steps=False)  # fmt: skip
    steps = [r.num_steps for r in ev.trajectory]
    assert steps == [250, 1000] and ev.num_steps == 1000
    assert all(r.failed for r in ev.trajectory) and not any(r.local_steps for r in ev.trajectory)
    spent = [r.gradients for r in ev.trajectory]
    assert spent[0] < spent[1] == ev.gradients <= budget
    forward = ev.trajectory[-1].log_z
    assert exact - forward > 0.05  # the forward anneal is still low: the funnel's neck
    # its bias check ran (the budget allows no other rung): the estimate is the bridge of the
    # forward and reverse anneals, closer (-0.16 -> -0.03 here, +0.01 on the oldest stack),
    # its figures stated about it
    assert ev.bridged and ev.log_z_forward == forward and ev.log_z == ev.bias.log_z_bennett
    assert ev.log_z == ev.trajectory[-1].bridge and ev.log_z_se == ev.bias.log_z_bennett_se
    assert abs(ev.log_z - exact) < exact - forward
    assert ev.shortfall > 0 and exact - ev.log_z <= ev.shortfall + 0.1
    assert (ev.shortfall, ev.excess) == bridge_figures(ev.trajectory, ev.log_z)
    assert "converged" in [c.split(":")[0] for c in ev.checks]
    assert f"The estimate given, {ev.log_z:.3f}, bridges this forward anneal" in ev.checks[-1]
    with warnings.catch_warnings():  # key 17: the last two bridges 0.011 apart (oldest stack 0.02)
        warnings.simplefilter("error", ph.EvidenceWarning)
        more = evidence(jax.random.key(17), _TargetModel(f, 10), initial="prior",
                        num_particles=256, max_gradients=4 * budget, progress_bar=False,
                        local_steps=False)  # fmt: skip
    last, prev = more.trajectory[-1], more.trajectory[-2]
    assert more.bridged and [r.num_steps for r in more.trajectory] == [250, 1000, 4000]
    assert not more.checks and last.cleared and abs(last.bridge - prev.bridge) <= 0.1
    assert bridge_se(more.trajectory) > np.hypot(last.bridge_se, prev.bridge_se)  # the spread
    assert not max(bridge_figures(more.trajectory, more.log_z)) <= BRIDGE_CLEAR
    # unwarned: its error bar reaches the shortfall stated about the bridge
    assert more.log_z_se == max(bridge_se(more.trajectory), more.shortfall / 2)
    assert abs(more.log_z - exact) < 2 * more.log_z_se
    texts = [t.get_text() for t in ph.results.plots.plot_convergence(more).get_legend().texts]
    assert "the estimate: forward and reverse bridged (± 2 SE: cleared, its doubt in its SE)" in (
        texts)  # fmt: skip
    budget = 6_000_000
    # by default the 1000-temperature rung's failed bias and lag checks switch the next rung to
    # per-particle step sizes (their pilot's gradients counted): the last rung's forward
    # estimate -0.22 -> +0.09 here (key 26)
    with warnings.catch_warnings():  # its bridge is right and may be cleared (oldest stack)
        warnings.simplefilter("ignore", ph.EvidenceWarning)
        sw = evidence(jax.random.key(26), _TargetModel(f, 10), initial="prior",
                      num_particles=256, max_gradients=budget, progress_bar=False)  # fmt: skip
        ev = evidence(jax.random.key(26), _TargetModel(f, 10), initial="prior",
                      num_particles=256, max_gradients=budget, progress_bar=False,
                      local_steps=False)  # fmt: skip
    assert exact - ev.trajectory[-1].log_z > 0.15
    assert [r.local_steps for r in sw.trajectory] == [False, False, True]
    assert not sw.checks or "4000 (local steps) temperatures" in sw.checks[-1]
    key = lambda t: [(r.num_steps, r.log_z, r.failed, r.gradients) for r in t[:2]]  # noqa: E731
    assert "bias" in sw.trajectory[1].failed and key(sw.trajectory) == key(ev.trajectory)
    pilot = 64 * (1000 + 100)  # its pilot's particles × temperatures and warm-up
    # beside the last rungs' bias checks, which differ: a local-step rung's draws half its own
    spent = (sw.gradients - sw.bias.gradients) - (ev.gradients - ev.bias.gradients)
    assert 0.9 * pilot < spent < 1.2 * pilot and sw.gradients <= budget
    assert exact - sw.trajectory[-1].log_z < 0.05 and sw.bridged
    assert -(sw.shortfall + 0.1) <= sw.log_z - exact <= sw.excess + 0.1


def test_a_bridge_that_no_longer_moves_ends_the_funnels_ladder_without_a_warning():
    """The funnel with the default budget (key 4): per-particle steps from 4000 temperatures
    on, whose rung still fails its weights' checks, but whose bridge lies within 0.1 nat of the
    1000-temperature rung's, an independent run (10.354 and 10.314; its anneals bound it only
    within 0.40 below and 0.53 above): the ladder ends there, below 5 M gradients, the bridge
    is the estimate with no warning, its SE carries the two bridges' spread (0.198 against its
    own 0.061), and it covers the exact value (error +0.066)."""
    f, exact = _funnel()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        ev = evidence(jax.random.key(4), _TargetModel(f, 10), initial="prior",
                      progress_bar=False)  # fmt: skip
    assert [(r.num_steps, r.local_steps) for r in ev.trajectory] == [
        (250, False), (1000, False), (4000, True)]
    assert ev.bridged and not ev.checks and "lag" in ev.cleared and ev.gradients < 5_000_000
    prev, last = ev.trajectory[-2:]
    assert abs(last.bridge - prev.bridge) <= CLEAR_MOVE < max(bridge_figures(ev.trajectory,
                                                                             ev.log_z))
    assert ev.log_z_se > ev.bias.log_z_bennett_se
    assert abs(ev.log_z - exact) < 2 * ev.log_z_se


def test_a_rung_whose_bridge_needs_no_warning_ends_the_ladder():
    """From the fixed default's 1000 temperatures on, a rung that still fails its weights'
    checks but whose bridge no longer moves (the previous rung's, an independent run, within
    0.1 nat) ends the ladder, as a settled rung does; a bridge that moved, a rung below 1000
    temperatures and a rung without a bias check (no bridge) do not."""
    nan = float("nan")
    prev = Rung(1000, -0.27, 0.04, ("pareto_k", "lag", "bias"), 0.25, 1_100_000, 1.0,
                bias_gap_se=0.06, bridge=-0.06, bridge_se=0.03)
    last = Rung(4000, -0.23, 0.03, ("pareto_k", "lag"), 0.20, 4_500_000, 3.0,
                bias_gap_se=0.05, bridge=-0.02, bridge_se=0.03)
    assert max(bridge_figures((prev, last), last.bridge)) > BRIDGE_CLEAR  # not by its interval
    assert ends((prev, last)) and not settled(last)
    assert not ends((prev._replace(bridge=0.3), last))  # moved by 0.32
    assert not ends((prev._replace(num_steps=62), last._replace(num_steps=250)))
    assert not ends((prev, last._replace(bridge=nan, bias_gap=nan, bias_gap_se=nan)))
    assert ends((prev, last._replace(failed=())))  # settled: no check fails


def test_an_unwarned_bridge_carries_its_stated_interval_in_its_se():
    """A bridge cleared because the previous rung's agrees (the twisted banana's case: every
    direction agreeing while the arms' mass is missed) has an SE of at least its stated
    interval's half-width, so its ±2 SE reaches either end; a warned bridge, whose warning
    states the interval, keeps its own SE."""
    prev = Rung(1000, -0.80, 0.04, ("pareto_k", "lag", "bias"), 0.30, 1_100_000, 1.0,
                lag=0.22, outside=0.4, bias_gap_se=0.06, bridge=-0.42, bridge_se=0.05)
    last = Rung(4000, -0.62, 0.03, ("pareto_k", "lag", "bias"), 0.25, 4_500_000, 3.0,
                lag=0.21, outside=0.4, bias_gap_se=0.05, bridge=-0.38, bridge_se=0.04)
    low, high = bridge_figures((prev, last), last.bridge)
    assert max(low, high) > BRIDGE_CLEAR and low > 0.2 and high > 0.2  # cleared by agreement
    se = bridge_se((prev, last))
    assert ends((prev, last)) and se >= (low + high) / 2 > 2 * max(low, high) / 4
    moved = (prev._replace(bridge=-0.8), last)  # 0.42 apart: warned, its own SE alone
    assert not ends(moved) and bridge_se(moved) == pytest.approx(last.bridge_se)


def test_escalating_can_clear_the_warning():
    """A 30-D Student-t (ν = 2) from N(0, I): the first rung's weights fail a check, a longer
    rung passes them and the bias check; the call ends without a warning, right. (From the
    prior: ``"auto"`` now anneals it from Student-t marginals, whose first rung passes.)"""
    f, exact = _student()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        ev = evidence(jax.random.key(103), _TargetModel(f, 30), initial="prior",
                      progress_bar=False)  # fmt: skip
    assert len(ev.trajectory) >= 2 and ev.trajectory[0].failed and not ev.trajectory[-1].failed
    assert abs(ev.log_z - exact) < 3 * ev.log_z_se + 0.05


def test_a_second_call_begins_where_the_first_calls_ladder_stopped():
    """Given the same memory, a later call on the same model, data and options begins at the
    rung where the first call's ladder stopped, the rungs below it the first call's (marked
    remembered, read by the rules as a cold call's own); with the first call's key it makes
    there the run the first call made, for fewer gradients. A call that climbs further does
    not move where later calls begin; a fresh memory, or none, starts from 250 again."""
    from ppl_hais.workflow.memory import Memory

    f, _ = _student()
    model = _TargetModel(f, 30)

    def call(key, memory):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ph.EvidenceWarning)
            return evidence(jax.random.key(key), model, initial="prior", num_particles=128,
                            progress_bar=False, memory=memory)  # fmt: skip

    memory = Memory()
    first = call(103, memory)
    below, last = first.trajectory[:-1], first.trajectory[-1]
    assert len(below) >= 1 and not any(r.remembered for r in first.trajectory)
    assert not first.remembered and len(memory) == 2  # its tuning and where its ladder stopped
    again = call(103, memory)
    assert again.remembered
    assert again.trajectory[: len(below)] == tuple(r._replace(remembered=True) for r in below)
    resumed = again.trajectory[len(below)]
    assert resumed.num_steps == last.num_steps and not resumed.remembered
    assert (resumed.log_z, resumed.bias_gap) == (last.log_z, last.bias_gap)  # the same run
    assert resumed.gradients < last.gradients  # no pilot and no rung below spent again
    other = call(106, memory)  # another key begins there too, with its own runs
    assert other.trajectory[len(below)].num_steps == last.num_steps
    assert other.trajectory[len(below)].log_z != last.log_z
    assert not call(106, Memory()).trajectory[0].remembered
    assert not any(r.remembered for r in call(106, None).trajectory)


def test_a_fixed_num_steps_means_what_it_says():
    f, _ = _funnel()
    with pytest.warns(ph.EvidenceWarning) as rec:
        ev = evidence(jax.random.key(0), _TargetModel(f, 10), initial="prior",
                      num_particles=256, num_steps=1000, progress_bar=False)  # fmt: skip
    assert [r.num_steps for r in ev.trajectory] == [1000]
    assert "converged" not in str(rec[0].message)


def test_a_budget_too_small_for_one_run_is_refused_before_any_work():
    f, _ = _gaussian()
    with pytest.raises(ValueError, match="too small for one run: 1 chain.* 128,000 gradients"):
        evidence(jax.random.key(0), _TargetModel(f, 3), max_gradients=100_000)
    with pytest.raises(ValueError, match="too small for one run"):
        evidence(jax.random.key(0), _TargetModel(f, 3), num_steps=300, max_gradients=1000)


def test_a_short_passing_rung_ends_the_ladder_only_when_its_bias_check_bounds_the_bias():
    """A 30-D Student-t (ν = 2, key 100) passed its weights' checks at 250 temperatures 0.21 nat
    low; its bias check's gap, 0.11 ± 0.078, was within its noise, and so it did not warn, but
    could not rule out 0.1 nat either: the ladder goes on (there, 16,000 temperatures ended
    0.006 off). From the fixed default's 1000 temperatures on, where the checks were
    calibrated, a rung that passes them ends it."""
    nan = float("nan")
    student = Rung(250, 30.98, 0.048, (), 0.110, 384_366, 8.1, lag=0.18, outside=0.93,
                   bias_gap_se=0.078)  # fmt: skip
    assert not settled(student)
    assert settled(student._replace(bias_gap=0.02, bias_gap_se=0.03))  # bounded by 0.08
    assert settled(student._replace(bias_gap=nan, bias_gap_se=nan))  # no check ran: the weights'
    assert not settled(student._replace(failed=("lag",), bias_gap=nan))
    assert not settled(student._replace(bias_gap=0.0, bias_gap_se=float("inf")))
    assert settled(student._replace(num_steps=FIXED_NUM_STEPS))


def test_a_failed_bias_check_from_1000_temperatures_switches_to_local_steps():
    """The funnel's signature (on a rung of 1000 or more, a bias check that failed by more than
    0.1 nat with the lag check, its misses sizable) switches the next rungs to per-particle
    step sizes; a short rung, a passing check, a gap within 0.1 nat, no lag, heavy tails
    (unsizable) or a rung already switched do not."""
    nan = float("nan")
    funnel = (Rung(250, -0.4, 0.03, ("lag",), nan, 10, 0.1),
              Rung(1000, -0.25, 0.03, ("lag", "bias"), 0.2, 50, 0.3, lag=0.3, outside=0.4,
                   bias_gap_se=0.05))  # fmt: skip
    assert needs_local_steps(funnel)
    assert not needs_local_steps(funnel[:1] + (funnel[1]._replace(num_steps=250),))
    assert not needs_local_steps(funnel[:1] + (funnel[1]._replace(failed=("lag",)),))
    assert not needs_local_steps(funnel[:1] + (funnel[1]._replace(failed=("bias",)),))
    assert not needs_local_steps(funnel[:1] + (funnel[1]._replace(bias_gap=0.09),))
    assert not needs_local_steps(funnel[:1] + (funnel[1]._replace(outside=0.9),))  # unsizable
    assert not needs_local_steps(funnel[:1] + (funnel[1]._replace(local_steps=True),))
    switched = funnel + (funnel[1]._replace(num_steps=4000, local_steps=True),)
    (msg,) = remaining_gap(switched, max_gradients=100)
    assert "(250, 1000, 4000 (local steps) temperatures" in msg


def test_remaining_gap_reads_the_trajectory():
    nan = float("nan")
    passed = (Rung(1000, -1.0, 0.01, (), nan, 10, 0.1),)
    assert remaining_gap(passed, max_gradients=100) == () and shortfall(passed) == 0.0
    flat = (Rung(1000, -1.0, 0.01, ("lag",), nan, 10, 0.1),
            Rung(4000, -1.01, 0.01, ("lag",), -0.02, 50, 0.3))  # fmt: skip
    (msg,) = remaining_gap(flat, max_gradients=100)
    assert shortfall(flat) == 0.0 and "within its noise" in msg and "false alarms" in msg
    # a reverse anneal far below ran from no posterior draws: said so, not read as a distance
    (msg,) = remaining_gap(flat[:1] + (flat[1]._replace(bias_gap=-284.0, bias_gap_se=1.0),),
                           max_gradients=100)  # fmt: skip
    assert "284.00 nats below it (its draws were no posterior draws" in msg
    # particles far beyond the start that still predict their weights (the Student-t experts):
    # no figure can size what may be missing: the shortfall is inf, and the message says so
    # instead of "false alarms", with what the trajectory alone would have said
    far = flat[:1] + (flat[1]._replace(lag=0.3, outside=0.94),)
    (msg,) = remaining_gap(far, max_gradients=100)
    assert unsizable(far) and shortfall(far) == float("inf")
    assert "false alarms" not in msg and "94% of its particles" in msg and "lag 0.30" in msg
    assert "shortfall = inf" in msg and "trajectory alone" not in msg
    far_rising = far[:1] + (far[1]._replace(log_z=-0.9),)
    assert "the trajectory alone says up to 0.30 nats" in remaining_gap(far_rising,
                                                                        max_gradients=100)[0]
    # either one alone is not enough, nor a rung that passed
    assert not unsizable(flat[:1] + (flat[1]._replace(lag=0.3, outside=0.5),))
    assert not unsizable(flat[:1] + (flat[1]._replace(lag=0.2, outside=0.94),))
    # an experts run 0.37 nat low: its last rung's lag 0.249 just under the cut, its
    # earlier rungs' 0.27-0.31 above it; sized, its shortfall (0.16) did not cover the error
    slipped = (flat[0]._replace(lag=0.31, outside=0.90), far[1]._replace(lag=0.249))
    assert unsizable(slipped) and shortfall(slipped) == float("inf")
    assert not unsizable(far[:1] + (far[1]._replace(failed=()),))
    # a held-out 30-D Student-t, right on every run: its 250-temperature rung lagged
    # 0.28, its later rungs 0.12-0.22; a short first rung's lag is no sign of unreached tails,
    # but a last rung's is, however short
    first = Rung(250, -1.1, 0.02, ("lag",), nan, 5, 0.05, lag=0.28, outside=0.91)
    settling = (first, far[0]._replace(lag=0.13, outside=0.92), far[1]._replace(lag=0.17))
    assert not unsizable(settling) and np.isfinite(shortfall(settling))
    assert unsizable((first,)) and unsizable((first, settling[1]._replace(lag=0.25)))
    bias = flat[:1] + (flat[1]._replace(bias_gap=0.3),)
    assert (  # the gap, doubled: MCMC draws that miss mass too make it smaller
        shortfall(bias) == pytest.approx(0.6)
        and "up to 0.60 nats too low" in remaining_gap(bias, max_gradients=100)[0]
    )
    # a gap whose own SE is large bounds less than its figure: the gap plus two SEs
    noisy = flat[:1] + (flat[1]._replace(bias_gap=0.13, bias_gap_se=0.29),)
    assert shortfall(noisy) == pytest.approx(0.13 + 2 * 0.29)
    # an earlier rung's bias check reached an upper estimate above the last rung (the suite's
    # funnel: 1000 temperatures at -0.095, 4000 at -0.444 with a gap of 0.369, then 16,000
    # at -0.397 with a gap of 0.125): the last is at least that much low
    fell = (flat[0]._replace(log_z=-0.095), flat[1]._replace(log_z=-0.444, bias_gap=0.369),
            flat[1]._replace(log_z=-0.397, bias_gap=0.125))  # fmt: skip
    assert shortfall(fell) == pytest.approx(-0.444 + 0.369 + 0.397)
    assert "highest upper estimate" in remaining_gap(fell, max_gradients=100)[0]
    # rises extrapolated by a bias that shrinks by ¾ per 4×: the last rise × 3, the whole
    # ladder's rise (two steps of 4×) × 0.5625 / 0.4375
    rising = (flat[0], flat[1]._replace(log_z=-0.9), flat[1]._replace(log_z=-0.85))
    assert shortfall(rising) == pytest.approx(max(0.05 * 3, 0.15 * 0.5625 / 0.4375))
    one = (Rung(1000, -1.0, float("inf"), ("pareto_k",), nan, 10, 0.1),)
    assert "no second rung fitted the budget" in remaining_gap(one, max_gradients=12)[0]
    # a few dominant weights: the check also says how far too high the estimate may be
    lifted = far[:1] + (far[1]._replace(excess=1.22),)
    (msg,) = remaining_gap(lifted, max_gradients=100)
    assert "shortfall = inf" in msg and "or up to 1.22 nats too high" in msg
    assert "too high" not in remaining_gap(far[:1] + (far[1]._replace(excess=0.03),),
                                           max_gradients=100)[0]


def test_the_joint_decision_clears_weight_checks_only_when_independent_paths_agree():
    """A later rung that fails only the weights' checks is accepted when its bias check's
    reverse anneal lies within 0.05 nat and its gap plus 2 of its SEs within 0.1, no earlier
    check's upper estimate more than 0.1 above it, the previous rung within 0.1, and its lag
    is below 0.25 and its outside fraction below 0.75; any one of them missing keeps the
    warning, and its SE is the rungs' spread."""
    nan = float("nan")
    prev = Rung(1000, -1.03, float("inf"), ("pareto_k",), nan, 10, 0.1, 0.15)
    last = Rung(4000, -1.0, float("inf"), ("pareto_k", "lag"), 0.02, 50, 0.3, 0.18,
                bias_gap_se=0.03)  # fmt: skip
    assert clears((prev, last))
    assert not clears((last,))  # one rung: nothing to agree with
    assert not clears((prev, last._replace(bias_gap=nan)))  # no bias check
    assert not clears((prev, last._replace(bias_gap=0.06)))
    assert not clears((prev, last._replace(bias_gap_se=nan)))  # a gap of unknown noise
    # a funnel miss that an earlier rule cleared: a gap of 0.048 ± 0.03 bounds nothing
    assert not clears((prev, last._replace(bias_gap=0.048)))
    assert clears((prev, last._replace(bias_gap=-0.048)))  # reverse below: no sign of a miss
    assert not clears((prev, last._replace(log_z=-0.9)))  # still moving
    # a PyMC funnel run of the trust suite, once cleared 0.16 nat low (random_seed=715): 4000
    # temperatures at -0.202 with a gap of 0.190, then 16,000 at -0.163 with 0.040 ± 0.030;
    # the earlier check's upper estimate lies 0.15 above the last rung: the bias is not bounded
    funnel = (Rung(4000, -0.202, 0.031, ("pareto_k", "lag"), 0.190, 10, 0.1, 0.2,
                   bias_gap_se=0.049),
              Rung(16000, -0.163, 0.033, ("pareto_k",), 0.040, 50, 0.3, 0.2, outside=0.4,
                   bias_gap_se=0.030))  # fmt: skip
    assert not clears(funnel)
    assert clears(funnel[:1] + (funnel[1]._replace(log_z=-0.11),))  # within 0.1 of it
    assert not clears((prev, last._replace(lag=0.25)))  # mass neither path reached
    assert not clears((prev, last._replace(outside=0.94)))  # the experts' particles: far out
    assert clears((prev, last._replace(outside=0.5)))  # a banana's
    assert not clears((prev, last._replace(failed=("pareto_k", "nonfinite"))))
    assert not clears((prev, last._replace(failed=())))  # nothing to clear
    assert cleared_se((prev, last), 0.02) == pytest.approx(np.hypot(0.02, 0.03 / np.sqrt(2)))


def test_a_fixed_budget_run_is_cleared_by_its_bias_check_alone():
    """A run of a fixed ``num_steps`` has no previous rung to agree with: its weights' failed
    checks are false alarms where its bias check agrees alone (the same bounds, the same lag
    and outside guards), and its SE then carries the gap and the gap's SE."""
    nan = float("nan")
    last = Rung(1000, -1.0, float("inf"), ("pareto_k", "lag"), 0.02, 50, 0.3, 0.18,
                bias_gap_se=0.03)  # fmt: skip
    assert clears((last,), alone=True) and not clears((last,))
    assert not clears((last._replace(bias_gap=nan),), alone=True)  # no bias check
    assert not clears((last._replace(bias_gap=0.06),), alone=True)
    assert not clears((last._replace(bias_gap=0.048),), alone=True)  # 0.048 + 2 × 0.03 > 0.1
    assert not clears((last._replace(lag=0.25),), alone=True)
    assert not clears((last._replace(outside=0.8),), alone=True)
    assert not clears((last._replace(failed=("pareto_k", "bias")),), alone=True)
    assert cleared_se((last,), 0.01) == pytest.approx(np.sqrt(0.01**2 + 0.02**2 + 0.03**2))


def _banana(z, b=0.03, sd1=10.0):
    """Twisted Gaussian: x1 ~ N(0, 10²), x2 | x1 ~ N(b(x1² − 100), 1), normalized (log Z = 0)."""
    y2 = z[1] - b * (z[0] ** 2 - sd1**2)
    return -0.5 * (z[0] / sd1) ** 2 - 0.5 * y2**2 - math.log(2 * math.pi * sd1)


def test_a_banana_whose_weights_fail_is_cleared_by_the_joint_decision_and_right():
    """The banana from N(0, 3²I): its weights fail k̂ and lag at every length (k̂ 0.5–1 on
    runs 0.01 nat off), which before the joint decision warned on 21 of 40 right runs. The
    second rung agrees with the first and with its bias check, so the call ends there without
    a warning, with a finite SE from the rungs' spread that covers the exact log Z = 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        ev = evidence(jax.random.key(0), _TargetModel(_banana, 2, 3.0), progress_bar=False)
    assert ev.trajectory[0].failed and set(ev.cleared) <= {"pareto_k", "ess", "lag"}
    assert ev.cleared and not ev.checks and len(ev.trajectory) == 2
    assert abs(ev.trajectory[-1].bias_gap) <= 0.05
    assert np.isfinite(ev.log_z_se) and abs(ev.log_z) < 3 * ev.log_z_se + 0.05
    # its ArviZ output carries that estimate, not the chain's weights' verdict: compare_evidence
    # reads it unwarned with the cleared SE (not the chain's failed checks)
    idata = arviz_out.from_ais(ev.results, {"z": np.zeros((1, 4, 2))}, checks=ev.checks,
                              bias=ev.bias, trajectory=ev.trajectory, evidence=ev)  # fmt: skip
    assert ev.results[0].warning  # the chain's own weights failed
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        table = ph.compare_evidence({"banana": idata, "pair": (0.0, 0.1)})
    assert table.loc["banana", "log_evidence"] == ev.log_z
    assert table.loc["banana", "se"] == ev.log_z_se and not table.loc["banana", "warning"]


def test_a_banana_at_a_fixed_num_steps_is_cleared_when_right_and_warned_when_high():
    """The banana over a fixed 1000 temperatures: key 2's weights fail k̂ and lag 0.02 nat off
    while its bias check agrees (gap 0.009, 0.006 on the oldest stack), so it comes without a
    warning and with a finite SE that covers log Z = 0 (such runs once warned with SE = inf);
    key 7 drew a dominating weight, 0.29 nat high (0.40 on the oldest stack), and its reverse
    anneal lies 0.34 below, beyond the ``CLEAR_GAP`` that the check's agreement needs: still
    warned."""
    model = _TargetModel(_banana, 2, 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        ev = evidence(jax.random.key(2), model, num_steps=1000, progress_bar=False)
    assert set(ev.cleared) == {"pareto_k", "lag"} and not ev.checks
    assert [r.num_steps for r in ev.trajectory] == [1000]  # fixed: one run, no ladder
    assert np.isfinite(ev.log_z_se) and abs(ev.log_z) < 3 * ev.log_z_se + 0.05
    # one signal in ArviZ: the fields pm.sample_smc's users read carry the call's answer and
    # flag no chain of a call that raised no warning; the chain's own weights' figures stay
    ss = arviz_out.group(arviz_out.from_ais(ev.results, {"z": np.zeros((1, 4, 2))},
                                          checks=ev.checks, trajectory=ev.trajectory,
                                          evidence=ev), "sample_stats")  # fmt: skip
    assert float(ss["log_marginal_likelihood"][0]) == ev.log_z == float(ss["log_evidence"])
    assert float(ss["log_marginal_likelihood_se"][0]) == ev.log_z_se
    assert not bool(ss["evidence_warning"].any()) and ev.results[0].warning
    assert float(ss["chain_log_marginal_likelihood"][0]) == ev.results[0].log_z
    with pytest.warns(ph.EvidenceWarning, match="pareto_k"):
        high = evidence(jax.random.key(7), model, num_steps=1000, progress_bar=False)
    assert high.log_z > 0.1 and high.bias_gap < -CLEAR_GAP and not high.cleared


def test_the_trajectory_reaches_arviz_compare_and_the_plot():
    import matplotlib

    matplotlib.use("Agg")
    from ppl_hais.results.arviz import group

    f, _ = _funnel()
    with pytest.warns(ph.EvidenceWarning):  # key 19: its bridge warned, 0.05 low (oldest: high)
        ev = evidence(jax.random.key(19), _TargetModel(f, 10), initial="prior",
                      num_particles=256, max_gradients=6_000_000, progress_bar=False)  # fmt: skip
    idata = arviz_out.from_ais(ev.results, {"z": np.zeros((1, 4, 10))}, checks=ev.checks,
                              bias=ev.bias, trajectory=ev.trajectory, evidence=ev)  # fmt: skip
    ss = group(idata, "sample_stats")
    assert list(ss["ladder_num_steps"].values) == [r.num_steps for r in ev.trajectory]
    assert len(ev.trajectory) >= 2 and ev.bridged
    assert ss["ladder_log_marginal_likelihood"].values[-1] == ev.log_z_forward
    assert float(ss["log_evidence"]) == ev.log_z and float(ss["log_evidence_se"]) == ev.log_z_se
    assert ss.attrs["bridged"] == 1
    assert ss.attrs["gradients"] == ev.gradients and ss.attrs["shortfall"] == ev.shortfall
    with pytest.warns(ph.EvidenceWarning):
        table = ph.compare_evidence({"ev": ev, "idata": idata, "pair": (0.0, 0.1)})
    assert table.loc["ev", "shortfall"] == table.loc["idata", "shortfall"] == ev.shortfall
    assert np.isnan(table.loc["pair", "shortfall"])
    assert ss.attrs["excess"] == ev.excess == bridge_figures(ev.trajectory, ev.log_z)[1] >= 0
    assert table.loc["ev", "excess"] == table.loc["idata", "excess"] == ev.excess
    assert np.isnan(table.loc["pair", "excess"])
    for source in (ev, idata):
        ax = ph.results.plots.plot_convergence(source)
        texts = [t.get_text() for t in ax.get_legend().texts]
        assert "a check failed (EvidenceWarning)" in texts
        assert "the estimate: forward and reverse bridged (stated interval)" in texts
    with pytest.raises(TypeError, match="convergence ladder"):
        ph.results.plots.plot_convergence(object())


def test_both_adapters_default_to_the_ladder_and_report_it():
    """``phn.HAIS`` and ``php.sample_hais`` with no num_steps run the ladder; its rungs and the
    call's gradients reach print_summary, sample_stats and compare_evidence."""
    numpyro = pytest.importorskip("numpyro")
    pm = pytest.importorskip("pymc")
    import numpyro.distributions as dist

    from ppl_hais.adapters import numpyro as phn
    from ppl_hais.adapters import pymc as php
    from ppl_hais.results.arviz import group

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0, 1))
        numpyro.sample("y", dist.Normal(mu, 1), obs=y)

    hais = phn.HAIS(model, num_particles=128, progress_bar=False)
    hais.run(jax.random.key(0), jnp.array([0.5, 1.0]))
    assert hais.options.num_steps is None and hais.evidence.num_steps == FIRST_NUM_STEPS
    with pm.Model():
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu, 1, observed=[0.5, 1.0])
        idata = php.sample_hais(draws=128, random_seed=0, progressbar=False)
    exact = -0.5 * np.log(np.linalg.det(2 * np.pi * (np.eye(2) + 1))) - 0.5 * np.array(
        [0.5, 1.0]
    ) @ np.linalg.solve(np.eye(2) + 1, [0.5, 1.0])
    for out in (hais.to_arviz(), idata):
        ss = group(out, "sample_stats")
        assert list(ss["ladder_num_steps"].values) == [FIRST_NUM_STEPS]
        # a passing rung states what its bias check, where one ran, still allows (twice a gap)
        assert ss.attrs["gradients"] > 128 * FIRST_NUM_STEPS and 0 <= ss.attrs["shortfall"] < 0.05
        lml = float(ss["log_marginal_likelihood"].values[0])
        assert abs(lml - exact) < 5 * float(ss["log_marginal_likelihood_se"].values[0]) + 0.01
        # the call's estimate: one chain, a passing rung, so the chain's forward estimate
        assert float(ss["log_evidence"]) == lml and ss.attrs["bridged"] == 0
        assert float(ss["log_evidence_se"]) == float(ss["log_marginal_likelihood_se"][0])
    table = ph.compare_evidence({"numpyro": hais, "pymc": idata})
    assert table.loc["numpyro", "log_evidence"] == hais.log_evidence
    for name, out in (("numpyro", hais.to_arviz()), ("pymc", idata)):
        assert table.loc[name, "shortfall"] == group(out, "sample_stats").attrs["shortfall"]


def test_an_se_widened_by_the_bias_check_reaches_the_field_pm_sample_smc_users_read():
    """A last rung that passed with its reverse estimate 0.1 nat above: the answer's SE carries
    that gap (log Z may lie up to it above), so the per-chain field a ``pm.sample_smc`` user
    reads holds the answer's SE, not the chain's own smaller one (kept beside it)."""
    from ppl_hais.workflow.evidence import Evidence

    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum(z**2), ph.Gaussian(jnp.zeros(2)))
    run = ph.hais(jax.random.key(0), target, num_particles=64, num_steps=50, progress_bar=False)
    rung = Rung(250, run.log_z, run.log_z_se, (), 0.1, 10_000, 0.1, bias_gap_se=0.03)
    widened = math.hypot(run.log_z_se, 0.1)
    ev = Evidence([run], target, "prior", run.log_z, widened, (), {}, trajectory=(rung,))
    ss = arviz_out.group(arviz_out.from_ais([run], {"z": np.zeros((1, 64, 2))}, evidence=ev,
                                          trajectory=ev.trajectory), "sample_stats")  # fmt: skip
    assert float(ss["log_marginal_likelihood_se"][0]) == widened == float(ss["log_evidence_se"])
    assert float(ss["chain_log_marginal_likelihood_se"][0]) == run.log_z_se < widened
    own = Evidence([run], target, "prior", run.log_z, run.log_z_se, (), {}, trajectory=(rung,))
    ss = arviz_out.group(arviz_out.from_ais([run], {"z": np.zeros((1, 64, 2))}, evidence=own,
                                          trajectory=own.trajectory), "sample_stats")  # fmt: skip
    assert "chain_log_marginal_likelihood" not in ss  # the chains' own answer: nothing moves
    assert float(ss["log_marginal_likelihood_se"][0]) == run.log_z_se
