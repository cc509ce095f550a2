"""Hand-tuned encoders for the two responses a broker sends most: Fetch and Metadata.

They produce exactly the bytes of the generic codec (tests/unit/protocol/test_codec_fast.py
compares them on random bodies and on every partition shape) but cut the per-field work:

* Fetch v11-v17: one itemgetter call reads a partition, one struct call writes its fixed fields;
  record buffers are appended as their own chunks (never copied), as in the generic encoder.
  v13+ write the topic id instead of the name; v16+ ``node_endpoints`` (a tagged field set only
  on leader errors) goes to the generic encoder.
* Metadata v9-v13: a partition, its three int32 arrays included, is one ``Struct.pack``: inline
  for the 1-replica (this broker) and 3-replica shapes, otherwise through a packer generated
  per array-length shape (star-arguments cost more than the pack itself on CPython 3.11).

They only handle the common shape: every key present, no tagged field set, arrays shorter than
127.  Anything else (a missing key, a None where a value is expected, a tagged Fetch field such
as CurrentLeader, an explicit null records) raises ``_Fallback`` or a lookup error, and the
generic encoder does the whole message, so the semantics (defaults, errors) are always the
generic codec's.

``encode_response`` here is what the broker answers with: these encoders where they exist,
``codec.encode_response`` everywhere else.  This module builds on the codec's public writer seam
(``write_compact_string``, ``uvarint_bytes``, ...); the codec knows nothing of it.
"""

from __future__ import annotations

import operator
import struct

from . import codec

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SIZE_CID = struct.Struct(">ii")
_SIZE_CID_TAG = struct.Struct(">iiB")
_blen = codec.byte_length
_as_view = codec.byte_view
_wcs = codec.write_compact_string
_wncs = codec.write_compact_nullable_string
_uvb = codec.uvarint_bytes


class _Fallback(Exception):
    pass


def _finish(chunks: list, out: bytearray) -> list:
    if out or not chunks:
        chunks.append(out)
    total = 0
    for c in chunks:
        total += len(c)
    _I32.pack_into(chunks[0], 0, total - 4)
    return chunks


def _records(out: bytearray, chunks: list, recs, compact: bool) -> bytearray:
    """Length + record buffers as separate chunks; returns the bytearray to continue with."""
    if type(recs) is bytes or type(recs) is bytearray:
        size = len(recs)
        parts = (recs,) if size else ()
    elif recs is None:
        raise _Fallback  # an explicit null: rare, let the generic encoder write it
    else:
        if type(recs) is memoryview:
            recs = [recs]
        parts = [_as_view(p) for p in recs if _blen(p)]
        size = 0
        for p in parts:
            size += len(p)
    if compact:
        out += _uvb(size + 1)
    else:
        out += _I32.pack(size)
    if not parts:
        return out
    chunks.append(out)
    chunks.extend(parts)
    return bytearray()


# ---- Fetch ------------------------------------------------------------------------------------

_FETCH_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id (v7+)
_FETCH_PART = struct.Struct(">ihqqq")  # partition_index, error_code, hwm, lso, log_start_offset (v5+)
_ABORTED = struct.Struct(">qq")
# ... then a null aborted_transactions (-1, or 0 as a compact array) and preferred_read_replica
_FETCH_PART_NULL_ABORTED = struct.Struct(">ihqqqii")
_FETCH_PART_NULL_ABORTED_COMPACT = struct.Struct(">ihqqqBi")
_FETCH_PARTITION_FIELDS = operator.itemgetter(
    "partition_index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset",
    "aborted_transactions", "preferred_read_replica", "records",
)


