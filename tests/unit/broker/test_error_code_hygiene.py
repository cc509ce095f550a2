"""Error codes come from ``protocol.errors.ErrorCode``, never from a module's own integers.

A handler that writes ``UNKNOWN_TOPIC_OR_PARTITION = 3`` keeps a second copy of Kafka's table, which
can drift (a wrong number is a wrong answer on the wire) and logs as a bare number.  This walks the
syntax of every module under broker/ and refuses:

* a module- or class-level name bound to an integer literal when the name is an ``ErrorCode`` member
  (``NONE = 0``, ``A, B = 42, 31``);
* an integer literal where an error code goes: ``"error_code": 0`` in a dict, ``error_code=0`` as a
  keyword, ``x["error_code"] == 0`` or ``r.error_code != 3`` in a comparison.

``ErrorCode.NONE`` is 0, so "any error" can still be written ``if response.get("error_code"):``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from minikafka.protocol.errors import ErrorCode

BROKER = Path(__file__).resolve().parents[3] / "broker"

# Not checked.  The schema registry's ``error_code`` is Confluent's REST code (40401, 42201, ...),
# not a Kafka error code.
SKIP = (
    "schema_registry/",
)

NAMES = frozenset(ErrorCode.__members__)


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _is_error_code(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "error_code"
    if isinstance(node, ast.Attribute):
        return node.attr == "error_code"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "error_code"
    return False


def _constants(body: list[ast.stmt]):
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    yield stmt.lineno, target.id, stmt.value
                elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                    for t, v in zip(target.elts, stmt.value.elts):
                        if isinstance(t, ast.Name):
                            yield stmt.lineno, t.id, v
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            yield stmt.lineno, stmt.target.id, stmt.value


def offences(source: str) -> list[str]:
    """What the rules above refuse in ``source``, one "line: what" each."""
    tree = ast.parse(source)
    found = []
    bodies = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in bodies:
        for line, name, value in _constants(body):
            if name in NAMES and _int(value) is not None:
                found.append(f"{line}: {name} = {_int(value)} (use ErrorCode.{name})")
    for node in ast.walk(tree):
        literals = []
        if isinstance(node, ast.Dict):
            literals = [v for k, v in zip(node.keys, node.values)
                        if isinstance(k, ast.Constant) and k.value == "error_code"]
        elif isinstance(node, ast.keyword) and node.arg == "error_code":
            literals = [node.value]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_error_code(s) for s in sides):
                literals = sides
        for literal in literals:
            value = _int(literal)
            if value is not None:
                found.append(f"{literal.lineno}: error code {value} as a bare int "
                             f"(use ErrorCode.{ErrorCode(value).name})")
    return found


def test_broker_modules_take_error_codes_from_the_table():
    checked = 0
    problems = []
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(BROKER).as_posix()
        if any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in SKIP):
            continue
        checked += 1
        problems += [f"broker/{rel}:{p}" for p in offences(path.read_text())]
    assert checked > 50  # the walk found the package
    assert problems == []


def test_the_check_refuses_each_kind_of_integer_error_code():
    source = '''
NONE = 0
A, UNKNOWN_TOPIC_OR_PARTITION = 1, 3
LATEST = -1
class Codes:
    INVALID_REQUEST = 42
def handle(r):
    if r["error_code"] == 0 or r.error_code != 3 or 35 == error_code:
        return {"error_code": 6}
    return make(error_code=-1)
'''
    found = offences(source)
    assert sorted(int(f.split(":")[0]) for f in found) == [2, 3, 6, 8, 8, 8, 9, 10]
    assert not any("LATEST" in f for f in found)  # -1 there is an offset, not an error code
    assert any("ErrorCode.UNKNOWN_TOPIC_OR_PARTITION" in f for f in found)
    assert any("ErrorCode.UNKNOWN_SERVER_ERROR" in f for f in found)


def test_error_codes_written_as_members_pass():
    source = '''
from minikafka.protocol.errors import ErrorCode
LATEST = -1
def handle(r):
    if r["error_code"] == ErrorCode.NONE and r.get("error_code"):
        return {"error_code": ErrorCode.NOT_COORDINATOR, "throttle_time_ms": 0}
'''
    assert offences(source) == []
