# The two commands a newcomer needs: `make run` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8080
# A development-only key so `broker token mint` works against the demo; never use it elsewhere.
DEMO_SIGNING_KEY ?= demo-only-signing-key-do-not-use-in-production

.PHONY: run test lint typecheck bench clean

$(STAMP): pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet -e ./client
	touch $(STAMP)

run: $(STAMP)
	mkdir -p var
	BROKER_TOKEN_SIGNING_KEY=$${BROKER_TOKEN_SIGNING_KEY:-$(DEMO_SIGNING_KEY)} \
		$(BIN)/broker serve --config deploy/demo.toml --host 127.0.0.1 --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check broker adapters client tests bench
	$(BIN)/ruff format --check broker adapters client tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite runs in 4 worker processes (pytest-xdist; tests/ports.py keeps their ports apart):
# most tests wait on sockets and child processes, so 4 keep 2 cores busy, and worksteal hands a
# long test's neighbours to idle workers. PYTHONDONTWRITEBYTECODE (set on some machines) is
# lifted so that broker/ and the tests (asserts rewritten) are compiled once, not again in each
# worker and in each broker or CLI process the tests start (well over a hundred).
test: lint typecheck
	env -u PYTHONDONTWRITEBYTECODE scripts/with-redis scripts/with-promtool \
		scripts/with-mcp-conformance scripts/with-chromium \
		$(BIN)/python -m pytest -n 4 --dist worksteal

bench: $(STAMP)
	scripts/with-redis $(BIN)/python bench/bench_proposals.py
	$(BIN)/python bench/bench_decision.py

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
