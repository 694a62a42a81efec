# Two entry points on a fresh clone: `make demo` (the main job, offline) and `make test`.
# Both create .venv and install the project with its test extras on first use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test

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
