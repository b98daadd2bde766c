"""The log of one partition (Kafka's Log): a directory `<topic>-<partition>` of segments, the last one active.

- Loading deletes stray `.deleted`/`.cleaned` files, completes an interrupted `.swap`, rebuilds missing or
  corrupt indexes, and after an unclean shutdown recovers every segment from the recovery point: entries are
  validated (size, magic, CRC) and the log is truncated at the first invalid one, dropping the segments after
  it. Each recovery is one line on the `kbroker.log` logger, naming the segment and the bytes truncated.
- Appends take bytes whose offsets are assigned, roll first when Kafka would (LogSegment.shouldRoll), and
  flush per flush.messages / flush.ms. A roll's flush of the older segments is left to `maybe_flush`, which
  the broker calls periodically (Kafka flushes them on its scheduler).
- The segment list is a tuple replaced whole on every change: readers take one snapshot and never wait.
- Segments leave the log by being renamed `.deleted` and deleted file.delete.delay.ms later, when
  `delete_pending_segments` runs (the broker calls it periodically; a delay of 0 deletes at once). Retention
  deletes only below the high watermark, and rolls the active segment when it is itself due.
- fsync runs through run_blocking(fn) (e.g. a gevent threadpool's apply); by default it is called directly.
  So does the file write of an append of OFF_HUB_WRITE_BYTES or more: the kernel copy into the page cache
  releases the GIL and runs beside the hub. Appends to one log are serialized by `append_lock` (Kafka's Log
  lock), which the partition holds from offset assignment to the producer state update, and which roll,
  truncation and retention take too; the segment's size, its index entries and the log end offset move only
  once the bytes are written, so a read never reaches a region still being written.
- For the log cleaner: `create_cleaned_segment` makes a `<base>.log.cleaned` segment, `replace_segments` swaps it
  in for the segments it replaces (`.cleaned` -> `.swap`, old ones `.deleted`, `.swap` -> final, as Kafka's
  replaceSegments; a crash between the steps is repaired at load), and `truncation_count` /
  `truncation_listeners` tell it about truncations (listeners are called with the new log end offset).

A new leader's epoch (assign_leader_epoch) is checkpointed before the first append in it, or at flush or close,
not when the leadership starts: a LeaderAndIsr making thousands of leaders does not wait for their fsyncs.

Producer state (producer_state.py, Kafka's ProducerStateManager) belongs to the log: loaded after the segments
(after an unclean shutdown from the newest snapshot at or below the first segment recovered, replaying from
there), snapshotted at every roll and at close, reloaded on truncation; the snapshot of a deleted segment goes
with it, and `delete_snapshots_after_recovery_point_checkpoint` drops those recovery no longer needs. Snapshot
files are fsynced by `flush`, with the segments, through run_blocking.

Transactions: the producer state (the partition updates it) gives `first_unstable_offset`; `last_stable_offset`
is min(it, high watermark), where READ_COMMITTED reads and the cleaner stop. Aborted transactions are indexed
(`add_aborted_txn`) in the `.txnindex` of the segment holding their ABORT marker and found by
`collect_aborted_txns`; the entries follow their segment through truncation, recovery, renames and deletion.

Offsets by timestamp: fetch_offset_by_timestamp also answers the special timestamps -2 (earliest: log start
offset) and -1 (latest: log end offset), with timestamp -1, as Kafka's Log does.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import struct
import sys
import time
import uuid
from bisect import bisect_left, bisect_right
from typing import Callable

import gevent.lock

from ..clock import Clock
from ..records.entries import iter_entries
from .checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache, fsync_dir
from .config import MAX_LONG, LogConfig
from .dir_failure import LogDirFailureChannel
from .errors import (CorruptIndex, KafkaStorageError, OffsetOutOfRange, RecordBatchTooLarge,
                     UnexpectedAppendOffset, UnsupportedForMessageFormat)
from .segment import (CLEANED_SUFFIX, DELETED_SUFFIX, EMPTY_SLICE, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                      TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, FetchDataInfo, LogOffsetMetadata, LogSegment,
                      OffsetAndTimestamp, filename_prefix, log_file_path, offset_index_path, time_index_path,
                      txn_index_path)
from .producer_state import ProducerStateManager, snapshot_path
from .txn_index import AbortedTxn

logger = logging.getLogger("kbroker.log")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
NO_TIMESTAMP = -1

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
_TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)   # files a crash may leave (see _load_segments)
_MARKED_DIR = re.compile(r"^(.+-\d+)\.\S+-(delete|future)$")
_EPOCH = struct.Struct(">i")
# Appends of at least this many bytes are written in run_blocking's thread pool. The hand-off costs the hub
# ~35-60 us of CPU (measured on the 2-core box), what copying ~100-250 KiB into warm page cache costs: smaller
# appends (bench.produce's 1000 x 100 B batches are 107 KiB) measured ~25 % more broker CPU per request off the hub.
OFF_HUB_WRITE_BYTES = 256 * 1024

TopicPartition = tuple[str, int]
RunBlocking = Callable[[Callable[[], object]], object]


def _io(what: str):
    """Kafka's maybeHandleIOException for a Log method: an OSError in the log's files reports the log dir to
    the LogDirFailureChannel and is raised as KafkaStorageError; once that happened every such method of the
    log raises KafkaStorageError at once (a half-written tail must never be read or appended to)."""
    def wrap(fn):
        @functools.wraps(fn)
        def method(self, *args, **kwargs):
            if self.dir_failed:
                raise KafkaStorageError(f"{self.name} is in an offline log directory")
            try:
                return fn(self, *args, **kwargs)
            except OSError as e:
                raise self._report_io_error(what, e) from e
        return method
    return wrap


class AppendLock:
    """A log's append lock: gevent's RLock (reentrant, owned by a greenlet), whose Semaphore is made only when a
    second greenlet has to wait for it. The lock of a log that is never contended stays one small object (issue 28:
    an RLock and its Semaphore cost ≈ 220 B per replica, for every idle replica)."""

    __slots__ = ("_owner", "_count", "_block")

    def __init__(self):
        self._owner = None
        self._count = 0
        self._block: gevent.lock.Semaphore | None = None    # once made, held (value 0) by whoever owns the lock

    def acquire(self) -> bool:
        me = gevent.getcurrent()
        if self._owner is me:
            self._count += 1
            return True
        if self._block is None and self._owner is not None:
            self._block = gevent.lock.Semaphore(0)      # the owner holds it
        if self._block is not None:
            self._block.acquire()
        self._owner, self._count = me, 1
        return True

    def release(self) -> None:
        if self._owner is not gevent.getcurrent():
            raise RuntimeError("cannot release an append lock this greenlet does not hold")
        self._count -= 1
        if not self._count:
            self._owner = None
            if self._block is not None:
                self._block.release()

    def locked(self) -> bool:
        return self._count > 0

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _appending(fn):
    """Run a Log method holding the log's append lock (it waits for an append writing off the hub)."""
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        with self.append_lock:
            return fn(self, *args, **kwargs)
    return method


