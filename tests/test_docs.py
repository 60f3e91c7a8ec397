"""The examples users copy must run: module docstrings and the README's code block."""

import doctest
import re
from pathlib import Path

import numpy as np
import pytest

import ppl_hais as ph
import ppl_hais.compare
import ppl_hais.driver
import ppl_hais.energy
import ppl_hais.target


@pytest.mark.parametrize(
    "module", [ppl_hais.target, ppl_hais.driver, ppl_hais.compare, ppl_hais.energy]
)
def test_docstring_examples(module):
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


def test_readme_example_runs():
    text = (Path(__file__).parents[1] / "README.md").read_text()
    code = re.search(r"## The core in ten lines\n\n```python\n(.*?)```", text, re.S).group(1)
    code = code.replace("num_steps=2000)", "num_steps=300, progress_bar=False)")
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert np.isfinite(scope["result"].log_z)
    assert "posterior" in ph.arviz.group_names(scope["idata"])
