"""Idempotent producer state: Kafka 2.8's sequence rules and its snapshot file format."""
import os
import struct

import crc32c
import pytest

from kbroker.log.producer_state import INT32_MAX, ProducerStateManager, snapshot_path
from kbroker.protocol.errors import Errors, KafkaError


def manager(tmp_path):
    return ProducerStateManager(str(tmp_path))


def test_first_batch_must_start_at_zero(tmp_path):
    m = manager(tmp_path)
    assert m.check(7, 0, 0, 4) is None
    with pytest.raises(KafkaError) as e:
        m.check(8, 0, 3, 4)
    assert e.value.code == Errors.UNKNOWN_PRODUCER_ID


def test_duplicate_of_any_of_the_last_five_batches_returns_its_offsets(tmp_path):
    m = manager(tmp_path)
    for i in range(6):
        m.update(7, 0, i * 10, i * 10 + 9, 100 + i * 10, 109 + i * 10, 1000 + i)
    dup = m.check(7, 0, 50, 59)
    assert (dup.first_offset, dup.last_offset) == (150, 159)
    # Only five are kept: the first batch is no longer known as a duplicate, and is out of order.
    with pytest.raises(KafkaError) as e:
        m.check(7, 0, 0, 9)
    assert e.value.code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert m.check(7, 0, 60, 60) is None


def test_gap_old_epoch_and_new_epoch_rules(tmp_path):
    m = manager(tmp_path)
    m.update(7, 3, 0, 4, 0, 4, 1)
    with pytest.raises(KafkaError) as e:
        m.check(7, 3, 6, 6)
    assert e.value.code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e:
        m.check(7, 2, 5, 5)
    assert e.value.code == Errors.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as e:
        m.check(7, 4, 5, 5)  # a new epoch restarts at sequence 0
    assert e.value.code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert m.check(7, 4, 0, 0) is None


def test_sequence_wraps_at_int32_max(tmp_path):
    m = manager(tmp_path)
    m.update(7, 0, INT32_MAX - 1, INT32_MAX, 0, 1, 1)
    assert m.check(7, 0, 0, 3) is None


def test_snapshot_is_kafkas_format_and_round_trips(tmp_path):
    m = manager(tmp_path)
    m.update(7, 2, 10, 14, 100, 104, 1234)
    m.update(9, 0, 0, 0, 105, 105, 1300)
    m.map_end_offset = 106
    m.take_snapshot()
    path = snapshot_path(str(tmp_path), 106)
    assert os.path.basename(path) == "00000000000000000106.snapshot"
    data = open(path, "rb").read()
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1 and crc == crc32c.crc32c(data[6:])
    count = struct.unpack_from(">i", data, 6)[0]
    assert count == 2
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (7, 2, 14, 104, 4, 1234, -1, -1)
    loaded = manager(tmp_path)
    loaded._read_snapshot(106)
    assert loaded.map_end_offset == 106
    assert loaded.check(7, 2, 10, 14).first_offset == 100   # still a known duplicate
    assert loaded.check(7, 2, 15, 15) is None
    with pytest.raises(KafkaError):
        loaded.check(9, 0, 2, 2)


def test_corrupt_snapshot_is_refused(tmp_path):
    m = manager(tmp_path)
    m.update(7, 0, 0, 0, 0, 0, 1)
    m.take_snapshot()
    path = snapshot_path(str(tmp_path), 1)
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    open(path, "wb").write(data)
    with pytest.raises(ValueError, match="CRC"):
        manager(tmp_path)._read_snapshot(1)


def code_of(fn) -> Errors:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


def test_transactions_open_complete_and_hold_the_first_unstable_offset(tmp_path):
    m = manager(tmp_path)
    m.update(7, 0, 0, 1, 10, 11, 1, transactional=True)
    m.update(7, 0, 2, 2, 14, 14, 1, transactional=True)        # same transaction
    m.update(8, 0, 0, 0, 12, 12, 1, transactional=True)
    assert m.ongoing == {7: 10, 8: 12}
    assert m.first_unstable_offset(100) == 10
    # a non-transactional batch of a producer in a transaction is refused, after the sequence checks
    assert code_of(lambda: m.check(7, 0, 3, 3)) == Errors.INVALID_TXN_STATE
    assert code_of(lambda: m.check(7, 0, 9, 9)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert m.check(7, 0, 3, 3, transactional=True) is None
    txn = m.complete_txn(7, 0, False, 5, 15)
    assert (txn.first_offset, txn.last_offset, txn.aborted, txn.last_stable_offset) == (10, 15, True, 12)
    assert m.complete_txn(7, 0, True, 5, 16) is None            # nothing open: an empty transaction
    # 7's transaction stays unstable until the high watermark passes its marker
    assert m.first_unstable_offset(15) == 10
    assert m.first_unstable_offset(16) == 12
    txn = m.complete_txn(8, 0, True, 5, 17)
    assert (txn.aborted, txn.last_stable_offset) == (False, 18)
    assert m.first_unstable_offset(17) == 12 and m.first_unstable_offset(18) is None


def test_marker_checks(tmp_path):
    m = manager(tmp_path)
    m.check_marker(9, 0, 0)                                   # unknown producer: fine
    m.complete_txn(7, 2, True, 4, 10)
    assert code_of(lambda: m.check_marker(7, 1, 4)) == Errors.INVALID_PRODUCER_EPOCH
    assert code_of(lambda: m.check_marker(7, 2, 3)) == Errors.TRANSACTION_COORDINATOR_FENCED
    m.check_marker(7, 3, 4)


def test_snapshot_restores_open_transactions_and_coordinator_epochs(tmp_path):
    m = manager(tmp_path)
    m.update(7, 0, 0, 0, 3, 3, 1, transactional=True)
    m.complete_txn(8, 1, True, 6, 4)
    m.take_snapshot()
    loaded = manager(tmp_path)
    loaded._read_snapshot(5)
    assert loaded.ongoing == {7: 3}
    assert loaded.producers[8].coordinator_epoch == 6 and loaded.producers[7].current_txn_first_offset == 3
    assert loaded.first_unstable_offset(5) == 3
