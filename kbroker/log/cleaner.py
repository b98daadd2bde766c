"""The log cleaner: compaction of the logs whose cleanup.policy includes `compact` (Kafka's LogCleaner,
LogCleanerManager and Cleaner).

A compacted log keeps, for every key, at least its latest record. It is split at the cleaner checkpoint (the
`cleaner-offset-checkpoint` of its log dir, Kafka's offset checkpoint format) into a clean section (already
compacted) and a dirty section. The dirty section ends at the first uncleanable offset: the smallest of the
active segment's base offset, the high watermark (no transactions yet, so it is the last stable offset) and
the base offset of the first dirty segment whose largest timestamp is within min.compaction.lag.ms of now.

Selection (`LogCleaner.clean_logs`, called by the broker every log.cleaner.backoff.ms): the compacted logs
whose dirty ratio (cleanable bytes / (clean + cleanable bytes)) is above min.cleanable.dirty.ratio, or that
have cleanable bytes and a dirty segment whose first batch is older than max.compaction.lag.ms, are cleaned
dirtiest first, each at most once per call.

Cleaning one log:
1. Off the gevent hub (run_blocking): build the map key -> latest offset of the dirty section. The map holds at
   most log.cleaner.dedupe.buffer.size / 24 * log.cleaner.io.buffer.load.factor keys (the entries Kafka's map
   of 24-byte slots holds); when it is full the dirty section ends at the first record that did not fit, and
   the next cleaning goes on from there. The same pass reads every batch header of the log for the last batch
   of each idempotent producer.
2. The segments from the start of the log to the end of the dirty section are grouped (consecutive segments
   whose log and index sizes sum to at most segment.bytes / segment.index.bytes and whose offsets fit the
   first one's 4-byte relative offsets: Kafka's groupSegmentsBySize); each group is recopied off the hub into
   one `<base>.log.cleaned` segment keeping a record only if it has a key, no later offset of its key is in
   the map, and it is not a tombstone (null value) past its retention. A v2 batch whose records all stay is
   copied as is; one that lost some is rebuilt with its original base offset, last offset delta, producer id
   and epoch, base sequence, partition leader epoch, attributes and compression (the first timestamp becomes
   the first kept record's, as in Kafka); an emptied batch is kept as an empty batch (header only, same
   offsets and sequence numbers) when it is its producer's last batch, so the idempotent producer state
   survives a reload, and dropped otherwise. v0/v1 messages are kept or dropped whole; a compressed wrapper
   that lost some inner messages is rebuilt with its codec.
3. Back on the hub, each cleaned segment is swapped in (Log.replace_segments: `.cleaned` -> `.swap`, old
   segments `.deleted`, `.swap` -> final; a crash in between is repaired when the log is loaded), unless the
   log was truncated, deleted, renamed or lost one of those segments meanwhile: then the cleaning is aborted
   and its files removed. After the last group the checkpoint moves to the end of the dirty section.

Tombstones and transaction markers stay at least delete.retention.ms after they entered the clean section
(measured per offset, not per segment, so merging segments never keeps them forever as Kafka 2.8 could): a
cleaning that ends at offset E at time T records (E, T); a tombstone below the largest E recorded at least
delete.retention.ms ago is removed. After a restart, the offsets below the checkpoint count as cleaned when
the newest clean segment was written (its modification time, which the cleaner sets from its clock).
A transaction marker (control batch) is removed only past that horizon and when no data of its transaction
is left before it. (kbroker has no transactions yet: aborted data is not removed, and the high watermark
stands for the last stable offset.)

Retention and compaction: Log.delete_old_segments applies retention.ms / retention.bytes only to logs whose
policy includes `delete`, so `compact` logs are only compacted and `compact,delete` logs get both; while a log
is being cleaned LogManager.cleanup_logs skips it, and the cleaner applies its retention right after.

Topic settings: min.cleanable.dirty.ratio, delete.retention.ms, min.compaction.lag.ms and
max.compaction.lag.ms come from the topic's overrides (LogConfig.passthrough), else from the broker's
log.cleaner.min.cleanable.ratio, log.cleaner.delete.retention.ms, log.cleaner.min.compaction.lag.ms and
log.cleaner.max.compaction.lag.ms (CleanerConfig).
"""
from __future__ import annotations

import logging
import os
import struct
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from aiokafka.record._crecords import DefaultRecordBatchBuilder

from ..clock import Clock
from ..records.batches import LOG_APPEND_TIME, CREATE_TIME, build_legacy, legacy_message, legacy_records, \
    set_v2_crc, v2_records
from ..records.compression import NONE, compress
from ..records.entries import (COMPRESSION_MASK, CONTROL_MASK, LOG_OVERHEAD, TIMESTAMP_TYPE_MASK_V1,
                               TIMESTAMP_TYPE_MASK_V2, TRANSACTIONAL_MASK, V2_HEADER, V2_HEADER_SIZE, CorruptEntry,
                               Entry, read_entry)
