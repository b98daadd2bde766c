"""Kafka's segment indexes: the offset index (`.index`) and the time index (`.timeindex`).

Offset index entry (8 bytes, big-endian): offset relative to the segment's base offset (int32), position of a
batch in the `.log` (int32); time index entry (12 bytes): timestamp (int64), relative offset (int32). Both are
sparse and sorted. As in Kafka, a new index file is preallocated to the max index size and memory-mapped; it is
trimmed to its entries when its segment stops being the active one or is closed. An index of an inactive
segment is mapped only when first searched (Kafka's LazyIndex), so idle segments hold no mapping.

Lookups use Kafka's warm-section binary search: when the target lies in the last 8 KiB of entries, only that
section is searched, so lookups near the tail (followers, consumers in sync) touch pages that stay cached.
"""
from __future__ import annotations

import mmap
import os
import struct
from typing import NamedTuple

from .errors import CorruptIndex, InvalidOffset
from .paths import InternedPath

WARM_SECTION_BYTES = 8192
MAX_RELATIVE_OFFSET = 2 ** 31 - 1
NO_TIMESTAMP = -1


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def _round_down(n: int, factor: int) -> int:
    return factor * (n // factor)


class _Index(InternedPath):
    """What both indexes share: the file, its mapping, sizing, and the search (Kafka's AbstractIndex)."""

    __slots__ = ("base_offset", "max_index_size", "_mm", "_write_fd",
                 "_length", "_entries", "_max_entries", "_last_entry")

    ENTRY: struct.Struct
    entry_size: int
    _warm_entries: int   # entries in the warm section
    KEY, VALUE = 0, 1   # which half of an entry a search compares

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._mm: mmap.mmap | None = None
        self._write_fd = -1    # opened at the first entry written, closed with the mapping
        try:
            self._length = os.stat(path).st_size
            # a pre-existing index is assumed valid up to its last whole entry, as in Kafka
            self._entries = self._length // self.entry_size
        except FileNotFoundError:
            self._length = _round_down(max_index_size, self.entry_size)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, self._length)
            finally:
                os.close(fd)
            self._entries = 0
        self._max_entries = self._length // self.entry_size
        self._last_entry = None     # read at first use (a recovery resets the index before it needs it)

    # ---- sizes ------------------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    # ---- entries ------------------------------------------------------------------------------------------------

    def _parse(self, buf, slot: int) -> tuple[int, int]:
        """(key, value) of a slot, absolute: offset index (offset, position), time index (timestamp, offset)."""
        raise NotImplementedError

    def _entry(self, slot: int) -> tuple[int, int]:
        return self._parse(self._mm, slot)

    def _read_last_unmapped(self):
        if self._entries == 0:
            return self._empty_last()
        with open(self.path, "rb") as f:
            f.seek((self._entries - 1) * self.entry_size)
            return self._to_last(self._parse(f.read(self.entry_size), 0))

    @property
    def _last(self):
        last = self._last_entry
        if last is None:
            last = self._last_entry = self._read_last_unmapped()
        return last

    @_last.setter
    def _last(self, entry) -> None:
        self._last_entry = entry

    def _empty_last(self):
        raise NotImplementedError

    def _to_last(self, entry: tuple[int, int]):
        raise NotImplementedError

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > MAX_RELATIVE_OFFSET:
            raise InvalidOffset(f"offset {offset} cannot be stored relative to base offset {self.base_offset} "
                                f"in {self.path}")
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # ---- mapping and sizing ---------------------------------------------------------------------------------------

    def _ensure_mapped(self) -> None:
        if self._mm is None and self._length > 0:
            fd = os.open(self.path, os.O_RDWR)
            try:
                self._mm = mmap.mmap(fd, self._length)
            finally:
                os.close(fd)

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def resize(self, new_size: int) -> bool:
        """Set the file to new_size bytes (rounded down to whole entries), keeping the entries; False if
        nothing changed."""
        rounded = _round_down(new_size, self.entry_size)
        if rounded == self._length:
            return False
        mapped = self._mm is not None
        self._unmap()
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, rounded)
        finally:
            os.close(fd)
        self._length = rounded
        self._max_entries = rounded // self.entry_size
        if mapped:
            self._ensure_mapped()
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.entry_size * self._entries)

    def reset(self) -> None:
        """Drop every entry and make room for max_index_size bytes again."""
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = entries
        if entries == 0:
            self._last = self._empty_last()
        else:
            self._ensure_mapped()
            self._last = self._to_last(self._entry(entries - 1))

    def _truncate_to_value_or_key(self, target: int, which: int) -> None:
        """Kafka's truncateTo: drop the entries at or above `target` (compared on `which`)."""
        if self._entries == 0:
            return
        self._ensure_mapped()
        slot = self._largest_lower_bound_slot(target, which)
        if slot < 0:
            entries = 0
        elif self._entry(slot)[which] == target:
            entries = slot
        else:
            entries = slot + 1
        self._truncate_to_entries(entries)

    def flush(self) -> None:
        """fsync the file: on Linux this writes back the pages dirtied through the mapping, and unlike
        mmap.flush it releases the GIL, so it can run on a thread pool."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return   # renamed for deletion meanwhile
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close_handlers(self) -> None:
        """Unmap without trimming (the log dir has failed)."""
        self._unmap()

    def _write_entry(self, slot: int, entry: bytes) -> None:
        """Write an entry with pwrite, not through the mapping (which sees it: both are the page cache): on a
        full filesystem a store into a sparse page of the mapping is a SIGBUS that kills the broker, where
        pwrite fails with ENOSPC, which takes the log dir offline."""
        if self._write_fd < 0:
            self._write_fd = os.open(self.path, os.O_WRONLY)
        os.pwrite(self._write_fd, entry, slot * self.entry_size)

    def close(self) -> None:
        """Trim to the entries and unmap (the file stays)."""
        self.trim_to_valid_size()
        self._unmap()

    def delete(self) -> None:
        self._unmap()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename_to(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    # ---- search ---------------------------------------------------------------------------------------------------

    def _slot_range(self, target: int, which: int) -> tuple[int, int]:
        """(largest slot <= target, smallest slot >= target), -1 where none; Kafka's indexSlotRangeFor,
        searching the warm section (the last 8 KiB of entries) alone when the target is in it."""
        n = self._entries
        if n == 0:
            return -1, -1

        def binary_search(lo: int, hi: int) -> tuple[int, int]:
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                found = self._entry(mid)[which]
                if found > target:
                    hi = mid - 1
                elif found < target:
                    lo = mid
                else:
                    return mid, mid
            return lo, (-1 if lo == n - 1 else lo + 1)

        first_hot = max(0, n - 1 - self._warm_entries)
        if self._entry(first_hot)[which] < target:
            return binary_search(first_hot, n - 1)
        if self._entry(0)[which] > target:
            return -1, 0
        return binary_search(0, first_hot)

    def _largest_lower_bound_slot(self, target: int, which: int) -> int:
        return self._slot_range(target, which)[0]

    def _sanity_entries(self) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """(first entry, last entry) read from the file, or None when empty; raises CorruptIndex on a size
        that is not a whole number of entries."""
        if self._length % self.entry_size:
            raise CorruptIndex(f"index file {self.path} has size {self._length}, not a multiple of the entry "
                               f"size {self.entry_size}")
        if self._entries == 0:
            return None
        if self._mm is not None:
            return self._entry(0), self._entry(self._entries - 1)
        with open(self.path, "rb") as f:
            first = self._parse(f.read(self.entry_size), 0)
            f.seek((self._entries - 1) * self.entry_size)
            return first, self._parse(f.read(self.entry_size), 0)


class OffsetIndex(_Index):
    """offset -> position of the batch holding it, one entry per index.interval.bytes of log."""

    __slots__ = ()
    ENTRY = struct.Struct(">ii")
    entry_size = ENTRY.size
    _warm_entries = WARM_SECTION_BYTES // entry_size

    def _parse(self, buf, slot: int) -> tuple[int, int]:
        relative, position = self.ENTRY.unpack_from(buf, slot * 8)
        return self.base_offset + relative, position

    def _empty_last(self) -> OffsetPosition:
        return OffsetPosition(self.base_offset, 0)

    def _to_last(self, entry) -> OffsetPosition:
        return OffsetPosition(*entry)

    @property
    def last_offset(self) -> int:
        return self._last.offset

    @property
    def last_entry(self) -> OffsetPosition:
        return self._last

    def entry(self, n: int) -> OffsetPosition:
        if n >= self._entries:
            raise IndexError(f"attempt to fetch entry {n} of an index with {self._entries} entries")
        self._ensure_mapped()
        return OffsetPosition(*self._entry(n))

    def append(self, offset: int, position: int) -> None:
        if self.is_full:
            raise InvalidOffset(f"attempt to append to a full index {self.path} ({self._entries} entries)")
        if self._entries and offset <= self._last.offset:
            raise InvalidOffset(f"attempt to append offset {offset} to index {self.path} at entry {self._entries}, "
                                f"no larger than the last offset {self._last.offset}")
        self._write_entry(self._entries, self.ENTRY.pack(self._relative(offset), position))
        self._entries += 1
        self._last = OffsetPosition(offset, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target_offset, or (base offset, 0)."""
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        self._ensure_mapped()
        slot = self._largest_lower_bound_slot(target_offset, self.KEY)
        return OffsetPosition(self.base_offset, 0) if slot < 0 else OffsetPosition(*self._entry(slot))

    def truncate_to(self, offset: int) -> None:
        """Remove the entries with offsets >= offset."""
        self._truncate_to_value_or_key(offset, self.KEY)

    def sanity_check(self) -> None:
        """Kafka's sanityCheck (last offset >= base offset, whole entries), and offsets that increase from the
        first entry to the last, which catches a preallocated tail of zeros."""
        ends = self._sanity_entries()
        if ends is None:
            return
        (first_offset, _), (last_offset, _) = ends
        if last_offset < self.base_offset:
            raise CorruptIndex(f"corrupt index {self.path}: last offset {last_offset} is below the base offset "
                               f"{self.base_offset}")
        if self._entries > 1 and last_offset <= first_offset:
            raise CorruptIndex(f"corrupt index {self.path}: last offset {last_offset} is not above the first "
                               f"offset {first_offset}")


