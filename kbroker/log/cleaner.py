"""The log cleaner: compaction of the logs whose cleanup.policy includes `compact` (Kafka's LogCleaner and
Cleaner; which logs to clean and the checkpoints are its manager's, cleaner_manager.py).

A compacted log keeps, for every key, at least its latest record. Every log.cleaner.backoff.ms the broker
calls `LogCleaner.clean_logs`: the manager picks the dirtiest logs, each at most once per round, and the
executor (`Cleaner`) cleans each:
1. Off the gevent hub (run_blocking): build the map key -> latest offset of the dirty section. The map holds at
   most log.cleaner.dedupe.buffer.size / 24 * log.cleaner.io.buffer.load.factor keys (the entries Kafka's map
   of 24-byte slots holds); when it is full the dirty section ends at the first record that did not fit, and
   the next cleaning goes on from there. The same pass reads every batch header of the log for the last batch
   of each idempotent producer.
2. The segments from the start of the log to the end of the dirty section are grouped (consecutive segments
   whose log and index sizes sum to at most segment.bytes / segment.index.bytes and whose offsets fit the
   first one's 4-byte relative offsets: Kafka's groupSegmentsBySize); each group is recopied off the hub into
   one `<base>.log.cleaned` segment keeping a record only if it has a key, no later offset of its key is in
   the map, and it is not a tombstone (null value) past its retention (the manager's delete horizon). A v2
   batch whose records all stay is copied as is; one that lost some is rebuilt with its original base offset,
   last offset delta, producer id and epoch, base sequence, partition leader epoch, attributes and
   compression (the first timestamp becomes the first kept record's, as in Kafka); an emptied batch is kept
   as an empty batch (header only, same offsets and sequence numbers) when it is its producer's last batch,
   so the idempotent producer state survives a reload, and dropped otherwise. v0/v1 messages are kept or
   dropped whole; a compressed wrapper that lost some inner messages is rebuilt with its codec. Batches are
   built by records/builder.py.
3. Back on the hub, each cleaned segment is swapped in (Log.replace_segments: `.cleaned` -> `.swap`, old
   segments `.deleted`, `.swap` -> final; a crash in between is repaired when the log is loaded), unless the
   log was truncated, deleted, renamed or lost one of those segments meanwhile: then the cleaning is aborted
   and its files removed. After the last group the checkpoint moves to the end of the dirty section.

Transactions (Kafka's CleanedTransactionMetadata): the dirty section never goes beyond the last stable
offset. The aborted transactions of the `.txnindex` files tell which transactional batches are aborted: they
are left out of the offset map (an aborted update never shadows a committed one) and removed (kept as an
empty batch when it is its producer's last). A transaction marker is removed only past the delete horizon
and when no batch of its transaction was met in this cleaning (so a transaction's last batch kept empty for
its producer state keeps its marker too); an ABORT marker kept keeps its `.txnindex` entry in the cleaned
segment.

Retention and compaction: Log.delete_old_segments applies retention.ms / retention.bytes only to logs whose
policy includes `delete`, so `compact` logs are only compacted and `compact,delete` logs get both; while a log
is being cleaned LogManager.cleanup_logs skips it, and the cleaner applies its retention right after.
"""
from __future__ import annotations

import logging
import os
import struct
import time
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..clock import Clock
from ..records.batches import legacy_records, v2_records
from ..records.builder import empty_v2_batch, rebuild_legacy, rebuild_v2
from ..records.entries import CONTROL_MASK, LOG_OVERHEAD, TRANSACTIONAL_MASK, V2_HEADER, V2_HEADER_SIZE, \
    CorruptEntry, Entry, read_entry
from .checkpoint import fsync_dir
from .cleaner_manager import CleanerConfig, CleaningAborted, LogCleanerManager, LogToClean
from .index import MAX_RELATIVE_OFFSET
from .log import Log, RunBlocking, TopicPartition
from .producer_state import marker_is_commit
from .segment import LogSegment
from .txn_index import AbortedTxn

logger = logging.getLogger("kbroker.log.cleaner")

_DECOMPRESSION_LIMIT = 2 ** 31 - 1   # data in the log was validated when appended
_SIZE = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_PRODUCER_ID_OFFSET = 43


