"""PyMC adapter against closed-form evidence (shared/cases), NumPyro agreement, refusals.

Tolerance |log Ẑ − log Z| < 4·SE (see test_estimators.py).
"""

import numpy as np
import pytest
from scipy.special import betaln, gammaln
from scipy.stats import multivariate_normal

pm = pytest.importorskip("pymc")

import ppl_hais as ph  # noqa: E402
from ppl_hais.adapters import pymc as php  # noqa: E402
from ppl_hais.adapters.pymc.target import cached_target  # noqa: E402
from ppl_hais.model.observed import observed_data  # noqa: E402
from ppl_hais.workflow.compare import observed_of  # noqa: E402
from ppl_hais.workflow.runs import MAX_PARTICLES, MOST_SE, PRECISE_SE  # noqa: E402

TOL = 4.0


def evidence(model, **kwargs):
    opts = dict(draws=256, num_steps=1000, random_seed=1, progressbar=False)
    opts.update(kwargs)
    with model:
        idata = php.sample_hais(**opts)
    return idata, *ph.workflow.compare.evidence_of(idata)


def check(est, se, exact):
    assert abs(est - exact) < TOL * se, f"{est:.4f} ± {se:.4f} vs exact {exact:.4f}"


def test_normal_normal_10d_posterior_and_coords():
    y = np.random.default_rng(10).normal(1.0, 1.0, size=(15, 10))
    with pm.Model(coords={"dim": np.arange(10)}) as model:
        mu = pm.Normal("mu", 0.5, 2.0, dims="dim")
        pm.Normal("y", mu, 1.0, observed=y)
    idata, est, se = evidence(model)
    cov = np.eye(15) + 4.0 * np.ones((15, 15))
    check(
        est, se, sum(multivariate_normal(np.full(15, 0.5), cov).logpdf(y[:, j]) for j in range(10))
    )
    post = idata.posterior["mu"]
    assert post.dims == ("chain", "draw", "dim") and post.shape == (1, 256, 10)
    prec = 0.25 + 15
    ess = float(idata.sample_stats["importance_ess"][0])
    np.testing.assert_array_less(
        np.abs(post.values.reshape(-1, 10).mean(0) - (0.125 + y.sum(0)) / prec),
        5 / np.sqrt(prec * ess),
    )
    assert "y" in idata.observed_data


def test_bayesian_linear_regression_20d():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 20))
    y = X @ rng.normal(size=20) + rng.normal(size=50)
    with pm.Model() as model:
        w = pm.Normal("w", 0.0, 1.0, shape=20)
        pm.Normal("y", pm.math.dot(X, w), 1.0, observed=y)
    _, est, se = evidence(model, draws=512, num_steps=3000)
    check(est, se, multivariate_normal(np.zeros(50), np.eye(50) + X @ X.T).logpdf(y))


def test_matrix_vector_products_are_rewritten_to_matvec():
    """``pm.math.dot(X, w)`` (and ``dot(w, X.T)``) is ``Squeeze(Dot(X, ExpandDims(w)))`` in
    PyMC's graph; the adapter's graph has a matrix-vector product instead
    (adapters/pymc/rewrites.py, 1.2-1.6x faster batched over particles) with the same density
    and gradient as PyMC's compiled ones."""
    import jax
    from pytensor.tensor.math import Dot

    from ppl_hais.adapters.pymc.rewrites import MatVec, jaxified_graph, rewritten

    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    y = X @ rng.normal(size=4) + rng.normal(size=30)
    for form in ("X @ w", "w @ X.T"):
        with pm.Model() as model:
            w = pm.Normal("w", 0.0, 1.0, shape=4)
            mu = pm.math.dot(X, w) if form == "X @ w" else pm.math.dot(w, X.T)
            pm.Normal("y", mu, 1.0, observed=y)
        ops = [type(n.op) for n in rewritten(model.value_vars, [model.datalogp]).apply_nodes]
        assert MatVec in ops and Dot not in ops, (form, ops)
        f = jax.jit(lambda z, model=model: sum(jaxified_graph(model.value_vars,
                                                              [model.varlogp, model.datalogp])(z)))
        logp, dlogp = model.compile_logp(sum=True), model.compile_dlogp()
        for z in rng.normal(size=(3, 4)) * 2:
            got, grad = jax.value_and_grad(f)(z)
            assert float(got) == pytest.approx(float(logp({"w": z})), rel=1e-12)
            np.testing.assert_allclose(np.asarray(grad), dlogp({"w": z}), rtol=1e-10)


