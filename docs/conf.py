"""Sphinx configuration: the documentation site (`make docs`).

The API reference is written at build time from the packages' ``__all__`` (``_api.py``), so
every public name has a page and a new one cannot be forgotten. The gallery is MyST notebooks
executed on every build; ``PPL_HAIS_DOCS_QUICK=1`` makes their budgets small.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _api  # noqa: E402

import ppl_hais  # noqa: E402

project = "ppl_hais"
author = "the ppl_hais developers"
copyright = "2026, the ppl_hais developers"
release = version = ppl_hais.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_copybutton",
    "sphinx_design",
]

_api.write(HERE / "api")

# progress bars are for people waiting at a prompt; the executed pages show results only
os.environ["TQDM_DISABLE"] = "1"

# each page's kernel talks to this process over local TCP and logs that the traffic is not
# encrypted, one warning per page: kernels started here log errors only (an IPython profile
# of the build's own, read by the kernels this process starts)
_profile = HERE / "_build" / "ipython" / "profile_default"
_profile.mkdir(parents=True, exist_ok=True)
(_profile / "ipython_kernel_config.py").write_text('c.IPKernelApp.log_level = "ERROR"\n')
os.environ["IPYTHONDIR"] = str(_profile.parent)

exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
source_suffix = {".md": "myst-nb", ".rst": "restructuredtext"}
root_doc = "index"

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# the gallery runs on every build; an error in a cell fails the build
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False
autodoc_typehints = "none"
autodoc_default_options = {"show-inheritance": False}
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

html_theme = "pydata_sphinx_theme"
html_title = "ppl_hais"
html_static_path = []
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": [], "benchmarks/*": ["sidebar-nav-bs"]}