from .checkpoint import OffsetCheckpointFile, fsync_dir
from .config import MAX_LONG, LogConfig
from .errors import CorruptCheckpoint
from .index import MAX_RELATIVE_OFFSET
from .log import Log, RunBlocking, TopicPartition
from .segment import LogSegment

logger = logging.getLogger("kbroker.log.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
MAP_ENTRY_BYTES = 24                 # Kafka's SkimpyOffsetMap slot: 16-byte MD5 of the key + 8-byte offset
_DECOMPRESSION_LIMIT = 2 ** 31 - 1   # data in the log was validated when appended
_NO_LIMIT = 2 ** 31 - 1
_SIZE = struct.Struct(">qi")
_INT64 = struct.Struct(">q")


class CleaningAborted(Exception):
    """The log changed under the cleaner (truncated, deleted, renamed) or the cleaner is shutting down."""


# ---- configuration ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings; the last four are the defaults of the topic configs."""
    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15000
    delete_retention_ms: int = 86400000
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = MAX_LONG

    @classmethod
    def from_broker(cls, values: Mapping) -> "CleanerConfig":
        """From BrokerConfig.values (Kafka's names); absent settings keep their defaults."""
        names = {"enable": "log.cleaner.enable", "threads": "log.cleaner.threads",
                 "dedupe_buffer_size": "log.cleaner.dedupe.buffer.size",
                 "io_buffer_size": "log.cleaner.io.buffer.size",
                 "io_buffer_load_factor": "log.cleaner.io.buffer.load.factor",
                 "backoff_ms": "log.cleaner.backoff.ms",
                 "delete_retention_ms": "log.cleaner.delete.retention.ms",
                 "min_cleanable_ratio": "log.cleaner.min.cleanable.ratio",
                 "min_compaction_lag_ms": "log.cleaner.min.compaction.lag.ms",
                 "max_compaction_lag_ms": "log.cleaner.max.compaction.lag.ms"}
        return cls(**{attr: values[name] for attr, name in names.items() if values.get(name) is not None})

    @property
    def enabled(self) -> bool:
        return self.enable and self.threads > 0

    @property
    def max_map_entries(self) -> int:
        """How many keys the offset map holds (Kafka: the dedupe buffer of one thread, 24 bytes a slot, filled
        up to the load factor)."""
        per_thread = self.dedupe_buffer_size // max(1, self.threads)
        return max(1, int(per_thread // MAP_ENTRY_BYTES * self.io_buffer_load_factor))

    @property
    def read_chunk(self) -> int:
        """Bytes read at a time (Kafka gives half the I/O buffer to reads); a larger entry is read whole."""
        return max(4096, self.io_buffer_size // 2)


@dataclass(frozen=True)
class CompactionSettings:
    """A log's compaction settings: its topic's overrides, else the broker's defaults."""
    delete_retention_ms: int
    min_cleanable_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int


def compaction_settings(config: LogConfig, defaults: CleanerConfig) -> CompactionSettings:
    overrides = config.passthrough

    def get(name: str, parse, default):
        raw = overrides.get(name)
        if raw is None:
            return default
        try:
            return parse(str(raw).strip())
        except ValueError:
            logger.warning("ignoring invalid topic config %s=%r; using %r", name, raw, default)
            return default
    return CompactionSettings(get("delete.retention.ms", int, defaults.delete_retention_ms),
                              get("min.cleanable.dirty.ratio", float, defaults.min_cleanable_ratio),
                              get("min.compaction.lag.ms", int, defaults.min_compaction_lag_ms),
                              get("max.compaction.lag.ms", int, defaults.max_compaction_lag_ms))


# ---- which part of a log is cleanable -----------------------------------------------------------------------

@dataclass
class LogToClean:
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = False
    settings: CompactionSettings | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic_partition

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


_first_batch_timestamps: "weakref.WeakKeyDictionary[LogSegment, int]" = weakref.WeakKeyDictionary()


def first_batch_timestamp(segment: LogSegment) -> int:
    """The max timestamp of the segment's first entry (Kafka's getFirstBatchTimestamp), -1 if none."""
    cached = _first_batch_timestamps.get(segment)
    if cached is not None:
        return cached
    ts = -1
    if segment.size:
        info = segment.read(segment.base_offset, V2_HEADER_SIZE, min_one_message=False)
        head = info.records.read() if info is not None else b""
        if len(head) > 16:
            magic = head[16]
            if magic == 2 and len(head) >= V2_HEADER_SIZE:
                ts = _INT64.unpack_from(head, 35)[0]
            elif magic == 1 and len(head) >= 26:
                ts = _INT64.unpack_from(head, 18)[0]
        _first_batch_timestamps[segment] = ts
    return ts


def cleanable_offsets(log: Log, checkpoint_offset: int | None, settings: CompactionSettings,
                      now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, needs compaction now) as Kafka's
    LogCleanerManager.cleanableOffsets: the checkpoint, reset to the log start offset when it is below it or
    beyond the log end; the dirty section stops at the active segment, the high watermark and the first dirty
    segment within min.compaction.lag.ms; max.compaction.lag.ms forces a cleaning when a dirty segment's first
    batch is older than that."""
    start = log.log_start_offset
    first_dirty = start if checkpoint_offset is None else checkpoint_offset
    if first_dirty < start or first_dirty > log.log_end_offset:
        first_dirty = start
    segments = log.segments
    dirty_non_active = [s for s, nxt in zip(segments, segments[1:]) if nxt.base_offset > first_dirty]
    uncleanable = min(segments[-1].base_offset, log.high_watermark)
    if settings.min_compaction_lag_ms > 0:
        for segment in dirty_non_active:
            if segment.largest_timestamp > now_ms - settings.min_compaction_lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    needs_now = False
    if 0 <= settings.max_compaction_lag_ms < MAX_LONG:
        stamps = [t for t in (first_batch_timestamp(s) for s in dirty_non_active
                              if s.base_offset < uncleanable) if t > 0]
        needs_now = bool(stamps) and min(stamps) < now_ms - settings.max_compaction_lag_ms
    return first_dirty, uncleanable, needs_now


def _segments_overlapping(segments: Sequence[LogSegment], start: int, end: int) -> list[LogSegment]:
    """The segments holding offsets in [start, end) (Kafka's logSegments(from, to))."""
    out = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset >= end:
            break
        if nxt is None or nxt > start:
            out.append(segment)
    return out


def log_to_clean(log: Log, checkpoint_offset: int | None, settings: CompactionSettings, now_ms: int) -> LogToClean:
    first_dirty, uncleanable, needs_now = cleanable_offsets(log, checkpoint_offset, settings, now_ms)
    segments = log.segments
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    cleanable_bytes = sum(s.size for s in _segments_overlapping(segments, first_dirty, max(first_dirty, uncleanable)))
    return LogToClean(log, first_dirty, uncleanable, clean_bytes, cleanable_bytes, needs_now, settings)


def group_segments_by_size(segments: Sequence[LogSegment], next_offsets: Sequence[int], max_size: int,
                           max_index_size: int) -> list[list[LogSegment]]:
    """Consecutive segments grouped so each group's log, offset index and time index sizes stay within
    max_size / max_index_size and its offsets (up to next_offsets[i] - 1, the offset before the next segment)
    fit relative to the group's base offset (Kafka's groupSegmentsBySize)."""
    groups = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        log_size, index_size, time_size = first.size, first.offset_index.entries * 8, first.time_index.entries * 12
        i += 1
        while i < len(segments):
            s = segments[i]
            if (log_size + s.size > max_size
                    or index_size + s.offset_index.entries * 8 > max_index_size
                    or time_size + s.time_index.entries * 12 > max_index_size
                    or next_offsets[i] - 1 - first.base_offset > MAX_RELATIVE_OFFSET):
                break
            group.append(s)
            log_size += s.size
            index_size += s.offset_index.entries * 8
            time_size += s.time_index.entries * 12
            i += 1
        groups.append(group)
    return groups


# ---- reading entries ------------------------------------------------------------------------------------------

def read_entries(fd: int, size: int, chunk: int, check: Callable[[], None] | None = None):
    """(buffer, Entry) for each whole entry of the first `size` bytes of a log file, read `chunk` bytes at a
    time (a larger entry is read whole); Entry.position is in the buffer. Stops at a partial tail; raises
    CorruptEntry. check() runs before each read (it raises to stop)."""
    pos = 0
    while size - pos > LOG_OVERHEAD:
        if check is not None:
            check()
        buf = os.pread(fd, min(chunk, size - pos), pos)
        n = len(buf)
        p = 0
        while True:
            entry = read_entry(buf, p, n)
            if entry is None:
                break
            yield buf, entry
            p += entry.size
        if p == 0:
            if n < LOG_OVERHEAD:
                return
            total = LOG_OVERHEAD + _SIZE.unpack_from(buf, 0)[1]
            if total <= n or pos + total > size:
                return
            buf = os.pread(fd, total, pos)
            entry = read_entry(buf, 0, len(buf))
            if entry is None:
                return
            yield buf, entry
            p = entry.size
        pos += p


def producer_last_offsets(fd: int, size: int, chunk: int, into: dict[int, int]) -> None:
    """Reading only the headers: the last offset of the last data batch of each producer id (v2)."""
    pos = 0
    buf, buf_pos = b"", 0
    while size - pos > LOG_OVERHEAD:
        need = min(V2_HEADER_SIZE, size - pos)
        rel = pos - buf_pos
        if rel + need > len(buf):
            buf, buf_pos, rel = os.pread(fd, max(chunk, need), pos), pos, 0
            if len(buf) < need:
                return
        _, length = _SIZE.unpack_from(buf, rel)
        if need < LOG_OVERHEAD + 5 or length < 0 or pos + LOG_OVERHEAD + length > size:
            return
        if buf[rel + 16] == 2:
            if need < V2_HEADER_SIZE:
                return
            (base, _, _, _, _, attributes, delta, _, _, pid, _, _, _) = V2_HEADER.unpack_from(buf, rel)
            if pid >= 0 and not attributes & CONTROL_MASK:
                into[pid] = base + delta
        pos += LOG_OVERHEAD + length


def _records_of(buf, entry: Entry) -> list:
    if entry.magic == 2:
        return v2_records(buf, entry.position, entry.size, _DECOMPRESSION_LIMIT)
    return legacy_records(buf, entry.position, entry.size, _DECOMPRESSION_LIMIT)


# ---- statistics ---------------------------------------------------------------------------------------------------

@dataclass
class CleanerStats:
    first_dirty_offset: int = 0
    end_offset: int = 0                 # the dirty section cleaned ends here (the next checkpoint)
    map_size: int = 0
    map_full: bool = False
    delete_horizon_offset: int = 0      # tombstones and markers below this offset were removable
    segments_read: int = 0
    groups: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    keyless_removed: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0
    empty_batches_retained: int = 0
    elapsed_ms: float = 0.0


# ---- the offset map and the recopying (run off the hub) ----------------------------------------------------------

@dataclass
class _Source:
    """A segment as it was when the cleaning started; its file is opened by the thread reading it (a renamed
    or deleted one aborts the cleaning)."""
    segment: LogSegment
    path: str
    size: int

    def open(self) -> int:
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise CleaningAborted() from None


class _OffsetMap:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.offsets: dict[bytes, int] = {}
        self.full = False
        self.end = -1               # when full: the offset of the first record that did not fit


def _build_offset_map(sources: Sequence[_Source], start: int, upper: int, capacity: int, chunk: int,
                      check: Callable[[], None], stats: CleanerStats) -> tuple[_OffsetMap, int, dict[int, int]]:
    """Key -> latest offset of the records in [start, upper), stopping where a new key does not fit; returns
    the map, where the mapped section ends, and each producer's last data batch (from every header)."""
    offset_map = _OffsetMap(capacity)
    producers: dict[int, int] = {}
    end = upper
    for i, src in enumerate(sources):
        fd = src.open()
        try:
            _map_segment(fd, src, sources[i + 1].segment.base_offset if i + 1 < len(sources) else None,
                         offset_map, start, upper, chunk, check, producers)
        finally:
            os.close(fd)
        if offset_map.full and offset_map.end < end:
            end = offset_map.end
    return offset_map, end, producers


def _map_segment(fd: int, src: _Source, next_base: int | None, offset_map: _OffsetMap, start: int, upper: int,
                 chunk: int, check: Callable[[], None], producers: dict[int, int]) -> None:
    offsets, capacity = offset_map.offsets, offset_map.capacity
    producer_last_offsets(fd, src.size, chunk, producers)
    if offset_map.full or src.segment.base_offset >= upper or (next_base is not None and next_base <= start):
        return
    past_upper = False
    for buf, entry in read_entries(fd, src.size, chunk, check):
        if entry.last_offset < start:
            continue
        if entry.base_offset >= upper:
            break
        if entry.magic == 2 and entry.attributes & CONTROL_MASK:
            continue
        for record in _records_of(buf, entry):
            offset = record.offset
            if offset < start:
                continue
            if offset >= upper:
                past_upper = True
                break
            key = record.key
            if key is None:
                continue
            if key not in offsets and len(offsets) >= capacity:
                offset_map.full = True
                offset_map.end = offset
                break
            offsets[key] = offset
        if offset_map.full or past_upper:
            break


class _GroupCleaner:
    """Recopies the batches of one cleaning (its groups in order), deciding record by record."""

    def __init__(self, offset_map: _OffsetMap, delete_horizon: int, producers: dict[int, int],
                 stats: CleanerStats):
        self.offsets = offset_map.offsets
        self.delete_horizon = delete_horizon
        self.producers = producers
        self.stats = stats
        self.txn_with_data: dict[int, bool] = {}     # producer id -> its open transaction kept some data

    def keep(self, key, value, offset: int) -> bool:
        if key is None:
            self.stats.keyless_removed += 1
            return False
        latest = self.offsets.get(key)
        if latest is not None and latest > offset:
            return False
        if value is None and offset < self.delete_horizon:
            self.stats.tombstones_removed += 1
            return False
        return True

    def filter(self, buf, entry: Entry):
        """The bytes to write for this entry (itself, rebuilt, or an empty batch), or None."""
        if entry.magic == 2:
            return self._filter_v2(buf, entry)
        return self._filter_legacy(buf, entry)

    def _filter_v2(self, buf, entry: Entry):
        pos = entry.position
        (base, _, leader_epoch, _, _, attributes, last_delta, _, max_ts, pid, producer_epoch, base_seq,
         count) = V2_HEADER.unpack_from(buf, pos)
        original = memoryview(buf)[pos:pos + entry.size]
        if attributes & CONTROL_MASK:
            with_data = self.txn_with_data.pop(pid, False)      # a marker ends its producer's transaction
            if not with_data and entry.last_offset < self.delete_horizon:
                self.stats.markers_removed += 1
                return None
            return original
        records = _records_of(buf, entry)
        self.stats.records_read += len(records)
        kept = [r for r in records if self.keep(r.key, r.value, r.offset)]
        self.stats.records_retained += len(kept)
        if kept:
            if attributes & TRANSACTIONAL_MASK:
                self.txn_with_data[pid] = True
            if len(kept) == len(records):
                return original
            return rebuild_v2(kept, base, last_delta, leader_epoch, attributes, max_ts, pid, producer_epoch,
                              base_seq)
        if pid >= 0 and self.producers.get(pid) == base + last_delta:
            self.stats.empty_batches_retained += 1
            return original if count == 0 else empty_v2_batch(base, last_delta, leader_epoch, attributes, max_ts,
                                                               pid, producer_epoch, base_seq)
        return None

    def _filter_legacy(self, buf, entry: Entry):
        pos = entry.position
        records = _records_of(buf, entry)
        self.stats.records_read += len(records)
        kept = [r for r in records if self.keep(r.key, r.value, r.offset)]
        self.stats.records_retained += len(kept)
        if not kept:
            return None
        original = memoryview(buf)[pos:pos + entry.size]
        if len(kept) == len(records):
            return original
        wrapper, _ = legacy_message(memoryview(buf), pos, pos + entry.size, check_crc=False)
        log_append = wrapper.magic == 1 and wrapper.attributes & TIMESTAMP_TYPE_MASK_V1
        return build_legacy(kept, magic=wrapper.magic, codec=wrapper.attributes & COMPRESSION_MASK,
                            timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                            log_append_time=wrapper.timestamp)


def rebuild_v2(records, base_offset: int, last_offset_delta: int, leader_epoch: int, attributes: int,
               max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int) -> bytearray:
    """A v2 batch of the kept records that keeps the original batch's offsets (base offset and last offset
    delta), producer fields, partition leader epoch, attributes and compression."""
    builder = DefaultRecordBatchBuilder(2, NONE, 1 if attributes & TRANSACTIONAL_MASK else 0, producer_id,
                                        producer_epoch, base_sequence, _NO_LIMIT)
    for r in records:
        builder.append(r.offset - base_offset, r.timestamp, r.key, r.value, r.headers or [])
    out = builder.build()
    codec = attributes & COMPRESSION_MASK
    if codec != NONE:
        out[V2_HEADER_SIZE:] = compress(codec, bytes(out[V2_HEADER_SIZE:]), 2)
    struct.pack_into(">qii", out, 0, base_offset, len(out) - LOG_OVERHEAD, leader_epoch)
    struct.pack_into(">hi", out, 21, attributes, last_offset_delta)
    if attributes & TIMESTAMP_TYPE_MASK_V2:
        _INT64.pack_into(out, 35, max_timestamp)
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


def _entry_summary(data) -> tuple[int, int]:
    """(last offset, max timestamp) of one entry written by the cleaner."""
    magic = data[16]
    if magic == 2:
        (base, _, _, _, _, _, delta, _, max_ts, _, _, _, _) = V2_HEADER.unpack_from(data, 0)
        return base + delta, max_ts
    offset = _INT64.unpack_from(data, 0)[0]
    return offset, (_INT64.unpack_from(data, 18)[0] if magic == 1 else -1)


class _SegmentWriter:
    """Appends entries to the cleaned segment in chunks of about index.interval.bytes, so its indexes are as
    dense as an ordinary segment's."""

    def __init__(self, segment: LogSegment, chunk: int, stats: CleanerStats):
        self.segment = segment
        self.chunk = max(1, chunk)
        self.stats = stats
        self.buf = bytearray()
        self.last_offset = -1
        self.max_ts, self.max_ts_offset = -1, -1

    def add(self, data) -> None:
        last_offset, max_ts = _entry_summary(data)
        self.buf += data
        self.last_offset = last_offset
        if max_ts > self.max_ts or self.max_ts_offset < 0:
            self.max_ts, self.max_ts_offset = max_ts, last_offset
        if len(self.buf) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.segment.append(self.last_offset, self.max_ts, self.max_ts_offset, self.buf)
            self.stats.bytes_written += len(self.buf)
            self.buf = bytearray()
            self.max_ts, self.max_ts_offset = -1, -1


# ---- the cleaner ---------------------------------------------------------------------------------------------------

class LogCleaner:
    def __init__(self, log_dirs: Sequence[str], config: CleanerConfig | None = None, clock: Clock | None = None,
                 run_blocking: RunBlocking | None = None,
                 live_logs: Callable[[], Mapping[TopicPartition, Log]] | None = None):
        """live_logs() gives the logs to consider (the LogManager's); run_blocking(fn) runs fn off the hub."""
        self.config = config or CleanerConfig()
        self._clock = clock or Clock()
        self._run_blocking: RunBlocking = run_blocking or (lambda fn: fn())
        self._live_logs = live_logs
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        self._dirty_checkpoints: set[str] = set()
        self._marks: dict[TopicPartition, list[tuple[int, int]]] = {}   # (end offset, time cleaned)
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        self.last_stats: dict[TopicPartition, CleanerStats] = {}
        self._running = False
        self._stopped = False
        for d in log_dirs:
            self._checkpoint_of_dir(os.path.abspath(d))

    # ---- checkpoints ------------------------------------------------------------------------------------------

    def _checkpoint_of_dir(self, log_dir: str) -> dict[TopicPartition, int]:
        offsets = self._checkpoints.get(log_dir)
        if offsets is None:
            try:
                offsets = OffsetCheckpointFile(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)).read()
            except CorruptCheckpoint as e:
                logger.warning("error reading %s of log dir %s, ignoring it: %s", CLEANER_OFFSET_CHECKPOINT,
                               log_dir, e)
                offsets = {}
            self._checkpoints[log_dir] = offsets
        return offsets

    def checkpoint_offset(self, log: Log) -> int | None:
        """The first dirty offset recorded for the log, if any."""
        return self._checkpoint_of_dir(log.parent_dir).get(log.topic_partition)

    def _write_checkpoint(self, log_dir: str) -> None:
        offsets = dict(self._checkpoint_of_dir(log_dir))
        path = os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)
        self._dirty_checkpoints.discard(log_dir)
        self._run_blocking(lambda: OffsetCheckpointFile(path).write(offsets) if os.path.isdir(log_dir) else None)

    def write_checkpoints(self, only_changed: bool = False) -> None:
        for log_dir in list(self._dirty_checkpoints if only_changed else self._checkpoints):
            try:
                self._write_checkpoint(log_dir)
            except OSError:
                logger.exception("error writing %s in %s", CLEANER_OFFSET_CHECKPOINT, log_dir)

    # ---- the logs' lives ----------------------------------------------------------------------------------------

    def attach(self, log: Log) -> None:
        """Follow the log's truncations: the checkpoint and the clean marks never stay beyond its end."""
        if self._on_truncation not in log.truncation_listeners:
            log.truncation_listeners.append(self._on_truncation)

    def _on_truncation(self, log: Log, end_offset: int) -> None:
        tp = log.topic_partition
        offsets = self._checkpoint_of_dir(log.parent_dir)
        if tp in offsets and offsets[tp] > end_offset:
            offsets[tp] = end_offset
            self._dirty_checkpoints.add(log.parent_dir)
        marks = self._marks.get(tp)
        if marks:
            self._marks[tp] = [(min(end, end_offset), t) for end, t in marks]
        self.uncleanable.discard(tp)

    def forget(self, log: Log) -> None:
        """The log is gone (deleted): drop its checkpoint entry and state."""
        tp = log.topic_partition
        offsets = self._checkpoint_of_dir(log.parent_dir)
        if offsets.pop(tp, None) is not None:
            self._dirty_checkpoints.add(log.parent_dir)
        self._marks.pop(tp, None)
        self.uncleanable.discard(tp)
        self.last_stats.pop(tp, None)

    def shutdown(self) -> None:
        """Stop: a cleaning under way is abandoned before its next swap."""
        self._stopped = True

    # ---- selection ----------------------------------------------------------------------------------------------

    def settings_for(self, log: Log) -> CompactionSettings:
        return compaction_settings(log.config, self.config)

    def cleanable(self, log: Log, now_ms: int | None = None) -> LogToClean:
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        return log_to_clean(log, self.checkpoint_offset(log), self.settings_for(log), now_ms)

    def grab_filthiest_log(self, exclude=()) -> LogToClean | None:
        """The compacted log with the highest dirty ratio among those above their min.cleanable.dirty.ratio or
        due by max.compaction.lag.ms, not being cleaned, not in exclude."""
        now = self._clock.now_ms()
        best = None
        for tp, log in list(self._live_logs().items() if self._live_logs is not None else ()):
            if not log.config.compact or tp in self.in_progress or tp in exclude or tp in self.uncleanable:
                continue
            if not log.segments:
                continue
            candidate = self.cleanable(log, now)
            if candidate.cleanable_bytes <= 0:
                continue
            if not (candidate.needs_compaction_now
                    or candidate.cleanable_ratio > candidate.settings.min_cleanable_ratio):
                continue
            if best is None or candidate.cleanable_ratio > best.cleanable_ratio:
                best = candidate
        return best

    def clean_logs(self) -> int:
        """One round of the cleaner (the broker calls it every log.cleaner.backoff.ms): clean the filthiest
        logs, each at most once; returns how many were cleaned."""
        if self._running or self._stopped or not self.config.enabled:
            return 0
        self._running = True
        try:
            if self._dirty_checkpoints:
                self.write_checkpoints(only_changed=True)
            done: set[TopicPartition] = set()
            cleaned = 0
            while not self._stopped:
                candidate = self.grab_filthiest_log(done)
                if candidate is None:
                    break
                tp = candidate.topic_partition
                done.add(tp)
                try:
                    if self._clean(candidate) is not None:
                        cleaned += 1
                except Exception:
                    logger.exception("%s: unexpected error while cleaning; the log is marked uncleanable",
                                     candidate.log.name)
                    self.uncleanable.add(tp)
                log = candidate.log
                if log.config.delete and self._is_live(log) and not self._stopped:
                    try:
                        log.delete_old_segments()
                    except Exception:
                        logger.exception("%s error while applying retention", log.name)
            return cleaned
        finally:
            self._running = False

    def clean(self, log: Log) -> CleanerStats | None:
        """Clean the log now, whatever its dirty ratio (when it has a cleanable section): the stats, or None
        when there was nothing to clean or the cleaning was aborted."""
        if log.topic_partition in self.in_progress:
            return None
        candidate = self.cleanable(log)
        if candidate.cleanable_bytes <= 0:
            return None
        return self._clean(candidate)

    # ---- one cleaning -------------------------------------------------------------------------------------------

    def _delete_horizon(self, log: Log, first_dirty: int, settings: CompactionSettings, now: int) -> int:
        """Tombstones and markers below the returned offset are past delete.retention.ms in the clean section."""
        tp = log.topic_partition
        marks = self._marks.get(tp)
        if marks is None:
            segments = log.segments
            clean = [s for s in segments[:-1] if s.base_offset < first_dirty]
            marks = []
            if clean and first_dirty > log.log_start_offset:
                try:
                    marks = [(first_dirty, max(s.last_modified_ms for s in clean))]
                except OSError:
                    marks = []
            self._marks[tp] = marks
        limit = now - settings.delete_retention_ms
        horizon = max((end for end, t in marks if t <= limit), default=0)
        return min(horizon, first_dirty)

    def _add_mark(self, tp: TopicPartition, end_offset: int, now: int, settings: CompactionSettings) -> None:
        marks = self._marks.setdefault(tp, [])
        marks.append((end_offset, now))
        limit = now - settings.delete_retention_ms
        expired = [m for m in marks if m[1] <= limit]
        if len(expired) > 1:
            newest = max(expired)
            self._marks[tp] = [newest] + [m for m in marks if m[1] > limit]

    def _clean(self, candidate: LogToClean) -> CleanerStats | None:
        log = candidate.log
        tp = log.topic_partition
        settings = candidate.settings or self.settings_for(log)
        started = time.monotonic()
        now = self._clock.now_ms()
        first_dirty = candidate.first_dirty_offset
        upper = max(first_dirty, candidate.first_uncleanable_offset)
        stats = CleanerStats(first_dirty_offset=first_dirty)
        self.in_progress.add(tp)
        truncations, log_path = log.truncation_count, log.dir
        segments = log.segments
        sources: list[_Source] = []

        def check() -> None:
            if self._stopped or log.truncation_count != truncations or log.dir != log_path:
                raise CleaningAborted()
        try:
            sources = [_Source(segment, segment.log_path, segment.size) for segment in segments]
            stats.delete_horizon_offset = self._delete_horizon(log, first_dirty, settings, now)
            offset_map, end_offset, producers = self._run_blocking(
                lambda: _build_offset_map(sources, first_dirty, upper, self.config.max_map_entries,
                                          self.config.read_chunk, check, stats))
            self._check_live(log, check)
            stats.end_offset, stats.map_size, stats.map_full = end_offset, len(offset_map.offsets), offset_map.full
            if end_offset <= first_dirty:
                logger.warning("%s: the offset map could not hold a single key; not cleaning", log.name)
                return None
            # the segments from the start of the log to the end of the dirty section, grouped
            to_clean = [src for src, nxt in zip(sources, sources[1:]) if src.segment.base_offset < end_offset]
            next_offsets = [sources[i + 1].segment.base_offset for i in range(len(to_clean))]
            by_segment = {id(src.segment): src for src in to_clean}
            groups = group_segments_by_size([src.segment for src in to_clean], next_offsets,
                                            log.config.segment_bytes, log.config.segment_index_bytes)
            group_cleaner = _GroupCleaner(offset_map, stats.delete_horizon_offset, producers, stats)
            index_interval = log.config.index_interval_bytes
            for group in groups:
                self._check_live(log, check)
                group_sources = [by_segment[id(s)] for s in group]
                cleaned = self._run_blocking(
                    lambda: self._clean_group(log, group_sources, group_cleaner, index_interval, now, check, stats))
                try:
                    self._check_live(log, check)
                    present = {id(s) for s in log.segments}
                    if any(id(s) not in present for s in group):
                        raise CleaningAborted()
                except CleaningAborted:
                    self._run_blocking(cleaned.delete)
                    raise
                log.replace_segments(cleaned, group)
                stats.groups += 1
            self._run_blocking(lambda: fsync_dir(log.dir))
            self._check_live(log, check)
            log.delete_pending_segments()       # the replaced ones whose file.delete.delay.ms is 0
            self._checkpoint_of_dir(log.parent_dir)[tp] = end_offset
            self._write_checkpoint(log.parent_dir)
            self._add_mark(tp, end_offset, now, settings)
            stats.elapsed_ms = (time.monotonic() - started) * 1000
            self.last_stats[tp] = stats
            logger.info("%s cleaned: dirty section [%d, %d) (%s), %d keys mapped, %d groups, %d bytes -> %d bytes, "
                        "%d records -> %d (%d keyless, %d tombstones, %d markers removed, %d empty batches kept), "
                        "%.0f ms", log.name, first_dirty, end_offset, "map full" if stats.map_full else "complete",
                        stats.map_size, stats.groups, stats.bytes_read, stats.bytes_written, stats.records_read,
                        stats.records_retained, stats.keyless_removed, stats.tombstones_removed,
                        stats.markers_removed, stats.empty_batches_retained, stats.elapsed_ms)
            return stats
        except CleaningAborted:
            logger.info("%s: cleaning aborted (the log was truncated, deleted or changed, or the cleaner stopped)",
                        log.name)
            return None
        except CorruptEntry as e:
            logger.error("%s: corrupt entry found while cleaning (%s); the log is marked uncleanable", log.name, e)
            self.uncleanable.add(tp)
            return None
        finally:
            self.in_progress.discard(tp)

    def _is_live(self, log: Log) -> bool:
        """The log still has segments and (with live_logs) is still the partition's log."""
        return bool(log.segments) and (self._live_logs is None
                                       or self._live_logs().get(log.topic_partition) is log)

    def _check_live(self, log: Log, check: Callable[[], None]) -> None:
        check()
        if not self._is_live(log):
            raise CleaningAborted()

    def _clean_group(self, log: Log, sources: Sequence[_Source], group_cleaner: _GroupCleaner, index_interval: int,
                     now: int, check: Callable[[], None], stats: CleanerStats) -> LogSegment:
        """Recopy one group into a new `.cleaned` segment, flushed and stamped with the cleaning time (run off
        the hub)."""
        cleaned = log.create_cleaned_segment(sources[0].segment.base_offset)
        try:
            writer = _SegmentWriter(cleaned, index_interval, stats)
            for src in sources:
                stats.segments_read += 1
                stats.bytes_read += src.size
                fd = src.open()
                try:
                    for buf, entry in read_entries(fd, src.size, self.config.read_chunk, check):
                        out = group_cleaner.filter(buf, entry)
                        if out is not None:
                            writer.add(out)
                finally:
                    os.close(fd)
            writer.flush()
            cleaned.on_become_inactive()
            cleaned.flush()
            os.utime(cleaned.log_path, ns=(now * 1_000_000, now * 1_000_000))
            check()
            return cleaned
        except BaseException:
            cleaned.delete()
            raise


def cleaner_checkpoint_path(log_dir: str) -> str:
    return os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)


__all__ = ["CLEANER_OFFSET_CHECKPOINT", "CleanerConfig", "CleanerStats", "CleaningAborted", "CompactionSettings",
           "LogCleaner", "LogToClean", "cleanable_offsets", "cleaner_checkpoint_path", "compaction_settings",
           "empty_v2_batch", "first_batch_timestamp", "group_segments_by_size", "log_to_clean",
           "read_entries", "rebuild_v2"]
