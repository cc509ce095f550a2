# The README names two set-up commands: `make run` and `make test`.  Everything else here is
# what those two need, plus benchmarks and the pipeline job.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
HOST   ?= 127.0.0.1
PORT   ?= 9092
DATA   ?= ./data
# The HTTP port (metrics, health, console); -1 turns it off.
HTTP_PORT ?= 9644
# Confluent-compatible Schema Registry served by the broker (issue 23); empty turns it off.
SCHEMA_REGISTRY ?= http://127.0.0.1:8081

# Stamps make re-runs cheap: pip runs again only when pyproject.toml changes.
RUN_STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test install test-deps system-deps kafka-oracle conformance unit integration bench pipeline clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# protocol/_validate.c is compiled by pip (an optional extension): a change to it reinstalls too.
$(RUN_STAMP): pyproject.toml setup.py protocol/_validate.c | $(PY)
	$(PIP) install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml setup.py protocol/_validate.c | $(PY)
	$(PIP) install --quiet -e '.[test,spark]'
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)

run: $(RUN_STAMP)
	$(PY) -m minikafka serve --host $(HOST) --port $(PORT) --data-dir $(DATA) --override http.port=$(HTTP_PORT) \
		--override schema.registry.listeners=$(SCHEMA_REGISTRY)

# kcat and a JDK (for the Java client test) come from Debian's packages; the Java client jars
# from a PyPI wheel.  The script installs only what is missing.
system-deps:
	bash tests/tools/system-deps.sh

# Apache Kafka 4.2 (tests/kafka/pom.xml), the oracle the conformance tests compare answers with:
# Maven copies its jars into tests/kafka/target/libs once; a changed pom fetches them again.
KAFKA_STAMP := tests/kafka/target/libs/.installed

$(KAFKA_STAMP): tests/kafka/pom.xml
	rm -f $@
	$(PYTHON) tests/kafka/kafka_runner.py install

kafka-oracle: system-deps $(KAFKA_STAMP)

test-deps: $(TEST_STAMP) system-deps kafka-oracle

# MINIKAFKA_KAFKA_ORACLE=required: a test that needs Apache Kafka fails (not skips) without it.
# Unit tests on both cores (pytest-xdist; they share nothing), then everything that starts brokers,
# which shares one Apache Kafka and runs serially.
test: test-deps
	$(PY) -m pytest tests/unit -n 2
	MINIKAFKA_KAFKA_ORACLE=required $(PY) -m pytest --ignore=tests/unit

# Differential conformance against Apache Kafka; the last line is the summary.
conformance: test-deps
	$(PY) -m tests.conformance

unit: $(TEST_STAMP)
	$(PY) -m pytest tests/unit

integration: test-deps
	$(PY) -m pytest tests/integration

bench: $(TEST_STAMP)
	$(PY) bench/codec.py
	$(PY) bench/storage.py --size-mb 256

pipeline: $(TEST_STAMP)
	$(VENV)/bin/minikafka-pipeline --bootstrap $(HOST):$(PORT) --input events --output totals --checkpoint ./pipeline-checkpoint

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
