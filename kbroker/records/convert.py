"""Fetch-side down-conversion for clients that cannot read the log's magic (Fetch v0-1 read magic 0, v2-3
magic 1), lazy as Kafka's LazyDownConversionRecords (KIP-283): the log is read and converted one entry at a
time, only as far as the response's byte budget goes, so memory stays bounded by the budget plus one read.

As Kafka's RecordsUtil.downConvert: entries already at or below the wanted magic pass through unchanged;
control batches are dropped (v0/v1 have no transaction markers); zstd batches cannot be converted (answered
with UNSUPPORTED_COMPRESSION_TYPE if nothing was converted yet, else the output stops before them so the
client's next fetch gets the error); offsets are kept (compressed: v1 wrapper = last offset with inner offsets
relative to the first record's, v0 absolute inner offsets, same codec); timestamps are kept with their type
for v1 and dropped for v0; headers are dropped. From an uncompressed v2 batch, records before the fetch offset
are skipped (each becomes its own message, so they can be; a compressed batch is converted whole). Beyond
Kafka, a compressed batch none of whose records reaches the fetch offset is left out: after compaction removed
the last records of a v2 batch (its offsets still cover them), a v1 wrapper can only end at the last record
kept, and an old consumer fetching from just after that record would get the same wrapper forever.

The output never exceeds max_bytes, except that the conversion of the first entry is always returned whole
so a consumer can make progress whatever its fetch size; an entry that does not fit is cut after its last
whole message that does (a partial batch, as Kafka's chunked conversion may return).

Beyond Kafka, converted entries are kept in a ConversionCache keyed by (file id, position, magic): N old
consumers of one partition cost about one conversion, and a cached read is a chain of dict lookups giving
slices of in-memory files that go out with os.sendfile, as the log's own bytes do. The file id must change
whenever the bytes at a position may change (log.segment's file_id does on truncation and recovery; a cleaned
or new segment has its own), so a stale entry can never be found again; the LRU bound (in bytes) evicts such
dead entries like any other. Converting holds the GIL (aiokafka's C code), so it runs on the hub, yielding
between stretches (`pause`), rather than in a thread.
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from aiokafka.errors import CorruptRecordException
from aiokafka.record._crecords import DefaultRecordBatch, LegacyRecordBatchBuilder

from ..protocol.errors import Errors, KafkaError
from .batches import CREATE_TIME, LOG_APPEND_TIME, legacy_records, v2_records
from .builder import build_legacy
from .compression import NONE, ZSTD
from .entries import (CONTROL_MASK, LOG_OVERHEAD, TIMESTAMP_TYPE_MASK_V1, TIMESTAMP_TYPE_MASK_V2, CorruptEntry,
                      Entry, read_entry)
from .validator import DEFAULT_DECOMPRESSION_LIMIT

READ_BYTES = 64 * 1024       # source bytes read at a time (or one larger entry)
PAUSE_BYTES = 1024 * 1024    # source bytes converted between two calls of `pause`
ARENA_BYTES = 4 * 1024 * 1024  # what a cache arena holds (see ConversionCache)
_ENTRY_OVERHEAD = 200        # bytes a cached entry costs beyond its data (key, record, LRU link), for the bound
_NO_LIMIT = 2 ** 31 - 1
_OFFSET_SIZE = struct.Struct(">qi")


def magic_for_fetch_version(version: int) -> int:
    """The newest record magic a Fetch request of this version can carry."""
    return 0 if version <= 1 else 1 if version <= 3 else 2


class CachedSlice(NamedTuple):
    """`length` bytes of a conversion cache arena (an in-memory file) from `position`: sent with os.sendfile like
    a log file slice. Holding one keeps its arena, and so the file, open: an arena evicted while a response
    that holds its slices is being sent closes its file only after that."""
    fd: int
    position: int
    length: int
    arena: "_Arena"


Piece = bytes | bytearray | memoryview | CachedSlice


class Converted(NamedTuple):
    """One source entry as a client of the wanted magic receives it."""
    data: Piece                 # the converted entry, the entry itself when it needs none, b"" when dropped
    next_position: int          # where the next source entry starts
    records: int                # records converted (0 when passed through or dropped)
    base_offset: int            # the source entry's first offset (-1: a v0/v1 wrapper's is not known)
    next_offset: int            # the offset after the source entry's last
    per_record: bool            # one message per record: records before the fetch offset can be cut off
    unsupported: bool = False   # zstd: cannot be converted, the output stops here


class _Arena:
    """An in-memory file (memfd) that converted entries are appended to, and the entries kept in it."""

    def __init__(self):
        self.fd = os.memfd_create("kbroker-downconversion", os.MFD_CLOEXEC)
        self.used = 0           # bytes written
        self.counted = 0        # bytes counted against the cache's bound (with each entry's overhead)
        self.entries: list = []  # (key, Converted)
        self.messages: dict = {}  # position of an entry -> its messages' offsets and ends (see _messages)

    def append(self, data) -> CachedSlice:
        view, written = memoryview(data), 0
        while written < len(view):
            written += os.pwrite(self.fd, view[written:], self.used + written)
        piece = CachedSlice(self.fd, self.used, len(view), self)
        self.used += len(view)
        return piece

    def __del__(self):
        os.close(self.fd)


class ConversionCache:
    """Converted entries by (file id, position, magic), at most max_bytes in all (each entry counted with a
    fixed overhead); max_bytes 0 keeps nothing. Their bytes go to arenas of ARENA_BYTES (max_bytes / 8 for a
    small bound, max_bytes / 64 for a large one; a larger entry gets its own), and the least recently used
    arena goes first, with its entries: the bytes are sent with os.sendfile, with no copy in the broker. Not
    counted: 16 bytes per message of the entries a fetch started inside or cut (their message index)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = 0
        # at least 8 arenas for small bounds, at most 64 (open files) for large ones
        self._arena_bytes = max(1, min(ARENA_BYTES, max_bytes // 8), max_bytes // 64)
        self._entries: dict = {}
        self._arenas: OrderedDict = OrderedDict()      # _Arena -> None, least recently used first
        self._current: _Arena | None = None           # where small entries are appended

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key) -> Converted | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        if found.data:
            self._arenas.move_to_end(found.data.arena)
        return found

    def put(self, key, converted: Converted) -> Converted:
        """Keep converted (when it fits the bound); returns it as kept, its data in an arena."""
        size = len(converted.data) + _ENTRY_OVERHEAD
        if size > self.max_bytes:
            return converted
        arena = self._current
        if converted.data and (arena is None or arena.used + len(converted.data) > self._arena_bytes):
            arena = _Arena()
            if len(converted.data) < self._arena_bytes:
                self._current = arena
        elif arena is None:
            arena = self._current = _Arena()
        if converted.data:
            converted = converted._replace(data=arena.append(converted.data))
        self._arenas[arena] = None
        self._arenas.move_to_end(arena)
        arena.entries.append((key, converted))
        arena.counted += size
        self._entries[key] = converted
        self.bytes += size
        while self.bytes > self.max_bytes:
            self._evict(next(iter(self._arenas)))
        return converted

    def _evict(self, arena: _Arena) -> None:
        del self._arenas[arena]
        if arena is self._current:
            self._current = None
        for key, converted in arena.entries:
            if self._entries.get(key) is converted:
                del self._entries[key]
        arena.entries = []      # they refer to the arena: now only slices in flight keep it (and its file)
        self.bytes -= arena.counted


def down_convert(read: Callable[[int, int], bytes], file_id, start: int, end: int, to_magic: int, *,
                 fetch_offset: int, max_bytes: int, cache: ConversionCache,
                 decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT,
                 pause: Callable[[], None] | None = None) -> tuple[list, int, int | None]:
    """(pieces, records converted, the offset after the last entry read or None) for the entries of bytes
    [start, end) of a file (read(position, length) returns its bytes; start is an entry boundary) converted to
    `to_magic`: pieces of bytes or CachedSlice (sent like file slices), at most max_bytes in all except
    that the first converted entry is always whole; a partial entry at the end is ignored. Entries come from
    `cache` when there, else are converted and put there. pause() is called after each PAUSE_BYTES of source
    converted (the broker yields to other connections there)."""
    pieces: list = []
    budget = max_bytes
    started = False
    records = 0
    next_offset = None
    source = _Source(read, end)
    work = 0
    pos = start
    while pos < end:
        key = (file_id, pos, to_magic)
        done = cache.get(key)
        if done is None:
            view, entry = source.entry_at(pos)
            if entry is None:
                break
            done = _convert(view, entry, pos, to_magic, decompression_limit)
            records += done.records
            if done.records or not done.data:     # entries passed through unchanged are not kept
                done = cache.put(key, done)
            work += entry.size
            if pause is not None and work >= PAUSE_BYTES:
                pause()
                work = 0
        elif done.next_position > end:
            break       # cached from a read that went further (another consumer's high watermark or isolation)
        if done.unsupported:
            if not started:
                raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                                 "Down-conversion of zstandard-compressed batches is not supported")
            break
        pos = done.next_position
        next_offset = done.next_offset
        data = done.data
        first = 0           # where the messages sent start in data
        if done.base_offset < fetch_offset and data:
            offsets, ends = _messages(data)
            if done.per_record:
                i = bisect_left(offsets, fetch_offset)
                first = ends[i - 1] if i else 0
            elif offsets[-1] < fetch_offset:
                continue        # a wrapper whose records all come before the fetch offset (see above)
        size = _size(data) - first
        if not size:
            continue
        if started and size > budget:
            ends = _messages(data)[1]
            j = bisect_right(ends, first + budget)
            if j and ends[j - 1] > first:
                _add(pieces, _part(data, first, ends[j - 1]))
            break
        started = True
        budget -= size
        _add(pieces, _part(data, first, _size(data)))
    return pieces, records, next_offset


