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
transaction (INVALID_TXN_STATE); replicas and replay apply whatever the log holds. Beyond Kafka: a
transactional batch is a duplicate only of a batch of the producer's open transaction. Kafka also answers a
batch repeating the sequence range of a batch in an ended transaction as a duplicate (success, nothing
appended); a client that reuses sequence numbers after an abort without bumping its epoch (librdkafka 2.16 did,
after a broker was killed under an in-flight batch) then loses the new transaction's records on that partition
while the transaction commits. Here such a batch gets OUT_OF_ORDER_SEQUENCE_NUMBER: the transaction aborts.

Snapshots (Kafka 2.8's): the log takes one at every segment roll, named by the new segment's base offset,
and one at close (the log end offset); `load` (Log.rebuildProducerState) reads the newest usable snapshot at or
below the offset to load to and replays the v2 batch headers after it, segment by segment. Snapshots above the
log end and at or below the log start offset are deleted on (re)load, those of deleted segments go with them,
and the log drops the ones below min(the segment before the active one, the segment below the recovery point)
after each recovery-point checkpoint. A snapshot is written (page cache) where it is taken and fsynced later
by the log's flush, off the hub; a torn one fails its CRC and is skipped. File format (Kafka's): version int16
(1), crc uint32 (CRC-32C of what follows), then int32 count and per producer: producer id int64, epoch int16,
last sequence int32, last offset int64, offset delta int32, timestamp int64, coordinator epoch int32, current
transaction first offset int64.
"""
from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import crc32c

from ..protocol.errors import Errors, KafkaError
from ..records.batches import v2_records
from ..records.builder import COMMIT
from ..records.entries import CONTROL_MASK, TRANSACTIONAL_MASK, V2_HEADER, iter_entries
from .segment import DELETED_SUFFIX

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


# What an idle log's state holds until its first producer or snapshot: shared empties, replaced by a container of
# its own at the first write (most replicas of a large cluster never get one: ≈ 300 B each, issue 28).
_NONE: Mapping = MappingProxyType({})


class ProducerStateManager:
    __slots__ = ("dir", "producers", "map_end_offset", "last_snap_offset", "ongoing", "unreplicated", "_snapshots",
                 "_unflushed")

    def __init__(self, dir: str, files: Iterable[str] | None = None):
        """files: the names in dir, if the caller listed it already (a log's load lists its dir once)."""
        self.dir = dir
        self.map_end_offset = 0   # batches below this offset are reflected in the state
        self.last_snap_offset = 0
        self._forget_producers()
        names = os.listdir(dir) if files is None else files
        self._snapshots = sorted(int(m.group(1)) for name in names if name.endswith(SNAPSHOT_SUFFIX)
                                 and (m := _SNAPSHOT_FILE.match(name))) or ()
        self._unflushed: list[str] | tuple = ()              # snapshot files written, not fsynced yet

    def _forget_producers(self) -> None:
        self.producers: dict[int, ProducerEntry] = _NONE     # (shared empties: see _NONE)
        self.ongoing: dict[int, int] = _NONE                 # producer id -> first offset of its open txn
        self.unreplicated: dict[int, CompletedTxn] = _NONE   # marker offset -> txn ended, HW not past it yet

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
        if duplicate is not None and (not transactional or
                                      0 <= entry.current_txn_first_offset <= duplicate.first_offset):
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
            if self.ongoing is _NONE:
                self.ongoing = {}
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
        if producer_id in self.ongoing:
            del self.ongoing[producer_id]
        txn = CompletedTxn(producer_id, first, offset, not committed, min(self.ongoing.values(), default=offset + 1))
        if self.unreplicated is _NONE:
            self.unreplicated = {}
        self.unreplicated[offset] = txn
        return txn

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry:
        entry = self.producers.get(producer_id)
        if entry is None:
            if self.producers is _NONE:
                self.producers = {}
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        return entry

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest open or unreplicated transaction; completed transactions whose
        marker is below the high watermark are forgotten here."""
        if not self.ongoing and not self.unreplicated:
            return None
        for offset in [o for o in self.unreplicated if o < high_watermark]:
            del self.unreplicated[offset]
        firsts = list(self.ongoing.values()) + [t.first_offset for t in self.unreplicated.values()]
        return min(firsts, default=None)

    # ---- loading (Kafka's Log.rebuildProducerState / ProducerStateManager.truncateAndReload) --------------
    def load(self, log, end_offset: int, clean_shutdown: bool, snapshot_at=()) -> None:
        """Bring the state to `end_offset`: from the newest usable snapshot at or below it, replaying the
        segments after it. Snapshots are taken at the base offsets of the last two segments and those in
        `snapshot_at` (segments being recovered) as the replay passes them, and at `end_offset`. With no
        snapshot after a clean shutdown, or on a log of message format below v2, there is nothing to replay
        (Kafka's upgrade shortcut): empty snapshots are written instead."""
        segments = log.segments
        points = {s.base_offset for s in segments[-2:]} | set(snapshot_at)
        if log.config.record_version < 2 or (not self._snapshots and clean_shutdown):
            for offset in sorted(points | {end_offset}):
                if offset <= end_offset:
                    self.map_end_offset = offset
                    self.take_snapshot()
            return
        was_empty = not self.producers and not self.unreplicated and self.map_end_offset >= end_offset
        self.truncate_and_reload(log.log_start_offset, end_offset)
        if end_offset > self.map_end_offset and not was_empty:
            for i, segment in enumerate(segments):
                seg_end = segments[i + 1].base_offset if i + 1 < len(segments) else end_offset
                if seg_end <= self.map_end_offset or segment.base_offset >= end_offset:
                    continue
                start = max(segment.base_offset, self.map_end_offset, log.log_start_offset)
                self.map_end_offset = start
                if segment.base_offset in points:
                    self.take_snapshot()
                self.replay(log, start, min(seg_end, end_offset))
        self.map_end_offset = end_offset
        self.take_snapshot()

    def replay(self, log, start: int, stop: int) -> None:
        """Apply the batches in [start, stop), indexing the aborted transactions their markers end."""
        offset = start
        while offset < stop:
            data = log.read(offset, 1 << 20, max_offset=stop).records.read()
            entries = list(iter_entries(data))
            if not entries:
                break
            for txn in self.update_from_entries(data, entries):
                if txn.aborted:
                    log.add_aborted_txn(txn)
            offset = entries[-1].last_offset + 1

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Delete the snapshots above the log end or at/below the log start; unless the state is at the log end
        already, start again from the newest snapshot left (or empty at the log start)."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset == self.map_end_offset:
            self.on_log_start_offset_incremented(log_start_offset)
            return
        self._forget_producers()
        while self._snapshots:
            offset = self._snapshots[-1]
            try:
                self._read_snapshot(offset)
                self.last_snap_offset = offset
                logger.info("%s: loaded producer state from snapshot %d", os.path.basename(self.dir), offset)
                return
            except (OSError, ValueError) as e:
                logger.warning("%s: ignoring corrupt producer snapshot %d: %s", os.path.basename(self.dir), offset, e)
                self._delete_snapshot(offset)
        self.map_end_offset = self.last_snap_offset = log_start_offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget completed transactions below the new log start; the state itself stays (as Kafka)."""
        for offset in [o for o in self.unreplicated if o < log_start_offset]:
            del self.unreplicated[offset]
        self.map_end_offset = max(self.map_end_offset, log_start_offset)
        self.last_snap_offset = self._snapshots[-1] if self._snapshots else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and every snapshot: the log starts again, empty, at offset."""
        self._forget_producers()
        for snapshot in list(self._snapshots):
            self._delete_snapshot(snapshot)
        self.last_snap_offset = 0
        self.map_end_offset = offset

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

    # ---- snapshots ----------------------------------------------------------------------------------------
    def take_snapshot(self) -> None:
        """Write the state as of the map end offset, unless a snapshot there (or later) was taken already. The
        file is not fsynced here: `flush_snapshots` does it (the log's flush, off the hub)."""
        offset = self.map_end_offset
        if offset <= self.last_snap_offset:
            return
        body = bytearray(struct.pack(">i", len(self.producers)))
        for e in self.producers.values():
            last = e.batches[-1] if e.batches else None
            body += _ENTRY.pack(e.producer_id, e.epoch, last.last_seq if last else NO_SEQUENCE,
                                last.last_offset if last else -1,
                                (last.last_offset - last.first_offset) if last else 0,
                                last.timestamp if last else -1, e.coordinator_epoch, e.current_txn_first_offset)
        path = snapshot_path(self.dir, offset)
        with open(path, "wb") as f:
            f.write(_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body))
        self._unflushed = [*self._unflushed, path]
        if offset not in self._snapshots:
            self._snapshots = sorted([*self._snapshots, offset])
        self.last_snap_offset = offset
        logger.info("%s: wrote producer snapshot at offset %d with %d producer ids", os.path.basename(self.dir),
                    offset, len(self.producers))

    @property
    def has_unflushed(self) -> bool:
        return bool(self._unflushed)

    def take_unflushed(self) -> list[str] | tuple:
        """The snapshot files written since the last call, for the caller to fsync (`flush_snapshots`)."""
        out, self._unflushed = self._unflushed, ()
        return out

    @staticmethod
    def flush_snapshots(paths) -> None:
        """fsync snapshot files (blocking); one deleted meanwhile is skipped."""
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot in [o for o in self._snapshots if o < offset]:
            self._delete_snapshot(snapshot)

    def delete_snapshots_after(self, offset: int) -> None:
        for snapshot in [o for o in self._snapshots if o > offset]:
            self._delete_snapshot(snapshot)

    def mark_snapshot_for_deletion(self, offset: int) -> None:
        """The segment at `offset` is being deleted: its snapshot leaves the state now, renamed `.deleted`, and
        its file goes with the segment's (Kafka's removeAndMarkSnapshotForDeletion)."""
        if offset in self._snapshots:
            self._snapshots.remove(offset)
            try:
                os.rename(snapshot_path(self.dir, offset), snapshot_path(self.dir, offset) + DELETED_SUFFIX)
            except FileNotFoundError:
                pass

    def _delete_snapshot(self, offset: int) -> None:
        self._snapshots.remove(offset)
        try:
            os.remove(snapshot_path(self.dir, offset))
        except FileNotFoundError:
            pass

    def update_parent_dir(self, dir: str) -> None:
        self.dir = dir
        self._unflushed = [os.path.join(dir, os.path.basename(p)) for p in self._unflushed]

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
