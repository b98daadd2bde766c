"""Idempotent producer state of one partition (Kafka's ProducerStateManager), with Kafka's snapshot files.

For each producer id: its epoch and the metadata of its last 5 batches (sequence range, offsets,
timestamp), which is what the leader needs to answer a retried batch with its original offsets, and to refuse
gaps (OUT_OF_ORDER_SEQUENCE_NUMBER), fenced epochs (INVALID_PRODUCER_EPOCH) and unknown producers that do
not start at sequence 0 (UNKNOWN_PRODUCER_ID), as Kafka 2.8 does for client appends.

Transactions (KIP-98): a transactional batch opens a transaction of its producer at its first offset; the
producer's COMMIT/ABORT marker completes it, and the completed transaction stays "unreplicated" until the high
watermark passes its marker. The first unstable offset is the smallest first offset among open and
unreplicated transactions; the partition's last stable offset is min(first unstable offset, high watermark).
Leader-side checks: a marker with an epoch below the producer's (INVALID_PRODUCER_EPOCH) or an older
coordinator epoch (TRANSACTION_COORDINATOR_FENCED), a non-transactional batch from a producer with an open
transaction (INVALID_TXN_STATE); replicas and replay apply whatever the log holds.

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
from ..records.batches import v2_records
from ..records.builder import COMMIT
from ..records.entries import CONTROL_MASK, TRANSACTIONAL_MASK, V2_HEADER, iter_entries

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


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction its marker ended: first offset of its data, offset of the marker, and the last stable
    offset when it ended (the first offset of the oldest other open transaction, else just past the marker:
    what Kafka records in the transaction index)."""
    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int


def marker_is_commit(data, position: int, size: int) -> bool:
    """Whether the control batch at position is a COMMIT marker (its record key: int16 version, int16 type)."""
    records = v2_records(data, position, size, 1 << 20)
    key = records[0].key if records else None
    if key is None or len(key) < 4:
        raise KafkaError(Errors.CORRUPT_MESSAGE, "control record without a valid key")
    return struct.unpack_from(">h", key, 2)[0] == COMMIT


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_path(dir: str, offset: int) -> str:
    return os.path.join(dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")


class ProducerStateManager:
    def __init__(self, dir: str):
        self.dir = dir
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0   # batches below this offset are reflected in the state
        self.ongoing: dict[int, int] = {}                    # producer id -> first offset of its open txn
        self.unreplicated: dict[int, CompletedTxn] = {}      # marker offset -> txn ended, HW not past it yet

    # ---- checks and updates (leader appends) --------------------------------------------------------------
    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, transactional: bool = False,
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
        if not transactional and entry.current_txn_first_offset >= 0:
            raise KafkaError(Errors.INVALID_TXN_STATE,
                             f"Expected transactional write from producer {producer_id} (its transaction started "
                             f"at offset {entry.current_txn_first_offset})")
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Kafka's partition-side checks of a transaction marker written by the coordinator."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"Epoch of producer {producer_id} at offset {self.map_end_offset} is {epoch}, "
                             f"which is smaller than the last seen epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(Errors.TRANSACTION_COORDINATOR_FENCED,
                             f"Invalid coordinator epoch for producer {producer_id}: {coordinator_epoch} "
                             f"(zombie), {entry.coordinator_epoch} (current)")

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
               last_offset: int, timestamp: int, transactional: bool = False) -> None:
        entry = self._entry(producer_id, epoch)
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[producer_id] = first_offset
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def complete_txn(self, producer_id: int, epoch: int, committed: bool, coordinator_epoch: int,
                     offset: int) -> CompletedTxn | None:
        """Apply a marker appended at `offset`; the transaction it ended (None if none was open)."""
        entry = self._entry(producer_id, epoch)
        entry.coordinator_epoch = coordinator_epoch
        self.map_end_offset = max(self.map_end_offset, offset + 1)
        first = entry.current_txn_first_offset
        if first < 0:
            return None
        entry.current_txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        txn = CompletedTxn(producer_id, first, offset, not committed, min(self.ongoing.values(), default=offset + 1))
        self.unreplicated[offset] = txn
        return txn

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        return entry

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest open or unreplicated transaction; completed transactions whose
        marker is below the high watermark are forgotten here."""
        for offset in [o for o in self.unreplicated if o < high_watermark]:
            del self.unreplicated[offset]
        firsts = list(self.ongoing.values()) + [t.first_offset for t in self.unreplicated.values()]
        return min(firsts, default=None)

    def aborted_ongoing(self, start: int, end: int) -> list[CompletedTxn]:
        """Aborted transactions not yet below the high watermark overlapping [start, end)."""
        return [t for t in self.unreplicated.values() if t.aborted and t.last_offset >= start and t.first_offset < end]

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
            self.ongoing.clear()
            self.map_end_offset = log.log_start_offset
        self.unreplicated.clear()
        offset = max(self.map_end_offset, log.log_start_offset)
        while offset < leo:
            data = log.read(offset, 1 << 20, max_offset=leo).records.read()
            entries = list(iter_entries(data))
            if not entries:
                break
            for txn in self.update_from_entries(data, entries):
                if txn.aborted:
                    log.add_aborted_txn(txn)
            offset = entries[-1].last_offset + 1
        self.map_end_offset = leo

    def update_from_entries(self, data, entries) -> list[CompletedTxn]:
        """Take in the idempotent and transactional v2 batches and markers among log entries already appended
        (replay, follower appends); the transactions their markers completed."""
        completed = []
        for entry in entries:
            if entry.magic != 2:
                continue
            (base, _, _, _, _, attributes, delta, _, max_ts, pid, epoch, base_seq, _) = V2_HEADER.unpack_from(
                data, entry.position)
            if pid < 0:
                continue
            if attributes & CONTROL_MASK:
                if entry.record_count:
                    coordinator_epoch = self._marker_coordinator_epoch(data, entry)
                    txn = self.complete_txn(pid, epoch, marker_is_commit(data, entry.position, entry.size),
                                            coordinator_epoch, base)
                    if txn is not None:
                        completed.append(txn)
            else:
                last_seq = base_seq + delta if base_seq + delta <= INT32_MAX else base_seq + delta - INT32_MAX - 1
                self.update(pid, epoch, base_seq, last_seq, base, base + delta, max_ts,
                            bool(attributes & TRANSACTIONAL_MASK))
        return completed

    @staticmethod
    def _marker_coordinator_epoch(data, entry) -> int:
        records = v2_records(data, entry.position, entry.size, 1 << 20)
        value = records[0].value if records else None
        return struct.unpack_from(">i", value, 2)[0] if value is not None and len(value) >= 6 else -1

    def truncate(self, log) -> None:
        """After the log was truncated: forget everything and rebuild (rare; followers diverging)."""
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
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
        self.ongoing = {pid: e.current_txn_first_offset for pid, e in producers.items()
                        if e.current_txn_first_offset >= 0}
        self.map_end_offset = offset
