"""Spec-driven Kafka message codec: request/response bodies and headers, every served version.

For each (api_key, version, request|response) we generate one flat Python function per direction
from the JSON spec (``protocol.specs``) the first time it is needed and ``exec`` it.  Nested
structs and arrays are inlined into that one function, runs of fixed-size fields become a
single ``struct.Struct`` call, so a decode or encode costs one Python call plus a loop per array.

Conventions (shared with every handler):

* A body is a plain dict keyed by the snake_case spec names; nested structs are dicts, arrays
  lists.  Decoding yields exactly the fields of that version (absent tagged fields take their
  default).  Encoding ignores fields the version lacks and uses the spec default for missing
  keys; ``None`` for a non-nullable string, bytes, array or struct also means "the default".
* ``records`` decode to a memoryview into the frame (zero copy) or None.  On encode they may be
  bytes, bytearray, memoryview, None or a list/tuple of buffers; every non-empty buffer becomes
  its own chunk of the output list, so record bytes are never copied.  A missing records value
  encodes as empty, never as null: librdkafka rejects a null Fetch ``records`` (size -1).
* Decoders raise only ``ProtocolError``: truncated input, negative lengths where null is not
  allowed, counts larger than the bytes left (checked before anything is allocated), invalid
  UTF-8.  For a nullable field any negative length reads as null, as in Kafka's generated
  readers.  Bytes after the end of a request body are ignored: Kafka's request parser also stops
  after the last field it knows and does not look at what is left in the buffer.
* Tagged fields are written in ascending tag order and only when they differ from their default
  (as Kafka does); unknown tags are skipped on decode.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Callable, NamedTuple

from . import specs
from .errors import ProtocolError, UnsupportedVersionError
from .primitives import read_uvarint, write_uvarint
from .specs import Field, in_range

__all__ = [
    "Request",
    "decode_request",
    "encode_request",
    "decode_response",
    "encode_response",
    "request_header_version",
    "response_header_version",
    "is_flexible",
    "body_decoder",
    "body_encoder",
    "default_body",
    "warm_up",
    "write_string",
    "write_compact_string",
    "write_compact_nullable_string",
    "uvarint_bytes",
    "byte_length",
    "byte_view",
]

ZERO_UUID = uuid.UUID(int=0)

_FIXED = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "bool": "?",
    "float64": "d",
    "uuid": "16s",
}
_FIXED_SIZE = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "bool": 1, "float64": 8}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I8 = struct.Struct(">b")
_HDR = struct.Struct(">hhi")
_SIZE_CID = struct.Struct(">ii")

# Errors a generated decoder can hit on bad input; all become ProtocolError at the boundary.
_DECODE_ERRORS = (struct.error, ValueError, IndexError, OverflowError, TypeError)


class Request(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict


# --------------------------------------------------------------------------------------------
# Runtime helpers called by generated code.  Each reads at ``pos`` and returns (value, new pos).


def _trunc():
    return ProtocolError("truncated message")


def _uv(buf, pos):
    """Unsigned varint, unrolled up to three bytes (lengths below 2 MiB); IndexError on
    truncation becomes ProtocolError at the decode boundary."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    c = buf[pos + 1]
    if c < 0x80:
        return (b & 0x7F) | (c << 7), pos + 2
    d = buf[pos + 2]
    if d < 0x80:
        return (b & 0x7F) | ((c & 0x7F) << 7) | (d << 14), pos + 3
    return read_uvarint(buf, pos)


def _rs(buf, pos, n):
    (ln,) = _I16.unpack_from(buf, pos)
    pos += 2
    if ln < 0:
        raise ProtocolError("null string in a non-nullable field")
    end = pos + ln
    if end > n:
        raise _trunc()
    return str(buf[pos:end], "utf-8"), end


def _rns(buf, pos, n):
    (ln,) = _I16.unpack_from(buf, pos)
    pos += 2
    if ln < 0:  # Kafka reads any negative length as null
        return None, pos
    end = pos + ln
    if end > n:
        raise _trunc()
    return str(buf[pos:end], "utf-8"), end


def _rcs(buf, pos, n):
    ln = buf[pos]
    if ln < 128:
        pos += 1
    else:
        ln, pos = _uv(buf, pos)
    if ln == 0:
        raise ProtocolError("null string in a non-nullable field")
    end = pos + ln - 1
    if end > n:
        raise _trunc()
    return str(buf[pos:end], "utf-8"), end


def _rncs(buf, pos, n):
    ln = buf[pos]
    if ln < 128:
        pos += 1
    else:
        ln, pos = _uv(buf, pos)
    if ln == 0:
        return None, pos
    end = pos + ln - 1
    if end > n:
        raise _trunc()
    return str(buf[pos:end], "utf-8"), end


