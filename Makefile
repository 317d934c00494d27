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
PDF_NAME := token-dynamics$(if $(filter student,$(EDITION)),-student).pdf
SITE_HTML := $(if $(filter student,$(EDITION)),_build/student/html,_build/html)
ifneq ($(filter-out full student,$(EDITION)),)
$(error EDITION must be `full` or `student`, not `$(EDITION)`)
endif

.PHONY: book pdf test test-fullsize fuzz env lint unit build site browser pdf-check chromium poppler \
	bench clean coursework notebooks grade test-backends test-latest test-oldest

## env: the pinned environment in .venv (re-installed when a requirements file changes)
env: $(STAMP)
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	touch $(STAMP)

## book: build the site into _build/html, or with EDITION=student the student edition (every
## solution removed, nothing that leads to one) into _build/student/html: both can be served
## together from _build/. A notebook is re-executed only when its code or the library
## (src/token_dynamics) changed: jupyter-cache in a folder named after the library's fingerprint,
## shared by the editions (tools/book_config.py).
book: env
	mkdir -p _build
	$(BIN)/python tools/book_config.py --edition $(EDITION) > _build/book_options_$(EDITION)
	$(BIN)/python tools/book_config.py --execute $(JOBS)  # the notebooks, JOBS at a time
	$(BIN)/jupyter-book build . $(BUILD_FLAGS) $$(cat _build/book_options_$(EDITION))
	$(BIN)/python tools/book_config.py --edition $(EDITION) --built

## notebooks: the plain notebook of every notebook page, which the site's Binder and Colab
## buttons open, in _build/notebooks/ (the full edition's downloads at their paths, Binder's
## environment for them in binder/, a README). `$(BIN)/python tools/publish_notebooks.py publish`
## then commits that folder to the branch `launch_buttons.notebooks_branch` (default
## `notebooks`); `git push origin notebooks` publishes it (README.md, "Reading outside the book").
notebooks: override EDITION = full
notebooks: book
	$(BIN)/python tools/publish_notebooks.py collect

## pdf: the book as a PDF (title page, contents, bookmarks, page numbers), printed by Chromium
## from the site of `make book`: _build/pdf/token-dynamics.pdf (EDITION=student:
## token-dynamics-student.pdf, from _build/student/html, no solution), without the API
## reference; `make pdf API=1` prints that too, as _build/pdf/token-dynamics-api.pdf
pdf: book chromium
	$(BIN)/python tools/book_pdf.py --html $(SITE_HTML) --out _build/pdf/$(PDF_NAME)
	$(if $(API),$(BIN)/python tools/book_pdf.py --api only --html $(SITE_HTML) \
		--out _build/pdf/token-dynamics-api.pdf)

## test: lint, unit tests and doctests, every notebook in a fresh kernel, a clean build of both
## editions, the student edition's leak test and the downloads run outside the book, browser
## checks, the PDF printed from the full build
test: env chromium poppler lint unit test-backends build site browser pdf-check

lint: env
	$(BIN)/ruff check src tests tools book/_ext benchmarks coursework
	$(BIN)/ruff format --check src tests tools book/_ext benchmarks coursework
	$(BIN)/mypy  # src/, at the setting of [tool.mypy] in pyproject.toml
	rm -rf _build/notebook_code
	$(BIN)/python tools/notebook_code.py _build/notebook_code
	$(BIN)/ruff check --extend-ignore E402,E501,E703,B018 _build/notebook_code

# the site tests need the built editions: `make site` runs them after `make build`
SITE_TESTS := tests/test_student_edition.py tests/test_downloads.py tests/test_reader_text.py
# what `unit` leaves to the other targets: the browser, the PDF, the backends, the GPU script and
# the site
NOT_UNIT := tests/browser tests/test_pdf.py tests/test_backends.py tests/test_backends_arguments.py \
	tests/test_gpu_script.py $(SITE_TESTS)

# `make test` runs the notebooks twice, not three times: `build` executes every one, `site` runs
# every one again as a reader downloads it, in a fresh kernel with the same check of stderr as
# tests/test_notebooks.py, which `make unit` alone still runs
UNIT_MARKS ?= not fullsize
test: UNIT_MARKS = not fullsize and not notebook

unit: env
	$(BIN)/pytest -n $(JOBS) -m "$(UNIT_MARKS)" --durations=15 $(addprefix --ignore=,$(NOT_UNIT)) tests src

## test-backends: the library on other array libraries (array-api-strict, JAX CPU, torch CPU)
## against numpy; installs requirements-backends.txt into .venv
BACKENDS_STAMP := $(VENV)/.backends
$(BACKENDS_STAMP): requirements-backends.txt $(STAMP)
	$(BIN)/python -m pip install --quiet -r requirements-backends.txt
	touch $(BACKENDS_STAMP)

test-backends: env $(BACKENDS_STAMP)
	@$(BIN)/python -c "import array_api_strict, jax, torch; print('array libraries:', ', '.join(f'{m.__name__} {m.__version__}' for m in (array_api_strict, jax, torch)))"
	$(BIN)/pytest -n $(JOBS) -rs tests/test_backends.py tests/test_backends_arguments.py tests/test_gpu_script.py

