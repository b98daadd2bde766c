"""kbroker.log.segment: Kafka's file names, sparse index entries at the positions appended, reads that sendfile,
min_one_message, recovery (torn tail, garbage, a flipped byte), truncation, timestamp search."""
import os
import socket
import struct

from kbroker.clock import MockClock
from kbroker.log.index import OffsetPosition, TimestampOffset
from kbroker.log.segment import FileSlice, LogSegment, OffsetAndTimestamp
from kbroker.records.batches import CREATE_TIME, LOG_APPEND_TIME
from kbroker.records.builder import build_v2
from kbroker.records.compression import GZIP, NONE
from kbroker.records.convert import ConversionCache, down_convert

from .test_log_batches import T0, legacy_compressed_v1, legacy_messages, v2_batch
from .test_records_convert import joined
from .test_records_support import consume


def segment(tmp_path, base=0, **kw):
    kw.setdefault("index_interval_bytes", 4096)
    kw.setdefault("clock", MockClock())
    return LogSegment(str(tmp_path), base, **kw)


def append(seg, base, count=3, timestamp=T0, **kw):
    data = v2_batch(base, count, timestamp, **kw)
    seg.append(base + count - 1, timestamp + count - 1, base + count - 1, data)
    return data


def test_file_names_are_twenty_digit_base_offsets(tmp_path):
    segment(tmp_path, 0)
    segment(tmp_path, 1234567)
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000001234567.index", "00000000000001234567.log", "00000000000001234567.timeindex"]


def test_sparse_index_entries_point_at_the_appended_batches(tmp_path):
    seg = segment(tmp_path, 100, index_interval_bytes=1000)
    positions, offset = [], 100
    for i in range(12):
        positions.append(seg.size)
        append(seg, offset, 3, T0 + 10 * i, value_size=100)   # ~400 bytes per batch
        offset += 3
    # an entry once more than 1000 bytes were written since the last: (last offset of the batch, its position)
    entries = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    assert entries and all(e in [OffsetPosition(100 + 3 * i + 2, positions[i]) for i in range(12)] for e in entries)
    gaps = [b.position - a.position for a, b in zip(entries, entries[1:])]
    assert all(g > 1000 for g in gaps)
    seg.offset_index.flush()
    raw = open(seg.offset_index.path, "rb").read(8)
    assert raw == struct.pack(">ii", entries[0].offset - 100, entries[0].position)
    # the time index got an entry with each offset index entry, timestamps growing
    assert seg.time_index.entries == len(entries)
    assert seg.time_index.entry(0).timestamp < seg.time_index.entry(len(entries) - 1).timestamp


def test_read_returns_a_slice_from_the_batch_holding_the_offset(tmp_path):
    seg = segment(tmp_path, 0, index_interval_bytes=100)
    batches = [append(seg, 3 * i, 3, value_size=50) for i in range(20)]
    for offset in range(60):
        info = seg.read(offset, 10 ** 6)
        i = offset // 3
        assert info.fetch_offset_metadata.relative_position_in_segment == sum(map(len, batches[:i]))
        assert info.records.read() == b"".join(batches[i:])
    assert seg.read(60, 100) is None                                  # beyond this segment
    info = seg.read(6, len(batches[2]) + 10)
    assert info.records.read() == batches[2] + batches[3][:10]        # may end inside a batch, as Kafka's
    info = seg.read(6, 10 ** 6, max_position=sum(map(len, batches[:4])))
    assert info.records.read() == batches[2] + batches[3]


def test_min_one_message_returns_the_whole_first_batch(tmp_path):
    seg = segment(tmp_path)
    big = append(seg, 0, 5, value_size=5000)
    append(seg, 5, 1)
    info = seg.read(0, 100)
    assert info.records.read() == big and not info.first_entry_incomplete
    info = seg.read(0, 100, min_one_message=False)
    assert info.records.length == 100 and info.first_entry_incomplete


def test_slices_can_be_sent_with_sendfile(tmp_path):
    seg = segment(tmp_path)
    data = append(seg, 0, 4) + append(seg, 4, 4)
    s1, s2 = socket.socketpair()
    with s1, s2:
        info = seg.read(4, 10 ** 6)
        sent = os.sendfile(s1.fileno(), info.records.fd, info.records.position, info.records.length)
        assert s2.recv(10 ** 6) == data[info.records.position:] and sent == info.records.length


def test_recover_rebuilds_the_indexes(tmp_path):
    seg = segment(tmp_path, 0, index_interval_bytes=300)
    starts = []
    for i in range(30):
        starts.append(seg.size)
        append(seg, 2 * i, 2, T0 + 100 * i, value_size=60)
    assert seg.recover() == 0
    rebuilt = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    # an entry (last offset of the batch, its position) whenever more than 300 bytes passed since the last one
    assert rebuilt and all(e == OffsetPosition(2 * starts.index(e.position) + 1, e.position) for e in rebuilt)
    assert all(b.position - a.position > 300 for a, b in zip(rebuilt, rebuilt[1:]))
    assert all(seg.translate_offset(o).offset == o | 1 for o in range(60))
    assert seg.time_index.last_entry == TimestampOffset(T0 + 100 * 29 + 1, 59)
    assert seg.read_next_offset() == 60


