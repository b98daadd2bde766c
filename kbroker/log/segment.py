"""One log segment: `%020d.log` holding entries (record batches or v0/v1 messages) whose offsets start at the
segment's base offset, with its `.index`, `.timeindex` and `.txnindex` (aborted transactions whose marker is
here) (Kafka's LogSegment).

Appends take bytes whose offsets are already assigned; reads hand back a FileSlice (fd, position, length) for
sendfile. Entries are found by reading their headers from the file (records.entries parses them); only a
timestamp search looks inside one batch, with records.batches' decoders (aiokafka's C reader for v2).
"""
from __future__ import annotations

import errno
import itertools
import mmap
import os
import struct
import sys
from typing import Iterator, NamedTuple

from ..clock import Clock
from ..records.batches import legacy_records, v2_records
from ..records.entries import LOG_OVERHEAD, V2_HEADER_SIZE, CorruptEntry, Entry, crc_valid, read_entry
from .errors import CorruptIndex, InvalidOffset
from .index import NO_TIMESTAMP, OffsetIndex, TimeIndex, TimestampOffset
from .txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_SCAN_CHUNK = 8192
_PARTITION_LEADER_EPOCH = struct.Struct(">i")   # at byte 12 of a v2 batch
_DECOMPRESSION_LIMIT = 2 ** 31 - 1               # data in the log was validated when appended
_FILE_IDS = itertools.count(1)                   # LogSegment.file_id: never reused within a process


def filename_prefix(offset: int) -> str:
    return "%020d" % offset


def log_file_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix(base_offset) + LOG_SUFFIX + suffix)


def offset_index_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix(base_offset) + INDEX_SUFFIX + suffix)


def time_index_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix(base_offset) + TIME_INDEX_SUFFIX + suffix)


def txn_index_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix(base_offset) + TXN_INDEX_SUFFIX + suffix)


class FileSlice(NamedTuple):
    """`length` bytes of an open log file from `position`: send with os.sendfile(out, fd, position, length).

    The fd stays open until the segment is deleted, file.delete.delay.ms after it left the log. file_id is the
    segment's LogSegment.file_id when the slice was taken (what caches of derived bytes key on)."""
    fd: int
    position: int
    length: int
    file_id: int = 0

    def read(self) -> bytes:
        out = bytearray()
        while len(out) < self.length:
            chunk = os.pread(self.fd, self.length - len(out), self.position + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)


EMPTY_SLICE = FileSlice(-1, 0, 0)


class LogOffsetMetadata(NamedTuple):
    """An offset and where its batch starts: segment base offset and byte position (-1 when unknown)."""
    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class FetchDataInfo(NamedTuple):
    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice
    first_entry_incomplete: bool = False   # min_one_message=False and the first entry is above max size


class LogOffsetPosition(NamedTuple):
    offset: int      # last offset of the entry found
    position: int
    size: int


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int | None = None


