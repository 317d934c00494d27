# The two commands a newcomer runs: `make book` (build the site) and `make test` (check everything).
# Both create the environment when it is missing; nothing needs installing by hand but
# Python 3.11 and apt (for Chromium, which `make test` installs when absent).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EDITION ?= full
# Chromium from Debian's packages drives the browser tests (never `playwright install`).
CHROMIUM ?= /usr/bin/chromium
JOBS ?= 2

BUILD_FLAGS := -W -n --keep-going
ifneq ($(filter-out full student,$(EDITION)),)
$(error EDITION must be `full` or `student`, not `$(EDITION)`)
endif

.PHONY: book test test-fullsize fuzz env lint unit build browser chromium bench clean

## env: the pinned environment in .venv (re-installed when a requirements file changes)
env: $(STAMP)
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	touch $(STAMP)

## book: build the site into _build/html (EDITION=student drops solutions). A notebook is
## re-executed only when its code or the library (src/token_dynamics) changed: jupyter-cache in
## a folder named after the library's fingerprint (tools/book_config.py).
book: env
	rm -rf _build/html  # no page of an earlier build (or edition) survives
	mkdir -p _build
	$(BIN)/python tools/book_config.py --edition $(EDITION) > _build/book_options
	$(BIN)/jupyter-book build . $(BUILD_FLAGS) $$(cat _build/book_options)
	$(BIN)/python tools/book_config.py --edition $(EDITION) --built
	@echo "The book is built: open $(CURDIR)/_build/html/index.html"

## test: lint, unit tests and doctests, every notebook in a fresh kernel, a clean book build, browser checks
test: env chromium lint unit build browser

lint: env
	$(BIN)/ruff check src tests tools book/_ext benchmarks
	$(BIN)/ruff format --check src tests tools book/_ext benchmarks
	rm -rf _build/notebook_code
	$(BIN)/python tools/notebook_code.py _build/notebook_code
	$(BIN)/ruff check --extend-ignore E402,E501,E703,B018 _build/notebook_code

unit: env
	$(BIN)/pytest -n $(JOBS) --ignore=tests/browser tests src

## test-fullsize: the papers' experiments at full size (minutes each; not part of `make test`)
test-fullsize: env
	$(BIN)/pytest -m fullsize tests

## fuzz: the long, randomised fuzz profile of the public API (tests/test_fuzz.py; minutes), then
## the sweep of every named case once with the fraction that ends cleanly (tools/fuzz_report.py)
fuzz: env
	TOKEN_DYNAMICS_FUZZ=long $(BIN)/pytest -n $(JOBS) tests/test_fuzz.py
	PYTHONPATH=src $(BIN)/python tools/fuzz_report.py --show 0

## build (CI, in `make test`): every notebook executed from clean, no cache
build: env
	rm -rf _build/html _build/.doctrees _build/jupyter_execute _build/.book_state
	$(BIN)/jupyter-book build . $(BUILD_FLAGS) --all

browser: env chromium
	CHROMIUM=$(CHROMIUM) $(BIN)/pytest tests/browser

chromium:
	@test -x $(CHROMIUM) || { apt-get update -q && apt-get install -y -q chromium; }

## bench: the speed and memory benchmarks (ratios against references measured in the same run);
## against torch and JAX too when they are installed (`$(BIN)/pip install -e '.[bench]'`)
bench: env
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf _build .pytest_cache .hypothesis
