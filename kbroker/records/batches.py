"""Record-level work on whole entries: decode the records of a v2 batch or of a v0/v1 message (inflating a
compressed one within a byte limit), and build v2 batches or v0/v1 message sets from records.

Validation and conversion need this whenever the header alone is not enough. Per-record encoding and
decoding of v2 records and of v0/v1 messages is aiokafka's C code (`aiokafka.record._crecords`); compression
and every header and wrapper field are written here, so the framing is Kafka's (see compression.py).

Records are objects with offset, timestamp, key, value and headers (a list of (str, bytes | None)): decoded
v2 records are aiokafka DefaultRecord objects (under a LogAppendTime batch the timestamp is the batch's
maxTimestamp, as in Kafka), decoded v0/v1 messages LegacyRecord tuples; builders take either.
"""
from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

import crc32c
from aiokafka.errors import CorruptRecordException
from aiokafka.record._crecords import DefaultRecordBatch, DefaultRecordBatchBuilder, LegacyRecordBatchBuilder

from ..protocol.errors import Errors, KafkaError
from .compression import NONE, ZSTD, compress, decompress
from .entries import (COMPRESSION_MASK, LEGACY_HEADER, LEGACY_MIN_SIZE, LOG_OVERHEAD,
                      MAGIC_OFFSET, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK_V1, TIMESTAMP_TYPE_MASK_V2,
                      TRANSACTIONAL_MASK, V2_ATTRIBUTES_OFFSET, V2_CRC_OFFSET, V2_HEADER_SIZE)

CREATE_TIME, LOG_APPEND_TIME = 0, 1
MIN_V2_RECORD_SIZE = 7          # length, attributes, timestampDelta, offsetDelta, key, value, headers: 1 byte each
_NO_LIMIT = 2 ** 31 - 1         # builders' batch size: never refuse a record
V2_MAX_TIMESTAMP_OFFSET = 35    # maxTimestamp in a v2 header
_COUNT_OFFSET = 57              # recordCount in a v2 header


class LegacyRecord(NamedTuple):
    """One v0/v1 message. `offset` is absolute (v1 inner offsets already resolved against the wrapper);
    `timestamp` is -1 for v0 and, under a LogAppendTime wrapper, the wrapper's."""
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    magic: int
    attributes: int
    headers = ()


def invalid(message: str) -> KafkaError:
    return KafkaError(Errors.INVALID_RECORD, message)


def corrupt(message: str) -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, message)


# decoding --------------------------------------------------------------------------------------------

