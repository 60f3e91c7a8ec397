"""Bridge sampling in the core (ppl_hais.bridge): exact evidences, an independent numpy/scipy
implementation, the error bar under autocorrelation, the checks, the cross-check by annealing."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import ppl_hais as ph
from ppl_hais.bridge import MIN_DRAWS
from ppl_hais.bridge.sampling import bridge
from ppl_hais.model.density import SplitDensity
from ppl_hais.workflow.model_bridge import bridge_evidence

D = 3
MEAN = np.array([1.0, -2.0, 0.5])
COV = np.array([[1.0, 0.6, 0.0], [0.6, 2.0, -0.3], [0.0, -0.3, 0.5]])
EXACT = 0.5 * np.linalg.slogdet(2 * np.pi * COV)[1]  # ∫ exp(−½ (z−m)ᵀΣ⁻¹(z−m)) dz
PREC = np.linalg.inv(COV)


def log_q(z):
    d = z - MEAN
    return -0.5 * d @ PREC @ d


def draws(seed, chains=4, per_chain=1000, rho=0.0):
    """Posterior draws, AR(1) with coefficient ``rho`` in each chain (0: independent)."""
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(chains, per_chain, D))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, per_chain):
        x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho * rho) * e[:, t]
    return MEAN + x @ np.linalg.cholesky(COV).T


@pytest.mark.parametrize("method", ["normal", "warp3", "student_t"])
def test_exact_gaussian(method):
    res = bridge(jax.random.key(1), log_q, draws(0), method=method)
    assert res.converged and not res.checks
    assert abs(res.log_z - EXACT) < 4 * res.log_z_se
    assert 0 < res.log_z_se < 0.02
    assert res.num_draws == 2000 and res.num_proposal == 2000
    assert res.evaluations == (8000 if method == "warp3" else 4000)
    assert res.iterations[-1] == pytest.approx(res.log_z)


def _reference(log_q_np, x, rng):
    """The optimal bridge written out with numpy/scipy (Gronau et al. 2017, Frühwirth-Schnatter
    2004), for independent draws: proposal fitted to the first half, s₁ = s₂ = ½."""
    half = x.shape[1] // 2
    fit, post = x[:, :half].reshape(-1, D), x[:, half:].reshape(-1, D)
    g = stats.multivariate_normal(fit.mean(0), np.cov(fit.T))
    prop = g.rvs(len(post), random_state=rng)
    l1 = log_q_np(post) - g.logpdf(post)
    l2 = log_q_np(prop) - g.logpdf(prop)
    shift = np.median(l1)
    e1, e2 = np.exp(l1 - shift), np.exp(l2 - shift)
    r = 1.0
    for _ in range(1000):
        new = np.mean(e2 / (0.5 * e2 + 0.5 * r)) / np.mean(1 / (0.5 * e1 + 0.5 * r))
        if abs(np.log(new / r)) < 1e-12:
            break
        r = new
    f1 = (e2 / r) / (0.5 * e2 / r + 0.5)
    f2 = 1 / (0.5 * e1 / r + 0.5)
    re2 = np.var(f1, ddof=1) / (len(f1) * f1.mean() ** 2) + np.var(f2, ddof=1) / (
        len(f2) * f2.mean() ** 2
    )
    return np.log(r) + shift, np.sqrt(re2)


def test_matches_a_numpy_scipy_implementation():
    x = draws(3)
    log_q_np = lambda z: -0.5 * np.einsum("ni,ij,nj->n", z - MEAN, PREC, z - MEAN)  # noqa: E731
    ref, ref_se = _reference(log_q_np, x, np.random.default_rng(7))
    res = bridge(jax.random.key(7), log_q, x)
    assert abs(ref - EXACT) < 4 * ref_se
    assert abs(res.log_z - ref) < 4 * np.hypot(res.log_z_se, ref_se)
    assert 0.5 < res.log_z_se / ref_se < 2.0  # the same error measure, other proposal draws


def test_error_bar_counts_autocorrelation():
    iid = bridge(jax.random.key(2), log_q, draws(4))
    sticky = bridge(jax.random.key(2), log_q, draws(4, rho=0.9))
    assert sticky.ess < 0.2 * iid.ess
    assert not iid.checks  # ESS about 2000 against the bar of 4 × 50
    assert "ess" in [c.split(":")[0] for c in sticky.checks]  # about 105: too slow a mix
    assert sticky.log_z_se > 1.5 * iid.log_z_se
    assert abs(sticky.log_z - EXACT) < 4 * sticky.log_z_se
    # coverage of ±2 SE over seeds, autocorrelated draws
    errs = [bridge(jax.random.key(s), log_q, draws(10 + s, per_chain=400, rho=0.8))
            for s in range(12)]  # fmt: skip
    inside = np.mean([abs(r.log_z - EXACT) <= 2 * r.log_z_se for r in errs])
    assert inside >= 0.75


def test_chains_that_disagree_warn():
    x = draws(5)
    x[0] += 3.0 * np.sqrt(np.diag(COV))  # one chain elsewhere: it never met the others
    res = bridge(jax.random.key(0), log_q, x)
    names = {c.split(":")[0] for c in res.checks}
    assert "rhat" in names
    with pytest.warns(ph.EvidenceWarning, match="rhat"):
        ph.bridge_sampling(jax.random.key(0), log_q, x)


def test_bad_input():
    with pytest.raises(ValueError, match=f"at least {MIN_DRAWS}"):
        bridge(jax.random.key(0), log_q, draws(0, per_chain=60))
    x = draws(0)
    x[1, 7, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        bridge(jax.random.key(0), log_q, x)
    with pytest.raises(ValueError, match="shaped"):
        bridge(jax.random.key(0), log_q, np.zeros((2, 3, 4, 5)))
    with pytest.raises(ValueError, match="method"):
        bridge(jax.random.key(0), log_q, draws(0), method="geometric")
    with pytest.raises(ValueError, match="do not belong"):  # a density that is -inf there
        bridge(jax.random.key(0), lambda z: jnp.where(z[0] > 1.0, -jnp.inf, 0.0), draws(0))
    frozen = draws(0)
    frozen[..., 2] = 0.3
    with pytest.raises(ValueError, match="singular"):
        bridge(jax.random.key(0), log_q, frozen)


class _Mixture(SplitDensity):
    """Prior N(0, 3²) in 2-D times a factor making the joint two Gaussian modes at ±2, the
    one at −2 with ``minor`` times the mass of the other."""

    dim, improper = 2, ()
    prior = ph.Gaussian(jnp.zeros(2), 3.0)
    sd = 0.5

    def __init__(self, minor=1.0):
        self.minor = minor

    def log_parts(self, z):
        a = -0.5 * jnp.sum(((z - 2.0) / self.sd) ** 2)
        b = -0.5 * jnp.sum(((z + 2.0) / self.sd) ** 2) + np.log(self.minor)
        prior = self.prior.log_prob(z)
        return prior, jnp.logaddexp(a, b) - prior


MIX_EXACT = np.log(2.0) + np.log(2 * np.pi * _Mixture.sd**2)


def test_cross_check_shows_a_missed_mode():
    rng = np.random.default_rng(0)
    one_mode = 2.0 + _Mixture.sd * rng.normal(size=(4, 1000, 2))  # every chain in +2's mode
    with pytest.warns(ph.EvidenceWarning, match="cross_check"):
        res = bridge_evidence(jax.random.key(3), _Mixture(), one_mode, cross_check=True,
                              num_particles=256, progress_bar=False)  # fmt: skip
    assert abs(res.log_z - (MIX_EXACT - np.log(2))) < 4 * res.log_z_se + 0.01
    cc = res.cross_check
    assert abs(cc.log_z_forward - MIX_EXACT) < 0.05
    # both the cross-check and the mode search state the missing half
    assert res.shortfall == pytest.approx(max(cc.log_z_forward - res.log_z, res.modes.shortfall))
    assert abs(res.shortfall - np.log(2)) < 0.1
    assert (res.modes.num_modes, res.modes.num_visited) == (2, 1)
    assert "cross-check" in res.summary()
    import matplotlib

    matplotlib.use("Agg")
    for obj in (res, res.to_arviz()):  # the result, or its ArviZ output
        axes = ph.results.plots.plot_bridge(obj, truth=MIX_EXACT)
        assert len(axes[1].get_yticks()) == 4 + 1 + 2  # chains, pooled, both anneals
    assert float(res.to_arviz()["sample_stats"]["bias_gap"]) == pytest.approx(res.bias_gap)
    # both modes drawn: the three agree and nothing warns
    both = np.where(rng.random((4, 1000, 1)) < 0.5, one_mode, -one_mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        ok = bridge_evidence(jax.random.key(4), _Mixture(), both, cross_check=True,
                             num_particles=256, progress_bar=False)  # fmt: skip
    assert abs(ok.log_z - MIX_EXACT) < 4 * ok.log_z_se + 0.01
    assert ok.shortfall == 0.0


def test_one_mode_draws_warn_by_default_and_say_by_how_much():
    """Every chain in the major mode of a mixture whose minor mode holds 3.3% of the mass: the
    bridge is 0.034 nat low at an SE of about 0.001; the mode search says so unasked."""
    model, share = _Mixture(minor=0.034), 0.034 / 1.034
    exact = MIX_EXACT - np.log(2.0) + np.log(1.034)
    rng = np.random.default_rng(1)
    one_mode = 2.0 + _Mixture.sd * rng.normal(size=(4, 1000, 2))
    with pytest.warns(ph.EvidenceWarning, match=r"modes: .* about 0\.03\d nats too low"):
        res = bridge_evidence(jax.random.key(5), model, one_mode, progress_bar=False)
    assert exact - res.log_z > 10 * res.log_z_se  # the error bar alone does not cover
    assert abs(res.shortfall - (-np.log(1 - share))) < 0.005  # the stated shortfall does
    assert abs(res.log_z + res.shortfall - exact) < 4 * res.log_z_se + 0.005
    assert "mode search: 2 mode(s), 1 visited" in res.summary()
    attrs = res.to_arviz()["sample_stats"].attrs
    assert (attrs["modes_found"], attrs["modes_visited"]) == (2, 1)
    assert attrs["shortfall"] == pytest.approx(res.shortfall)
    # the same draws spread over both modes in proportion: nothing warns
    both = np.where(rng.random((4, 1000, 1)) < share, -one_mode, one_mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph.EvidenceWarning)
        ok = bridge_evidence(jax.random.key(6), model, both, progress_bar=False)
    assert ok.modes.num_visited == 2 and ok.shortfall == 0.0
    assert abs(ok.log_z - exact) < 4 * ok.log_z_se + 0.005
    off = bridge_evidence(jax.random.key(5), model, one_mode, mode_search=False,
                          progress_bar=False)  # fmt: skip
    assert off.modes is None and np.isnan(off.shortfall) and not off.warning


def test_reporting_arviz_and_compare():
    res = bridge(jax.random.key(1), log_q, draws(0))
    idata = res.to_arviz()
    ss = idata["sample_stats"]
    assert float(ss["log_marginal_likelihood"]) == pytest.approx(res.log_z)
    assert ss["chain_log_marginal_likelihood"].shape == (4,)
    assert ss.attrs["method"] == "bridge_sampling:normal"
    other = (res.log_z - 1.0, 0.01)
    table = ph.compare_evidence({"bridge": res, "idata": idata, "worse": other})
    assert list(table.index[:2]) == ["bridge", "idata"] or list(table.index[:2]) == [
        "idata", "bridge"]  # fmt: skip
    assert table.loc["bridge", "se"] == pytest.approx(res.log_z_se)
    assert table.loc["idata", "log_evidence"] == pytest.approx(res.log_z)
    assert table.loc["worse", "bayes_factor"] == pytest.approx(np.e, rel=1e-6)
    text = res.summary()
    assert "bridge sampling, normal" in text and "per chain" in text
    # each chain's estimate pools to about the whole
    pooled = logsumexp(res.chain_log_z) - np.log(4)
    assert abs(pooled - res.log_z) < 3 * res.log_z_se


def test_divergent_draws_warn():
    x = draws(0)
    few = np.zeros(x.shape[:2], bool)
    few[0, :5] = True  # 5 of 4000 (non-centered eight schools: 0-4): not a warning
    assert not bridge(jax.random.key(0), log_q, x, diverging=few).checks
    many = np.zeros(x.shape[:2], bool)
    many[:, ::50] = True  # 80 of 4000
    res = bridge(jax.random.key(0), log_q, x, diverging=many)
    assert res.divergences == 80 and res.checks[0].startswith("divergences: 80 of the 4000")
    assert int(res.to_arviz()["sample_stats"]["divergences"]) == 80


def test_chain_ess_and_rhat_on_known_chains():
    from ppl_hais.stats.estimators import chain_ess, split_rhat

    rng = np.random.default_rng(1)
    e = rng.normal(size=(4, 4000))
    ar = np.empty_like(e)
    ar[:, 0] = e[:, 0]
    for t in range(1, e.shape[1]):
        ar[:, t] = 0.5 * ar[:, t - 1] + np.sqrt(0.75) * e[:, t]
    assert chain_ess(ar) == pytest.approx(16000 / 3, rel=0.15)  # N (1 − ρ) / (1 + ρ)
    assert chain_ess(e) == pytest.approx(16000, rel=0.15)
    assert abs(split_rhat(e) - 1.0) < 0.01
    assert split_rhat(e + np.array([[0.0], [0.0], [0.0], [1.0]])) > 1.1
    assert np.isnan(chain_ess(np.ones((2, 100))))
