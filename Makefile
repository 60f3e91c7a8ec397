# Entry points on a fresh machine: `make demo` and `make test` (the newest Python 3.11-3.13
# found, with the newest packages that resolve on it); `make test-oldest` (Python 3.11 with the
# oldest supported versions, .ci/oldest.txt); `make docs` (the site). CI (.ci/run) runs all three.

# the newest of python3.13 / 3.12 / 3.11 that runs: on the PATH, or installed by pyenv
find_python = $(shell for v in $(1); do \
	if python$$v -c "" >/dev/null 2>&1; then command -v python$$v; exit; fi; \
	root=$$(pyenv root 2>/dev/null); \
	for p in $$(ls -d $$root/versions/$$v*/bin/python$$v 2>/dev/null | sort -V -r); do \
		if $$p -c "" >/dev/null 2>&1; then echo $$p; exit; fi; done; done)

PYTHON ?= $(call find_python,3.13 3.12 3.11)
PYTHON_OLDEST ?= $(call find_python,3.11)
VENV := .venv
VENV_OLDEST := .venv-oldest
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STAMP_OLDEST := $(VENV_OLDEST)/.installed
# setuptools warns on every editable install whose package-dir maps a folder (adapters/ is
# installed as ppl_hais.adapters): information for packagers, noise for someone running make
QUIET_BUILD := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: demo test test-slow test-oldest lint docs bench clean

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "need Python 3.11, 3.12 or 3.13 (python3.1x on the PATH or pyenv)"; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(QUIET_BUILD) $(PY) -m pip install -q -e ".[numpyro,pymc,test]"
	$(PY) -c "import sys, jax, pymc, arviz; print('stack: Python', sys.version.split()[0], 'jax', jax.__version__, 'pymc', pymc.__version__, 'arviz', arviz.__version__)"
	touch $(STAMP)

$(STAMP_OLDEST): pyproject.toml .ci/oldest.txt
	@test -n "$(PYTHON_OLDEST)" || { echo "need Python 3.11 (python3.11 on the PATH or pyenv)"; exit 1; }
	rm -rf $(VENV_OLDEST)
	$(PYTHON_OLDEST) -m venv $(VENV_OLDEST)
	$(VENV_OLDEST)/bin/python -m pip install -q --upgrade pip
	$(QUIET_BUILD) $(VENV_OLDEST)/bin/python -m pip install -q -c .ci/oldest.txt -e ".[numpyro,pymc,test]"
	touch $(STAMP_OLDEST)

demo: $(STAMP)
	$(VENV)/bin/ppl-hais demo

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

test-oldest: $(STAMP_OLDEST)
	$(VENV_OLDEST)/bin/python -m pytest -n 2 -q

test-slow: $(STAMP)
	$(PY) -m pytest -n 2 -q -m slow

# every benchmark, each rewriting its page of the site's benchmark section (hours on 2 cores)
bench: $(STAMP) $(STAMP_OLDEST)
	$(QUIET_BUILD) $(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/convergence.py --out docs
	$(PY) benchmarks/trust.py --seeds 20 --out docs/trust.md
	$(PY) benchmarks/trust_heldout.py --seeds 10 --out docs/trust_heldout.md
	$(PY) benchmarks/trust_suite.py --seeds 20 --adapters numpyro,pymc,blackjax,blackjax-long --out docs/trust_suite.md
	$(PY) benchmarks/trust_suite.py --models heldout --seeds 10 --first-seed 100 --out docs/trust_suite_heldout.md
	$(PY) benchmarks/trust_suite.py --models ridges --seeds 10 --first-seed 300 --out docs/trust_suite_ridges.md
	$(PY) benchmarks/trust_suite.py --models users --seeds 5 --first-seed 400 --adapters numpyro,pymc,nuts-bridge,smc --out docs/trust_suite_users.md
	$(PY) benchmarks/calibrate_ladder.py --out docs/calibration.md
	$(PY) benchmarks/bias_check.py --seeds 10 --out docs/bias_check.md
	$(PY) benchmarks/ladder.py --seeds 10 --out docs/ladder.md
	$(PY) benchmarks/evidence_peers.py --out docs/evidence_peers.md
	$(PY) benchmarks/pymc_vs_smc.py --out docs/pymc_vs_smc.md
	$(PY) benchmarks/bridge.py --seeds 20 --hais-seeds 5 --out docs/bridge.md
	$(PY) benchmarks/bf_calibration.py --datasets 200 --out docs/bf_calibration.md
	$(PY) benchmarks/switchpoint.py --seeds 3 --out docs/switchpoint.md
	$(PY) benchmarks/schedules.py --out docs/schedules.md
	$(PY) benchmarks/natural_gradient.py --seeds 5 --out docs/natural_gradient.md
	$(PY) benchmarks/refinement.py --seeds 3 --out docs/refinement.md
	$(PY) benchmarks/speed.py --out docs/speed.md
	$(PY) benchmarks/speed.py --over-dim --out docs/cost_over_dim.md
	$(PY) benchmarks/first_call.py --python $(PY) --python $(VENV_OLDEST)/bin/python --out docs/first_call.md
	$(PY) benchmarks/chains.py --out docs/chains.md
	$(PY) benchmarks/reduced_flips.py --seeds 3
	$(PY) benchmarks/exchange_demo.py
	$(PY) benchmarks/rbm_ais.py --out docs/rbm_ais.md

# the documentation site: every page executed, warnings are errors (docs/_build/html/index.html)
docs: $(STAMP)
	$(QUIET_BUILD) $(PY) -m pip install -q -e ".[docs]"
	$(PY) -m sphinx -b html -W --keep-going -q docs docs/_build/html
	@echo "site: docs/_build/html/index.html"

lint: $(STAMP)
	$(VENV)/bin/ruff check ppl_hais adapters tests benchmarks

clean:
	rm -rf $(VENV) $(VENV_OLDEST) docs/_build docs/api
