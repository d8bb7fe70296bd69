# Two entry points on a fresh machine: `make figures` and `make test` (each sets itself up).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup figures smoke test bench report clean

$(VENV)/.installed: pyproject.toml requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -r requirements.txt -e .
	touch $@

setup: $(VENV)/.installed

## Regenerate every committed figure, its CSV and REPLICATION.md (paper scale; resumes from the cache).
figures: setup
	$(BIN)/python -m replicate data fetch mnist
	$(BIN)/python -m replicate figures --profile paper

## Every notebook at smoke scale into build/figures (minutes).
smoke: setup
	$(BIN)/python -m replicate figures --profile smoke

## Unit, equivalence and data tests, then every notebook at smoke scale through nbval.
test: setup
	$(BIN)/python -m pytest -q tests notebooks --nbval-lax -p no:cacheprovider

bench: setup
	$(BIN)/python -m replicate bench --record

report: setup
	$(BIN)/python -m replicate report

clean:
	rm -rf build
