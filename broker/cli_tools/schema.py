"""``minikafka schema list|get|register|check|delete|diff``: a client of any Confluent-compatible Schema
Registry (minikafka's own, ``schema.registry.listeners``, or Confluent's), over its REST API.

``--url`` (env ``MINIKAFKA_SCHEMA_REGISTRY_URL``, default http://127.0.0.1:8081), ``--user NAME:PASSWORD``
for basic authentication, ``--ca FILE`` to trust a registry's TLS certificate.  The schema type of
a file follows its extension (``.avsc`` AVRO, ``.json`` JSON, ``.proto`` PROTOBUF) unless ``--type``
says otherwise.  Exit codes as the other client commands: 1 when the registry refuses (its
``error_code`` and message on stderr), or when ``check`` finds the schema incompatible; 3 when the
registry cannot be reached.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

from .common import UNREACHABLE, CliError, emit, runner, table

DEFAULT_URL = "http://127.0.0.1:8081"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TYPES_BY_EXTENSION = {".avsc": "AVRO", ".avro": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}


def add_parser(sub) -> None:
    schema = sub.add_parser("schema", help="list, get, register, check, delete schemas in a schema registry")
    verbs = schema.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("list", help="subjects (with --versions: their versions and ids)")
    p.add_argument("--prefix", default="", help="only subjects starting with this")
    p.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    p.add_argument("--versions", action="store_true", help="one line per version: subject, version, id, type")
    _common(p, run=list_subjects)

    p = verbs.add_parser("get", help="a subject's schema (latest or --version), or a schema by --id")
    p.add_argument("subject", nargs="?", metavar="SUBJECT")
    p.add_argument("-v", "--version", default="latest", help="version number or latest (default)")
    p.add_argument("--id", type=int, default=None, help="a schema id instead of a subject")
    _common(p, run=get)

    p = verbs.add_parser("register", help="register the schema in FILE under SUBJECT")
    p.add_argument("subject", metavar="SUBJECT")
    p.add_argument("file", metavar="FILE")
    _schema_args(p)
    p.add_argument("--normalize", action="store_true", help="register the normal form")
    _common(p, run=register)

    p = verbs.add_parser("check", help="is the schema in FILE compatible with SUBJECT (exit 1 when not)")
    p.add_argument("subject", metavar="SUBJECT")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-v", "--version", default=None,
                   help="check against this version only (default: as the subject's compatibility level says)")
    _schema_args(p)
    _common(p, run=check)

    p = verbs.add_parser("delete", help="delete a subject, or one --version of it (soft unless --permanent)")
    p.add_argument("subject", metavar="SUBJECT")
    p.add_argument("-v", "--version", default=None, help="only this version (number or latest)")
    p.add_argument("--permanent", action="store_true", help="hard delete (after a soft delete)")
    _common(p, run=delete)

    p = verbs.add_parser("diff", help="the difference between two versions of a subject")
    p.add_argument("subject", metavar="SUBJECT")
    p.add_argument("old", metavar="OLD_VERSION")
    p.add_argument("new", metavar="NEW_VERSION", nargs="?", default="latest")
    _common(p, run=diff)


def _common(p, run) -> None:
    p.add_argument("--url", default=os.environ.get("MINIKAFKA_SCHEMA_REGISTRY_URL", DEFAULT_URL),
                   help=f"the registry (env MINIKAFKA_SCHEMA_REGISTRY_URL; default {DEFAULT_URL})")
    p.add_argument("--user", default=os.environ.get("MINIKAFKA_SCHEMA_REGISTRY_USER"), metavar="NAME:PASSWORD",
                   help="basic authentication (env MINIKAFKA_SCHEMA_REGISTRY_USER)")
    p.add_argument("--ca", default=None, metavar="FILE", help="PEM CA certificates to trust for https")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the registry (default 10)")
    p.add_argument("--json", action="store_true", help="print the registry's JSON answers")
    p.set_defaults(run=runner(run))


def _schema_args(p) -> None:
    p.add_argument("-t", "--type", choices=("AVRO", "JSON", "PROTOBUF"), default=None,
                   help="schema type (default: from the file's extension, else AVRO)")
    p.add_argument("-r", "--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION",
                   help="a reference to another subject's schema (repeatable)")


def request(args: argparse.Namespace, method: str, path: str, body=None, query: dict | None = None):
    url = args.url.rstrip("/") + path
    if query:
        url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Accept": CONTENT_TYPE,
                                                                          "Content-Type": CONTENT_TYPE})
    if args.user:
        req.add_header("Authorization", "Basic " + base64.b64encode(args.user.encode()).decode())
    context = ssl.create_default_context(cafile=args.ca) if args.ca else None
    try:
        with urllib.request.urlopen(req, timeout=args.timeout, context=context) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())
            message = f"{error.get('message')} (error_code {error.get('error_code')})"
        except ValueError:
            message = f"HTTP {exc.code}"
        raise CliError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(f"cannot reach the schema registry at {args.url}: {getattr(exc, 'reason', exc)}",
                       UNREACHABLE) from None


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(args: argparse.Namespace) -> dict:
    try:
        with open(args.file, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror}", 2) from None
    kind = args.type or TYPES_BY_EXTENSION.get(os.path.splitext(args.file)[1].lower(), "AVRO")
    body: dict = {"schema": text}
    if kind != "AVRO":
        body["schemaType"] = kind
    refs = []
    for item in args.reference:
        name, sep, rest = item.partition("=")
        subject, sep2, version = rest.rpartition(":")
        if not sep or not sep2 or not version.lstrip("-").isdigit():
            raise CliError(f"--reference expects NAME=SUBJECT:VERSION, got {item!r}", 2)
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _pretty(schema: str) -> str:
    try:
        return json.dumps(json.loads(schema), indent=2, ensure_ascii=False)
    except ValueError:
        return schema


def list_subjects(args) -> int:
    subjects = request(args, "GET", "/subjects", query={"subjectPrefix": args.prefix or None,
                                                       "deleted": "true" if args.deleted else None})
    if not args.versions:
        emit(args, subjects, lambda: print("\n".join(subjects)) if subjects else None)
        return 0
    rows = []
    for subject in subjects:
        for version in request(args, "GET", f"/subjects/{_quote(subject)}/versions",
                               query={"deleted": "true" if args.deleted else None}):
            v = request(args, "GET", f"/subjects/{_quote(subject)}/versions/{version}",
                        query={"deleted": "true" if args.deleted else None})
            rows.append(v)
    emit(args, rows, lambda: table([[v["subject"], v["version"], v["id"], v.get("schemaType", "AVRO")]
                                    for v in rows], ["SUBJECT", "VERSION", "ID", "TYPE"]))
    return 0


def get(args) -> int:
    if args.id is not None:
        answer = request(args, "GET", f"/schemas/ids/{args.id}")
    elif args.subject:
        answer = request(args, "GET", f"/subjects/{_quote(args.subject)}/versions/{args.version}")
    else:
        raise CliError("give a SUBJECT or --id", 2)
    emit(args, answer, lambda: print(_pretty(answer["schema"])))
    return 0


def register(args) -> int:
    answer = request(args, "POST", f"/subjects/{_quote(args.subject)}/versions", _schema_body(args),
                     query={"normalize": "true" if args.normalize else None})
    emit(args, answer, lambda: print(f"registered {args.subject} version {answer.get('version')} "
                                     f"id {answer['id']}"))
    return 0


def check(args) -> int:
    path = f"/compatibility/subjects/{_quote(args.subject)}/versions"
    if args.version is not None:
        path += f"/{args.version}"
    answer = request(args, "POST", path, _schema_body(args), query={"verbose": "true"})

    def human():
        print("compatible" if answer["is_compatible"] else "incompatible")
        for message in answer.get("messages") or []:
            print(f"  {message}")

    emit(args, answer, human)
    return 0 if answer["is_compatible"] else 1


def delete(args) -> int:
    path = f"/subjects/{_quote(args.subject)}"
    if args.version is not None:
        path += f"/versions/{args.version}"
    answer = request(args, "DELETE", path, query={"permanent": "true" if args.permanent else None})
    kind = "permanently deleted" if args.permanent else "deleted"
    versions = answer if isinstance(answer, list) else [answer]
    emit(args, answer, lambda: print(f"{kind} {args.subject} version(s) {', '.join(map(str, versions))}"))
    return 0


def diff(args) -> int:
    import difflib

    subject = _quote(args.subject)
    old = request(args, "GET", f"/subjects/{subject}/versions/{args.old}", query={"deleted": "true"})
    new = request(args, "GET", f"/subjects/{subject}/versions/{args.new}", query={"deleted": "true"})
    lines = list(difflib.unified_diff(_pretty(old["schema"]).splitlines(), _pretty(new["schema"]).splitlines(),
                                      f"{args.subject} v{old['version']}", f"{args.subject} v{new['version']}",
                                      lineterm=""))
    emit(args, {"old": old, "new": new, "diff": lines},
         lambda: sys.stdout.write("\n".join(lines) + "\n" if lines else "no difference\n"))
    return 0
