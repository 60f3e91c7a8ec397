"""Checks that mean "wrong" — the bias check (a reverse anneal from MCMC draws), the
Pareto k̂ on bounded weights, the ESS check where the SE speaks, the SE of agreeing chains,
and budgets that cannot blow up."""

import dataclasses
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppl_hais as ph
from ppl_hais.annealing.pilot import survey
from ppl_hais.checks import diagnostics
from ppl_hais.estimate.bias import (
    EXTEND,
    _inconclusive,
    _own_draws,
    check_bias,
    needs_check,
    suspect_khat,
    suspect_outside,
)
from ppl_hais.estimate.reverse import bennett, reverse_anneal
from ppl_hais.results import arviz as arviz_out
from ppl_hais.results.result import AISResult, AnnealingTrace
from ppl_hais.stats import estimators
from ppl_hais.stats.estimators import pool
from ppl_hais.workflow.budget import choose_num_steps
from ppl_hais.workflow.evidence import evidence


class _TargetModel:
    """A target with an initial distribution, as the evidence workflow's model (prior = q)."""

    improper = ()

    def __init__(self, log_density, dim, scale=1.0):
        self.dim = dim
        self.prior = ph.Gaussian(np.zeros(dim), scale)
        self._f = log_density

    def log_likelihood(self, z):
        return self._f(z) - self.prior.log_prob(z)

    def log_joint(self, z):
        return self._f(z)


def _funnel(dim=10):
    def log_density(z):
        v, x = z[0], z[1:]
        return -0.5 * (v / 3) ** 2 - 0.5 * jnp.sum(x * x) * jnp.exp(-v) - 0.5 * (dim - 1) * v

    return log_density, 0.5 * dim * math.log(2 * math.pi) + math.log(3.0)


def _result(log_weights):
    trace = AnnealingTrace(*(np.zeros(1) for _ in range(5)))
    return AISResult.from_log_weights(
        log_weights, particles=np.zeros((len(log_weights), 1)), betas=np.array([0.0, 1.0]),
        trace=trace,
    )  # fmt: skip


def test_bounded_bimodal_weights_are_not_a_heavy_tail():
    """A 5% cluster half a nat above the rest: PSIS fits k̂ > 1 to it (20 of 20
    right mixture runs had warned with SE = inf at ESS 99%); the weights are bounded, so no
    pareto_k check and a finite SE."""
    rng = np.random.default_rng(0)
    lw = np.concatenate([rng.normal(0.0, 0.01, 486), rng.normal(0.5, 0.01, 26)])
    assert diagnostics.pareto_khat(lw) > 0.7  # what the tail fit says
    assert estimators.max_relative_weight(lw) < diagnostics.BOUNDED_WEIGHT
    res = _result(lw)
    assert not any(c.startswith("pareto_k") for c in res.checks)
    assert np.isfinite(res.log_z_se) and res.log_z_se < 0.05
    assert res.checks == ()


def test_a_real_heavy_tail_still_warns_and_has_no_se():
    """Pareto weights with k = 0.9: the largest is far above the mean, so k̂ applies."""
    rng = np.random.default_rng(1)
    lw = 0.9 * np.log(rng.pareto(1 / 0.9, size=512) + 1)
    assert estimators.max_relative_weight(lw) > diagnostics.BOUNDED_WEIGHT
    res = _result(lw)
    assert any(c.startswith("pareto_k") for c in res.checks)
    assert res.log_z_se == np.inf


def test_low_ess_with_a_valid_se_does_not_warn_but_without_khat_it_does():
    assert diagnostics.evidence_checks(khat=0.3, max_weight=20.0, ess=30.0, num_particles=512) == ()
    checks = diagnostics.evidence_checks(ess=30.0, num_particles=512)
    assert [c.split(":")[0] for c in checks] == ["ess"]
    checks = diagnostics.evidence_checks(khat=0.6, max_weight=20.0, ess=30.0, num_particles=512)
    assert [c.split(":")[0] for c in checks] == ["pareto_k", "ess"]


