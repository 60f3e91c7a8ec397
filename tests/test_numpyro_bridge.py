"""phn.bridge_sampling: a NumPyro MCMC's draws in, the evidence out, against exact values."""

import os
import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, NUTS
from scipy import integrate, special, stats

import ppl_hais as ph
from ppl_hais.adapters import numpyro as phn

rng = np.random.default_rng(4)
X = rng.normal(size=(40, 3))
Y = X @ np.array([0.5, -1.0, 0.3]) + rng.normal(size=40)
COUNTS = np.array([5.0, 3, 12, 0, 7])
ALPHA = np.array([1.0, 2, 1, 0.5, 1.5])


def exact():
    reg = stats.multivariate_normal(np.zeros(40), np.eye(40) + X @ X.T).logpdf(Y)
    n = COUNTS.sum()
    dm = (special.gammaln(n + 1) - special.gammaln(COUNTS + 1).sum()
          + special.gammaln(ALPHA.sum()) - special.gammaln(ALPHA.sum() + n)
          + (special.gammaln(ALPHA + COUNTS) - special.gammaln(ALPHA)).sum())  # fmt: skip
    return float(reg + dm)


def model(x, y, counts):
    """A conjugate regression and a Dirichlet-multinomial (a simplex): evidence in closed form."""
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([3]).to_event(1))
    numpyro.sample("y", dist.Normal(x @ w, 1.0).to_event(1), obs=y)
    p = numpyro.sample("p", dist.Dirichlet(jnp.asarray(ALPHA)))
    numpyro.deterministic("p_max", jnp.max(p))
    numpyro.sample("counts", dist.Multinomial(int(COUNTS.sum()), p), obs=counts)


DATA = dict(x=jnp.asarray(X), y=jnp.asarray(Y), counts=jnp.asarray(COUNTS))


@pytest.fixture(scope="module")
def mcmc():
    m = MCMC(NUTS(model), num_warmup=500, num_samples=1000, num_chains=4,
             chain_method="vectorized", progress_bar=False)  # fmt: skip
    m.run(jax.random.key(0), **DATA)
    return m


def test_evidence_from_mcmc_matches_exact(mcmc):
    res = phn.bridge_sampling(mcmc, model, rng_key=jax.random.key(1), **DATA)
    assert not res.warning, res.checks
    assert abs(res.log_z - exact()) < 4 * res.log_z_se
    assert res.num_draws == 4 * 500 and len(res.chain_log_z) == 4


def test_samples_dict_and_arviz_forms_agree(mcmc):
    key = jax.random.key(1)
    base = phn.bridge_sampling(mcmc, model, rng_key=key, **DATA)
    grouped = phn.bridge_sampling(mcmc.get_samples(group_by_chain=True), model, rng_key=key,
                                  group_by_chain=True, **DATA)  # fmt: skip
    assert grouped.log_z == pytest.approx(base.log_z, abs=1e-9)
    idata = az.from_numpyro(mcmc)
    from_idata = phn.bridge_sampling(idata, model, rng_key=key, **DATA)
    assert from_idata.log_z == pytest.approx(base.log_z, abs=1e-9)
    flat = phn.bridge_sampling(mcmc.get_samples(), model, rng_key=key, **DATA)  # one chain
    assert len(flat.chain_log_z) == 1
    assert abs(flat.log_z - exact()) < 4 * flat.log_z_se


def test_bad_input(mcmc):
    samples = mcmc.get_samples(group_by_chain=True)
    with pytest.raises(ValueError, match=r"lack the model's latent site\(s\) \['p'\]"):
        phn.bridge_sampling({k: v for k, v in samples.items() if k != "p"}, model,
                            group_by_chain=True, **DATA)  # fmt: skip
    with pytest.raises(ValueError, match="deterministic"):  # deterministic-only
        phn.bridge_sampling({"p_max": samples["p_max"]}, model, group_by_chain=True, **DATA)
    short = {k: v[:, :60] for k, v in samples.items()}
    with pytest.raises(ValueError, match="at least 100"):
        phn.bridge_sampling(short, model, group_by_chain=True, **DATA)
    uneven = dict(samples, w=samples["w"][:, :500])
    with pytest.raises(ValueError, match="same chains and draws"):
        phn.bridge_sampling(uneven, model, group_by_chain=True, **DATA)
    with pytest.raises(TypeError, match="MCMC object"):
        phn.bridge_sampling([1, 2, 3], model, **DATA)
    wrong = dict(samples, w=samples["w"][..., :2])
    with pytest.raises(ValueError, match="do not fit|coordinates"):
        phn.bridge_sampling(wrong, model, group_by_chain=True, **DATA)


def test_an_unmarked_discrete_site_is_refused_by_name():
    """Unmarked discrete sites are annealed by phn.HAIS (Metropolis moves); bridge sampling
    needs continuous coordinates and says so before reading the draws."""

    def with_count(y=None):
        lam = numpyro.sample("lam", dist.Exponential(1.0))
        n = numpyro.sample("n", dist.Poisson(lam))
        numpyro.sample("y", dist.Normal(n, 1.0), obs=y)

    draws = {"lam": np.ones((2, 200)), "n": np.ones((2, 200))}
    with pytest.raises(ValueError, match=r"\['n'\] are discrete.*phn.HAIS"):
        phn.bridge_sampling(draws, with_count, group_by_chain=True, y=1.0)


