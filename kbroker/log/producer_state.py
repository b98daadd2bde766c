"""Idempotent producer state of one partition (Kafka's ProducerStateManager), with Kafka's snapshot files.

For each producer id: its epoch and the metadata of its last 5 batches (sequence range, offsets,
timestamp), which is what the leader needs to answer a retried batch with its original offsets, and to refuse
gaps (OUT_OF_ORDER_SEQUENCE_NUMBER), fenced epochs (INVALID_PRODUCER_EPOCH) and unknown producers that do
not start at sequence 0 (UNKNOWN_PRODUCER_ID), as Kafka 2.8 does for client appends.

The state is rebuilt after a restart from the newest `<offset>.snapshot` file below the log end offset,
then from the batch headers after it. Snapshot file format (Kafka's): version int16 (1), crc uint32
(CRC-32C of what follows), then int32 count and per producer: producer id int64, epoch int16, last sequence
int32, last offset int64, offset delta int32, timestamp int64, coordinator epoch int32, current transaction
first offset int64.
"""
from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from dataclasses import dataclass, field

import crc32c

from ..protocol.errors import Errors, KafkaError
from ..records.entries import CONTROL_MASK, V2_HEADER, iter_entries

logger = logging.getLogger("kbroker.log")

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2 ** 31 - 1
BATCHES_KEPT = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_HEAD = struct.Struct(">hI")
_ENTRY = struct.Struct(">qhiqiqiq")


@dataclass
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        return next((b for b in self.batches if b.first_seq == first_seq and b.last_seq == last_seq), None)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_path(dir: str, offset: int) -> str:
    return os.path.join(dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")


class ProducerStateManager:
    def __init__(self, dir: str):
        self.dir = dir
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0   # batches below this offset are reflected in the state

    # ---- checks and updates (leader appends) --------------------------------------------------------------
    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              pending: dict[int, ProducerEntry] | None = None) -> BatchMetadata | None:
        """Validate a client batch of an idempotent producer: the duplicate it repeats (if any), or raise."""
        entry = (pending or {}).get(producer_id) or self.producers.get(producer_id)
        if entry is None:
            if first_seq != 0:
                raise KafkaError(Errors.UNKNOWN_PRODUCER_ID,
                                 f"Found no record of producer {producer_id} on the broker; its first "
                                 f"sequence number must be 0, not {first_seq}")
            return None
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        if epoch < entry.epoch:
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"Producer {producer_id}'s epoch {epoch} is older than the current epoch {entry.epoch}")
        if epoch != entry.epoch:
            if first_seq != 0:
                raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Invalid sequence number for new epoch {epoch} of producer {producer_id}: "
                                 f"{first_seq} (expected 0)")
        elif not _in_sequence(entry.last_seq, first_seq):
            raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"Out of order sequence number for producer {producer_id} at epoch {epoch}: "
                             f"{first_seq} (incoming), {entry.last_seq} (current end sequence)")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
               last_offset: int, timestamp: int) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    # ---- rebuilding ---------------------------------------------------------------------------------------
    def rebuild_from_log(self, log) -> None:
        """Load the newest snapshot not beyond the log end offset, then replay the v2 batch headers after it."""
        leo = log.log_end_offset
        for offset in self.snapshot_offsets():
            if offset > leo:
                os.remove(snapshot_path(self.dir, offset))
        loaded = False
        for offset in reversed(self.snapshot_offsets()):
            try:
                self._read_snapshot(offset)
                loaded = True
                break
            except (OSError, ValueError) as e:
                logger.warning("%s: ignoring corrupt producer snapshot %d: %s", os.path.basename(self.dir), offset, e)
                os.remove(snapshot_path(self.dir, offset))
        if not loaded:
            self.producers.clear()
            self.map_end_offset = log.log_start_offset
        offset = max(self.map_end_offset, log.log_start_offset)
        while offset < leo:
            data = log.read(offset, 1 << 20, max_offset=leo).records.read()
            entries = list(iter_entries(data))
            if not entries:
                break
            self.update_from_entries(data, entries)
            offset = entries[-1].last_offset + 1
        self.map_end_offset = leo

    def update_from_entries(self, data, entries) -> None:
        """Take in the idempotent v2 batches among log entries already appended (replay, follower appends)."""
        for entry in entries:
            if entry.magic != 2:
                continue
            (base, _, _, _, _, attributes, delta, _, max_ts, pid, epoch, base_seq, _) = V2_HEADER.unpack_from(
                data, entry.position)
            if pid >= 0 and not attributes & CONTROL_MASK:
                last_seq = base_seq + delta if base_seq + delta <= INT32_MAX else base_seq + delta - INT32_MAX - 1
                self.update(pid, epoch, base_seq, last_seq, base, base + delta, max_ts)

    def truncate(self, log) -> None:
        """After the log was truncated: forget everything and rebuild (rare; followers diverging)."""
        self.producers.clear()
        self.map_end_offset = 0
        self.rebuild_from_log(log)

    # ---- snapshots ----------------------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in os.listdir(self.dir):
            m = _SNAPSHOT_FILE.match(name)
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of `offset` (the log end offset: every batch below it is reflected). A partition
        that never had an idempotent producer needs none (replay from the log start finds nothing)."""
        self.map_end_offset = offset
        if not self.producers and not self.snapshot_offsets():
            return
        body = bytearray(struct.pack(">i", len(self.producers)))
        for e in self.producers.values():
            last = e.batches[-1] if e.batches else None
            body += _ENTRY.pack(e.producer_id, e.epoch, last.last_seq if last else NO_SEQUENCE,
                                last.last_offset if last else -1,
                                (last.last_offset - last.first_offset) if last else 0,
                                last.timestamp if last else -1, e.coordinator_epoch, e.current_txn_first_offset)
        data = _HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)
        path = snapshot_path(self.dir, offset)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        # Keep the newest two, as Kafka keeps a few around the log start.
        for old in self.snapshot_offsets()[:-2]:
            os.remove(snapshot_path(self.dir, old))

    def _read_snapshot(self, offset: int) -> None:
        with open(snapshot_path(self.dir, offset), "rb") as f:
            data = f.read()
        if len(data) < _HEAD.size + 4:
            raise ValueError("snapshot file too short")
        version, crc = _HEAD.unpack_from(data, 0)
        body = data[_HEAD.size:]
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unknown snapshot version {version}")
        if crc32c.crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        (count,) = struct.unpack_from(">i", body, 0)
        if len(body) != 4 + count * _ENTRY.size:
            raise ValueError("snapshot size does not match its entry count")
        producers = {}
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = _ENTRY.unpack_from(body, 4 + i * _ENTRY.size)
            entry = ProducerEntry(pid, epoch, coordinator_epoch=coord, current_txn_first_offset=txn_first)
            if last_seq != NO_SEQUENCE:
                first_seq = last_seq - delta if last_seq >= delta else last_seq - delta + INT32_MAX + 1
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
            producers[pid] = entry
        self.producers = producers
        self.map_end_offset = offset