def _add(pieces: list, piece: Piece) -> None:
    """Append piece; a cached slice that continues the last one in its arena (entries converted one after the
    other are stored so) lengthens it instead: a response from the cache is a few sendfile calls, not one per
    entry."""
    last = pieces[-1] if pieces else None
    if (isinstance(piece, CachedSlice) and isinstance(last, CachedSlice) and last.arena is piece.arena
            and last.position + last.length == piece.position):
        pieces[-1] = last._replace(length=last.length + piece.length)
    else:
        pieces.append(piece)


class _Source:
    """Whole entries of the file below `end`, read READ_BYTES (or one larger entry) at a time."""

    def __init__(self, read, end: int):
        self._read = read
        self._end = end
        self._buf = memoryview(b"")
        self._start = 0

    def entry_at(self, pos: int) -> tuple[memoryview, Entry | None]:
        """(buffer, the whole entry at pos in it), or (_, None) when it does not end before `end`. A miss
        reads the entry's size, then the entry, or READ_BYTES when it is smaller (the next entries are likely
        misses too): a miss among cached entries does not read ahead what they hold."""
        try:
            entry = read_entry(self._buf, pos - self._start) if pos >= self._start else None
            if entry is None:
                head = self._read(pos, min(LOG_OVERHEAD, self._end - pos))
                if len(head) < LOG_OVERHEAD:
                    return self._buf, None
                size = LOG_OVERHEAD + _OFFSET_SIZE.unpack_from(head)[1]
                if size > self._end - pos:
                    return self._buf, None
                self._buf = memoryview(self._read(pos, min(max(size, READ_BYTES), self._end - pos)))
                self._start = pos
                entry = read_entry(self._buf, 0)
        except CorruptEntry as e:
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"corrupt log data: {e}") from e
        return self._buf, entry


