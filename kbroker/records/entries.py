"""Top-level log entries in a buffer, read from their headers only (no decompression, no record parsing).

A log holds a sequence of entries: v2 record batches (magic 2) or v0/v1 messages (magic 0/1; a compressed
one is a wrapper whose value holds the inner messages). Every entry starts with the same 12 bytes:
offset (int64) and size (int32) of what follows. This module finds entry boundaries, offsets, timestamps
and checks CRCs, which is all the log needs for appends, index building and recovery.

Layouts (big-endian):
- v2 batch: baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I (CRC-32C from attributes to
  the end), attributes h, lastOffsetDelta i, firstTimestamp q, maxTimestamp q, producerId q, producerEpoch h,
  baseSequence i, recordCount i, then the records: 61 bytes of header.
- v0 message: offset q, size i, crc I (CRC-32 from magic to the end), magic b, attributes b, key (i + bytes),
  value (i + bytes). v1 adds timestamp q after attributes. A compressed wrapper's offset is the offset of its
  last inner message.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import crc32c

LOG_OVERHEAD = 12                      # offset + size
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE = V2_HEADER.size        # 61
V2_CRC_OFFSET = 17                     # crc field position
V2_ATTRIBUTES_OFFSET = 21              # CRC-32C covers from here to the end
MAGIC_OFFSET = 16                      # same position for every magic
LEGACY_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
LEGACY_MIN_SIZE = {0: 14, 1: 22}       # crc..value with null key and value
NO_TIMESTAMP = -1

# attributes
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK_V2 = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
TIMESTAMP_TYPE_MASK_V1 = 0x08


class CorruptEntry(ValueError):
    """An entry whose size, magic or CRC is wrong; `position` is where it starts."""

    def __init__(self, position: int, message: str):
        super().__init__(f"at byte {position}: {message}")
        self.position = position


@dataclass(frozen=True)
class Entry:
    position: int        # where the entry starts in the buffer
    size: int            # total bytes, including the 12-byte offset+size prefix
    magic: int
    base_offset: int     # v2: baseOffset; legacy uncompressed: the offset; legacy compressed: -1 (unknown)
    last_offset: int
    max_timestamp: int   # v2: maxTimestamp; v1: the message timestamp; v0: -1
    attributes: int
    record_count: int    # v2: from the header; legacy: 1 (a wrapper counts as 1 here)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK


def read_entry(buf, pos: int, end: int | None = None) -> Entry | None:
    """The entry starting at pos, or None if fewer bytes than a whole entry remain (a partial tail).
    Raises CorruptEntry on an impossible size or magic."""
    end = len(buf) if end is None else end
    if end - pos < LOG_OVERHEAD + 5:
        return None
    offset, size = struct.unpack_from(">qi", buf, pos)
    magic = buf[pos + MAGIC_OFFSET]
    if magic > 2:
        raise CorruptEntry(pos, f"unknown magic {magic}")
    if magic == 2:
        if size < V2_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptEntry(pos, f"batch length {size} is shorter than a v2 batch header")
    elif size < LEGACY_MIN_SIZE[magic]:
        raise CorruptEntry(pos, f"message size {size} is shorter than a v{magic} message")
    total = LOG_OVERHEAD + size
    if end - pos < total:
        return None
    if magic == 2:
        (base, _, _, _, _, attributes, last_delta, _, max_ts, _, _, _, count) = V2_HEADER.unpack_from(buf, pos)
        return Entry(pos, total, 2, base, base + last_delta, max_ts, attributes, count)
    attributes = buf[pos + MAGIC_OFFSET + 1]
    ts = struct.unpack_from(">q", buf, pos + MAGIC_OFFSET + 2)[0] if magic == 1 else NO_TIMESTAMP
    base = -1 if attributes & COMPRESSION_MASK else offset
    return Entry(pos, total, magic, base, offset, ts, attributes, 1)


def crc_valid(buf, entry: Entry) -> bool:
    start = entry.position
    if entry.magic == 2:
        stored = struct.unpack_from(">I", buf, start + V2_CRC_OFFSET)[0]
        return crc32c.crc32c(memoryview(buf)[start + V2_ATTRIBUTES_OFFSET:start + entry.size]) == stored
    stored = struct.unpack_from(">I", buf, start + LOG_OVERHEAD)[0]
    return zlib.crc32(memoryview(buf)[start + MAGIC_OFFSET:start + entry.size]) == stored


def iter_entries(buf, start: int = 0, end: int | None = None, check_crc: bool = False):
    """Yield the whole entries from start; stop silently at a partial tail, raise CorruptEntry at a bad one."""
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        entry = read_entry(buf, pos, end)
        if entry is None:
            return
        if check_crc and not crc_valid(buf, entry):
            raise CorruptEntry(pos, f"CRC mismatch in magic {entry.magic} entry at offset {entry.last_offset}")
        yield entry
        pos += entry.size
