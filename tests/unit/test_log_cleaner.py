"""kbroker.log.cleaner: log compaction on real files — the latest record per key survives with its offset,
tombstones and transaction markers live delete.retention.ms in the clean section, min/max.compaction.lag.ms,
the high watermark bound, the offset map's capacity, idempotent producers' last batches, compression kept,
segment grouping, the crash-safe swap (`.cleaned` / `.swap` left by a crash, then the log reopened), cleaning
aborted by a concurrent truncation, the cleaner checkpoint, and the LogManager's selection and retention."""
import os
import struct
import zlib

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

from kbroker.clock import MockClock
from kbroker.log.checkpoint import OffsetCheckpointFile
from kbroker.log.cleaner import Cleaner, LogCleaner, group_segments_by_size
from kbroker.log.cleaner_manager import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, cleanable_offsets, compaction_settings
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.manager import LogManager
from kbroker.log.producer_state import ProducerStateManager
from kbroker.log.segment import LogSegment
from kbroker.records.batches import legacy_records, v2_records
from kbroker.records.entries import CONTROL_MASK, V2_HEADER, crc_valid, iter_entries

T0 = 1_700_000_000_000   # MockClock's default now
HOUR = 3_600_000


# ---- test data ------------------------------------------------------------------------------------------------

def kv_batch(base_offset: int, items, timestamp: int = T0, codec: int = 0, producer_id: int = -1,
             producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
             headers=(), log_append_time: int | None = None) -> bytes:
    """One v2 batch of (key, value) records at base_offset.. (None key/value allowed), built by aiokafka;
    with log_append_time, stamped as the broker stamps a LogAppendTime batch."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=int(transactional),
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=10 ** 8)
    for i, (key, value) in enumerate(items):
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=list(headers))
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    if log_append_time is not None:
        struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 0x08)
        struct.pack_into(">q", data, 35, log_append_time)
        import crc32c
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def control_batch(base_offset: int, producer_id: int, commit: bool = True, timestamp: int = T0) -> bytes:
    """A transaction marker: one control record (key: version 0, type 0 abort / 1 commit)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=producer_id,
                                        producer_epoch=0, base_sequence=-1, batch_size=10 ** 6)
    builder.append(0, timestamp=timestamp, key=struct.pack(">hh", 0, int(commit)),
                   value=struct.pack(">hi", 0, 0), headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    attributes = struct.unpack_from(">h", data, 21)[0] | CONTROL_MASK
    struct.pack_into(">h", data, 21, attributes)
    import crc32c
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def append(log: Log, data: bytes) -> None:
    entries = list(iter_entries(data, check_crc=True))
    max_ts = max(e.max_timestamp for e in entries)
    at = next(e.last_offset for e in entries if e.max_timestamp == max_ts)
    first = entries[0].base_offset if entries[0].base_offset >= 0 else entries[0].last_offset
    log.append(data, first, entries[-1].last_offset, max_ts, at, sum(e.record_count for e in entries))


def append_kv(log: Log, items, **kw) -> int:
    """Append the records at the log end offset; returns the first offset."""
    first = log.log_end_offset
    append(log, kv_batch(first, items, **kw))
    return first


def k(i: int) -> bytes:
    return b"key-%04d" % i


def make_log(tmp_path, clock=None, name="orders-0", overrides=None, **config):
    config.setdefault("cleanup_policy", ("compact",))
    config.setdefault("file_delete_delay_ms", 0)
    config.setdefault("segment_bytes", 64 * 1024)
    config.setdefault("index_interval_bytes", 1024)
    if overrides:
        config["passthrough"] = dict(overrides)
    return Log(str(tmp_path / name), LogConfig(**config), clock=clock or MockClock(), had_clean_shutdown=True)


def seal(log: Log) -> None:
    """Make everything written cleanable: roll (the active segment is never cleaned) and commit it (HW)."""
    if log.active_segment.size:
        log.roll()
    log.update_high_watermark(log.log_end_offset)


def cleaner_for(log: Log, clock=None, **config) -> LogCleaner:
    config.setdefault("delete_retention_ms", 0)
    return LogCleaner([log.parent_dir], CleanerConfig(**config), clock or log._clock,
                      live_logs=lambda: {log.topic_partition: log})


def entries_of(log: Log):
    """(entry bytes, Entry) of every entry in the log, segment by segment, from the files."""
    out = []
    for segment in log.segments:
        with open(segment.log_path, "rb") as f:
            data = f.read()
        for entry in iter_entries(data, check_crc=True):
            out.append((data[entry.position:entry.position + entry.size], entry))
    return out


def records_of(log: Log):
    """Every record in the log as (offset, key, value), in log order."""
    out = []
    for data, entry in entries_of(log):
        records = v2_records(data, 0, entry.size, 10 ** 8) if entry.magic == 2 else \
            legacy_records(data, 0, entry.size, 10 ** 8)
        if entry.magic == 2 and entry.attributes & CONTROL_MASK:
            continue
        out.extend((r.offset, r.key, r.value) for r in records)
    return out


def latest(writes):
    """key -> (offset, value) of the last write of each key, from [(offset, key, value)]."""
    out = {}
    for offset, key, value in writes:
        out[key] = (offset, value)
    return out


def temp_files(log):
    return [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]


def check_consistent(log: Log) -> None:
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(set(bases))
    offsets = [o for o, _, _ in records_of(log)]
    assert offsets == sorted(set(offsets))
    for segment, nxt in zip(log.segments, log.segments[1:]):
        assert segment.read_next_offset() <= nxt.base_offset


# ---- the big one ---------------------------------------------------------------------------------------------------

def test_100k_updates_over_1000_keys_shrink_to_the_latest_record_of_each_key(tmp_path):
    log = make_log(tmp_path, segment_bytes=256 * 1024, index_interval_bytes=4096)
    writes = []
    for round_ in range(100):
        for chunk in range(10):
            items = [(k(i), b"v%d-%d" % (i, round_)) for i in range(chunk * 100, chunk * 100 + 100)]
            first = append_kv(log, items)
            writes.extend((first + j, key, value) for j, (key, value) in enumerate(items))
    assert log.log_end_offset == 100_000 and len(log.segments) > 5
    seal(log)
    size_before, segment_count = log.size, len(log.segments)
    cleaner = cleaner_for(log)
    stats = cleaner.clean(log)
    assert stats is not None and stats.end_offset == 100_000 and stats.map_size == 1000 and not stats.map_full
    assert stats.records_read == 100_000 and stats.records_retained == 1000
    want = latest(writes)
    got = records_of(log)
    assert len(got) == 1000
    assert {key: (offset, value) for offset, key, value in got} == want
    assert [o for o, _, _ in got] == sorted(o for o, _ in want.values())       # offsets kept and increasing
    assert all(value == b"v%d-99" % int(key[4:]) for _, key, value in got)
    assert log.size < size_before / 50 and log.log_end_offset == 100_000
    # grouped by their sizes before cleaning (as Kafka), the full segments were cleaned one by one ...
    assert len(log.segments) == segment_count and sum(1 for s in log.segments if s.size) == 1
    assert temp_files(log) == [] and os.listdir(log.dir).count("00000000000000000000.log") == 1
    # the cleaned segment's indexes find every record
    for offset, _ in want.values():
        data = log.read(offset, 1).records.read()
        entry = next(iter_entries(data))
        assert entry.base_offset <= offset <= entry.last_offset
    assert log.read(0, 1).records.read()[:8] == struct.pack(">q", 99_000)
    # the checkpoint says where the next cleaning starts
    assert OffsetCheckpointFile(os.path.join(log.parent_dir, CLEANER_OFFSET_CHECKPOINT)).read() == \
        {("orders", 0): 100_000}
    assert cleaner.clean(log) is None                    # nothing dirty any more
    # ... and the next cleaning merges the small cleaned segments and the new dirty one into one
    append_kv(log, [(k(0), b"last")])
    seal(log)
    assert cleaner.clean(log).groups == 1
    assert len(log.segments) == 2 and log.segments[0].base_offset == 0
    assert len(records_of(log)) == 1000 and records_of(log)[-1] == (100_000, k(0), b"last")
    # v2 batches keep their base offset and last offset delta
    assert [e.last_offset for _, e in entries_of(log)][-2] == 99_999


def test_the_next_cleaning_maps_only_the_dirty_section(tmp_path):
    log = make_log(tmp_path)
    for round_ in range(3):
        append_kv(log, [(k(i), b"a%d" % round_) for i in range(50)])
    seal(log)
    cleaner = cleaner_for(log)
    assert cleaner.clean(log).end_offset == 150
    append_kv(log, [(k(i), b"b") for i in range(10)])
    seal(log)
    stats = cleaner.clean(log)
    assert (stats.first_dirty_offset, stats.end_offset, stats.map_size) == (150, 160, 10)
    got = {key: value for _, key, value in records_of(log)}
    assert len(got) == 50 and all(got[k(i)] == (b"b" if i < 10 else b"a2") for i in range(50))
    assert len(records_of(log)) == 50


# ---- tombstones, keyless records -------------------------------------------------------------------------------------

def test_tombstones_are_removed_only_delete_retention_ms_after_they_were_cleaned(tmp_path):
    clock = MockClock()
    log = make_log(tmp_path, clock, overrides={"delete.retention.ms": "10000"})
    append_kv(log, [(k(i), b"v") for i in range(10)])
    append_kv(log, [(k(i), None) for i in range(5)], timestamp=clock.now_ms())      # tombstones for 0..4
    seal(log)
    cleaner = LogCleaner([log.parent_dir], CleanerConfig(), clock, live_logs=lambda: {log.topic_partition: log})
    assert compaction_settings(log.config, cleaner.config).delete_retention_ms == 10000
    cleaner.clean(log)
    got = {key: value for _, key, value in records_of(log)}
    assert got == {**{k(i): None for i in range(5)}, **{k(i): b"v" for i in range(5, 10)}}
    for step in (5000, 4999):               # cleanings less than 10 s after the tombstones were cleaned keep them
        clock.advance(step)
        append_kv(log, [(k(9), b"w%d" % step)], timestamp=clock.now_ms())
        seal(log)
        stats = cleaner.clean(log)
        assert stats is not None and stats.tombstones_removed == 0
        assert sum(1 for _, _, v in records_of(log) if v is None) == 5
    clock.advance(1)                        # 10 s since the first cleaning
    append_kv(log, [(k(8), b"x")], timestamp=clock.now_ms())
    seal(log)
    stats = cleaner.clean(log)
    assert stats.tombstones_removed == 5
    got = {key: value for _, key, value in records_of(log)}
    assert got == {k(5): b"v", k(6): b"v", k(7): b"v", k(8): b"x", k(9): b"w4999"}


def test_tombstone_in_the_dirty_section_is_kept_even_when_retention_is_zero(tmp_path):
    log = make_log(tmp_path, overrides={"delete.retention.ms": "0"})
    append_kv(log, [(k(1), b"v"), (k(2), b"v")])
    append_kv(log, [(k(1), None)])
    seal(log)
    cleaner = cleaner_for(log)
    cleaner.clean(log)
    assert [(key, value) for _, key, value in records_of(log)] == [(k(2), b"v"), (k(1), None)]
    append_kv(log, [(k(3), b"v")])
    seal(log)
    assert cleaner.clean(log).tombstones_removed == 1          # it is in the clean section now
    assert [(key, value) for _, key, value in records_of(log)] == [(k(2), b"v"), (k(3), b"v")]


def test_tombstone_clock_survives_a_restart_through_the_segment_mtime(tmp_path):
    clock = MockClock()
    log = make_log(tmp_path, clock, overrides={"delete.retention.ms": "10000"})
    append_kv(log, [(k(1), b"v"), (k(2), None)])
    seal(log)
    cleaner_for(log).clean(log)
    clock.advance(10_000)
    append_kv(log, [(k(3), b"v")], timestamp=clock.now_ms())
    seal(log)
    fresh = LogCleaner([log.parent_dir], CleanerConfig(), clock, live_logs=lambda: {log.topic_partition: log})
    assert fresh.checkpoint_offset(log) == 2
    assert fresh.clean(log).tombstones_removed == 1
    assert [key for _, key, _ in records_of(log)] == [k(1), k(3)]


def test_records_without_keys_are_dropped(tmp_path):
    log = make_log(tmp_path)
    append_kv(log, [(None, b"x"), (k(1), b"v"), (None, b"y")])
    seal(log)
    stats = cleaner_for(log).clean(log)
    assert stats.keyless_removed == 2
    [(data, entry)] = entries_of(log)
    assert (entry.base_offset, entry.last_offset, entry.record_count) == (0, 2, 1)    # offsets kept
    assert records_of(log) == [(1, k(1), b"v")]


# ---- what is cleanable ----------------------------------------------------------------------------------------------

def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path):
    clock = MockClock()
    log = make_log(tmp_path, clock, overrides={"min.compaction.lag.ms": "60000"})
    append_kv(log, [(k(1), b"a"), (k(1), b"b")], timestamp=clock.now_ms())
    log.roll()
    clock.advance(30_000)
    append_kv(log, [(k(1), b"c"), (k(2), b"x")], timestamp=clock.now_ms())
    seal(log)
    cleaner = cleaner_for(log)
    settings = cleaner.settings_for(log)
    assert cleanable_offsets(log, None, settings, clock.now_ms())[1] == 0      # both segments are too recent
    assert cleaner.clean(log) is None and len(records_of(log)) == 4
    clock.advance(30_001)                                                       # the first one is old enough
    assert cleanable_offsets(log, None, settings, clock.now_ms())[1] == 2
    cleaner.clean(log)
    assert [(o, v) for o, _, v in records_of(log)] == [(1, b"b"), (2, b"c"), (3, b"x")]
    clock.advance(30_000)
    cleaner.clean(log)
    assert [(o, v) for o, _, v in records_of(log)] == [(2, b"c"), (3, b"x")]