class LogSegment:
    """The `.log` file is opened at its first read or write, not when the segment is created or loaded (as Kafka
    opens its indexes lazily): an idle replica holds no file descriptor. Once opened it stays open until the
    segment is closed or deleted, so a FileSlice handed out (sent with sendfile later) never sees its fd closed
    or reused; `release_fd` closes it only while no slice can exist (the log's loading)."""

    __slots__ = ("dir", "base_offset", "index_interval_bytes", "_clock", "_log_name", "_open_fd", "file_id", "_size",
                 "_unsynced", "offset_index", "time_index", "_txn_index", "_created_ms", "_rolling_based_timestamp",
                 "_max_ts", "_bytes_since_last_index_entry", "_closed", "__weakref__")

    def __init__(self, dir: str, base_offset: int, *, index_interval_bytes: int = 4096,
                 max_index_size: int = 10 * 1024 * 1024, clock: Clock | None = None, preallocate_bytes: int = 0,
                 suffix: str = ""):
        """Load the segment, creating the missing files (a new index is preallocated to max_index_size; a new
        .log to preallocate_bytes when above 0)."""
        self.dir = sys.intern(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self._clock = clock or Clock()
        self._log_name = sys.intern(filename_prefix(base_offset) + LOG_SUFFIX + suffix)   # (see log.paths)
        self._open_fd = -1
        # Identifies these bytes: a new one whenever bytes already written may change (truncation, recovery), so
        # what was derived from them (the fetch down-conversion cache) is never served after that.
        self.file_id = next(_FILE_IDS)
        self._unsynced = False      # written or truncated through this object and not fsynced yet
        self._closed = False
        try:
            self._size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
            if preallocate_bytes > 0:
                self._open_fd = fd      # kept: the segment is about to be written
                os.posix_fallocate(fd, 0, preallocate_bytes)
            else:
                os.close(fd)
            self._size = 0
        self.offset_index = OffsetIndex(offset_index_path(dir, base_offset, suffix), base_offset, max_index_size)
        self.time_index = TimeIndex(time_index_path(dir, base_offset, suffix), base_offset, max_index_size)
        self._txn_index: TransactionIndex | None = None     # read at first use: most segments have none
        self._created_ms = self._clock.now_ms()
        self._rolling_based_timestamp: int | None = None
        self._max_ts: TimestampOffset | None = None       # loaded lazily
        self._bytes_since_last_index_entry = 0

    @property
    def _fd(self) -> int:
        """The .log file's descriptor, opened at first use (an OSError here is the log dir's, as any other)."""
        fd = self._open_fd
        if fd < 0:
            if self._closed:
                raise OSError(errno.EBADF, f"segment {self.log_path} is closed")
            fd = os.open(self.log_path, os.O_RDWR)
            if self._open_fd >= 0:      # opened meanwhile by another thread (the cleaner's): use that one
                os.close(fd)
                return self._open_fd
            self._open_fd = fd
        return fd

    @property
    def log_path(self) -> str:
        return os.path.join(self.dir, self._log_name)

    @property
    def txn_index(self) -> TransactionIndex:
        """The aborted transactions of this segment, read from its `.txnindex` (if any) at first use."""
        if self._txn_index is None:
            self._txn_index = TransactionIndex(self._txn_index_path)
        return self._txn_index

    @property
    def _txn_index_path(self) -> str:
        cut = self.log_path.rfind(LOG_SUFFIX)      # `<base>.log<suffix>` -> `<base>.txnindex<suffix>`
        return self.log_path[:cut] + TXN_INDEX_SUFFIX + self.log_path[cut + len(LOG_SUFFIX):]

    @property
    def has_open_fd(self) -> bool:
        return self._open_fd >= 0

    def release_fd(self) -> None:
        """Close the .log fd if it is open and nothing written through it waits for an fsync. Only while no
        FileSlice of this segment can exist: when the log has just been loaded."""
        if self._open_fd >= 0 and not self._unsynced:
            os.close(self._open_fd)
            self._open_fd = -1

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.log_path})"

    @property
    def size(self) -> int:
        return self._size

    @property
    def last_modified_ms(self) -> int:
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # ---- reading entry headers ---------------------------------------------------------------------------------

    def _pread(self, position: int, length: int) -> bytes:
        return FileSlice(self._fd, position, length).read()

    def _scan(self, start: int, end: int | None = None) -> Iterator[tuple[int, Entry]]:
        """(position, entry header) of each whole entry from `start` to `end` (default: the end), read in
        chunks; Entry.position is relative to an internal buffer and not used. Raises CorruptEntry."""
        end = self._size if end is None else end
        pos = start
        chunk, chunk_pos = b"", start
        while end - pos > LOG_OVERHEAD:
            rel = pos - chunk_pos
            need = min(V2_HEADER_SIZE, end - pos)
            if rel + need > len(chunk):
                chunk, chunk_pos, rel = os.pread(self._fd, max(_SCAN_CHUNK, need), pos), pos, 0
                if len(chunk) < need:
                    return
            entry = read_entry(chunk, rel, rel + end - pos)
            if entry is None:
                return
            yield pos, entry
            pos += entry.size

    # ---- appends ----------------------------------------------------------------------------------------------

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return self.offset_index.can_append_offset(offset)

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_largest_timestamp: int,
               data, run_write=None) -> None:
        """Write entries (offsets assigned; largest_offset is the last of them) and add index entries when
        more than index.interval.bytes were written since the last one. run_write(fn) runs the file write (a
        thread pool's apply, so that the copy runs beside the hub); the size, and so what reads see, and the
        index entries only move once the bytes are written."""
        if not data:
            return
        if not self.can_convert_to_relative_offset(largest_offset):
            raise InvalidOffset(f"offset {largest_offset} is out of range for segment {self.log_path}")
        position = self._size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self._write(data, run_write)
        if largest_timestamp > self.max_timestamp_so_far:
            self._max_ts = TimestampOffset(largest_timestamp, offset_of_largest_timestamp)
        if self._bytes_since_last_index_entry > self.index_interval_bytes and not self.offset_index.is_full:
            self.offset_index.append(largest_offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += len(data)

    def _write(self, data, run_write=None) -> None:
        view = memoryview(data).cast("B")
        fd, position = self._fd, self._size

        def write() -> None:
            written = 0
            while written < len(view):
                written += os.pwrite(fd, view[written:], position + written)
        if run_write is None:
            write()
        else:
            run_write(write)
        self._size = position + len(view)
        self._unsynced = True

    # ---- the max timestamp, rolling -------------------------------------------------------------------------------

    def _max_timestamp_and_offset(self) -> TimestampOffset:
        if self._max_ts is None:
            self._max_ts = self._read_largest_timestamp()
        return self._max_ts

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset().offset

    def _read_largest_timestamp(self) -> TimestampOffset:
        """The time index's last entry, or a larger timestamp found scanning the entries after it (all of them
        when the time index is empty)."""
        best = self.time_index.last_entry
        for _, entry in self._scan(self.offset_index.lookup(best.offset).position):
            if entry.max_timestamp > best.timestamp:
                best = TimestampOffset(entry.max_timestamp, entry.last_offset)
        return best

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's modification time when there is none (v0)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Time since the segment's first batch timestamp (or its creation when it has none), as Kafka."""
        if self._rolling_based_timestamp is None and self._size > 0:
            first = next(self._scan(0), None)
            if first is not None:
                self._rolling_based_timestamp = first[1].max_timestamp
        t = self._rolling_based_timestamp
        return message_timestamp - t if t is not None and t >= 0 else now_ms - self._created_ms

    def should_roll(self, max_segment_bytes: int, max_segment_ms: int, messages_size: int,
                    max_timestamp_in_messages: int, max_offset_in_messages: int, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: full by size, by segment.ms, a full index, or an offset too far from
        the base offset for the index."""
        reached_roll_ms = self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > max_segment_ms
        return (self._size > max_segment_bytes - messages_size
                or (self._size > 0 and reached_roll_ms)
                or self.offset_index.is_full or self.time_index.is_full
                or not self.can_convert_to_relative_offset(max_offset_in_messages))

    def on_become_inactive(self) -> None:
        """When a newer segment takes over: write the final time index entry, trim the indexes and the file."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_file()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def _trim_file(self) -> None:
        """Cut a preallocated tail (log.preallocate), without opening a file that is not open."""
        fd = self._open_fd
        if fd >= 0:
            if os.fstat(fd).st_size > self._size:
                os.ftruncate(fd, self._size)
                self._unsynced = True
        elif os.stat(self.log_path).st_size > self._size:
            os.truncate(self.log_path, self._size)
            self._unsynced = True

    # ---- reads ------------------------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first entry whose last offset is >= offset, or None."""
        start = max(self.offset_index.lookup(offset).position, starting_position)
        for position, entry in self._scan(start):
            if entry.last_offset >= offset:
                return LogOffsetPosition(entry.last_offset, position, entry.size)
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo | None:
        """Up to max_size bytes from the entry holding start_offset, not past max_position; the first entry
        whole even when larger if min_one_message. None if start_offset is beyond this segment. The slice may
        end inside an entry, as Kafka's (clients drop a partial last batch)."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read from {self.log_path}")
        max_position = self._size if max_position is None else max_position
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, found.position)
        adjusted = max(max_size, found.size) if min_one_message else max_size
        if adjusted == 0:
            return FetchDataInfo(metadata, EMPTY_SLICE)
        length = max(0, min(max_position - found.position, adjusted))
        return FetchDataInfo(metadata, FileSlice(self._fd, found.position, length, self.file_id),
                             adjusted < found.size)

    def read_next_offset(self) -> int:
        """The offset after the last entry (the base offset when empty)."""
        next_offset = self.base_offset
        for _, entry in self._scan(self.offset_index.last_entry.position):
            next_offset = entry.last_offset + 1
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None
                                 ) -> OffsetAndTimestamp | None:
        """The first record at or after starting_offset with a timestamp >= timestamp: the time index gives
        where to start, the entry headers which batch, and the batch's records the exact offset."""
        starting_offset = self.base_offset if starting_offset is None else starting_offset
        indexed = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(indexed.offset, starting_offset)).position
        for pos, entry in self._scan(position):
            if entry.max_timestamp >= timestamp and entry.last_offset >= starting_offset:
                found = _search_batch(self._pread(pos, entry.size), timestamp, starting_offset)
                if found is not None:
                    return found
        return None

    # ---- recovery, truncation ---------------------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndex if an index fails Kafka's checks or points beyond the end of the log."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        if self.offset_index.entries and self.offset_index.last_entry.position >= self._size:
            raise CorruptIndex(f"index {self.offset_index.path} points at position "
                               f"{self.offset_index.last_entry.position}, beyond the log's {self._size} bytes")

    def recover(self, max_message_size: int | None = None, leader_epoch_cache=None,
                txn_index_exists: bool | None = None) -> int:
        """Rescan the whole file, validating every entry (size, magic, CRC, offset range, and size up to
        max_message_size when given), rebuild both indexes, and truncate at the first invalid byte. Returns the
        number of bytes truncated. v2 batches' leader epochs go to leader_epoch_cache when newer."""
        self.offset_index.reset()
        self.time_index.reset()
        # (an empty file is not opened)
        file_size = os.fstat(self._open_fd).st_size if self._open_fd >= 0 else os.stat(self.log_path).st_size
        valid = last_index_entry = 0
        next_offset = self.base_offset
        max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        if file_size:
            buf = mmap.mmap(self._fd, file_size, access=mmap.ACCESS_READ)
            try:
                while valid < file_size:
                    try:
                        entry = read_entry(buf, valid, file_size)
                    except CorruptEntry:
                        break
                    if (entry is None
                            or (max_message_size is not None and entry.size - LOG_OVERHEAD > max_message_size)
                            or not self.can_convert_to_relative_offset(entry.last_offset)
                            or not crc_valid(buf, entry)):
                        break
                    if entry.max_timestamp > max_ts.timestamp:
                        max_ts = TimestampOffset(entry.max_timestamp, entry.last_offset)
                    if valid - last_index_entry > self.index_interval_bytes:
                        self.offset_index.append(entry.last_offset, valid)
                        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                        last_index_entry = valid
                    if entry.magic == 2 and leader_epoch_cache is not None:
                        epoch = _PARTITION_LEADER_EPOCH.unpack_from(buf, valid + 12)[0]
                        latest = leader_epoch_cache.latest_epoch
                        if epoch >= 0 and (latest is None or epoch > latest):
                            leader_epoch_cache.assign(epoch, entry.base_offset)
                    valid += entry.size
                    next_offset = entry.last_offset + 1
            finally:
                buf.close()
        if valid != file_size:
            os.ftruncate(self._fd, valid)
            self._unsynced = True
        self._size = valid
        self.file_id = next(_FILE_IDS)
        # entries of markers cut off go; missing ones are added again by the producer state's replay
        if self._txn_index is not None or (os.path.exists(self._txn_index_path) if txn_index_exists is None
                                           else txn_index_exists):
            self.txn_index.truncate_to(next_offset)
        if valid:   # an empty segment keeps its indexes' room (normally the active one: the log sizes it so anyway)
            self.offset_index.trim_to_valid_size()
            # a normally closed segment ends its time index with the largest timestamp; so does a recovered one
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
            self.time_index.trim_to_valid_size()
        self._max_ts = max_ts
        self._rolling_based_timestamp = None
        return file_size - valid

    def truncate_to(self, offset: int) -> int:
        """Remove the entries holding offsets >= offset (a batch holding it goes whole) and make the indexes
        writable again; returns the bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.resize_indexes(self.offset_index.max_index_size)
        truncated = 0
        if mapping is not None:
            truncated = self._size - mapping.position
            os.ftruncate(self._fd, mapping.position)
            self._unsynced = True
            self._size = mapping.position
            self.file_id = next(_FILE_IDS)
        if self._size == 0:
            self._created_ms = self._clock.now_ms()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_ts = None
        return truncated

    # ---- files ------------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the .log and the indexes (blocking: run it off the gevent hub). A .log not opened since it was
        loaded has nothing of this process to write back."""
        if self._open_fd >= 0 or self._unsynced:
            try:
                os.fsync(self._fd)
            except OSError:
                if not self._closed:
                    raise
                return      # deleted while the flush was queued
            self._unsynced = False
        self.offset_index.flush()
        self.time_index.flush()
        if self._txn_index is not None:
            self._txn_index.flush()

    def close(self) -> None:
        """Write the final time index entry, trim the indexes and the file, fsync, close."""
        if self._closed:
            return
        if self._max_ts is not None:
            self.time_index.maybe_append(self._max_ts.timestamp, self._max_ts.offset, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self._trim_file()
        self.flush()
        self._close_fd()

    def close_handlers(self) -> None:
        """Close the file and unmap the indexes, writing nothing (the log dir has failed)."""
        self._close_fd()
        self.offset_index.close_handlers()
        self.time_index.close_handlers()

    def delete(self) -> None:
        """Close and remove the files (those already gone are fine)."""
        self._close_fd()
        self.offset_index.delete()
        self.time_index.delete()
        if self._txn_index is not None:
            self._txn_index.delete()
        else:
            try:
                os.unlink(self._txn_index_path)
            except FileNotFoundError:
                pass
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the segment's files, e.g. ("", ".deleted") before an asynchronous delete."""
        def renamed(path: str) -> str:
            if not path.endswith(old_suffix):
                raise ValueError(f"{path} does not end with {old_suffix!r}")
            return path[:len(path) - len(old_suffix)] + new_suffix
        txn_path = self._txn_index_path
        os.rename(self.log_path, renamed(self.log_path))
        self._log_name = sys.intern(renamed(self._log_name))
        for index in (self.offset_index, self.time_index, self._txn_index):
            if index is None:   # not read: its file (if any) follows the .log's name
                try:
                    os.rename(txn_path, renamed(txn_path))
                except FileNotFoundError:
                    pass
                continue
            try:
                index.rename_to(renamed(index.path))
            except FileNotFoundError:
                index.path = renamed(index.path)

    def _close_fd(self) -> None:
        self._closed = True
        fd, self._open_fd = self._open_fd, -1
        if fd >= 0:
            os.close(fd)

    def update_parent_dir(self, dir: str) -> None:
        """After the partition directory was renamed: same file names under the new directory."""
        self.dir = sys.intern(dir)
        for index in (self.offset_index, self.time_index, self._txn_index):
            if index is not None:
                index.path = os.path.join(dir, os.path.basename(index.path))


def _search_batch(data: bytes, timestamp: int, starting_offset: int) -> OffsetAndTimestamp | None:
    """The first record of the entry in data at or after starting_offset with a timestamp >= timestamp."""
    epoch = None
    if data[16] == 2:
        records = v2_records(data, 0, len(data), _DECOMPRESSION_LIMIT)
        epoch = _PARTITION_LEADER_EPOCH.unpack_from(data, 12)[0]
        epoch = epoch if epoch >= 0 else None
    else:
        records = legacy_records(data, 0, len(data), _DECOMPRESSION_LIMIT)
    for record in records:
        if record.timestamp >= timestamp and record.offset >= starting_offset:
            return OffsetAndTimestamp(record.offset, record.timestamp, epoch)
    return None
