"""The code's shape: small modules, and no import cycles among the package's modules (issue 32:
"no import cycles, no module over 400 lines")."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"ppl_hais": ROOT / "ppl_hais", "ppl_hais.adapters": ROOT / "adapters"}
MAX_LINES = 400


def _modules():
    """{dotted name: path} of every module of the package (adapters included)."""
    out = {}
    for prefix, base in PACKAGES.items():
        for path in base.rglob("*.py"):
            if "adapters" in path.relative_to(base).parts:  # the symlink in a checkout's snapshot
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = path
    return out


MODULES = _modules()


def _imports(name, path):
    """The package's modules that ``name`` imports at module level (not inside functions)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:  # `from . import diagnostics` imports a module
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in MODULES else source)
    return {m for m in found if m in MODULES and m != name}


def test_modules_are_small():
    sizes = {n: len(p.read_text().splitlines()) for n, p in MODULES.items()}
    assert len(sizes) > 50  # the walk found the package
    assert {n: s for n, s in sizes.items() if s > MAX_LINES} == {}


def test_no_import_cycles_below_the_package_roots():
    # a package's __init__ re-exports its submodules, which may import siblings through it;
    # cycles among the modules themselves are what makes import order fragile
    graph = {n: {m for m in _imports(n, p) if m not in PACKAGES}
             for n, p in MODULES.items() if n not in PACKAGES}  # fmt: skip
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " → ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