def _fetch(version: int, correlation_id: int, body: dict) -> list:
    flexible = version >= 12
    if flexible:
        out = bytearray(_SIZE_CID_TAG.pack(0, correlation_id, 0))
    else:
        out = bytearray(_SIZE_CID.pack(0, correlation_id))
    chunks: list = []
    fields = _FETCH_PARTITION_FIELDS
    if flexible:
        null_aborted, null_marker = _FETCH_PART_NULL_ABORTED_COMPACT.pack, 0
    else:
        null_aborted, null_marker = _FETCH_PART_NULL_ABORTED.pack, -1
    by_id = version >= 13
    if version >= 16 and body.get("node_endpoints"):
        raise _Fallback
    out += _FETCH_TOP.pack(body["throttle_time_ms"], body["error_code"], body["session_id"])
    topics = body["responses"]
    if flexible:
        n = len(topics) + 1
        if n >= 128:
            raise _Fallback
        out.append(n)
    else:
        out += _I32.pack(len(topics))
    for t in topics:
        if by_id:
            tid = t["topic_id"]
            raw = _UUID_BYTES.get(tid)
            out += raw if raw is not None else _uuid_bytes(tid)
        elif flexible:
            _wcs(out, t["topic"])
        else:
            codec.write_string(out, t["topic"])
        parts = t["partitions"]
        if flexible:
            n = len(parts) + 1
            if n >= 128:
                raise _Fallback
            out.append(n)
        else:
            out += _I32.pack(len(parts))
        for p in parts:
            index, error, hwm, lso, log_start, aborted, preferred, recs = fields(p)
            if aborted is None:
                out += null_aborted(index, error, hwm, lso, log_start, null_marker, preferred)
            else:
                out += _FETCH_PART.pack(index, error, hwm, lso, log_start)
                if flexible:
                    out += _uvb(len(aborted) + 1)
                else:
                    out += _I32.pack(len(aborted))
                for a in aborted:
                    out += _ABORTED.pack(a["producer_id"], a["first_offset"])
                    if flexible:
                        out.append(0)
                out += _I32.pack(preferred)
            kind = type(recs)
            if kind is bytes or kind is bytearray:
                size = len(recs)
                out += _uvb(size + 1) if flexible else _I32.pack(size)
                if size:
                    chunks.append(out)
                    chunks.append(recs)
                    out = bytearray()
            elif kind is list and len(recs) == 1 and type(recs[0]) is memoryview and recs[0].itemsize == 1 \
                    and recs[0].ndim == 1 and recs[0].nbytes:
                # One view of the log, a caught-up consumer's read: what _records writes for it.
                view = recs[0]
                size = view.nbytes
                out += _uvb(size + 1) if flexible else _I32.pack(size)
                chunks.append(out)
                chunks.append(view)
                out = bytearray()
            else:
                out = _records(out, chunks, recs, flexible)
            if flexible:
                # Exactly the eight keys read above leave no room for a tagged field.
                if len(p) != 8:
                    get = p.get
                    if get("diverging_epoch") is not None or get("current_leader") is not None or get(
                        "snapshot_id"
                    ) is not None:
                        raise _Fallback
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    return _finish(chunks, out)


# ---- Metadata ---------------------------------------------------------------------------------

_PARTITION_FIELDS = operator.itemgetter(
    "error_code", "partition_index", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas"
)
_SINGLE_REPLICA = struct.Struct(">hiiiBiBiBx")  # x: the empty tagged section
_THREE_REPLICAS = struct.Struct(">hiiiB3iB3iBx")
_PACKERS: dict[int, object] = {}


def _packer(nr: int, ni: int, no: int):
    """A function packing one partition whose arrays have these lengths.

    Generated so that array items are passed by index: star-arguments cost more than the
    whole pack on CPython 3.11."""
    if nr >= 127 or ni >= 127 or no >= 127:
        raise _Fallback
    st = struct.Struct(f">hiiiB{nr}iB{ni}iB{no}ix")  # x: the empty tagged section
    args = ["ec", "idx", "leader", "epoch", str(nr + 1)]
    args += [f"r[{k}]" for k in range(nr)] + [str(ni + 1)]
    args += [f"i[{k}]" for k in range(ni)] + [str(no + 1)]
    args += [f"o[{k}]" for k in range(no)]
    if nr + ni + no <= 48:
        ns = {"_pack": st.pack}
        exec(f"def pack(ec, idx, leader, epoch, r, i, o):\n    return _pack({', '.join(args)})\n", ns)
        fn = ns["pack"]
    else:

        def fn(ec, idx, leader, epoch, r, i, o, _pack=st.pack):
            return _pack(ec, idx, leader, epoch, nr + 1, *r, ni + 1, *i, no + 1, *o)

    if len(_PACKERS) < 4096:
        _PACKERS[(nr << 16) | (ni << 8) | no] = fn
    return fn


_INTERNAL_COUNT = struct.Struct(">?B")  # is_internal, then a one-byte compact partition count
_UUID_BYTES: dict = {}


