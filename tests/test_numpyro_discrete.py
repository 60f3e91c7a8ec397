"""Discrete latent sites in NumPyro models: summed out by NumPyro's enumeration (funsor) while
the continuous sites are annealed, or, unmarked, moved by a Metropolis step inside the anneal.
Each evidence is checked against its exact value by summation; tolerance 4 × the reported SE
(plus 0.02 nats for the finite-run bias of log Ẑ)."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

pytest.importorskip("funsor")
numpyro = pytest.importorskip("numpyro")
import numpyro.distributions as dist  # noqa: E402
from numpyro.contrib.funsor import config_enumerate  # noqa: E402

from ppl_hais.adapters import numpyro as phn  # noqa: E402

YEARS = 111


def counts(seed=0, switch=40, rates=(3.0, 1.0)):
    """Yearly counts with one change point (like the coal-mining disasters series)."""
    rng = np.random.default_rng(seed)
    t = np.arange(YEARS)
    return rng.poisson(np.where(t < switch, rates[0], rates[1])).astype(float)


@config_enumerate
def switchpoint(y):
    s = numpyro.sample("switchpoint", dist.DiscreteUniform(0, YEARS - 1))
    early = numpyro.sample("early_rate", dist.Exponential(1.0))
    late = numpyro.sample("late_rate", dist.Exponential(1.0))
    with numpyro.plate("years", YEARS):
        rate = jnp.where(jnp.arange(YEARS) < s, early, late)
        numpyro.sample("disasters", dist.Poisson(rate), obs=y)


def phn_groups(idata):
    from ppl_hais.results.arviz import group_names

    return group_names(idata)


def gamma_poisson_segment(y):
    """log ∫ Exp(λ; 1) Π Poisson(y_t; λ) dλ for one segment."""
    a, b, n, total = 1.0, 1.0, len(y), float(np.sum(y))
    return (special.gammaln(a + total) - (a + total) * np.log(b + n) + a * np.log(b)
            - special.gammaln(a) - special.gammaln(np.asarray(y) + 1).sum())  # fmt: skip


def switchpoint_exact(y):
    terms = [gamma_poisson_segment(y[:s]) + gamma_poisson_segment(y[s:]) for s in range(YEARS)]
    return float(special.logsumexp(terms) - np.log(YEARS))


def _run(model, *args, seed=0, **kwargs):
    hais = phn.HAIS(model, num_particles=256, num_steps=500, progress_bar=False, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hais.run(jax.random.key(seed), *args)
    return hais, [w for w in caught if "trust check" in str(w.message)]


def test_switchpoint_evidence_with_the_switchpoint_summed_out():
    y = counts()
    hais, warned = _run(switchpoint, jnp.asarray(y))
    exact = switchpoint_exact(y)
    assert not warned, warned[0].message if warned else ""
    assert abs(hais.log_evidence - exact) < 4 * hais.log_evidence_se + 0.02
    draws = hais.get_samples()
    # the switchpoint's posterior draws come back (infer_discrete), near the true change
    assert draws["switchpoint"].shape == draws["early_rate"].shape
    assert np.issubdtype(draws["switchpoint"].dtype, np.integer)
    assert abs(np.median(draws["switchpoint"]) - 40) <= 5
    idata = hais.to_arviz()
    posterior = idata["posterior"]
    assert posterior["switchpoint"].shape == (1, 256)
    assert "log_likelihood" not in phn_groups(idata)  # conditional on drawn values: left out
    assert float(idata["sample_stats"]["log_marginal_likelihood"][0]) == hais.log_evidence


@config_enumerate
def mixture(y):
    means = numpyro.sample("means", dist.Normal(0.0, 3.0).expand([2]).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Bernoulli(0.3))
        numpyro.sample("y", dist.Normal(means[z], 1.0), obs=y)


def mixture_exact(y):
    """Σ over all 2^n assignments of p(z) N(y; 0, I + 9 A Aᵀ) (A: the assignment indicators)."""
    n, out = len(y), []
    for bits in range(2**n):
        z = np.array([(bits >> i) & 1 for i in range(n)])
        a = np.stack([1 - z, z], axis=1).astype(float)
        log_pz = np.sum(np.where(z == 1, np.log(0.3), np.log(0.7)))
        cov = np.eye(n) + 9.0 * a @ a.T
        out.append(log_pz + stats.multivariate_normal(np.zeros(n), cov).logpdf(y))
    return float(special.logsumexp(out))


def test_mixture_with_per_datum_assignments_matches_the_sum_over_assignments():
    y = np.array([-2.1, -1.4, -2.6, 1.9, 2.4, 1.7, 2.2, -1.8])
    hais, warned = _run(mixture, jnp.asarray(y), seed=1)
    assert not warned, warned[0].message if warned else ""
    assert abs(hais.log_evidence - mixture_exact(y)) < 4 * hais.log_evidence_se + 0.02
    z = hais.get_samples()["z"]
    assert z.shape[1:] == (8,) and set(np.unique(z)) <= {0, 1}


def beta_bernoulli_index(y):
    k = numpyro.sample("k", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(jnp.where(k == 1, p, 0.5)), obs=y)


def test_beta_bernoulli_with_a_discrete_model_index():
    y = np.array([1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1.0])
    n, s = len(y), int(y.sum())
    log_b = special.betaln(2 + s, 2 + n - s) - special.betaln(2, 2)
    exact = np.logaddexp(np.log(0.5) + n * np.log(0.5), np.log(0.5) + log_b)
    hais, warned = _run(beta_bernoulli_index, jnp.asarray(y), seed=2)
    assert not warned, warned[0].message if warned else ""
    assert abs(hais.log_evidence - exact) < 4 * hais.log_evidence_se + 0.02
    # the posterior probability of the index, from the draws, near the exact one
    p1 = math.exp(np.log(0.5) + special.betaln(2 + s, 2 + n - s) - special.betaln(2, 2) - exact)
    assert abs(np.mean(hais.get_samples()["k"]) - p1) < 0.1


def test_batch_dimensions_outside_a_plate_are_refused_under_enumeration():
    @config_enumerate
    def model(y):
        s = numpyro.sample("s", dist.DiscreteUniform(0, YEARS - 1))
        rate = numpyro.sample("rate", dist.Exponential(1.0))
        numpyro.sample("y", dist.Poisson(jnp.where(jnp.arange(YEARS) < s, rate, 1.0)), obs=y)

    with pytest.raises(ValueError, match=r"'y'.*plate"):
        phn.HAIS(model, progress_bar=False).run(jax.random.key(0), jnp.asarray(counts()))


def test_unmarked_discrete_sites_are_moved_by_metropolis():
    """Discrete sites not marked for enumeration are integer coordinates moved by a Metropolis
    step (ph.mixed_kernel), as NumPyro's DiscreteHMCGibbs moves them for NUTS: O(years) per
    density instead of O(years²) for the enumerated switchpoint. Proposals outside the support
    are rejected although NumPyro's DiscreteUniform.log_prob does not check it (accepted, they
    would add prior mass outside 0..110 and the evidence would be off)."""
    y = counts(seed=3)

    def model(y):  # the switchpoint model as a user writes it without config_enumerate
        s = numpyro.sample("switchpoint", dist.DiscreteUniform(0, YEARS - 1))
        early = numpyro.sample("early_rate", dist.Exponential(1.0))
        late = numpyro.sample("late_rate", dist.Exponential(1.0))
        with numpyro.plate("years", YEARS):
            numpyro.sample("disasters", dist.Poisson(jnp.where(jnp.arange(YEARS) < s, early,
                                                               late)), obs=y)  # fmt: skip

    hais, _ = _run(model, jnp.asarray(y), seed=1)
    exact = switchpoint_exact(y)
    assert hais.results[0].settings.kernel == "hais+discrete"
    assert abs(hais.log_evidence - exact) < 4 * hais.evidence.log_z_se + 0.02
    s = np.asarray(hais.get_samples()["switchpoint"])
    assert np.all(s == np.round(s)) and s.min() >= 0 and s.max() <= YEARS - 1
    assert abs(np.median(s) - 40) < 10  # the simulated change after year 40


def test_an_unbounded_discrete_site_is_moved_by_metropolis():
    """n ~ Poisson(λ), λ ~ Exponential(1), y ~ N(n, 1): Σ_n 2^−(n+1) N(y; n, 1) exactly (the
    rate integrates to 1/2^(n+1)); n = −1 is outside the support and must never be taken."""

    def model(y):
        lam = numpyro.sample("lam", dist.Exponential(1.0))
        n = numpyro.sample("n", dist.Poisson(lam))
        numpyro.sample("y", dist.Normal(n, 1.0), obs=y)

    n = np.arange(200)
    exact = float(special.logsumexp(-(n + 1) * np.log(2.0) + stats.norm.logpdf(2.5, n, 1.0)))
    hais, _ = _run(model, jnp.array(2.5), seed=2)
    assert abs(hais.log_evidence - exact) < 4 * hais.evidence.log_z_se + 0.02
    assert np.asarray(hais.get_samples()["n"]).min() >= 0


def test_marked_and_unmarked_discrete_sites_together_are_refused():
    def model(y):
        k = numpyro.sample("k", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
        j = numpyro.sample("j", dist.Bernoulli(0.5))
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(k + j + m, 1.0), obs=y)

    with pytest.raises(ValueError, match=r"\['k'\].*\['j'\].*mark all"):
        phn.HAIS(model, progress_bar=False).run(jax.random.key(0), jnp.array([0.3]))


def test_unbounded_discrete_latent_is_refused_by_name():
    def model(y):
        lam = numpyro.sample("lam", dist.Exponential(1.0))
        n = numpyro.sample("n", dist.Poisson(lam), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(n, 1.0), obs=y)

    with pytest.raises(ValueError, match=r"'n'.*Poisson.*support"):
        phn.HAIS(model, progress_bar=False).run(jax.random.key(0), jnp.array([2.0]))


def test_huge_enumerated_support_is_refused_before_allocating():
    @config_enumerate
    def model(y):
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        s = numpyro.sample("s", dist.DiscreteUniform(0, 50_000_000))
        numpyro.sample("y", dist.Normal(m + s * 1e-7, 1.0), obs=y)

    with pytest.raises(ValueError, match=r"'s'.*50000001"):
        phn.HAIS(model, progress_bar=False).run(jax.random.key(0), jnp.array([2.0]))


def test_a_support_that_depends_on_a_latent_value_is_refused():
    @config_enumerate
    def model(y):
        n = numpyro.sample("n", dist.Uniform(2.0, 6.0))
        k = numpyro.sample("k", dist.Binomial(jnp.floor(n).astype(int), probs=0.5))
        numpyro.sample("y", dist.Normal(k, 1.0), obs=y)

    with pytest.raises(ValueError, match=r"\['k'\].*depends on a latent value"):
        phn.HAIS(model, progress_bar=False).run(jax.random.key(0), jnp.array([2.0]))
