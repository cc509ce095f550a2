"""The REST API of Confluent's Schema Registry as routes (``http.py``) over ``store.Registry``.

Every answer is JSON with Confluent's content type ``application/vnd.schemaregistry.v1+json``;
errors carry Confluent's body ``{"error_code", "message"}`` (``errors.py``).  Request bodies are read
as JSON whatever their content type (clients send ``application/vnd.schemaregistry.v1+json``,
``application/json`` or ``application/octet-stream``).  Query flags accept ``true``/``True``/``1``
(confluent-kafka's client formats Python booleans into URLs).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from . import errors
from .http import App, MethodNotAllowed, NotFound, Response
from .store import Registry, page

log = logging.getLogger("minikafka.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA_TYPES = ["JSON", "PROTOBUF", "AVRO"]


def _flag(request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("true", "1", "yes")


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, ensure_ascii=False), status, CONTENT_TYPE)


def _error(exc: errors.RegistryError):
    return _json(exc.body(), exc.http_status)


async def _body(request) -> Any:
    raw = await request.read()
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise errors.RegistryError(400, f"Unexpected character in JSON body: {exc}", 400) from None


def _schema_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.RegistryError(404, f"HTTP 404 Not Found: schema id {text!r}", 404) from None


class Api:
    """The routes; ``stats`` counts requests and errors per route for /metrics."""

    def __init__(self, registry: Registry, broker=None) -> None:
        self.registry = registry
        self.broker = broker  # for /v1/metadata/id (the Kafka cluster id); None in unit tests
        self.stats: dict[tuple[str, int], int] = {}
        self.latency: dict[str, list[float]] = {}

    # -- plumbing -----------------------------------------------------------------------------

    def middleware(self):
        async def handle(request, handler):
            started = time.perf_counter()
            try:
                response = await handler(request)
            except errors.RegistryError as exc:
                response = _error(exc)
            except NotFound:
                response = _error(errors.RegistryError(404, "HTTP 404 Not Found", 404))
            except MethodNotAllowed:
                response = _error(errors.RegistryError(405, "HTTP 405 Method Not Allowed", 405))
            except Exception as exc:  # a bug: answer 500 as Confluent does, keep serving
                log.error("schema registry: %s %s failed", request.method, request.path, exc_info=True)
                response = _error(errors.RegistryError(50001, f"Error in the backend data store: {exc!r}"))
            key = (f"{request.method} {request.route}", response.status)
            self.stats[key] = self.stats.get(key, 0) + 1
            self.latency.setdefault(key[0], []).append(time.perf_counter() - started)
            if len(self.latency[key[0]]) > 4096:
                del self.latency[key[0]][:2048]
            return response

        return handle

    def routes(self, app) -> None:
        r = app.router
        r.add_get("/", self.root)
        r.add_get("/schemas/types", self.types)
        r.add_get("/schemas", self.list_schemas)
        r.add_get("/schemas/ids/{id}", self.schema_by_id)
        r.add_get("/schemas/ids/{id}/schema", self.raw_schema_by_id)
        r.add_get("/schemas/ids/{id}/subjects", self.id_subjects)
        r.add_get("/schemas/ids/{id}/versions", self.id_versions)
        r.add_get("/schemas/guids/{guid}", self.schema_by_guid)
        r.add_get("/subjects", self.subjects)
        r.add_post("/subjects/{subject}", self.lookup)
        r.add_delete("/subjects/{subject}", self.delete_subject)
        r.add_get("/subjects/{subject}/versions", self.versions)
        r.add_post("/subjects/{subject}/versions", self.register)
        r.add_get("/subjects/{subject}/versions/{version}", self.get_version)
        r.add_delete("/subjects/{subject}/versions/{version}", self.delete_version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self.raw_version)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by)
        r.add_get("/subjects/{subject}/metadata", self.metadata)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions", self.compatibility_all)
        r.add_get("/config", self.get_config)
        r.add_put("/config", self.put_config)
        r.add_delete("/config", self.delete_config)
        r.add_get("/config/{subject}", self.get_config)
        r.add_put("/config/{subject}", self.put_config)
        r.add_delete("/config/{subject}", self.delete_config)
        r.add_get("/mode", self.get_mode)
        r.add_put("/mode", self.put_mode)
        r.add_get("/mode/{subject}", self.get_mode)
        r.add_put("/mode/{subject}", self.put_mode)
        r.add_delete("/mode/{subject}", self.delete_mode)
        r.add_get("/contexts", self.contexts)
        r.add_get("/v1/metadata/id", self.metadata_id)

    # -- routes -------------------------------------------------------------------------------

    async def root(self, request):
        return _json({})

    async def types(self, request):
        return _json(SCHEMA_TYPES)

    async def contexts(self, request):
        return _json(["."])

    async def metadata_id(self, request):
        return _json({"scope": {"path": [], "clusters": {"kafka-cluster": self.registry_cluster_id(),
                                                         "schema-registry-cluster": "schema-registry"}}})

    def registry_cluster_id(self) -> str:
        return getattr(getattr(self.broker, "controller", None), "cluster_id", "") or ""

    async def list_schemas(self, request):
        q = request.query
        found = self.registry.schemas(q.get("subjectPrefix", ""), _flag(request, "deleted"),
                                      _flag(request, "latestOnly"))
        return _json(page(found, q.get("offset"), q.get("limit")))

    async def schema_by_id(self, request):
        schema_id = _schema_id(request.match_info["id"])
        return _json(self.registry.schema_by_id(schema_id, request.query.get("format")))

    async def raw_schema_by_id(self, request):
        schema_id = _schema_id(request.match_info["id"])
        return self._raw(self.registry.schema_by_id(schema_id, request.query.get("format"))["schema"])

    async def schema_by_guid(self, request):
        return _json(self.registry.schema_by_guid(request.match_info["guid"], request.query.get("format")))

    async def id_subjects(self, request):
        q = request.query
        found = self.registry.id_subjects(_schema_id(request.match_info["id"]), _flag(request, "deleted"),
                                          q.get("subject"))
        return _json(page(found, q.get("offset"), q.get("limit")))

    async def id_versions(self, request):
        q = request.query
        found = self.registry.id_versions(_schema_id(request.match_info["id"]), _flag(request, "deleted"),
                                          q.get("subject"))
        return _json(page(found, q.get("offset"), q.get("limit")))

    async def subjects(self, request):
        q = request.query
        prefix = q.get("subjectPrefix", q.get("subject", "")) or ""
        found = self.registry.subjects(_flag(request, "deleted"), _flag(request, "deleted_only"), prefix)
        return _json(page(found, q.get("offset"), q.get("limit")))

    async def lookup(self, request):
        body = await _body(request)
        return _json(self.registry.lookup(request.match_info["subject"], body, _flag(request, "normalize"),
                                          _flag(request, "deleted")))

    async def register(self, request):
        body = await _body(request)
        answer = self.registry.register(request.match_info["subject"], body, _flag(request, "normalize"))
        return _json(answer)

    async def delete_subject(self, request):
        return _json(self.registry.delete_subject(request.match_info["subject"], _flag(request, "permanent")))

    async def versions(self, request):
        q = request.query
        found = self.registry.versions(request.match_info["subject"], _flag(request, "deleted"),
                                       _flag(request, "deleted_only"))
        return _json(page(found, q.get("offset"), q.get("limit")))

    async def get_version(self, request):
        v = self.registry.find_version(request.match_info["subject"], request.match_info["version"],
                                       _flag(request, "deleted"))
        return _json(self.registry.version_json(v, request.query.get("format")))

    async def raw_version(self, request):
        v = self.registry.find_version(request.match_info["subject"], request.match_info["version"],
                                       _flag(request, "deleted"))
        return self._raw(self.registry.formatted(v, request.query.get("format")))

    def _raw(self, text: str) -> Response:
        return Response(text, 200, CONTENT_TYPE)

    async def delete_version(self, request):
        return _json(self.registry.delete_version(request.match_info["subject"], request.match_info["version"],
                                                  _flag(request, "permanent")))

    async def referenced_by(self, request):
        q = request.query
        found = self.registry.referenced_by(request.match_info["subject"], request.match_info["version"])
        return _json(page(found, q.get("offset"), q.get("limit")))

    async def metadata(self, request):
        keys = request.query.getall("key", [])
        values = request.query.getall("value", [])
        v = self.registry.latest_with_metadata(request.match_info["subject"], dict(zip(keys, values)),
                                               _flag(request, "deleted"))
        return _json(self.registry.version_json(v, request.query.get("format")))

    async def compatibility(self, request):
        body = await _body(request)
        return _json(self.registry.check_compatibility(request.match_info["subject"], request.match_info["version"],
                                                       body, _flag(request, "normalize"), _flag(request, "verbose")))

    async def compatibility_all(self, request):
        body = await _body(request)
        return _json(self.registry.check_compatibility(request.match_info["subject"], None, body,
                                                       _flag(request, "normalize"), _flag(request, "verbose")))

    async def get_config(self, request):
        return _json(self.registry.get_config(request.match_info.get("subject"), _flag(request, "defaultToGlobal")))

    async def put_config(self, request):
        body = await _body(request)
        return _json(self.registry.set_config(request.match_info.get("subject"), body))

    async def delete_config(self, request):
        return _json(self.registry.delete_config(request.match_info.get("subject")))

    async def get_mode(self, request):
        return _json(self.registry.get_mode(request.match_info.get("subject"), _flag(request, "defaultToGlobal")))

    async def put_mode(self, request):
        body = await _body(request)
        return _json(self.registry.set_mode(request.match_info.get("subject"), body, _flag(request, "force")))

    async def delete_mode(self, request):
        return _json(self.registry.delete_mode(request.match_info["subject"]))


def build_app(registry: Registry, *, middlewares: list | None = None, max_body: int = 16 * 1024 * 1024,
              broker=None):
    """The registry's application (``http.App``; also served by the unit tests without a broker)."""
    api = Api(registry, broker)
    app = App(middlewares=[api.middleware(), *(middlewares or [])], max_body=max_body)
    api.routes(app)
    return app, api