def _rb(buf, pos, n):
    (ln,) = _I32.unpack_from(buf, pos)
    pos += 4
    if ln < 0:
        raise ProtocolError("null bytes in a non-nullable field")
    end = pos + ln
    if end > n:
        raise _trunc()
    return bytes(buf[pos:end]), end


def _rnb(buf, pos, n):
    (ln,) = _I32.unpack_from(buf, pos)
    pos += 4
    if ln < 0:  # Kafka reads any negative length as null
        return None, pos
    end = pos + ln
    if end > n:
        raise _trunc()
    return bytes(buf[pos:end]), end


def _rcb(buf, pos, n):
    ln, pos = _uv(buf, pos)
    if ln == 0:
        raise ProtocolError("null bytes in a non-nullable field")
    end = pos + ln - 1
    if end > n:
        raise _trunc()
    return bytes(buf[pos:end]), end


def _rncb(buf, pos, n):
    ln, pos = _uv(buf, pos)
    if ln == 0:
        return None, pos
    end = pos + ln - 1
    if end > n:
        raise _trunc()
    return bytes(buf[pos:end]), end


def _rr(mv, pos, n, nullable):
    (ln,) = _I32.unpack_from(mv, pos)
    pos += 4
    if ln < 0:
        if nullable:  # Kafka reads any negative length as null
            return None, pos
        raise ProtocolError("negative records length")
    end = pos + ln
    if end > n:
        raise _trunc()
    return mv[pos:end], end


def _rcr(mv, pos, n, nullable):
    ln, pos = _uv(mv, pos)
    if ln == 0:
        if nullable:
            return None, pos
        raise ProtocolError("null records in a non-nullable field")
    end = pos + ln - 1
    if end > n:
        raise _trunc()
    return mv[pos:end], end


def _mkuuid(b):
    return uuid.UUID(bytes=bytes(b))


def _unpack_array(ch: str, size: int, buf, pos: int, count: int):
    end = pos + size * count
    if end > len(buf):
        raise _trunc()
    return list(struct.unpack_from(">%d%s" % (count, ch), buf, pos)), end


# Encoding helpers: append to a bytearray.


def _uvb(n: int) -> bytes:
    """Unsigned varint, unrolled for the sizes records lengths take (< 2 MiB)."""
    if n < 0x80:
        return _SMALL_UV[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, (n >> 7) & 0x7F | 0x80, n >> 14))
    return write_uvarint(n)


_SMALL_UV = [bytes((i,)) for i in range(128)]

_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def _pack_array(ch: str, values) -> bytes:
    n = len(values)
    s = _ARRAY_STRUCTS.get((ch, n))
    if s is None:
        s = struct.Struct(">%d%s" % (n, ch))
        if n <= 64:
            _ARRAY_STRUCTS[(ch, n)] = s
    return s.pack(*values)


def _ws(out, s):
    if s is None:
        s = ""
    b = s.encode("utf-8")
    out += _I16.pack(len(b))
    out += b


def _wns(out, s):
    if s is None:
        out += b"\xff\xff"
        return
    b = s.encode("utf-8")
    out += _I16.pack(len(b))
    out += b


def _wcs(out, s):
    if s is None:
        s = ""
    b = s.encode("utf-8")
    ln = len(b) + 1
    if ln < 128:
        out.append(ln)
    else:
        out += _uvb(ln)
    out += b


def _wncs(out, s):
    if s is None:
        out.append(0)
        return
    b = s.encode("utf-8")
    ln = len(b) + 1
    if ln < 128:
        out.append(ln)
    else:
        out += _uvb(ln)
    out += b


def _wb(out, b):
    if b is None:
        b = b""
    out += _I32.pack(_blen(b))
    out += b


def _wnb(out, b):
    if b is None:
        out += b"\xff\xff\xff\xff"
        return
    out += _I32.pack(_blen(b))
    out += b


def _wcb(out, b):
    if b is None:
        b = b""
    out += _uvb(_blen(b) + 1)
    out += b


def _wncb(out, b):
    if b is None:
        out.append(0)
        return
    out += _uvb(_blen(b) + 1)
    out += b


def _blen(b) -> int:
    return b.nbytes if type(b) is memoryview else len(b)


def _as_bytes_view(b):
    # A memoryview of another item size would make len() lie about the byte count.
    if type(b) is memoryview and (b.itemsize != 1 or b.ndim != 1):
        return b.cast("B")
    return b