def _convert(view: memoryview, entry: Entry, pos: int, to_magic: int, limit: int) -> Converted:
    """The entry (at entry.position in view; at pos in its file) as a client of to_magic gets it."""
    after = pos + entry.size
    if to_magic < 2 and entry.magic == 2 and entry.attributes & CONTROL_MASK:
        return Converted(b"", after, 0, entry.base_offset, entry.last_offset + 1, False)
    if to_magic < 2 and entry.compression == ZSTD:
        return Converted(b"", after, 0, entry.base_offset, entry.last_offset + 1, False, True)
    if entry.magic <= to_magic:
        return Converted(bytes(view[entry.position:entry.position + entry.size]), after, 0, entry.base_offset,
                         entry.last_offset + 1, False)
    per_record = entry.compression == NONE
    if entry.magic == 2 and per_record and not entry.attributes & TIMESTAMP_TYPE_MASK_V2:
        data = _plain_v2(view[entry.position:entry.position + entry.size], to_magic)
    else:
        data = _rebuilt(view, entry, to_magic, limit)
    return Converted(data, after, entry.record_count, entry.base_offset, entry.last_offset + 1, per_record)


def _plain_v2(batch: memoryview, to_magic: int) -> bytearray:
    """An uncompressed CreateTime v2 batch as one message per record, streamed through aiokafka's C reader and
    builder (no list, no record kept): the common case, and the fast one."""
    builder = LegacyRecordBatchBuilder(to_magic, NONE, _NO_LIMIT)
    append = builder.append
    try:
        for r in DefaultRecordBatch(batch):
            append(r.offset, r.timestamp, r.key, r.value)
    except (CorruptRecordException, ValueError, IndexError) as e:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"corrupt log data: invalid record in batch: {e}") from e
    return builder.build()


