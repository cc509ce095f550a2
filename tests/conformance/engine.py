"""Runs the corpus against Apache Kafka and minikafka, compares, classifies and reports.

A scenario is a function ``fn(ctx)`` registered with :func:`scenario`.  It runs twice, once per
broker, concurrently (each broker gets the same requests in the same order on its own
connections); ``ctx.call(...)`` sends a request under test (recorded), ``ctx.setup(...)`` one
that only prepares state (not compared).  Every name a scenario creates comes from
``ctx.name(...)`` (unique per scenario), so all scenarios share one broker of each kind.

Recorded exchanges are paired in order, normalised (normalize.py), compared field by field and
classified: ``equal``; ``allowed`` when every differing path is explained by an entry of
allowed.toml; otherwise ``unexplained``.
"""

from __future__ import annotations

import fnmatch
import threading
import time
import tomllib
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from minikafka.protocol import specs

from .normalize import Placeholders, normalize
from .wire import Conn, Outcome

HERE = Path(__file__).resolve().parent
ALLOWED_PATH = HERE / "allowed.toml"

SCENARIOS: dict[str, Callable] = {}
PROFILES: dict[str, str] = {}  # scenario -> broker pair ("default", or "acl": with an authorizer)
MISSING = "<absent>"


def scenario(fn: Callable | None = None, *, profile: str = "default"):
    """Register ``fn`` as a scenario; ``profile`` names the pair of brokers it runs on."""
    def register(f: Callable) -> Callable:
        SCENARIOS[f.__name__] = f
        PROFILES[f.__name__] = profile
        return f
    return register(fn) if fn is not None else register


def api_name(key: int) -> str:
    try:
        return specs.api_name(key)
    except Exception:
        return str(key)


@dataclass
class Exchange:
    scenario: str
    label: str
    api_key: int
    version: int
    outcome: Outcome
    normalized: Any = None


@dataclass
class Broker:
    side: str  # "kafka" | "minikafka"
    host: str
    port: int
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)


class ScenarioFailed(Exception):
    pass


class Ctx:
    """One scenario's run against one broker."""

    def __init__(self, broker: Broker, scenario_name: str, run_id: str, plan: "Plan"):
        self.broker = broker
        self.side = broker.side
        self.scenario = scenario_name
        self.prefix = f"cf-{run_id}-{scenario_name.replace('_', '-')}"[:200]
        self.plan = plan
        self.exchanges: list[Exchange] = []
        self.conns: dict[str, Conn] = {}
        self.ph = Placeholders()

    # -- names and versions ----------------------------------------------------------------
    def name(self, suffix: str = "t") -> str:
        return f"{self.prefix}-{suffix}"

    def versions(self, api_key: int, lo: int | None = None, hi: int | None = None) -> list[int]:
        """Every version of ``api_key`` minikafka advertises (optionally clipped)."""
        rng = self.plan.mk_versions.get(api_key)
        if rng is None:
            return []
        a, b = rng
        if lo is not None:
            a = max(a, lo)
        if hi is not None:
            b = min(b, hi)
        return list(range(a, b + 1))

    def kafka_serves(self, api_key: int, version: int) -> bool:
        rng = self.plan.kafka_versions.get(api_key)
        return rng is not None and rng[0] <= version <= rng[1]

    # -- requests ---------------------------------------------------------------------------
    def conn(self, name: str = "main") -> Conn:
        c = self.conns.get(name)
        if c is None:
            c = self.conns[name] = Conn(self.broker.host, self.broker.port)
        return c

    def call(self, api_key: int, version: int, body: dict, *, label: str = "", conn: str = "main",
             scoped: Callable[[Any], Any] | None = None, timeout: float | None = None,
             client_id: str | None = "conformance") -> Outcome:
        out = self.conn(conn).call(api_key, version, body, timeout=timeout, client_id=client_id)
        ex = Exchange(self.scenario, label, api_key, version, out)
        body = out.body
        if scoped is not None and body is not None:
            body = scoped(body)
        norm = self._norm(body) if body is not None else None
        ex.normalized = {"outcome": out.kind, "body": norm}
        self.exchanges.append(ex)
        return out

    def record(self, api_key: int, version: int, out: Outcome, *, label: str = "") -> Outcome:
        """Record an answer obtained elsewhere (e.g. on a thread of the scenario) as an exchange."""
        body = out.body
        self.exchanges.append(Exchange(self.scenario, label, api_key, version, out,
                                       {"outcome": out.kind, "body": self._norm(body) if body is not None else None}))
        return out

    def setup(self, api_key: int, version: int, body: dict, *, conn: str = "main",
              expect: Callable[[Outcome], bool] | None = None, retries: int = 0,
              timeout: float | None = None) -> Outcome:
        """A request that prepares state; retried (bounded) until ``expect`` holds."""
        for attempt in range(retries + 1):
            out = self.conn(conn).call(api_key, version, body, timeout=timeout)
            if expect is None or expect(out):
                return out
            time.sleep(min(0.05 * (attempt + 1), 0.25))
        raise ScenarioFailed(f"{self.side}: setup {api_name(api_key)} v{version} did not succeed: {out}")

    def raw(self, frame: bytes, *, api_key: int, version: int, label: str, conn: str = "raw",
            decode: Callable[[bytes], Any] | None = None) -> None:
        """Send hand-made bytes; record the outcome (closed/timeout or the decoded answer)."""
        answer = self.conn(conn).send_raw(frame)
        if isinstance(answer, str):
            out = Outcome(answer)
            norm = {"outcome": answer, "body": None}
        else:
            body = decode(answer) if decode else None
            out = Outcome("response", body)
            norm = {"outcome": "response", "body": self._norm(body) if body is not None else None}
        ex = Exchange(self.scenario, label, api_key, version, out, norm)
        self.exchanges.append(ex)

    def _norm(self, body):
        return _replace_prefix(normalize(body, self.ph), self.prefix)

    def close(self) -> None:
        for c in self.conns.values():
            c.close()