def _wr(out, chunks, recs, compact, nullable):
    """Write a records field; the record buffers become separate chunks, never copied.

    Returns the bytearray the caller continues to append to (a fresh one after a chunk)."""
    if recs is None:
        if nullable:
            if compact:
                out.append(0)
            else:
                out += b"\xff\xff\xff\xff"
            return out
        recs = b""
    if type(recs) is list or type(recs) is tuple:
        parts = [_as_bytes_view(p) for p in recs if _blen(p)]
    else:
        recs = _as_bytes_view(recs)
        parts = [recs] if _blen(recs) else []
    total = 0
    for p in parts:
        total += len(p)
    if compact:
        out += _uvb(total + 1)
    else:
        out += _I32.pack(total)
    if not parts:
        return out
    chunks.append(out)
    chunks.extend(parts)
    return bytearray()


def _wuuid(u) -> bytes:
    if u is None:
        return b"\x00" * 16
    return u.bytes


def _tag(tag: int, body) -> bytes:
    return write_uvarint(tag) + write_uvarint(len(body)) + bytes(body)


# The writer seam: the helpers that hand-tuned encoders (protocol/fast.py) build on, by public
# names, so they need nothing private of this module.  Each appends to a bytearray ``out``.
write_string = _ws  # int16 length + UTF-8 (None writes "")
write_compact_string = _wcs  # uvarint length + 1, then UTF-8 (None writes "")
write_compact_nullable_string = _wncs  # as above; None writes the null marker 0
uvarint_bytes = _uvb  # an unsigned varint as bytes
byte_length = _blen  # bytes in a buffer (a memoryview's nbytes)
byte_view = _as_bytes_view  # a buffer as one-byte items, so len() counts bytes


# --------------------------------------------------------------------------------------------
# Defaults


def _scalar_default(f: Field, version: int):
    d = f.default
    t = f.elem
    if t in ("int8", "int16", "uint16", "int32", "int64"):
        if isinstance(d, str):
            return int(d, 0) if d else 0
        return int(d or 0)
    if t == "bool":
        return d is True or d == "true"
    if t == "float64":
        return float(d) if d not in (None, "") else 0.0
    if t == "string":
        if d == "null":
            return None
        return d if d is not None else ""
    if t == "bytes":
        return None if d == "null" else b""
    if t == "records":
        return None if d == "null" else b""
    if t == "uuid":
        return ZERO_UUID
    raise ValueError(f"no default for type {t}")


def default_value(f: Field, version: int):
    """The value Kafka gives field ``f`` when it is absent (fresh containers each call)."""
    if f.is_array:
        return None if f.default == "null" else []
    if f.is_struct:
        if f.default == "null" and in_range(f.nullable, version):
            return None
        return {s.key: default_value(s, version) for s in f.fields if in_range(s.versions, version)}
    return _scalar_default(f, version)


# --------------------------------------------------------------------------------------------
# Code generation


class _Gen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_PE": ProtocolError,
            "_uv": _uv,
            "_rs": _rs,
            "_rns": _rns,
            "_rcs": _rcs,
            "_rncs": _rncs,
            "_rb": _rb,
            "_rnb": _rnb,
            "_rcb": _rcb,
            "_rncb": _rncb,
            "_rr": _rr,
            "_rcr": _rcr,
            "_mkuuid": _mkuuid,
            "_unpack_array": _unpack_array,
            "_pack_array": _pack_array,
            "_ws": _ws,
            "_wns": _wns,
            "_wcs": _wcs,
            "_wncs": _wncs,
            "_wb": _wb,
            "_wnb": _wnb,
            "_wcb": _wcb,
            "_wncb": _wncb,
            "_wr": _wr,
            "_wuuid": _wuuid,
            "_tag": _tag,
            "_uvb": _uvb,
            "_I32": _I32,
            "_I8": _I8,
            "_deepcopy": _deepcopy,
            "ZERO_UUID": ZERO_UUID,
            "_EMPTY": {},
        }
        self.counter = 0

    def var(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, obj: Any, prefix: str = "_k") -> str:
        name = self.var(prefix)
        self.ns[name] = obj
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def compile(self, fname: str) -> Callable:
        src = "\n".join(self.lines) + "\n"
        code = compile(src, f"<kafka-codec {fname}>", "exec")
        exec(code, self.ns)
        fn = self.ns[fname]
        fn.__source__ = src  # for debugging a generated function
        return fn


def _deepcopy(v):
    if type(v) is dict:
        return {k: _deepcopy(x) for k, x in v.items()}
    if type(v) is list:
        return [_deepcopy(x) for x in v]
    return v