class TimeIndex(_Index):
    """timestamp -> offset, an entry only when the segment's max timestamp grows."""

    __slots__ = ()
    ENTRY = struct.Struct(">qi")
    entry_size = ENTRY.size
    _warm_entries = WARM_SECTION_BYTES // entry_size

    def _parse(self, buf, slot: int) -> tuple[int, int]:
        timestamp, relative = self.ENTRY.unpack_from(buf, slot * 12)
        return timestamp, self.base_offset + relative

    def _empty_last(self) -> TimestampOffset:
        return TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def _to_last(self, entry) -> TimestampOffset:
        return TimestampOffset(*entry)

    @property
    def is_full(self) -> bool:
        # the last slot is kept for the entry written when the segment rolls or closes
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        return self._last

    def entry(self, n: int) -> TimestampOffset:
        if n >= self._entries:
            raise IndexError(f"attempt to fetch entry {n} of a time index with {self._entries} entries")
        self._ensure_mapped()
        return TimestampOffset(*self._entry(n))

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if timestamp is above the last entry's (Kafka's maybeAppend)."""
        if not skip_full_check and self.is_full:
            raise InvalidOffset(f"attempt to append to a full time index {self.path} ({self._entries} entries)")
        last = self._last
        if self._entries and offset < last.offset:
            raise InvalidOffset(f"attempt to append offset {offset} to time index {self.path} below the last "
                                f"offset {last.offset}")
        if self._entries and timestamp < last.timestamp:
            raise InvalidOffset(f"attempt to append timestamp {timestamp} to time index {self.path} below the "
                                f"last timestamp {last.timestamp}")
        if timestamp > last.timestamp:
            if self._entries >= self._max_entries:   # only with skip_full_check on a trimmed index
                self.resize((self._entries + 1) * self.entry_size)
            self._write_entry(self._entries, self.ENTRY.pack(timestamp, self._relative(offset)))
            self._entries += 1
            self._last = TimestampOffset(timestamp, offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target_timestamp, or (-1, base offset)."""
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        self._ensure_mapped()
        slot = self._largest_lower_bound_slot(target_timestamp, self.KEY)
        return TimestampOffset(NO_TIMESTAMP, self.base_offset) if slot < 0 else TimestampOffset(*self._entry(slot))

    def truncate_to(self, offset: int) -> None:
        """Remove the entries pointing at offsets >= offset."""
        self._truncate_to_value_or_key(offset, self.VALUE)

    def sanity_check(self) -> None:
        """Kafka's sanityCheck: last timestamp >= first, last offset >= base offset, whole entries."""
        ends = self._sanity_entries()
        if ends is None:
            return
        (first_ts, _), (last_ts, last_offset) = ends
        if last_ts < first_ts:
            raise CorruptIndex(f"corrupt time index {self.path}: last timestamp {last_ts} is below the first "
                               f"timestamp {first_ts}")
        if last_offset < self.base_offset:
            raise CorruptIndex(f"corrupt time index {self.path}: last offset {last_offset} is below the base "
                               f"offset {self.base_offset}")