def test_pooled_se_of_agreeing_chains_replaces_an_infinite_one():
    log_z = [-3.00, -3.02, -2.99, -3.01]
    est, var = pool(log_z, [np.inf, 0.01, 0.01, 0.01])
    rel = np.exp(np.array(log_z) - est)
    assert math.isclose(var, np.var(rel, ddof=1) / 4)
    assert 0 < math.sqrt(var) < 0.02
    assert pool(log_z[:3], [np.inf, 0.01, 0.01])[1] == np.inf  # too few runs for a spread


def test_the_bias_warning_states_the_gap_in_nats():
    (check,) = diagnostics.evidence_checks(bias_gap=0.35, bias_gap_se=0.05)
    assert check.startswith("bias:")
    assert "0.35 nats above" in check and "up to 0.70 nats too low" in check
    assert diagnostics.evidence_checks(bias_gap=0.09, bias_gap_se=0.05) == ()  # < 2 SE
    assert diagnostics.evidence_checks(bias_gap=0.04, bias_gap_se=0.001) == ()  # < 0.05 nat
    assert diagnostics.evidence_checks(bias_gap=0.06, bias_gap_se=0.025)  # 2.4 SE, > 0.05
    assert diagnostics.evidence_checks(bias_gap=-0.5, bias_gap_se=0.05) == ()  # raises only
    assert diagnostics.evidence_checks(bias_gap=np.inf)[0].startswith("bias:")


def test_a_reverse_estimate_far_below_the_forward_one_vouches_for_nothing():
    """An upper estimate 284 nats under the lower one (a horseshoe's bias check, non-centered,
    from a Student-t start: one MCMC chain wandered where the model's density is tiny and the
    start's heavy tail is not, and its reverse weight dominated) came from no posterior draws.
    Its rung of 250 temperatures used to settle the ladder (a negative gap bounded nothing
    above 0.1 nat), 0.40 nat low at an SE of 0.10; now it is inconclusive: the ladder goes on,
    and there is no bridge. It warns of nothing (centered eight schools' right runs had gaps
    down to −11: their MCMC drifts to large τ), and gaps within 4 SEs or 1 nat count as before."""
    from ppl_hais.checks.ladder import Rung, settled

    assert diagnostics.bias_invalid(-283.9, 1.0) and diagnostics.evidence_checks(
        bias_gap=-283.9, bias_gap_se=1.0) == ()  # fmt: skip
    assert not diagnostics.bias_invalid(-0.25, 0.05)  # the suites' least gap on a last rung
    assert not diagnostics.bias_invalid(-1.5, 0.5) and diagnostics.bias_invalid(-2.5, 0.5)
    rung = Rung(250, -87.31, 0.10, (), -283.9, 470_000, 1.0, bias_gap_se=1.0)
    assert not settled(rung) and not settled(rung._replace(bias_gap=-2.5, bias_gap_se=0.5))
    assert settled(rung._replace(bias_gap=-0.08, bias_gap_se=0.05))  # within its noise
    assert not settled(rung._replace(bias_gap=-0.25, bias_gap_se=0.05))  # below: bounds nothing
    assert settled(rung._replace(num_steps=1000))  # the checks' own length: as with no check


def _off_target():
    """A 2-D posterior far in its prior's tail (N(0, I) prior, y = 3 seen at noise 0.3 per
    coordinate), its log Z exact, and a forward run that passes every check."""
    prior = ph.Gaussian(jnp.zeros(2))

    def log_posterior(z):
        return prior.log_prob(z) - 0.5 * jnp.sum((z - 3.0) ** 2) / 0.09 - 2 * math.log(
            0.3 * math.sqrt(2 * math.pi))  # fmt: skip

    target = ph.AnnealingTarget(log_posterior, prior)
    exact = 2 * (-0.5 * 9 / 1.09 - 0.5 * math.log(2 * math.pi * 1.09))
    result = ph.hais(jax.random.key(0), target, num_particles=256, num_steps=300,
                     progress_bar=False)  # fmt: skip
    assert not result.checks
    return target, exact, result


