"""Write the API reference from the packages' ``__all__``: a page per module, a page per name.

A name exported in two places (``ppl_hais.bridge_sampling`` is ``ppl_hais.bridge.bridge_sampling``)
gets one page, under the first namespace that exports it; the other module's table links there.
"""

import importlib
import inspect
import re
import shutil
import types
from pathlib import Path

ROOTS = [
    "ppl_hais",
    "ppl_hais.adapters.numpyro",
    "ppl_hais.adapters.pymc",
    "ppl_hais.workflow.evidence",
]


def _summary(obj) -> str:
    """The docstring's first paragraph for a Markdown table: reST roles (``:func:`x```) become
    MyST's (``{func}`x```), so they render as links rather than as text."""
    doc = inspect.getdoc(obj) or ""
    line = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    line = re.sub(r"(?<![\w`]):((?:py:)?\w+):`", r"{\1}`", line)
    return line.replace("|", "\\|")


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "autoclass"
    if callable(obj):
        return "autofunction"
    return "autodata"


def _modules():
    """The modules to document, in order: the roots, then every module their __all__ names."""
    order, queue = [], list(ROOTS)
    while queue:
        name = queue.pop(0)
        if name in order:
            continue
        order.append(name)
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if isinstance(obj, types.ModuleType) and obj.__name__.startswith("ppl_hais"):
                queue.append(obj.__name__)
    return order


def write(out: Path) -> list[str]:
    """Write ``out/index.md``, one page per module and one per name; return the names written."""
    if out.exists():
        shutil.rmtree(out)
    (out / "generated").mkdir(parents=True)
    pages: dict[int, str] = {}
    written = []
    modules = _modules()
    module_rows = []
    for name in modules:
        module = importlib.import_module(name)
        module_rows.append(f"| [`{name}`]({name}.md) | {_summary(module)} |")
        rows, toctree = [], []
        for attr in module.__all__:
            obj = getattr(module, attr)
            if isinstance(obj, types.ModuleType):
                rows.append(f"| [`{attr}`]({obj.__name__}.md) | {_summary(obj)} |")
                continue
            full = f"{name}.{attr}"
            if id(obj) in pages:
                rows.append(f"| [`{attr}`]({pages[id(obj)]}) | {_summary(obj)} (same object) |")
                continue
            page = f"generated/{full}.md"
            pages[id(obj)] = page
            toctree.append(page.removesuffix(".md"))
            rows.append(f"| [`{attr}`]({page}) | {_summary(obj)} |")
            options = "\n   :members:" if inspect.isclass(obj) else ""
            (out / page).write_text(
                f"# {attr}\n\n```{{eval-rst}}\n.. currentmodule:: {name}\n\n"
                f".. {_kind(obj)}:: {attr}{options}\n```\n"
            )
            written.append(full)
        hidden = "\n".join(toctree)
        (out / f"{name}.md").write_text(
            f"# `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n   :no-members:\n```\n\n"
            "| name | what |\n|---|---|\n" + "\n".join(rows) + "\n\n"
            f"```{{toctree}}\n:hidden:\n\n{hidden}\n```\n"
        )
    (out / "index.md").write_text(
        "# API reference\n\nEvery public name, generated from the docstrings. The core "
        "(`ppl_hais`, imported as `ph`) knows no PPL; `ppl_hais.adapters.numpyro` (`phn`) and "
        "`ppl_hais.adapters.pymc` (`php`) translate models.\n\n"
        "| module | what |\n|---|---|\n" + "\n".join(module_rows) + "\n\n"
        "```{toctree}\n:hidden:\n\n" + "\n".join(modules) + "\n```\n"
    )
    return written
