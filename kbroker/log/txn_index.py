"""`<base offset>.txnindex`: the aborted transactions whose ABORT marker is in one segment (Kafka's
TransactionIndex), which READ_COMMITTED fetches list so consumers can drop the aborted records.

One 34-byte entry per aborted non-empty transaction, in marker order: version int16 (0), producer id int64,
first offset int64, last offset int64 (the marker's), last stable offset int64 (at the time of the abort).
The file is created on the first entry; the entries are small and few, so they are kept in memory too.
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple


ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size   # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    __slots__ = ("path", "entries")

    def __init__(self, path: str):
        self.path = path
        self.entries: list[AbortedTxn] = []
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        # Whatever follows a torn or unknown entry (a crash mid-write) is dropped; the producer state's replay
        # of the log adds lost entries again.
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, *fields = ENTRY.unpack_from(data, pos)
            if version != VERSION or (self.entries and fields[2] <= self.entries[-1].last_offset):
                break
            self.entries.append(AbortedTxn(*fields))
        if len(self.entries) * ENTRY_SIZE != len(data):
            self._rewrite()

    @property
    def last_offset(self) -> int:
        """The marker offset of the newest entry, -1 when empty."""
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> None:
        if txn.last_offset <= self.last_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} appended after one ending at "
                             f"{self.last_offset} in {self.path}")
        self.entries.append(txn)
        with open(self.path, "ab") as f:
            f.write(ENTRY.pack(VERSION, *txn))

    def collect(self, start: int, end: int) -> list[AbortedTxn]:
        """Entries overlapping [start, end): their marker at or after start, their first offset before end."""
        return [t for t in self.entries if t.last_offset >= start and t.first_offset < end]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or beyond offset."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def reset(self) -> None:
        self.entries = []
        self._remove()

    def _rewrite(self) -> None:
        if not self.entries:
            self._remove()
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(ENTRY.pack(VERSION, *t) for t in self.entries))
        os.replace(tmp, self.path)

    def _remove(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def flush(self) -> None:
        if self.entries:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self._remove()

    def rename_to(self, path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path
