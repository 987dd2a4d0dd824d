# PT2E Casebook: `make build` builds the executed book, `make test` tests it.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
BUILD_DIR := _build
JUPYTER_CACHE := $(BUILD_DIR)/.jupyter_cache
# Every Sphinx warning and every unexpected cell error fails the build.
JB_FLAGS := -W -n --keep-going
BOOK ?= .
PORT ?= 8000

# TensorRT: "full" installs torch-tensorrt with enterprise TensorRT (needs a CUDA GPU and NVIDIA's
# package index). "analysis" installs only torch-tensorrt's Python code, for the dry-run partition
# analysis (with a labelled stand-in for TensorRT). "rtx" (the default without a GPU) is "analysis"
# plus Torch-TensorRT for RTX with TensorRT for RTX from PyPI, whose builder makes real engines
# without a GPU (running them needs an RTX GPU). torch-tensorrt-rtx installs the same `torch_tensorrt`
# package as torch-tensorrt, so it goes to a folder of its own, TRT_RTX_DIR, which only the engine
# builders' worker processes put on their path (casebook/backends/tensorrt/engine.py): each process sees
# exactly one torch_tensorrt.
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
TENSORRT ?= $(if $(HAS_GPU),full,rtx)
TRT_REQUIREMENTS_full := requirements-gpu.txt
TRT_PIP_FLAGS_full :=
TRT_REQUIREMENTS_analysis := requirements-trt-analysis.txt
TRT_PIP_FLAGS_analysis := --no-deps
TRT_REQUIREMENTS_rtx := requirements-trt-analysis.txt
TRT_PIP_FLAGS_rtx := --no-deps
TRT_RTX_DIR := $(VENV)/tensorrt-rtx
ifeq ($(TRT_REQUIREMENTS_$(TENSORRT)),)
$(error TENSORRT=$(TENSORRT) is not a TensorRT install: use TENSORRT=rtx (builds TensorRT for RTX engines without a GPU), TENSORRT=full (enterprise TensorRT, needs a CUDA GPU) or TENSORRT=analysis (dry runs only))
endif
# detectron2: "sal" (default) installs the PyPI repackaging sal-detectron2 (Python code only);
# "upstream" builds facebookresearch/detectron2 from GitHub (needs network access to GitHub).
DETECTRON2 ?= sal
INSTALLED := $(VENV)/.installed-$(TENSORRT)-detectron2-$(DETECTRON2)

.PHONY: build book test unit unit-fast site-check browser serve lint format clean install runner page lab

# Pages execute JOBS at a time (scripts/execute_pages.py) into the cache that Sphinx then reads, so
# the Sphinx build itself executes nothing. Most export work is single-threaded Python.
JOBS ?= 2

build: install runner
	@if [ "$${CI:-}" = "true" ]; then echo "CI=true: executing every notebook afresh"; rm -rf $(JUPYTER_CACHE); fi
	$(BIN)/python scripts/stale_pages.py
	@start=$$(date +%s); \
	$(BIN)/python scripts/execute_pages.py --jobs $(JOBS); \
	echo "pages executed in $$(( $$(date +%s) - start )) s"; \
	$(MAKE) --no-print-directory book; \
	echo "book built in $$(( $$(date +%s) - start )) s: $(BUILD_DIR)/html/index.html"

# The bare Jupyter Book call, also used by tests/test_build_config.py on a fixture book.
book:
	$(BIN)/jupyter-book build $(BOOK) $(JB_FLAGS)

install: $(INSTALLED)

# The C++ program that runs AOTInductor packages without Python (book/shipping/aotinductor_cpp.md),
# compiled against the installed torch wheel's libtorch with CMake from PyPI.
RUNNER := $(BUILD_DIR)/cpp/run_aoti
runner: $(RUNNER)