# ---- segment groups -----------------------------------------------------------------------------------------

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


# ---- transactions met while reading a log in offset order ----------------------------------------------------------

class _Transactions:
    """Which transactional batches are aborted (from the indexed aborted transactions, oldest first) and
    whether a marker may go; feed every v2 batch in offset order."""

    def __init__(self, aborted: Sequence[AbortedTxn]):
        self.pending = sorted(aborted, key=lambda t: t.first_offset)
        self.next = 0
        self.ongoing_aborted: dict[int, list] = {}   # producer id -> [its aborted txn, a batch of it was met]
        self.ongoing_committed: set[int] = set()     # producers with a batch met of a transaction not aborted

    def is_aborted(self, pid: int, transactional: bool, last_offset: int) -> bool:
        """A data batch (met): whether it belongs to an aborted transaction."""
        while self.next < len(self.pending) and self.pending[self.next].first_offset <= last_offset:
            txn = self.pending[self.next]
            self.ongoing_aborted[txn.producer_id] = [txn, False]
            self.next += 1
        if not transactional:
            return False
        ongoing = self.ongoing_aborted.get(pid)
        if ongoing is None:
            self.ongoing_committed.add(pid)
            return False
        ongoing[1] = True
        return True

    def on_marker(self, pid: int, committed: bool) -> tuple[bool, AbortedTxn | None]:
        """(whether no batch of the marker's transaction was met, the aborted transaction to index if the
        marker must stay)."""
        if committed:
            met = pid in self.ongoing_committed
            self.ongoing_committed.discard(pid)
            return not met, None
        ongoing = self.ongoing_aborted.pop(pid, None)
        if ongoing is not None and ongoing[1]:
            return False, ongoing[0]
        return True, None


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
    aborted_removed: int = 0
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
                      check: Callable[[], None], stats: CleanerStats,
                      aborted: Sequence[AbortedTxn]) -> tuple[_OffsetMap, int, dict[int, int]]:
    """Key -> latest offset of the records in [start, upper) outside aborted transactions, stopping where a
    new key does not fit; returns the map, where the mapped section ends, and each producer's last data batch
    (from every header)."""
    offset_map = _OffsetMap(capacity)
    txns = _Transactions(aborted)
    producers: dict[int, int] = {}
    end = upper
    for i, src in enumerate(sources):
        fd = src.open()
        try:
            _map_segment(fd, src, sources[i + 1].segment.base_offset if i + 1 < len(sources) else None,
                         offset_map, start, upper, chunk, check, producers, txns)
        finally:
            os.close(fd)
        if offset_map.full and offset_map.end < end:
            end = offset_map.end
    return offset_map, end, producers


def _map_segment(fd: int, src: _Source, next_base: int | None, offset_map: _OffsetMap, start: int, upper: int,
                 chunk: int, check: Callable[[], None], producers: dict[int, int], txns: _Transactions) -> None:
    offsets, capacity = offset_map.offsets, offset_map.capacity
    producer_last_offsets(fd, src.size, chunk, producers)
    if offset_map.full or src.segment.base_offset >= upper or (next_base is not None and next_base <= start):
        return
    past_upper = False
    for buf, entry in read_entries(fd, src.size, chunk, check):
        if entry.base_offset >= upper:
            break
        if entry.magic == 2:
            pid = _INT64.unpack_from(buf, entry.position + _PRODUCER_ID_OFFSET)[0]
            if entry.attributes & CONTROL_MASK:
                if entry.record_count:
                    txns.on_marker(pid, marker_is_commit(buf, entry.position, entry.size))
                continue
            if txns.is_aborted(pid, bool(entry.attributes & TRANSACTIONAL_MASK), entry.last_offset):
                continue
        if entry.last_offset < start:
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
                 stats: CleanerStats, aborted: Sequence[AbortedTxn]):
        self.offsets = offset_map.offsets
        self.delete_horizon = delete_horizon
        self.producers = producers
        self.stats = stats
        self.txns = _Transactions(aborted)
        self.kept_aborts: list[AbortedTxn] = []      # of ABORT markers kept, for the cleaned segment's index

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
            if count == 0:
                return original
            spent, abort = self.txns.on_marker(pid, marker_is_commit(buf, pos, entry.size))
            if spent and entry.last_offset < self.delete_horizon:
                self.stats.markers_removed += 1
                return None
            if abort is not None:
                self.kept_aborts.append(abort)
            return original
        if self.txns.is_aborted(pid, bool(attributes & TRANSACTIONAL_MASK), entry.last_offset):
            self.stats.records_read += count
            self.stats.aborted_removed += count
            kept = []
        else:
            records = _records_of(buf, entry)
            self.stats.records_read += len(records)
            kept = [r for r in records if self.keep(r.key, r.value, r.offset)]
        self.stats.records_retained += len(kept)
        if kept:
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
        return rebuild_legacy(kept, buf, pos, entry.size)


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