def test_a_bias_check_on_draws_that_are_not_posterior_draws_says_so():
    """The check's MCMC given the prior's density instead of the posterior's: its draws lie
    where the posterior is tiny, and the reverse anneal from them lies nats *below* the
    forward estimate. With the forward run's tuning the check redraws them by the anneal's own
    transition at β = 1 and measures a gap within its noise; without it, it reports that it
    could not run, bounds nothing (no bridge) and says why."""
    from ppl_hais.annealing.kernels import hais_kernel

    target, exact, result = _off_target()
    kernel = hais_kernel(0.5, 1, 1, "standard")
    pilot = survey(jax.random.key(3), target, kernel, num_steps=300)
    wrong = jax.tree_util.Partial(lambda z: -0.5 * jnp.sum(z**2))
    kw = dict(kernel=kernel, num_draws=128, num_mcmc=100, log_density=wrong)
    redrawn = check_bias(jax.random.key(1), target, [result], pilot, **kw)
    assert redrawn.redrawn and not redrawn.broken and "redrew" in redrawn.note
    assert abs(redrawn.gap) < 3 * redrawn.gap_se + 0.02
    assert abs(redrawn.log_z_upper - exact) < 3 * redrawn.log_z_upper_se + 0.02
    broken = check_bias(jax.random.key(1), target, [result], None, **kw)
    assert broken.broken and not broken.redrawn and broken.gap < -1.0
    assert math.isnan(broken.log_z_bennett)
    assert "could not run" in broken.note and f"{-broken.gap:.2f}" in broken.note
    fine = check_bias(jax.random.key(1), target, [result], pilot, kernel=kernel, num_draws=128,
                      num_mcmc=100)  # fmt: skip
    assert not fine.redrawn and not fine.broken and fine.note == ""
    assert abs(fine.gap) < 3 * fine.gap_se + 0.02
    summary = dataclasses.replace(result, settings=result.settings.replace(
        bias_check=dict(broken._asdict(), note=broken.note))).summary()
    assert "NOTE the bias check could not run" in summary


def test_bias_check_sees_the_funnels_miss():
    """Neal's funnel from N(0, I): the forward estimate is 0.2-0.3 nats low (docs/trust.md);
    "auto" checks it, and the reverse anneal from MCMC draws lies above it. One check clears
    its 3-SE bar on about half the seeds (docs/bias_check.md), so the test averages the
    run's own check with three more (fresh keys and pilots): gaps seen 0.05-0.33."""
    log_density, exact = _funnel()
    model = _TargetModel(log_density, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ph.EvidenceWarning)
        ev = evidence(jax.random.key(0), model, initial="prior", num_particles=512,
                      num_steps=1000, progress_bar=False)  # fmt: skip
    assert ev.bias is not None  # "auto" ran it: the particles end outside the start
    assert ev.log_z < exact - 0.1  # the miss the check is for
    gaps = [ev.bias_gap] + [
        check_bias(jax.random.key(k), ev.target, ev.results).gap for k in (1, 2, 3)
    ]
    assert np.mean(gaps) > 0.1
    assert ev.log_z + max(gaps) < exact + 0.2  # an upper estimate, not far above
    # Bennett's bridge of the two directions recovers most of the miss (measured: −0.04 to
    # −0.10 against the forward run's −0.31; reported by the check, not used by it)
    bridged = [ev.bias.log_z_bennett] + [
        check_bias(jax.random.key(k), ev.target, ev.results).log_z_bennett for k in (1, 2, 3)
    ]
    assert ev.log_z + 0.1 < np.mean(bridged) < exact + 0.1
    assert np.mean(bridged) > exact - 0.15
    if any(c.startswith("bias") for c in ev.checks):
        assert any(f"{ev.bias_gap:.2f} nats above" in c for c in ev.checks)


