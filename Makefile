# Two entry points on a fresh machine: `make figures` and `make test` (each sets itself up).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup figures smoke check test test-library test-processes test-notebooks test-cluster test-unit guard bench report docs clean clean-cache

# The cheapest paper figures, regenerated from an empty run cache by `make test` (≈ 5 min on 2 cores):
# FedAvg on Li et al.'s quadratic and LocalUpdate on Charles & Konečný's, through the engine.
GUARD_FIGURES ?= li2020/fig2 charles2021/fig_measured

# JupyterLab in this environment asks no question on a first open: no news-feed prompt, no update check (a
# user's own settings still override these)
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
$(VENV)/.installed: pyproject.toml requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -r requirements.txt -e .
	mkdir -p $(dir $(LAB_SETTINGS))
	test -f $(LAB_SETTINGS) || printf '%s\n' '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $(LAB_SETTINGS)
	touch $@

setup: $(VENV)/.installed

# Ray, for the ray executor's tests on a real local cluster (tests/test_executors.py): an optional extra
# (about 340 MB, 20 s from a package mirror), so only `make test` installs it; where it cannot be installed
# those tests are skipped with the reason and the rest runs.
$(VENV)/.ray: requirements-ray.txt $(VENV)/.installed
	if $(BIN)/python -m pip install -q -r requirements-ray.txt; then touch $@; \
	else echo "Ray could not be installed: the Ray cluster tests are skipped"; fi

# The documentation site's packages (mkdocs-material, mkdocstrings; requirements-docs.txt): only `make docs` and
# `make test` install them, and a failed install fails them.
$(VENV)/.docs: requirements-docs.txt $(VENV)/.installed
	$(BIN)/python -m pip install -q -r requirements-docs.txt
	touch $@

## Regenerate every committed figure, its CSV and REPLICATION.md (paper scale; resumes from the cache).
## First stages every registered dataset (local copy or download) and reports any that cannot be had.
figures: setup
	$(BIN)/python -m replicate data fetch --all
	$(BIN)/python -m replicate figures --profile paper

## Every notebook at smoke scale into build/figures (minutes).
smoke: setup
	$(BIN)/python -m replicate figures --profile smoke

## Unit, equivalence and data tests, every notebook at smoke scale once, the number guard and the executors' tests,
## as three lanes side by side (each prints when it ends, with its slowest tests: where CI time goes):
## test-library (tests/, then the executors' tests, which start a real Ray head node), test-processes (the tests
## that start commands, kernels and worker processes and wait on them, then the guard) and test-notebooks (nbval,
## then the official-data end-to-end test, the first look, the arena and the site). Three lanes on two cores fill
## the time one lane spends waiting on its processes. Each lane writes its own build folder, never the run cache of
## your own figures (build/cache), and computes with one thread per process where the machine has few cores
## (two 2-thread pools on 2 cores slowed small ops up to 100×).
HALF_THREADS := $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 1 ? n / 2 : 1 )))
# Each phase's seconds: `$(call stamp,NAME)` starts a clock, `$(call since,NAME)` reads it (in an echo)
stamp = @mkdir -p build && date +%s > build/.time-$(1)
since = $$(( $$(date +%s) - $$(cat build/.time-$(1)) ))
test: setup $(VENV)/.ray $(VENV)/.docs
	$(call stamp,test)
	$(MAKE) --no-print-directory -j3 --output-sync=target test-library test-processes test-notebooks
	@echo "make test: $(call since,test) s"

# the test files that start commands, notebook kernels or worker processes and wait on them (signals, time budgets,
# resumption, successive halving's workers): a lane of their own, with STEM's slow library file (it balances the lanes)
PROCESSES := tests/test_signals.py tests/test_runner.py tests/test_resume.py tests/test_halving.py tests/test_khanduri2021.py
test-library: setup $(VENV)/.ray
	$(call stamp,library)
	OMP_NUM_THREADS=$(HALF_THREADS) REPLICATE_BUILD=$(CURDIR)/build/test \
	    $(BIN)/python -m pytest -q -rs tests --ignore=tests/test_executors.py --ignore=$(E2E) --ignore=$(ARENA) \
	    $(foreach f,$(MOVED) $(SITE) $(PROCESSES),--ignore=$(f)) \
	    -p no:cacheprovider --durations=20
	$(call stamp,cluster)
	$(MAKE) --no-print-directory test-cluster
	@echo "test-library: $(call since,library) s (the executors' $(call since,cluster) s)"

