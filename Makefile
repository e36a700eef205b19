# Attention, Step by Step. `make lab` to learn, `make test` to verify everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2
PYTEST := $(BIN)/python -m pytest
SUBMISSIONS ?= submissions
GRADES ?= grades
# Where torch's wheel comes from. auto: PyTorch's CPU index, unless pip's configured index already
# offers the CPU wheel (then that index as it is). Empty: PyPI's default (CUDA on Linux). Or a URL,
# e.g. TORCH_INDEX=https://download.pytorch.org/whl/cu126 on a GPU machine. See README, Setup.
TORCH_INDEX ?= auto
PORT ?= 8888
WORK ?= work

export PYTHONHASHSEED := 0
export MPLBACKEND := Agg

.PHONY: help setup venv test-prereqs lab lab-zh test quick lint unit doctest nbval nbval-solutions nbval-chapters chapters grade html browser binder-test benchmark clean

help:
	@echo "make lab        set up .venv (if needed) and start JupyterLab on the course (PORT=8888)"
	@echo "make lab-zh     the same for the Chinese edition (中文版): chapters/zh in work/zh, JupyterLab in Chinese"
	@echo "make test       set up, then run everything: lint, unit tests, doctests, notebooks, grader, browser"
	@echo "make quick      lint + fast unit tests (no notebooks, no sandboxed grading), for iterating"
	@echo "make chapters   regenerate chapters/ from solutions/"
	@echo "make grade SUBMISSIONS=dir   grade a class (see README, instructors)"
	@echo "make html       static HTML edition in build/html (offline: JavaScript from npm, see package.json)"
	@echo "make browser    JupyterLab + offline HTML edition in headless Chromium (Playwright)"
	@echo "make binder-test  build Binder's environment from binder/ in a fresh venv and run chapters/; simulate Colab"
	@echo "make benchmark  python -m utils.benchmark (ratios against PyTorch built-ins)"

# --- setup: one venv, exact pins from constraints.txt, the course package in editable mode -----------
# `venv` first rebuilds a half-made .venv (python but no pip: what a missing python3-venv leaves).
$(STAMP): constraints.txt requirements.txt requirements-dev.txt pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
	    $$($(BIN)/python utils/prereqs.py torch-index "$(TORCH_INDEX)") -c constraints.txt -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

venv:
	@$(PYTHON) utils/prereqs.py venv $(VENV) || rm -rf $(VENV)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	    echo "could not make $(VENV): on Debian/Ubuntu, sudo apt-get install python3-venv"; exit 1; }

setup: venv
	@$(MAKE) --no-print-directory $(STAMP)

# The JavaScript the static HTML edition ships (widget embedder, RequireJS, MathJax), exact from the lock.
NODE_STAMP := node_modules/.installed
$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

lab: setup
	$(BIN)/python -m utils.lab --port $(PORT) --work $(WORK)

# The Chinese chapters in $(WORK)/zh, with JupyterLab's Chinese language pack selected for this run only.
lab-zh: setup
	$(BIN)/python -m utils.lab --lang zh --port $(PORT) --work $(WORK)/zh

# --- tests ----------------------------------------------------------------------------------------
test: test-prereqs setup lint unit doctest nbval-solutions binder-test browser html
	@echo "make test: all green"

# npm and Chromium, checked before anything is installed: one line says what is missing.
test-prereqs:
	@$(PYTHON) utils/prereqs.py test

# The core, the exercises and the builder: not the tests marked slow (notebooks, fresh venvs), browser
# or sandbox (batches graded in the grader's sandboxed workers), which `make unit` runs: 2,074 of the
# 3,338 tests, 51 s on an idle 2-core machine (CONTRIBUTING: under 60 s).
quick: setup lint
	$(PYTEST) -q -n $(JOBS) -m "not slow and not browser and not sandbox"

lint: setup
	$(BIN)/ruff check utils tests solutions chapters

# Everything but the browser, Binder and Colab tests, which have targets of their own (below). Whole files
# are handed out, so that a module-scoped fixture is built once, in the order tests/conftest.py sets: the
# files holding slow tests first, then those with a module-scoped fixture, then the rest.
unit: setup
	$(PYTEST) -n $(JOBS) --dist loadfile --no-loadscope-reorder -m "not browser" --ignore=tests/test_binder_env.py --ignore=tests/test_colab_sim.py

doctest: setup
	$(PYTEST) -q -p no:cacheprovider --doctest-modules utils -o testpaths=utils

nbval: nbval-solutions nbval-chapters

# Strict on solutions/ and solutions/zh/, and the notebook budgets (tests/nbval_budgets.py): each
# notebook's wall time and kernel peak RSS, in build/notebook-budgets.json; one over budget fails this.
nbval-solutions: setup
	$(PYTEST) -q -n $(JOBS) --dist loadfile -p no:cacheprovider -p tests.nbval_budgets --nbval solutions --nbval-sanitize-with tests/nbval_sanitize.cfg -o testpaths=solutions

# Top to bottom on chapters/ and chapters/zh/.
nbval-chapters: setup
	$(PYTEST) -q -n $(JOBS) --dist loadfile -p no:cacheprovider --nbval-lax chapters -o testpaths=chapters

# Binder's environment built from binder/ as Binder would (Docker cannot run here), and Colab simulated:
# each builds a fresh venv (pip: local wheels and cache), one per worker. Under `make test` this session
# also runs chapters/zh/ top to bottom (nbval-chapters' check), on the worker Colab's shorter test frees,
# while the other still runs the English chapters in Binder's environment (the same verdict as nbval-lax,
# no error outside a cell tagged raises-exception, in the stricter environment): no chapter runs twice.
BINDER_NBVAL ?= $(if $(filter test,$(MAKECMDGOALS)),--nbval-lax chapters/zh,)
binder-test: setup
	$(PYTEST) -q -p no:cacheprovider -n $(JOBS) --dist loadfile tests/test_binder_env.py tests/test_colab_sim.py $(BINDER_NBVAL)

# Real JupyterLab in headless Chromium (/usr/bin/chromium), and the offline HTML edition, built from the
# committed html-cache/ (executed chapters and explorer grids; a unit test fails when it is not current,
# so nothing is executed here). loadfile: the edition's tests (tests/test_html.py) share one worker and
# one build, while the other worker runs the chapters in JupyterLab.
browser: setup $(NODE_STAMP)
	$(PYTEST) -q -p no:cacheprovider -n $(JOBS) --dist loadfile -m browser tests/test_html.py tests/browser

# --- course content -------------------------------------------------------------------------------
chapters: setup
	$(BIN)/python -m utils.build

html: setup $(NODE_STAMP)
	$(BIN)/python -m utils.html

grade: setup
	$(BIN)/python -m utils.grade $(SUBMISSIONS) --out $(GRADES)

benchmark: setup
	$(BIN)/python -m utils.benchmark

clean:
	rm -rf build .pytest_cache