def _rebuilt(view, entry: Entry, to_magic: int, limit: int) -> bytearray:
    """Any other entry: its records decoded (decompressed) into a list, then built as messages (a compressed
    entry as one wrapper with its codec)."""
    if entry.magic == 2:
        records = v2_records(view, entry.position, entry.size, limit)
        log_append = entry.attributes & TIMESTAMP_TYPE_MASK_V2
    else:
        records = legacy_records(view, entry.position, entry.size, limit)
        log_append = entry.magic == 1 and entry.attributes & TIMESTAMP_TYPE_MASK_V1
    if not records:
        return bytearray()
    return build_legacy(records, magic=to_magic, codec=entry.compression,
                        timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                        log_append_time=entry.max_timestamp)


def _size(piece: Piece) -> int:
    return piece.length if isinstance(piece, CachedSlice) else len(piece)


def _messages(data: Piece) -> tuple[array, array]:
    """(offsets, end positions) of the v0/v1 messages in data: walked once for a cached entry (its arena keeps
    them), when a fetch starts inside it or cuts it."""
    if isinstance(data, CachedSlice):
        found = data.arena.messages.get(data.position)
        if found is None:
            found = data.arena.messages[data.position] = _walk(os.pread(data.fd, data.length, data.position))
        return found
    return _walk(data)


def _walk(buf) -> tuple[array, array]:
    offsets, ends = array("q"), array("q")
    pos, end, unpack = 0, len(buf), _OFFSET_SIZE.unpack_from
    while pos < end:
        offset, size = unpack(buf, pos)
        pos += LOG_OVERHEAD + size
        offsets.append(offset)
        ends.append(pos)
    return offsets, ends


def _part(piece: Piece, start: int, end: int) -> Piece:
    """Bytes [start, end) of a piece."""
    if start == 0 and end == _size(piece):
        return piece
    if isinstance(piece, CachedSlice):
        return piece._replace(position=piece.position + start, length=end - start)
    return memoryview(piece)[start:end]
