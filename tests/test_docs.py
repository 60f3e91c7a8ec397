"""The examples users copy must run: module docstrings and the README's blocks (the site's
pages are executed by `make docs`)."""

import doctest
import importlib
import math
import pkgutil
import re
from pathlib import Path

import jax
import pytest
from scipy import stats

import ppl_hais as ph
from ppl_hais.workflow import runs as runs_module

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
    for name in ["ppl_hais.annealing.scan", "ppl_hais.mcmc.hmc", "ppl_hais.research.energy.ising",
                 "ppl_hais.adapters.numpyro", "ppl_hais.adapters.pymc"]:
        assert name in names


README = Path(__file__).parents[1] / "README.md"


def _readme_block(header):
    return re.search(rf"## {header}\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)


def _printed(code, capsys):
    exec(compile(code, "README.md", "exec"), {})
    return capsys.readouterr().out.strip()


@pytest.mark.parametrize("header", ["NumPyro", "PyMC"])
def test_readme_blocks_run_as_written_and_print_what_they_say(header, capsys):
    """The front page's blocks, pasted as they are, print the figures their comments quote
    (within the run's own SE and the comment's rounding: other stacks draw other streams)."""
    code = _readme_block(header)
    said = re.search(r"# prints: (.*)", code).group(1)
    printed = _printed(code, capsys).splitlines()[-1]
    number = r"log p\(y \| model\) = (-?[\d.]+) ± ([\d.]+)"
    (got, got_se), (want, want_se) = (map(float, re.search(number, t).groups())
                                      for t in (printed, said))  # fmt: skip
    assert abs(got - want) <= 3 * got_se + 0.005, (printed, said)
    # the error bar it quotes is the one a run gives, not one of another start or budget
    assert want_se / 2 <= got_se <= 2 * want_se, (printed, said)


def test_readme_links_resolve():
    """Every relative link on the front page points at a file in the repository."""
    root = README.parent
    for target in re.findall(r"\]\(([^)#:]+)\)", README.read_text()):
        assert (root / target).exists(), target


def test_every_public_name_has_an_api_page(tmp_path):
    """The site's API reference is generated from __all__: each public name gets a page."""
    import sys

    sys.path.insert(0, str(README.parent / "docs"))
    try:
        api = importlib.import_module("_api")
    finally:
        sys.path.pop(0)
    written = set(api.write(tmp_path))
    for name in ["ppl_hais.hais", "ppl_hais.compare_evidence", "ppl_hais.adapters.numpyro.HAIS",
                 "ppl_hais.adapters.pymc.sample_hais", "ppl_hais.workflow.evidence.evidence",
                 "ppl_hais.results.plots.plot_convergence",
                 "ppl_hais.research.energy.log_partition"]:
        assert name in written, name
    for module in api._modules():
        mod = importlib.import_module(module)
        assert (tmp_path / f"{module}.md").exists()
        for attr in mod.__all__:
            text = (tmp_path / f"{module}.md").read_text()
            assert f"[`{attr}`]" in text, (module, attr)


def test_the_evidence_guide_states_the_pilots_trimmed_spread():
    """The guide's "one in 32" is the fraction the pilot's spread leaves out (``scan.TRIM``)."""
    from ppl_hais.annealing import scan

    guide = " ".join((README.parent / "docs" / "guide" / "evidence.md").read_text().split())
    assert f"farthest from the rest (one in {scan.TRIM})" in guide


def test_the_evidence_guide_states_a_top_up_as_the_workflow_sizes_it(monkeypatch):
    """The guide's example top-up (0.026 at 512 particles: 42 more, one unit of 128) is what
    ``runs.more_particles`` asks for, and 128 the unit on two cores."""
    from ppl_hais.annealing import execution
    from ppl_hais.workflow import runs

    guide = " ".join((README.parent / "docs" / "guide" / "evidence.md").read_text().split())
    assert "An SE of 0.026 at 512 particles asks for 42 more: a unit of 128 on two cores" in guide
    assert math.ceil(512 * (0.026**2 / runs.PRECISE_SE**2 - 1)) == 42
    assert runs.more_particles(0.026, 512, unit=128, cost=1, room=1e9) == 128
    assert f"at most {runs.MAX_PARTICLES}× the call's" in guide
    monkeypatch.delenv("PPL_HAIS_CPU_THREADS", raising=False)  # set by pytest -n
    with execution.using_cores(2):
        assert execution.top_up_unit(512) == (128 if jax.default_backend() == "cpu" else 512)


def test_the_readme_states_the_cost_over_dimension_page_as_it_is():
    """README's bound on a warm call's cost over its bare gradients (50 coefficients and up) is
    the page's largest ratio rounded up (docs/cost_over_dim.md, written by ``make bench``)."""
    page = (README.parent / "docs" / "cost_over_dim.md").read_text()
    header = next(line for line in page.splitlines() if line.startswith("| D "))
    names = [c.strip() for c in header.strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
            if re.match(r"\| \d", line)]  # fmt: skip
    ratios = [float(r[names.index("warm / bare")]) for r in rows if int(r[0]) >= 50]
    assert {int(r[0]) for r in rows} >= {200, 500, 1000}
    text = " ".join(README.read_text().split())
    said = re.search(r"of 50 to 1000 coefficients costs at most ([\d.]+)×", text)
    assert said is not None and float(said.group(1)) == math.ceil(max(ratios) * 10) / 10
    guide = " ".join((README.parent / "docs" / "guide" / "evidence.md").read_text().split())
    assert "up to 1000 coefficients stays one rung of 250 temperatures" in guide
    assert {r[names.index("rungs (temperatures)")] for r in rows} == {"250"}


def test_the_readme_states_the_trust_suite_page_as_it_is():
    """README's summary of the trust suite (runs, silent misses, false alarms, the least number
    of right runs of any model) is what its page says (docs/trust_suite.md, written by
    ``make bench``), so a new run of the suite cannot leave the README behind."""
    page = (README.parent / "docs" / "trust_suite.md").read_text()
    runs, silent, false = re.search(r"(\d+) runs: (\d+) silent misses; (\d+) false alarms",
                                    page).groups()  # fmt: skip
    text = " ".join(README.read_text().split())
    said = re.search(r"no silent miss and (\d+) false alarms? in (\d+) runs", text)
    assert said is not None and silent == "0" and said.groups() == (false, runs)
    beyond = re.search(r"(\d+) unwarned runs? beyond 2 SE \+ 0.02", page).group(1)
    assert f"{false} false alarms in {runs} runs, {beyond} unwarned runs beyond 2 SE + 0.02" in text
    header = next(line for line in page.splitlines() if line.startswith("| model | adapter"))
    names = [c.strip() for c in header.strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
            if line.startswith("| ") and not line.startswith("| model")]  # fmt: skip
    # our adapters' rows (BlackJAX's sit beside them in the same table and the next)
    ours = [r for r in rows if len(r) == len(names) and r[1] in ("numpyro", "pymc")]
    column = names.index("right")
    right = [tuple(map(int, r[column].split("/"))) for r in ours]
    assert {r[1] for r in ours} == {"numpyro", "pymc"} and len(right) >= 16
    least, seeds = re.search(r"every model right on at least (\d+) of (\d+) runs", text).groups()
    assert (int(least), int(seeds)) == (min(k for k, _ in right), max(n for _, n in right))
    guide = " ".join((README.parent / "docs" / "guide" / "trust.md").read_text().split())
    # the guide: the banana's runs sit low, and the shortfall in their SE brings ±2 SE over them
    assert "banana runs sit a few hundredths of a nat low" in guide
    banana = [r for r in ours if r[0].startswith("banana")]
    covers = [r[names.index("±2 SE covers")] for r in banana]
    assert banana and all(float(r[2].split()[0]) < 0 for r in banana)
    inside, unwarned = (sum(int(c.split("/")[k]) for c in covers) for k in (0, 1))
    assert all(int(a) >= 0.9 * int(b) for a, b in (c.split("/") for c in covers))
    assert f"± 2 SE covers {inside} of their {unwarned} unwarned runs" in guide
    alarms = re.search(r"(\d+) false alarms? of (\d+) right runs", guide).groups()
    assert alarms == (false, str(sum(k for k, _ in right)))
    # the funnel's sentence: its right runs per adapter, none unwarned beyond 2 SE + 0.02
    funnel = {r[1]: r for r in ours if r[0] == "funnel 10-D"}
    said = re.search(r"from N\(0, I\) is right on (\d+) of 20 runs through NumPyro and (\d+) "
                     r"through PyMC", guide).groups()  # fmt: skip
    assert said == tuple(funnel[a][column].split("/")[0] for a in ("numpyro", "pymc"))
    assert "inside 2 SE + 0.02 of the truth" in guide
    assert all(funnel[a][names.index("beyond 2 SE + 0.02")] == "0" for a in funnel)
    # both guides' median gradients of a NumPyro funnel call: the page's (mean, then median)
    median = float(funnel["numpyro"][names.index("gradients")].split("(")[1].rstrip(")"))
    evidence_guide = " ".join((README.parent / "docs" / "guide" / "evidence.md").read_text()
                              .split())  # fmt: skip
    for text in (guide, evidence_guide):
        assert f"a median {median:.1f} M gradients" in text
    # the centered funnel's sentence: its right runs per adapter, its SE against the bound
    # 2 SE + 0.02, and the suite's unwarned runs beyond that bound beside chance's count
    centered = {r[1]: r for r in ours if r[0] == "centered funnel 10-D, weak data"}
    said = re.search(r"a centered 10-D funnel with weak data on (\d+) through NumPyro and (\d+) "
                     r"through PyMC", guide).groups()  # fmt: skip
    assert said == tuple(centered[a][column].split("/")[0] for a in ("numpyro", "pymc"))
    beyond = re.search(r"(\d+) unwarned runs? beyond 2 SE \+ 0.02", page).group(1)
    assert f"{beyond} unwarned runs of the suite's {runs} lie beyond 2 SE + 0.02" in guide
    chance = re.search(r"beyond 2 SE \+ 0.02 \(([\d.]+) by chance", page).group(1)
    assert f"at each row's own spread of errors chance alone gives {chance} such runs" in guide
    # ... at the PyMC row's median SE, 2 SE + 0.02 is 2 + 0.02 / SE of them, which a normal
    # error exceeds one run in so many; the guide states the row's rms error beside it
    se = float(centered["pymc"][names.index("median SE")])
    rms = float(re.search(r"\| centered funnel 10-D, weak data \| [^|]+ \| \d+/\d+ right, rms "
                          r"([\d.]+)", page).group(1))  # fmt: skip
    bound = 2 + 0.02 / se
    odds = 1 / (2 * stats.norm.sf(bound))
    assert se <= runs_module.PRECISE_SE
    assert f"at its median SE of {se:.3f} the bound 2 SE + 0.02 is {bound:.1f} SEs" in guide
    assert f"about one run in {5 * round(odds / 5)} exceeds by chance" in guide
    assert f"rms error, {rms:.3f} through PyMC, is {rms / se:.1f} times that SE" in guide
    pymc_median = float(funnel["pymc"][names.index("gradients")].split("(")[1].rstrip(")"))
    assert f"{pymc_median:.1f} M through PyMC" in evidence_guide
    column = names.index("bridged · forward right")
    bridged = sum(int(funnel[a][column].split(" · ")[0]) for a in funnel)
    assert f"two directions ({bridged} of {20 * len(funnel)})" in guide


def test_the_trust_guide_states_the_held_out_suite_page_as_it_is():
    """The trust guide's sentence on the held-out suite (its calls, no unwarned run beyond
    2 SE + 0.02, the least ±2 SE coverage of a row) is what docs/trust_suite_heldout.md says."""
    page = (README.parent / "docs" / "trust_suite_heldout.md").read_text()
    runs, beyond, least = re.search(
        r"(\d+) runs: .* (\d+) unwarned runs beyond 2 SE \+ 0.02 \([^)]*\); ±2 SE covers "
        r"(\d+)% of a row's unwarned runs at the least", page).groups()  # fmt: skip
    guide = " ".join((README.parent / "docs" / "guide" / "trust.md").read_text().split())
    said = re.search(r"\[(\d+) calls\]\(../trust_suite_heldout.md\)\), (\d+) unwarned runs lie "
                     r"beyond 2 SE \+ 0.02 and ±2 SE covers at least (\d+)% of each row", guide)
    assert said is not None and said.groups() == (runs, beyond, least)
    assert int(least) >= 90


def test_the_trust_guide_states_the_bias_check_page_on_the_experts():
    """The trust guide's sentence on the Student-t experts' bias checks (every check's starts
    redrawn, the bridge right where the estimate is) is what docs/bias_check.md shows."""
    page = (README.parent / "docs" / "bias_check.md").read_text()
    header = next(line for line in page.splitlines() if line.startswith("| model |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    row = next([c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
               if line.startswith("| Student-t experts"))  # fmt: skip
    checked = int(row[names.index("checked")].split("/")[0])
    redrawn = int(row[names.index("redrawn / could not run")].split(" / ")[0])
    bridge, estimate = row[names.index("Bennett right / estimate right (checked)")].split(" / ")
    assert checked > 0 and redrawn == checked and bridge == estimate
    guide = " ".join((README.parent / "docs" / "guide" / "trust.md").read_text().split())
    assert ("whose tails the MCMC misses, every check's starts are redrawn by the anneal's own "
            "transition and the bridge agrees with the forward estimate") in guide


def test_the_benchmarks_index_states_the_ridges_page_as_it_is():
    """The index says the 10-D bananas are not yet right: every run low, yet each one's
    unwarned runs covered by their ±2 SE (the mildly twisted one's by bridging both directions);
    the held-out ridge and ring right. Their page (``make bench``) must show it, so a fix (or
    a regression) cannot leave the sentence behind."""
    index = " ".join((README.parent / "docs" / "benchmarks.md").read_text().split())
    assert "10-D bananas the defaults do not yet get right" in index
    assert "so every run lies low; each one's unwarned runs are covered by their ±2 SE, the " \
        "mildly twisted one's through the bridge of both directions' anneals" in index  # fmt: skip
    page = (README.parent / "docs" / "trust_suite_ridges.md").read_text()
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
             if line.startswith("| ")]  # fmt: skip
    head = lines[0]
    rows = {(r[0], r[1]): r for r in lines[1:] if len(r) == len(head)}
    beyond, right, bridged = (head.index(c) for c in ("beyond 2 SE + 0.02", "right",
                                                       "bridged · forward right"))  # fmt: skip
    for adapter in ("numpyro", "pymc"):
        strong = rows[("twisted banana 10-D, b = 0.1", adapter)]
        mild = rows[("twisted banana 10-D, b = 0.03", adapter)]
        assert float(strong[2].split()[0]) < -0.2 and strong[beyond] == "0"
        hits, seeds = mild[right].split("/")
        assert float(mild[2].split()[0]) < -0.05 and int(hits) < int(seeds)
        assert mild[beyond] == "0" and int(mild[bridged].split()[0]) > int(seeds) // 2
        if adapter == "numpyro":  # the trust guide's sentence on the bridge, from this row
            guide = " ".join((README.parent / "docs" / "guide" / "trust.md").read_text().split())
            forward = mild[bridged].split(" · ")[1].split("/")[0]
            said = (f"every call's estimate is a bridge; where the forward estimates were right on "
                    f"{forward} of {seeds} runs through NumPyro, the bridges were right on {hits}")
            assert mild[bridged].split()[0] == seeds and said in guide
            assert int(hits) > int(forward)
        for model in ("sine ridge 8-D", "ring 2-D"):
            row = rows[(model, adapter)]
            hits, seeds = row[right].split("/")
            assert row[beyond] == "0" and int(hits) >= int(seeds) - 1


def test_the_readme_states_the_users_page_as_it_is():
    """The README's figures for the models users fit (two centered hierarchies, heavy tails as
    a factor) come from their page (``make bench``): both adapters right on every seed, in at
    most the stated multiple of NUTS + bridge sampling's time, the heavy tails in at most the
    stated gradients of one call, and ``pm.sample_smc`` off by the stated nats; the twisted
    banana is the page's open case."""
    page = (README.parent / "docs" / "trust_suite_users.md").read_text()
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
             if line.startswith("| ")]  # fmt: skip
    head = next(cells for cells in lines if cells[:2] == ["model", "numpyro"])
    rows = [cells for cells in lines if len(cells) == len(head) and "right, rms" in cells[1]]
    ours = [r for r in rows if not r[0].startswith("twisted banana")]
    assert len(ours) == 3
    slowest, smc_rms, tails = 0.0, 0.0, 0.0
    for r in ours:
        for adapter in ("numpyro", "pymc"):
            right, seeds = r[head.index(adapter)].split(" right")[0].split("/")
            assert right == seeds
            if r[0].startswith("Student-t experts"):  # "0.65 M (≤ 1.27), 0.7 s": the most
                most = float(r[head.index(adapter)].split("(≤ ")[1].split(")")[0])
                tails = max(tails, most)
            ratio = r[head.index(f"{adapter} / nuts-bridge")]
            slowest = max(slowest, float(ratio.split("·")[1].split()[0]))
        smc_rms = max(smc_rms, float(r[head.index("smc")].split("rms ")[1].split(",")[0]))
    readme = " ".join(README.read_text().split())
    bound = float(re.search(r"in at most ([\d.]+)× the time of NUTS", readme).group(1))
    assert slowest <= bound < slowest + 0.2
    stated = float(re.search(r"the heavy tails in at most ([\d.]+) M gradients", readme).group(1))
    assert 0 < tails <= stated < tails + 0.2 and stated <= 5.0  # heavy tails are held to 5 M
    off = float(re.search(r"`pm.sample_smc` was off by up to (\d+) nats", readme).group(1))
    assert off <= smc_rms < off + 1
    # the banana: missed, but never an unwarned run beyond 2 SE + 0.02 through our adapters
    assert "ours either warns or covers its error within ±2 SE on every run" in readme
    table = next(cells for cells in lines if cells[:2] == ["model", "adapter"])
    banana = [cells for cells in lines if cells[0].startswith("twisted banana")
              and cells[1] in ("numpyro", "pymc")]  # fmt: skip
    assert len(banana) == 2
    for cells in banana:
        assert cells[table.index("silent")] == "0"
        assert cells[table.index("beyond 2 SE + 0.02")] == "0"
