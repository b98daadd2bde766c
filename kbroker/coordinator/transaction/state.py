"""One transactional id's state (Kafka 2.8's TransactionMetadata / TxnTransitMetadata) and its records in
`__transaction_state` (TransactionLog), byte for byte:

- key: int16 version 0, transactional id (int16-length string)
- value v0: producer id int64, producer epoch int16, timeout ms int32, status int8, partitions (int32 count, -1
  when null: the Empty state) of {topic string, [int32 partition]}, last update timestamp int64, start
  timestamp int64. A null value is a tombstone (the id expired).

A change is first prepared (the transit is returned and the id is pending: other requests get
CONCURRENT_TRANSACTIONS), then written, then applied with complete(transit) once the append succeeded.
The last producer id/epoch (KIP-360 retries) live only in memory, as in 2.8's v0 value.

transactions_from_log is the one reading of a partition's records into ids: the coordinator loads with it, and
`kadmin --zookeeper transactions` derives the state from the log with it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from ...records.batches import v2_records
from ...records.entries import CONTROL_MASK
from ..schemas import _I16, _I32, _I64, _Reader, _w_str, java_abs, java_string_hash

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767
_DECOMPRESSION_LIMIT = 256 * 1024 * 1024


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: the producer id rotates at 32766."""
    return epoch >= MAX_EPOCH - 1


def partition_for(transactional_id: str, partitions: int) -> int:
    """abs(javaStringHashCode(transactional id)) % partitions (TransactionStateManager.partitionFor)."""
    return java_abs(java_string_hash(transactional_id)) % partitions


@dataclass(frozen=True)
class Transit:
    """A prepared state (TxnTransitMetadata): what is written and, once written, applied."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset
    start_ms: int
    update_ms: int


class TransactionMetadata:
    def __init__(self, transactional_id: str, producer_id: int, last_producer_id: int, producer_epoch: int,
                 last_producer_epoch: int, timeout_ms: int, state: TxnState, partitions, start_ms: int,
                 update_ms: int):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: set = set(partitions)
        self.start_ms = start_ms
        self.update_ms = update_ms
        self.pending: TxnState | None = None
        self.failed_epoch_fence = False

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, state={self.state.name}, pending={self.pending and self.pending.name}, "
                f"partitions={sorted(self.partitions)})")

    @property
    def pending_in_progress(self) -> bool:
        return self.pending is not None

    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions, start_ms: int, update_ms: int) -> Transit:
        if self.pending is not None:
            raise RuntimeError(f"{self}: a transition to {self.pending.name} is already pending")
        self.pending = state
        return Transit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, frozenset(partitions),
                       start_ms, update_ms)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int):
        """Transit to Empty with the epoch bumped; None when the expected epoch is fenced (KIP-360 rules)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch   # a retry of a bump that succeeded
        else:
            return None
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, (), -1, now)

    def prepare_rotation(self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool) -> Transit:
        return self._prepare(TxnState.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH, timeout_ms, (), -1, now)

    def prepare_fence(self) -> Transit:
        """PrepareEpochFence (in memory only): the epoch bumped (once, even if a previous fence failed to write)
        before the ongoing transaction is aborted."""
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.timeout_ms, self.partitions, self.start_ms, self.update_ms)

    def prepare_add_partitions(self, added, now: int) -> Transit:
        start = now if self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT) \
            else self.start_ms
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | set(added), start, now)

    def prepare_abort_or_commit(self, state: TxnState, now: int) -> Transit:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions, self.start_ms, now)

    def prepare_complete(self, now: int) -> Transit:
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, (), self.start_ms, now)

    def prepare_dead(self) -> Transit:
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, (), self.start_ms, self.update_ms)

    def complete(self, t: Transit) -> None:
        """Apply a written transit (completeTransitionTo)."""
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.timeout_ms, self.state, self.partitions = t.timeout_ms, t.state, set(t.partitions)
        self.start_ms, self.update_ms = t.start_ms, t.update_ms
        self.pending = None
        self.failed_epoch_fence = False


# ---- records -----------------------------------------------------------------------------------------------

def txn_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(0))
    _w_str(out, transactional_id)
    return bytes(out)


def txn_value(t: Transit) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I64.pack(t.producer_id)
    out += _I16.pack(t.producer_epoch)
    out += _I32.pack(t.timeout_ms)
    out += struct.pack(">b", int(t.state))
    if t.state is TxnState.EMPTY:
        out += _I32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out += _I32.pack(len(by_topic))
        for topic, partitions in by_topic.items():
            _w_str(out, topic)
            out += _I32.pack(len(partitions))
            for p in partitions:
                out += _I32.pack(p)
    out += _I64.pack(t.update_ms)
    out += _I64.pack(t.start_ms)
    return bytes(out)


def read_txn_key(buf) -> str:
    r = _Reader(buf)
    version = r.i16()
    if version != 0:
        raise ValueError(f"unknown transaction log key version {version}")
    return r.string()


def read_txn_value(transactional_id: str, buf) -> TransactionMetadata | None:
    """The metadata a record describes (None for a tombstone)."""
    if buf is None:
        return None
    r = _Reader(buf)
    version = r.i16()
    if version != 0:
        raise ValueError(f"unknown transaction log value version {version}")
    producer_id, epoch, timeout_ms = r.i64(), r.i16(), r.i32()
    state = TxnState(struct.unpack(">b", r._take(1))[0])
    partitions = set()
    for _ in range(max(r.i32(), 0)):
        topic = r.string()
        for _ in range(r.i32()):
            partitions.add((topic, r.i32()))
    update_ms, start_ms = r.i64(), r.i64()
    return TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_ID, epoch, NO_PRODUCER_EPOCH, timeout_ms,
                               state, partitions, start_ms, update_ms)


def transactions_from_log(batches) -> dict[str, TransactionMetadata]:
    """{transactional id: metadata} that a `__transaction_state` partition's batches describe, given as
    (buffer, Entry) pairs in log order: v2 batches only, control batches skipped, the last record per id wins and
    a tombstone deletes it (TransactionStateManager's load)."""
    loaded: dict[str, TransactionMetadata] = {}
    for view, entry in batches:
        if entry.magic != 2 or entry.attributes & CONTROL_MASK:
            continue
        for record in v2_records(view, entry.position, entry.size, _DECOMPRESSION_LIMIT):
            if record.key is None:
                continue
            txn_id = read_txn_key(record.key)
            metadata = read_txn_value(txn_id, record.value)
            if metadata is None:
                loaded.pop(txn_id, None)
            else:
                loaded[txn_id] = metadata
    return loaded