def _replace_prefix(value, prefix):
    if isinstance(value, dict):
        return {(k.replace(prefix, "<p>") if isinstance(k, str) else k): _replace_prefix(v, prefix)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_prefix(v, prefix) for v in value]
    if isinstance(value, str):
        return value.replace(prefix, "<p>")
    return value


@dataclass
class Plan:
    kafka_versions: dict[int, tuple[int, int]]
    mk_versions: dict[int, tuple[int, int]]


# --- comparison ------------------------------------------------------------------------------

def diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Differences between Kafka's (a) and minikafka's (b) normalised answer."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            out += diff(a.get(k, MISSING), b.get(k, MISSING), f"{path}/{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        if len(a) != len(b):
            out.append((f"{path}/<len>", len(a), len(b)))
        for i in range(min(len(a), len(b))):
            out += diff(a[i], b[i], f"{path}/{i}")
        return out
    if a != b or type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return [(path, a, b)]
    return []


# --- allowed differences -------------------------------------------------------------------

@dataclass
class Rule:
    id: str
    reason: str
    section: str
    path: str
    api: str | None = None
    versions: tuple[int, int] | None = None
    scenario: str | None = None
    label: str | list | None = None  # a glob, or a list of globs
    kafka: Any = None
    minikafka: Any = None
    has_kafka: bool = False
    has_minikafka: bool = False
    used: int = 0

    def matches(self, ex: Exchange, path: str, kv: Any, mv: Any) -> bool:
        if self.api is not None and self.api not in (api_name(ex.api_key), str(ex.api_key)):
            return False
        if self.versions is not None and not self.versions[0] <= ex.version <= self.versions[1]:
            return False
        if self.scenario is not None and not fnmatch.fnmatchcase(ex.scenario, self.scenario):
            return False
        if self.label is not None and not any(fnmatch.fnmatchcase(ex.label, lab) for lab in
                                              (self.label if isinstance(self.label, list) else [self.label])):
            return False
        if not fnmatch.fnmatchcase(path, self.path):
            return False
        if self.has_kafka and not _value_matches(self.kafka, kv):
            return False
        if self.has_minikafka and not _value_matches(self.minikafka, mv):
            return False
        return True


def _value_matches(pattern: Any, value: Any) -> bool:
    if isinstance(pattern, str) and isinstance(value, str):
        return fnmatch.fnmatchcase(value, pattern)
    if isinstance(pattern, list) and not isinstance(value, list):
        return any(_value_matches(p, value) for p in pattern)
    return pattern == value or (pattern == "*")


def load_rules(path: Path = ALLOWED_PATH) -> list[Rule]:
    data = tomllib.loads(path.read_text())
    rules = []
    for section, entries in data.items():
        for i, entry in enumerate(entries):
            versions = entry.get("versions")
            if isinstance(versions, str):
                lo, _, hi = versions.partition("-")
                versions = (int(lo), int(hi or lo))
            if not entry.get("reason"):
                raise ValueError(f"allowed.toml [{section}] entry {i}: a reason is required")
            rules.append(Rule(id=entry.get("id", f"{section}#{i}"), reason=entry["reason"], section=section,
                              path=entry.get("path", "*"), api=entry.get("api"), versions=versions,
                              scenario=entry.get("scenario"), label=entry.get("label"),
                              kafka=entry.get("kafka"), minikafka=entry.get("minikafka"),
                              has_kafka="kafka" in entry, has_minikafka="minikafka" in entry))
    return rules


@dataclass
class Verdict:
    scenario: str
    label: str
    api_key: int
    version: int
    verdict: str  # equal | allowed | unexplained
    diffs: list = field(default_factory=list)  # (path, kafka, minikafka, rule or None)
    kafka: Any = None  # both normalised answers, for --dump
    minikafka: Any = None


def classify(k: Exchange | None, m: Exchange | None, rules: list[Rule]) -> Verdict:
    ref = k or m
    if k is None or m is None:
        return Verdict(ref.scenario, ref.label, ref.api_key, ref.version, "unexplained",
                       [("<exchange>", "present" if k else MISSING, "present" if m else MISSING, None)])
    if (k.api_key, k.version, k.label) != (m.api_key, m.version, m.label):
        return Verdict(k.scenario, k.label, k.api_key, k.version, "unexplained",
                       [("<sequence>", f"{k.api_key}v{k.version} {k.label}", f"{m.api_key}v{m.version} {m.label}", None)])
    diffs = diff(k.normalized, m.normalized)
    if not diffs:
        return Verdict(k.scenario, k.label, k.api_key, k.version, "equal", [], k.normalized, m.normalized)
    out, explained = [], True
    for path, kv, mv in diffs:
        rule = next((r for r in rules if r.matches(k, path, kv, mv)), None)
        if rule is None:
            explained = False
        else:
            rule.used += 1
        out.append((path, kv, mv, rule))
    return Verdict(k.scenario, k.label, k.api_key, k.version, "allowed" if explained else "unexplained", out,
                   k.normalized, m.normalized)


# --- running ---------------------------------------------------------------------------------

@dataclass
class Result:
    verdicts: list[Verdict]
    errors: list[str]
    rules: list[Rule]
    seconds: float

    def counts(self) -> tuple[int, int, int, int]:
        n = len(self.verdicts)
        e = sum(v.verdict == "equal" for v in self.verdicts)
        a = sum(v.verdict == "allowed" for v in self.verdicts)
        return n, e, a, n - e - a

    def summary(self) -> str:
        n, e, a, u = self.counts()
        u += len(self.errors)
        return f"conformance: {n} exchanges compared, {e} equal, {a} allowed, {u} unexplained"


def _advertised(broker: Broker) -> dict[int, tuple[int, int]]:
    c = Conn(broker.host, broker.port)
    try:
        out = c.call(18, 3, {"client_software_name": "conformance", "client_software_version": "1"})
    finally:
        c.close()
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in out["api_keys"]}