def test_bias_check_on_an_easy_model_finds_no_gap():
    """A Gaussian target 3× wider than the start (its particles end outside the start, so
    'auto' checks it): the gap is within its noise and nothing warns."""
    model = _TargetModel(lambda z: -0.5 * jnp.sum((z / 3.0) ** 2), 4)
    exact = 4 * math.log(3.0 * math.sqrt(2 * math.pi))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        ev = evidence(jax.random.key(0), model, initial="prior", num_particles=256,
                      num_steps=500, bias_check=True, progress_bar=False)  # fmt: skip
    assert abs(ev.log_z - exact) < 4 * ev.log_z_se + 0.02
    assert abs(ev.bias_gap) < 4 * ev.bias.gap_se + 0.02
    assert abs(ev.log_z_upper - exact) < 4 * ev.bias.log_z_upper_se + 0.02
    assert ev.bias.gradients > 0


def test_a_check_in_doubt_by_its_noise_alone_draws_more_and_stays_right():
    """A Gaussian 3× wider than its start, 6-D, at 250 temperatures. Given a bound that its
    first 128 reverse chains leave in doubt only by their noise (the gap plus two SEs above
    it, and within it at the same gap with 1 + EXTEND times the draws), the check draws
    EXTEND times as many more and pools them: four times the draws, a smaller SE, and the
    pooled reverse estimate and bridge both within four of their SEs of the exact log Z. A
    bound the first draws meet, or one that more draws could not meet, draws nothing more."""
    dim, s = 6, 3.0
    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum((z / s) ** 2),
                                ph.Gaussian(jnp.zeros(dim)))  # fmt: skip
    exact = dim * math.log(s * math.sqrt(2 * math.pi))
    res = ph.hais(jax.random.key(0), target, num_particles=256, num_steps=250,
                  progress_bar=False)  # fmt: skip
    kw = dict(num_draws=128, num_mcmc=100)
    first = check_bias(jax.random.key(1), target, [res], **kw)
    noise = first.log_z_upper_se
    own = res.log_z_se
    now = first.gap + 2 * np.hypot(noise, own)
    then = first.gap + 2 * np.hypot(noise / np.sqrt(1 + EXTEND), own)
    assert then < now
    more = check_bias(jax.random.key(1), target, [res], bound=0.5 * (now + then), **kw)
    assert more.num_draws == (1 + EXTEND) * first.num_draws
    assert more.gradients > 3 * first.gradients
    assert more.log_z_upper_se < first.log_z_upper_se
    assert abs(more.log_z_upper - exact) < 4 * more.log_z_upper_se
    assert abs(more.log_z_bennett - exact) < 4 * more.log_z_bennett_se
    for bound in (now + 0.01, then - 0.01):  # met already; not met by more draws either
        same = check_bias(jax.random.key(1), target, [res], bound=bound, **kw)
        assert same.num_draws == first.num_draws and same.gap == first.gap


def test_only_noise_that_more_draws_would_clear_is_in_doubt():
    """``_inconclusive``: gap + 2 SE above the bound, within it at four times the draws; not
    where it is met already, nor where the gap alone lies too near the bound, nor where the
    forward estimate's own SE keeps it above."""
    assert _inconclusive(-0.036, 0.069, 0.038, 0.1)  # the experts' first rung, as seen
    assert not _inconclusive(-0.10, 0.05, 0.03, 0.1)  # met: −0.10 + 0.12 ≤ 0.1
    assert not _inconclusive(0.08, 0.05, 0.03, 0.1)  # 0.08 + 2·hypot(0.025, 0.03) > 0.1
    assert not _inconclusive(-0.02, 0.05, 0.06, 0.1)  # 2·hypot(0.025, 0.06) = 0.13