def test_the_dirty_section_stops_at_the_high_watermark_and_the_active_segment(tmp_path):
    log = make_log(tmp_path)
    append_kv(log, [(k(1), b"a")])
    append_kv(log, [(k(1), b"b")])
    log.roll()
    append_kv(log, [(k(1), b"c")])      # not committed yet
    log.roll()
    append_kv(log, [(k(1), b"d")])      # in the active segment
    log.update_high_watermark(2)
    cleaner = cleaner_for(log)
    stats = cleaner.clean(log)
    assert stats.end_offset == 2
    assert [(o, v) for o, _, v in records_of(log)] == [(1, b"b"), (2, b"c"), (3, b"d")]
    log.update_high_watermark(4)
    assert cleaner.clean(log).end_offset == 3
    assert [(o, v) for o, _, v in records_of(log)] == [(2, b"c"), (3, b"d")]
    log.roll()
    assert cleaner.clean(log).end_offset == 4
    assert [(o, v) for o, _, v in records_of(log)] == [(3, b"d")]


def test_a_full_offset_map_ends_the_dirty_section_and_later_cleanings_go_on(tmp_path):
    log = make_log(tmp_path, segment_bytes=16 * 1024)
    writes = []
    for round_ in range(3):
        for chunk in range(5):
            items = [(k(i), b"%d" % round_) for i in range(chunk * 100, chunk * 100 + 100)]
            first = append_kv(log, items)
            writes.extend((first + j, key, value) for j, (key, value) in enumerate(items))
    seal(log)
    cleaner = cleaner_for(log, dedupe_buffer_size=24 * 300, io_buffer_load_factor=1.0)
    assert cleaner.config.max_map_entries == 300
    stats = cleaner.clean(log)
    assert stats.map_full and stats.map_size == 300 and stats.end_offset == 300
    ends = [stats.end_offset]
    while True:
        stats = cleaner.clean(log)
        if stats is None:
            break
        ends.append(stats.end_offset)
        check_consistent(log)
    assert ends[-1] == 1500 and ends == sorted(ends)
    assert {key: (o, v) for o, key, v in records_of(log)} == latest(writes)
    assert len(records_of(log)) == 500


