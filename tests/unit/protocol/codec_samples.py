"""Sample message bodies generated from the specs, for the codec's round-trip and oracle tests.

Every field of the version is filled with a non-default value, arrays get 1-2 elements,
nullable fields are sometimes None and tagged fields are present.
"""

from __future__ import annotations

import random
import uuid

from minikafka.protocol import specs
from minikafka.protocol.apis import SERVE
from minikafka.protocol.specs import Field, in_range

_INT_RANGES = {
    "int8": (-128, 127),
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

_WORDS = ["topic", "grp", "ünïcødé", "a" * 130, "", "x.y-z_1", "クライアント"]


def served_versions():
    """Every (api_key, version) in SERVE, sorted."""
    return [(k, v) for k, (lo, hi) in sorted(SERVE.items()) for v in range(lo, hi + 1)]


def _int(rng: random.Random, t: str) -> int:
    lo, hi = _INT_RANGES[t]
    choice = rng.random()
    if choice < 0.2:
        return lo
    if choice < 0.4:
        return hi
    return rng.randint(max(lo, -1000), min(hi, 100000))


def sample_value(rng: random.Random, f: Field, version: int, allow_null: bool = True):
    nullable = in_range(f.nullable, version)
    if allow_null and nullable and rng.random() < 0.25:
        return None
    if f.is_array:
        count = rng.randint(1, 2)
        return [_sample_elem(rng, f, version) for _ in range(count)]
    return _sample_elem(rng, f, version)


def _sample_elem(rng: random.Random, f: Field, version: int):
    t = f.elem
    if f.is_struct:
        return sample_struct(rng, f.fields, version)
    if t in _INT_RANGES:
        return _int(rng, t)
    if t == "bool":
        return True  # the default is false for almost every bool, so True exercises encoding
    if t == "float64":
        return rng.choice([0.5, -1.25, 1e300, 3.0])
    if t == "string":
        return rng.choice(_WORDS) + str(rng.randint(0, 9))
    if t == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))
    if t == "records":
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 70)))
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128) | 1)
    raise AssertionError(t)


def sample_struct(rng: random.Random, fields: list[Field], version: int) -> dict:
    return {f.key: sample_value(rng, f, version) for f in fields if in_range(f.versions, version)}


def sample_body(api_key: int, version: int, kind: str, seed: int = 0) -> dict:
    spec = specs.message(api_key, kind)
    rng = random.Random(f"{api_key}/{version}/{kind}/{seed}")
    return sample_struct(rng, spec.fields, version)


def normalise(value):
    """memoryview -> bytes, recursively, so decoded bodies compare with the samples."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value