def _run_one(broker: Broker, name: str, fn: Callable, run_id: str, plan: Plan) -> tuple[list[Exchange], str | None]:
    ctx = Ctx(broker, name, run_id, plan)
    try:
        fn(ctx)
        return ctx.exchanges, None
    except Exception:
        return ctx.exchanges, f"{name} on {broker.side}: {traceback.format_exc(limit=6)}"
    finally:
        ctx.close()


def run(kafka: Broker, minikafka: Broker, *, only: str | None = None, workers: int = 6,
        rules: list[Rule] | None = None, acl: tuple[Broker, Broker] | None = None) -> Result:
    """Run every scenario (matching ``only``); ``acl`` is the pair with an authorizer for the
    scenarios of profile "acl" (they are reported as errors without it)."""
    from . import corpus  # noqa: F401  (registers the scenarios)

    began = time.monotonic()
    rules = load_rules() if rules is None else rules
    pairs = {"default": (kafka, minikafka)}
    if acl is not None:
        pairs["acl"] = acl
    plans = {}
    for profile, (k, m) in pairs.items():
        plans[profile] = Plan(kafka_versions=_advertised(k), mk_versions=_advertised(m))
        k.versions, m.versions = plans[profile].kafka_versions, plans[profile].mk_versions
    run_id = format(int(time.time() * 1000) % 0xFFFFFF, "x")
    names = [n for n in SCENARIOS if only is None or fnmatch.fnmatchcase(n, only)]
    verdicts: list[Verdict] = []
    errors: list[str] = []
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = []
        for name in names:
            fn = SCENARIOS[name]
            profile = PROFILES.get(name, "default")
            if profile not in pairs:
                errors.append(f"{name}: no brokers for profile {profile!r}")
                continue
            k, m = pairs[profile]
            plan = plans[profile]
            futures.append((name, pool.submit(_run_one, k, name, fn, run_id, plan),
                            pool.submit(_run_one, m, name, fn, run_id, plan)))
        for name, fk, fm in futures:
            (kx, kerr), (mx, merr) = fk.result(), fm.result()
            with lock:
                for err in (kerr, merr):
                    if err:
                        errors.append(err)
                for i in range(max(len(kx), len(mx))):
                    verdicts.append(classify(kx[i] if i < len(kx) else None,
                                             mx[i] if i < len(mx) else None, rules))
    return Result(verdicts, errors, rules, time.monotonic() - began)