def test_logistic_regression_by_quadrature_and_the_bernoulli_rewrite():
    """A Bernoulli on the logit scale through the adapter's graph, which computes one softplus
    per datum instead of PyMC's switch of two (adapters/pymc/rewrites.py): far into both tails
    the density equals PyMC's compiled one and the gradient its closed form (PyMC 5.28's own
    compiled gradient is NaN at w = ±30), and the evidence of a one-weight logistic regression
    matches quadrature."""
    import jax
    from scipy import integrate, special, stats

    from ppl_hais.adapters.pymc.rewrites import jaxified_graph, rewritten

    x = np.array([-2.0, -1.0, -0.5, 0.3, 0.8, 1.5, 2.5, 3.0])
    y = np.array([0, 0, 1, 0, 1, 1, 1, 0])
    with pm.Model() as model:
        w = pm.Normal("w", 0.0, 1.5)
        pm.Bernoulli("y", logit_p=w * x, observed=y)

    def softplus_nodes(fgraph):
        return sum("softplus" in str(node.op).lower() for node in fgraph.apply_nodes)

    # counted before PyTensor's elementwise fusion, which hides them in a Composite op (2.31)
    logp_graph = dict(inputs=model.value_vars, outputs=[model.datalogp], fuse=False)
    assert softplus_nodes(rewritten(**logp_graph, ours=False)) == 2
    assert softplus_nodes(rewritten(**logp_graph)) == 1
    f = jax.jit(lambda z: sum(jaxified_graph(model.value_vars,
                                             [model.varlogp, model.datalogp])(z)))  # fmt: skip
    logp, sign = model.compile_logp(sum=True), 2 * y - 1
    for v in (-30.0, -2.0, 0.0, 0.7, 5.0, 30.0):
        got, grad = jax.value_and_grad(f)(np.float64(v))
        assert float(got) == pytest.approx(float(logp({"w": v})), rel=1e-12)  # PyMC's own
        dlogp = -v / 1.5**2 + np.sum(sign * x * special.expit(-sign * v * x))  # closed form
        assert float(grad) == pytest.approx(dlogp, rel=1e-10, abs=1e-12)

    def integrand(v):
        return np.exp(stats.norm(0, 1.5).logpdf(v) + np.sum(special.log_expit((2 * y - 1) * v * x)))

    exact = float(np.log(integrate.quad(integrand, -20, 20, epsabs=0, epsrel=1e-12)[0]))
    _, est, se = evidence(model)
    check(est, se, exact)


def test_beta_binomial_and_gamma_poisson():
    with pm.Model() as bb:
        p = pm.Beta("p", 2.0, 3.0)
        pm.Binomial("k", n=40, p=p, observed=13)
    _, est, se = evidence(bb)
    check(est, se, gammaln(41) - gammaln(14) - gammaln(28) + betaln(15, 30) - betaln(2, 3))

    y = np.random.default_rng(1).poisson(3.0, size=25)
    with pm.Model() as gp:
        lam = pm.Gamma("lam", alpha=2.0, beta=0.5)
        pm.Poisson("y", lam, observed=y)
    _, est, se = evidence(gp)
    a, b, n, s = 2.0, 0.5, y.size, y.sum()
    check(
        est,
        se,
        a * np.log(b)
        - gammaln(a)
        + gammaln(a + s)
        - (a + s) * np.log(b + n)
        - gammaln(y + 1).sum(),
    )


def nig_data():
    return np.random.default_rng(0).normal(1.0, 1.5, size=30)


def nig_exact(y):
    n, k0, a0, b0, m0, ybar = y.size, 2.0, 3.0, 2.0, 0.5, y.mean()
    kn, an = k0 + n, a0 + n / 2
    bn = b0 + 0.5 * np.sum((y - ybar) ** 2) + k0 * n * (ybar - m0) ** 2 / (2 * kn)
    return (
        gammaln(an)
        - gammaln(a0)
        + a0 * np.log(b0)
        - an * np.log(bn)
        + 0.5 * np.log(k0 / kn)
        - n / 2 * np.log(2 * np.pi)
    )


def test_normal_inverse_gamma_agrees_with_numpyro_and_closed_form():
    y = nig_data()
    with pm.Model() as model:
        s2 = pm.InverseGamma("sigma2", 3.0, 2.0)
        mu = pm.Normal("mu", 0.5, pm.math.sqrt(s2 / 2.0))
        pm.Deterministic("sd", pm.math.sqrt(s2))
        pm.Normal("y", mu, pm.math.sqrt(s2), observed=y)
    idata, est, se = evidence(model, chains=2, idata_kwargs={"log_likelihood": True})
    check(est, se, nig_exact(y))
    assert set(idata.posterior.data_vars) == {"sigma2", "mu", "sd"}
    assert idata.log_likelihood["y"].shape == (2, 256, 30)

    numpyro = pytest.importorskip("numpyro")
    import jax
    import jax.numpy as jnp
    import numpyro.distributions as dist

    from ppl_hais.adapters import numpyro as phn

    def np_model(y=None):
        s2 = numpyro.sample("sigma2", dist.InverseGamma(3.0, 2.0))
        mu = numpyro.sample("mu", dist.Normal(0.5, jnp.sqrt(s2 / 2.0)))
        with numpyro.plate("n", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, jnp.sqrt(s2)), obs=y)

    h = phn.HAIS(np_model, num_particles=256, num_steps=1000, progress_bar=False)
    h.run(jax.random.key(3), y=jnp.asarray(y))
    diff = h.log_evidence - est
    assert abs(diff) < TOL * np.hypot(h.log_evidence_se, se)


