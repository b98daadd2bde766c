"""The log cleaner's manager (Kafka's LogCleanerManager): which logs to clean, and what the cleaner remembers.

A compacted log is split at the cleaner checkpoint (the `cleaner-offset-checkpoint` of its log dir, Kafka's
offset checkpoint format) into a clean section (already compacted) and a dirty section. The dirty section
ends at the first uncleanable offset: the smallest of the active segment's base offset, the last stable
offset (an open transaction's data is never cleaned) and the base offset of the first dirty segment whose
largest timestamp is within min.compaction.lag.ms of now.

Selection (`grab_filthiest_log`): the compacted logs whose dirty ratio (cleanable bytes / (clean + cleanable
bytes)) is above min.cleanable.dirty.ratio, or that have cleanable bytes and a dirty segment whose first batch
is older than max.compaction.lag.ms, dirtiest first; never one being cleaned (`in_progress`) or marked
uncleanable (a corrupt entry or an unexpected error), until it is truncated.

State kept here: the checkpoints of each log dir (read at start, moved back by truncations, dropped with a
deleted log, written after each cleaning and when changed), the logs being cleaned, the uncleanable ones, the
last statistics, and the clean marks: a cleaning that ends at offset E at time T records (E, T), and
tombstones and transaction markers below the largest E recorded at least delete.retention.ms ago are past
their retention (`delete_horizon`), measured per offset, not per segment, so merging segments never keeps
them forever as Kafka 2.8 could. After a restart, the offsets below the checkpoint count as cleaned when the
newest clean segment was written (its modification time, which the cleaner sets from its clock).

Aborting: `shutdown` stops the cleaner, and a cleaning aborts (CleaningAborted) when its log was truncated,
deleted, renamed or replaced meanwhile (`check_live`); a log is never paused otherwise, since retention skips
the logs in progress and the cleaner applies it after cleaning them.

Topic settings: min.cleanable.dirty.ratio, delete.retention.ms, min.compaction.lag.ms and
max.compaction.lag.ms come from the topic's overrides (LogConfig.passthrough), else from the broker's
log.cleaner.min.cleanable.ratio, log.cleaner.delete.retention.ms, log.cleaner.min.compaction.lag.ms and
log.cleaner.max.compaction.lag.ms (CleanerConfig).
"""
from __future__ import annotations

import logging
import os
import struct
import weakref
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..clock import Clock
from ..records.entries import V2_HEADER_SIZE
from .checkpoint import OffsetCheckpointFile
from .config import MAX_LONG, LogConfig
from .errors import CorruptCheckpoint
from .log import Log, RunBlocking, TopicPartition
from .segment import LogSegment

