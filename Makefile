# Two entry points for a fresh machine with only Python 3.11: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or: make PYTHON=python3 ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[numpyro,pymc,test]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ppl-hais demo

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

test-slow: $(STAMP)
	$(PY) -m pytest -n 2 -q -m slow

bench: $(STAMP)
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/convergence.py --out docs
	$(PY) benchmarks/speed.py --out docs/speed.md
	$(PY) benchmarks/rng.py --out docs/rng.md
	$(PY) benchmarks/schedules.py --out docs/schedules.md
	$(PY) benchmarks/groups.py --out docs/groups.md
	$(PY) benchmarks/evidence_peers.py --out docs/evidence_peers.md
	$(PY) benchmarks/pymc_vs_smc.py --out docs/pymc_vs_smc.md
	$(PY) benchmarks/pymc_vs_smc.py --seeds 20 --only funnel --out docs/pymc_vs_smc_funnel.md
	$(PY) benchmarks/hais_flips.py --seeds 8
	$(PY) benchmarks/reduced_flips.py --seeds 3
	$(PY) benchmarks/exchange_demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check ppl_hais adapters tests benchmarks

clean:
	rm -rf $(VENV)