def test_dirichlet_multinomial_and_laplace_start():
    alpha = np.array([1.0, 2.0, 0.5, 3.0])
    counts = np.array([5, 12, 1, 20])
    with pm.Model() as model:
        p = pm.Dirichlet("p", a=alpha)
        pm.Multinomial("c", n=int(counts.sum()), p=p, observed=counts)
    n = counts.sum()
    exact = (
        gammaln(n + 1)
        - gammaln(counts + 1).sum()
        + gammaln(alpha.sum())
        - gammaln(n + alpha.sum())
        + np.sum(gammaln(counts + alpha) - gammaln(alpha))
    )
    _, est, se = evidence(model)
    check(est, se, exact)
    _, est, se = evidence(model, initial="laplace", num_steps=300)
    check(est, se, exact)


def test_local_steps_reach_the_run():
    """``sample_hais(local_steps=True)`` anneals with per-particle step sizes, exactly."""
    y = np.random.default_rng(4).normal(1.0, 1.0, size=(15, 2))
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.5, 2.0, shape=2)
        pm.Normal("y", mu, 1.0, observed=y)
    idata, est, se = evidence(model, local_steps=True, num_steps=500)
    cov = np.eye(15) + 4.0 * np.ones((15, 15))
    exact = sum(multivariate_normal(np.full(15, 0.5), cov).logpdf(y[:, j]) for j in range(2))
    check(est, se, exact)
    assert idata.sample_stats.attrs["hais_kernel"] == "hais_local"


def test_potential_counts_as_likelihood():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Potential("f", -0.5 * (mu - 1.0) ** 2)
    _, est, se = evidence(model)
    check(est, se, -0.25 - 0.5 * np.log(2))


def test_comparison_against_smc_table():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3))
    y = 1.5 * X[:, 0] - 1.0 * X[:, 1] + rng.normal(size=60)
    runs = {}
    for k in (1, 2, 3):
        with pm.Model() as m:
            w = pm.Normal("w", 0.0, 1.0, shape=k)
            pm.Normal("y", pm.math.dot(X[:, :k], w), 1.0, observed=y)
        runs[f"{k} predictors"], est, se = evidence(m, num_steps=500)
        check(
            est, se, multivariate_normal(np.zeros(60), np.eye(60) + X[:, :k] @ X[:, :k].T).logpdf(y)
        )
    table = ph.compare_evidence(runs)
    assert table.index[0] == "2 predictors"


def test_evidences_over_different_data_are_refused_smc_too():
    """sample_hais records what it conditions on; pm.sample_smc's output is read from its
    observed_data group: over the same y they compare (the digest reads values, not names or
    dtypes: PyMC's 'y' against a NumPyro 'obs' in float32), over 40 of its 60 they are
    refused, saying so."""
    y = np.random.default_rng(5).normal(0.4, 1.0, size=60)

    def fitted(data):
        with pm.Model() as m:
            mu = pm.Normal("mu", 0.0, 1.0)
            pm.Normal("y", mu, 1.0, observed=data)
        return m

    idata, _, _ = evidence(fitted(y), draws=128, num_steps=200)
    with fitted(y[:40]):
        smc = pm.sample_smc(draws=200, chains=2, progressbar=False, random_seed=3,
                            compute_convergence_checks=False)  # fmt: skip
    assert idata["sample_stats"].attrs["observed_size"] == 60
    with pytest.raises(ValueError, match=r"'hais': 60 observed values(.|\n)*'smc': 40"):
        ph.compare_evidence({"hais": idata, "smc": smc})
    with fitted(y):
        smc = pm.sample_smc(draws=200, chains=2, progressbar=False, random_seed=3,
                            compute_convergence_checks=False)  # fmt: skip
    numpyro_record = observed_data({"obs": y.astype(np.float32)})
    assert observed_of(smc) == numpyro_record == observed_of(idata)
    assert len(ph.compare_evidence({"hais": idata, "smc": smc})) == 2



# ------------------------------------------------------------------------------ refusals


