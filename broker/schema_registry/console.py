"""A small console on the registry's listener: ``/console/`` lists subjects, ``/console/subjects/{s}``
shows a subject's versions (id, type, soft-deleted) and the diff between two versions
(``?from=1&to=2``; the latest two by default), of their pretty-printed schemas.  HTML, escaped.
"""

from __future__ import annotations

import html
import json
from urllib.parse import quote


def _pretty(text: str) -> list[str]:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False).splitlines()
    except ValueError:
        return text.splitlines()


def _page(title: str, body: str):
    from .http import Response

    return Response(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                             "<style>body{font-family:sans-serif}td,th{padding:2px 8px}.diff_add{background:#cfc}"
                             ".diff_sub{background:#fcc}.diff_chg{background:#ffc}</style></head><body>"
                             f"<h1>{html.escape(title)}</h1>{body}</body></html>", 200, "text/html; charset=utf-8")


def diff_rows(old: str, new: str) -> list[str]:
    """A unified diff of two schemas, pretty-printed first."""
    import difflib

    return list(difflib.unified_diff(_pretty(old), _pretty(new), "old", "new", lineterm=""))


def setup(app, server) -> None:
    async def index(request):
        registry = server.registry
        rows = "".join(
            f"<tr><td><a href='/console/subjects/{html.escape(quote(s, safe=''), quote=True)}'>{html.escape(s)}</a></td>"
            f"<td>{len(registry.state.live_versions(s))}</td></tr>"
            for s in registry.subjects(deleted=True))
        return _page("Schema registry", f"<table><tr><th>subject</th><th>live versions</th></tr>{rows}</table>")

    async def subject(request):
        registry = server.registry
        name = request.match_info["subject"]
        versions = registry.state.all_versions(name)
        if not versions:
            return _page(f"Subject {name}", "<p>No such subject.</p>")
        rows = "".join(f"<tr><td>{v.version}</td><td>{v.schema_id}</td><td>{v.schema_type}</td>"
                       f"<td>{'deleted' if v.deleted else ''}</td></tr>" for v in versions)
        by_number = {v.version: v for v in versions}
        try:
            new = int(request.query.get("to", versions[-1].version))
            old = int(request.query.get("from", versions[-2].version if len(versions) > 1 else new))
        except ValueError:
            old = new = versions[-1].version
        body = f"<table><tr><th>version</th><th>id</th><th>type</th><th></th></tr>{rows}</table>"
        if old in by_number and new in by_number:
            lines = diff_rows(registry.formatted(by_number[old], None), registry.formatted(by_number[new], None))
            shown = "\n".join(lines) if lines else "(no difference)"
            body += f"<h2>Diff version {old} -> {new}</h2><pre class='diff'>{html.escape(shown)}</pre>"
        latest = by_number[new]
        body += f"<h2>Version {new}</h2><pre>{html.escape(chr(10).join(_pretty(registry.formatted(latest, None))))}</pre>"
        return _page(f"Subject {name}", body)

    app.router.add_get("/console/", index)
    app.router.add_get("/console/subjects/{subject}", subject)
