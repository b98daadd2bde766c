"""Building record batches: v2 batches and v0/v1 message sets from records, and the rebuilt or emptied batches
of the log cleaner and transaction markers (control batches) — every batch the broker writes itself comes from here.

Per-record encoding is aiokafka's C code (`aiokafka.record._crecords` builders, uncompressed); compression and
every header and wrapper field are written here, so the framing is Kafka's (see compression.py). Records are
objects with offset, timestamp, key, value and headers, as batches.py decodes them.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from aiokafka.record._crecords import DefaultRecordBatchBuilder, LegacyRecordBatchBuilder

from .batches import CREATE_TIME, LOG_APPEND_TIME, V2_MAX_TIMESTAMP_OFFSET, legacy_message, set_legacy_crc, set_v2_crc
from .compression import NONE, compress
from .entries import (COMPRESSION_MASK, CONTROL_MASK, LOG_OVERHEAD, MAGIC_OFFSET, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK_V1,
                      TIMESTAMP_TYPE_MASK_V2, TRANSACTIONAL_MASK, V2_ATTRIBUTES_OFFSET, V2_HEADER, V2_HEADER_SIZE)

_NO_LIMIT = 2 ** 31 - 1         # builders' batch size: never refuse a record


def _v2_batch(records, base_offset: int | None, codec: int, transactional: bool, producer_id: int,
              producer_epoch: int, base_sequence: int) -> bytearray:
    """The records encoded at their offsets relative to base_offset (or renumbered 0, 1, ... when None), the
    records section compressed with codec; header fields beyond the builder's are left to the caller."""
    builder = DefaultRecordBatchBuilder(2, NONE, int(transactional), producer_id, producer_epoch, base_sequence,
                                        _NO_LIMIT)
    append = builder.append
    if base_offset is None:
        for delta, r in enumerate(records):
            append(delta, r.timestamp, r.key, r.value, r.headers or [])
    else:
        for r in records:
            append(r.offset - base_offset, r.timestamp, r.key, r.value, r.headers or [])
    out = builder.build()
    if codec != NONE:
        out[V2_HEADER_SIZE:] = compress(codec, memoryview(out)[V2_HEADER_SIZE:], 2)
    return out


def build_v2(records, *, first_offset: int | None = None, codec: int, timestamp_type: int, log_append_time: int,
             producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             transactional: bool = False, partition_leader_epoch: int = -1) -> bytearray:
    """One v2 batch holding `records`, at their own offsets or renumbered from first_offset, compressed with
    `codec` (kept even if larger, as Kafka does). Under LogAppendTime the records keep their timestamps and
    maxTimestamp is log_append_time."""
    renumber = first_offset is not None
    if not renumber:
        first_offset = records[0].offset
    out = _v2_batch(records, None if renumber else first_offset, codec, transactional, producer_id, producer_epoch,
                    base_sequence)
    attributes = codec | (TRANSACTIONAL_MASK if transactional else 0)
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK_V2
        struct.pack_into(">q", out, V2_MAX_TIMESTAMP_OFFSET, log_append_time)
    struct.pack_into(">qii", out, 0, first_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch)
    struct.pack_into(">h", out, V2_ATTRIBUTES_OFFSET, attributes)
    set_v2_crc(out, 0, len(out))
    return out


class _ControlRecord(NamedTuple):
    offset: int
    timestamp: int
    key: bytes
    value: bytes
    headers: list


ABORT, COMMIT = 0, 1   # control record types of transaction markers


def control_batch(producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                  timestamp: int) -> bytearray:
    """A transaction marker as Kafka writes it (EndTransactionMarker): a transactional control batch with one
    uncompressed record, key int16 version 0 + int16 type (0 ABORT, 1 COMMIT), value int16 version 0 + int32
    coordinator epoch; base sequence -1, offsets assigned on append."""
    record = _ControlRecord(0, timestamp, struct.pack(">hh", 0, COMMIT if committed else ABORT),
                            struct.pack(">hi", 0, coordinator_epoch), [])
    out = _v2_batch([record], None, NONE, True, producer_id, producer_epoch, -1)
    struct.pack_into(">qii", out, 0, 0, len(out) - LOG_OVERHEAD, -1)
    struct.pack_into(">h", out, V2_ATTRIBUTES_OFFSET, TRANSACTIONAL_MASK | CONTROL_MASK)
    set_v2_crc(out, 0, len(out))
    return out