def _uuid_bytes(tid) -> bytes:
    """UUID.bytes computes from the int each time; topic IDs repeat in every Metadata answer."""
    raw = b"\x00" * 16 if tid is None else tid.bytes
    if len(_UUID_BYTES) >= 65536:
        _UUID_BYTES.clear()
    if tid is not None:
        _UUID_BYTES[tid] = raw
    return raw


def _metadata(version: int, correlation_id: int, body: dict) -> list:
    out = bytearray(_SIZE_CID_TAG.pack(0, correlation_id, 0))
    out += _I32.pack(body["throttle_time_ms"])
    brokers = body["brokers"]
    if len(brokers) >= 127:
        raise _Fallback
    out.append(len(brokers) + 1)
    for b in brokers:
        out += _I32.pack(b["node_id"])
        _wcs(out, b["host"])
        out += _I32.pack(b["port"])
        _wncs(out, b["rack"])
        out.append(0)
    _wncs(out, body["cluster_id"])
    out += _I32.pack(body["controller_id"])
    topics = body["topics"]
    out += _uvb(len(topics) + 1)
    packers = _PACKERS
    fields = _PARTITION_FIELDS
    single = _SINGLE_REPLICA.pack
    triple = _THREE_REPLICAS.pack
    name_nullable = version >= 12
    with_id = version >= 10
    uuid_bytes = _UUID_BYTES
    for t in topics:
        out += _I16.pack(t["error_code"])
        name = t["name"]
        if name is None:
            if not name_nullable:
                raise _Fallback
            out.append(0)
        else:
            raw = name.encode()
            n = len(raw) + 1
            if n < 128:
                out.append(n)
            else:
                out += _uvb(n)
            out += raw
        if with_id:
            tid = t["topic_id"]
            raw = uuid_bytes.get(tid)
            if raw is None:
                raw = _uuid_bytes(tid)
            out += raw
        parts = t["partitions"]
        n = len(parts) + 1
        if n < 128:
            out += _INTERNAL_COUNT.pack(t["is_internal"], n)
        else:
            out.append(1 if t["is_internal"] else 0)
            out += _uvb(n)
        for p in parts:
            ec, idx, leader, epoch, r, i, o = fields(p)
            # The common shapes inline (a single node: 1 replica; a classic cluster: 3), the
            # others through a generated packer.
            if not o:
                nr = len(r)
                if nr == 1 and len(i) == 1:
                    out += single(ec, idx, leader, epoch, 2, r[0], 2, i[0], 1)
                    continue
                if nr == 3 and len(i) == 3:
                    out += triple(ec, idx, leader, epoch, 4, r[0], r[1], r[2], 4, i[0], i[1], i[2], 1)
                    continue
                o = ()
            nr = len(r)
            ni = len(i)
            no = len(o)
            pack = packers.get((nr << 16) | (ni << 8) | no)
            if pack is None:
                pack = _packer(nr, ni, no)
            out += pack(ec, idx, leader, epoch, r, i, o)
        out += _I32.pack(t["topic_authorized_operations"])
        out.append(0)
    if version <= 10:
        out += _I32.pack(body["cluster_authorized_operations"])
    if version >= 13:
        out += _I16.pack(body["error_code"])
    out.append(0)
    return _finish([], out)


# ---- registration -----------------------------------------------------------------------------

_FAST_ERRORS = (_Fallback, KeyError, TypeError, AttributeError, struct.error)


def _with_fallback(api_key: int, version: int, fast):
    def encode(correlation_id: int, body: dict) -> list:
        try:
            return fast(version, correlation_id, body)
        except _FAST_ERRORS:
            return codec.encode_response(api_key, version, correlation_id, body)

    encode.__name__ = f"encode_fast_{api_key}_v{version}"
    encode.fast = fast  # the unguarded encoder, for tests
    return encode


FAST = {(1, v): _fetch for v in range(11, 18)}
FAST.update({(3, v): _metadata for v in (9, 10, 11, 12, 13)})

# (api_key, version) -> fn(correlation_id, body), each falling back to the generic encoder.
ENCODERS = {key: _with_fallback(key[0], key[1], fn) for key, fn in FAST.items()}


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict) -> list:
    """``codec.encode_response`` with the hand-tuned encoders where they exist (same bytes)."""
    fast = ENCODERS.get((api_key, api_version))
    if fast is not None:
        return fast(correlation_id, body)
    return codec.encode_response(api_key, api_version, correlation_id, body)