# ---- the executor ---------------------------------------------------------------------------------------------

class Cleaner:
    """Cleans one log (Kafka's Cleaner), with the manager's checkpoints, marks and live checks."""

    def __init__(self, manager: LogCleanerManager, clock: Clock, run_blocking: RunBlocking):
        self.manager = manager
        self._clock = clock
        self._run_blocking = run_blocking

    def clean(self, candidate: LogToClean) -> CleanerStats | None:
        manager = self.manager
        config = manager.config
        log = candidate.log
        tp = log.topic_partition
        settings = candidate.settings or manager.settings_for(log)
        started = time.monotonic()
        now = self._clock.now_ms()
        first_dirty = candidate.first_dirty_offset
        upper = max(first_dirty, candidate.first_uncleanable_offset)
        stats = CleanerStats(first_dirty_offset=first_dirty)
        manager.in_progress.add(tp)
        truncations, log_path = log.truncation_count, log.dir
        segments = log.segments
        sources: list[_Source] = []

        def check() -> None:
            if manager.stopped or log.truncation_count != truncations or log.dir != log_path:
                raise CleaningAborted()
        try:
            sources = [_Source(segment, segment.log_path, segment.size) for segment in segments]
            stats.delete_horizon_offset = manager.delete_horizon(log, first_dirty, settings, now)
            aborted = log.collect_aborted_txns(sources[0].segment.base_offset, upper)
            map_start = log.segments[max(0, bisect_right([s.base_offset for s in log.segments], first_dirty) - 1)]
            map_aborted = [t for t in aborted if t.last_offset >= map_start.base_offset]
            offset_map, end_offset, producers = self._run_blocking(
                lambda: _build_offset_map(sources, first_dirty, upper, config.max_map_entries, config.read_chunk,
                                          check, stats, map_aborted))
            manager.check_live(log, check)
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
            group_cleaner = _GroupCleaner(offset_map, stats.delete_horizon_offset, producers, stats, aborted)
            index_interval = log.config.index_interval_bytes
            for group in groups:
                manager.check_live(log, check)
                group_sources = [by_segment[id(s)] for s in group]
                cleaned = self._run_blocking(
                    lambda: self._clean_group(log, group_sources, group_cleaner, index_interval, now, check, stats))
                try:
                    manager.check_live(log, check)
                    present = {id(s) for s in log.segments}
                    if any(id(s) not in present for s in group):
                        raise CleaningAborted()
                except CleaningAborted:
                    self._run_blocking(cleaned.delete)
                    raise
                log.replace_segments(cleaned, group)
                stats.groups += 1
            self._run_blocking(lambda: fsync_dir(log.dir))
            manager.check_live(log, check)
            log.delete_pending_segments()       # the replaced ones whose file.delete.delay.ms is 0
            manager.update_checkpoint(log, end_offset)
            manager.add_mark(tp, end_offset, now, settings)
            stats.elapsed_ms = (time.monotonic() - started) * 1000
            manager.last_stats[tp] = stats
            logger.info("%s cleaned: dirty section [%d, %d) (%s), %d keys mapped, %d groups, %d bytes -> %d bytes, "
                        "%d records -> %d (%d keyless, %d tombstones, %d aborted, %d markers removed, %d empty "
                        "batches kept), %.0f ms", log.name, first_dirty, end_offset,
                        "map full" if stats.map_full else "complete", stats.map_size, stats.groups, stats.bytes_read,
                        stats.bytes_written, stats.records_read, stats.records_retained, stats.keyless_removed,
                        stats.tombstones_removed, stats.aborted_removed, stats.markers_removed,
                        stats.empty_batches_retained, stats.elapsed_ms)
            return stats
        except CleaningAborted:
            logger.info("%s: cleaning aborted (the log was truncated, deleted or changed, or the cleaner stopped)",
                        log.name)
            return None
        except CorruptEntry as e:
            logger.error("%s: corrupt entry found while cleaning (%s); the log is marked uncleanable", log.name, e)
            manager.uncleanable.add(tp)
            return None
        finally:
            manager.in_progress.discard(tp)

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
                    for buf, entry in read_entries(fd, src.size, self.manager.config.read_chunk, check):
                        out = group_cleaner.filter(buf, entry)
                        if out is not None:
                            writer.add(out)
                        for txn in group_cleaner.kept_aborts:
                            cleaned.txn_index.append(txn)
                        group_cleaner.kept_aborts.clear()
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


