"""The web console at ``/``: server-rendered pages (jinja2, autoescaped) and a little JavaScript.

Pages: overview, topics (paged), a topic (partitions, configs, a message browser paged by offset
or timestamp with UTF-8/JSON/hex views, a live tail, a produce form), groups and a group
(members, assignments, lag, offset reset with a confirmation step), transactions (the transaction
coordinator's ids with state, producer id/epoch, partitions and how long the open one has run) and
producers (per partition, what DescribeProducers answers).  Everything shown from
records is untrusted: templates autoescape, and the tail's JavaScript only sets textContent.
Reads go through the controller's partition logs (bounded reads from an offset, never a whole
topic) and the group coordinator's describe/list/fetch-offsets; writes through the produce
handler's ``produce_partition`` and the coordinator's ``commit_offsets``, as a client's would.
Forms carry a per-server token so another site cannot post to the console from a browser.
"""

from __future__ import annotations

import binascii
import json
import secrets
import struct
import time
from datetime import datetime, timezone

from . import views

PAGE_TOPICS = 100
MAX_MESSAGES = 200
READ_BYTES = 1 << 20

_BASE = """<!doctype html><html><head><meta charset="utf-8"><title>{{ title }} - minikafka</title>
<style>body{font:14px system-ui,sans-serif;margin:0}nav{background:#223;padding:8px 16px}nav a{color:#fff;
margin-right:16px;text-decoration:none}main{padding:16px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}pre{margin:0;white-space:pre-wrap;
word-break:break-all;max-width:60em}.err{color:#b00}.ok{color:#070}form{margin:8px 0}</style></head><body>
<nav><a href="/">Overview</a><a href="/topics">Topics</a><a href="/groups">Groups</a>{#
#}<a href="/share-groups">Share groups</a>{#
#}<a href="/transactions">Transactions</a><a href="/producers">Producers</a><a href="/metrics">Metrics</a></nav>
<main><h1 id="title">{{ title }}</h1>{% if notice %}<p class="ok" id="notice">{{ notice }}</p>{% endif %}
{% if error %}<p class="err" id="error">{{ error }}</p>{% endif %}{% block body %}{% endblock %}</main></body></html>"""

_OVERVIEW = """{% extends "base" %}{% block body %}<table id="overview">
<tr><th>Cluster id</th><td>{{ cluster_id }}</td></tr><tr><th>Uptime</th><td>{{ uptime }}</td></tr>
<tr><th>Topics</th><td id="topics">{{ topics }}</td></tr><tr><th>Partitions</th><td id="partitions">{{ partitions }}</td></tr>
<tr><th>Connections</th><td id="connections">{{ connections }}</td></tr>
<tr><th>Messages in</th><td><span id="msgs">{{ messages_in }}</span> (<span id="msgrate">-</span>/s)</td></tr>
<tr><th>Bytes in</th><td><span id="bin">{{ bytes_in }}</span> (<span id="binrate">-</span>/s)</td></tr>
<tr><th>Bytes out</th><td><span id="bout">{{ bytes_out }}</span> (<span id="boutrate">-</span>/s)</td></tr>
<tr><th>Groups</th><td>{{ groups }}</td></tr></table>
<script>let last=null;async function tick(){const r=await fetch('/api/overview');const d=await r.json();
for(const k of ['connections','topics','partitions']){document.getElementById(k).textContent=d[k]}
const ids={messages_in:['msgs','msgrate'],bytes_in:['bin','binrate'],bytes_out:['bout','boutrate']};
for(const [k,[a,b]] of Object.entries(ids)){document.getElementById(a).textContent=d[k];
if(last){document.getElementById(b).textContent=((d[k]-last[k])/((d.time-last.time)||1)).toFixed(1)}}last=d}
tick();setInterval(tick,2000)</script>{% endblock %}"""

