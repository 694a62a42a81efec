# Two entry points on a fresh clone: `make demo` (the main job, offline) and `make test`.
# Both create .venv and install the project with its test extras on first use. `make lab` opens the
# notebooks in JupyterLab (it adds the `notebooks` extra to .venv on first use).
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

LAB_STAMP := $(VENV)/.notebooks-stamp
# Jupyter starts each kernel in the notebook's folder, so the notebooks get the store as an absolute path.
LAB_STORE := $(abspath $(or $(BEDSIDE_STORE),data/results))
# Jupyter refuses to run as root without --allow-root (as in many containers).
LAB_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

.PHONY: demo test test-fast lab perf

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The demo writes into the default store, ./data/results here (or $BEDSIDE_STORE), and replaces
# only the runs an earlier demo collected.
demo: $(STAMP)
	$(VENV)/bin/bedside demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

# The inner loop: everything but the tests named in tests/slow_tests.txt and the wheel install check.
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m 'not slow and not install'

# Every benchmark of tests/perf/ in turn (minutes; needs ../shared/bedside-bench), then one table of
# figures against targets for the README's measured section. PERF_ARGS="--only summary_speed" picks.
perf: $(STAMP)
	$(VENV)/bin/python tests/perf/run_all.py $(PERF_ARGS)

$(LAB_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,notebooks]'
	touch $(LAB_STAMP)

# JupyterLab on notebooks/ over the default store; the demo's runs are collected first when it has none
# (as `make demo` would: same store, report in reports/demo/).
# `make lab LAB_ARGS=--no-browser` on a machine without a browser (open the printed URL).
lab: $(LAB_STAMP)
	@$(VENV)/bin/python -c "import sys, toolkit as bs; sys.exit(not bs.Store.open().run_ids())" \
		|| $(VENV)/bin/bedside demo
	@echo "Notebooks read the store $(LAB_STORE); start with 01-quickstart.ipynb."
	BEDSIDE_STORE='$(LAB_STORE)' $(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(LAB_ROOT) $(LAB_ARGS)