# --- report ----------------------------------------------------------------------------------

def _short(v: Any, limit: int = 160) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "…"


def write_report(result: Result, out_path: Path, *, kafka_version: str | None = None) -> None:
    n, e, a, u = result.counts()
    lines = ["# Conformance report: Apache Kafka vs minikafka", "",
             f"`{result.summary()}` ({result.seconds:.1f} s"
             + (f", Apache Kafka {kafka_version}" if kafka_version else "") + ")", "",
             "Normalisation rules: tests/conformance/normalize.py; allowed differences: "
             "tests/conformance/allowed.toml.", "", "## Exchanges per API", "",
             "| API | key | versions | exchanges | equal | allowed | unexplained |", "|---|---:|---|---:|---:|---:|---:|"]
    per: dict[int, list[Verdict]] = {}
    for v in result.verdicts:
        per.setdefault(v.api_key, []).append(v)
    for key in sorted(per):
        vs = per[key]
        vers = sorted({v.version for v in vs})
        lines.append(f"| {api_name(key)} | {key} | {vers[0]}–{vers[-1]} | {len(vs)} | "
                     f"{sum(v.verdict == 'equal' for v in vs)} | {sum(v.verdict == 'allowed' for v in vs)} | "
                     f"{sum(v.verdict == 'unexplained' for v in vs)} |")
    if result.errors:
        lines += ["", "## Scenario errors (counted as unexplained)", ""]
        lines += ["```\n" + err.strip() + "\n```" for err in result.errors]
    lines += ["", "## Differences", "", "| API | v | scenario | exchange | verdict | path | Kafka | minikafka | rule |",
              "|---|---:|---|---|---|---|---|---|---|"]
    order = {"unexplained": 0, "allowed": 1, "equal": 2}
    for v in sorted(result.verdicts, key=lambda v: (order[v.verdict], v.api_key, v.version, v.scenario)):
        if v.verdict == "equal":
            continue
        for path, kv, mv, rule in v.diffs:
            cell = lambda x: _short(x).replace("|", "\\|")  # noqa: E731
            lines.append(f"| {api_name(v.api_key)} | {v.version} | {v.scenario} | {v.label} | {v.verdict} | "
                         f"`{path}` | {cell(kv)} | {cell(mv)} | {rule.id if rule else '**none**'} |")
    lines += ["", "## Allowed differences by rule", "", "| rule | section | differences | reason |", "|---|---|---:|---|"]
    for r in sorted(result.rules, key=lambda r: (r.section, r.id)):
        if r.used:
            lines.append(f"| `{r.id}` | {r.section} | {r.used} | {r.reason.replace('|', '/')} |")
    unused = [r for r in result.rules if not r.used]
    if unused:
        lines += ["", "## Allowed-difference rules that matched nothing in this run", ""]
        lines += [f"- `{r.id}` ({r.section}): {r.reason}" for r in unused]
    lines += ["", "## Equal exchanges", "", "| API | v | scenario | exchange |", "|---|---:|---|---|"]
    for v in result.verdicts:
        if v.verdict == "equal":
            lines.append(f"| {api_name(v.api_key)} | {v.version} | {v.scenario} | {v.label} |")
    out_path.write_text("\n".join(lines) + "\n")