def test_recover_truncates_a_torn_tail(tmp_path):
    seg = segment(tmp_path)
    batches = [append(seg, 3 * i, 3) for i in range(5)]
    whole = sum(map(len, batches[:4]))
    os.truncate(seg.log_path, whole + len(batches[4]) // 2)
    reopened = segment(tmp_path)
    assert reopened.recover() == len(batches[4]) // 2
    assert reopened.size == whole and os.path.getsize(reopened.log_path) == whole
    assert reopened.read_next_offset() == 12


def test_recover_truncates_appended_garbage(tmp_path):
    seg = segment(tmp_path)
    data = append(seg, 0, 3) + append(seg, 3, 3)
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 7 + b"\xff" * 100)
    reopened = segment(tmp_path)
    assert reopened.recover() == 107 and reopened.size == len(data)


def test_recover_stops_at_a_flipped_byte(tmp_path):
    seg = segment(tmp_path)
    batches = [append(seg, 3 * i, 3) for i in range(5)]
    at = sum(map(len, batches[:2])) + len(batches[2]) - 3          # inside the third batch's records
    with open(seg.log_path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x40]))
    reopened = segment(tmp_path)
    assert reopened.recover() == sum(map(len, batches[2:]))
    assert reopened.read_next_offset() == 6


def test_recover_honours_max_message_size(tmp_path):
    seg = segment(tmp_path)
    small = append(seg, 0, 1)
    large = append(seg, 1, 3, value_size=1000)
    assert segment(tmp_path).recover(max_message_size=500) == len(large)
    assert os.path.getsize(seg.log_path) == len(small)


def test_truncate_to_removes_whole_batches_and_reopens_the_indexes(tmp_path):
    seg = segment(tmp_path, 0, index_interval_bytes=100)
    batches = [append(seg, 3 * i, 3, T0 + i, value_size=60) for i in range(10)]
    seg.on_become_inactive()
    assert seg.offset_index.is_full
    assert seg.truncate_to(16) == sum(map(len, batches[5:]))        # offset 16 is in the batch 15..17
    assert seg.read_next_offset() == 15 and seg.size == sum(map(len, batches[:5]))
    assert all(e.offset < 15 for e in (seg.offset_index.entry(i) for i in range(seg.offset_index.entries)))
    assert not seg.offset_index.is_full and seg.max_timestamp_so_far == T0 + 4 + 2
    append(seg, 15, 3)
    assert seg.read_next_offset() == 18


def test_find_offset_by_timestamp_looks_inside_the_batch(tmp_path):
    seg = segment(tmp_path, 0, index_interval_bytes=100)
    for i in range(10):
        append(seg, 5 * i, 5, timestamps=[T0 + 100 * i + 10 * j for j in range(5)])
    assert seg.find_offset_by_timestamp(T0 + 320) == OffsetAndTimestamp(17, T0 + 320, None)
    assert seg.find_offset_by_timestamp(T0 + 321) == OffsetAndTimestamp(18, T0 + 330, None)
    assert seg.find_offset_by_timestamp(0) == OffsetAndTimestamp(0, T0, None)
    assert seg.find_offset_by_timestamp(0, starting_offset=23) == OffsetAndTimestamp(23, T0 + 430, None)
    assert seg.find_offset_by_timestamp(T0 + 10 ** 6) is None


def test_find_offset_by_timestamp_inside_a_compressed_v1_wrapper(tmp_path):
    seg = segment(tmp_path, 100)
    seg.append(104, T0 + 40, 104, legacy_compressed_v1(104, 5))
    assert seg.find_offset_by_timestamp(T0 + 15) == OffsetAndTimestamp(102, T0 + 20, None)
    assert seg.largest_timestamp == T0 + 40 and seg.read_next_offset() == 105
    assert seg.recover() == 0


def test_find_offset_by_timestamp_inside_compressed_and_log_append_time_v2_batches(tmp_path):
    class Record:
        def __init__(self, offset, timestamp):
            self.offset, self.timestamp, self.key, self.value, self.headers = offset, timestamp, None, b"v", []
    seg = segment(tmp_path, 0)
    zipped = build_v2([Record(i, T0 + 10 * i) for i in range(5)], codec=GZIP, timestamp_type=CREATE_TIME,
                      log_append_time=-1, partition_leader_epoch=3)
    seg.append(4, T0 + 40, 4, zipped)
    # under LogAppendTime every record has the batch's time
    stamped = build_v2([Record(5 + i, T0 + i) for i in range(3)], codec=NONE, timestamp_type=LOG_APPEND_TIME,
                       log_append_time=T0 + 1000)
    seg.append(7, T0 + 1000, 7, stamped)
    assert seg.find_offset_by_timestamp(T0 + 15) == OffsetAndTimestamp(2, T0 + 20, 3)
    assert seg.find_offset_by_timestamp(T0 + 41) == OffsetAndTimestamp(5, T0 + 1000, None)