def test_refusals():
    with pm.Model() as flat:
        mu = pm.Flat("mu")
        pm.Normal("y", mu, 1.0, observed=np.array([0.1, 0.4]))
    with pytest.raises(ValueError, match=r"\['mu'\] have an improper prior.*initial='laplace'"):
        evidence(flat)

    with pm.Model() as nolik:
        pm.Normal("mu", 0.0, 1.0)
    with pytest.raises(ValueError, match="neither observed variables nor Potentials"):
        evidence(nolik)


def test_flat_prior_with_laplace_start():
    y = np.array([0.1, 0.4, -0.3])
    with pm.Model() as flat:
        mu = pm.Flat("mu")
        pm.Normal("y", mu, 1.0, observed=y)
    with pytest.warns(UserWarning, match=r"\['mu'\] have an improper .* arbitrary constant"):
        _, est, se = evidence(flat, initial="laplace", num_steps=300)
    check(est, se, -0.5 * np.sum((y - y.mean()) ** 2) - np.log(2 * np.pi) - 0.5 * np.log(3))


def test_repeat_calls_reuse_compilation_and_follow_set_data():
    rng = np.random.default_rng(3)
    y = rng.normal(size=8)
    x1, x2 = rng.normal(size=8), 3.0 * rng.normal(size=8)

    def exact(x):
        return multivariate_normal(np.zeros(8), np.eye(8) + np.outer(x, x)).logpdf(y)

    with pm.Model() as model:
        x = pm.Data("x", x1)
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu * x, 1.0, observed=y)
    _, est, se = evidence(model)
    check(est, se, exact(x1))
    target = cached_target(model)
    _, est, se = evidence(model, random_seed=2)  # same model and data: same compiled target
    check(est, se, exact(x1))
    assert cached_target(model) is target
    with model:
        pm.set_data({"x": x2})
    _, est, se = evidence(model)  # new data: recompiled, the evidence follows it
    assert cached_target(model) is not target
    check(est, se, exact(x2))
    assert abs(exact(x2) - exact(x1)) > 10 * se
    target = cached_target(model)
    with model:
        pm.Normal("z", mu, 1.0, observed=0.3)  # a new variable: a new graph, a new target
    assert cached_target(model) is not target


def test_the_adapter_writes_nothing_onto_the_model_and_keeps_it_no_longer_than_the_user():
    """What a call builds once per model (its graphs, its compiled target) is kept beside the
    model, not on it, and goes with it: a model the user drops is freed, cache and all."""
    import gc
    import weakref

    from ppl_hais.adapters.pymc import target as adapter

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=np.array([0.1, 0.3]))
    before = set(vars(model))
    evidence(model)
    assert cached_target(model) is cached_target(model) and model in adapter._TARGETS
    assert set(vars(model)) == before  # no attribute of ours
    alive, kept = weakref.ref(model), len(adapter._TARGETS)
    del model, mu
    gc.collect()
    assert alive() is None and len(adapter._TARGETS) <= kept - 1  # its entry went with it


def test_calls_given_one_memory_share_its_tuning_and_calls_without_one_do_not():
    """``php.Memory()`` passed to two calls on the same model and data: the second runs no
    pilot (fewer gradients) and, with the same seed, gives the first call's estimate to the
    last digit. Without a memory each call tunes from its own seed and spends the same."""
    from ppl_hais.results.arviz import group

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=np.array([0.1, 0.3, -0.2]))
    memory = php.Memory()
    runs = [evidence(model, memory=memory) for _ in range(2)] + [evidence(model)]
    spent = [group(idata, "sample_stats").attrs["gradients"] for idata, *_ in runs]
    (_, a, se_a), (_, b, se_b), (_, c, _) = runs
    assert len(memory) == 1 and spent[1] < spent[0] == spent[2]
    assert (a, se_a) == (b, se_b) == (c, se_a)  # one seed: the same pilot, the same run
    check(a, se_a, -0.5 * np.log(np.linalg.det(2 * np.pi * (np.eye(3) + 1.0)))
          - 0.5 * np.array([0.1, 0.3, -0.2]) @ np.linalg.solve(np.eye(3) + 1.0,
                                                              np.array([0.1, 0.3, -0.2])))


