"""The code's shape, read from the source: small modules; imports that form no circle (an
import inside a function counts, and so does a package's ``__init__``); no module that takes
another's private name; a core that imports no PPL; and a product that names no step of the
team's own process."""

import ast
import re
import subprocess
from pathlib import Path

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


PPLS = ("numpyro", "pymc", "pytensor", "bambi")


def _imports(name, path):
    """The package's modules that ``name`` imports, at any depth (inside functions too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
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


def _cycles(graph):
    """Tarjan's strongly connected components of more than one module, sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_imports_form_no_circle():
    # only the top-level package, which re-exports the public names, is left out: nothing
    # below it imports it
    graph = {n: _imports(n, p) - set(PACKAGES) for n, p in MODULES.items() if n not in PACKAGES}
    assert _cycles(graph) == []


# the packages in the order data flows through them; a module imports only from its own
# package or an earlier one (docs/architecture.md); the adapters build on the public face
LAYERS = ("runtime", "stats", "checks", "model", "results", "mcmc", "annealing", "bridge",
          "estimate", "starts", "workflow", "research", "", "adapters")  # fmt: skip


def _layer(name):
    """The index of the module's package in LAYERS ("" for the top level's own modules)."""
    parts = name.split(".")
    return LAYERS.index(parts[1] if len(parts) > 1 and parts[1] in LAYERS else "")


def _back_edges(graph):
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if _layer(b) > _layer(a))  # fmt: skip


def test_every_import_points_down_the_data_path():
    tops = {n for n in MODULES if LAYERS[_layer(n)] == ""}  # the public face and the CLI
    assert tops == {"ppl_hais", "ppl_hais.cli"}
    graph = {n: _imports(n, p) for n, p in MODULES.items()}
    assert _back_edges(graph) == []


def test_the_layer_rule_sees_an_arrow_back_up():
    assert _back_edges({"ppl_hais.annealing.scan": {"ppl_hais.checks.diagnostics"}}) == []
    assert _back_edges({"ppl_hais.annealing.scan": {"ppl_hais.estimate.bias"}}) == [
        "ppl_hais.annealing.scan -> ppl_hais.estimate.bias"
    ]


def test_the_circle_finder_finds_circles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


MAX_FUNCTION_LINES = 80


def _code_lines(node, lines):
    """A function's body in code lines: no docstring, blank line or comment line."""
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(body) > 1:
        first = body[1]  # the docstring is not code
    return sum(1 for text in lines[first.lineno - 1 : node.end_lineno]
               if text.strip() and not text.strip().startswith("#"))  # fmt: skip


def test_functions_are_short():
    long = []
    for name, path in MODULES.items():
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = _code_lines(node, text.splitlines())
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {n}")
    assert long == []


def test_the_line_count_reads_code_only():
    text = 'def f():\n    """doc\n    more"""\n    # why\n\n    return 1\n'
    assert _code_lines(ast.parse(text).body[0], text.splitlines()) == 1


def test_no_private_name_crosses_a_module():
    taken = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("ppl_hais")
            ):
                taken += [f"{name}: {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]  # fmt: skip
    assert taken == []


def test_the_core_imports_no_ppl():
    found = []
    for name, path in MODULES.items():
        if name.startswith("ppl_hais.adapters"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [f"{name}: {a.name}" for a in node.names
                          if a.name.split(".")[0] in PPLS]  # fmt: skip
            elif isinstance(node, ast.ImportFrom) and not node.level:
                if (node.module or "").split(".")[0] in PPLS:
                    found.append(f"{name}: {node.module}")
    assert found == []


PROCESS = re.compile(r"\b[Ss]tops? [0-9]+\b|\b[Ii]ssues? #?[0-9]+\b")


def test_the_product_names_no_step_of_the_process():
    # code, docs and README give reasons and designs, not the history of how they came about
    folders = ("ppl_hais", "adapters", "docs", "tests", "benchmarks")
    listed = subprocess.run(["git", "ls-files", *folders, "README.md"], cwd=ROOT,
                            capture_output=True, text=True, check=False).stdout.split()
    if not listed:  # not a git checkout: read the folders
        listed = [str(p.relative_to(ROOT)) for d in folders
                  for p in (ROOT / d).rglob("*") if p.is_file()] + ["README.md"]  # fmt: skip
    hits = []
    for rel in listed:
        path = ROOT / rel
        if "_build" in path.parts or path.suffix not in {".py", ".md"}:
            continue
        for number, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            if PROCESS.search(line):
                hits.append(f"{rel}:{number}: {line.strip()[:80]}")
    assert hits == [], f"{len(hits)} lines name the process; the first: {hits[:5]}"


def test_every_benchmark_is_run_by_make_bench():
    # a curated set: each script writes one page of the site, and `make bench` reruns them all;
    # one family of questions a script (the Bayes-factor workflow's calibration is the 21st)
    scripts = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py")
                     if not p.name.startswith("_"))  # fmt: skip
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\nbench:"):].split("\n\n")[0]
    assert len(scripts) <= 21
    assert [s for s in scripts if f"benchmarks/{s}.py" not in recipe] == []
