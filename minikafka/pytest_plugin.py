"""pytest plugin (entry point ``pytest11: minikafka``): a Kafka broker for your tests.

Fixtures (nothing starts unless a test asks for one; no autouse fixtures):

* ``kafka_broker`` (session): an embedded minikafka on a free port with a temporary data dir,
  one per pytest-xdist worker; ``.bootstrap_servers``, ``.control``.
* ``kafka_bootstrap`` (session): its ``host:port``.
* ``kafka_topic``: a fresh, uniquely named topic for this test; ``@pytest.mark.kafka_topic(
  partitions=3, configs={"cleanup.policy": "compact"})`` sets its partitions and configs.
* ``kafka_topic_factory``: ``create(partitions=1, configs=None, prefix=None) -> name`` for more.
* ``kafka_group_id``: a fresh consumer group id.
* ``schema_registry_url`` (session): the URL of a Confluent-compatible Schema Registry; the
  embedded broker serves one (``schema.registry.listeners``) when a collected test asks for this
  fixture.  External mode: ``--schema-registry-url=URL`` (or ``MINIKAFKA_SCHEMA_REGISTRY_URL``);
  without one those tests are skipped.
* ``kafka_control``: the control API (faults, clock, waits, seeding; see minikafka.embedded);
  faults and stalls are reset after each test.  ``kafka_control.aio`` has the same methods as
  coroutines for pytest-asyncio tests whose own loop must keep running while they wait.

``--kafka-bootstrap=HOST:PORT`` (or ``MINIKAFKA_BOOTSTRAP``) runs the same tests against an external
Kafka instead (topics are then created with kafka-python's admin client); tests that use
``kafka_control`` are skipped there with the reason.  ``--minikafka-mode=process`` runs the embedded
broker as a child process; ``minikafka_config`` (ini, lines of ``name=value``) adds broker settings
and ``minikafka_seed`` (ini, seed file paths) preloads topics and records (broker/seed.py).
"""

from __future__ import annotations

import os
import re
import uuid

import pytest

ENV_BOOTSTRAP = "MINIKAFKA_BOOTSTRAP"
ENV_REGISTRY = "MINIKAFKA_SCHEMA_REGISTRY_URL"
SKIP_NO_REGISTRY = ("schema_registry_url: this run uses the external Kafka at {bootstrap} and no schema "
                    "registry was given (--schema-registry-url / MINIKAFKA_SCHEMA_REGISTRY_URL)")
SKIP_EXTERNAL = ("kafka_control needs the embedded minikafka broker (faults, clock, waits); "
                 "this run uses the external Kafka at {bootstrap} (--kafka-bootstrap / MINIKAFKA_BOOTSTRAP)")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("minikafka", "Kafka broker for tests (minikafka)")
    group.addoption("--kafka-bootstrap", action="store", default=None, metavar="HOST:PORT",
                    help=f"run Kafka fixtures against this external Kafka instead of an embedded "
                         f"minikafka (env {ENV_BOOTSTRAP}); kafka_control tests are skipped")
    group.addoption("--minikafka-mode", action="store", default="thread", choices=("thread", "process"),
                    help="run the embedded broker on a thread of the test process (default) or as a "
                         "child process")
    group.addoption("--schema-registry-url", action="store", default=None, metavar="URL",
                    help=f"with --kafka-bootstrap: the schema registry the schema_registry_url fixture "
                         f"gives (env {ENV_REGISTRY})")
    parser.addini("minikafka_config", type="linelist", default=[],
                  help="broker settings for the embedded minikafka, one name=value per line")
    parser.addini("minikafka_seed", type="linelist", default=[],
                  help="seed files (JSON lines of topics and records, relative to the rootdir) loaded "
                       "into the embedded minikafka when it starts")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "kafka_topic(partitions=1, configs=None): partitions and configs of the "
                   "kafka_topic fixture's topic")