def test_auto_checks_a_run_only_beyond_the_start_s_own_outside_fraction():
    """Draws from the start itself leave 5% outside its central 95%: an outside fraction
    within the noise of that 5% (eight schools from its prior ends 3.5-6.2% outside) is no
    reason for 'auto' to check; one well beyond it (a target reaching past the start) is."""
    rng = np.random.default_rng(0)
    quiet = _result(rng.normal(0.0, 0.1, size=512))  # no tail, no failed check
    assert not quiet.checks and not needs_check([quiet])
    bound = suspect_outside(512)
    assert 0.078 < bound < 0.08 and suspect_outside(1000) < bound
    assert not needs_check([dataclasses.replace(quiet, outside_initial=0.062)])
    assert needs_check([dataclasses.replace(quiet, outside_initial=0.09)])


def test_auto_checks_a_lag_only_where_particles_reached_past_the_start():
    """A lag of 0.15 is a reason to check where more than 1% of the particles ended outside
    the start's central 95% (a banana: 35-46% there), not where none did (the 50-D
    regression from its Laplace fit: lag 0.10-0.22 in one of four chains, nothing outside,
    every estimate right, and 'auto' checked 16 and 19 of 20 default calls). An outside
    fraction that is not known leaves the lag the reason it was."""
    rng = np.random.default_rng(0)
    lagging = dataclasses.replace(_result(rng.normal(0.0, 0.1, size=512)), lag=0.15)
    assert not lagging.checks
    assert not needs_check([dataclasses.replace(lagging, outside_initial=0.0)])
    assert not needs_check([dataclasses.replace(lagging, outside_initial=0.01)])
    assert needs_check([dataclasses.replace(lagging, outside_initial=0.02)])
    assert needs_check([dataclasses.replace(lagging, outside_initial=float("nan"))])
    assert not needs_check([dataclasses.replace(lagging, lag=0.05, outside_initial=0.02)])
    # any chain's reason checks the pooled run
    assert needs_check([dataclasses.replace(lagging, outside_initial=0.0),
                        dataclasses.replace(lagging, outside_initial=0.03)])  # fmt: skip


def test_auto_checks_a_khat_only_beyond_its_own_noise():
    """k̂ is fitted to the 3√P largest weights, so its SD is about (1 + k)/√(3√P): 0.16 at 512
    particles. At a flat 0.3 the 5-D regression's default calls were checked on 1 and 3 of 20
    for k̂ of 0.32-0.39, all right, two of them climbing a rung for a check whose SE could not
    bound the bias; 'auto' now asks 0.3 plus one SD of k̂ there, less the more particles."""
    rng = np.random.default_rng(0)
    tailed = _result(rng.normal(0.0, 0.5, size=512))  # a tail k̂ applies to, no check failed
    assert not tailed.checks
    assert estimators.max_relative_weight(tailed.log_weights) > diagnostics.BOUNDED_WEIGHT
    bound = suspect_khat(512)
    assert 0.45 < bound < 0.47 and suspect_khat(1000) < bound and suspect_khat(4000) < 0.4
    assert not needs_check([dataclasses.replace(tailed, pareto_k=0.39)])
    assert needs_check([dataclasses.replace(tailed, pareto_k=0.5)])
    wide = _result(rng.normal(0.0, 0.5, size=4000))
    assert needs_check([dataclasses.replace(wide, pareto_k=0.42)])
    assert not needs_check([dataclasses.replace(tailed, pareto_k=0.42)])
    bounded = _result(rng.normal(0.0, 0.01, size=512))  # no tail: k̂ says nothing
    assert not needs_check([dataclasses.replace(bounded, pareto_k=0.9)])


def test_bias_check_is_skipped_when_asked_and_validated():
    model = _TargetModel(lambda z: -0.5 * jnp.sum((z / 3.0) ** 2), 2)
    ev = evidence(jax.random.key(0), model, initial="prior", num_particles=128, num_steps=200,
                  bias_check=False, progress_bar=False)  # fmt: skip
    assert ev.bias is None and math.isnan(ev.bias_gap)
    with pytest.raises(ValueError, match="bias_check"):
        evidence(jax.random.key(0), model, bias_check="yes")


