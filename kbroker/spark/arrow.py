"""Fetched record bytes to pyarrow RecordBatches in the schema of Spark's Kafka source.

Spark takes pyarrow batches from a Python data source about 4x faster than tuples, and checks their schema
against the declared one exactly (types and nullability), so the arrow schema here is what
`pyspark.sql.pandas.types.to_arrow_schema` makes of SCHEMA (checked in the tests).

Records are walked with aiokafka's C record readers (`MemoryRecords`: v2 batches and v0/v1 message sets,
decompressing as it goes); one Python loop per record collects key, value and timestamp into lists that
become arrow arrays in one C call each. Offsets come from the batch header when a batch has no gaps, and
per-batch values (topic, partition, timestamp type) never go through per-record Python objects. Control
batches (transaction markers) are skipped and v2 batch CRCs are checked, as consumers do; a read_committed
reader also skips the batches aborted_batches() names, from their headers alone.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_left

import crc32c
import pyarrow as pa
import pyarrow.compute as pc
from aiokafka.record._crecords import MemoryRecords
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
BASE_FIELDS = [StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
               StructField("partition", IntegerType()), StructField("offset", LongType()),
               StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType())]
SCHEMA = StructType(BASE_FIELDS)
SCHEMA_WITH_HEADERS = StructType(BASE_FIELDS + [StructField("headers", ArrayType(HEADER_TYPE))])

_ARROW_HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
_ARROW_HEADERS = pa.list_(pa.field("element", _ARROW_HEADER))
_TIMESTAMP = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", _TIMESTAMP),
                          ("timestampType", pa.int32())])
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", _ARROW_HEADERS))


_ENTRY_HEAD = struct.Struct(">qiibI")      # base offset, length, (v2) leader epoch, magic, crc
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
# positions in a v2 batch header, and its attribute bits
_ATTRIBUTES, _LAST_OFFSET_DELTA, _PRODUCER_ID, _RECORD_COUNT, _FIRST_RECORD = 21, 23, 43, 57, 61
_TRANSACTIONAL, _CONTROL = 0x10, 0x20


class CorruptRecords(ValueError):
    """A fetched v2 batch whose CRC-32C does not match (Kafka consumers check it too)."""


def scan(records: bytes) -> list[tuple[int, int, int]]:
    """(base offset, record count, next offset) of each complete entry of a Fetch partition's bytes, from the
    headers alone; the count is -1 for a v0/v1 message. Checks the CRC-32C of each v2 batch (a few µs per
    100 KB), as consumers do."""
    out = []
    pos, end = 0, len(records)
    view = memoryview(records)
    while pos + _ENTRY_HEAD.size <= end:
        base, length, _, magic, crc = _ENTRY_HEAD.unpack_from(records, pos)
        stop = pos + 12 + length
        if stop > end or length < 0:
            break
        if magic >= 2:
            if crc32c.crc32c(view[pos + 21:stop]) != crc:
                raise CorruptRecords(f"the record batch at offset {base} is corrupt (CRC-32C mismatch)")
            last = base + _I32.unpack_from(records, pos + _LAST_OFFSET_DELTA)[0]
            out.append((base, _I32.unpack_from(records, pos + _RECORD_COUNT)[0], last + 1))
        else:                                   # a v0/v1 message (a compressed one: offset of its last record)
            out.append((base, -1, base + 1))
        pos = stop
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at pos: (value, position after it)."""
    shift = raw = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _is_abort_marker(records: bytes, pos: int, stop: int) -> bool:
    """Whether the control batch at pos holds an ABORT marker: its first record's key is (version int16,
    type int16), type 0 ABORT, 1 COMMIT (control batches are never compressed)."""
    at = pos + _FIRST_RECORD
    if at >= stop:
        return False
    _, at = _varint(records, at)                # record length
    at += 1                                     # record attributes
    _, at = _varint(records, at)                # timestamp delta
    _, at = _varint(records, at)                # offset delta
    key_length, at = _varint(records, at)
    return key_length >= 4 and at + 4 <= stop and _I16.unpack_from(records, at + 2)[0] == 0


def aborted_batches(records: bytes, aborted: list[tuple[int, int]]) -> set[int]:
    """Base offsets of the batches of one READ_COMMITTED Fetch partition's bytes that belong to aborted
    transactions, found as Kafka consumers do: `aborted` is the response's [(producer id, first offset)]; once
    a batch reaches an aborted transaction's first offset its producer is aborted, its transactional batches
    are dropped until its ABORT marker, which ends it. (Control batches themselves are dropped by Columns.)"""
    pending = sorted(aborted, key=lambda a: a[1])
    first = 0
    producers: set[int] = set()
    out: set[int] = set()
    pos, end = 0, len(records)
    while pos + _ENTRY_HEAD.size <= end:
        base, length, _, magic, _ = _ENTRY_HEAD.unpack_from(records, pos)
        stop = pos + 12 + length
        if stop > end or length < 0:
            break
        if magic >= 2 and stop >= pos + _FIRST_RECORD:
            producer_id = _I64.unpack_from(records, pos + _PRODUCER_ID)[0]
            if producer_id >= 0:
                last = base + _I32.unpack_from(records, pos + _LAST_OFFSET_DELTA)[0]
                while first < len(pending) and pending[first][1] <= last:
                    producers.add(pending[first][0])
                    first += 1
                attributes = _I16.unpack_from(records, pos + _ATTRIBUTES)[0]
                if attributes & _CONTROL:
                    if producer_id in producers and _is_abort_marker(records, pos, stop):
                        producers.discard(producer_id)
                elif attributes & _TRANSACTIONAL and producer_id in producers:
                    out.add(base)
        pos = stop
    return out