def test_group_segments_by_size():
    class Index:
        def __init__(self, entries):
            self.entries = entries

    class Seg:
        def __init__(self, base, size, index_entries=0):
            self.base_offset, self.size = base, size
            self.offset_index, self.time_index = Index(index_entries), Index(index_entries)

    segs = [Seg(0, 400), Seg(10, 400), Seg(20, 300), Seg(30, 900), Seg(40, 50), Seg(50, 50)]
    nexts = [10, 20, 30, 40, 50, 60]
    groups = group_segments_by_size(segs, nexts, 1000, 10 ** 6)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20], [30, 40, 50]]
    # index sizes bound the groups too (time index entries are 12 bytes)
    segs = [Seg(0, 1, 10), Seg(10, 1, 10), Seg(20, 1, 10)]
    assert [len(g) for g in group_segments_by_size(segs, nexts, 1000, 250)] == [2, 1]
    # and the offsets must fit relative to the group's base offset
    segs = [Seg(0, 1), Seg(2 ** 31 - 10, 1), Seg(2 ** 31 + 5, 1)]
    assert [len(g) for g in group_segments_by_size(segs, [2 ** 31 - 10, 2 ** 31 + 5, 2 ** 31 + 6], 1000, 1000)] \
        == [1, 2]       # the second segment's offsets (up to 2**31 + 4) do not fit relative to 0