_TOPICS = """{% extends "base" %}{% block body %}<form method="get"><input name="q" value="{{ q }}" placeholder="filter">
<button>Filter</button></form><p>{{ total }} topics{% if pages > 1 %}, page {{ page }} of {{ pages }}{% endif %}</p>
<table id="topics"><tr><th>Topic</th><th>Partitions</th><th>Messages</th><th>Size</th></tr>
{% for t in rows %}<tr><td><a href="/topics/{{ t.name|urlencode }}">{{ t.name }}</a></td><td>{{ t.partitions }}</td>
<td>{{ t.messages }}</td><td>{{ t.size }}</td></tr>{% endfor %}</table>
{% if page > 1 %}<a href="?q={{ q|urlencode }}&page={{ page - 1 }}">previous</a>{% endif %}
{% if page < pages %}<a id="next" href="?q={{ q|urlencode }}&page={{ page + 1 }}">next</a>{% endif %}{% endblock %}"""

_TOPIC = """{% extends "base" %}{% block body %}
<p><a id="producerslink" href="/producers?q={{ topic|urlencode }}">Producers of this topic</a></p>
<h2>Partitions</h2><table id="partitions"><tr><th>Partition</th><th>Log start</th><th>High watermark</th><th>LSO</th>
<th>Size</th><th>Segments</th></tr>{% for p in partitions %}<tr><td>{{ p.partition }}</td><td>{{ p.log_start }}</td>
<td>{{ p.high_watermark }}</td><td>{{ p.last_stable }}</td><td>{{ p.size }}</td><td>{{ p.segments }}</td></tr>{% endfor %}</table>
<h2>Messages</h2><form method="get" id="browse">Partition <select name="partition">{% for p in partitions %}
<option value="{{ p.partition }}" {% if p.partition == sel.partition %}selected{% endif %}>{{ p.partition }}</option>{% endfor %}
</select> offset <input name="offset" size="10" value="{{ sel.offset_text }}"> or time <input name="timestamp" size="22"
value="{{ sel.timestamp }}" placeholder="ms or 2024-01-01T00:00:00"> limit <input name="limit" size="4" value="{{ sel.limit }}">
format <select name="format">{% for f in ["utf8", "json", "hex"] %}<option {% if f == sel.format %}selected{% endif %}>{{ f }}</option>
{% endfor %}</select> <button>Show</button></form>
<table id="messages"><tr><th>Offset</th><th>Timestamp</th><th>Key</th><th>Value</th><th>Headers</th></tr>
{% for m in messages %}<tr class="msg"><td>{{ m.offset }}</td><td>{{ m.time }}</td><td><pre>{{ "" if m.key is none else m.key }}</pre></td>
<td><pre class="value">{{ "" if m.value is none else m.value }}</pre></td><td><pre>{{ m.headers }}</pre></td></tr>{% endfor %}</table>
{% if prev is not none %}<a id="prev" href="?partition={{ sel.partition }}&offset={{ prev }}&limit={{ sel.limit }}&format={{ sel.format }}">previous</a>{% endif %}
{% if next is not none %}<a id="nextpage" href="?partition={{ sel.partition }}&offset={{ next }}&limit={{ sel.limit }}&format={{ sel.format }}">next</a>{% endif %}
<h2>Live tail</h2><button id="tailbtn" type="button">Start tail of partition {{ sel.partition }}</button>
<table id="tail"><tr><th>Offset</th><th>Key</th><th>Value</th></tr></table>
<script>const tailUrl={{ tail_url|tojson }};let tailNext={{ hw_selected }};let tailTimer=null;
async function tailTick(){const r=await fetch(tailUrl+'&offset='+tailNext);const d=await r.json();
const t=document.getElementById('tail');for(const m of d.messages){const tr=document.createElement('tr');tr.className='tailmsg';
for(const v of [m.offset,m.key,m.value]){const td=document.createElement('td');td.textContent=v===null?'':String(v);tr.appendChild(td)}
t.appendChild(tr);tailNext=m.offset+1}if(d.next!==null&&d.next>tailNext)tailNext=d.next}
document.getElementById('tailbtn').onclick=function(){if(!tailTimer){tailTick();tailTimer=setInterval(tailTick,1000);this.textContent='Tailing...'}}</script>
<h2>Produce</h2><form method="post" action="/topics/{{ topic|urlencode }}/produce" id="produce">
<input type="hidden" name="token" value="{{ token }}">Partition <select name="partition">{% for p in partitions %}
<option>{{ p.partition }}</option>{% endfor %}</select><br>Key <input name="key" id="pkey"><br>
Value<br><textarea name="value" id="pvalue" rows="3" cols="60"></textarea><br>Headers (NAME=VALUE per line)<br>
<textarea name="headers" rows="2" cols="60"></textarea><br><button id="psend">Produce</button></form>
<h2>Configs</h2><table id="configs"><tr><th>Name</th><th>Value</th><th>Source</th></tr>{% for c in configs %}
<tr><td>{{ c.name }}</td><td>{{ c.value }}</td><td>{{ c.source }}</td></tr>{% endfor %}</table>{% endblock %}"""