def test_compare_with_hais(mcmc):
    res = phn.bridge_sampling(mcmc, model, **DATA)
    hais = phn.HAIS(model, num_particles=256, num_steps=500, progress_bar=False)
    hais.run(jax.random.key(2), **DATA)
    table = ph.compare_evidence({"bridge": res, "hais": hais})
    diff = abs(table.loc["bridge", "log_evidence"] - table.loc["hais", "log_evidence"])
    assert diff < 4 * np.hypot(res.log_z_se, hais.log_evidence_se) + 0.02


def _schools(J, sigma, y=None):
    mu = numpyro.sample("mu", dist.Normal(0, 5))
    tau = numpyro.sample("tau", dist.HalfCauchy(5))
    with numpyro.plate("J", J):
        theta = numpyro.sample("theta", dist.Normal(mu, tau))
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)


def _schools_exact(sigma, y):
    """log p(y) of the eight schools by quadrature over (mu, tau): theta integrates out."""
    def f(mu, tau):
        return np.exp(stats.norm(mu, np.sqrt(sigma**2 + tau**2)).logpdf(y).sum() + 31.0
                      + stats.norm(0, 5).logpdf(mu) + stats.halfcauchy(0, 5).logpdf(tau))

    return float(np.log(integrate.dblquad(f, 0, np.inf, -60, 60, epsrel=1e-10)[0]) - 31.0)


def test_numpy_data_after_nuts_in_the_same_process():
    """NUTS runs the model in float32 with NumPy data; the bridge then runs it in float64 on the
    same arrays (this crashed with a float32/float64 program mismatch)."""
    sigma = np.array([15.0, 10, 16, 11, 9, 11, 10, 18])
    y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12])
    m = MCMC(NUTS(_schools), num_warmup=300, num_samples=500, num_chains=2,
             chain_method="sequential", progress_bar=False)  # fmt: skip
    m.run(jax.random.key(0), 8, sigma, y)
    with warnings.catch_warnings():  # the centered model's divergences and ESS may warn
        warnings.simplefilter("ignore", ph.EvidenceWarning)
        res = phn.bridge_sampling(m, _schools, 8, sigma, y, progress_bar=False)
    assert abs(res.log_z - _schools_exact(sigma, y)) < 4 * res.log_z_se + 0.05



_AFTER_NUTS = """
import json, sys, warnings
import jax, jax.numpy as jnp, numpy as np, numpyro, numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
from ppl_hais.adapters import numpyro as phn

def model(g, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    with numpyro.plate("groups", 6):
        a = numpyro.sample("a", dist.Normal(mu, 0.7))
    numpyro.sample("y", dist.Normal(a[g], 0.5), obs=y)

rng = np.random.default_rng(7)
g0 = rng.integers(0, 6, size=30)
y = rng.normal(size=30) + 0.5 * g0
out = {}
for kind in ("int64", "uint8", "jax_int32"):
    g = jnp.asarray(g0) if kind == "jax_int32" else g0.astype(kind)
    m = MCMC(NUTS(model), num_warmup=200, num_samples=300, num_chains=2,
             chain_method="sequential", progress_bar=False)
    m.run(jax.random.key(0), g, y=y)
    res = phn.bridge_sampling(m, model, g, y=y, progress_bar=False)
    hais = phn.HAIS(model, num_steps=300, progress_bar=False)
    hais.run(jax.random.key(1), g, y=y)
    out[kind] = [res.log_z, res.log_z_se, hais.log_evidence, hais.log_evidence_se]
print(json.dumps(dict(g=g0.tolist(), y=y.tolist(), x64=bool(jax.config.jax_enable_x64), out=out)))
"""


def test_integer_index_data_after_nuts():
    """An index array of any integer dtype, NumPy's or JAX's, after NUTS ran the model in
    float32 in the same fresh process (as a user's is: this suite runs in float64): bridge
    sampling and HAIS both run in float64 on it and match the exact evidence. A NumPy int64
    index crashed both with int32 beside int64 in JAX's indexing."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_ENABLE_X64")}
    done = subprocess.run([sys.executable, "-c", _AFTER_NUTS], capture_output=True, text=True,
                          env=env, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert not found["x64"]  # NUTS ran in float32, and the process is still in it
    g, y = np.asarray(found["g"]), np.asarray(found["y"])
    z = np.eye(6)[g]
    exact = stats.multivariate_normal(np.zeros(30), 0.25 * np.eye(30) + 0.49 * z @ z.T + 4.0
                                      ).logpdf(y)  # fmt: skip
    assert set(found["out"]) == {"int64", "uint8", "jax_int32"}
    for kind, (bridge, bridge_se, hais, hais_se) in found["out"].items():
        assert abs(bridge - exact) < 4 * bridge_se + 0.02, kind
        assert abs(hais - exact) < 4 * hais_se + 0.02, kind