def test_a_model_over_the_same_or_other_data_reuses_the_compiled_programs():
    """A notebook re-runs the cell that builds the model, or builds it over other observed
    values of the same shape: the target equals the first one (its log
    density graph, with the observed values as its inputs), so the annealer's compiled
    programs are reused, the data passed as their arguments. The same data and seed give the
    same result; other data their own evidence, and their own record of what they condition
    on."""
    from ppl_hais.runtime.structure import split
    from ppl_hais.starts import prior_target

    rng = np.random.default_rng(4)
    x = rng.normal(size=8)
    y1, y2 = rng.normal(size=8), 2.0 + rng.normal(size=8)

    def build(y, data=False):
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 1.0)
            pm.Normal("y", mu * x, 1.0, observed=pm.Data("y_obs", y) if data else y)
        return model

    def exact(y):
        return multivariate_normal(np.zeros(8), np.eye(8) + np.outer(x, x)).logpdf(y)

    first, again, other = build(y1), build(y1.copy()), build(y2)
    a, b, c = (cached_target(m) for m in (first, again, other))
    assert a is not b and a == b and hash(a) == hash(b) and a.prior == b.prior
    assert a == c and a.observed_data == b.observed_data != c.observed_data
    # pm.Data (shared variables) may enter the graph beyond the observed values (PyMC reads
    # the observed variable's shape from it): compared by value, so other data compile anew
    assert cached_target(build(y1, data=True)) != cached_target(build(y2, data=True))
    structure = lambda t: split(prior_target(t))  # noqa: E731 - what keys the programs
    (sa, da), (sb, _), (sc, dc) = structure(a), structure(b), structure(c)
    assert sa == sb == sc and not np.array_equal(da[0], dc[0])
    (_, est1, se1), (_, est2, se2), (_, est3, se3) = (evidence(m) for m in (first, again, other))
    assert (est1, se1) == (est2, se2)
    check(est1, se1, exact(y1))
    check(est3, se3, exact(y2))
    assert abs(exact(y2) - exact(y1)) > 10 * se1


def test_other_data_replace_only_the_observed_values():
    """A model built over zeros whose mean holds ``0.0 * x`` (which PyTensor may fold to zeros
    too): over other data its log density is the model's built over them, term for term (the
    observed values are the density's inputs from the start, so no equal constant elsewhere
    in the graph is taken for the data)."""
    import jax

    from ppl_hais.adapters.pymc.target import PyMCTarget

    rng = np.random.default_rng(2)
    x, y = np.tile([-0.5, 0.5], 10), rng.normal(size=20)

    def build(data):
        with pm.Model() as model:
            a = pm.Normal("a", 0.0, 1.0)
            sigma = pm.HalfNormal("sigma", 1.0)
            pm.Normal("y", a + 0.0 * x, sigma, observed=data)
        return model

    moved = PyMCTarget(build(np.zeros(20))).with_data({"y": y})
    direct = PyMCTarget(build(y))
    with jax.enable_x64(True):
        for z in rng.normal(size=(3, 2)):
            assert np.allclose(moved.log_parts(z), direct.log_parts(z), rtol=1e-12, atol=0)


def test_cores_sets_the_particle_groups(monkeypatch):
    """``cores=`` is pm.sample_smc's keyword: here it sets how many cores the particles are
    split over (groups of the pilot's 64 particles where that gives one to eight per core,
    past that of 512, the last one padded by at most 1/16 of the particles, else two per core;
    eight per core run at once), for this call only."""
    from ppl_hais.annealing import execution

    monkeypatch.delenv("PPL_HAIS_CPU_THREADS", raising=False)  # the suite's cap of 1 group
    with execution.using_cores(1):
        assert execution.layout(1000) == (2, 512) and execution.layout(512) == (8, 64)
        assert execution.layout(4000) == (8, 512)  # 4 chains: 96 particles of padding
        assert execution.layout(1100) == (18, 64)  # 3 × 512 would pad 436
        assert execution.concurrent_groups() == 8
        with execution.using_cores(3):
            assert execution.layout(1000) == (16, 64)  # 24 particles of padding
            assert execution.layout(512) == (8, 64)  # of 64, as the pilot
            assert execution.layout(900) == (6, 150)  # 15 × 64 would pad 60 > 900 / 16
        with execution.using_cores(8):
            assert execution.layout(512) == (8, 64)  # one per core: the pilot's program
            assert execution.layout(256) == (8, 32)  # 4 groups of 64 would leave cores idle
        assert execution.layout(1000) == (2, 512)
    seen = []
    real = execution.layout
    monkeypatch.setattr(execution, "layout",
                        lambda n: seen.append(execution._CORES.get()) or real(n))  # fmt: skip
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=np.array([0.2, -0.1]))
    evidence(model, num_steps=100, cores=1)
    assert seen and set(seen) == {1}
    assert execution._CORES.get() is None  # the setting ends with the call


