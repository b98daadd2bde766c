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


def test_a_transactional_batch_repeating_one_of_an_ended_transaction_is_out_of_order_not_a_duplicate(tmp_path):
    """Beyond Kafka (which answers it as a duplicate): a client reusing an aborted transaction's sequence numbers
    in its next transaction (same epoch) would see the new records acknowledged and never appended."""
    m = manager(tmp_path)
    m.update(7, 0, 0, 16, 273, 289, 1, transactional=True)
    dup = m.check(7, 0, 0, 16, transactional=True)               # a retry within the open transaction
    assert (dup.first_offset, dup.last_offset) == (273, 289)
    m.complete_txn(7, 0, False, 1, 306)                          # ABORT
    assert code_of(lambda: m.check(7, 0, 0, 16, transactional=True)) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert m.check(7, 0, 0, 16) is not None                      # an idempotent (non-transactional) retry: as Kafka
    assert m.check(7, 0, 17, 20, transactional=True) is None     # the next transaction goes on in sequence
    m.update(7, 0, 17, 20, 310, 313, 1, transactional=True)
    assert m.check(7, 0, 17, 20, transactional=True).first_offset == 310


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


# ---- snapshots kept by the log (Kafka's Log.roll / loadProducerState / deleteSnapshotsAfterRecoveryPointCheckpoint)

def open_log(path, clean: bool = True, recovery_point: int = 0):
    from kbroker.clock import MockClock
    from kbroker.log.config import LogConfig
    from kbroker.log.log import Log
    return Log(str(path / "orders-0"), LogConfig(file_delete_delay_ms=0), recovery_point, 0, MockClock(),
               had_clean_shutdown=clean)


def write(log, data: bytes) -> None:
    """Append as a follower does: to the log, then to its producer state (and index what a marker aborts)."""
    from kbroker.records.entries import iter_entries

    from .test_log_cleaner import append
    append(log, data)
    for txn in log.producer_state.update_from_entries(data, list(iter_entries(data))):
        if txn.aborted:
            log.add_aborted_txn(txn)


def snapshot_files(log) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(log.dir) if n.endswith(".snapshot"))


def crash(log) -> None:
    """Stop using the log without Log.close (no snapshot at the log end): what kill -9 leaves."""
    for segment in log.segments:
        segment.close()


def rolled_log(tmp_path):
    """Segments at 0, 2, 4 and 6: producer 7 idempotent throughout; producer 8 opens a transaction at 3 that
    stays open; producer 9 aborts one (4-5) in the segment at 4. Producer 99 is in the state (and the snapshots)
    from offset 4 on, but not in the log: a replay from before 4 does not know it."""
    from .test_log_cleaner import control_batch, kv_batch
    log = open_log(tmp_path)
    write(log, kv_batch(0, [(b"k", b"a"), (b"k", b"b")], producer_id=7, producer_epoch=0, base_sequence=0))
    log.roll()
    write(log, kv_batch(2, [(b"k", b"c")], producer_id=7, producer_epoch=0, base_sequence=2))
    write(log, kv_batch(3, [(b"k", b"t")], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True))
    log.producer_state.update(99, 0, 0, 0, 3, 3, 1)
    log.roll()
    write(log, kv_batch(4, [(b"k", b"x")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True))
    write(log, control_batch(5, 9, commit=False))
    log.roll()
    write(log, kv_batch(6, [(b"k", b"d")], producer_id=7, producer_epoch=0, base_sequence=3))
    return log


def test_every_roll_snapshots_the_state_below_the_new_segment(tmp_path):
    log = rolled_log(tmp_path)
    assert snapshot_files(log) == [2, 4, 6]
    at4 = ProducerStateManager(log.dir)
    at4._read_snapshot(4)
    assert at4.ongoing == {8: 3} and at4.producers[7].last_seq == 2 and 99 in at4.producers
    log.flush()          # the roll's snapshots are fsynced with the segments, then none is left to do
    assert not log.producer_state.has_unflushed
    log.close()
    assert snapshot_files(log) == [2, 4, 6, 7]


def test_clean_reopen_loads_the_snapshot_at_the_log_end(tmp_path):
    log = rolled_log(tmp_path)
    log.close()
    reopened = open_log(tmp_path)
    state = reopened.producer_state
    assert state.map_end_offset == 7 and state.ongoing == {8: 3} and 99 in state.producers
    assert state.check(7, 0, 3, 3).first_offset == 6          # the last batch is still a known duplicate
    assert snapshot_files(reopened) == [2, 4, 6, 7]


def test_unclean_reopen_replays_from_the_snapshot_at_or_below_the_first_segment_recovered(tmp_path):
    log = rolled_log(tmp_path)
    crash(log)
    # recovery point 6: only the segment at 6 is recovered; the state comes from the snapshot at 6, which
    # carries producer 99 (the log does not) and the open transaction
    reopened = open_log(tmp_path, clean=False, recovery_point=6)
    state = reopened.producer_state
    assert 99 in state.producers and state.ongoing == {8: 3}
    assert state.check(7, 0, 3, 3).first_offset == 6
    assert snapshot_files(reopened) == [2, 4, 6, 7]
    crash(reopened)
    # recovery point 3: the segments from 2 on are recovered; the snapshots above 2 are not trusted, the state
    # is replayed from the one at 2 (so producer 99 is gone), and each recovered segment gets its snapshot again
    again = open_log(tmp_path, clean=False, recovery_point=3)
    state = again.producer_state
    assert 99 not in state.producers and state.ongoing == {8: 3}
    assert state.check(7, 0, 3, 3).first_offset == 6
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in again.collect_aborted_txns(0, 7)] == [(9, 4, 5)]
    assert snapshot_files(again) == [2, 4, 6, 7]
    at4 = ProducerStateManager(again.dir)
    at4._read_snapshot(4)
    assert 99 not in at4.producers and at4.ongoing == {8: 3}