# ---- producers, compression, markers, legacy -------------------------------------------------------------------------

def test_an_idempotent_producers_last_batch_is_kept_empty_and_its_state_survives(tmp_path):
    log = make_log(tmp_path)
    append(log, kv_batch(0, [(k(1), b"a"), (k(2), b"a")], producer_id=7, producer_epoch=3, base_sequence=0))
    append(log, kv_batch(2, [(k(1), b"b"), (k(2), b"b"), (k(3), b"b")], producer_id=7, producer_epoch=3,
                         base_sequence=2))
    append(log, kv_batch(5, [(k(1), b"c"), (k(2), b"c"), (k(3), b"c")]))          # supersedes all of pid 7
    append(log, kv_batch(8, [(k(4), b"a")], producer_id=8, producer_epoch=0, base_sequence=0))
    append(log, kv_batch(9, [(k(4), b"b"), (k(5), b"b")], producer_id=8, producer_epoch=0, base_sequence=1))
    seal(log)
    stats = cleaner_for(log).clean(log)
    assert stats.empty_batches_retained == 1
    headers = [V2_HEADER.unpack_from(data) for data, _ in entries_of(log)]
    # (base offset, last offset delta, producer id, epoch, base sequence, record count)
    assert [(h[0], h[6], h[9], h[10], h[11], h[12]) for h in headers] == [
        (2, 2, 7, 3, 2, 0),       # pid 7's first batch is gone, its last one kept empty with its offsets
        (5, 2, -1, -1, -1, 3),
        (9, 1, 8, 0, 1, 2),       # pid 8's last batch is whole; its first is superseded
    ]
    assert headers[0][1] == 49 and headers[0][8] == T0 + 2          # just a header, max timestamp kept
    state = ProducerStateManager(log.dir)
    state.replay(log, log.log_start_offset, log.log_end_offset)
    assert state.producers[7].last_seq == 4 and state.producers[7].epoch == 3
    assert state.producers[7].batches[-1].last_offset == 4
    assert state.producers[8].last_seq == 2
    # a later batch of pid 7 makes the empty one obsolete
    append(log, kv_batch(11, [(k(6), b"z")], producer_id=7, producer_epoch=3, base_sequence=5))
    seal(log)
    cleaner_for(log).clean(log)
    assert [V2_HEADER.unpack_from(d)[0] for d, _ in entries_of(log)] == [5, 9, 11]


def test_a_partly_kept_batch_keeps_offsets_and_sequences(tmp_path):
    log = make_log(tmp_path)
    append(log, kv_batch(0, [(k(1), b"a"), (k(2), b"a"), (k(3), b"a"), (k(4), b"a")], producer_id=5,
                         producer_epoch=1, base_sequence=10))
    append_kv(log, [(k(1), b"b"), (k(4), b"b")])
    seal(log)
    cleaner_for(log).clean(log)
    data, entry = entries_of(log)[0]
    h = V2_HEADER.unpack_from(data)
    assert (h[0], h[6], h[9], h[10], h[11], h[12]) == (0, 3, 5, 1, 10, 2)
    assert h[7] == T0 + 1              # firstTimestamp: the first kept record's (as Kafka)
    assert [(o, key) for o, key, _ in records_of(log)] == [(1, k(2)), (2, k(3)), (4, k(1)), (5, k(4))]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_stay_compressed(tmp_path, codec):
    log = make_log(tmp_path)
    for round_ in range(3):
        append_kv(log, [(k(i), b"%d-" % round_ + b"x" * 50) for i in range(20)], codec=codec)
    append_kv(log, [(k(i), b"new") for i in range(0, 20, 2)], codec=codec)
    seal(log)
    cleaner_for(log).clean(log)
    entries = entries_of(log)
    assert [(e.base_offset, e.last_offset, e.compression, e.record_count) for _, e in entries] == \
        [(40, 59, codec, 10), (60, 69, codec, 10)]
    assert all(crc_valid(d, next(iter_entries(d))) for d, _ in entries)
    got = {key: value for _, key, value in records_of(log)}
    assert got == {k(i): b"new" if i % 2 == 0 else b"2-" + b"x" * 50 for i in range(20)}