def spark_schema(include_headers: bool) -> StructType:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


class Columns:
    """Column lists of the records of one fetch, turned into one RecordBatch by to_arrow()."""

    def __init__(self, include_headers: bool):
        self.keys: list = []
        self.values: list = []
        self.offsets: list = []
        self.timestamps: list = []
        self.types = array("i")
        self.include_headers = include_headers
        self.header_keys: list = []
        self.header_values: list = []
        self.header_ends = array("i", [0])

    def add(self, records: bytes, entries: list[tuple[int, int, int]] | None = None,
            skip: set[int] | None = None) -> int:
        """Append the complete entries of `records` (one Fetch partition's bytes; `entries` is their scan() when
        the caller has it) but the batches whose base offset is in `skip`; returns the offset after the last
        complete entry (-1 when there was none)."""
        if entries is None:
            entries = scan(records)
        mem = MemoryRecords(records)
        keys, values, offsets, stamps = self.keys, self.values, self.offsets, self.timestamps
        ka, va, oa, ta = keys.append, values.append, offsets.append, stamps.append
        hk, hv, he = self.header_keys, self.header_values, self.header_ends
        with_headers = self.include_headers
        for base, count, after in entries:
            batch = mem.next_batch()
            if batch.is_control_batch or (skip and base in skip):
                continue
            if count < 0:
                self._add_legacy(batch)
                continue
            before = len(values)
            if not with_headers and after - base == count:
                # the hot path: no gaps (not compacted), so offsets need not be read record by record
                for r in batch:
                    ka(r.key)
                    va(r.value)
                    ta(r.timestamp)
                offsets.extend(range(base, base + len(values) - before))
            else:
                for r in batch:
                    ka(r.key)
                    va(r.value)
                    oa(r.offset)
                    ta(r.timestamp)
                    if with_headers:
                        for k, v in r.headers:
                            hk.append(k)
                            hv.append(v)
                        he.append(len(hk))
            self.types.extend(array("i", [batch.timestamp_type]) * (len(values) - before))
        return entries[-1][2] if entries else -1

    def _add_legacy(self, batch) -> None:
        """A v0/v1 message (a compressed one holds several): v0 has no timestamp (-1) nor timestamp type (-1,
        Kafka's NoTimestampType); neither has headers."""
        for r in batch:
            self.keys.append(r.key)
            self.values.append(r.value)
            self.offsets.append(r.offset)
            self.timestamps.append(-1 if r.timestamp is None else r.timestamp)
            self.types.append(-1 if r.timestamp_type is None else r.timestamp_type)
            if self.include_headers:
                self.header_ends.append(len(self.header_keys))

    def to_arrow(self, topic: str, partition: int, start: int, end: int) -> pa.RecordBatch | None:
        """The collected records with start <= offset < end (None if there are none)."""
        lo = bisect_left(self.offsets, start)
        hi = bisect_left(self.offsets, end)
        n = hi - lo
        if n <= 0:
            return None
        whole = lo == 0 and hi == len(self.offsets)

        def part(items):
            return items if whole else items[lo:hi]
        topic_bytes = topic.encode()
        width = len(topic_bytes)
        columns = [
            pa.array(part(self.keys), pa.binary()),
            pa.array(part(self.values), pa.binary()),
            pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(array("i", range(0, (n + 1) * width, width))),
                                                   pa.py_buffer(topic_bytes * n)]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(array("i", [partition]) * n)]),
            pa.array(part(self.offsets), pa.int64()),
            pc.multiply(pa.array(part(self.timestamps), pa.int64()), 1000).view(_TIMESTAMP),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.types[lo:hi])]),
        ]
        if not self.include_headers:
            return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        ends = self.header_ends
        first = ends[lo]
        list_offsets = array("i", (e - first for e in ends[lo:hi + 1]))
        entries = pa.StructArray.from_arrays(
            [pa.array(self.header_keys[first:ends[hi]], pa.string()),
             pa.array(self.header_values[first:ends[hi]], pa.binary())],
            fields=list(_ARROW_HEADER))
        headers = pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(list_offsets)]),
                                           entries, type=_ARROW_HEADERS)
        return pa.RecordBatch.from_arrays(columns + [headers], schema=ARROW_SCHEMA_WITH_HEADERS)