def _field_flexible(f: Field, version: int, flexible: bool) -> bool:
    return flexible if f.flexible is None else in_range(f.flexible, version)


def _split(fields: list[Field], version: int, flexible: bool):
    present = [f for f in fields if in_range(f.versions, version)]
    tagged = [f for f in present if flexible and in_range(f.tagged, version)]
    normal = [f for f in present if not (flexible and in_range(f.tagged, version))]
    tagged.sort(key=lambda f: f.tag)
    return present, normal, tagged


# ---- decode


def _dec_struct(g: _Gen, fields: list[Field], version: int, flexible: bool, ind: int) -> str:
    present, normal, tagged = _split(fields, version, flexible)
    names: dict[str, str] = {}
    run: list[tuple[str, Field, str]] = []

    def flush():
        if not run:
            return
        st = struct.Struct(">" + "".join(ch for ch, _, _ in run))
        sname = g.const(st, "_S")
        targets = ", ".join(v for _, _, v in run)
        g.emit(ind, f"{targets}, = {sname}.unpack_from(buf, pos)")
        g.emit(ind, f"pos += {st.size}")
        for _, f, v in run:
            if f.type == "uuid":
                g.emit(ind, f"{v} = _mkuuid({v})")
        run.clear()

    for f in normal:
        v = g.var()
        names[f.key] = v
        ch = _FIXED.get(f.type)
        if ch is not None:
            run.append((ch, f, v))
            continue
        flush()
        _dec_field(g, f, version, flexible, ind, v)
    flush()
    for f in tagged:
        v = g.var()
        names[f.key] = v
        g.emit(ind, f"{v} = {_default_expr(g, f, version)}")
    if flexible:
        _dec_tags(g, tagged, names, version, flexible, ind)
    d = g.var("d")
    items = ", ".join(f"{f.key!r}: {names[f.key]}" for f in present)
    g.emit(ind, f"{d} = {{{items}}}")
    return d


def _default_expr(g: _Gen, f: Field, version: int) -> str:
    val = default_value(f, version)
    if val is None or isinstance(val, (bool, int, float, str, bytes)):
        return repr(val)
    if isinstance(val, uuid.UUID):
        return "ZERO_UUID" if val == ZERO_UUID else g.const(val)
    # a container: copy so that two decoded messages never share a mutable default
    return f"_deepcopy({g.const(val)})"


def _dec_count(g: _Gen, compact: bool, ind: int, target: str) -> None:
    if compact:
        g.emit(ind, f"{target} = buf[pos] - 1")
        g.emit(ind, f"if {target} < 127:")
        g.emit(ind + 1, "pos += 1")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"{target}, pos = _uv(buf, pos)")
        g.emit(ind + 1, f"{target} -= 1")
    else:
        g.emit(ind, f"{target}, = _I32.unpack_from(buf, pos)")
        g.emit(ind, "pos += 4")


def _dec_field(g: _Gen, f: Field, version: int, flexible: bool, ind: int, target: str) -> None:
    compact = _field_flexible(f, version, flexible)
    nullable = in_range(f.nullable, version)
    t = f.type
    if f.is_array:
        c = g.var("c")
        _dec_count(g, compact, ind, c)
        g.emit(ind, f"if {c} < 0:")
        if nullable:
            g.emit(ind + 1, f"{target} = None")
        else:
            g.emit(ind + 1, "raise _PE('negative array length')")
        g.emit(ind, "else:")
        ind += 1
        # Every element takes at least one byte, so a count above the bytes left is a lie;
        # checking first bounds memory by the frame size.
        g.emit(ind, f"if {c} > n - pos:")
        g.emit(ind + 1, "raise _PE('array count exceeds the message size')")
        elem = f.elem
        if elem in _FIXED_SIZE:
            g.emit(
                ind, f"{target}, pos = _unpack_array({_FIXED[elem]!r}, {_FIXED_SIZE[elem]}, buf, pos, {c})"
            )
            return
        g.emit(ind, f"{target} = []")
        g.emit(ind, f"for _ in range({c}):")
        if f.is_struct:
            d = _dec_struct(g, f.fields, version, flexible, ind + 1)
            g.emit(ind + 1, f"{target}.append({d})")
        else:
            e = g.var("e")
            _dec_scalar(g, elem, compact, False, ind + 1, e)
            g.emit(ind + 1, f"{target}.append({e})")
        return
    if f.is_struct:
        if nullable:
            m = g.var("m")
            g.emit(ind, f"{m}, = _I8.unpack_from(buf, pos)")
            g.emit(ind, "pos += 1")
            g.emit(ind, f"if {m} < 0:")
            g.emit(ind + 1, f"{target} = None")
            g.emit(ind, "else:")
            ind += 1
        d = _dec_struct(g, f.fields, version, flexible, ind)
        g.emit(ind, f"{target} = {d}")
        return
    _dec_scalar(g, t, compact, nullable, ind, target)