test-processes: setup
	$(call stamp,processes)
	OMP_NUM_THREADS=$(HALF_THREADS) REPLICATE_BUILD=$(CURDIR)/build/test-processes \
	    $(BIN)/python -m pytest -q -rs $(PROCESSES) -p no:cacheprovider --durations=10
	$(call stamp,guard)
	OMP_NUM_THREADS=$(HALF_THREADS) $(MAKE) --no-print-directory guard
	@echo "test-processes: $(call since,processes) s (the guard $(call since,guard) s)"

# tests/ is named so that its conftest.py (data-aware skips of notebooks) applies; its test files are not run here.
# nbval leaves the twelve notebooks of tests/substituted.py to the official-data end-to-end test, which runs them
# once, on fabricated downloads, and copies their figures for the first-look test
E2E := tests/test_official_data_e2e.py
# what the notebooks' smoke figures show: a measured point in every panel
FIRST_LOOK := tests/test_first_look.py
# and the arena's tests (they run its notebook four times) and a slow library file: here, which balances the
# lanes (their measured times: docs/CHANGELOG.md)
ARENA := tests/test_arena.py
MOVED := tests/test_data_variants.py
# the documentation site, built in strict mode by `make docs` (≈ 8 s on 2 cores), then opened in headless Chromium (≈ 7 s)
SITE := tests/test_site.py
test-notebooks: setup $(VENV)/.docs
	$(call stamp,notebooks)
	OMP_NUM_THREADS=$(HALF_THREADS) REPLICATE_BUILD=$(CURDIR)/build/test-notebooks \
	    $(BIN)/python -m pytest -q -rs tests notebooks --nbval-lax --notebooks-on-official-data \
	    --ignore-glob='tests/test_*.py' -p no:cacheprovider --durations=10
	$(call stamp,e2e)
	$(MAKE) --no-print-directory docs
	OMP_NUM_THREADS=$(HALF_THREADS) REPLICATE_BUILD=$(CURDIR)/build/test-notebooks \
	REPLICATE_SMOKE_FIGURES=$(CURDIR)/build/test-notebooks/figures REPLICATE_SITE_DIR=$(CURDIR)/build/site \
	    $(BIN)/python -m pytest -q -rs $(E2E) $(FIRST_LOOK) $(ARENA) $(MOVED) $(SITE) -p no:cacheprovider --durations=5
	@echo "test-notebooks: $(call since,notebooks) s (the site, end-to-end, first-look and arena tests $(call since,e2e) s)"

test-cluster: setup $(VENV)/.ray
	OMP_NUM_THREADS=$(HALF_THREADS) REPLICATE_BUILD=$(CURDIR)/build/test-cluster \
	    $(BIN)/python -m pytest -q -rs tests/test_executors.py -p no:cacheprovider

## The unit tier alone (no notebook executed, no guard): what a change to the library needs first (minutes).
test-unit: setup
	REPLICATE_BUILD=$(CURDIR)/build/test $(BIN)/python -m pytest -q tests -m "not slow and not smoke" -p no:cacheprovider

## Regenerate GUARD_FIGURES at paper scale from an empty cache and compare with the committed CSVs and
## verdicts (replicate/cli/check.py's tolerance): a change that moves a committed number fails here.
guard: setup
	rm -rf build/guard
	REPLICATE_BUILD=build/guard REPLICATE_DEVICE=cpu REPLICATE_LEDGER=off $(BIN)/python -m replicate figures --check --profile paper $(GUARD_FIGURES)
	rm -rf build/guard

bench: setup
	$(BIN)/python -m replicate bench --record

report: setup
	$(BIN)/python -m replicate report

## The documentation site into build/site (open build/site/index.html): docs/, REPLICATION.md and a page per
## committed figure, assembled into build/site-src (replicate/report/site.py) and built in strict mode (mkdocs.yml).
docs: $(VENV)/.docs
	$(BIN)/python -m replicate.report.site
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## Regenerate at paper scale into build/check and compare with the committed figures (tolerance: replicate/cli/check.py).
check: setup
	$(BIN)/python -m replicate data fetch --all
	$(BIN)/python -m replicate figures --check --profile paper

## Remove executed notebooks and smoke outputs; keeps the run cache (build/cache: hours of compute).
clean:
	find build -mindepth 1 -maxdepth 1 ! -name cache -exec rm -rf {} +

## Also remove the run cache: the next `make figures` recomputes every run from scratch.
clean-cache: clean
	rm -rf build/cache
