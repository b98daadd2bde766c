"""kbroker.log.txn_index and the Log's use of it: Kafka's 34-byte `.txnindex` entries in the segment holding the
ABORT marker, collected by overlap, kept across reopening, truncated with the log, renamed and deleted with
the segment, a torn tail dropped."""
import os
import struct

from kbroker.log.producer_state import CompletedTxn
from kbroker.log.txn_index import AbortedTxn, TransactionIndex

from .test_log_batches import fill
from .test_log_partition_log import files, make_log, reopen


def aborted(pid, first, last, lso):
    return CompletedTxn(pid, first, last, True, lso)


def test_entries_are_kafkas_34_bytes_and_collect_by_overlap(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(path)
    assert not os.path.exists(path)           # created on the first entry
    index.append(AbortedTxn(7, 10, 20, 10))
    index.append(AbortedTxn(8, 15, 30, 21))
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">hqqqq", 0, 7, 10, 20, 10) + struct.pack(">hqqqq", 0, 8, 15, 30, 21)
    assert index.collect(0, 10) == []                              # first offsets not below 10
    assert [t.producer_id for t in index.collect(0, 11)] == [7]
    assert [t.producer_id for t in index.collect(21, 100)] == [8]   # 7's marker (20) is before 21
    assert [t.producer_id for t in index.collect(20, 16)] == [7, 8]
    assert TransactionIndex(path).entries == index.entries          # reloaded from the file
    index.truncate_to(30)
    assert TransactionIndex(path).entries == [AbortedTxn(7, 10, 20, 10)]
    index.truncate_to(20)
    assert not os.path.exists(path)


def test_a_torn_tail_is_dropped_on_load(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    TransactionIndex(path).append(AbortedTxn(7, 10, 20, 10))
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00")
    assert TransactionIndex(path).entries == [AbortedTxn(7, 10, 20, 10)]
    assert os.path.getsize(path) == 34


def test_log_indexes_aborts_in_the_marker_segment_and_truncates_and_deletes_them(tmp_path):
    log = make_log(tmp_path, segment_bytes=1000)
    fill(log, 30, count=3)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    in_second = bases[1] + 1
    log.add_aborted_txn(aborted(5, 0, in_second, 0))
    log.add_aborted_txn(aborted(5, 0, in_second, 0))               # a replay does not index it twice
    log.add_aborted_txn(aborted(6, in_second + 1, bases[2] + 2, bases[2] + 3))
    assert [os.path.basename(s.txn_index.path) for s in log.segments if s.txn_index.entries] == [
        "%020d.txnindex" % bases[1], "%020d.txnindex" % bases[2]]
    assert [t.producer_id for t in log.collect_aborted_txns(0, log.log_end_offset)] == [5, 6]
    assert [t.producer_id for t in log.collect_aborted_txns(bases[2], log.log_end_offset)] == [6]
    log.close()
    log = reopen(log, clean=True)
    assert [t.producer_id for t in log.collect_aborted_txns(0, log.log_end_offset)] == [5, 6]
    log.truncate_to(bases[2] + 2)                                  # removes 6's marker
    assert [t.producer_id for t in log.collect_aborted_txns(0, log.log_end_offset)] == [5]
    assert "%020d.txnindex" % bases[2] not in files(log)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(bases[2])
    log.delete_old_segments()
    log.delete_pending_segments(force=True)
    assert not [n for n in files(log) if n.endswith(".txnindex") or ".txnindex." in n]
