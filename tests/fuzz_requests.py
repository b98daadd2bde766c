"""Random Kafka requests built from the message schemas, and damaged copies of them, for the fuzz test
(tests/integration/test_fuzz_requests.py).

The schemas are Kafka's JSON message definitions: kbroker's own inter-broker ones (kbroker/protocol/schemas)
first, then the client ones kafka-python ships. A Fuzzer(seed) draws every value from one random.Random, so a
seed replays the same frames. request() encodes a random body field by field (field versions, nullable
versions, flexible versions with compact encodings and tagged fields) behind request header v1 (v2 when
flexible); mutate() damages a frame (truncation, bit flips, huge or negative lengths, trailing bytes, endless
varints, wrong versions, random api keys, lying size prefixes).

Values stay where a well-formed request is harmless to the cluster under test: topic names come from a pool
all starting "fuzz-", waits and timeouts are short, partition and replica counts small. fence() holds for
every frame, damaged or not: a LeaderAndIsr, StopReplica or UpdateMetadata carries a stale (negative)
controller epoch, and a ControlledShutdown names no live broker, so no frame can take over a broker's state.
"""
from __future__ import annotations

import json
import os
import random
import re
import struct
from dataclasses import dataclass

import crc32c
import kafka.protocol.schemas as _kafka_schemas
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

import kbroker.protocol.schemas as _kbroker_schemas
from kbroker.protocol.header import (MalformedRequest, parse_request_header_v1, read_uvarint,
                                     skip_tagged_fields)
from kbroker.protocol.hotpath import uvarint

SCHEMA_DIRS = (os.path.dirname(_kbroker_schemas.__file__),
               os.path.join(os.path.dirname(_kafka_schemas.__file__), "resources"))
_COMMENT = re.compile(r"^\s*//.*$", re.M)
_WAIT = re.compile(r"(Timeout|Wait|Delay)Ms$")
_COUNTS = {"NumPartitions", "ReplicationFactor", "Count", "MaxNumOffsets"}
CONTROLLER_REQUESTS = (4, 5, 6)   # LeaderAndIsr, StopReplica, UpdateMetadata: controller epoch is the 2nd int32
CONTROLLED_SHUTDOWN = 7
_INT = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_PACK = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "float64": ">d"}


def load_request_schemas() -> dict[int, dict]:
    """api key -> request schema (comments stripped); kbroker's definitions win over kafka-python's."""
    schemas: dict[int, dict] = {}
    for directory in SCHEMA_DIRS:
        for name in sorted(os.listdir(directory)):
            if name.endswith("Request.json"):
                with open(os.path.join(directory, name)) as f:
                    schema = json.loads(_COMMENT.sub("", f.read()))
                schemas.setdefault(schema["apiKey"], schema)
    return schemas


def in_versions(spec: str | None, version: int) -> bool:
    """Kafka's version range syntax: "3+", "0-2", "5", "none"."""
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    lo, _, hi = spec.partition("-")
    return int(lo) <= version <= int(hi or lo)


@dataclass
class Header:
    api_key: int
    api_version: int
    correlation_id: int


def parse_header(frame: bytes) -> Header | None:
    """The api key, version and correlation id a frame (size prefix included) claims, if it is long enough."""
    if len(frame) < 12:
        return None
    return Header(*struct.unpack_from(">hhi", frame, 4))


SCHEMAS = load_request_schemas()


def flexible(api_key: int, version: int) -> bool:
    """Whether the request uses compact encodings, tagged fields and request header v2."""
    schema = SCHEMAS.get(api_key)
    return schema is not None and in_versions(schema.get("flexibleVersions"), version)