## test-latest: the library and every notebook on the newest release of each dependency, in
## .venv-latest (what `pip install token-dynamics` gives a reader today, where requirements.txt
## pins the book's environment); the tests that need the book's tools (jupyter-book, otter,
## Chromium) stay with `make test`. About 12 minutes; not part of `make test`: run it before
## raising a pin (CONTRIBUTING.md, "Tests")
LATEST := .venv-latest
LATEST_TOOLS := myst-nb jupytext nbclient ipykernel pytest pytest-xdist hypothesis
test-latest:
	test -x $(LATEST)/bin/python || $(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --upgrade -e '.[widgets,progress]' $(LATEST_TOOLS)
	$(call tests_in,$(LATEST))

## test-oldest: the same tests on the oldest releases pyproject.toml accepts, each `>=` bound
## exactly (tools/oldest_requirements.py), on the oldest Python it accepts (PYTHON=python3.11),
## in .venv-oldest: what a reader gets who installs into an environment that already holds
## older releases (Colab, a conda base). About 10 minutes; not part of `make test`: run it before
## raising a bound or using a newer feature of a dependency
OLDEST := .venv-oldest
# the kernel of Colab, whose ipywidgets 7.7 the widgets bound admits; pyparsing before the 3.2
# that deprecates what matplotlib 3.8 calls (a warning, which the tests turn into an error)
OLDEST_TOOLS := ipython==7.34.0 ipykernel==6.17.1 "pyparsing<3.2"
test-oldest:
	test -x $(OLDEST)/bin/python || $(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST)/bin/python tools/oldest_requirements.py widgets progress > $(OLDEST)/oldest.txt
	$(OLDEST)/bin/python -m pip install --quiet -r $(OLDEST)/oldest.txt $(OLDEST_TOOLS) \
		-e '.[widgets,progress]' $(LATEST_TOOLS)
	$(call tests_in,$(OLDEST))

# what test-latest and test-oldest run in the environment $(1): the versions, then the tests
define tests_in
	$(1)/bin/python -c "import sys, numpy, scipy, matplotlib, ot, ipywidgets; print('Python', sys.version.split()[0], '| numpy', numpy.__version__, '| scipy', scipy.__version__, '| matplotlib', matplotlib.__version__, '| POT', ot.__version__, '| ipywidgets', ipywidgets.__version__)"
	$(1)/bin/pytest -p no:cacheprovider -n $(JOBS) -m "not fullsize" $(addprefix --ignore=,$(NOT_UNIT) tests/test_book_build.py tests/test_coursework.py) tests src
endef

## test-fullsize: the papers' experiments at full size (minutes each; not part of `make test`)
test-fullsize: env
	$(BIN)/pytest -m fullsize tests

## fuzz: the long, randomised fuzz profile of the public API (tests/test_fuzz.py; minutes), then
## the sweep of every named case once with the fraction that ends cleanly (tools/fuzz_report.py)
fuzz: env
	TOKEN_DYNAMICS_FUZZ=long $(BIN)/pytest -n $(JOBS) tests/test_fuzz.py
	PYTHONPATH=src $(BIN)/python tools/fuzz_report.py --show 0

## build (CI, in `make test`): both editions, every page re-read; every notebook executed from
## clean by the full edition's build (a fresh cache), whose executions the student edition reuses
build: env
	rm -rf _build/html _build/.doctrees _build/jupyter_execute _build/.book_state _build/student
	mkdir -p _build
	$(BIN)/python tools/book_config.py --ci --edition full > _build/book_options_full
	$(BIN)/python tools/book_config.py --ci --execute $(JOBS)  # the notebooks, JOBS at a time
	$(BIN)/jupyter-book build . $(BUILD_FLAGS) $$(cat _build/book_options_full)
	$(BIN)/python tools/book_config.py --edition full --built
	$(BIN)/python tools/publish_notebooks.py collect  # the notebooks of `make notebooks`
	$(BIN)/python tools/book_config.py --ci --edition student > _build/book_options_student
	$(BIN)/jupyter-book build . $(BUILD_FLAGS) $$(cat _build/book_options_student)
	$(BIN)/python tools/book_config.py --edition student --built

## site (in `make test`, after `build`): no solution in the student edition; every downloadable
## notebook runs in a kernel where Jupyter Book, Sphinx and myst-nb cannot be imported, and the
## launch buttons open the same notebooks, gathered in _build/notebooks
site: env
	$(BIN)/pytest -n $(JOBS) -rP $(SITE_TESTS)  # -rP: the leak test prints its counts

browser: env chromium
	CHROMIUM=$(CHROMIUM) $(BIN)/pytest -n $(JOBS) tests/browser

chromium:
	@test -x $(CHROMIUM) || { apt-get update -q && apt-get install -y -q chromium; }

## pdf-check (in `make test`, after `build`): prints the built site to PDF and checks it
pdf-check: env chromium poppler
	$(BIN)/pytest tests/test_pdf.py

# pdftotext, pdfinfo and pdfimages (Debian's poppler-utils) for the test of `make pdf`
poppler:
	@command -v pdfimages >/dev/null && command -v pdftotext >/dev/null || \
		{ apt-get update -q && apt-get install -y -q poppler-utils; }

## coursework: from the instructor notebooks coursework/ps*.md, the student notebooks, the answer
## key and the otter-grader autograder bundles in _build/coursework/ (coursework/README.md);
## SET=ps3 (or SET="ps1 ps3") rebuilds those sets alone, keeping the others' outputs
coursework: env
	$(if $(SET),,rm -rf _build/coursework)
	$(BIN)/python coursework/build.py _build/coursework $(if $(SET),--set $(SET))

## grade: grade SUBMISSIONS (notebooks, or folders of them; default _build/submissions)
## with the autograder bundles, each built first when missing or older than its problem set:
## the points per question and the message of every failed test (coursework/README.md);
## with CSV=file, the class's grades written there too, a row per submission
SUBMISSIONS ?= _build/submissions
grade: env
	$(BIN)/python coursework/build.py --grade $(SUBMISSIONS) $(if $(CSV),--csv $(CSV))

## bench: the speed and memory benchmarks (ratios against references measured in the same run);
## against torch and JAX too when they are installed (`$(BIN)/pip install -e '.[bench]'`)
bench: env
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf _build .pytest_cache .hypothesis
