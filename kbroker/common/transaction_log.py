"""The records of `__transaction_state`, byte for byte as Kafka 2.8 writes them (TransactionLog), the states they
name and the transactional id -> partition mapping: the transaction coordinator writes and loads them, and
`kadmin --zookeeper transactions` reads the log with them.

- key: int16 version 0, transactional id (int16-length string)
- value v0: producer id int64, producer epoch int16, timeout ms int32, status int8, partitions (int32 count, -1
  when null: the Empty state) of {topic string, [int32 partition]}, last update timestamp int64, start
  timestamp int64. A null value is a tombstone (the id expired).

replay is the one reading of a partition's records into ids (the last record per id wins, a tombstone deletes
it): the coordinator loads with it, and kadmin derives the state from the log with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from .encoding import I8, I16, I32, I64, Reader, java_abs, java_string_hash, write_string


def partition_for(transactional_id: str, partitions: int) -> int:
    """abs(javaStringHashCode(transactional id)) % partitions (TransactionStateManager.partitionFor)."""
    return java_abs(java_string_hash(transactional_id)) % partitions


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


# Kafka's TransactionState names, as DescribeTransactions / ListTransactions answer them and kadmin shows them.
STATE_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
               TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
               TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
               TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}


@dataclass(frozen=True)
class TransactionLogValue:
    """What one record says of a transactional id (TxnTransitMetadata as written)."""
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset              # {(topic, partition)}
    update_ms: int
    start_ms: int


def txn_key(transactional_id: str) -> bytes:
    out = bytearray(I16.pack(0))
    write_string(out, transactional_id)
    return bytes(out)


def txn_value(v: TransactionLogValue) -> bytes:
    out = bytearray(I16.pack(0))
    out += I64.pack(v.producer_id)
    out += I16.pack(v.producer_epoch)
    out += I32.pack(v.timeout_ms)
    out += I8.pack(int(v.state))
    if v.state is TxnState.EMPTY:
        out += I32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(v.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out += I32.pack(len(by_topic))
        for topic, partitions in by_topic.items():
            write_string(out, topic)
            out += I32.pack(len(partitions))
            for p in partitions:
                out += I32.pack(p)
    out += I64.pack(v.update_ms)
    out += I64.pack(v.start_ms)
    return bytes(out)


def read_txn_key(buf) -> str:
    r = Reader(buf)
    version = r.i16()
    if version != 0:
        raise ValueError(f"unknown transaction log key version {version}")
    return r.string()


def read_txn_value(buf) -> TransactionLogValue | None:
    """What a record's value says (None for a tombstone)."""
    if buf is None:
        return None
    r = Reader(buf)
    version = r.i16()
    if version != 0:
        raise ValueError(f"unknown transaction log value version {version}")
    producer_id, epoch, timeout_ms, state = r.i64(), r.i16(), r.i32(), TxnState(r.i8())
    partitions = set()
    for _ in range(max(r.i32(), 0)):
        topic = r.string()
        for _ in range(r.i32()):
            partitions.add((topic, r.i32()))
    update_ms, start_ms = r.i64(), r.i64()
    return TransactionLogValue(producer_id, epoch, timeout_ms, state, frozenset(partitions), update_ms, start_ms)


def replay(records) -> dict[str, TransactionLogValue]:
    """{transactional id: value} that a `__transaction_state` partition's data records describe, given as (key,
    value) pairs in log order: the last record per id wins and a tombstone deletes it (TransactionStateManager's
    load); a record without a key is passed over."""
    loaded: dict[str, TransactionLogValue] = {}
    for key, value in records:
        if key is None:
            continue
        txn_id = read_txn_key(key)
        found = read_txn_value(value)
        if found is None:
            loaded.pop(txn_id, None)
        else:
            loaded[txn_id] = found
    return loaded