def test_transaction_markers_stay_while_their_data_does_and_for_delete_retention(tmp_path):
    clock = MockClock()
    log = make_log(tmp_path, clock, overrides={"delete.retention.ms": "1000"})
    append(log, kv_batch(0, [(k(1), b"t")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True))
    append(log, control_batch(1, 9))
    append(log, kv_batch(2, [(k(2), b"t")], producer_id=4, producer_epoch=0, base_sequence=0, transactional=True))
    append(log, control_batch(3, 4))
    append_kv(log, [(k(1), b"plain")])                 # supersedes pid 9's transactional record
    append(log, kv_batch(5, [(k(9), b"last")], producer_id=9, producer_epoch=0, base_sequence=1))
    seal(log)
    cleaner = cleaner_for(log)
    cleaner.clean(log)
    kinds = [(e.base_offset, bool(e.attributes & CONTROL_MASK)) for _, e in entries_of(log)]
    assert kinds == [(1, True), (2, False), (3, True), (4, False), (5, False)]
    clock.advance(1000)
    append_kv(log, [(k(8), b"x")], timestamp=clock.now_ms())
    seal(log)
    assert cleaner.clean(log).markers_removed == 1
    # pid 9's marker has no data left before it; pid 4's still guards its record
    assert [e.base_offset for _, e in entries_of(log)] == [2, 3, 4, 5, 6]


def test_legacy_messages_are_compacted_and_wrappers_rebuilt(tmp_path):
    log = make_log(tmp_path, message_format_version="0.10.2")
    plain = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=10 ** 6)
    for i in range(3):
        plain.append(i, timestamp=T0, key=k(i), value=b"a")
    append(log, bytes(plain.build()))
    wrapped = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=10 ** 6)
    for i in range(4):
        wrapped.append(i, timestamp=T0 + i, key=k(i + 2), value=b"b")
    data = bytearray(wrapped.build())
    struct.pack_into(">q", data, 0, 6)                  # the wrapper holds the last inner offset (3..6)
    struct.pack_into(">q", data, 18, T0 + 3)
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    append(log, bytes(data))
    plain = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=10 ** 6)
    plain.append(7, timestamp=T0, key=k(4), value=b"c")
    append(log, bytes(plain.build()))
    seal(log)
    cleaner_for(log).clean(log)
    assert [(o, key, v) for o, key, v in records_of(log)] == [
        (0, k(0), b"a"), (1, k(1), b"a"), (3, k(2), b"b"), (4, k(3), b"b"), (6, k(5), b"b"), (7, k(4), b"c")]
    wrapper = [e for _, e in entries_of(log) if e.compression]
    assert len(wrapper) == 1 and wrapper[0].last_offset == 6 and wrapper[0].magic == 1


# ---- crash safety and concurrency --------------------------------------------------------------------------------

class SimulatedCrash(Exception):
    pass


def crashing_renames(monkeypatch, crash_at: int):
    """Make the crash_at-th (0-based) LogSegment.change_file_suffixes call fail: the broker 'dies' there."""
    original = LogSegment.change_file_suffixes
    calls = []

    def rename(self, old, new):
        calls.append((self.base_offset, old, new))
        if len(calls) - 1 == crash_at:
            raise SimulatedCrash(f"crash before renaming {self.base_offset} {old!r} -> {new!r}")
        return original(self, old, new)
    monkeypatch.setattr(LogSegment, "change_file_suffixes", rename)
    return calls


def crash_log(tmp_path):
    """Four small segments (rolled by hand) that the cleaner puts in one group, 120 keys written 4 times."""
    log = make_log(tmp_path, segment_bytes=64 * 1024)
    writes = []
    for round_ in range(4):
        for chunk in range(3):
            items = [(k(i), b"r%d" % round_ + b"." * 40) for i in range(chunk * 40, chunk * 40 + 40)]
            first = append_kv(log, items)
            writes.extend((first + j, key, value) for j, (key, value) in enumerate(items))
        log.roll()
    seal(log)
    assert len(log.segments) == 5
    return log, writes


@pytest.mark.parametrize("crash_at,left", [
    (0, ".cleaned"),          # the cleaned segment is written and flushed, not yet renamed .swap
    (1, ".swap"),             # renamed .swap, old segments untouched
    (2, ".swap"),             # one old segment already renamed .deleted
    (-1, ".swap"),            # every old segment .deleted, the .swap not yet renamed to its final name
])
def test_a_crash_in_the_middle_of_a_swap_recovers_to_a_consistent_log(tmp_path, monkeypatch, crash_at, left):
    log, writes = crash_log(tmp_path)
    old = [s.base_offset for s in log.segments[:-1]]
    calls = crashing_renames(monkeypatch, crash_at if crash_at >= 0 else len(old) + 1)
    with pytest.raises(SimulatedCrash):
        cleaner_for(log).clean(log)
    monkeypatch.undo()
    assert any(name.endswith(left) for name in os.listdir(log.dir)), sorted(os.listdir(log.dir))
    # the renames of one swap: the cleaned segment to .swap, each old one to .deleted, the .swap into place
    assert calls == ([(0, ".cleaned", ".swap")] + [(b, "", ".deleted") for b in old] + [(0, ".swap", "")])[
        :len(calls)]
    # the broker restarts: a new Log on the same directory, after an unclean shutdown
    reopened = Log(log.dir, log.config, clock=log._clock, had_clean_shutdown=False)
    assert temp_files(reopened) == []
    assert reopened.log_end_offset == log.log_end_offset
    check_consistent(reopened)
    want = latest(writes)
    got = records_of(reopened)
    got_latest = latest(got)
    assert got_latest == want                                   # every key's latest value, at its offset
    if left == ".cleaned":
        assert len(got) == len(writes)                          # the old segments are intact
    else:
        assert len(got) < len(writes)                           # the swap was completed
    # cleaning again finishes the job
    reopened.update_high_watermark(reopened.log_end_offset)
    cleaner_for(reopened).clean(reopened)
    assert sorted(records_of(reopened)) == sorted((o, key, v) for key, (o, v) in want.items())