def test_prior_draws_at_once_match_the_per_draw_loop():
    """The population drawn by one vectorized call (adapters/pymc/prior.py) has the prior the
    per-draw loop (pm.draw's way) gives: a two-sample KS test per coordinate, and a child's
    draw follows its own parent's (th − mu has the child's sd). A model whose graph cannot be
    vectorized (an LKJ Cholesky factor) falls back to the loop."""
    from scipy.stats import ks_2samp

    from ppl_hais.adapters.pymc.prior import PriorSampler

    y = np.array([28.0, 8.0, -3.0, 7.0])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        th = pm.Normal("th", mu, tau, shape=4)
        pm.Dirichlet("w", np.ones(3))
        pm.Normal("near", mu, 0.1)
        pm.Normal("y", th, 10.0, observed=y)
    target = cached_target(model)
    shapes = target.shapes
    at_once, loop = PriorSampler(model, shapes), PriorSampler(model, shapes, vectorize=False)
    assert at_once.vectorized and not loop.vectorized
    a = target.ravel(at_once(4000, seed=1))
    b = target.ravel(loop(4000, seed=2))
    assert a.shape == b.shape == (4000, target.dim)
    pvalues = [ks_2samp(a[:, j], b[:, j]).pvalue for j in range(target.dim)]
    assert min(pvalues) > 0.001 / target.dim, pvalues  # Bonferroni at 0.1%
    near = a[:, -1] - a[:, 0]  # "near" − mu: the child's own noise, sd 0.1
    assert abs(np.std(near) - 0.1) < 0.01
    again = [target.ravel(at_once(5, seed=s)) for s in (3, 3, 4)]
    np.testing.assert_array_equal(again[0], again[1])
    assert not np.allclose(again[0], again[2])

    # integer, zero-sum and data-shaped variables batch too, and keep their prior
    with pm.Model() as mixed:
        x = pm.Data("x", np.arange(5.0))
        p = pm.Beta("p", 2.0, 2.0)
        k = pm.Bernoulli("k", p)
        z = pm.ZeroSumNormal("z", sigma=2.0, shape=3)
        b = pm.Normal("b", z.sum() + k, 1.0, shape=x.shape)
        pm.Normal("y", b, 1.0, observed=np.ones(5))
    target = cached_target(mixed)
    at_once = PriorSampler(mixed, target.shapes)
    loop = PriorSampler(mixed, target.shapes, vectorize=False)
    assert at_once.vectorized
    a, b = target.ravel(at_once(3000, seed=1)), target.ravel(loop(3000, seed=2))
    pvalues = [ks_2samp(a[:, j], b[:, j]).pvalue for j in range(target.dim)]
    assert min(pvalues) > 0.001 / target.dim, pvalues

    # a HalfCauchy below another variable is |Cauchy| inlined, which batches (PyTensor could
    # not batch PyMC's symbolic HalfCauchy); an LKJ Cholesky factor's sd_dist does not
    with pm.Model() as nested:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.HalfCauchy("s", pm.math.exp(mu))
        pm.Normal("y", mu, 1.0, observed=[0.5])
    target = cached_target(nested)
    at_once, loop = PriorSampler(nested, target.shapes), PriorSampler(nested, target.shapes, False)
    assert at_once.vectorized
    a, b = target.ravel(at_once(3000, seed=1)), target.ravel(loop(3000, seed=2))
    assert min(ks_2samp(a[:, j], b[:, j]).pvalue for j in range(target.dim)) > 0.001 / target.dim
    with pm.Model() as lkj:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.LKJCholeskyCov("c", n=2, eta=2.0, sd_dist=pm.Exponential.dist(1.0))
        pm.Normal("y", mu, 1.0, observed=[0.5])
    fallback = PriorSampler(lkj, cached_target(lkj).shapes)
    assert not fallback.vectorized
    assert [np.shape(x) for x in fallback(7, seed=0)] == [(7,), (7, 3)]


def test_prior_draws_need_no_scipy_stats():
    """PyTensor draws HalfNormal, HalfCauchy (inside PyMC's symbolic one), Cauchy and Student-t
    variables through scipy.stats, whose import a process's first call would pay; the prior
    sampler draws them with NumPy's generator instead, from the same distributions (a KS test
    per variable against the exact one, Bonferroni at 0.1%)."""
    from scipy import stats

    from ppl_hais.adapters.pymc import prior

    with pm.Model() as model:
        pm.HalfNormal("hn", 2.0)
        pm.HalfCauchy("hc", 5.0)
        pm.Cauchy("c", 1.0, 2.0)
        pm.StudentT("t", nu=3.0, mu=-1.0, sigma=2.0, shape=2)
        pm.Normal("y", 0.0, 1.0, observed=[0.5])
    sampler = prior.PriorSampler(model, cached_target(model).shapes)
    nodes = sampler._fn.maker.fgraph.apply_nodes
    assert sampler.vectorized and not any(type(n.op) in prior._NUMPY_DRAWS for n in nodes)
    hn, hc, c, t = sampler(4000, seed=3)  # value variables: log hn, log hc, c, t
    exact = [(np.exp(hn), stats.halfnorm(scale=2.0)), (np.exp(hc), stats.halfcauchy(scale=5.0)),
             (c, stats.cauchy(1.0, 2.0)), (t[:, 0], stats.t(3.0, -1.0, 2.0)),
             (t[:, 1], stats.t(3.0, -1.0, 2.0))]  # fmt: skip
    pvalues = [stats.kstest(x, d.cdf).pvalue for x, d in exact]
    assert min(pvalues) > 0.001 / len(exact), pvalues
    assert t.shape == (4000, 2) and not np.allclose(t[:, 0], t[:, 1])