def test_bias_check_reaches_arviz_and_compare():
    model = _TargetModel(lambda z: -0.5 * jnp.sum((z / 3.0) ** 2), 2)
    ev = evidence(jax.random.key(1), model, initial="prior", num_particles=128, num_steps=200,
                  bias_check=True, progress_bar=False)  # fmt: skip
    idata = arviz_out.from_ais(ev.results, {"z": ev.results[0].particles[None]}, bias=ev.bias)
    ss = arviz_out.group(idata, "sample_stats")
    assert float(ss["bias_gap"]) == pytest.approx(ev.bias_gap)
    assert float(ss["log_marginal_likelihood_reverse"]) == pytest.approx(ev.log_z_upper)
    table = ph.compare_evidence({"idata": idata, "ev": ev, "pair": (0.0, 0.1)})
    assert table.loc["idata", "gap"] == pytest.approx(ev.bias_gap)
    assert table.loc["ev", "gap"] == pytest.approx(ev.bias_gap)
    assert math.isnan(table.loc["pair", "gap"])


def test_a_probe_without_an_se_gets_a_longer_probe_not_the_maximum():
    """A far, narrow target: 200 temperatures from N(0, I) leave k̂ ≥ 0.7 (SE inf). The plan
    grows the probe instead of jumping to max_num_steps, and stays within max_gradients."""
    target = ph.AnnealingTarget(lambda z: -0.5 * jnp.sum(((z - 10.0) / 0.01) ** 2),
                                ph.Gaussian(np.zeros(5)))  # fmt: skip
    budget = 64 * 20_000
    plan = choose_num_steps(jax.random.key(0), target, None, 0.05, num_particles=64,
                            max_num_steps=100_000, max_gradients=budget)  # fmt: skip
    assert plan.probe_steps > 200  # the first probe could not measure the SE
    assert plan.num_steps < 100_000
    assert plan.probe_gradients + 64 * plan.num_steps <= budget
    with pytest.raises(ValueError, match="max_gradients"):
        choose_num_steps(jax.random.key(0), target, None, 0.05, num_particles=64,
                         max_gradients=1000)  # fmt: skip
    # three leapfrog steps a temperature: the probes cost three times the gradients, and the
    # plan stays within the same budget
    plan3 = choose_num_steps(jax.random.key(0), target, None, 0.05, num_particles=64,
                             max_num_steps=100_000, max_gradients=budget,
                             kernel=ph.hais_kernel(num_leapfrog=3))  # fmt: skip
    assert plan3.probe_gradients == 3 * 64 * sum(
        200 * 4**k for k in range(round(math.log(plan3.probe_steps // 200, 4)) + 1)
    )
    assert plan3.probe_gradients + 3 * 64 * plan3.num_steps <= budget


def test_core_hais_runs_the_bias_check_when_asked():
    """ph.hais(bias_check=True): the forward run unchanged, log_z_upper from the reverse
    anneal, the check in settings. On the funnel the reverse estimate lies above the forward
    one (0.05-0.34 nats in every check seen, docs/bias_check.md), beyond 2 SE in 5 of seeds
    0-6 (this one: 0.24 ± 0.06 at an error of -0.26; seed 0's 0.12 ± 0.06 falls just short)."""
    log_density, exact = _funnel()
    target = ph.AnnealingTarget(log_density, ph.Gaussian(np.zeros(10)))
    kw = dict(num_particles=512, num_steps=1000, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ph.EvidenceWarning)
        plain = ph.hais(jax.random.key(1), target, **kw)
        checked = ph.hais(jax.random.key(1), target, bias_check=True, **kw)
    assert math.isnan(plain.log_z_upper) and plain.settings.bias_check is None
    assert checked.log_z == plain.log_z  # the forward run is the same
    check = checked.settings.bias_check
    assert checked.log_z_upper == pytest.approx(checked.log_z + check["gap"])
    assert check["gap"] > 2 * check["gap_se"]  # above, beyond its noise
    assert checked.log_z < exact < checked.log_z_upper + 0.25
    with pytest.raises(ValueError, match="bias_check"):
        ph.hais(jax.random.key(0), target, bias_check="always")


def test_a_misspelt_keyword_fails_at_once_with_a_suggestion():
    """evidence(num_particle=...) was once reported after the pilots had run (47.6 s)."""
    model = _TargetModel(lambda z: -0.5 * jnp.sum(z**2), 2)
    with pytest.raises(TypeError, match=r"'num_particle'.*did you mean 'num_particles'"):
        evidence(jax.random.key(0), model, num_particle=64)
    with pytest.raises(TypeError, match=r"'num_leapfrogs'.*did you mean 'num_leapfrog'"):
        evidence(jax.random.key(0), model, num_leapfrogs=2)


@pytest.mark.parametrize("num_steps", [10, 30])
def test_bennett_bridges_both_directions_to_the_exact_evidence(num_steps):
    """A 20-D Gaussian 3× wider than the start, so few temperatures that the forward estimate
    is mostly 0.6-4 nat low (SE inf; one run in several draws a weight that lands near) and the
    reverse one from exact draws far off too: over four pairs of runs, the bridge of both
    directions' weights is within 4 of its SEs of the exact log Z every time, and on average
    at least twice as close as the forward estimate."""
    dim, s = 20, 3.0
    target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum((z / s) ** 2),
                                initial=ph.Gaussian(jnp.zeros(dim)))  # fmt: skip
    exact = dim * math.log(s * math.sqrt(2 * math.pi))
    forward_errors, bridge_errors = [], []
    for k in range(4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ph.EvidenceWarning)
            fwd = ph.hais(jax.random.key(3 * k), target, num_particles=256, num_steps=num_steps,
                          progress_bar=False)  # fmt: skip
        draws = s * np.asarray(jax.random.normal(jax.random.key(3 * k + 1), (256, dim)))
        rev = reverse_anneal(jax.random.key(3 * k + 2), target, fwd.betas, draws)
        log_z, se = bennett(fwd.log_weights, rev.log_weights, log_z_initial=target.log_z_initial)
        assert np.isfinite(se) and abs(log_z - exact) < 4 * se
        forward_errors.append(abs(fwd.log_z - exact))
        bridge_errors.append(abs(log_z - exact))
    assert np.mean(bridge_errors) < np.mean(forward_errors) / 2
    assert all(np.isnan(bennett([0.0], rev.log_weights)))  # one forward weight: no bridge


def test_a_local_step_runs_check_bridges_the_funnel_from_two_samplers():
    """Neal's funnel from N(0, I) with local steps (the ladder's transition after the funnel's
    signature): the check's MCMC alone leaves its chains in the mouth (docs/bias_check.md), so
    half its reverse chains start from the run's own transition at β = 1, and the bridge's SE
    holds the two halves' disagreement. The bridge is within 3 of its SEs of log Z = 0, and its
    draws reach the neck (v < −3: 16% of the posterior) that the MCMC's leave."""
    log_density, norm = _funnel()
    target = ph.AnnealingTarget(lambda z: log_density(z) - norm, ph.Gaussian(np.zeros(10)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ph.EvidenceWarning)
        res = ph.hais(jax.random.key(0), target, num_particles=512, num_steps=2000,
                      local_steps=True, bias_check=True, progress_bar=False)  # fmt: skip
    both = res.settings.bias_check
    assert both["num_draws"] == 256
    assert abs(both["log_z_bennett"]) < 3 * both["log_z_bennett_se"]
    kernel = ph.hais_kernel(local_steps=True)
    pilot = survey(jax.random.key(9), target, kernel, num_steps=2000)
    own, used = _own_draws(jax.random.key(1), target, kernel, pilot,
                           np.asarray(res.particles), res.log_weights, 256, 400)  # fmt: skip
    assert used == 256 * 400 and own.shape == (256, 10)
    assert 0.1 < np.mean(own[:, 0] < -3.0) < 0.25 and np.mean(own[:, 0] > 3.0) < 0.25
