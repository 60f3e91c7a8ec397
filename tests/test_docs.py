"""The examples users copy must run: module docstrings and the README's code block."""

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest

import ppl_hais as ph

ROOT = Path(ph.__file__).parent


def _public_modules():
    """Every module of the package whose name has no leading underscore, adapters included."""
    names = ["ppl_hais"]
    import ppl_hais.adapters

    found = list(pkgutil.walk_packages([str(ROOT)], "ppl_hais."))
    found += pkgutil.walk_packages(ppl_hais.adapters.__path__, "ppl_hais.adapters.")
    names.append("ppl_hais.adapters")
    for info in found:
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _public_modules())
def test_docstring_examples(name):
    """Every public module carries a runnable example, and it runs."""
    module = importlib.import_module(name)
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert tried > 0, f"{name} has no example in its docstrings"
    assert failures == 0


def test_public_modules_cover_the_package():
    names = _public_modules()
    for name in ["ppl_hais.annealing.scan", "ppl_hais.mcmc.hmc", "ppl_hais.energy.ising",
                 "ppl_hais.adapters.numpyro", "ppl_hais.adapters.pymc"]:
        assert name in names


def test_readme_example_runs():
    text = (Path(__file__).parents[1] / "README.md").read_text()
    code = re.search(r"## The core in ten lines\n\n```python\n(.*?)```", text, re.S).group(1)
    code = code.replace("num_steps=2000)", "num_steps=300, progress_bar=False)")
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert np.isfinite(scope["result"].log_z)
    assert "posterior" in ph.arviz.group_names(scope["idata"])


def test_readme_bridge_recipe_runs():
    """The README's "I ran pm.sample, now compare two models" recipe, with shorter chains."""
    text = (Path(__file__).parents[1] / "README.md").read_text()
    code = re.search(r"## Evidence from the draws you already have.*?```python\n(.*?)```",
                     text, re.S).group(1)  # fmt: skip
    code = code.replace("pm.sample(1000, chains=4,", "pm.sample(400, tune=400, chains=2, cores=1,")
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    table = scope["table"]
    assert table.index[0] == "slope" and table.loc["intercept only", "bayes_factor"] > 1e3
    assert not table["warning"].any()


def _readme_block(header):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    return re.search(rf"## {header}\n\n```python\n(.*?)```", text, re.S).group(1)


def test_readme_numpyro_and_pymc_blocks_run():
    """The front page's NumPyro and PyMC blocks run as written (fewer temperatures)."""
    code = _readme_block("NumPyro").replace(
        "num_particles=512)", "num_particles=128, num_steps=200, progress_bar=False)"
    )
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert np.isfinite(scope["hais"].log_evidence)
    code = _readme_block("PyMC").replace(
        "random_seed=1)", "random_seed=1, num_steps=200, progressbar=False)"
    )
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert np.isfinite(float(scope["idata"].sample_stats["log_marginal_likelihood"][0]))