def test_an_ordered_transform_sets_the_prior_aside():
    """PyMC draws from the prior without a variable's transform, so an ``ordered`` vector's
    prior draws are unordered, about half of them for two means (NaN coordinates in the
    unconstrained space). ``initial="auto"`` anneals from the Laplace fit instead and says
    what the estimate is (the prior restricted to the ordered cone, not renormalized there,
    and the prior mass kept there, from 4096 draws: 0.5 ± 0.008);
    ``initial="prior"`` refuses, naming the cause. Exact: the two-mean mixture's integral
    over the cone by quadrature. (``pm.sample_smc`` gave −160.5 for −125.4 on such a model,
    silently.)"""
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.normal(-2.0, 1.0, 15), rng.normal(2.0, 1.0, 15)])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 3.0, shape=2, initval=[-1.0, 1.0],
                       transform=pm.distributions.transforms.ordered)  # fmt: skip
        pm.NormalMixture("y", w=np.array([0.5, 0.5]), mu=mu, sigma=1.0, observed=y)
    with pytest.warns(UserWarning, match="set the model's prior aside") as record:
        idata, est, se = evidence(model)
    assert idata.sample_stats.attrs["hais_initial"] == "laplace"
    note = next(str(w.message) for w in record if "aside" in str(w.message))
    kept = float(note.split("keeps about ")[1].split()[0])
    assert abs(kept - 0.5) < 0.04, note  # the cone holds half the prior's mass (4096 draws)
    g = np.linspace(-10.0, 10.0, 801)
    a, b = np.meshgrid(g, g, indexing="ij")
    log_lik = sum(np.logaddexp(-0.5 * (v - a) ** 2, -0.5 * (v - b) ** 2) for v in y)
    log_lik = log_lik + len(y) * (np.log(0.5) - 0.5 * np.log(2 * np.pi))
    log_prior = -0.5 * (a**2 + b**2) / 9.0 - np.log(2 * np.pi * 9.0)
    log_joint = np.where(a < b, log_lik + log_prior, -np.inf)
    exact = float(np.logaddexp.reduce(log_joint.ravel()) + 2 * np.log(g[1] - g[0]))
    check(est, se, exact)
    with pytest.raises(ph.AnnealingError, match="ordered"):
        evidence(model, initial="prior")


def test_heavy_tails_get_the_tail_start_by_default():
    """As tests/test_numpyro.py's: independent Cauchy coordinates (evidence 1) through a
    N(0, 1) prior and a Potential; the default call anneals from the tail start."""
    with pm.Model() as model:
        z = pm.Normal("z", 0.0, 1.0, shape=4)
        pm.Potential("tails", pm.logp(pm.Cauchy.dist(0.0, 1.0), z).sum()
                     - pm.logp(pm.Normal.dist(0.0, 1.0), z).sum())  # fmt: skip
    with model:
        idata = php.sample_hais(random_seed=3, progressbar=False)
    est, se = ph.workflow.compare.evidence_of(idata)
    assert idata["sample_stats"].attrs["hais_initial"] == "laplace_t"
    assert not idata["sample_stats"].attrs.get("evidence_checks")
    check(est, se, 0.0)


