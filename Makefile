VENV ?= .venv
PY := $(VENV)/bin

.PHONY: setup lint typecheck test bench ci


setup:
	python3 -m venv $(VENV) && $(PY)/pip install -q -e '.[dev]'

lint:
	$(PY)/ruff check . && $(PY)/ruff format --check .

typecheck:
	$(PY)/mypy

test:
	$(PY)/pytest

ci:
	bash .ci/run

bench:
	$(PY)/python bench/run.py
