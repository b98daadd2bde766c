"""Pure functions of the transaction coordinator: `__transaction_state` record bytes (Kafka's TransactionLog
key and value v0), the transactional id -> partition mapping, and the epoch rules of TransactionMetadata."""
import struct
from typing import NamedTuple

from kbroker.common.transaction_log import TxnState, partition_for, read_txn_key, read_txn_value, txn_key, txn_value
from kbroker.coordinator.transaction.state import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata, Transit,
                                                   transactions_from_log)
from kbroker.records.batches import CREATE_TIME
from kbroker.records.builder import build_legacy, build_v2, control_batch
from kbroker.records.entries import iter_entries


def metadata(state=TxnState.EMPTY, epoch=0, partitions=()):
    return TransactionMetadata("tx", 7, NO_PRODUCER_ID, epoch, NO_PRODUCER_EPOCH, 60000, state, partitions, -1, 100)


def test_key_and_value_bytes_are_kafkas():
    assert txn_key("tx") == b"\x00\x00\x00\x02tx"
    m = metadata()
    t = m.prepare_add_partitions({("b", 1), ("a", 0), ("a", 2)}, 200)
    value = txn_value(t.log_value())
    expected = (struct.pack(">hqhib", 0, 7, 0, 60000, 1) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", 200, 200))
    assert value == expected
    assert read_txn_key(txn_key("tx")) == "tx"
    back = read_txn_value(value)
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions, back.start_ms, back.update_ms) == \
        (7, 0, TxnState.ONGOING, {("a", 0), ("a", 2), ("b", 1)}, 200, 200)
    m.pending = None
    empty = txn_value(m.prepare_increment_epoch(60000, None, 300).log_value())
    assert empty[17:21] == struct.pack(">i", -1)          # Empty: null partitions
    assert read_txn_value(None) is None                    # tombstone


def test_partition_for_is_abs_java_hash_mod_partitions():
    # "tx".hashCode() = 116 * 31 + 120 = 3716
    assert partition_for("tx", 50) == 3716 % 50
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0


def test_kip_360_epoch_rules():
    m = metadata(epoch=3)
    t = m.prepare_increment_epoch(60000, 3, 1)           # the producer's own epoch: bumped
    assert (t.producer_epoch, t.last_producer_epoch) == (4, 3)
    m.complete(t)
    retry = m.prepare_increment_epoch(60000, 3, 2)       # a retry of that bump: the same epoch
    assert retry.producer_epoch == 4
    m.pending = None
    assert m.prepare_increment_epoch(60000, 1, 3) is None  # anything else is fenced
    rotated = metadata(epoch=32766).prepare_rotation(8, 60000, 4, record_last_epoch=True)
    assert (rotated.producer_id, rotated.last_producer_id, rotated.producer_epoch, rotated.last_producer_epoch) == \
        (8, 7, 0, 32766)


def test_fence_bumps_once_even_after_a_failed_fence():
    m = metadata(TxnState.ONGOING, epoch=5, partitions={("a", 0)})
    assert m.prepare_fence().producer_epoch == 6
    m.pending = None
    m.producer_epoch, m.failed_epoch_fence = 6, True
    assert m.prepare_fence().producer_epoch == 6


class Rec(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


def state_record(txn_id: str, state: TxnState, producer_id: int, partitions=(), start_ms: int = 100) -> Rec:
    t = Transit(producer_id, NO_PRODUCER_ID, 0, NO_PRODUCER_EPOCH, 60000, state, frozenset(partitions), start_ms, 200)
    return Rec(0, 200, txn_key(txn_id), txn_value(t.log_value()))


def test_transactions_from_log_replays_last_record_per_id_tombstones_and_skips_markers_and_old_magic():
    log = bytearray()
    for records in ([state_record("a", TxnState.EMPTY, 1), state_record("b", TxnState.ONGOING, 2, {("t", 0)})],
                    [state_record("a", TxnState.ONGOING, 1, {("t", 1), ("u", 0)})],
                    [state_record("c", TxnState.EMPTY, 3)],
                    [Rec(0, 200, txn_key("c"), None)]):               # tombstone: c is gone
        log += build_v2(records, first_offset=0, codec=0, timestamp_type=CREATE_TIME, log_append_time=-1)
    # a marker whose record would parse as a key, and a v1 message holding a state record: neither counts
    log += control_batch(9, 0, True, 0, 300)
    log += build_legacy([state_record("b", TxnState.COMPLETE_COMMIT, 2)], first_offset=0, magic=1, codec=0,
                        timestamp_type=CREATE_TIME, log_append_time=-1)
    view = memoryview(log)
    loaded = transactions_from_log((view, e) for e in iter_entries(view))
    assert {t: (m.state, m.producer_id, m.partitions, m.start_ms) for t, m in loaded.items()} == {
        "a": (TxnState.ONGOING, 1, {("t", 1), ("u", 0)}, 100), "b": (TxnState.ONGOING, 2, {("t", 0)}, 100)}
    assert transactions_from_log([]) == {}