def pytest_collection_modifyitems(session, config, items) -> None:
    # The embedded broker serves a schema registry only when some test will ask for one.
    config._minikafka_wants_registry = any("schema_registry_url" in getattr(item, "fixturenames", ())
                                           for item in items)


def _external_bootstrap(config) -> str | None:
    return config.getoption("kafka_bootstrap", None) or os.environ.get(ENV_BOOTSTRAP) or None


class ExternalKafka:
    """Stands for a Kafka this run did not start: no control API."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.control = None
        self.external = True
        self.schema_registry_url = None

    def create_topic(self, name: str, partitions: int, configs: dict | None) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id="minikafka-pytest")
        try:
            admin.create_topics([NewTopic(name, partitions, 1, topic_configs={
                k: str(v) for k, v in (configs or {}).items()})])
        finally:
            admin.close()


class EmbeddedKafka:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.bootstrap_servers = broker.bootstrap_servers
        self.control = broker.control
        self.external = False
        self.schema_registry_url = broker.schema_registry_url

    def create_topic(self, name: str, partitions: int, configs: dict | None) -> None:
        self.control.create_topic(name, partitions, configs)


def _settings(config) -> dict:
    settings = {}  # minikafka.embedded.TEST_DEFAULTS apply underneath
    for line in config.getini("minikafka_config"):
        name, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"minikafka_config: expected name=value, got {line!r}")
        settings[name.strip()] = value.strip()
    return settings


def _seed_items(config) -> list | None:
    import json

    items = []
    for name in config.getini("minikafka_seed"):
        path = os.path.join(str(config.rootpath), name)
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    try:
                        items.append(json.loads(line))
                    except ValueError as exc:
                        raise pytest.UsageError(f"minikafka_seed {path}:{number}: not JSON: {exc}") from None
    return items or None


@pytest.fixture(scope="session")
def kafka_broker(request, tmp_path_factory):
    external = _external_bootstrap(request.config)
    if external:
        yield ExternalKafka(external)
        return
    from minikafka.embedded import Broker

    broker = Broker(mode=request.config.getoption("minikafka_mode", "thread"),
                    data_dir=tmp_path_factory.mktemp("minikafka"), config=_settings(request.config),
                    seed=_seed_items(request.config),
                    schema_registry=getattr(request.config, "_minikafka_wants_registry", False))
    broker.start()
    try:
        yield EmbeddedKafka(broker)
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker) -> str:
    return kafka_broker.bootstrap_servers


def _unique(prefix: str, request) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-.")[:80] or "test"
    return f"{prefix}-{base}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def kafka_topic_factory(kafka_broker, request):
    def create(partitions: int = 1, configs: dict | None = None, prefix: str = "topic") -> str:
        name = _unique(prefix, request)
        kafka_broker.create_topic(name, partitions, configs)
        return name

    return create


@pytest.fixture
def kafka_topic(kafka_topic_factory, request) -> str:
    marker = request.node.get_closest_marker("kafka_topic")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        kwargs.setdefault("partitions", marker.args[0])
    return kafka_topic_factory(partitions=kwargs.get("partitions", 1), configs=kwargs.get("configs"))


@pytest.fixture
def kafka_group_id(request) -> str:
    return _unique("group", request)


@pytest.fixture(scope="session")
def schema_registry_url(kafka_broker, request) -> str:
    if kafka_broker.external:
        url = request.config.getoption("schema_registry_url", None) or os.environ.get(ENV_REGISTRY)
        if not url:
            pytest.skip(SKIP_NO_REGISTRY.format(bootstrap=kafka_broker.bootstrap_servers))
        return url
    if not kafka_broker.schema_registry_url:
        pytest.fail("the embedded broker was started without a schema registry (is "
                    "schema.registry.listeners set to an empty value in minikafka_config?)")
    return kafka_broker.schema_registry_url


@pytest.fixture
def kafka_control(kafka_broker):
    if kafka_broker.control is None:
        pytest.skip(SKIP_EXTERNAL.format(bootstrap=kafka_broker.bootstrap_servers))
    control = kafka_broker.control
    yield control
    control.reset()
