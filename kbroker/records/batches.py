"""Record-level reading of whole entries: decode the records of a v2 batch or of a v0/v1 message (inflating a
compressed one within a byte limit); building them is builder.py.

Validation, conversion and the log cleaner need this whenever the header alone is not enough. Per-record
decoding of v2 records is aiokafka's C code (`aiokafka.record._crecords`); v0/v1 messages are parsed here
(their layout is a dozen fixed fields), so corrupt input gets Kafka's errors.

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
from aiokafka.record._crecords import DefaultRecordBatch

from ..protocol.errors import Errors, KafkaError
from .compression import NONE, ZSTD, decompress
from .entries import (COMPRESSION_MASK, LEGACY_HEADER, LEGACY_MIN_SIZE, LOG_OVERHEAD,
                      MAGIC_OFFSET, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK_V1, V2_ATTRIBUTES_OFFSET, V2_CRC_OFFSET,
                      V2_HEADER_SIZE)

CREATE_TIME, LOG_APPEND_TIME = 0, 1
MIN_V2_RECORD_SIZE = 7          # length, attributes, timestampDelta, offsetDelta, key, value, headers: 1 byte each
V2_MAX_TIMESTAMP_OFFSET = 35    # maxTimestamp in a v2 header
_COUNT_OFFSET = 57              # recordCount in a v2 header


class LegacyRecord(NamedTuple):
    """One v0/v1 message. `offset` is absolute (v1 inner offsets already resolved against the wrapper);
    `timestamp` is -1 for v0 and, under a LogAppendTime wrapper, the wrapper's; `crc` is the message's stored
    checksum (kadmin dump-log prints it)."""
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    magic: int
    attributes: int
    crc: int = 0
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
    return LegacyRecord(offset, timestamp, key, value, magic, attributes, crc), stop


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
                         m.key, m.value, m.magic, m.attributes, m.crc) for m in messages]


# checksums (written by the builders, and by validation when it rewrites a header in place) -------------

def set_v2_crc(buf, pos: int, end: int) -> None:
    struct.pack_into(">I", buf, pos + V2_CRC_OFFSET,
                     crc32c.crc32c(memoryview(buf)[pos + V2_ATTRIBUTES_OFFSET:end]))


def set_legacy_crc(buf, pos: int, end: int) -> None:
    struct.pack_into(">I", buf, pos + LOG_OVERHEAD, zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET:end]))