def v2_records(buf, pos: int, size: int, limit: int) -> list:
    """The records of the v2 batch of `size` bytes at `pos`; INVALID_RECORD if they do not parse or their
    count does not fit the bytes (a record takes at least 7), CORRUPT_MESSAGE if decompression fails."""
    view = memoryview(buf)[pos:pos + size]
    codec = view[V2_ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
    (count,) = struct.unpack_from(">i", view, _COUNT_OFFSET)
    if codec == NONE:
        data, records_size = view, size - V2_HEADER_SIZE
    else:
        payload = decompress(codec, view[V2_HEADER_SIZE:], limit, 2)
        header = bytearray(view[:V2_HEADER_SIZE])
        header[V2_ATTRIBUTES_OFFSET + 1] &= ~COMPRESSION_MASK & 0xFF
        data, records_size = bytes(header) + payload, len(payload)
    if count < 0 or count * MIN_V2_RECORD_SIZE > records_size:
        raise invalid(f"record count {count} does not fit in {records_size} bytes of records")
    try:
        return list(DefaultRecordBatch(data))
    except (CorruptRecordException, ValueError, IndexError) as e:
        raise invalid(f"invalid record in batch: {e}") from e


def check_v2_framing(buf, pos: int, size: int) -> None:
    """Walk the records of the uncompressed v2 batch at pos with aiokafka's C reader (tens of ns a record,
    nothing kept): INVALID_RECORD when a record does not parse or the count disagrees with the bytes, as
    Kafka's per-record validation would find, so no batch consumers cannot read is ever stored."""
    try:
        for _ in DefaultRecordBatch(memoryview(buf)[pos:pos + size]):
            pass
    except (CorruptRecordException, ValueError, IndexError) as e:
        raise invalid(f"invalid record in batch: {e}") from e


def legacy_message(view, pos: int, end: int, check_crc: bool = True) -> tuple[LegacyRecord, int]:
    """The v0/v1 message at pos (its own magic decides the layout) and where the next one starts."""
    if end - pos < LOG_OVERHEAD + LEGACY_MIN_SIZE[0]:
        raise corrupt(f"truncated message at byte {pos}")
    offset, size, crc, magic, attributes = LEGACY_HEADER.unpack_from(view, pos)
    if magic not in (0, 1):
        raise corrupt(f"invalid magic {magic} in message at byte {pos}")
    stop = pos + LOG_OVERHEAD + size
    if size < LEGACY_MIN_SIZE[magic] or stop > end:
        raise corrupt(f"message size {size} at byte {pos} is invalid")
    if check_crc and zlib.crc32(view[pos + MAGIC_OFFSET:stop]) != crc:
        raise corrupt(f"message at offset {offset} is corrupt (CRC mismatch)")
    p = pos + MAGIC_OFFSET + 2
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = struct.unpack_from(">q", view, p)
        p += 8
    (key_len,) = struct.unpack_from(">i", view, p)
    p += 4
    if key_len < -1 or p + max(key_len, 0) + 4 > stop:
        raise corrupt(f"message at offset {offset} has an invalid key length {key_len}")
    key = None if key_len < 0 else bytes(view[p:p + key_len])
    p += max(key_len, 0)
    (value_len,) = struct.unpack_from(">i", view, p)
    p += 4
    if value_len < -1 or p + max(value_len, 0) != stop:
        raise corrupt(f"message at offset {offset} has an invalid value length {value_len}")
    value = None if value_len < 0 else bytes(view[p:stop])
    return LegacyRecord(offset, timestamp, key, value, magic, attributes), stop


def legacy_records(buf, pos: int, size: int, limit: int) -> list[LegacyRecord]:
    """The records of the v0/v1 entry at pos (its CRC already checked): the message itself, or the inner
    messages of a compressed wrapper with absolute offsets, as Kafka's deep iterator gives them."""
    view = memoryview(buf)
    wrapper, _ = legacy_message(view, pos, pos + size, check_crc=False)
    codec = wrapper.attributes & COMPRESSION_MASK
    if codec == NONE:
        return [wrapper]
    if codec >= ZSTD:
        raise invalid(f"invalid wrapper compression type {codec} for magic {wrapper.magic}")
    if wrapper.value is None:
        raise invalid(f"compressed message set with null value (magic {wrapper.magic})")
    inner = memoryview(decompress(codec, wrapper.value, limit, wrapper.magic))
    messages = []
    p = 0
    while p < len(inner):
        message, p = legacy_message(inner, p, len(inner))
        messages.append(message)
    if not messages:
        raise invalid("compressed message set with no inner records")
    if wrapper.magic == 0:
        return messages
    # v1: inner offsets are relative; the wrapper holds the last one's absolute offset (0 from some librdkafka)
    base = 0
    if wrapper.offset != 0:
        if wrapper.offset < messages[-1].offset:
            raise invalid(f"wrapper offset {wrapper.offset} is less than the last inner offset "
                          f"{messages[-1].offset}")
        base = wrapper.offset - messages[-1].offset
    log_append = wrapper.attributes & TIMESTAMP_TYPE_MASK_V1
    return [LegacyRecord(base + m.offset, wrapper.timestamp if log_append and m.magic == 1 else m.timestamp,
                         m.key, m.value, m.magic, m.attributes) for m in messages]


# building --------------------------------------------------------------------------------------------

def build_v2(records, *, first_offset: int | None = None, codec: int, timestamp_type: int, log_append_time: int,
             producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             transactional: bool = False, partition_leader_epoch: int = -1) -> bytearray:
    """One v2 batch holding `records`, at their own offsets or renumbered from first_offset, compressed with
    `codec` (kept even if larger, as Kafka does). Under LogAppendTime the records keep their timestamps and
    maxTimestamp is log_append_time."""
    builder = DefaultRecordBatchBuilder(2, NONE, int(transactional), producer_id, producer_epoch,
                                        base_sequence, _NO_LIMIT)
    append = builder.append
    if first_offset is None:
        first_offset = records[0].offset
        for r in records:
            append(r.offset - first_offset, r.timestamp, r.key, r.value, r.headers or [])
    else:
        for delta, r in enumerate(records):
            append(delta, r.timestamp, r.key, r.value, r.headers or [])
    out = builder.build()
    if codec != NONE:
        out[V2_HEADER_SIZE:] = compress(codec, memoryview(out)[V2_HEADER_SIZE:], 2)
    attributes = codec | (TRANSACTIONAL_MASK if transactional else 0)
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK_V2
        struct.pack_into(">q", out, V2_MAX_TIMESTAMP_OFFSET, log_append_time)
    struct.pack_into(">qii", out, 0, first_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch)
    struct.pack_into(">h", out, V2_ATTRIBUTES_OFFSET, attributes)
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


def set_v2_crc(buf, pos: int, end: int) -> None:
    struct.pack_into(">I", buf, pos + V2_CRC_OFFSET,
                     crc32c.crc32c(memoryview(buf)[pos + V2_ATTRIBUTES_OFFSET:end]))


def set_legacy_crc(buf, pos: int, end: int) -> None:
    struct.pack_into(">I", buf, pos + LOG_OVERHEAD, zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET:end]))