def _dec_scalar(g: _Gen, t: str, compact: bool, nullable: bool, ind: int, target: str) -> None:
    if t in _FIXED:
        st = struct.Struct(">" + _FIXED[t])
        g.emit(ind, f"{target}, = {g.const(st, '_S')}.unpack_from(buf, pos)")
        g.emit(ind, f"pos += {st.size}")
        if t == "uuid":
            g.emit(ind, f"{target} = _mkuuid({target})")
        return
    if t == "string" or t == "bytes":
        helper = "_r" + ("n" if nullable else "") + ("c" if compact else "") + ("s" if t == "string" else "b")
        g.emit(ind, f"{target}, pos = {helper}(buf, pos, n)")
        return
    if t == "records":
        helper = "_rcr" if compact else "_rr"
        g.emit(ind, f"{target}, pos = {helper}(mv, pos, n, {nullable})")
        return
    raise ValueError(f"unknown type {t}")


def _dec_tags(g: _Gen, tagged: list[Field], names: dict[str, str], version: int, flexible: bool, ind: int):
    g.emit(ind, "if buf[pos] == 0:  # the common case: no tagged fields (IndexError = truncated)")
    g.emit(ind + 1, "pos += 1")
    g.emit(ind, "else:")
    ind += 1
    nt = g.var("nt")
    g.emit(ind, f"{nt}, pos = _uv(buf, pos)")
    g.emit(ind, f"if {nt} > n - pos:")
    g.emit(ind + 1, "raise _PE('tag count exceeds the message size')")
    g.emit(ind, f"for _ in range({nt}):")
    ind += 1
    tg, sz, te = g.var("tg"), g.var("sz"), g.var("te")
    g.emit(ind, f"{tg}, pos = _uv(buf, pos)")
    g.emit(ind, f"{sz}, pos = _uv(buf, pos)")
    g.emit(ind, f"{te} = pos + {sz}")
    g.emit(ind, f"if {te} > n:")
    g.emit(ind + 1, "raise _PE('truncated tagged field')")
    kw = "if"
    for f in tagged:
        g.emit(ind, f"{kw} {tg} == {f.tag}:")
        _dec_field(g, f, version, flexible, ind + 1, names[f.key])
        g.emit(ind + 1, f"if pos > {te}:")
        g.emit(ind + 2, "raise _PE('tagged field overruns its size')")
        kw = "elif"
    g.emit(ind, f"pos = {te}")


def _gen_decoder(fields: list[Field], version: int, flexible: bool, fname: str) -> Callable:
    g = _Gen()
    g.emit(0, f"def {fname}(buf, mv, pos, n):")
    d = _dec_struct(g, fields, version, flexible, 1)
    g.emit(1, f"return {d}, pos")
    return g.compile(fname)


# ---- encode


def _enc_struct(g: _Gen, fields: list[Field], version: int, flexible: bool, ind: int, src: str, out: str):
    present, normal, tagged = _split(fields, version, flexible)
    run: list[tuple[str, str]] = []

    def flush():
        if not run:
            return
        st = struct.Struct(">" + "".join(ch for ch, _ in run))
        g.emit(ind, f"{out} += {g.const(st, '_S')}.pack({', '.join(e for _, e in run)})")
        run.clear()

    for f in normal:
        ch = _FIXED.get(f.type)
        if ch is not None:
            dflt = default_value(f, version)
            if f.type == "uuid":
                run.append((ch, f"_wuuid({src}.get({f.key!r}))"))
            else:
                run.append((ch, f"{src}.get({f.key!r}, {dflt!r})"))
            continue
        flush()
        x = g.var("x")
        g.emit(ind, f"{x} = {src}.get({f.key!r}, {_missing_expr(g, f, version)})")
        _enc_field(g, f, version, flexible, ind, x, out)
    flush()
    if not flexible:
        return
    if not tagged:
        g.emit(ind, f"{out}.append(0)")
        return
    tl = g.var("tl")
    g.emit(ind, f"{tl} = []")
    for f in tagged:
        x = g.var("x")
        g.emit(ind, f"{x} = {src}.get({f.key!r}, {_missing_expr(g, f, version)})")
        g.emit(ind, f"if {_not_default_cond(g, f, version, x)}:")
        tb = g.var("tb")
        g.emit(ind + 1, f"{tb} = bytearray()")
        _enc_field(g, f, version, flexible, ind + 1, x, tb)
        g.emit(ind + 1, f"{tl}.append(_tag({f.tag}, {tb}))")
    g.emit(ind, f"if {tl}:")
    g.emit(ind + 1, f"{out} += _uvb(len({tl}))")
    g.emit(ind + 1, f"for _t in {tl}:")
    g.emit(ind + 2, f"{out} += _t")
    g.emit(ind, "else:")
    g.emit(ind + 1, f"{out}.append(0)")