def test_cleaning_is_aborted_by_a_concurrent_truncation(tmp_path):
    log, writes = crash_log(tmp_path)
    append_kv(log, [(k(0), b"tail-1")])
    append_kv(log, [(k(1), b"tail-2")])
    leo = log.log_end_offset
    calls = []

    def run_blocking(fn):
        calls.append(fn)
        result = fn()
        if len(calls) == 2:             # while the first group is being recopied, a follower truncates
            log.truncate_to(leo - 1)
        return result
    cleaner = LogCleaner([log.parent_dir], CleanerConfig(delete_retention_ms=0), log._clock, run_blocking,
                         live_logs=lambda: {log.topic_partition: log})
    assert cleaner.clean(log) is None
    assert temp_files(log) == [] and len(records_of(log)) == len(writes) + 1      # nothing was swapped in
    assert cleaner.checkpoint_offset(log) is None
    assert not os.path.exists(os.path.join(log.parent_dir, CLEANER_OFFSET_CHECKPOINT))
    stats = cleaner.clean(log)          # the next cleaning works
    assert stats is not None and len(records_of(log)) == 120 + 1


def test_truncation_below_the_checkpoint_moves_it_back(tmp_path):
    log, writes = crash_log(tmp_path)
    cleaner = cleaner_for(log)
    end = cleaner.clean(log).end_offset
    assert cleaner.checkpoint_offset(log) == end
    cleaner.attach(log)
    path = os.path.join(log.parent_dir, CLEANER_OFFSET_CHECKPOINT)
    assert OffsetCheckpointFile(path).read() == {("orders", 0): end}
    log.truncate_to(end - 30)
    assert cleaner.checkpoint_offset(log) == end - 30
    cleaner.write_checkpoints(only_changed=True)         # what the next round does first
    assert OffsetCheckpointFile(path).read() == {("orders", 0): end - 30}
    log.truncate_to(end + 5)                             # above the checkpoint: unchanged
    assert cleaner.checkpoint_offset(log) == end - 30
    # new data at the truncated offsets is dirty again: the next cleaning maps it
    append_kv(log, [(k(i), b"again") for i in range(40)])
    seal(log)
    stats = cleaner.clean(log)
    assert stats.first_dirty_offset == end - 30 and stats.map_size == 40
    assert all(v == b"again" for o, key, v in records_of(log) if int(key[4:]) < 40)


def test_cleaning_a_deleted_log_is_abandoned(tmp_path):
    log, _ = crash_log(tmp_path)
    live = {log.topic_partition: log}

    def run_blocking(fn):
        result = fn()
        live.clear()                    # the partition is deleted while the map is built
        return result
    cleaner = LogCleaner([log.parent_dir], CleanerConfig(), log._clock, run_blocking, live_logs=lambda: live)
    assert cleaner.clean(log) is None and temp_files(log) == []


# ---- the LogManager -------------------------------------------------------------------------------------------------

def manager(tmp_path, clock, topic_configs, **cleaner):
    cleaner.setdefault("delete_retention_ms", 0)
    return LogManager([str(tmp_path / "data")], LogConfig(file_delete_delay_ms=0, segment_bytes=16 * 1024), clock,
                      topic_configs=topic_configs, cleaner_config=CleanerConfig(**cleaner))


def fill_dups(log, keys: int, rounds: int) -> None:
    for round_ in range(rounds):
        append_kv(log, [(k(i), b"%d" % round_ + b"-" * 30) for i in range(keys)])
    seal(log)


def test_manager_cleans_the_dirtiest_logs_first_and_skips_clean_enough_ones(tmp_path, monkeypatch):
    clock = MockClock()
    compact = LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0, segment_bytes=16 * 1024)
    lm = manager(tmp_path, clock, {"a": compact, "b": compact, "c": compact})
    a, b, c = (lm.get_or_create_log((t, 0)) for t in "abc")
    d = lm.get_or_create_log(("d", 0))                 # cleanup.policy=delete: never compacted
    fill_dups(a, 50, 2)         # half dirty... all dirty the first time: ratio 1
    fill_dups(b, 50, 4)
    fill_dups(c, 50, 3)
    fill_dups(d, 50, 4)
    order = []
    original = Cleaner.clean

    def spy(self, candidate):
        order.append((candidate.topic_partition[0], round(candidate.cleanable_ratio, 2)))
        return original(self, candidate)
    monkeypatch.setattr(Cleaner, "clean", spy)
    assert lm.clean_logs() == 3
    assert [t for t, _ in order] and {t for t, _ in order} == {"a", "b", "c"}
    assert len(records_of(d)) == 200
    # now a gets a little dirt and b a lot: only b is above the default ratio of 0.5
    order.clear()
    append_kv(a, [(k(0), b"x")])
    seal(a)
    fill_dups(b, 50, 3)
    assert lm.clean_logs() == 1 and [t for t, _ in order] == ["b"]
    order.clear()
    fill_dups(a, 50, 3)
    fill_dups(c, 50, 1)
    lm.cleaner.config = CleanerConfig(delete_retention_ms=0, min_cleanable_ratio=0.01)
    assert lm.clean_logs() == 2
    assert [t for t, _ in order] == ["a", "c"] and order[0][1] > order[1][1]      # dirtiest first
    lm.shutdown()
    checkpoint = OffsetCheckpointFile(str(tmp_path / "data" / CLEANER_OFFSET_CHECKPOINT)).read()
    assert set(checkpoint) == {("a", 0), ("b", 0), ("c", 0)}
    assert checkpoint[("c", 0)] == c.log_end_offset


