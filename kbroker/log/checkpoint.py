"""Kafka's checkpoint files, and the leader epoch cache kept in one.

Format (text, UTF-8): line 1 the version (0), line 2 the number of entries, then one entry per line with
fields separated by a space:
- offset checkpoints, one per log dir (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
  `log-start-offset-checkpoint`): `topic partition offset`;
- `leader-epoch-checkpoint`, one per partition directory: `epoch startOffset`.

Writes are atomic: a `.tmp` file is written and fsynced, renamed over the file, and the directory fsynced.
Reads return nothing for a missing or empty file and raise CorruptCheckpoint on a malformed one.
"""
from __future__ import annotations

import logging
import os
from typing import Callable, Iterable, Mapping, NamedTuple

from .errors import CorruptCheckpoint
from .paths import InternedPath

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

logger = logging.getLogger("kbroker.log")


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: str, lines: list[str], version: int = CHECKPOINT_VERSION) -> None:
    tmp = path + ".tmp"
    text = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def _read_text(path: str) -> str:
    """The file's text, read without a file object (a third of the cost for the empty leader-epoch-checkpoint of
    each of 100 000 logs loading)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


def read_checkpoint(path: str, fields: int, version: int = CHECKPOINT_VERSION) -> list[list[str]]:
    """The entry lines split into `fields` fields each."""
    try:
        lines = _read_text(path).splitlines()
    except FileNotFoundError:
        return []
    if not lines:
        return []
    try:
        found_version = int(lines[0])
    except ValueError:
        raise CorruptCheckpoint(f"malformed version line in checkpoint file {path}: {lines[0]!r}") from None
    if found_version != version:
        raise CorruptCheckpoint(f"unrecognized version of the checkpoint file {path}: {found_version}")
    if len(lines) == 1:
        return []
    try:
        expected = int(lines[1])
    except ValueError:
        raise CorruptCheckpoint(f"malformed entry count in checkpoint file {path}: {lines[1]!r}") from None
    entries = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != fields:
            raise CorruptCheckpoint(f"malformed line in checkpoint file {path}: {line!r}")
        entries.append(parts)
    if len(entries) != expected:
        raise CorruptCheckpoint(f"expected {expected} entries in checkpoint file {path}, but found {len(entries)}")
    return entries


def _int(path: str, text: str, line: list[str]) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorruptCheckpoint(f"malformed line in checkpoint file {path}: {' '.join(line)!r}") from None


class OffsetCheckpointFile:
    """{(topic, partition): offset} in one of a log dir's offset checkpoint files."""

    def __init__(self, path: str):
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_checkpoint(self.path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])

    def read(self) -> dict[tuple[str, int], int]:
        return {(line[0], _int(self.path, line[1], line)): _int(self.path, line[2], line)
                for line in read_checkpoint(self.path, 3)}


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile(InternedPath):
    __slots__ = ()

    def __init__(self, path: str):
        self.path = path

    def write(self, entries: Iterable[EpochEntry]) -> None:
        write_checkpoint(self.path, [f"{e.epoch} {e.start_offset}" for e in entries])

    def read(self) -> list[EpochEntry]:
        return [EpochEntry(_int(self.path, line[0], line), _int(self.path, line[1], line))
                for line in read_checkpoint(self.path, 2)]


class LeaderEpochFileCache:
    """Leader epoch -> first offset of that epoch for one partition (Kafka's LeaderEpochFileCache), written
    through to `leader-epoch-checkpoint` on every change but a new leader's (see assign). run_blocking(fn) runs the
    write (it fsyncs)."""

    __slots__ = ("checkpoint", "_run_blocking", "_epochs", "writing", "pending")

    def __init__(self, path: str, run_blocking: Callable[[Callable[[], None]], object] | None = None,
                 exists: bool | None = None):
        """exists: whether the file is there, if the caller knows (a log's load: one system call less)."""
        self.checkpoint = LeaderEpochCheckpointFile(path)
        if not exists:
            open(path, "a").close()     # Kafka creates the file, empty, with the log
        self._run_blocking = run_blocking or (lambda fn: fn())
        self._epochs: list[EpochEntry] = self.checkpoint.read() if exists is not False else []
        self.writing = 0   # checkpoint writes in flight
        self.pending = False   # an entry assign(..., write=False) left for write_pending()

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._epochs)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1].epoch if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._epochs[0] if self._epochs else None

    def _flush(self) -> None:
        entries = list(self._epochs)
        self.pending = False
        self.writing += 1   # (the log's directory must not be renamed meanwhile: Log.rename_dir waits)
        try:
            self._run_blocking(lambda: self.checkpoint.write(entries))
        finally:
            self.writing -= 1

    def write_pending(self, blocking: bool = False) -> None:
        """Write the entries if assign(..., write=False) left them unwritten (blocking: here, not through
        run_blocking)."""
        if self.pending:
            if blocking:
                self.pending = False
                self.checkpoint.write(list(self._epochs))
            else:
                self._flush()

    def assign(self, epoch: int, start_offset: int, write: bool = True) -> None:
        """Record that `epoch` starts at start_offset, dropping entries that would break monotonicity.
        write False: a new leader's epoch at its log end, written (and fsynced) only by write_pending(), which the
        log runs before its next append, flush or close: nothing is stored in the epoch before its entry is, and a
        LeaderAndIsr making thousands of leaders costs no fsync per partition."""
        if self._epochs and self._epochs[-1].epoch == epoch and start_offset >= self._epochs[-1].start_offset:
            return
        new = EpochEntry(epoch, start_offset)
        retained = [e for e in self._epochs if e.epoch < epoch and e.start_offset < start_offset]
        removed = [e for e in self._epochs if not (e.epoch < epoch and e.start_offset < start_offset)]
        if removed and (len(removed) > 1 or removed[0].start_offset != start_offset):
            logger.warning("new epoch entry %s caused truncation of conflicting entries %s in %s",
                           new, removed, self.checkpoint.path)
        self._epochs = retained + [new]
        if write:
            self._flush()
        else:
            self.pending = True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset): the largest epoch <= requested_epoch and the start offset of the next epoch,
        or the log end offset for the latest epoch; (-1, -1) when unknown (Kafka's endOffsetFor)."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.latest_epoch == requested_epoch:
            return requested_epoch, log_end_offset
        subsequent = [e for e in self._epochs if e.epoch > requested_epoch]
        previous = [e for e in self._epochs if e.epoch <= requested_epoch]
        if not subsequent:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if not previous:
            return requested_epoch, subsequent[0].start_offset
        return previous[-1].epoch, subsequent[0].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove the entries starting at or after end_offset."""
        if end_offset >= 0 and self._epochs and self._epochs[-1].start_offset >= end_offset:
            self._epochs = [e for e in self._epochs if e.start_offset < end_offset]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop the entries before start_offset, keeping the epoch in force there as starting at start_offset."""
        previous = [e for e in self._epochs if e.start_offset <= start_offset]
        if previous:
            updated = [EpochEntry(previous[-1].epoch, start_offset)] + \
                [e for e in self._epochs if e.start_offset > start_offset]
            if updated != self._epochs:
                self._epochs = updated
                self._flush()

    def clear_and_flush(self) -> None:
        self._epochs = []
        self._flush()