def _missing_expr(g: _Gen, f: Field, version: int) -> str:
    """What a missing key means on encode: the spec default, as a constant the encoder only reads.

    ``None`` stays distinct: for a nullable field it is null, for any other it means the default."""
    if f.is_array:
        return "None" if f.default == "null" else "()"
    if f.is_struct:
        return "None" if default_value(f, version) is None else "_EMPTY"
    val = default_value(f, version)
    if f.type == "uuid":
        return "None"
    if val is None or isinstance(val, (bool, int, float, str, bytes)):
        return repr(val)
    return g.const(val)


def _not_default_cond(g: _Gen, f: Field, version: int, x: str) -> str:
    """A test that is true when tagged field value ``x`` must be written (Kafka omits defaults)."""
    if f.is_array:
        return f"{x} is not None" if f.default == "null" else f"{x}"
    if f.is_struct:
        dflt = default_value(f, version)
        if dflt is None:
            return f"{x} is not None"
        return f"{x} is not None and {x} != {{}} and {x} != {g.const(dflt)}"
    dflt = default_value(f, version)
    if f.type == "uuid":
        return f"{x} is not None and {x} != ZERO_UUID"
    if dflt is None:
        return f"{x} is not None"
    return f"{x} is not None and {x} != {dflt!r}"


def _write_count(g: _Gen, compact: bool, ind: int, count_expr: str, out: str) -> None:
    if compact:
        ln = g.var("ln")
        g.emit(ind, f"{ln} = {count_expr} + 1")
        g.emit(ind, f"if {ln} < 128:")
        g.emit(ind + 1, f"{out}.append({ln})")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"{out} += _uvb({ln})")
    else:
        g.emit(ind, f"{out} += _I32.pack({count_expr})")


def _enc_field(g: _Gen, f: Field, version: int, flexible: bool, ind: int, x: str, out: str) -> None:
    """Emit code writing value variable ``x`` (may be None = default) of field ``f``."""
    compact = _field_flexible(f, version, flexible)
    nullable = in_range(f.nullable, version)
    if f.is_array:
        g.emit(ind, f"if {x} is None:")
        if nullable:
            null_mark = b"\x00" if compact else b"\xff\xff\xff\xff"
            g.emit(ind + 1, f"{out} += {null_mark!r}")
            g.emit(ind, "else:")
            ind += 1
        else:
            g.emit(ind + 1, f"{x} = ()")
        _write_count(g, compact, ind, f"len({x})", out)
        elem = f.elem
        if elem in _FIXED_SIZE:
            g.emit(ind, f"if {x}:")
            g.emit(ind + 1, f"{out} += _pack_array({_FIXED[elem]!r}, {x})")
            return
        e = g.var("e")
        g.emit(ind, f"for {e} in {x}:")
        if f.is_struct:
            _enc_struct(g, f.fields, version, flexible, ind + 1, e, out)
        else:
            _enc_scalar(g, elem, compact, False, ind + 1, e, out)
        return
    if f.is_struct:
        if nullable:
            g.emit(ind, f"if {x} is None:")
            g.emit(ind + 1, f"{out}.append(255)")
            g.emit(ind, "else:")
            g.emit(ind + 1, f"{out}.append(1)")
            ind += 1
        else:
            g.emit(ind, f"if {x} is None:")
            g.emit(ind + 1, f"{x} = {{}}")
        _enc_struct(g, f.fields, version, flexible, ind, x, out)
        return
    if f.type in _FIXED:
        g.emit(ind, f"if {x} is None:")
        g.emit(ind + 1, f"{x} = {_default_expr(g, f, version)}")
    _enc_scalar(g, f.type, compact, nullable, ind, x, out, records_nullable=nullable)