def test_the_cleaner_follows_policy_changes_and_new_logs(tmp_path):
    """The cleaner keeps its list of compacted logs between rounds: a topic switched to compact, one switched
    back, a log created and a log deleted all reach it."""
    clock = MockClock()
    compact = LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0, segment_bytes=16 * 1024)
    delete = LogConfig(file_delete_delay_ms=0, segment_bytes=16 * 1024)
    lm = manager(tmp_path, clock, {"a": compact}, min_cleanable_ratio=0.01)
    a, b = lm.get_or_create_log(("a", 0)), lm.get_or_create_log(("b", 0))
    fill_dups(a, 20, 2)
    fill_dups(b, 20, 2)
    assert lm.clean_logs() == 1 and len(records_of(b)) == 40
    lm.update_topic_config("b", compact)
    assert lm.clean_logs() == 1 and len(records_of(b)) == 20
    lm.update_topic_config("a", delete)
    fill_dups(a, 20, 1)
    assert lm.clean_logs() == 0 and len(records_of(a)) == 40
    lm.update_topic_config("c", compact)
    c = lm.get_or_create_log(("c", 0))
    fill_dups(c, 20, 3)
    assert lm.clean_logs() == 1 and len(records_of(c)) == 20
    lm.delete_logs([("c", 0)])
    fill_dups(b, 20, 1)
    assert lm.clean_logs() == 1 and len(records_of(b)) == 20


def test_min_cleanable_ratio_and_max_compaction_lag_per_topic(tmp_path):
    clock = MockClock()
    lazy = LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0, segment_bytes=16 * 1024,
                     passthrough={"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "60000"})
    lm = manager(tmp_path, clock, {"lazy": lazy})
    log = lm.get_or_create_log(("lazy", 0))
    fill_dups(log, 20, 2)
    lm.cleaner.clean(log)
    fill_dups(log, 20, 1)
    assert lm.clean_logs() == 0                      # ratio below 0.99
    clock.advance(60_019)
    assert lm.clean_logs() == 0
    clock.advance(1)                                 # the dirty segment's first batch is now past the max lag
    assert lm.clean_logs() == 1
    assert len(records_of(log)) == 20


def test_retention_applies_only_to_delete_policies_and_both_to_compact_delete(tmp_path):
    clock = MockClock()
    compact = LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0, segment_bytes=16 * 1024,
                        retention_ms=HOUR)
    both = LogConfig(cleanup_policy=("compact", "delete"), file_delete_delay_ms=0, segment_bytes=16 * 1024,
                     retention_ms=HOUR)
    lm = manager(tmp_path, clock, {"c": compact, "cd": both}, min_cleanable_ratio=0.01)
    c, cd = lm.get_or_create_log(("c", 0)), lm.get_or_create_log(("cd", 0))
    for log in (c, cd):
        fill_dups(log, 20, 3)                        # old data, timestamps T0
    clock.advance(2 * HOUR)
    for log in (c, cd):
        append_kv(log, [(k(i), b"new") for i in range(5)], timestamp=clock.now_ms())
        seal(log)
    lm.cleanup_logs()
    assert len(records_of(c)) == 65                  # compact only: retention by time does not apply
    assert len(records_of(cd)) == 5                  # compact,delete: the old segments went by retention.ms
    assert lm.clean_logs() == 2
    assert len(records_of(c)) == 20
    assert {key: v for _, key, v in records_of(cd)} == {k(i): b"new" for i in range(5)}


def test_checkpoint_survives_a_restart_and_deleted_logs_leave_it(tmp_path):
    clock = MockClock()
    compact = LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0, segment_bytes=16 * 1024)
    lm = manager(tmp_path, clock, {"a": compact, "b": compact})
    a, b = lm.get_or_create_log(("a", 0)), lm.get_or_create_log(("b", 0))
    fill_dups(a, 10, 3)
    fill_dups(b, 10, 3)
    assert lm.clean_logs() == 2
    lm.delete_logs([("b", 0)])
    path = str(tmp_path / "data" / CLEANER_OFFSET_CHECKPOINT)
    assert OffsetCheckpointFile(path).read() == {("a", 0): 30}
    lm.shutdown()
    again = manager(tmp_path, clock, {"a": compact})
    log = again.get_log(("a", 0))
    assert again.cleaner.checkpoint_offset(log) == 30
    log.update_high_watermark(log.log_end_offset)
    assert again.clean_logs() == 0                   # nothing dirty
    assert len(records_of(log)) == 10


def test_a_crash_after_an_empty_cleaned_segment_became_swap(tmp_path, monkeypatch):
    """The first group's records are all superseded: its cleaned segment is empty; the crash leaves that
    empty `.swap` next to the old segment with the same base offset."""
    log = make_log(tmp_path, segment_bytes=2500)
    writes = []
    for round_ in range(3):
        items = [(k(i), b"r%d" % round_ + b"." * 40) for i in range(40)]
        first = append_kv(log, items)
        writes.extend((first + j, key, value) for j, (key, value) in enumerate(items))
        log.roll()
    seal(log)
    crashing_renames(monkeypatch, 1)
    with pytest.raises(SimulatedCrash):
        cleaner_for(log).clean(log)
    monkeypatch.undo()
    assert os.path.getsize(os.path.join(log.dir, "00000000000000000000.log.swap")) == 0
    reopened = Log(log.dir, log.config, clock=log._clock, had_clean_shutdown=False)
    assert temp_files(reopened) == [] and [s.base_offset for s in reopened.segments] == [0, 40, 80, 120]
    assert reopened.segments[0].size == 0
    check_consistent(reopened)
    assert latest(records_of(reopened)) == latest(writes) and len(records_of(reopened)) == 80


