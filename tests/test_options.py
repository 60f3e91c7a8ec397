"""The evidence's options as one typed object: defined, checked and documented in one place,
taken by every entry point in its library's idiom, the same run whether given as an object or
as keywords."""

import inspect
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_errors import BAD_OPTIONS

import ppl_hais as ph
from ppl_hais.annealing import PilotOptions, RunOptions
from ppl_hais.annealing.kernels import HAISOptions
from ppl_hais.workflow.evidence import evidence
from ppl_hais.workflow.options import EvidenceOptions

SMALL = dict(num_particles=64, num_steps=120, flips="reduced", num_bins=12)


@pytest.mark.parametrize("kwargs, msg", BAD_OPTIONS)
def test_a_bad_value_fails_when_the_object_is_made(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        EvidenceOptions(**kwargs)
    with pytest.raises(ValueError, match=msg):  # a changed copy is checked as a new one
        EvidenceOptions().replace(**kwargs)


def test_every_field_is_documented_once_in_the_class():
    documented = set()
    for line in inspect.getdoc(EvidenceOptions).splitlines():
        m = re.match(r"([a-z_, ]+) : ", line)
        if m:
            documented |= {n.strip() for n in m.group(1).split(",")}
    assert documented == set(EvidenceOptions.names())


def test_every_option_of_an_anneal_is_an_evidence_option():
    anneal = {*HAISOptions._fields, *PilotOptions._fields, *RunOptions._fields}
    assert anneal - {"reverse_from"} <= set(EvidenceOptions.names())  # a bdmc-only input
    opts = EvidenceOptions(num_leapfrog=2, schedule="sigmoid", num_bins=50, local_steps=None)
    anneal = opts.anneal()
    assert (anneal.kernel.num_leapfrog, anneal.pilot.schedule, anneal.run.num_bins) == (
        2, "sigmoid", 50)  # fmt: skip
    assert anneal.kernel.local_steps is False  # None: off until the ladder switches it on


def test_the_entry_points_list_no_option_of_the_evidence():
    """An option is a field of EvidenceOptions alone: the entry points take the object and its
    fields by name, and list only their own keywords (PyMC's ``sample_smc`` idiom keeps
    ``num_steps`` and ``num_particles`` beside ``draws`` and ``chains``)."""
    pytest.importorskip("numpyro")
    pytest.importorskip("pymc")
    from ppl_hais.adapters import numpyro as phn
    from ppl_hais.adapters import pymc as php

    names = set(EvidenceOptions.names())
    for fn, allowed in ((phn.HAIS, set()), (evidence, set()),
                        (php.sample_hais, {"num_steps", "num_particles"}),
                        (php.calibrate_bayes_factors, set()),
                        (phn.calibrate_bayes_factors, set())):  # fmt: skip
        params = inspect.signature(fn).parameters
        assert "options" in params, fn
        assert set(params) & names == allowed, fn


def test_unknown_names_are_refused_with_the_closest_field():
    with pytest.raises(TypeError, match=r"evidence\(\) got an unexpected keyword argument "
                                        r"'num_particle' \(did you mean 'num_particles'\?\)"):
        EvidenceOptions.of(None, "evidence", num_particle=3)
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'flip'"):
        EvidenceOptions.of({"flip": "reduced"})
    with pytest.raises(TypeError, match="takes options as a ppl_hais.EvidenceOptions"):
        EvidenceOptions.of(["num_steps", 10])


def test_keywords_replace_the_objects_fields():
    opts = EvidenceOptions.of(EvidenceOptions(num_steps=10, flips="reduced"), num_steps=20)
    assert (opts.num_steps, opts.flips) == (20, "reduced")
    assert EvidenceOptions.of({"num_steps": 30}) == EvidenceOptions(num_steps=30)
    assert hash(opts) == hash(EvidenceOptions(num_steps=20, flips="reduced"))


class _Normal:
    """y = 0.7 under N(z, 1), z ~ N(0, 1): evidence N(0.7; 0, 2)."""

    dim, improper = 1, ()
    prior = ph.Gaussian(jnp.zeros(1), 1.0)

    def log_likelihood(self, z):
        return -0.5 * jnp.sum((0.7 - z) ** 2) - 0.5 * jnp.log(2 * jnp.pi)

    def log_joint(self, z):
        return self.prior.log_prob(z) + self.log_likelihood(z)


def test_an_object_and_its_keywords_give_the_same_run():
    key = jax.random.key(3)
    a = evidence(key, _Normal(), EvidenceOptions(**SMALL), progress_bar=False)
    b = evidence(key, _Normal(), progress_bar=False, **SMALL)
    c = evidence(key, _Normal(), {**SMALL, "num_steps": 60}, progress_bar=False, num_steps=120)
    assert a.log_z == b.log_z == c.log_z and a.log_z_se == b.log_z_se
    assert a.results[0].settings.num_steps == 120 and len(a.results[0].trace.beta) == 12
    exact = -0.25 * 0.7**2 - 0.5 * np.log(4 * np.pi)
    assert abs(a.log_z - exact) < 4 * a.log_z_se + 0.01


def test_numpyro_hais_takes_the_object_and_reads_it_back():
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist

    from ppl_hais.adapters import numpyro as phn

    def model(y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    y = jnp.array([0.7])
    runs = []
    for hais in (phn.HAIS(model, EvidenceOptions(**SMALL), progress_bar=False),
                 phn.HAIS(model, progress_bar=False, **SMALL)):  # fmt: skip
        hais.run(jax.random.key(5), y=y)
        runs.append(hais.log_evidence)
    assert runs[0] == runs[1]
    assert hais.options == EvidenceOptions(**SMALL) and hais.num_particles == 64


def test_pymc_sample_hais_takes_the_object_beside_its_own_keywords():
    pm = pytest.importorskip("pymc")
    from ppl_hais.adapters import pymc as php

    with pm.Model():
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=[0.7])
        opts = EvidenceOptions(**{**SMALL, "num_steps": 60})
        a = php.sample_hais(draws=64, num_steps=120, options=opts, random_seed=1,
                            progressbar=False)  # fmt: skip
        b = php.sample_hais(draws=64, random_seed=1, progressbar=False, **SMALL)
    za, zb = (float(i.sample_stats["log_evidence"]) for i in (a, b))
    assert za == zb
    with pm.Model(), pytest.raises(TypeError, match="did you mean 'progressbar'"):
        pm.Normal("x")
        php.sample_hais(progress_bar=False)