_TRANSACTIONS = """{% extends "base" %}{% block body %}<form method="get">State <select name="state">
{% for st in states %}<option value="{{ st }}" {% if st == state %}selected{% endif %}>{{ st or "any" }}</option>{% endfor %}
</select> <button>Filter</button></form>
{% if not available %}<p id="none">No transaction coordinator yet: it starts with the first transactional producer.</p>{% endif %}
<p>{{ total }} transactional ids{% if pages > 1 %}, page {{ page }} of {{ pages }}{% endif %}</p>
<table id="transactions"><tr><th>Transactional id</th><th>State</th><th>Producer id</th><th>Epoch</th><th>Timeout</th>
<th>Started</th><th>Duration</th><th>Partitions</th></tr>{% for t in rows %}<tr><td>{{ t.transactional_id }}</td>
<td>{{ t.transaction_state }}</td><td>{{ t.producer_id }}</td><td>{{ t.producer_epoch }}</td><td>{{ t.transaction_timeout_ms }} ms</td>
<td>{{ t.started }}</td><td>{{ t.duration }}</td><td>{% for tp in t.topics %}<a href="/topics/{{ tp.topic|urlencode }}">{{ tp.topic }}</a>:
{{ tp.partitions|join(",") }}{% if not loop.last %}; {% endif %}{% endfor %}</td></tr>{% endfor %}</table>
{% if page > 1 %}<a href="?state={{ state|urlencode }}&page={{ page - 1 }}">previous</a>{% endif %}
{% if page < pages %}<a id="next" href="?state={{ state|urlencode }}&page={{ page + 1 }}">next</a>{% endif %}{% endblock %}"""

_PRODUCERS = """{% extends "base" %}{% block body %}<p>Producer state per partition, as DescribeProducers returns it:
idempotent and transactional producers with batches still in the log.</p><form method="get"><input name="q" value="{{ q }}"
placeholder="topic filter"> <button>Filter</button></form>
<p>{{ total }} topics{% if pages > 1 %}, page {{ page }} of {{ pages }}{% endif %}</p>
<table id="producers"><tr><th>Topic</th><th>Partition</th><th>Producer id</th><th>Epoch</th><th>Last sequence</th>
<th>Last timestamp</th><th>Coordinator epoch</th><th>Open transaction from offset</th></tr>{% for r in rows %}
<tr><td><a href="/topics/{{ r.topic|urlencode }}">{{ r.topic }}</a></td><td>{{ r.partition }}</td><td>{{ r.producer_id }}</td>
<td>{{ r.producer_epoch }}</td><td>{{ r.last_sequence }}</td><td>{{ r.last_time }}</td><td>{{ r.coordinator_epoch }}</td>
<td>{{ "" if r.current_txn_start_offset < 0 else r.current_txn_start_offset }}</td></tr>{% endfor %}</table>
{% if page > 1 %}<a href="?q={{ q|urlencode }}&page={{ page - 1 }}">previous</a>{% endif %}
{% if page < pages %}<a id="next" href="?q={{ q|urlencode }}&page={{ page + 1 }}">next</a>{% endif %}{% endblock %}"""

