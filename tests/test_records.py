"""What layers pass each other as typed records: failed checks (a name, a figure and the nats
stated, beside the sentence a warning shows, from the check that makes them to the ArviZ
attributes; no code reads them back from the prose), a run's settings, a kernel's variant."""

import pickle
import warnings

import jax
import numpy as np
import pytest

import ppl_hais as ph
from ppl_hais.checks.diagnostics import evidence_checks
from ppl_hais.checks.ladder import Rung, remaining_gap, shortfall
from ppl_hais.checks.record import Check, names


def test_a_check_is_its_sentence_and_carries_its_figures():
    (khat,) = evidence_checks(khat=0.9, max_weight=20.0, excess=0.3, num_particles=100)
    assert isinstance(khat, Check) and isinstance(khat, str)
    assert (khat.name, khat.figure, khat.over) == ("pareto_k", 0.9, 0.3)
    assert np.isnan(khat.short) and khat.chain is None
    assert str(khat).startswith("pareto_k: Pareto k̂ = 0.90 ≥ 0.7") and khat.message in khat
    back = pickle.loads(pickle.dumps(khat))
    assert back == khat and (back.name, back.figure, back.over) == ("pareto_k", 0.9, 0.3)
    labelled = khat.in_chain(2)
    assert labelled.startswith("chain 2: pareto_k: ") and labelled.chain == 2
    assert names([khat, labelled]) == ("pareto_k",)
    # an excess below what a check states is no figure of it
    (small,) = evidence_checks(khat=0.9, max_weight=20.0, excess=0.01, num_particles=100)
    assert np.isnan(small.over) and "too high" not in small


def test_each_check_names_its_own_figure():
    (bias,) = evidence_checks(bias_gap=0.4, bias_gap_se=0.05)
    assert (bias.name, bias.figure, bias.short) == ("bias", 0.4, 0.8)
    assert "up to 0.80 nats too low" in bias
    (lag,) = evidence_checks(lag=0.5, outside=0.5, num_particles=512)
    assert (lag.name, lag.figure) == ("lag", 0.5)
    (chains,) = evidence_checks(disagreement=5.0)
    assert (chains.name, chains.figure) == ("chains", 5.0)


def test_the_converged_check_states_the_shortfall_its_sentence_says():
    nan = float("nan")
    rungs = (Rung(1000, -10.30, 0.02, ("lag",), nan, 600_000, 0.2),
             Rung(4000, -10.10, 0.02, ("lag",), nan, 2_700_000, 0.6))  # fmt: skip
    (check,) = remaining_gap(rungs, max_gradients=3_000_000)
    assert check.name == "converged" and check.short == pytest.approx(shortfall(rungs))
    assert f"up to {check.short:.2f} nats too low" in check and "the checks lag still" in check
    assert remaining_gap(rungs[:1] + (rungs[1]._replace(failed=()),), max_gradients=1e7) == ()


def test_records_reach_the_arviz_attributes():
    """A run too short for its model warns; its checks are records on the result, and the
    ArviZ attributes hold their sentences and, for code, their names."""
    pm = pytest.importorskip("pymc")
    from ppl_hais.adapters import pymc as php

    y = np.random.default_rng(1).normal(3.0, 0.2, size=200)
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 10.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", mu, sigma, observed=y)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            idata = php.sample_hais(draws=64, num_steps=8, initial="prior", bias_check=False,
                                    random_seed=2, progressbar=False)  # fmt: skip
    attrs = idata.sample_stats.attrs
    failed = attrs["evidence_check_names"].split(",")
    sentences = attrs["evidence_checks"].split("\n")
    assert failed and failed[0] and len(sentences) >= len(failed)
    assert all(any(s.startswith(f"{n}: ") for s in sentences) for n in failed)
    stated = [w for w in seen if issubclass(w.category, ph.EvidenceWarning)]
    assert stated and all(s in str(stated[0].message) for s in sentences)


def test_a_bridge_check_is_a_record_too():
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(2, 500, 1)) + np.array([0.0, 3.0])[:, None, None]  # chains apart
    with pytest.warns(ph.EvidenceWarning, match="rhat"):
        res = ph.bridge_sampling(jax.random.key(0), lambda z: -0.5 * (z**2).sum(), draws)
    rhat = next(c for c in res.checks if c.name == "rhat")
    assert rhat.figure == pytest.approx(res.rhat, rel=1e-3)


def test_a_runs_settings_are_a_record_that_reaches_the_arviz_attributes():
    import jax.numpy as jnp

    from ppl_hais.results.settings import RunSettings

    target = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
                                initial=ph.Gaussian(jnp.zeros(2), 2.0))  # fmt: skip
    runs = [ph.hais(jax.random.key(i), target, num_particles=64, num_steps=50, num_leapfrog=2,
                    progress_bar=False) for i in range(2)]  # fmt: skip
    s = runs[0].settings
    assert isinstance(s, RunSettings) and (s.kernel, s.num_steps, s.num_particles) == (
        "hais", 50, 64)  # fmt: skip
    assert s.gradients_per_particle == 100 and s.num_runs == 1 and s.run_particles is None
    both = ph.AISResult.pooled(runs)
    assert (both.settings.num_runs, both.settings.run_particles) == (2, 64)
    attrs = both.to_arviz()["sample_stats"].attrs
    assert attrs["hais_num_runs"] == "2" and attrs["hais_kernel"] == "hais"
    assert "hais_discrete_acceptance" not in attrs  # not given: no attribute


def test_a_kernels_variant_is_a_field_not_a_name():
    kernel = ph.hais_kernel(local_steps=True)
    mixed = ph.mixed_kernel((True, False))
    assert kernel.local_steps and not kernel.discrete
    assert mixed.discrete and not mixed.local_steps and not ph.hais_kernel().discrete
