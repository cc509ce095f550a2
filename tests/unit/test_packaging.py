"""The set-up promises: compose file, Dockerfile and Makefile say what the README says."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_runs_the_broker_with_port_and_volume():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    service = compose["services"]["minikafka"]
    assert service["build"] == "."
    assert "9092:9092" in service["ports"]
    volume, _, target = service["volumes"][0].partition(":")
    assert target == "/data"
    assert volume in compose["volumes"]
    # Apache Kafka is there for side-by-side runs only, never started by default.
    assert compose["services"]["kafka"]["profiles"] == ["kafka"]


def test_dockerfile_serves_from_the_volume_on_9092():
    text = (ROOT / "Dockerfile").read_text()
    assert "EXPOSE 9092" in text
    assert "VOLUME /data" in text
    assert '"--data-dir", "/data"' in text


def test_ci_runs_make_test_and_readme_names_both_commands():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    makefile = (ROOT / "Makefile").read_text()
    assert "--port $(PORT) --data-dir $(DATA)" in makefile