def parse_topic_partition(dir_name: str) -> TopicPartition:
    """`orders-3` -> ("orders", 3); also `<topic>-<partition>.<id>-delete|-future`. ValueError otherwise."""
    name = dir_name
    if name.endswith(DELETE_DIR_SUFFIX) or name.endswith(FUTURE_DIR_SUFFIX):
        marked = _MARKED_DIR.match(name)
        if marked is None:
            raise ValueError(f"{dir_name!r} is not a partition directory")
        name = marked.group(1)
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{dir_name!r} is not in the form topic-partition")
    return topic, int(partition)


def log_dir_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def log_delete_dir_name(tp: TopicPartition) -> str:
    """`<topic>-<partition>.<uuid hex>-delete`, the topic cut so the name fits in 255 bytes (as Kafka)."""
    suffix = f"-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return tp[0][:255 - len(suffix)] + suffix


def log_future_dir_name(tp: TopicPartition) -> str:
    """`<topic>-<partition>.<uuid hex>-future`: a replica being moved to another log dir (Kafka's
    logFutureDirName; unlike the `-delete` name it is not cut, so a long topic name cannot be moved)."""
    return f"{log_dir_name(tp)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


class Log:
    # Called with the seconds each flush took (the broker's log flush histogram); None: not timed.
    flush_observer: Callable[[float], None] | None = None
    # Called with the log when it gets periodic work (`has_periodic_work`): the LogManager's periodic flush and
    # deletion visit only the logs that called it, not every log each second.
    on_periodic_work: Callable[["Log"], None] = staticmethod(lambda log: None)
    # Moves of any log's high watermark in this process, a new log counting as one: the LogManager's checkpoint
    # every few seconds skips its pass over 100 000 idle logs when nothing moved since the last.
    high_watermark_moves = 0
    # Changes of any log's start offset, recovery point, segments or config in this process, a new log counting
    # as one: the passes over every log that only these can give work (the minute checkpoints, the fetchers' full
    # look, the cleaner's list of compacted logs) skip while it stands still.
    changes = 0

    def __init__(self, dir: str, config: LogConfig, recovery_point: int = 0, log_start_offset: int = 0,
                 clock: Clock | None = None, *, had_clean_shutdown: bool = False,
                 run_blocking: RunBlocking | None = None, dir_failure: LogDirFailureChannel | None = None):
        """Open (creating if needed) and load the log in `dir`. had_clean_shutdown: the log dir had Kafka's
        `.kafka_cleanshutdown` marker; without it the segments from recovery_point on are recovered.
        dir_failure: where an I/O error in the log's files is reported (the LogManager's channel); an OSError
        while loading is left to the caller."""
        # The hooks above, set here too: their owners replace them per log, and an attribute first set after
        # __init__ gives the instance a dict of its own (≈ 1.6 KiB per log in Python 3.11, the largest per-replica
        # cost).
        self.flush_observer = Log.flush_observer
        self.on_periodic_work = Log.on_periodic_work
        self.dir = sys.intern(os.path.abspath(dir))     # interned: its files' paths share it (log.paths)
        self.parent_dir = sys.intern(os.path.dirname(self.dir))     # the log dir (renames stay in it): shared
        self.dir_failure = dir_failure
        self.dir_failed = False
        topic, partition = parse_topic_partition(os.path.basename(self.dir))
        self.topic_partition = (sys.intern(topic), partition)      # a topic's logs share its name
        self.config = config
        self._clock = clock or Clock()
        self._run_blocking: RunBlocking = run_blocking or (lambda fn: fn())
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.last_flush_time = self._clock.now_ms()
        self.records_appended = 0          # records written by append (the broker's messages-in metric)
        self._view: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self._pending_deletes: list[tuple[int, LogSegment]] | tuple = ()   # (due, segment); () while none
        self._pending_flush_offset: int | None = None
        self._truncations = 0
        self.truncation_listeners: list[Callable[["Log", int], None]] = []   # (log, new log end offset)
        self._hw_cache: tuple | None = None
        self.append_lock = AppendLock()
        self._writes_in_flight = 0
        files = self._list_files()   # once for the whole load: loading 100 000 logs is mostly system calls
        self.leader_epoch_cache = LeaderEpochFileCache(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT),
                                                       self._run_blocking, LEADER_EPOCH_CHECKPOINT in files)
        self.producer_state = ProducerStateManager(self.dir, files)
        next_offset, recovered = self._load_segments(had_clean_shutdown, files)
        active = self.active_segment
        self._leo = LogOffsetMetadata(next_offset, active.base_offset, active.size)
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self._high_watermark = self.log_start_offset
        Log.high_watermark_moves += 1
        Log.changes += 1
        self.leader_epoch_cache.truncate_from_end(next_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.load(self, next_offset, had_clean_shutdown, recovered)
        self.delete_pending_segments()
        for segment in self.segments:
            segment.release_fd()    # nothing read from the log yet: an idle replica holds no fd

    def __repr__(self) -> str:
        return f"Log({self.dir}, log_start_offset={self.log_start_offset}, log_end_offset={self.log_end_offset})"

    @property
    def name(self) -> str:
        return f"[Log partition={log_dir_name(self.topic_partition)}, dir={self.parent_dir}]"

    @property
    def is_future(self) -> bool:
        """A replica being moved here from another log dir (its directory ends in `-future`)."""
        return self.dir.endswith(FUTURE_DIR_SUFFIX)

    def _report_io_error(self, what: str, error: OSError) -> KafkaStorageError:
        """Mark the log failed, report its dir, and return the KafkaStorageError to raise."""
        self.dir_failed = True
        message = f"Error while {what} for {log_dir_name(self.topic_partition)} in dir {self.parent_dir}"
        if self.dir_failure is not None:
            self.dir_failure.maybe_add_offline_log_dir(self.parent_dir, message, error)
        return KafkaStorageError(f"{message}: {error}")

    # ---- the segment list (copy-on-write) -----------------------------------------------------------------------

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view[0]

    @property
    def active_segment(self) -> LogSegment:
        return self._view[0][-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._view[0])

    def _set_segments(self, segments) -> None:
        ordered = tuple(sorted(segments, key=lambda s: s.base_offset))
        self._view = (ordered, tuple(s.base_offset for s in ordered))
        Log.changes += 1

    def _add_segment(self, segment: LogSegment) -> None:
        self._set_segments([s for s in self.segments if s.base_offset != segment.base_offset] + [segment])

    def _segments_from(self, offset: int) -> tuple[LogSegment, ...]:
        """The segment holding offset (or the first) and every later one."""
        segments, bases = self._view
        return segments[max(0, bisect_right(bases, offset) - 1):]

    def _new_segment(self, base_offset: int, *, loaded: bool = False, suffix: str = "") -> LogSegment:
        return LogSegment(self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_size=self.config.segment_index_bytes, clock=self._clock,
                          preallocate_bytes=0 if loaded else self.config.initial_file_size, suffix=suffix)

    def _remove_and_delete_segments(self, segments, reason: str) -> None:
        """Take segments out of the log now; rename them (and the producer snapshots at their base offsets)
        `.deleted` and delete them file.delete.delay.ms later."""
        if not segments:
            return
        gone = {id(s) for s in segments}
        self._set_segments([s for s in self.segments if id(s) not in gone])
        for segment in segments:
            segment.change_file_suffixes("", DELETED_SUFFIX)
            self.producer_state.mark_snapshot_for_deletion(segment.base_offset)
        logger.info("%s deleting segments %s due to %s", self.name, [s.base_offset for s in segments], reason)
        due = self._clock.monotonic_ms() + self.config.file_delete_delay_ms
        self._pending_deletes = [*self._pending_deletes, *((due, s) for s in segments)]
        self.on_periodic_work(self)

    @_io("deleting segments")
    def delete_pending_segments(self, force: bool = False) -> int:
        """Delete the `.deleted` segments whose delay has passed (all with force); returns how many."""
        if not self._pending_deletes:
            return 0
        now = self._clock.monotonic_ms()
        due = [s for t, s in self._pending_deletes if force or t <= now]
        if not due:
            return 0
        self._pending_deletes = [(t, s) for t, s in self._pending_deletes if not (force or t <= now)] or ()
        self._run_blocking(lambda: [self._delete_segment(s) for s in due])
        return len(due)

    def _delete_segment(self, segment: LogSegment) -> None:
        """Delete a `.deleted` segment's files and its `.deleted` producer snapshot, if any; blocking."""
        segment.delete()
        try:
            os.unlink(snapshot_path(self.dir, segment.base_offset) + DELETED_SUFFIX)
        except FileNotFoundError:
            pass

    # ---- loading and recovery -------------------------------------------------------------------------------------

    def _list_files(self) -> set[str]:
        """The names of the files in the log's dir (types from the listing, no stat per file); the dir is made
        if missing."""
        try:
            with os.scandir(self.dir) as listing:
                return {entry.name for entry in listing if entry.is_file()}
        except FileNotFoundError:
            os.makedirs(self.dir, exist_ok=True)
            return set()

    def _load_segments(self, had_clean_shutdown: bool, files: set[str]) -> tuple[int, list[int]]:
        """Load and check the segments (files: the dir's listing), recovering the unflushed ones; the log end
        offset and the base offsets of the segments recovered."""
        swap_files = []
        if any(name.endswith(_TEMP_SUFFIXES) for name in files):   # a crash cut a deletion, a clean or a swap
            swap_files = self._remove_temp_files_and_collect_swap_files(files)
            files = self._list_files()
        missing_indexes: dict[int, list[str]] = {}
        for name in sorted(files):
            match = _SEGMENT_FILE.match(name)
            if match is None:
                continue
            base = int(match.group(1))
            if match.group(2) != "log":
                if match.group(1) + LOG_SUFFIX not in files:
                    logger.warning("%s found an orphaned index file %s with no log file; deleting it", self.name,
                                   name)
                    os.unlink(os.path.join(self.dir, name))
                continue
            missing_indexes[base] = [n for n in (match.group(1) + INDEX_SUFFIX, match.group(1) + TIME_INDEX_SUFFIX)
                                     if n not in files]
            self._add_segment(self._new_segment(base, loaded=True))
        self._complete_swap_operations(swap_files)
        # the segments from the recovery point on are rebuilt by recovery after an unclean shutdown; check the
        # indexes of the others
        unflushed = () if had_clean_shutdown else self._segments_from(self.recovery_point)
        if unflushed:
            # the producer state of the data being recovered is rebuilt from before it (Kafka's recoverSegment)
            self.producer_state.delete_snapshots_after(unflushed[0].base_offset)
        for segment in self.segments:
            if segment in unflushed:
                continue
            missing = missing_indexes.get(segment.base_offset)
            problem = f"missing {', '.join(missing)}" if missing else None
            if problem is None:
                try:
                    segment.sanity_check()
                except CorruptIndex as e:
                    problem = str(e)
            if problem is not None:
                logger.warning("%s rebuilding the indexes of segment %s: %s", self.name, segment.log_path, problem)
                self._recover_segment(segment)
        end = self._recover_log(unflushed, had_clean_shutdown, None if swap_files else files)
        return end, [s.base_offset for s in unflushed if s in self.segments]

    def _remove_temp_files_and_collect_swap_files(self, files: set[str]) -> list[str]:
        """Kafka's removeTempFilesAndCollectSwapFiles: delete `.deleted` and `.cleaned` files, and `.swap`
        files that are indexes or part of an unfinished split (of `files`, the dir's); return the `.log.swap`
        files to complete."""
        swaps, cleaned = [], []
        min_cleaned = float("inf")
        for name in sorted(files):
            path = os.path.join(self.dir, name)
            if name.endswith(DELETED_SUFFIX):
                logger.info("%s deleting stray temporary file %s", self.name, name)
                os.unlink(path)
            elif name.endswith(CLEANED_SUFFIX):
                if name[:20].isdigit():
                    min_cleaned = min(min_cleaned, int(name[:20]))
                cleaned.append(path)
            elif name.endswith(SWAP_SUFFIX):
                match = _SEGMENT_FILE.match(name[:-len(SWAP_SUFFIX)])
                if match is None:
                    continue
                logger.info("%s found file %s from an interrupted swap operation", self.name, name)
                self._delete_index_files(int(match.group(1)))
                if match.group(2) == "log":
                    swaps.append(path)
                else:
                    os.unlink(path)
        valid = []
        for path in swaps:
            base = int(os.path.basename(path)[:20])
            if base >= min_cleaned:     # part of a split that did not complete
                self._delete_index_files(base, SWAP_SUFFIX)
                os.unlink(path)
            else:
                valid.append(path)
        for path in cleaned:
            logger.info("%s deleting stray .cleaned file %s", self.name, os.path.basename(path))
            os.unlink(path)
        return valid

    def _delete_index_files(self, base_offset: int, suffix: str = "") -> None:
        for path in (offset_index_path(self.dir, base_offset, suffix), time_index_path(self.dir, base_offset, suffix),
                     txn_index_path(self.dir, base_offset, suffix)):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _complete_swap_operations(self, swap_files: list[str]) -> None:
        """A cleaner's swap interrupted by a crash: recover the `.swap` segment, retire the segments it
        replaces, and rename it into place (Kafka's completeSwapOperations)."""
        for path in swap_files:
            swap = self._new_segment(int(os.path.basename(path)[:20]), loaded=True, suffix=SWAP_SUFFIX)
            logger.info("%s repairing log file %s from an interrupted swap operation", self.name, path)
            self._recover_segment(swap)
            end = swap.read_next_offset()
            # the segment at the swap's own base offset goes too, even when the cleaned data is empty
            replaced = [s for s in self.segments if s.base_offset == swap.base_offset
                        or (s.base_offset < end and s.read_next_offset() > swap.base_offset)]
            self._remove_and_delete_segments(replaced, "swap completion")
            swap.change_file_suffixes(SWAP_SUFFIX, "")
            self._add_segment(swap)

    def _recover_segment(self, segment: LogSegment, files: set[str] | None = None) -> int:
        """files: the dir's listing, if it is current (whether the segment has a `.txnindex`, without a stat)."""
        has_txn_index = None if files is None else filename_prefix(segment.base_offset) + TXN_INDEX_SUFFIX in files
        truncated = segment.recover(leader_epoch_cache=self.leader_epoch_cache, txn_index_exists=has_txn_index)
        # (an empty segment, most of 100 000 replicas' after a crash, had nothing to recover: not worth a line each)
        logger.log(logging.WARNING if truncated else logging.INFO if segment.size else logging.DEBUG,
                   "%s recovered segment %s: truncated %d bytes at byte %d, next offset %d", self.name,
                   os.path.basename(segment.log_path), truncated, segment.size, segment.read_next_offset())
        return truncated

    def _recover_log(self, unflushed: tuple[LogSegment, ...], had_clean_shutdown: bool,
                     files: set[str] | None = None) -> int:
        """Recover the unflushed segments, dropping those after the first one truncated; returns the log end
        offset. files: the dir's current listing, if known."""
        for i, segment in enumerate(unflushed):
            if self._recover_segment(segment, files) > 0:
                self._remove_and_delete_segments(unflushed[i + 1:], f"corruption in segment {segment.base_offset} "
                                                                    "found by log recovery")
                break
        next_offset = None
        if self.segments:
            next_offset = self.active_segment.read_next_offset()
            if next_offset < self.log_start_offset:
                logger.warning("%s deleting all segments: the log end offset %d is below the log start offset %d",
                               self.name, next_offset, self.log_start_offset)
                self._remove_and_delete_segments(self.segments, "log start offset beyond the log end")
                self.leader_epoch_cache.clear_and_flush()
                next_offset = None
        if not self.segments:
            self._add_segment(self._new_segment(self.log_start_offset))
        if next_offset is None:
            next_offset = self.log_start_offset
        self.recovery_point = next_offset if had_clean_shutdown else min(self.recovery_point, next_offset)
        self.active_segment.resize_indexes(self.config.segment_index_bytes)
        return next_offset

    # ---- offsets ------------------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._leo.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(the largest epoch <= epoch, where it ends: the log end offset for the latest), or (-1, -1)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open or unreplicated transaction in the producer state, or None (the
        log cleaner and READ_COMMITTED reads stop at the last stable offset)."""
        return self.producer_state.first_unstable_offset(self._high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark); a transaction opened below the log start offset counts
        from the log start offset (as Kafka)."""
        first_unstable = self.first_unstable_offset()
        hw = self._high_watermark
        return hw if first_unstable is None else min(max(first_unstable, self.log_start_offset), hw)

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark, clamped to [log start offset, log end offset]; returns the value set."""
        hw = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        if hw != self._high_watermark:
            self._high_watermark = hw
            Log.high_watermark_moves += 1
        return hw

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def _offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where the batch holding offset starts (Kafka's convertToOffsetMetadataOrThrow)."""
        if offset >= self._leo.message_offset:
            return self._leo
        for segment in self._segments_from(offset):
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found.position)
        return self._leo

    def _high_watermark_metadata(self) -> LogOffsetMetadata:
        cache = self._hw_cache
        if cache is None or cache[0] != self._high_watermark or cache[1] is not self._view:
            cache = self._hw_cache = (self._high_watermark, self._view, self._offset_metadata(self._high_watermark))
        return cache[2]

    # ---- appends, rolls, flushes ----------------------------------------------------------------------------------

    @_appending
    @_io("appending to the log")
    def append(self, data, first_offset: int, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int, record_count: int) -> LogOffsetMetadata:
        """Append entries whose offsets are assigned (first_offset..last_offset, not below the log end offset;
        gaps are allowed). Returns where they start. Raises UnexpectedAppendOffset, RecordBatchTooLarge."""
        size = len(data)
        if size == 0:
            return self._leo
        if first_offset < self.log_end_offset:
            raise UnexpectedAppendOffset(f"{self.name} unexpected offset in append: first offset {first_offset} is "
                                         f"below the next offset {self.log_end_offset}", first_offset, last_offset)
        if last_offset < first_offset:
            raise ValueError(f"last offset {last_offset} is below the first offset {first_offset}")
        if size > self.config.segment_bytes:
            raise RecordBatchTooLarge(f"Message batch size is {size} bytes in append to partition "
                                      f"{log_dir_name(self.topic_partition)}, which exceeds the maximum configured "
                                      f"segment size of {self.config.segment_bytes}.")
        self.leader_epoch_cache.write_pending()   # (a new leader's epoch, stored before anything in it)
        segment = self.active_segment
        if segment.should_roll(self.config.segment_bytes, self.config.segment_ms, size, max_timestamp, last_offset,
                               self._clock.now_ms()):
            segment = self.roll(first_offset)
        position = segment.size
        segment.append(last_offset, max_timestamp, offset_of_max_timestamp, data,
                       self._write_off_hub if size >= OFF_HUB_WRITE_BYTES else None)
        self._leo = LogOffsetMetadata(last_offset + 1, segment.base_offset, segment.size)
        self.producer_state.map_end_offset = last_offset + 1
        self.records_appended += record_count
        self._update_leader_epochs(data)
        if (self.unflushed_messages >= self.config.flush_messages
                or self._clock.now_ms() - self.last_flush_time >= self.config.flush_ms):
            self.flush()
        return LogOffsetMetadata(first_offset, segment.base_offset, position)

    def _write_off_hub(self, write: Callable[[], None]) -> None:
        self._writes_in_flight += 1
        try:
            self._run_blocking(write)
        finally:
            self._writes_in_flight -= 1

    def _wait_for_writes(self) -> None:
        """Let a write running off the hub finish before the files close (its fd could be reused)."""
        while self._writes_in_flight:
            time.sleep(0.001)   # (cooperative in the broker, where time is monkey-patched by gevent)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at start_offset, the log end: leader-epoch-checkpoint is written before the
        next append (or flush, or close), not now."""
        self.leader_epoch_cache.assign(epoch, start_offset, write=False)

    def _update_leader_epochs(self, data) -> None:
        """The leader epoch of each v2 batch starts at its base offset; a v0/v1 append clears the cache."""
        for entry in iter_entries(data):
            if entry.magic >= 2:
                epoch = _EPOCH.unpack_from(data, entry.position + 12)[0]
                if epoch >= 0:
                    self.leader_epoch_cache.assign(epoch, entry.base_offset)
            elif self.leader_epoch_cache.entries:
                logger.warning("%s clearing the leader epoch cache after an append with message format v%d",
                               self.name, entry.magic)
                self.leader_epoch_cache.clear_and_flush()

    @_appending
    @_io("rolling the log")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset)."""
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if new_offset == active.base_offset:
            if active.size:
                raise KafkaStorageError(f"{self.name} trying to roll a new log segment at offset {new_offset} "
                                        f"that already exists")
            # an empty active segment with a full index (as KAFKA-6388): replace it
            logger.warning("%s replacing the empty active segment at offset %d", self.name, new_offset)
            self._remove_and_delete_segments([active], "log roll")
        elif new_offset < active.base_offset:
            raise KafkaStorageError(f"{self.name} trying to roll a new log segment at offset {new_offset} below "
                                    f"the active segment's base offset {active.base_offset}")
        else:
            for path in (log_file_path(self.dir, new_offset), offset_index_path(self.dir, new_offset),
                         time_index_path(self.dir, new_offset)):
                if os.path.exists(path):
                    logger.warning("%s newly rolled segment file %s already exists; deleting it first", self.name,
                                   path)
                    os.unlink(path)
            active.on_become_inactive()
        # the producer state as of the new segment's base offset: recovering it starts from this snapshot
        self.producer_state.map_end_offset = new_offset
        self.producer_state.take_snapshot()
        segment = self._new_segment(new_offset)
        self._add_segment(segment)
        self._leo = LogOffsetMetadata(self.log_end_offset, segment.base_offset, segment.size)
        self._pending_flush_offset = new_offset
        self.on_periodic_work(self)
        logger.info("%s rolled new log segment at offset %d", self.name, new_offset)
        return segment

    @_io("flushing the log")
    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding offsets from the recovery point up to offset (default: the log end
        offset), then advance the recovery point to it."""
        self.leader_epoch_cache.write_pending()
        offset = self.log_end_offset if offset is None else offset
        start = self.recovery_point
        snapshots = self.producer_state.take_unflushed()
        if offset <= start and not snapshots:
            return
        segments = [s for s in self._segments_from(start) if s.base_offset < offset] if offset > start else []
        new_files = bool(snapshots) or any(s.base_offset >= start for s in segments)
        truncations = self._truncations

        def work() -> None:
            for segment in segments:
                segment.flush()
            ProducerStateManager.flush_snapshots(snapshots)
            if new_files:
                fsync_dir(self.dir)
        started = time.perf_counter()
        self._run_blocking(work)
        if self.flush_observer is not None:
            self.flush_observer(time.perf_counter() - started)
        if self._truncations == truncations and offset > self.recovery_point:
            self.recovery_point = offset
            Log.changes += 1
            self.last_flush_time = self._clock.now_ms()
        if self._pending_flush_offset is not None and self._pending_flush_offset <= self.recovery_point:
            self._pending_flush_offset = None

    @property
    def has_periodic_work(self) -> bool:
        """Whether `maybe_flush` or `delete_pending_segments` has or may get work with time alone: a roll's
        flush, producer snapshots to fsync, segments waiting for deletion, a flush.ms below Kafka's default
        (never). Whatever gives a log such work calls `on_periodic_work`."""
        return (self._pending_flush_offset is not None or self.producer_state.has_unflushed
                or bool(self._pending_deletes) or self.config.flush_ms < MAX_LONG)

    @_io("flushing the log")
    def maybe_flush(self) -> bool:
        """The periodic flush: the segments before the last roll, or everything when flush.ms has passed.
        Returns whether it flushed."""
        if self._clock.now_ms() - self.last_flush_time >= self.config.flush_ms:
            self.flush()
            return True
        if self._pending_flush_offset is not None:
            self.flush(self._pending_flush_offset)
            return True
        if self.producer_state.has_unflushed:
            self.flush(self.recovery_point)
            return True
        return False

    # ---- reads ------------------------------------------------------------------------------------------------

    @_io("reading the log")
    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo:
        """Up to max_bytes from start_offset, not beyond max_offset (the high watermark for consumers; default
        the log end offset). Empty at or beyond max_offset; OffsetOutOfRange below the log start offset or
        beyond the log end offset."""
        leo = self._leo
        segments, bases = self._view
        first = bisect_right(bases, start_offset) - 1
        if start_offset > leo.message_offset or first < 0 or start_offset < self.log_start_offset:
            raise OffsetOutOfRange(f"Received request for offset {start_offset} for partition "
                                   f"{log_dir_name(self.topic_partition)}, but we only have log segments in the "
                                   f"range {self.log_start_offset} to {leo.message_offset}.")
        if max_offset is None or max_offset >= leo.message_offset:
            limit = leo
        elif max_offset == self._high_watermark:
            limit = self._high_watermark_metadata()
        else:
            limit = self._offset_metadata(max_offset)
        if start_offset == limit.message_offset:
            return FetchDataInfo(limit, EMPTY_SLICE)
        if start_offset > limit.message_offset:
            return FetchDataInfo(self._offset_metadata(start_offset), EMPTY_SLICE)
        for segment in segments[first:]:
            max_position = (limit.relative_position_in_segment if limit.segment_base_offset == segment.base_offset
                            else segment.size)
            info = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if info is not None:
                return info
        return FetchDataInfo(self._leo, EMPTY_SLICE)

    @_io("indexing an aborted transaction")
    def add_aborted_txn(self, txn) -> None:
        """Index an aborted transaction (a producer_state.CompletedTxn) in the segment holding its ABORT marker,
        unless it is there already (a replay after a restart)."""
        segments, bases = self._view
        i = bisect_right(bases, txn.last_offset) - 1
        if i < 0:
            return
        index = segments[i].txn_index
        if txn.last_offset > index.last_offset:
            index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset))

    def segment_end_offset(self, offset: int) -> int:
        """The base offset of the segment after the one holding offset (the log end offset for the active one):
        a read from offset returns nothing beyond it."""
        segments, bases = self._view
        i = bisect_right(bases, offset)
        return bases[i] if i < len(bases) else self.log_end_offset

    def collect_aborted_txns(self, start: int, end: int) -> list[AbortedTxn]:
        """The indexed aborted transactions overlapping [start, end), oldest marker first."""
        segments, bases = self._view
        out: list[AbortedTxn] = []
        for segment in segments[max(0, bisect_right(bases, start) - 1):]:
            if segment.base_offset >= end:
                break
            out += segment.txn_index.collect(start, end)
        return out

    @_io("searching offsets by timestamp")
    def fetch_offset_by_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The first offset whose record timestamp is >= timestamp (None when there is none); -2 gives the log
        start offset and -1 the log end offset, with timestamp -1 and the leader epoch there."""
        if timestamp == EARLIEST_TIMESTAMP:
            earliest = self.leader_epoch_cache.earliest_entry
            epoch = earliest.epoch if earliest is not None and earliest.start_offset <= self.log_start_offset else None
            return OffsetAndTimestamp(self.log_start_offset, NO_TIMESTAMP, epoch)
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(self.log_end_offset, NO_TIMESTAMP, self.leader_epoch_cache.latest_epoch)
        if self.config.record_version < 1:
            raise UnsupportedForMessageFormat(
                f"Cannot search offsets based on timestamp because message format version for partition "
                f"{log_dir_name(self.topic_partition)} is {self.config.message_format_version} which is earlier "
                f"than the minimum required version 0.10.0")
        for segment in self._segments_from(self.log_start_offset):
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # ---- truncation ---------------------------------------------------------------------------------------------

    @_io("truncating the log")
    @_appending
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at and after target_offset (a follower diverging from its leader); returns whether
        anything was removed."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate partition {log_dir_name(self.topic_partition)} to a negative offset "
                             f"({target_offset})")
        if target_offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        logger.info("%s truncating to offset %d", self.name, target_offset)
        if self.segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        self._remove_and_delete_segments([s for s in self.segments if s.base_offset > target_offset],
                                         "log truncation")
        self.active_segment.truncate_to(target_offset)
        self._complete_truncation(min(target_offset, self.log_start_offset), target_offset)
        self.leader_epoch_cache.truncate_from_end(target_offset)
        self.delete_pending_segments()
        return True

    @_appending
    @_io("truncating the log")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at new_offset (log start and end offsets both new_offset)."""
        logger.info("%s truncating fully and starting at offset %d", self.name, new_offset)
        self._remove_and_delete_segments(self.segments, "log truncation")
        self._add_segment(self._new_segment(new_offset))
        self.producer_state.truncate_fully_and_start_at(new_offset)
        self._complete_truncation(new_offset, new_offset)
        self.leader_epoch_cache.clear_and_flush()
        self.delete_pending_segments()

    def _complete_truncation(self, start_offset: int, end_offset: int) -> None:
        active = self.active_segment
        self.log_start_offset = start_offset
        Log.changes += 1
        self._leo = LogOffsetMetadata(end_offset, active.base_offset, active.size)
        self.recovery_point = min(self.recovery_point, end_offset)
        if self._pending_flush_offset is not None and self._pending_flush_offset > end_offset:
            self._pending_flush_offset = None
        self._truncations += 1
        self._hw_cache = None
        self.update_high_watermark(min(self._high_watermark, end_offset))
        self.producer_state.load(self, end_offset, clean_shutdown=False)
        self.on_periodic_work(self)     # the snapshots just written
        for listener in list(self.truncation_listeners):
            listener(self, end_offset)

    @property
    def truncation_count(self) -> int:
        """How many truncations this log went through (the cleaner aborts when it changed meanwhile)."""
        return self._truncations

    @_io("deleting producer snapshots")
    def delete_snapshots_after_recovery_point_checkpoint(self) -> int:
        """Delete the producer snapshots below min(the base offset of the segment before the active one, that
        of the segment below the recovery point), as Kafka does after each recovery-point checkpoint: recovery
        and the common truncations start from a snapshot kept. Returns that offset."""
        segments, bases = self._view
        active = segments[-1].base_offset
        i = bisect_left(bases, active) - 1
        two_segments = bases[i] if i >= 0 else active
        j = bisect_left(bases, self.recovery_point) - 1
        recovery = bases[j] if j >= 0 else self.recovery_point
        keep_from = min(two_segments, recovery)
        self.producer_state.delete_snapshots_before(keep_from)
        return keep_from

    # ---- retention ----------------------------------------------------------------------------------------------

    @_io("incrementing the log start offset")
    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> None:
        """Move the log start offset up (DeleteRecords, retention); OffsetOutOfRange above the high watermark."""
        if new_log_start_offset > self._high_watermark:
            raise OffsetOutOfRange(f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                                   f"{log_dir_name(self.topic_partition)} since it is larger than the high "
                                   f"watermark {self._high_watermark}")
        if new_log_start_offset > self.log_start_offset:
            self.log_start_offset = new_log_start_offset
            self.recovery_point = max(self.recovery_point, new_log_start_offset)
            Log.changes += 1
            logger.info("%s incremented log start offset to %d", self.name, new_log_start_offset)
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state.on_log_start_offset_incremented(new_log_start_offset)

    @_io("applying retention")
    def delete_old_segments(self) -> int:
        """Retention (Kafka's deleteOldSegments): segments wholly below the log start offset, then, with
        cleanup.policy delete, by retention.bytes and retention.ms. Returns how many segments left the log."""
        segments = self.segments
        if len(segments) == 1 and segments[0].size == 0:
            return 0   # an empty log: its one (empty, active) segment stays whatever the settings
        deleted = self._delete_old_segments(
            lambda segment, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
            "log start offset breach")
        if not self.config.delete:
            return deleted
        if 0 <= self.config.retention_bytes <= self.size:
            excess = self.size - self.config.retention_bytes

            def over_size(segment: LogSegment, nxt) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True
            deleted += self._delete_old_segments(over_size, f"retention size {self.config.retention_bytes} breach")
        if self.config.retention_ms >= 0:
            now = self._clock.now_ms()
            deleted += self._delete_old_segments(
                lambda segment, nxt: now - segment.largest_timestamp > self.config.retention_ms,
                f"retention time {self.config.retention_ms}ms breach")
        return deleted

    @_appending
    def _delete_old_segments(self, predicate, reason: str) -> int:
        """Delete the oldest segments while predicate(segment, next segment) holds, never a segment holding
        offsets at or above the high watermark, nor an empty last one; rolls first if all are to go."""
        segments = self.segments
        deletable = []
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if self._high_watermark < upper or (nxt is None and segment.size == 0) or not predicate(segment, nxt):
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            self.roll()
        self._remove_and_delete_segments(deletable, reason)
        self.maybe_increment_log_start_offset(self.segments[0].base_offset)
        self.delete_pending_segments()
        return len(deletable)

    # ---- the log cleaner's swap -----------------------------------------------------------------------------------

    @_io("creating a cleaned segment")
    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A new empty segment `<base>.log.cleaned` (and its `.cleaned` indexes) for the cleaner to write into;
        files left by an earlier attempt are removed first. Blocking (creates files): call it off the hub."""
        for path in (log_file_path(self.dir, base_offset, CLEANED_SUFFIX),
                     offset_index_path(self.dir, base_offset, CLEANED_SUFFIX),
                     time_index_path(self.dir, base_offset, CLEANED_SUFFIX)):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return self._new_segment(base_offset, loaded=True, suffix=CLEANED_SUFFIX)

    @_io("replacing segments")
    def replace_segments(self, new_segment: LogSegment, old_segments) -> None:
        """Swap the cleaned `new_segment` (files suffixed `.cleaned`, flushed) in for old_segments, which must
        all be in the log, as Kafka's replaceSegments: rename it `.swap`, take the old ones out of the segment
        list and rename them `.deleted` (deleted file.delete.delay.ms later), then rename the `.swap` files
        to their final names. Readers see the old list or the new one (no yield in between). A crash leaves
        either `.cleaned` files (deleted at load: the old segments are intact) or a `.swap` (completed at load:
        the old segments it covers are removed)."""
        current = {id(s) for s in self.segments}
        if not old_segments or any(id(s) not in current for s in old_segments):
            raise ValueError(f"{self.name} cannot replace segments that are not in the log")
        if new_segment.base_offset != min(s.base_offset for s in old_segments):
            raise ValueError(f"{self.name} the cleaned segment must start where the segments it replaces start")
        new_segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        gone = {id(s) for s in old_segments}
        self._set_segments([s for s in self.segments if id(s) not in gone] + [new_segment])
        for segment in old_segments:
            segment.change_file_suffixes("", DELETED_SUFFIX)
        due = self._clock.monotonic_ms() + self.config.file_delete_delay_ms
        self._pending_deletes = [*self._pending_deletes, *((due, s) for s in old_segments)]
        self.on_periodic_work(self)
        new_segment.change_file_suffixes(SWAP_SUFFIX, "")
        logger.info("%s replaced segments %s with cleaned segment %d (%d bytes)", self.name,
                    [s.base_offset for s in old_segments], new_segment.base_offset, new_segment.size)

    # ---- files ------------------------------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        """New topic settings; segment and index sizes apply from the next segment, as in Kafka."""
        self.config = config
        Log.changes += 1
        self.on_periodic_work(self)     # flush.ms may have come down

    @_io("closing the log")
    def close(self) -> None:
        """Snapshot the producer state at the log end (a restart then replays nothing), close every segment
        (final time index entry, trimmed indexes and files, fsync); blocking."""
        self._wait_for_writes()
        for _, segment in self._pending_deletes:
            self._delete_segment(segment)
        self._pending_deletes = ()
        self.producer_state.take_snapshot()
        ProducerStateManager.flush_snapshots(self.producer_state.take_unflushed())
        self.leader_epoch_cache.write_pending(blocking=True)
        for segment in self.segments:
            segment.close()

    def close_handlers(self) -> None:
        """Close the files without writing anything (Kafka's closeHandlers): the log's dir has failed."""
        self.dir_failed = True
        for segment in list(self.segments) + [s for _, s in self._pending_deletes]:
            segment.close_handlers()

    @_io("renaming the log dir")
    def rename_dir(self, name: str) -> None:
        """Rename the partition directory (e.g. to its `-delete` name) keeping the log open. A leader-epoch
        checkpoint being written meanwhile (DeleteRecords moving the log start offset) is let finish first: it
        would land in the vanished directory (Kafka holds the log's lock for both)."""
        while self.leader_epoch_cache.writing:
            time.sleep(0.001)   # (cooperative in the broker, where time is monkey-patched by gevent)
        new_dir = os.path.join(self.parent_dir, name)
        os.rename(self.dir, new_dir)
        self.dir = sys.intern(new_dir)
        for segment in list(self.segments) + [s for _, s in self._pending_deletes]:
            segment.update_parent_dir(new_dir)
        self.producer_state.update_parent_dir(new_dir)
        self.leader_epoch_cache.checkpoint.path = os.path.join(new_dir, LEADER_EPOCH_CHECKPOINT)

    def delete(self) -> None:
        """Delete every file and the directory; blocking."""
        self._wait_for_writes()
        for _, segment in self._pending_deletes:
            self._delete_segment(segment)
        self._pending_deletes = ()
        for segment in self.segments:
            segment.delete()
        self._set_segments([])
        shutil.rmtree(self.dir, ignore_errors=True)
