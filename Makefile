# Attention, Step by Step. `make lab` to learn, `make test` to verify everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2
PYTEST := $(BIN)/python -m pytest
SUBMISSIONS ?= submissions
GRADES ?= grades

export PYTHONHASHSEED := 0
export MPLBACKEND := Agg

.PHONY: help setup lab test quick lint unit doctest nbval nbval-solutions nbval-chapters chapters grade html browser binder-test benchmark clean

help:
	@echo "make lab        set up .venv (if needed) and start JupyterLab on the course"
	@echo "make test       set up, then run everything: lint, unit tests, doctests, notebooks, grader, browser"
	@echo "make quick      lint + fast unit tests (no notebook execution), for iterating"
	@echo "make chapters   regenerate chapters/ from solutions/"
	@echo "make grade SUBMISSIONS=dir   grade a class (see README, instructors)"
	@echo "make html       static HTML edition in build/html (offline: JavaScript from npm, see package.json)"
	@echo "make browser    JupyterLab + offline HTML edition in headless Chromium (Playwright)"
	@echo "make binder-test  build Binder's environment from binder/ in a fresh venv and run chapters/; simulate Colab"
	@echo "make benchmark  python -m utils.benchmark (ratios against PyTorch built-ins)"

# --- setup: one venv, exact pins from constraints.txt, the course package in editable mode -----------
$(STAMP): constraints.txt requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

setup: $(STAMP)

# The JavaScript the static HTML edition ships (widget embedder, RequireJS, MathJax), exact from the lock.
NODE_STAMP := node_modules/.installed
$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

lab: setup
	$(BIN)/python -m utils.lab

# --- tests ----------------------------------------------------------------------------------------
test: setup lint unit doctest nbval binder-test browser html
	@echo "make test: all green"

quick: setup lint
	$(PYTEST) -q -n $(JOBS) -m "not slow and not browser"

lint: setup
	$(BIN)/ruff check utils tests solutions chapters

# The browser, Binder and Colab tests have targets of their own (below).
unit: setup
	$(PYTEST) -n $(JOBS) -m "not browser" --ignore=tests/test_binder_env.py --ignore=tests/test_colab_sim.py

doctest: setup
	$(PYTEST) -q -p no:cacheprovider --doctest-modules utils -o testpaths=utils

nbval: nbval-solutions nbval-chapters

nbval-solutions: setup
	$(PYTEST) -q -n $(JOBS) --dist loadfile -p no:cacheprovider --nbval solutions --nbval-sanitize-with tests/nbval_sanitize.cfg -o testpaths=solutions

nbval-chapters: setup
	$(PYTEST) -q -n $(JOBS) --dist loadfile -p no:cacheprovider --nbval-lax chapters -o testpaths=chapters

# Binder's environment built from binder/ as Binder would (Docker cannot run here), and Colab simulated:
# each builds a fresh venv (pip: local wheels and cache), one per worker.
binder-test: setup
	$(PYTEST) -q -p no:cacheprovider -n $(JOBS) --dist loadfile tests/test_binder_env.py tests/test_colab_sim.py

# Real JupyterLab in headless Chromium (/usr/bin/chromium), and the offline HTML edition.
browser: setup $(NODE_STAMP)
	$(PYTEST) -q -p no:cacheprovider -m browser tests/browser tests/test_html.py

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