_GROUPS = """{% extends "base" %}{% block body %}<table id="groups"><tr><th>Group</th><th>State</th><th>Protocol type</th>
<th>Lag</th></tr>{% for g in rows %}<tr><td><a href="/{{ "share-groups" if g.group_type == "share" else "groups" }}/{{ g.group_id|urlencode }}">{{ g.group_id }}</a></td>
<td>{{ g.group_state }}</td><td>{{ g.protocol_type }}</td><td>{{ g.lag }}</td></tr>{% endfor %}</table>{% endblock %}"""

_GROUP = """{% extends "base" %}{% block body %}<p>State <b id="state">{{ desc.group_state }}</b>, protocol type
{{ desc.protocol_type or "-" }}, protocol {{ desc.protocol_data or "-" }}</p>
<h2>Members</h2><table id="members"><tr><th>Member</th><th>Instance</th><th>Client id</th><th>Host</th><th>Assignment</th></tr>
{% for m in members %}<tr><td>{{ m.member_id }}</td><td>{{ m.group_instance_id or "" }}</td><td>{{ m.client_id }}</td>
<td>{{ m.client_host }}</td><td>{{ m.assignment }}</td></tr>{% endfor %}</table>
<h2>Offsets and lag</h2><table id="lag"><tr><th>Topic</th><th>Partition</th><th>Committed</th><th>Log end</th><th>Lag</th></tr>
{% for r in lag %}<tr><td>{{ r.topic }}</td><td>{{ r.partition }}</td><td>{{ r.committed_offset }}</td><td>{{ r.log_end_offset }}</td>
<td>{{ r.lag }}</td></tr>{% endfor %}</table>
<h2>Reset offsets</h2><p>Only while the group has no active members (Kafka's rule).</p>
<form method="post" action="/groups/{{ group|urlencode }}/reset" id="reset"><input type="hidden" name="token" value="{{ token }}">
Topic <input name="topic" value="{{ plan_topic }}" placeholder="all with offsets"> to <select name="to">
{% for t in ["earliest", "latest", "offset", "timestamp", "shift"] %}<option {% if t == plan_to %}selected{% endif %}>{{ t }}</option>{% endfor %}</select>
value <input name="value" value="{{ plan_value }}" size="22">
{% if plan %}<input type="hidden" name="confirm" value="yes">{% endif %}
<button id="resetbtn">{% if plan %}Confirm reset{% else %}Show plan{% endif %}</button></form>
{% if plan %}<table id="plan"><tr><th>Topic</th><th>Partition</th><th>Current</th><th>New</th></tr>{% for r in plan %}
<tr><td>{{ r.topic }}</td><td>{{ r.partition }}</td><td>{{ r.current }}</td><td>{{ r.new }}</td></tr>{% endfor %}</table>{% endif %}
{% endblock %}"""


def _env():
    from jinja2 import DictLoader, Environment

    return Environment(loader=DictLoader({"base": _BASE, "overview": _OVERVIEW, "topics": _TOPICS, "topic": _TOPIC,
                                          "groups": _GROUPS, "group": _GROUP, "transactions": _TRANSACTIONS,
                                          "producers": _PRODUCERS}), autoescape=True)