logger = logging.getLogger("kbroker.log.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
MAP_ENTRY_BYTES = 24                 # Kafka's SkimpyOffsetMap slot: 16-byte MD5 of the key + 8-byte offset
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
    beyond the log end; the dirty section stops at the active segment, the last stable offset and the first dirty
    segment within min.compaction.lag.ms; max.compaction.lag.ms forces a cleaning when a dirty segment's first
    batch is older than that."""
    start = log.log_start_offset
    first_dirty = start if checkpoint_offset is None else checkpoint_offset
    if first_dirty < start or first_dirty > log.log_end_offset:
        first_dirty = start
    segments = log.segments
    dirty_non_active = [s for s, nxt in zip(segments, segments[1:]) if nxt.base_offset > first_dirty]
    uncleanable = min(segments[-1].base_offset, log.last_stable_offset)
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


# ---- the manager ----------------------------------------------------------------------------------------------

class LogCleanerManager:
    def __init__(self, log_dirs: Sequence[str], config: CleanerConfig, clock: Clock, run_blocking: RunBlocking,
                 live_logs: Callable[[], Mapping[TopicPartition, Log]] | None):
        """live_logs() gives the logs to consider (the LogManager's); run_blocking(fn) runs fn off the hub."""
        self.config = config
        self._clock = clock
        self._run_blocking = run_blocking
        self._live_logs = live_logs
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        self._dirty_checkpoints: set[str] = set()
        self._marks: dict[TopicPartition, list[tuple[int, int]]] = {}   # (end offset, time cleaned)
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        self.last_stats: dict[TopicPartition, object] = {}               # the executor's CleanerStats
        self.stopped = False
        self._truncation_listener = self._on_truncation    # bound once: every attached log's listener
        self._compacted: list[tuple[TopicPartition, Log]] = []   # the live logs whose policy compacts ...
        self._compacted_mark: tuple | None = None                # ... as of (Log.changes, number of live logs)
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

    def update_checkpoint(self, log: Log, end_offset: int) -> None:
        """A cleaning of the log ended at end_offset: the next dirty section starts there (written now)."""
        self._checkpoint_of_dir(log.parent_dir)[log.topic_partition] = end_offset
        self._write_checkpoint(log.parent_dir)

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

    def forget_dir(self, log_dir: str) -> None:
        """The log dir failed: its checkpoint is no longer written."""
        self._checkpoints.pop(log_dir, None)
        self._dirty_checkpoints.discard(log_dir)

    @property
    def checkpoints_changed(self) -> bool:
        return bool(self._dirty_checkpoints)

    # ---- the logs' lives ----------------------------------------------------------------------------------------

    def attach(self, log: Log) -> None:
        """Follow the log's truncations: the checkpoint and the clean marks never stay beyond its end."""
        if self._truncation_listener not in log.truncation_listeners:
            log.truncation_listeners.append(self._truncation_listener)

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

    def is_live(self, log: Log) -> bool:
        """The log still has segments and (with live_logs) is still the partition's log."""
        return bool(log.segments) and (self._live_logs is None
                                       or self._live_logs().get(log.topic_partition) is log)

    def check_live(self, log: Log, check: Callable[[], None]) -> None:
        """Raise CleaningAborted when check() does or the log is no longer live."""
        check()
        if not self.is_live(log):
            raise CleaningAborted()

    # ---- selection ----------------------------------------------------------------------------------------------

    def settings_for(self, log: Log) -> CompactionSettings:
        return compaction_settings(log.config, self.config)

    def cleanable(self, log: Log, now_ms: int | None = None) -> LogToClean:
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        return log_to_clean(log, self.checkpoint_offset(log), self.settings_for(log), now_ms)

    def _compacted_logs(self) -> list[tuple[TopicPartition, Log]]:
        """The live logs whose cleanup.policy includes compact, listed again only when a log came, went, was
        replaced or changed config (every 15 s a pass over 100 000 logs of which a handful compact)."""
        live = self._live_logs() if self._live_logs is not None else {}
        mark = (Log.changes, len(live))
        if mark != self._compacted_mark or any(live.get(tp) is not log for tp, log in self._compacted):
            self._compacted = [(tp, log) for tp, log in live.items() if log.config.compact]
            self._compacted_mark = mark
        return self._compacted

    def grab_filthiest_log(self, exclude=()) -> LogToClean | None:
        """The compacted log with the highest dirty ratio among those above their min.cleanable.dirty.ratio or
        due by max.compaction.lag.ms, not being cleaned, not in exclude."""
        now = self._clock.now_ms()
        best = None
        for tp, log in self._compacted_logs():
            if tp in self.in_progress or tp in exclude or tp in self.uncleanable:
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

    # ---- tombstone retention ------------------------------------------------------------------------------------

    def delete_horizon(self, log: Log, first_dirty: int, settings: CompactionSettings, now: int) -> int:
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

    def add_mark(self, tp: TopicPartition, end_offset: int, now: int, settings: CompactionSettings) -> None:
        marks = self._marks.setdefault(tp, [])
        marks.append((end_offset, now))
        limit = now - settings.delete_retention_ms
        expired = [m for m in marks if m[1] <= limit]
        if len(expired) > 1:
            newest = max(expired)
            self._marks[tp] = [newest] + [m for m in marks if m[1] > limit]


def cleaner_checkpoint_path(log_dir: str) -> str:
    return os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)
