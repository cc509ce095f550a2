"""README's "what is served" table is generated from the API registry and must match it."""

from pathlib import Path

from minikafka.broker import api_table


def test_readme_table_matches_the_registry():
    readme = Path(__file__).resolve().parents[2] / "README.md"
    assert api_table.current(readme) == api_table.render(), (
        "README.md's API table is stale: run `python -m minikafka.broker.api_table`")


def test_the_table_has_every_advertised_api_and_the_telemetry_pair():
    table = api_table.render()
    assert "| 1 | Fetch | 4–18 |" in table
    assert "| 71 | GetTelemetrySubscriptions | 0–0 (only with `client.telemetry.enable=true`)" in table