def test_largest_timestamp_from_the_time_index_or_a_scan_or_the_mtime(tmp_path):
    seg = segment(tmp_path, 0)
    append(seg, 0, 3, T0 + 50)
    append(seg, 3, 3, T0 + 10)        # out of order: the max stays at the first batch
    seg.close()
    reopened = segment(tmp_path, 0)
    assert reopened.time_index.last_entry == TimestampOffset(T0 + 52, 2)
    assert reopened.largest_timestamp == T0 + 52
    # no time index entries (an index rebuilt empty): found by scanning the batches
    os.unlink(reopened.time_index.path)
    rescanned = segment(tmp_path, 0)
    assert rescanned.time_index.entries == 0 and rescanned.largest_timestamp == T0 + 52
    # v0 messages have no timestamps: the file's modification time
    v0 = LogSegment(str(tmp_path), 100, clock=MockClock())
    data = legacy_messages(0, 100, 2)
    v0.append(101, -1, 101, data)
    os.utime(v0.log_path, ns=(0, 1234 * 10 ** 6))
    assert v0.largest_timestamp == 1234


def test_roll_conditions(tmp_path):
    clock = MockClock()
    seg = LogSegment(str(tmp_path), 0, clock=clock, max_index_size=4096)
    args = dict(max_segment_bytes=1000, max_segment_ms=60000, now_ms=clock.now_ms())
    assert not seg.should_roll(messages_size=100, max_timestamp_in_messages=T0, max_offset_in_messages=0, **args)
    append(seg, 0, 3, T0 - 5000, value_size=200)                   # 688 bytes, first batch at T0 - 5000
    assert seg.size == 688
    assert seg.should_roll(messages_size=313, max_timestamp_in_messages=T0, max_offset_in_messages=3, **args)
    assert not seg.should_roll(messages_size=312, max_timestamp_in_messages=T0, max_offset_in_messages=3, **args)
    # segment.ms counts from the first batch's max timestamp (T0 - 4998) to the new batch's
    assert not seg.should_roll(messages_size=10, max_timestamp_in_messages=T0 + 55002, max_offset_in_messages=3,
                               **args)
    assert seg.should_roll(messages_size=10, max_timestamp_in_messages=T0 + 55003, max_offset_in_messages=3, **args)
    assert seg.should_roll(messages_size=10, max_timestamp_in_messages=T0, max_offset_in_messages=2 ** 31, **args)


def test_change_file_suffixes_and_delete(tmp_path):
    seg = segment(tmp_path, 7)
    append(seg, 7, 2)
    seg.change_file_suffixes("", ".deleted")
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000007.index.deleted", "00000000000000000007.log.deleted",
                                            "00000000000000000007.timeindex.deleted"]
    assert seg.read(7, 100).records.read()[:8] == struct.pack(">q", 7)   # still readable after the rename
    seg.delete()
    assert os.listdir(tmp_path) == []


def test_preallocated_file_is_trimmed_on_close(tmp_path):
    seg = segment(tmp_path, 0, preallocate_bytes=100000)
    assert os.path.getsize(seg.log_path) == 100000 and seg.size == 0
    data = append(seg, 0, 3)
    assert seg.read(0, 10 ** 6).records.read() == data
    seg.close()
    assert os.path.getsize(seg.log_path) == len(data)
    assert os.path.getsize(seg.offset_index.path) == 0 and os.path.getsize(seg.time_index.path) == 12


def test_file_id_changes_when_written_bytes_may_change(tmp_path):
    """Slices carry the segment's file id, the key of the fetch conversion cache: a truncation or a recovery that
    cut bytes gives a new one (new bytes at old positions are never served from conversions of the old), an
    append does not, and every segment object (a cleaned or recreated one) has its own."""
    seg = segment(tmp_path, 0)
    append(seg, 0, 3, value_size=20)
    cache = ConversionCache(1 << 20)

    def old_consumer_reads():
        piece = seg.read(0, 1 << 20).records
        assert piece.file_id == seg.file_id
        pieces, _, _ = down_convert(lambda p, n: FileSlice(piece.fd, p, n).read(), piece.file_id, piece.position,
                                 piece.position + piece.length, 1, fetch_offset=0, max_bytes=1 << 20, cache=cache)
        return [(r[0], r[1], r[4]) for r in consume(joined(pieces))]

    assert old_consumer_reads() == [(i, T0 + i, bytes([i]) * 20) for i in range(3)]
    before = seg.file_id
    append(seg, 3, 2, value_size=20)
    assert seg.file_id == before
    seg.truncate_to(0)
    assert seg.file_id != before
    append(seg, 0, 3, value_size=20, timestamp=T0 + 5)     # the same positions, other bytes (timestamps)
    assert old_consumer_reads() == [(i, T0 + 5 + i, bytes([i]) * 20) for i in range(3)] and len(cache) == 2
    torn = seg.file_id
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 7)
    seg.recover()
    assert seg.file_id != torn
    assert len({seg.file_id, segment(tmp_path, 0).file_id, segment(tmp_path, 100).file_id}) == 3