# ---- the cleaner ----------------------------------------------------------------------------------------------

class LogCleaner:
    """What the LogManager runs: rounds of cleaning, and the manager's checkpoints and state."""

    def __init__(self, log_dirs: Sequence[str], config: CleanerConfig | None = None, clock: Clock | None = None,
                 run_blocking: RunBlocking | None = None,
                 live_logs: Callable[[], Mapping[TopicPartition, Log]] | None = None):
        """live_logs() gives the logs to consider (the LogManager's); run_blocking(fn) runs fn off the hub."""
        clock = clock or Clock()
        run_blocking = run_blocking or (lambda fn: fn())
        self.manager = LogCleanerManager(log_dirs, config or CleanerConfig(), clock, run_blocking, live_logs)
        self.cleaner = Cleaner(self.manager, clock, run_blocking)
        self._running = False

    @property
    def config(self) -> CleanerConfig:
        return self.manager.config

    @config.setter
    def config(self, config: CleanerConfig) -> None:
        self.manager.config = config

    @property
    def in_progress(self) -> set[TopicPartition]:
        return self.manager.in_progress

    def checkpoint_offset(self, log: Log) -> int | None:
        return self.manager.checkpoint_offset(log)

    def write_checkpoints(self, only_changed: bool = False) -> None:
        self.manager.write_checkpoints(only_changed)

    def attach(self, log: Log) -> None:
        self.manager.attach(log)

    def handle_log_dir_failure(self, log_dir: str) -> None:
        self.manager.forget_dir(log_dir)

    def forget(self, log: Log) -> None:
        self.manager.forget(log)

    def settings_for(self, log: Log):
        return self.manager.settings_for(log)

    def shutdown(self) -> None:
        """Stop: a cleaning under way is abandoned before its next swap."""
        self.manager.stopped = True

    def clean_logs(self) -> int:
        """One round of the cleaner (the broker calls it every log.cleaner.backoff.ms): clean the filthiest
        logs, each at most once; returns how many were cleaned."""
        manager = self.manager
        if self._running or manager.stopped or not manager.config.enabled:
            return 0
        self._running = True
        try:
            if manager.checkpoints_changed:
                manager.write_checkpoints(only_changed=True)
            done: set[TopicPartition] = set()
            cleaned = 0
            while not manager.stopped:
                candidate = manager.grab_filthiest_log(done)
                if candidate is None:
                    break
                tp = candidate.topic_partition
                done.add(tp)
                try:
                    if self.cleaner.clean(candidate) is not None:
                        cleaned += 1
                except Exception:
                    logger.exception("%s: unexpected error while cleaning; the log is marked uncleanable",
                                     candidate.log.name)
                    manager.uncleanable.add(tp)
                log = candidate.log
                if log.config.delete and manager.is_live(log) and not manager.stopped:
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
        if log.topic_partition in self.manager.in_progress:
            return None
        candidate = self.manager.cleanable(log)
        if candidate.cleanable_bytes <= 0:
            return None
        return self.cleaner.clean(candidate)