def test_a_warning_on_a_centered_hierarchy_names_the_variables_to_non_center():
    """θ_i ~ N(0, τ) written centered: a failed check's warning names θ and the non-centered
    form; written non-centered (θ = τ·z, a Deterministic), or a regression whose only latent
    scale is the noise's, no note."""
    from ppl_hais.adapters.pymc.graph import centered_variables

    y = np.array([25.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    with pm.Model() as centered:
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Normal("theta", 0.0, tau, shape=8)
        pm.Normal("y", theta, 0.5, observed=y)
    with pytest.warns(ph.EvidenceWarning) as caught:  # 2 temperatures: sure to fail a check
        evidence(centered, draws=64, num_steps=2, initial="prior")
    note = str(caught[0].message).split("For this model: ")[1]
    assert "['theta']" in note and "theta_z = pm.Normal('theta_z', 0, 1" in note
    with pm.Model() as noncentered:
        tau = pm.HalfCauchy("tau", 5.0)
        z = pm.Normal("theta_z", 0.0, 1.0, shape=8)
        pm.Normal("y", pm.Deterministic("theta", tau * z), 0.5, observed=y)
    with pm.Model() as regression:
        w = pm.Normal("w", 0.0, 1.0)
        pm.Normal("y", w * np.ones(3), pm.HalfNormal("s", 1.0), observed=np.ones(3))
    assert centered_variables(noncentered) == centered_variables(regression) == []


def test_a_gaussian_random_walk():
    """A latent ``pm.GaussianRandomWalk``: 40 states observed in noise (exact: y is jointly
    Gaussian)."""
    rng = np.random.default_rng(1)
    n = 40
    y = np.cumsum(rng.normal(0.0, 0.3, n)) + rng.normal(0.0, 0.5, n)
    with pm.Model() as walk:
        z = pm.GaussianRandomWalk("z", sigma=0.3, init_dist=pm.Normal.dist(0.0, 1.0), shape=n)
        pm.Normal("y", z, 0.5, observed=y)
    steps = np.tril(np.ones((n, n))) * np.r_[1.0, np.full(n - 1, 0.3)]
    cov = steps @ steps.T + 0.25 * np.eye(n)
    _, est, se = evidence(walk)
    check(est, se, multivariate_normal(np.zeros(n), cov).logpdf(y))


def test_a_gp_marginal_likelihood():
    """``pm.gp.Marginal`` with a Gamma prior on the lengthscale (exact: a 1-D integral of the
    GP's marginal likelihood, on a grid)."""
    rng = np.random.default_rng(2)
    x = np.linspace(0.0, 5.0, 25)
    y = np.sin(x) + rng.normal(0.0, 0.2, 25)
    with pm.Model() as gp:
        ls = pm.Gamma("ls", 2.0, 1.0)
        f = pm.gp.Marginal(cov_func=pm.gp.cov.ExpQuad(1, ls=ls))
        f.marginal_likelihood("y", X=x[:, None], y=y, sigma=0.2)
    grid = np.linspace(1e-3, 12.0, 6001)
    k = np.exp(-0.5 * (x[:, None] - x) ** 2 / grid[:, None, None] ** 2) + 0.04 * np.eye(25)
    _, log_det = np.linalg.slogdet(k)
    quad = y @ np.linalg.solve(k, np.broadcast_to(y[:, None], (grid.size, 25, 1)))[..., 0].T
    log_f = -0.5 * (log_det + quad + 25 * np.log(2 * np.pi)) + np.log(grid) - grid
    exact = np.logaddexp.reduce(log_f) + np.log(grid[1] - grid[0])  # Gamma(2, 1): t e^{-t}
    _, est, se = evidence(gp)
    check(est, se, exact)


def test_a_rung_topped_up_with_particles_keeps_the_draws_per_chain():
    """As in test_numpyro: a rung that passes at an SE above 0.05 runs again and pools the
    particles (ppl_hais.workflow.runs);
    the posterior keeps ``draws`` a chain, the estimate is exact."""
    y = np.linspace(-2.0, 2.0, 10)
    with pm.Model() as model:
        z = pm.Normal("z", 0, 3, shape=10)
        pm.Normal("y", z, 1.0, observed=y)
    exact = float(np.sum(-0.5 * y**2 / 10.0 - 0.5 * np.log(2 * np.pi * 10.0)))
    idata = php.sample_hais(model=model, draws=64, random_seed=0, initial="prior",
                            progressbar=False)  # fmt: skip
    st = idata.sample_stats
    assert int(st.attrs["hais_num_runs"]) > 1 and dict(idata.posterior.sizes)["draw"] == 64
    se = float(st["log_evidence_se"])
    rung, gap = (float(st[f"ladder_{k}"][-1]) for k in ("log_marginal_likelihood_se", "bias_gap"))
    capped = int(st.attrs["hais_num_particles"]) == MAX_PARTICLES * 64  # at most 8x the run's
    assert rung <= (MOST_SE if np.isfinite(gap) else PRECISE_SE) or capped  # 0.05: check due
    assert se <= MOST_SE and not st.attrs["evidence_checks"]
    assert abs(float(st["log_evidence"]) - exact) < 4 * se


def test_importing_the_adapter_leaves_the_processs_devices_alone():
    """``pymc.sampling.jax`` sets ``XLA_FLAGS`` to 100 host devices when it is imported (PyMC
    5.28 and 6.4), under which JAX 0.10 anneals at half speed; the adapter freezes a graph's
    shared variables itself and does not import it."""
    import os
    import subprocess
    import sys

    code = ("import os, sys; from ppl_hais.adapters import pymc; "
            "print('pymc.sampling.jax' in sys.modules, os.environ.get('XLA_FLAGS'))")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600, check=True)  # fmt: skip
    assert out.stdout.splitlines()[-1].split() == ["False", "None"]
