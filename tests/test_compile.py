"""One compiled anneal per model structure (any number of temperatures), and the persistent
compilation cache that makes a second process compile nothing."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppl_hais as ph
from ppl_hais.annealing import execution
from ppl_hais.annealing.scan import BIN_STEPS
from ppl_hais.workflow.runs import MAX_PARTICLES, PRECISE_SE


def _target():
    # log Z = 2·log(3·√(2π))
    return ph.AnnealingTarget(
        log_density=lambda z: -0.5 * jnp.sum((z / 3.0) ** 2), initial=ph.Gaussian(jnp.zeros(2))
    )


@pytest.fixture
def executables(monkeypatch):
    """A function counting the compiled programs behind the anneals run since (each scan that
    ``execution.compiled`` hands out × the shapes its jit compiled for)."""
    original, seen = execution.compiled, {}

    def spy(*args, **kwargs):
        fn = original(*args, **kwargs)
        seen[id(fn)] = fn
        return fn

    monkeypatch.setattr(execution, "compiled", spy)
    return lambda: sum(fn._cache_size() for fn in seen.values())


def test_new_number_of_temperatures_compiles_nothing(executables):
    target = _target()
    exact = 2 * np.log(3 * np.sqrt(2 * np.pi))
    opts = dict(num_particles=128, progress_bar=False)
    with execution.using_cores(1):  # two groups of 64 particles, the pilot's size
        first = ph.hais(jax.random.key(0), target, num_steps=300, **opts)
        after_first = executables()
        assert after_first == 1  # the pilot and the main run's groups: one program
        for n in (37, 1000, 4321):  # fewer temperatures than bins, the default, many
            res = ph.hais(jax.random.key(1), target, num_steps=n, **opts)
            assert res.settings.num_steps == n
            # the trace: num_bins (100) rows, or one per bin of the scan when N is smaller
            assert len(res.trace.beta) == min(-(-n // BIN_STEPS), 100)
            assert abs(res.log_z - exact) < 5 * res.log_z_se + 0.1
        assert executables() == after_first
        # and a named schedule of another length reuses them too
        ph.hais(jax.random.key(2), target, num_steps=777, schedule="linear", **opts)
        assert executables() == after_first
    assert abs(first.log_z - exact) < 5 * first.log_z_se + 0.1


def test_bias_check_compiles_one_mcmc_for_every_start():
    """The bias check's MCMC samples the model's joint density, the same function from the
    prior and from a Laplace fit, so a second start compiles no second MCMC."""
    from ppl_hais.mcmc import sampler
    from ppl_hais.model.density import SplitDensity
    from ppl_hais.workflow.evidence import evidence

    class Model(SplitDensity):  # y = 1 under N(z, 0.5²) per coordinate, z ~ N(0, I)
        dim, improper, prior = 2, (), ph.Gaussian(jnp.zeros(2))

        def log_parts(self, z):
            return self.prior.log_prob(z), -2.0 * jnp.sum((1.0 - z) ** 2)

    model, misses = Model(), sampler._compiled.cache_info().misses
    exact = 2 * (-0.5 * np.log(2 * np.pi * 1.25) - 0.5 / 1.25) + 2 * np.log(np.sqrt(np.pi / 2))
    for initial in ("prior", "laplace"):
        ev = evidence(jax.random.key(0), model, initial=initial, num_particles=128,
                      num_steps=1000, bias_check=True, progress_bar=False)  # fmt: skip
        assert ev.initial == initial and ev.bias is not None
        assert abs(ev.log_z - exact) < 5 * ev.log_z_se + 0.05
        assert abs(ev.bias.log_z_upper - exact) < 5 * ev.bias.log_z_upper_se + 0.05
    assert sampler._compiled.cache_info().misses - misses == 1


def test_mcmc_program_holds_the_log_density_once_per_role():
    """The bias check's MCMC evaluates the log density at the start, in the step size search
    and in one loop that runs warmup and then sampling: three copies in its program, not four
    (a loop per phase compiled 1.2-1.4x as long, and it is the first call's largest program
    when it reaches the check). The draws are those of the two loops; the sampler's own tests
    check them against exact moments."""
    from ppl_hais.mcmc import sampler
    from ppl_hais.runtime.structure import split

    def log_density(x):  # sinh marks each evaluation: its gradient is a cosh
        return -0.5 * jnp.sum(x**2) + 0.01 * jnp.sum(jnp.sinh(x))

    structure, arrays = split(log_density)
    x0 = jnp.zeros((4, 2))
    args = (arrays, jax.random.split(jax.random.key(0), 4), x0, 0.0, 0.5, 0.9, 0)
    for warmup, copies in ((100, 3), (0, 3)):
        fn = sampler._compiled(structure, warmup, 50, 1, 1, "standard", "fresh", True, True, 1,
                               "vectorized")  # fmt: skip
        jaxpr = str(jax.make_jaxpr(fn)(*args))
        assert jaxpr.count("sinh") == copies, (warmup, jaxpr.count("sinh"))
    # its progress tick is a host callback; the bias check's MCMC (interruptible=False) has
    # none, so JAX 0.10's persistent cache can store it (it keys a callback by its address)
    for interruptible in (True, False):
        fn = sampler._compiled(structure, 100, 50, 1, 1, "standard", "fresh", True, True, 1,
                               "vectorized", interruptible)  # fmt: skip
        assert ("callback" in str(jax.make_jaxpr(fn)(*args))) == interruptible


def test_laplace_fit_and_bias_check_compile_only_their_programs(caplog):
    """A first call that fits a Laplace start and runs the bias check compiles its own
    programs (the samplers, the mode search, the Hessian, the MCMC's start check, the scans)
    and no program per eager operation: keys, the resampling offset, the restarts' prior
    draws and the scans' scalar arguments are made on the host (each eager operation compiled
    a program the first time a process ran it, 0.9 s in all on the banana's first call)."""
    import logging
    import re

    from ppl_hais.model.density import SplitDensity
    from ppl_hais.workflow.evidence import evidence

    class Fresh(SplitDensity):  # a structure no other test compiled
        dim, improper, prior = 3, (), ph.Gaussian(jnp.zeros(3), 2.0)

        def log_parts(self, z):
            return self.prior.log_prob(z), -0.5 * jnp.sum((0.5 - z) ** 2 / 0.3**2)

    key = jax.random.key(0)
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles(True):
        ev = evidence(key, Fresh(), initial="laplace", num_particles=128, num_steps=300,
                      bias_check=True, progress_bar=False)  # fmt: skip
    assert ev.initial == "laplace" and ev.bias is not None
    names = [re.search(r"jit\((\S+)\)", r.getMessage()).group(1) for r in caplog.records
             if "XLA compilation" in r.getMessage()]  # fmt: skip
    own = {"run", "_sample_initial", "_mode", "_neg_hessian", "_all_finite", "stage"}
    assert "_mode" in names and set(names) <= own, names


def test_padded_schedule_matches_unpadded():
    """The scan run on a padded schedule with N given equals the scan on the bare schedule,
    also when N is not a whole number of bins."""
    from ppl_hais.annealing.scan import anneal

    target, kernel = _target(), ph.hais_kernel()
    betas = ph.sigmoid_schedule(150)
    log_step = np.full(151, np.log(0.3))
    opts = dict(num_particles=16, adapt_target=0.9)
    bare = anneal(jax.random.key(3), target, kernel, jnp.asarray(betas), log_step, **opts)
    pad = anneal(jax.random.key(3), target, kernel, jnp.asarray(execution.padded(betas)),
                 execution.padded(log_step), num_steps=150, **opts)  # fmt: skip
    for k in ("log_weights", "particles", "gradients", "num_nonfinite"):
        np.testing.assert_array_equal(getattr(bare, k), getattr(pad, k))
    np.testing.assert_array_equal(bare.log_steps[:150], pad.log_steps[:150])
    used = bare.bin_count > 0
    assert int(np.sum(bare.bin_count)) == 150 == int(np.sum(pad.bin_count))
    np.testing.assert_array_equal(bare.acceptance[used], pad.acceptance[: used.sum()])
    # the gradients counted are those of 150 temperatures, not of the masked padding
    assert float(bare.gradients[0]) == 150 * kernel.gradients_per_step


def test_every_ladder_rung_runs_in_one_program(executables):
    """The convergence ladder's rungs (250, 1000, 4000 and 16,000 temperatures) and their
    pilots share one compiled program per transition: schedules are padded to
    ``MIN_CAPACITY`` (16,384), so the first call in a process that climbs to the last rung
    compiles no second anneal (at 8192 it did, 2-3 s on 2 cores)."""
    from ppl_hais.checks.ladder import FIRST_NUM_STEPS, GROWTH

    target = _target()
    exact = 2 * np.log(3 * np.sqrt(2 * np.pi))
    longest = FIRST_NUM_STEPS * GROWTH**3
    assert longest < execution.MIN_CAPACITY
    runs = []
    with execution.using_cores(1):
        for n, local in ((300, False), (longest, False), (300, True), (9000, True)):
            runs.append(ph.hais(jax.random.key(n), target, num_steps=n, num_particles=64,
                                local_steps=local, progress_bar=False))  # fmt: skip
            assert executables() == 1 + local  # one program per transition
    for res in runs:
        assert abs(res.log_z - exact) < 5 * res.log_z_se + 0.1


def test_capacity_and_padding():
    assert execution.capacity(1001) == execution.MIN_CAPACITY
    assert execution.capacity(execution.MIN_CAPACITY + 1) == 2 * execution.MIN_CAPACITY
    rows = np.arange(6.0).reshape(3, 2)
    out = execution.padded(rows, 5)
    assert out.shape == (5, 2) and np.all(out[3:] == rows[-1])


_PROBE = textwrap.dedent(
    """
    import warnings, jax, jax.numpy as jnp, ppl_hais as ph
    print("IMPORTED", ph.runtime.compilation_cache.cache_dir())  # importing turns nothing on
    t = ph.AnnealingTarget(log_density=lambda z: -0.5 * jnp.sum(z**2),
                           initial=ph.Gaussian(jnp.zeros(2), 2.0))
    ph.hais(jax.random.key(0), t, num_particles=32, num_steps=50, progress_bar=False)
    print("DIR", ph.runtime.compilation_cache.cache_dir())
    """
)


def _probe(env):
    out = subprocess.run(
        [sys.executable, "-W", "always::RuntimeWarning", "-c", _PROBE],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out


def test_persistent_cache_is_written_and_read(tmp_path):
    """The anneal holds no host callback (the host ticks its progress between calls), so every
    supported JAX stores it: JAX 0.10 keys a callback by its address, new in every process,
    and so never read such a program back."""
    cache = tmp_path / "cache"
    env = {"PPL_HAIS_CACHE_DIR": str(cache), "PPL_HAIS_COMPILATION_CACHE": "1"}
    first = _probe(env)
    assert "IMPORTED None" in first.stdout and f"DIR {cache}" in first.stdout
    entries = lambda: {f for f in os.listdir(cache) if f.endswith("-cache")}  # noqa: E731
    scans = lambda: {f for f in entries() if f.startswith("jit_run")}  # noqa: E731
    stored = scans()
    assert len(stored) == 2, sorted(os.listdir(cache))  # the pilot and the main run, stored
    everything = entries()
    # the call's small programs too (min_compile_time 0), its draws from the start among them;
    # what the user's code compiled before the call (jnp.zeros) is not the library's to store
    assert any(f.startswith("jit__sample_initial") for f in everything), sorted(everything)
    # no LRU eviction: it would scan the directory on every write (access-time files)
    assert not any(f.endswith("-atime") for f in os.listdir(cache))
    _probe(env)
    # the second process read the scans back: no new scan (once, of six runs under load, a
    # second process stored something besides; not reproduced, so only the scans are asserted)
    assert scans() == stored
    # clear() empties the directory ppl_hais set, and the next process compiles and stores again
    files = len(os.listdir(cache))
    clear = "import ppl_hais as ph; print('REMOVED', ph.runtime.compilation_cache.clear())"
    cleared = subprocess.run([sys.executable, "-c", clear], env={**os.environ, **env},
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert f"REMOVED {files}" in cleared.stdout, cleared.stderr
    assert os.listdir(cache) == []
    _probe(env)
    assert scans() == stored


def test_persistent_cache_switch_and_unwritable_dir(tmp_path):
    off = _probe({"PPL_HAIS_COMPILATION_CACHE": "0", "PPL_HAIS_CACHE_DIR": str(tmp_path)})
    assert "DIR None" in off.stdout
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    bad = _probe({"PPL_HAIS_COMPILATION_CACHE": "1", "PPL_HAIS_CACHE_DIR": str(blocked / "x")})
    assert "DIR None" in bad.stdout
    assert bad.stderr.count("cannot be written") == 1  # warned once, and the run went on


def test_a_cache_switched_off_before_the_first_call_stays_off(tmp_path):
    """Importing turns nothing on, so a user who turns the cache off before any call keeps it
    off: the first call applies the default only where nobody chose."""
    off = 'ph.runtime.compilation_cache.disable(); print("IMPORTED"'
    code = _PROBE.replace('print("IMPORTED"', off)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PPL_HAIS_CACHE_DIR": str(tmp_path),
                              "PPL_HAIS_COMPILATION_CACHE": "1"}, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "IMPORTED None" in out.stdout and "DIR None" in out.stdout
    assert os.listdir(tmp_path) == []


def test_a_rung_topped_up_with_particles_compiles_nothing_new(executables):
    """A rung whose weights pass at an SE above 0.025 nat anneals the particles that SE asks
    for (ppl_hais.workflow.runs) in whole groups of the pilot's size: the pilot, the rung and
    its top-ups run one program."""
    from ppl_hais.model.density import SplitDensity
    from ppl_hais.workflow.evidence import evidence

    class Wide(SplitDensity):  # log Z = 10 · log N(0.5; 0, 3² + 1)
        dim, improper, prior = 10, (), ph.Gaussian(jnp.zeros(10), 3.0)

        def log_parts(self, z):
            like = -0.5 * jnp.sum((0.5 - z) ** 2) - 5 * jnp.log(2 * jnp.pi)
            return self.prior.log_prob(z), like

    exact = 10 * (-0.5 * 0.25 / 10.0 - 0.5 * np.log(2 * np.pi * 10.0))
    with execution.using_cores(2):  # whole units of the pilot's groups
        unit = execution.top_up_unit(256)
        ev = evidence(jax.random.key(0), Wide(), initial="prior", num_particles=256,
                      bias_check=False, progress_bar=False)  # fmt: skip
    res = ev.results[0]  # SE 0.05-0.06 at 256 particles: no check is due, on to 0.025
    assert res.settings.num_runs > 1 and res.settings.run_particles == 256
    assert (res.num_particles - 256) % unit == 0 and res.num_particles <= MAX_PARTICLES * 256
    assert res.log_z_se <= PRECISE_SE and abs(ev.log_z - exact) < 4 * ev.log_z_se
    assert executables() == 1
