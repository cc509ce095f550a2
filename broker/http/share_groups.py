"""The console's share-group pages (KIP-932): ``/share-groups`` lists them (state, epoch, members),
``/share-groups/{group}`` shows one: members with their assignments, the partitions whose share
state is initialized, and per share partition the start offset, records in flight, acquired and
archived and the lag.  ``/api/share-groups/{group}`` answers the same as JSON.  Read-only; the data
comes from ``broker/share/operator.py`` (the group coordinator and the share partitions).
"""

from __future__ import annotations

from minikafka.broker.share import operator

from .console import _BASE

_LIST = """{% extends "base" %}{% block body %}<p>Share groups (KIP-932): consumers that share partitions and
acknowledge records one by one.</p><table id="share-groups"><tr><th>Group</th><th>State</th><th>Group epoch</th>
<th>Members</th></tr>{% for g in rows %}<tr><td><a href="/share-groups/{{ g.group_id|urlencode }}">{{ g.group_id }}</a></td>
<td>{{ g.state }}</td><td>{{ g.group_epoch }}</td><td>{{ g.members }}</td></tr>{% endfor %}</table>
{% if not rows %}<p id="none">No share groups.</p>{% endif %}{% endblock %}"""

_GROUP = """{% extends "base" %}{% block body %}{% if not desc %}<p id="none">No share group {{ group }}.</p>{% else %}
<p>State <b id="state">{{ desc.state }}</b>, group epoch {{ desc.group_epoch }}, assignment epoch
{{ desc.assignment_epoch }}, assignor {{ desc.assignor }}</p>
<h2>Members</h2><table id="members"><tr><th>Member</th><th>Epoch</th><th>Client id</th><th>Host</th><th>Rack</th>
<th>Subscribed</th><th>Assignment</th></tr>{% for m in desc.members %}<tr><td>{{ m.member_id }}</td><td>{{ m.member_epoch }}</td>
<td>{{ m.client_id }}</td><td>{{ m.client_host }}</td><td>{{ m.rack_id or "" }}</td><td>{{ m.subscribed_topic_names|join(", ") }}</td>
<td>{% for a in m.assignment %}{{ a.topic }}: {{ a.partitions|join(",") }}{% if not loop.last %}; {% endif %}{% endfor %}</td></tr>
{% endfor %}</table>
<h2>Share partitions</h2><table id="partitions"><tr><th>Topic</th><th>Partition</th><th>Start offset</th><th>In flight</th>
<th>Acquired</th><th>Archived</th><th>Lag</th></tr>{% for r in desc.partitions %}<tr><td>{{ r.topic }}</td><td>{{ r.partition }}</td>
<td>{{ r.start_offset }}</td><td>{{ r.in_flight }}</td><td>{{ r.acquired }}</td><td>{{ r.archived }}</td><td>{{ r.lag }}</td></tr>
{% endfor %}</table>
<h2>Initialized share state</h2><table id="initialized"><tr><th>Topic</th><th>Partitions</th></tr>
{% for r in desc.initialized %}<tr><td>{{ r.topic }}</td><td>{{ r.partitions|join(",") }}</td></tr>{% endfor %}</table>
{% endif %}{% endblock %}"""


def _env():
    from jinja2 import DictLoader, Environment

    return Environment(loader=DictLoader({"base": _BASE, "list": _LIST, "group": _GROUP}), autoescape=True)


def _render(request, name: str, status: int = 200, **context):
    from aiohttp import web

    from .appkey import SHARE_GROUPS_KEY

    html = request.app[SHARE_GROUPS_KEY].get_template(name).render(**context)
    return web.Response(text=html, content_type="text/html", status=status,
                        headers={"Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'"})


def _broker(request):
    from .server import broker_key

    return request.app[broker_key()]


async def list_page(request):
    return _render(request, "list", title="Share groups", rows=operator.share_groups(_broker(request)))


async def group_page(request):
    group = request.match_info["group"]
    desc = operator.describe(_broker(request), group)
    return _render(request, "group", 200 if desc else 404, title=f"Share group {group}", group=group, desc=desc)


async def group_api(request):
    from aiohttp import web

    group = request.match_info["group"]
    desc = operator.describe(_broker(request), group)
    if desc is None:
        return web.json_response({"error": f"no share group {group!r}"}, status=404)
    return web.json_response(desc)


def setup(app, broker) -> None:
    from .appkey import SHARE_GROUPS_KEY

    app[SHARE_GROUPS_KEY] = _env()
    app.router.add_get("/share-groups", list_page)
    app.router.add_get("/share-groups/{group}", group_page)
    app.router.add_get("/api/share-groups/{group}", group_api)