def _enc_scalar(g, t, compact, nullable, ind, x, out, records_nullable=False):
    if t in _FIXED:
        if t == "uuid":
            g.emit(ind, f"{out} += _wuuid({x})")
        else:
            st = struct.Struct(">" + _FIXED[t])
            g.emit(ind, f"{out} += {g.const(st, '_S')}.pack({x})")
        return
    if t == "string" or t == "bytes":
        helper = "_w" + ("n" if nullable else "") + ("c" if compact else "") + ("s" if t == "string" else "b")
        g.emit(ind, f"{helper}({out}, {x})")
        return
    if t == "records":
        if out != "out":
            raise ValueError("records inside a tagged field are not supported")
        g.emit(ind, f"{out} = _wr({out}, chunks, {x}, {compact}, {records_nullable})")
        return
    raise ValueError(f"unknown type {t}")


def _gen_encoder(fields: list[Field], version: int, flexible: bool, fname: str) -> Callable:
    g = _Gen()
    g.emit(0, f"def {fname}(v, out, chunks):")
    _enc_struct(g, fields, version, flexible, 1, "v", "out")
    g.emit(1, "return out")
    return g.compile(fname)


# --------------------------------------------------------------------------------------------
# Per (api_key, version, kind) caches

_decoders: dict[tuple[int, int, str], Callable] = {}
_encoders: dict[tuple[int, int, str], Callable] = {}


def _spec(api_key: int, kind: str) -> specs.MessageSpec:
    spec = specs.message(api_key, kind)
    if spec is None:
        raise ProtocolError(f"unknown api key {api_key}")
    return spec


