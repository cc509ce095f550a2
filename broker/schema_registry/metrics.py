"""The registry's counters on the broker's ``/metrics`` (when the broker's HTTP server runs).

Read at scrape time from the registry (nothing is counted twice): requests per route and HTTP
status, and the number of subjects, schema ids and versions.
"""

from __future__ import annotations


class RegistryCollector:
    def __init__(self, server) -> None:
        self.server = server

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        api, registry = self.server.api, self.server.registry
        requests = CounterMetricFamily("schema_registry_requests", "Schema registry requests answered, per route "
                                       "and HTTP status.", labels=["route", "status"])
        for (route, status), count in sorted((api.stats if api else {}).items()):
            requests.add_metric([route, str(status)], count)
        yield requests
        state = registry.state
        yield GaugeMetricFamily("schema_registry_subjects", "Subjects with at least one live version.",
                                value=sum(1 for s in state.subjects if state.live_versions(s)))
        yield GaugeMetricFamily("schema_registry_schema_ids", "Schema ids in use.", value=len(state.ids))
        yield GaugeMetricFamily("schema_registry_versions", "Versions registered (soft-deleted included).",
                                value=sum(len(v) for v in state.subjects.values()))
        yield GaugeMetricFamily("schema_registry_max_schema_id", "Highest schema id assigned.", value=state.max_id)


def register_collector(prometheus_registry, server) -> RegistryCollector:
    collector = RegistryCollector(server)
    prometheus_registry.register(collector)
    return collector