$(RUNNER): cpp/run_aoti/main.cpp cpp/run_aoti/CMakeLists.txt $(INSTALLED)
	@echo "Building the C++ runner $(RUNNER) (CMake, g++)"
	$(BIN)/cmake -S cpp/run_aoti -B $(BUILD_DIR)/cpp -DCMAKE_BUILD_TYPE=Release \
	  -DTORCH_ROOT="$$($(BIN)/python -c 'import os, torch; print(os.path.dirname(torch.__file__))')" >/dev/null
	$(BIN)/cmake --build $(BUILD_DIR)/cpp -j2

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when a requirements file changes. Cached notebook outputs were produced by the old
# environment, so they are dropped too.
$(INSTALLED): requirements.txt $(TRT_REQUIREMENTS_$(TENSORRT)) requirements-trt-rtx.txt scripts/install_detectron2.sh pyproject.toml | $(BIN)/python
	@echo "Installing the pinned stack (TensorRT: $(TENSORRT), detectron2: $(DETECTRON2))"
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q $(TRT_PIP_FLAGS_$(TENSORRT)) -r $(TRT_REQUIREMENTS_$(TENSORRT))
	rm -rf $(TRT_RTX_DIR)
	$(if $(filter rtx,$(TENSORRT)),$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps --target $(TRT_RTX_DIR) -r requirements-trt-rtx.txt)
	DETECTRON2=$(DETECTRON2) bash scripts/install_detectron2.sh $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps -e .
	rm -f $(VENV)/.installed-*
	rm -rf $(JUPYTER_CACHE)
	touch $@

# One page with the build's checks, the step every recipe of CONTRIBUTING.md ends with: ruff on its
# code cells, then the page executed afresh into the book's cache (a raising cell fails, and so does
# a cell over a third of its timeout). The next `make build` reuses its outputs.
page: install runner
	@if [ -z "$(PAGE)" ]; then \
	  echo "make page needs a page of _toc.yml: make page PAGE=notebooks/pytree_outputs.md"; exit 2; \
	fi
	BIN=$(BIN) bash scripts/lint_pages.sh $(PAGE)
	$(BIN)/python scripts/execute_pages.py --jobs 1 --page $(PAGE)

# JupyterLab (optional, requirements-lab.txt) on the book's folder, with jupytext's viewer as the
# default for the pages, so a double click opens a page as a notebook. The setting goes into the
# virtual environment's JupyterLab (overrides.json), not the reader's own settings.
LAB_INSTALLED := $(VENV)/.installed-lab
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
LAB_ARGS ?=
$(LAB_INSTALLED): requirements-lab.txt $(INSTALLED)
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements-lab.txt
	touch $@

$(LAB_OVERRIDES): scripts/lab_overrides.json $(LAB_INSTALLED)
	mkdir -p $(dir $@)
	cp scripts/lab_overrides.json $@

lab: install $(LAB_INSTALLED) $(LAB_OVERRIDES)
	@echo "JupyterLab on the book: open a page in book/, notebooks/ or case_studies/ (double click) to run it"
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The unit tests run in TEST_WORKERS processes (pytest-xdist), file by file, so a module's fixture
# (an exported model, say) is built once; TEST_WORKERS=0 runs them in this process.
# The fifteen slowest tests are listed at the end, to show where the time goes.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))

# Two workers share the cores: their OpenMP threads wait passively, as two pages at a time do
# (casebook/build_records.py, share_cores).
UNIT_PYTEST = $(if $(XDIST),OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-PASSIVE}) $(BIN)/python -m pytest tests --ignore=tests/site $(XDIST) $(if $(XDIST),--dist loadfile)

# JupyterLab too, for the test of `make lab` (tests/test_make_lab.py): installed before the tests start.
unit: install runner $(LAB_INSTALLED)
	$(UNIT_PYTEST) --durations=15

# The fast lane while you work: the unit tests not marked slow (@pytest.mark.slow: a book build, a
# compiled model, an engine build, a server), in under 2 minutes on a quiet 2-core machine. `make
# unit` runs them all; run it (or `make test`) before you submit.
unit-fast: install runner
	$(UNIT_PYTEST) -m "not slow" --durations=10

# The site checks run in two processes, file by file: the browser test in one, the checks of the
# built files beside it in the other. One browser, not two: Chromium already keeps both cores busy
# (two browsers took 253 s against 176 s for one on 2026-11-28). SCREENSHOTS=yes also saves a
# full-page screenshot of every page under $(BUILD_DIR)/browser/, for a person to look at (no check
# reads them; they add about a third to the browser test's time).
SCREENSHOTS ?= no
ifeq ($(filter yes no,$(SCREENSHOTS)),)
$(error SCREENSHOTS=$(SCREENSHOTS): use SCREENSHOTS=yes (save a screenshot of every page under $(BUILD_DIR)/browser/) or SCREENSHOTS=no (the default))
endif