def is_flexible(api_key: int, api_version: int) -> bool:
    return in_range(_spec(api_key, "request").flexible, api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions, else 1.  ApiVersions beyond what we know counts as flexible
    (every version >= 3 is), so a newer client's header is still read correctly."""
    if api_key == 18 and api_version >= 3:
        return 2
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, except ApiVersions, whose response header is always v0 so that
    a client that does not yet know our versions can read it."""
    if api_key == 18:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def body_decoder(api_key: int, api_version: int, kind: str) -> Callable:
    key = (api_key, api_version, kind)
    fn = _decoders.get(key)
    if fn is None:
        spec = _spec(api_key, kind)
        if api_version < 0:
            raise ValueError("negative version")
        fn = _gen_decoder(
            spec.fields, api_version, in_range(spec.flexible, api_version), f"decode_{spec.name}_v{api_version}"
        )
        _decoders[key] = fn
    return fn


def body_encoder(api_key: int, api_version: int, kind: str) -> Callable:
    key = (api_key, api_version, kind)
    fn = _encoders.get(key)
    if fn is None:
        spec = _spec(api_key, kind)
        if api_version < 0:
            raise ValueError("negative version")
        fn = _gen_encoder(
            spec.fields, api_version, in_range(spec.flexible, api_version), f"encode_{spec.name}_v{api_version}"
        )
        _encoders[key] = fn
    return fn


_data_decoders: dict[tuple[str, int], Callable] = {}
_data_encoders: dict[tuple[str, int], Callable] = {}


def _data_spec(name: str, version: int) -> specs.MessageSpec:
    spec = specs.load(name)
    if not in_range(spec.valid, version):
        raise UnsupportedVersionError(f"{name} has no version {version}")
    return spec


def encode_data(name: str, version: int, values: dict) -> bytes:
    """Encode a message that is not a request or response (a ``__consumer_offsets`` record's key or
    value) with the same compiled encoders; the version is the caller's to write, not part of it."""
    fn = _data_encoders.get((name, version))
    if fn is None:
        spec = _data_spec(name, version)
        fn = _data_encoders[(name, version)] = _gen_encoder(
            spec.fields, version, in_range(spec.flexible, version), f"encode_{name}_v{version}")
    return bytes(fn(values, bytearray(), []))


def decode_data(name: str, version: int, buf, pos: int = 0) -> tuple[dict, int]:
    """Decode a data message from ``buf`` at ``pos``; returns the fields and the end position."""
    fn = _data_decoders.get((name, version))
    if fn is None:
        spec = _data_spec(name, version)
        fn = _data_decoders[(name, version)] = _gen_decoder(
            spec.fields, version, in_range(spec.flexible, version), f"decode_{name}_v{version}")
    mv = memoryview(buf)
    return fn(buf, mv, pos, len(buf))


def warm_up(serve: dict[int, tuple[int, int]] | None = None) -> int:
    """Compile every served request decoder and response encoder now (about half a second for
    all of SERVE) instead of on the first request of each kind; returns how many."""
    count = 0
    for api_key, (lo, hi) in (serve or _served()).items():
        for version in range(lo, hi + 1):
            body_decoder(api_key, version, "request")
            body_encoder(api_key, version, "response")
            count += 2
    return count


def default_body(api_key: int, api_version: int, kind: str) -> dict:
    """Every field of that version set to its default: what decoding an all-default message gives."""
    spec = _spec(api_key, kind)
    return {f.key: default_value(f, api_version) for f in spec.fields if in_range(f.versions, api_version)}


def _skip_tags(buf, pos: int, n: int) -> int:
    count, pos = read_uvarint(buf, pos)
    if count > n - pos:
        raise ProtocolError("tag count exceeds the message size")
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > n:
            raise ProtocolError("truncated tagged field")
    return pos


# --------------------------------------------------------------------------------------------
# Public API


def _served():
    from .apis import SERVE  # apis imports nothing from here at module level

    return SERVE


# (api_key, version) -> (body decoder, request header version), filled on first use, only
# for served versions: one dict lookup answers "served?", "which decoder?" and "which header?".
_REQUESTS: dict[tuple[int, int], tuple[Callable, int]] = {}


def _request_entry(api_key: int, api_version: int, correlation_id: int, frame, n: int):
    rng = _served().get(api_key)
    if rng is None or not rng[0] <= api_version <= rng[1]:
        if rng is None and specs.message(api_key, "request") is None:
            raise ProtocolError(f"unknown api key {api_key}")
        err = UnsupportedVersionError(api_key, api_version)
        err.correlation_id = correlation_id
        err.client_id = None
        try:
            err.client_id, _ = _rns(frame, 8, n)
        except _DECODE_ERRORS + (ProtocolError,):
            pass
        raise err
    entry = (body_decoder(api_key, api_version, "request"), request_header_version(api_key, api_version))
    _REQUESTS[(api_key, api_version)] = entry
    return entry


def decode_request(frame) -> Request:
    """Decode one request frame (the bytes after the 4-byte size)."""
    n = len(frame)
    if n < 8:
        raise ProtocolError("request shorter than its header")
    api_key, api_version, correlation_id = _HDR.unpack_from(frame, 0)
    entry = _REQUESTS.get((api_key, api_version))
    if entry is None:
        entry = _request_entry(api_key, api_version, correlation_id, frame, n)
    try:
        client_id, pos = _rns(frame, 8, n)
        if entry[1] == 2:
            if frame[pos] == 0:
                pos += 1
            else:
                pos = _skip_tags(frame, pos, n)
        body, pos = entry[0](frame, memoryview(frame), pos, n)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed request (api {api_key} v{api_version}): {e}") from e
    return Request(api_key, api_version, correlation_id, client_id, body)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict) -> list:
    """Size prefix + response header + body as a list of buffers for ``writelines``.

    The spec-driven encoder of every response: the reference that the hand-tuned encoders of
    protocol.fast must match byte for byte (``fast.encode_response`` uses them where they exist
    and this everywhere else; the broker answers through it)."""
    enc = _encoders.get((api_key, api_version, "response"))
    if enc is None:
        enc = body_encoder(api_key, api_version, "response")
    head = bytearray(_SIZE_CID.pack(0, correlation_id))
    if response_header_version(api_key, api_version) >= 1:
        head.append(0)
    chunks: list = []
    try:
        last = enc(body, head, chunks)
    except (struct.error, TypeError, AttributeError, ValueError, KeyError) as e:
        raise ValueError(f"cannot encode api {api_key} v{api_version} response: {e!r}") from e
    if last or not chunks:
        chunks.append(last)
    total = 0
    for c in chunks:
        total += len(c)
    _I32.pack_into(chunks[0], 0, total - 4)
    return chunks


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: dict) -> bytes:
    """A whole request including its 4-byte size prefix (for tests and tools; records are joined)."""
    enc = body_encoder(api_key, api_version, "request")
    head = bytearray(_SIZE_CID.pack(0, 0))
    head[4:] = _HDR.pack(api_key, api_version, correlation_id)
    _wns(head, client_id)
    if request_header_version(api_key, api_version) >= 2:
        head.append(0)
    chunks: list = []
    last = enc(body, head, chunks)
    chunks.append(last)
    data = bytearray().join(chunks)
    _I32.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, dict]:
    """Decode a response frame (without its size prefix) into (correlation_id, body)."""
    dec = body_decoder(api_key, api_version, "response")
    n = len(frame)
    try:
        (correlation_id,) = _I32.unpack_from(frame, 0)
        pos = 4
        if response_header_version(api_key, api_version) >= 1:
            pos = _skip_tags(frame, pos, n)
        body, pos = dec(frame, memoryview(frame), pos, n)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed response (api {api_key} v{api_version}): {e}") from e
    return correlation_id, body


# The former name of encode_response, from when it also dispatched to protocol.fast.
encode_response_generic = encode_response