def test_truncation_reloads_from_the_snapshot_below_and_drops_those_above(tmp_path):
    log = rolled_log(tmp_path)
    log.truncate_to(3)
    state = log.producer_state
    assert snapshot_files(log) == [2, 3]
    assert state.ongoing == {} and 8 not in state.producers and 99 not in state.producers
    assert state.producers[7].last_seq == 2 and state.map_end_offset == 3
    log.truncate_fully_and_start_at(10)
    assert snapshot_files(log) == [] and log.producer_state.producers == {}


def test_snapshots_recovery_no_longer_needs_are_deleted_after_the_checkpoint(tmp_path):
    log = rolled_log(tmp_path)
    log.roll()                                     # segments 0, 2, 4, 6, 7
    log.recovery_point = 3
    assert log.delete_snapshots_after_recovery_point_checkpoint() == 2   # the segment below the recovery point
    assert snapshot_files(log) == [2, 4, 6, 7]
    log.flush()
    assert log.recovery_point == 7
    assert log.delete_snapshots_after_recovery_point_checkpoint() == 6   # the segment before the active one
    assert snapshot_files(log) == [6, 7]


def test_segments_deleted_take_their_snapshots(tmp_path):
    log = rolled_log(tmp_path)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(5)
    assert log.delete_old_segments() == 2          # the segments at 0 and 2
    assert snapshot_files(log) == [4, 6]
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    assert log.producer_state.producers[7].last_seq == 3    # the state itself stays (as Kafka)


def test_a_rolls_snapshot_is_fsynced_only_through_run_blocking(tmp_path, monkeypatch):
    """The roll writes the snapshot where it happens (on the hub, in the broker); its fsync waits for the
    log's flush, which runs through run_blocking (the broker's thread pool)."""
    from kbroker.clock import MockClock
    from kbroker.log.config import LogConfig
    from kbroker.log.log import Log

    from .test_log_cleaner import kv_batch
    in_pool = []
    synced = []

    def run_blocking(fn):
        in_pool.append(True)
        try:
            return fn()
        finally:
            in_pool.pop()
    log = Log(str(tmp_path / "orders-0"), LogConfig(), clock=MockClock(), had_clean_shutdown=True,
              run_blocking=run_blocking)
    real_fsync = os.fsync

    def fsync(fd):
        assert in_pool, "fsync on the caller's thread"
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    write(log, kv_batch(0, [(b"k", b"a")], producer_id=7, producer_epoch=0, base_sequence=0))
    log.roll()
    assert snapshot_files(log) == [1] and not synced
    assert log.maybe_flush()
    assert snapshot_path(log.dir, 1) in synced