site-check: install browser
	$(if $(CHROMIUM),CHROMIUM=$(CHROMIUM)) SITE_SCREENSHOTS=$(SCREENSHOTS) $(BIN)/python -m pytest tests/site -n 2 --dist loadfile

# The browser test (tests/site/test_browser.py) drives Debian's chromium through Playwright;
# Playwright's own browser download is not used. As root, make installs it; otherwise it says how.
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser)
browser:
	@if [ -z "$(CHROMIUM)" ] && ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's chromium for the browser test of the site"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "The browser test needs headless Chromium. Install it with:"; \
	    echo "    sudo apt-get install -y chromium"; \
	    echo "or point CHROMIUM at a Chromium or Chrome binary: make site-check CHROMIUM=/path/to/chrome"; \
	    exit 1; \
	  fi; \
	fi

# make test runs the unit tests beside the book build (UNIT_BESIDE=yes, the default): two pages at a
# time still leave the cores partly idle at times (10 to 37% idle in the last minutes of a run on
# 2026-11-28, when the short pages run), and the tests take what is left. They run at a lower
# priority (nice $(UNIT_NICE)), so the pages, the longer job, go first where both want a core, and a
# test still gets a share. Their output goes to $(UNIT_LOG) and is shown when they end; the site
# checks wait for both. UNIT_BESIDE=no runs the unit tests first, alone.
UNIT_BESIDE ?= yes
UNIT_NICE ?= 5
UNIT_LOG := $(BUILD_DIR)/unit-tests.log

ifeq ($(UNIT_BESIDE),yes)
test: lint install runner $(LAB_INSTALLED)
	@mkdir -p $(BUILD_DIR)
	@echo "Unit tests: started beside the book build (nice $(UNIT_NICE)); their output goes to $(UNIT_LOG)"
	@start=$$(date +%s); \
	( status=0; nice -n $(UNIT_NICE) $(MAKE) --no-print-directory unit > $(UNIT_LOG) 2>&1 || status=$$?; \
	  echo "unit tests finished in $$(( $$(date +%s) - start )) s" >> $(UNIT_LOG); exit $$status ) & unit=$$!; \
	build_status=0; $(MAKE) --no-print-directory build || build_status=$$?; \
	echo "Book build done (exit status $$build_status); waiting for the unit tests"; \
	unit_status=0; wait $$unit || unit_status=$$?; \
	if [ $$unit_status -eq 0 ]; then \
	  echo "---- unit tests, the end of $(UNIT_LOG) ----"; tail -n 20 $(UNIT_LOG); \
	else \
	  echo "---- unit tests FAILED (exit status $$unit_status): $(UNIT_LOG) ----"; cat $(UNIT_LOG); \
	fi; \
	[ $$build_status -eq 0 ] && [ $$unit_status -eq 0 ]
	$(MAKE) --no-print-directory site-check
else ifeq ($(UNIT_BESIDE),no)
test: lint unit build site-check
else
$(error UNIT_BESIDE=$(UNIT_BESIDE): use UNIT_BESIDE=yes (unit tests beside the book build) or UNIT_BESIDE=no (first, alone))
endif

serve: build
	@echo "Serving $(BUILD_DIR)/html at http://localhost:$(PORT)"
	$(BIN)/python -m http.server $(PORT) --bind 127.0.0.1 --directory $(BUILD_DIR)/html

# ruff on the package, the tests and the scripts, and on the code cells of every page.
lint: install
	$(BIN)/ruff check casebook tests scripts
	$(BIN)/ruff format --check casebook tests scripts
	BIN=$(BIN) bash scripts/lint_pages.sh

# Apply ruff's fixes and formatting everywhere `make lint` looks; review the diff afterwards.
format: install
	$(BIN)/ruff check --fix-only casebook tests scripts
	$(BIN)/ruff format casebook tests scripts
	BIN=$(BIN) bash scripts/lint_pages.sh --fix

clean:
	rm -rf $(BUILD_DIR) .artifacts .pytest_cache .ruff_cache