class Console:
    def __init__(self, broker):
        self.broker = broker
        self.env = _env()
        self.token = secrets.token_urlsafe(16)

    def render(self, name: str, status: int = 200, **context):
        from aiohttp import web

        html = self.env.get_template(name).render(token=self.token, **context)
        return web.Response(text=html, content_type="text/html", status=status,
                            headers={"Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                                                                "style-src 'unsafe-inline'"})

    def check_token(self, form) -> bool:
        return secrets.compare_digest(str(form.get("token", "")), self.token)


def _console(request) -> Console:
    from .appkey import CONSOLE_KEY

    return request.app[CONSOLE_KEY]


def _totals(broker) -> dict:
    m = broker.metrics
    out = {"messages_in": 0, "bytes_in": 0, "bytes_out": 0}
    if m is None:
        return out
    for key, counter in (("messages_in", m.messages_in), ("bytes_in", m.bytes_in), ("bytes_out", m.bytes_out)):
        out[key] = int(counter.total())
    return out


def _overview_data(broker) -> dict:
    topics = broker.controller.topics
    return {"time": time.time(), "topics": len(topics),
            "partitions": sum(t.num_partitions for t in topics.values()),
            "connections": len(broker.connections), **_totals(broker)}


async def overview(request):
    broker = _console(request).broker
    data = _overview_data(broker)
    uptime = int(broker.clock() - broker.started_at)
    return _console(request).render("overview", title="Overview", cluster_id=broker.controller.cluster_id,
                                    uptime=f"{uptime // 3600}h {uptime // 60 % 60}m {uptime % 60}s",
                                    groups=len(views.groups(broker)), **data)


async def overview_api(request):
    from aiohttp import web

    return web.json_response(_overview_data(_console(request).broker))


async def topics(request):
    console = _console(request)
    broker = console.broker
    q = request.query.get("q", "")
    names = sorted(n for n in broker.controller.topics if q in n)
    pages = max(1, -(-len(names) // PAGE_TOPICS))
    page = min(max(_int(request.query.get("page"), 1), 1), pages)
    rows = []
    for name in names[(page - 1) * PAGE_TOPICS: page * PAGE_TOPICS]:
        parts = views.topic_partitions(broker, name)
        rows.append({"name": name, "partitions": len(parts), "messages": sum(p.high_watermark - p.log_start for p in parts),
                     "size": sum(p.size for p in parts)})
    return console.render("topics", title="Topics", rows=rows, q=q, page=page, pages=pages, total=len(names))


def _int(text, default):
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def parse_time(text: str) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def show(data: bytes | None, fmt: str) -> str | None:
    if data is None:
        return None
    if fmt == "hex":
        return binascii.hexlify(bytes(data), " ").decode()
    text = bytes(data).decode("utf-8", "replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def read_messages(broker, topic: str, partition: int, offset: int, limit: int) -> tuple[list, int]:
    """Up to ``limit`` records from ``offset`` (below the high watermark), and the next offset.

    Bounded: at most a few reads of READ_BYTES each, whatever the topic's size."""
    from minikafka.protocol.records import iter_batches, iter_records

    plog = broker.controller.log(topic, partition)
    offset = max(offset, plog.log_start_offset)
    hw = plog.high_watermark
    out: list = []
    position = offset
    for _ in range(8):
        if position >= hw or len(out) >= limit:
            break
        views_ = plog.read(position, READ_BYTES, hw)
        if not views_:
            break
        moved = False
        for view in views_:
            for pos, header in iter_batches(view):
                batch = view[pos:pos + header.size]
                if header.is_control:
                    position = max(position, header.base_offset + header.last_offset_delta + 1)
                    moved = True
                    continue
                for record in iter_records(batch):
                    if record.offset >= offset and len(out) < limit:
                        out.append(record)
                position = max(position, header.base_offset + header.last_offset_delta + 1)
                moved = True
                if len(out) >= limit:
                    break
            if len(out) >= limit:
                break
        if not moved:
            break
    next_offset = out[-1].offset + 1 if out else position
    return out, next_offset


def _record_view(r, fmt: str) -> dict:
    when = datetime.fromtimestamp(r.timestamp / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] \
        if r.timestamp >= 0 else ""
    headers = "\n".join(f"{k}={show(v, fmt) or ''}" for k, v in r.headers)
    return {"offset": r.offset, "time": when, "key": show(r.key, fmt), "value": show(r.value, fmt), "headers": headers}


def _topic_or_404(request):
    from aiohttp import web

    broker = _console(request).broker
    name = request.match_info["topic"]
    info = broker.controller.topic(name)
    if info is None:
        raise web.HTTPNotFound(text="unknown topic")
    return broker, name, info


async def topic_page(request):
    console = _console(request)
    broker, name, info = _topic_or_404(request)
    q = request.query
    partition = min(max(_int(q.get("partition"), 0), 0), info.num_partitions - 1)
    limit = min(max(_int(q.get("limit"), 20), 1), MAX_MESSAGES)
    fmt = q.get("format", "utf8") if q.get("format") in ("utf8", "json", "hex") else "utf8"
    partitions = views.topic_partitions(broker, name)
    p = partitions[partition]
    error = None
    ts = parse_time(q.get("timestamp", ""))
    if q.get("timestamp") and ts is None:
        error = "bad time: give epoch milliseconds or an ISO 8601 datetime"
    if ts is not None:
        found = broker.controller.log(name, partition).offset_for_timestamp(ts)
        offset = found[0] if found else p.high_watermark
    elif q.get("offset", "") != "":
        offset = _int(q.get("offset"), p.log_start)
    else:
        offset = max(p.log_start, p.high_watermark - limit)  # the newest page
    offset = min(max(offset, p.log_start), p.high_watermark)
    records, next_offset = read_messages(broker, name, partition, offset, limit)
    messages = [_record_view(r, fmt) for r in records]
    prev = max(p.log_start, offset - limit) if offset > p.log_start else None
    configs = []
    for cname in sorted(_topic_config_names()):
        value = info.configs.get(cname)
        configs.append({"name": cname, "value": value if value is not None else broker.controller.topic_config_value(
            name, cname), "source": "DYNAMIC_TOPIC_CONFIG" if value is not None else "DEFAULT"})
    sel = {"partition": partition, "offset_text": q.get("offset", ""), "timestamp": q.get("timestamp", ""),
           "limit": limit, "format": fmt}
    return console.render("topic", title=f"Topic {name}", topic=name, partitions=partitions, sel=sel,
                          messages=messages, prev=prev, next=next_offset if next_offset < p.high_watermark else None,
                          configs=configs, error=error, notice=q.get("notice"), hw_selected=p.high_watermark,
                          tail_url=f"/api/topics/{name}/messages?partition={partition}&format={fmt}")


def _topic_config_names():
    from minikafka.broker.config import TOPIC_CONFIGS

    return TOPIC_CONFIGS.keys()


async def messages_api(request):
    from aiohttp import web

    broker, name, info = _topic_or_404(request)
    q = request.query
    partition = _int(q.get("partition"), 0)
    if not 0 <= partition < info.num_partitions:
        raise web.HTTPBadRequest(text="bad partition")
    fmt = q.get("format", "utf8") if q.get("format") in ("utf8", "json", "hex") else "utf8"
    limit = min(max(_int(q.get("limit"), 50), 1), MAX_MESSAGES)
    records, next_offset = read_messages(broker, name, partition, _int(q.get("offset"), 0), limit)
    return web.json_response({"messages": [_record_view(r, fmt) for r in records], "next": next_offset})


async def produce(request):
    from aiohttp import web

    from minikafka.broker.handlers.produce import produce_partition
    from minikafka.protocol.records import build_batch

    console = _console(request)
    broker, name, info = _topic_or_404(request)
    form = await request.post()
    if not console.check_token(form):
        raise web.HTTPForbidden(text="bad form token; reload the page")
    partition = _int(form.get("partition"), 0)
    key = form.get("key") or None
    headers = []
    for line in str(form.get("headers", "")).splitlines():
        if line.strip():
            hname, _, hvalue = line.partition("=")
            headers.append((hname.strip(), hvalue.encode()))
    batch = build_batch([(key.encode() if key else None, str(form.get("value", "")).encode(), headers,
                          broker.now_ms())])
    result = produce_partition(broker, name, info, partition, batch, None)
    location = f"/topics/{name}?partition={partition}"
    if result["error_code"]:
        from minikafka.protocol.errors import ErrorCode

        notice = f"produce failed: {ErrorCode(result['error_code']).name}"
    else:
        notice = f"produced to partition {partition} at offset {result['base_offset']}"
    from urllib.parse import quote

    raise web.HTTPSeeOther(location + "&notice=" + quote(notice))


async def groups(request):
    console = _console(request)
    broker = console.broker
    rows = []
    for g in views.groups(broker):
        rows.append({**g, "lag": sum(r["lag"] for r in views.group_lag(broker, g["group_id"]))})
    return console.render("groups", title="Consumer groups", rows=rows)


def _assignment(data: bytes) -> str:
    """The consumer protocol's Assignment: version, [topic, [partition]], user data."""
    if not data or len(data) < 6:
        return ""
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = []
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = bytes(data[pos:pos + ln]).decode("utf-8", "replace")
            pos += ln
            (np_,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(np_, 0)}i", data, pos)
            pos += 4 * max(np_, 0)
            out.append(f"{topic}: {','.join(map(str, parts))}")
        return "; ".join(out)
    except struct.error:
        return "(not a consumer assignment)"


def _group_page(console, group_id: str, **extra):
    broker = console.broker
    desc = views.describe_group(broker, group_id) or {"group_state": "Unknown", "members": []}
    members = [{**m, "assignment": _assignment(m.get("member_assignment") or b"")} for m in desc["members"]]
    return console.render("group", title=f"Group {group_id}", group=group_id, desc=desc, members=members,
                          lag=views.group_lag(broker, group_id), plan=extra.pop("plan", None),
                          plan_topic=extra.pop("plan_topic", ""), plan_to=extra.pop("plan_to", "earliest"),
                          plan_value=extra.pop("plan_value", ""), **extra)


async def group_page(request):
    return _group_page(_console(request), request.match_info["group"], notice=request.query.get("notice"))


def reset_plan(broker, group_id: str, topic: str, to: str, value: str) -> list[dict]:
    committed = views.committed_offsets(broker, group_id)
    if topic:
        info = broker.controller.topic(topic)
        if info is None:
            raise ValueError(f"unknown topic {topic}")
        keys = [(topic, p) for p in range(info.num_partitions)]
    else:
        keys = sorted(committed)
    if not keys:
        raise ValueError("the group has no committed offsets; name a topic")
    plan = []
    for t, p in keys:
        plog = broker.controller.log(t, p)
        lo, hi = plog.log_start_offset, plog.high_watermark
        current = committed.get((t, p))
        if to == "earliest":
            new = lo
        elif to == "latest":
            new = hi
        elif to == "offset":
            new = int(value)
        elif to == "shift":
            if current is None:
                raise ValueError(f"{t}-{p} has no committed offset to shift")
            new = current + int(value)
        elif to == "timestamp":
            ts = parse_time(value)
            if ts is None:
                raise ValueError("bad time: give epoch milliseconds or an ISO 8601 datetime")
            found = plog.offset_for_timestamp(ts)
            new = found[0] if found else hi
        else:
            raise ValueError(f"unknown target {to}")
        plan.append({"topic": t, "partition": p, "current": current, "new": min(max(new, lo), hi)})
    return plan


async def reset(request):
    from aiohttp import web

    console = _console(request)
    broker = console.broker
    group_id = request.match_info["group"]
    form = await request.post()
    if not console.check_token(form):
        raise web.HTTPForbidden(text="bad form token; reload the page")
    topic, to, value = str(form.get("topic", "")).strip(), str(form.get("to", "")), str(form.get("value", ""))
    try:
        plan = reset_plan(broker, group_id, topic, to, value)
    except ValueError as exc:
        return _group_page(console, group_id, error=str(exc), status=400)
    if form.get("confirm") != "yes":
        return _group_page(console, group_id, plan=plan, plan_topic=topic, plan_to=to, plan_value=value,
                           notice="Check the plan, then confirm.")
    gc = broker.group_coordinator
    shard, error = gc.check(group_id) if gc is not None else (None, None)
    if shard is None:
        return _group_page(console, group_id, error=f"coordinator not available ({error})", status=503)
    by_topic: dict[str, list] = {}
    for r in plan:
        by_topic.setdefault(r["topic"], []).append({"partition_index": r["partition"], "committed_offset": r["new"],
                                                    "committed_leader_epoch": -1, "committed_metadata": ""})
    response = shard.commit_offsets({"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                                     "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}, 9)
    errors = {p["error_code"] for t in response["topics"] for p in t["partitions"]} - {0}
    if errors:
        from minikafka.protocol.errors import ErrorCode

        names = ", ".join(ErrorCode(e).name for e in errors)
        return _group_page(console, group_id, error=f"reset refused: {names} (the group must have no active members)",
                           status=409)
    from urllib.parse import quote

    raise web.HTTPSeeOther(f"/groups/{quote(group_id)}?notice=" + quote(f"offsets reset for {len(plan)} partitions"))


def _ms_time(ms: int) -> str:
    if ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _duration(ms: int) -> str:
    seconds, ms = divmod(max(ms, 0), 1000)
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes // 60}h {minutes % 60}m {seconds}.{ms:03d}s" if minutes >= 60 else \
        f"{minutes}m {seconds}.{ms:03d}s" if minutes else f"{seconds}.{ms:03d}s"


# A transaction is running from its first AddPartitions until its markers are written.
_RUNNING = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
_TXN_STATES = ("", "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
               "PrepareEpochFence")


async def transactions(request):
    console = _console(request)
    broker = console.broker
    state = request.query.get("state", "")
    state = state if state in _TXN_STATES else ""
    ids = views.transaction_ids(broker, state)
    pages = max(1, -(-len(ids) // PAGE_TOPICS))
    page = min(max(_int(request.query.get("page"), 1), 1), pages)
    now = broker.now_ms()
    rows = []
    for tid in ids[(page - 1) * PAGE_TOPICS: page * PAGE_TOPICS]:
        desc = views.describe_transaction(broker, tid)
        if desc is None:  # expired between the list and the describe
            continue
        start = desc["transaction_start_time_ms"]
        running = desc["transaction_state"] in _RUNNING and start >= 0
        rows.append({**desc, "started": _ms_time(start) if running else "",
                     "duration": _duration(now - start) if running else ""})
    return console.render("transactions", title="Transactions", rows=rows, state=state, states=_TXN_STATES,
                          page=page, pages=pages, total=len(ids), available=views.txn_coordinator(broker) is not None)


PAGE_PRODUCER_TOPICS = 50


async def producers(request):
    console = _console(request)
    broker = console.broker
    q = request.query.get("q", "")
    names = sorted(n for n in broker.controller.topics if q in n)
    pages = max(1, -(-len(names) // PAGE_PRODUCER_TOPICS))
    page = min(max(_int(request.query.get("page"), 1), 1), pages)
    rows = []
    for name in names[(page - 1) * PAGE_PRODUCER_TOPICS: page * PAGE_PRODUCER_TOPICS]:
        info = broker.controller.topic(name)
        for partition in range(info.num_partitions if info is not None else 0):
            for r in views.partition_producers(broker, name, partition):
                rows.append({**r, "topic": name, "partition": partition, "last_time": _ms_time(r["last_timestamp"])})
    return console.render("producers", title="Producers", rows=rows, q=q, page=page, pages=pages, total=len(names))


def setup(app, broker) -> None:
    from .appkey import CONSOLE_KEY

    app[CONSOLE_KEY] = Console(broker)
    app.router.add_get("/", overview)
    app.router.add_get("/api/overview", overview_api)
    app.router.add_get("/topics", topics)
    app.router.add_get("/topics/{topic}", topic_page)
    app.router.add_post("/topics/{topic}/produce", produce)
    app.router.add_get("/api/topics/{topic}/messages", messages_api)
    app.router.add_get("/groups", groups)
    app.router.add_get("/groups/{group}", group_page)
    app.router.add_post("/groups/{group}/reset", reset)
    app.router.add_get("/transactions", transactions)
    app.router.add_get("/producers", producers)