def test_rebuilt_batches_keep_headers_and_log_append_time(tmp_path):
    log = make_log(tmp_path)
    append(log, kv_batch(0, [(k(1), b"a"), (k(2), b"a"), (k(3), b"a")], headers=[("h", b"1"), ("e", None)]))
    append(log, kv_batch(3, [(k(4), b"a"), (k(5), b"a")], log_append_time=T0 + 500, codec=1))
    append_kv(log, [(k(2), b"b"), (k(4), b"b")])
    seal(log)
    cleaner_for(log).clean(log)
    (first, e1), (second, e2), _ = entries_of(log)
    [r1, r3] = v2_records(first, 0, e1.size, 10 ** 6)
    assert [(r.offset, r.headers) for r in (r1, r3)] == [(0, [("h", b"1"), ("e", None)]),
                                                         (2, [("h", b"1"), ("e", None)])]
    h = V2_HEADER.unpack_from(second)
    assert h[5] & 0x08 and h[5] & 0x07 == 1 and h[8] == T0 + 500       # LogAppendTime, gzip, max timestamp
    [r5] = v2_records(second, 0, e2.size, 10 ** 6)
    assert (r5.offset, r5.key, r5.timestamp) == (4, k(5), T0 + 500)


# ---- transactions ------------------------------------------------------------------------------------------------

def test_aborted_transactions_are_removed_and_never_shadow_committed_values(tmp_path):
    from kbroker.log.producer_state import CompletedTxn
    clock = MockClock()
    log = make_log(tmp_path, clock, overrides={"delete.retention.ms": "1000"})
    append_kv(log, [(k(1), b"committed")])                                                      # 0
    append(log, kv_batch(1, [(k(1), b"aborted"), (k(2), b"aborted")], producer_id=7, producer_epoch=0,
                         base_sequence=0, transactional=True))                                   # 1-2
    append(log, kv_batch(3, [(k(3), b"txn-ok")], producer_id=8, producer_epoch=0, base_sequence=0,
                         transactional=True))                                                    # 3
    append(log, control_batch(4, 7, commit=False))                                               # 4
    log.add_aborted_txn(CompletedTxn(7, 1, 4, True, 3))
    append(log, control_batch(5, 8, commit=True))                                                # 5
    append(log, kv_batch(6, [(k(4), b"later")], producer_id=7, producer_epoch=0, base_sequence=2,
                         transactional=True))                                                    # 6: pid 7 again
    append(log, control_batch(7, 7, commit=True))                                                # 7
    append_kv(log, [(k(9), b"x")])                                                               # 8
    seal(log)
    cleaner = cleaner_for(log)
    stats = cleaner.clean(log)
    assert stats.aborted_removed == 2
    assert [(o, key, v) for o, key, v in records_of(log)] == [
        (0, k(1), b"committed"), (3, k(3), b"txn-ok"), (6, k(4), b"later"), (8, k(9), b"x")]
    # the ABORT marker stays (its data was met in this cleaning) with its .txnindex entry, in the cleaned segment
    markers = [e.base_offset for _, e in entries_of(log) if e.attributes & CONTROL_MASK]
    assert markers == [4, 5, 7]
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in log.collect_aborted_txns(0, 100)] == [(7, 1, 4)]
    # past delete.retention.ms, the next cleaning meets no data of the aborted transaction: its marker goes
    clock.advance(1000)
    append_kv(log, [(k(8), b"y")], timestamp=clock.now_ms())
    seal(log)
    cleaner.clean(log)
    assert [e.base_offset for _, e in entries_of(log) if e.attributes & CONTROL_MASK] == [5, 7]
    assert log.collect_aborted_txns(0, 100) == []


def test_the_dirty_section_stops_at_the_last_stable_offset(tmp_path):
    log = make_log(tmp_path)
    append_kv(log, [(k(1), b"a")])
    append_kv(log, [(k(1), b"b")])
    append_kv(log, [(k(1), b"c")])
    log.roll()
    append_kv(log, [(k(2), b"d")])
    seal(log)
    log.first_unstable_offset = lambda: 1          # a transaction open from offset 1
    stats = cleaner_for(log).clean(log)
    assert stats is None or stats.end_offset <= 1
    assert [v for _, _, v in records_of(log)] == [b"a", b"b", b"c", b"d"]
    log.first_unstable_offset = lambda: None
    assert cleaner_for(log).clean(log).end_offset == 4
    assert [v for _, _, v in records_of(log)] == [b"c", b"d"]


def test_a_committed_transactions_last_batch_kept_empty_keeps_its_marker(tmp_path):
    """The producer's last batch is transactional and all its records are superseded: it stays as an empty
    batch for the producer state, so its COMMIT marker stays too, or a reload would see an open transaction."""
    from kbroker.log.producer_state import ProducerStateManager
    clock = MockClock()
    log = make_log(tmp_path, clock, overrides={"delete.retention.ms": "0"})
    append(log, kv_batch(0, [(k(1), b"t")], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True))
    append(log, control_batch(1, 5, commit=True))
    append_kv(log, [(k(1), b"plain")])
    seal(log)
    cleaner = cleaner_for(log)
    for _ in range(2):
        clock.advance(10)
        cleaner.clean(log)
        append_kv(log, [(k(2), b"x")], timestamp=clock.now_ms())
        seal(log)
    kinds = [(e.base_offset, e.record_count, bool(e.attributes & CONTROL_MASK)) for _, e in entries_of(log)]
    assert kinds[:3] == [(0, 0, False), (1, 1, True), (2, 1, False)]
    state = ProducerStateManager(log.dir)
    state.replay(log, log.log_start_offset, log.log_end_offset)
    assert state.ongoing == {} and state.first_unstable_offset(log.high_watermark) is None
