# Two commands on a fresh machine: `make run` and `make test`. Everything else is installed here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run` needs only the package itself; the test and Spark extras (and Java) are for `make test`.
RUN_STAMP := $(VENV)/.installed-run
# The proxy's gRPC stubs are generated from these when the package is installed (setup.py).
PROTOS := $(wildcard src/pocketmq/proxy/protos/apache/rocketmq/v2/*.proto)
# The kernels setup.py compiles with mypyc: an edit must rebuild them, or the stale build runs.
KERNELS := $(wildcard src/pocketmq/*/*_kernel.py)

.PHONY: run test test-all check fmt lint bench bench-peers clean java

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py $(PROTOS) $(KERNELS)
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $(STAMP) $(RUN_STAMP)

# The full install is a superset, so after `make test` this one has nothing to do.
$(RUN_STAMP): $(BIN)/python pyproject.toml setup.py $(PROTOS) $(KERNELS)
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

# PySpark runs on a Java runtime (17 or 21): installed from Debian's packages when missing.
java:
	@command -v java >/dev/null 2>&1 || { \
		echo "installing a Java runtime for PySpark (openjdk-17-jre-headless)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless; }

run: $(RUN_STAMP)
	$(BIN)/pocketmq up

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

check: lint
	$(BIN)/mypy src

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The whole suite CI runs: lint and type checks, then every test folder.
test: check java
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/pocketmq bench store

# pocketmq next to RabbitMQ, NATS and Redis (installed from Debian's packages if missing).
bench-peers: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,peers]'
	$(BIN)/python benchmarks/peers/run.py --out benchmarks/peers/latest.md

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache .mypy_cache
	find src -name "*.so" -delete