def rebuild_v2(records, base_offset: int, last_offset_delta: int, leader_epoch: int, attributes: int,
               max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int) -> bytearray:
    """A v2 batch of some of a batch's records (the cleaner's survivors) that keeps the original batch's
    offsets (base offset and last offset delta), producer fields, partition leader epoch, attributes and
    compression; under LogAppendTime its max timestamp too."""
    out = _v2_batch(records, base_offset, attributes & COMPRESSION_MASK, bool(attributes & TRANSACTIONAL_MASK),
                    producer_id, producer_epoch, base_sequence)
    struct.pack_into(">qii", out, 0, base_offset, len(out) - LOG_OVERHEAD, leader_epoch)
    struct.pack_into(">hi", out, V2_ATTRIBUTES_OFFSET, attributes, last_offset_delta)
    if attributes & TIMESTAMP_TYPE_MASK_V2:
        struct.pack_into(">q", out, V2_MAX_TIMESTAMP_OFFSET, max_timestamp)
    set_v2_crc(out, 0, len(out))
    return out


def empty_v2_batch(base_offset: int, last_offset_delta: int, leader_epoch: int, attributes: int,
                   timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int) -> bytearray:
    """A v2 batch header with no records keeping the offsets and producer fields (Kafka's writeEmptyHeader):
    uncompressed, not a control batch, both timestamps the original max timestamp."""
    out = bytearray(V2_HEADER_SIZE)
    V2_HEADER.pack_into(out, 0, base_offset, V2_HEADER_SIZE - LOG_OVERHEAD, leader_epoch, 2, 0,
                        attributes & (TIMESTAMP_TYPE_MASK_V2 | TRANSACTIONAL_MASK), last_offset_delta, timestamp,
                        timestamp, producer_id, producer_epoch, base_sequence, 0)
    set_v2_crc(out, 0, len(out))
    return out


def build_legacy(records, *, first_offset: int | None = None, magic: int, codec: int, timestamp_type: int,
                 log_append_time: int) -> bytearray:
    """v0/v1 messages for `records` (at their own offsets or renumbered from first_offset): one message each,
    or one `codec` wrapper whose inner offsets are relative (v1) or absolute (v0) and whose offset is the
    last record's. Under LogAppendTime (v1) every message carries log_append_time and the timestamp-type
    bit; headers are dropped."""
    log_append = magic == 1 and timestamp_type == LOG_APPEND_TIME
    relative = codec != NONE and magic == 1
    renumber = first_offset is not None
    shift = 0 if renumber else records[0].offset if relative else 0
    start = 0 if relative else first_offset
    builder = LegacyRecordBatchBuilder(magic, NONE, _NO_LIMIT)
    append = builder.append
    max_timestamp = NO_TIMESTAMP
    for i, r in enumerate(records):
        timestamp = r.timestamp
        if log_append:
            timestamp = log_append_time
        elif timestamp > max_timestamp:
            max_timestamp = timestamp
        append(start + i if renumber else r.offset - shift, timestamp, r.key, r.value)
    out = builder.build()
    if log_append:
        _stamp_log_append_time(out)
    if codec == NONE:
        return out
    attributes = codec
    if log_append:
        attributes |= TIMESTAMP_TYPE_MASK_V1
        max_timestamp = log_append_time
    last = first_offset + len(records) - 1 if renumber else records[-1].offset
    return legacy_wrapper(last, magic, attributes, max_timestamp, compress(codec, out, magic))


def rebuild_legacy(records, buf, pos: int, size: int) -> bytearray:
    """Some of the inner messages of the v0/v1 wrapper of `size` bytes at pos (the cleaner's survivors),
    wrapped again with its magic, codec and timestamp type (and its timestamp under LogAppendTime)."""
    wrapper, _ = legacy_message(memoryview(buf), pos, pos + size, check_crc=False)
    log_append = wrapper.magic == 1 and wrapper.attributes & TIMESTAMP_TYPE_MASK_V1
    return build_legacy(records, magic=wrapper.magic, codec=wrapper.attributes & COMPRESSION_MASK,
                        timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                        log_append_time=wrapper.timestamp)


def legacy_wrapper(offset: int, magic: int, attributes: int, timestamp: int, value: bytes) -> bytearray:
    """A v0/v1 message with a null key and `value` (a compressed wrapper)."""
    head = 2 + (8 if magic == 1 else 0)
    out = bytearray(LOG_OVERHEAD + 4 + head + 8 + len(value))
    struct.pack_into(">qiIbb", out, 0, offset, len(out) - LOG_OVERHEAD, 0, magic, attributes)
    p = MAGIC_OFFSET + 2
    if magic == 1:
        struct.pack_into(">q", out, p, timestamp)
        p += 8
    struct.pack_into(">ii", out, p, -1, len(value))
    out[p + 8:] = value
    set_legacy_crc(out, 0, len(out))
    return out


def _stamp_log_append_time(buf: bytearray) -> None:
    """Set the LogAppendTime bit of every v1 message in buf (their timestamps are already set)."""
    pos = 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + LOG_OVERHEAD + size
        buf[pos + MAGIC_OFFSET + 1] |= TIMESTAMP_TYPE_MASK_V1
        set_legacy_crc(buf, pos, end)
        pos = end