class Fuzzer:
    def __init__(self, seed: int | str, topics=("fuzz-target",)):
        self.rng = random.Random(seed)
        self.topics = list(topics)
        self._lengths: list[tuple[int, str]] = []   # (position in the body, "i16" | "i32" | "uv") of length fields

    # ---- values ------------------------------------------------------------------------------------------

    def _int(self, field: dict, kind: str) -> int:
        r, name = self.rng, field["name"]
        if _WAIT.search(name):   # the test's brokers take session timeouts from 10 ms
            return r.choice((-1, 0, 1, 50, 200, 1000))
        if name in _COUNTS:
            return r.choice((-1, 0, 1, 2, 3))
        lo, hi = (0, 0xFFFF) if kind == "uint16" else (-(1 << _INT[kind] - 1), (1 << _INT[kind] - 1) - 1)
        p = r.random()
        if p < 0.6:
            return max(lo, r.randint(-1, 4))
        if p < 0.8:
            return r.choice((lo, hi, lo + 1, hi - 1, 0))
        return r.randint(lo, hi)

    def _text(self, field: dict) -> str:
        r = self.rng
        entity = field.get("entityType")
        if entity == "topicName":
            return r.choice(self.topics + ["fuzz-a", "fuzz-b", f"fuzz-{r.randrange(10**6)}", "fuzz-a/b", ""])
        if entity in ("groupId", "transactionalId"):
            return r.choice(("fuzz-group", "fuzz-txn", f"fuzz-{r.randrange(10**6)}", ""))
        if field["name"] in ("Host", "HostName"):
            return "127.0.0.1"
        return r.choice(("", "x", "fuzz", "é€𝄞", "a" * r.randint(100, 400),
                         "".join(chr(r.randint(32, 126)) for _ in range(r.randint(1, 12)))))

    def _records(self, nullable: bool) -> bytes | None:
        r = self.rng
        p = r.random()
        if nullable and p < 0.05:
            return None
        if p < 0.1:
            return b""
        if p < 0.2:
            return r.randbytes(r.randint(1, 80))
        if p < 0.3:
            magic = r.choice((0, 1))
            builder = LegacyRecordBatchBuilder(magic, r.choice((0, 0, 1)), 1 << 20)
            for i in range(r.randint(1, 4)):
                builder.append(i, None if magic == 0 else r.randint(0, 2 ** 41), r.randbytes(3), r.randbytes(8))
            return bytes(builder.build())
        builder = DefaultRecordBatchBuilder(2, r.choice((0, 0, 0, 1)), r.random() < 0.1,
                                            r.choice((-1, -1, r.randint(0, 1000))), r.choice((-1, 0, 1)),
                                            r.choice((-1, 0, 5)), 1 << 20)
        for i in range(r.randint(1, 5)):
            builder.append(i, r.choice((None, 0, -5, r.randint(0, 2 ** 41))), r.choice((None, b"k")),
                           r.randbytes(r.randint(0, 20)), [("h", b"v")] if r.random() < 0.2 else [])
        batch = bytearray(builder.build())
        if p < 0.6 and len(batch) > 61:
            self._damage_batch(batch)
        return bytes(batch)

    def _damage_batch(self, batch: bytearray) -> None:
        """Damage a v2 batch behind its CRC (then fixed), so the damage reaches the record parsing: a bit flip,
        a huge or negative record count, record length or batch length, or an endless varint."""
        r = self.rng
        how = r.randrange(5)
        if how == 0:
            pos = r.randrange(21, len(batch))
            batch[pos] ^= 1 << r.randrange(8)
        elif how == 1:
            struct.pack_into(">i", batch, 57, r.choice((-1, -(1 << 31), (1 << 31) - 1, 1000)))
        elif how == 2:
            batch[61] = r.choice((0x01, 0x7F, 0xFE))   # first record's zigzag length: -1, -64, huge-ish
        elif how == 3:
            batch[61:] = b"\xff" * r.randint(5, 20)
            struct.pack_into(">i", batch, 8, len(batch) - 12)
        else:
            struct.pack_into(">i", batch, 8, r.choice((-1, 0, 9, (1 << 31) - 1, len(batch))))
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))

    # ---- encoding ----------------------------------------------------------------------------------------

    def _length(self, out: bytearray, n: int | None, compact: bool, wide: bool) -> None:
        """A length prefix (None: null) as a string (int16), bytes or array (int32) or compact (uvarint n+1)."""
        self._lengths.append((len(out), "uv" if compact else "i32" if wide else "i16"))
        if compact:
            out += uvarint(0 if n is None else n + 1)
        else:
            out += struct.pack(">i" if wide else ">h", -1 if n is None else n)

    def _value(self, out: bytearray, field: dict, kind: str, version: int, flexible: bool, structs: dict,
               element: bool = False) -> None:
        """One value of `field` as type `kind` (an array's element when `element`: never null)."""
        r = self.rng
        nullable = not element and in_versions(field.get("nullableVersions"), version)
        if kind.startswith("[]"):
            inner = kind[2:]
            if nullable and r.random() < 0.1:
                self._length(out, None, flexible, True)
                return
            n = r.choice((0, 1, 1, 2, 3))
            self._length(out, n, flexible, True)
            for _ in range(n):
                self._value(out, field, inner, version, flexible, structs, element=True)
        elif kind[0].isupper():
            if nullable:
                if r.random() < 0.2:
                    out += b"\xff"
                    return
                out += b"\x01"
            self._struct(out, field.get("fields") or structs[kind], version, flexible, structs)
        elif kind == "bool":
            out.append(r.random() < 0.5)
        elif kind in _INT or kind == "uint16":
            out += struct.pack(_PACK[kind], self._int(field, kind))
        elif kind == "float64":
            out += struct.pack(">d", r.choice((0.0, -1.0, 1e300, float("nan"))))
        elif kind == "uuid":
            out += r.choice((bytes(16), r.randbytes(16)))
        elif kind in ("string", "bytes", "records"):
            if kind == "string":
                data = None if nullable and r.random() < 0.1 else self._text(field).encode()
            elif kind == "bytes":
                data = None if nullable and r.random() < 0.1 else r.randbytes(r.randint(0, 40))
            else:
                data = self._records(nullable)
            self._length(out, None if data is None else len(data), flexible, kind != "string")
            out += data or b""
        else:
            raise ValueError(f"unknown field type {kind}")

    def _struct(self, out: bytearray, fields: list, version: int, flexible: bool, structs: dict) -> None:
        tagged = []
        for field in fields:
            if not in_versions(field.get("versions"), version):
                continue
            if "tag" in field and in_versions(field.get("taggedVersions"), version):
                if flexible and self.rng.random() < 0.5:
                    value, known = bytearray(), len(self._lengths)
                    self._value(value, field, field["type"], version, flexible, structs)
                    del self._lengths[known:]   # (positions in `value`, not in the body)
                    tagged.append((field["tag"], bytes(value)))
                continue
            self._value(out, field, field["type"], version, flexible, structs)
        if flexible:
            if self.rng.random() < 0.1:   # a tag this version does not know: the broker must skip it
                tagged.append((self.rng.randint(1000, 5000), self.rng.randbytes(self.rng.randint(0, 8))))
            out += uvarint(len(tagged))
            for tag, value in sorted(tagged):
                out += uvarint(tag) + uvarint(len(value)) + value

    def header(self, api_key: int, version: int, correlation_id: int, client_id: str | None = "fuzz") -> bytes:
        """Request header v1 (v2 when flexible: an empty tagged-field section); v0 for ControlledShutdown v0."""
        if (api_key, version) == (CONTROLLED_SHUTDOWN, 0):
            return struct.pack(">hhi", api_key, version, correlation_id)
        cid = None if client_id is None else client_id.encode()
        head = struct.pack(">hhih", api_key, version, correlation_id, -1 if cid is None else len(cid)) + (cid or b"")
        return head + b"\x00" if flexible(api_key, version) else head

    def request(self, api_key: int, version: int, correlation_id: int) -> tuple[bytes, list[tuple[int, str]]]:
        """A framed random request, and where its length fields are in the frame ((position, kind))."""
        schema = SCHEMAS[api_key]
        structs = {s["name"]: s["fields"] for s in schema.get("commonStructs", ())}
        body = bytearray()
        self._lengths = []
        self._struct(body, schema["fields"], version, flexible(api_key, version), structs)
        head = self.header(api_key, version, correlation_id,
                           self.rng.choice(("fuzz", None, "", "é" * 40)))
        lengths = [(4 + len(head) + pos, kind) for pos, kind in self._lengths]
        return fence(frame(head + body), self.rng), lengths

    # ---- damage ------------------------------------------------------------------------------------------

    def mutate(self, data: bytes, lengths, versions: dict[int, tuple[int, int]]) -> tuple[bytes, str, bool]:
        """A damaged copy of the frame, what was done, and whether the size prefix lies (the sender then ends
        its side of the connection: the broker must close, never wait for bytes that do not come)."""
        r = self.rng
        payload = bytearray(data[4:])
        how = r.choice(("truncate", "bitflip", "bitflip", "length", "length", "trailing", "varint", "version",
                        "api_key", "client_id", "splice", "size"))
        if how == "truncate":
            del payload[r.randrange(len(payload)):]
        elif how == "bitflip":
            for _ in range(r.randint(1, 4)):
                payload[r.randrange(len(payload))] ^= 1 << r.randrange(8)
        elif how == "length" and lengths:
            pos, kind = r.choice(lengths)
            pos -= 4
            if kind == "i16":
                payload[pos:pos + 2] = struct.pack(">h", r.choice((-2, -100, -(1 << 15), (1 << 15) - 1, 1000)))
            elif kind == "i32":
                payload[pos:pos + 4] = struct.pack(">i", r.choice((-2, -1000, -(1 << 31), (1 << 31) - 1,
                                                                   1 << 28, 100000)))
            else:
                _, end = read_uvarint(payload, pos)
                payload[pos:end] = uvarint(r.choice(((1 << 31) - 1, (1 << 32) - 1, 1 << 28, 100000)))
        elif how == "trailing":
            payload += r.randbytes(r.randint(1, 64))
        elif how == "varint":
            pos = r.choice([p - 4 for p, k in lengths if k == "uv"] or [r.randrange(len(payload) + 1)])
            payload[pos:pos + r.choice((0, 1, 10**6))] = b"\xff" * r.randint(5, 64)
        elif how == "version" and len(payload) >= 4:
            key = struct.unpack_from(">h", payload)[0]
            top = versions.get(key, (0, 0))[1]
            struct.pack_into(">h", payload, 2, r.choice((-1, top + 1, top + 5, (1 << 15) - 1, r.randint(0, top))))
        elif how == "api_key" and len(payload) >= 2:
            struct.pack_into(">h", payload, 0, r.choice((-1, 34, 48, 56, 57, 67, 1000, (1 << 15) - 1,
                                                         r.choice(list(versions)))))
        elif how == "client_id" and len(payload) >= 10:
            struct.pack_into(">h", payload, 8, r.choice((-2, -(1 << 15), (1 << 15) - 1, len(payload))))
        elif how == "splice":
            pos = r.randrange(len(payload) + 1)
            if r.random() < 0.5:
                payload[pos:pos] = r.randbytes(r.randint(1, 16))
            else:
                del payload[pos:pos + r.randint(1, 16)]
        elif how == "size":
            size = r.choice((-1, -(1 << 31), (1 << 31) - 1, len(payload) + r.randint(1, 1000)))
            return fence(struct.pack(">i", size) + bytes(payload), r), how, True
        return fence(frame(bytes(payload)), r), how, False


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _body_start(data: bytes) -> int | None:
    """Where the body starts in a frame (size prefix included), reading the header with the broker's own
    header reader; None when the broker could not read the header (it then closes the connection without
    looking further)."""
    body = memoryview(data)[4:]
    try:
        header = parse_request_header_v1(body)
        pos = header.size
        if flexible(header.api_key, header.api_version):
            pos = skip_tagged_fields(body, pos)
    except MalformedRequest:
        return None
    return 4 + pos


def fence(data: bytes, rng: random.Random) -> bytes:
    """The frame with a stale controller epoch if it is a controller request, and a broker id no broker has
    if it is a ControlledShutdown (so neither can change a broker's state, whatever else the bytes say)."""
    if len(data) < 8:
        return data
    key = struct.unpack_from(">h", data, 4)[0]
    if key not in CONTROLLER_REQUESTS and key != CONTROLLED_SHUTDOWN:
        return data
    start = _body_start(data) if len(data) >= 12 else None
    if start is None:
        return data
    out = bytearray(data)
    if key == CONTROLLED_SHUTDOWN and len(out) >= start + 4:
        struct.pack_into(">i", out, start, rng.randint(1000, 1 << 30))
    elif key in CONTROLLER_REQUESTS and len(out) >= start + 8:
        struct.pack_into(">i", out, start + 4, rng.randint(-(1 << 31), -1))
    return bytes(out)
