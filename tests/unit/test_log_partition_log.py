"""kbroker.log.log.Log: appends and reads across rolls (size, time, full index, offset overflow), reads at and
beyond the ends, timestamp lookups, recovery after crashes (torn tail, garbage, flipped byte, missing or corrupt
index) and what it logs, retention (time, size, log start offset, high watermark) with the async `.deleted`
rename, truncation, flushing and the leader epoch checkpoint."""
import logging
import os
import struct

import gevent
import pytest

from kbroker.clock import MockClock
from kbroker.log.config import LogConfig
from kbroker.log.errors import OffsetOutOfRange, RecordBatchTooLarge, UnexpectedAppendOffset
from kbroker.log.log import OFF_HUB_WRITE_BYTES, AppendLock, Log, parse_topic_partition
from kbroker.log.segment import OffsetAndTimestamp

from .test_log_batches import T0, append_batch, fill, legacy_messages, v2_batch


def make_log(tmp_path, clock=None, name="orders-0", **config):
    config.setdefault("file_delete_delay_ms", 0)
    kw = {k: config.pop(k) for k in ("recovery_point", "log_start_offset") if k in config}
    clean = config.pop("clean", True)
    run_blocking = config.pop("run_blocking", None)
    return Log(str(tmp_path / name), LogConfig(**config), clock=clock or MockClock(), had_clean_shutdown=clean,
               run_blocking=run_blocking, **kw)


def reopen(log, clean, **kw):
    return Log(log.dir, log.config, clock=log._clock, had_clean_shutdown=clean, **kw)


def batch_base(data: bytes) -> int:
    return struct.unpack_from(">q", data)[0]


def files(log):
    return sorted(os.listdir(log.dir))


def test_parse_topic_partition():
    assert parse_topic_partition("orders-3") == ("orders", 3)
    assert parse_topic_partition("my-topic-with-dashes-12") == ("my-topic-with-dashes", 12)
    assert parse_topic_partition("t-1.0123456789abcdef0123456789abcdef-delete") == ("t", 1)
    for bad in ("orders", "orders-", "-1", "orders-x", "t-1-delete"):
        with pytest.raises(ValueError):
            parse_topic_partition(bad)


def test_append_and_read_every_offset_across_size_rolls(tmp_path):
    log = make_log(tmp_path, segment_bytes=2000, index_interval_bytes=300)
    batches = fill(log, 40, count=3, value_size=40)
    assert log.log_end_offset == 120 and len(log.segments) >= 5
    assert all(s.size <= 2000 for s in log.segments)
    assert [s.base_offset for s in log.segments] == sorted({s.base_offset for s in log.segments})
    for offset in range(120):
        data = log.read(offset, 150).records.read()
        assert data[:len(batches[offset // 3])] == batches[offset // 3]
    # a read that starts in one segment stops at its end (Kafka reads one segment at a time)
    first = log.segments[0]
    last_offset = log.segments[1].base_offset - 1
    got = log.read(last_offset, 10 ** 6).records.read()
    assert batch_base(got) == last_offset - 2 and len(got) == len(batches[last_offset // 3])
    # the segment files are Kafka's
    assert "00000000000000000000.log" in files(log)
    assert "%020d.timeindex" % log.segments[1].base_offset in files(log)
    assert first.offset_index.entries > 0 and os.path.getsize(first.offset_index.path) == 8 * first.offset_index.entries


def test_roll_by_time_from_the_first_batch_timestamp(tmp_path):
    clock = MockClock()
    log = make_log(tmp_path, clock, segment_ms=1000)
    append_batch(log, 0, 2, clock.now_ms())
    clock.advance(600)
    append_batch(log, 2, 2, clock.now_ms())
    assert len(log.segments) == 1
    clock.advance(500)
    append_batch(log, 4, 2, clock.now_ms())                # 1101 ms after the first batch's max timestamp
    assert [s.base_offset for s in log.segments] == [0, 4]
    # a batch timestamped far ahead rolls even though the clock did not move
    append_batch(log, 6, 2, clock.now_ms() + 5000)
    assert [s.base_offset for s in log.segments] == [0, 4, 6]


def test_roll_when_an_index_is_full(tmp_path):
    # index.interval.bytes 0: an index entry at every append after the first; 5 offset slots, 3 time slots
    log = make_log(tmp_path, index_interval_bytes=0, segment_index_bytes=40)
    for i in range(12):
        append_batch(log, 2 * i, 2, T0 + 10 * i)
    assert len(log.segments) > 2 and log.size < 10000
    for segment in log.segments[:-1]:
        assert segment.time_index.entries <= segment.time_index.max_entries
        assert os.path.getsize(segment.offset_index.path) == 8 * segment.offset_index.entries   # trimmed
    assert all(log.read(o, 100).records.read() for o in range(24))


def test_roll_on_relative_offset_overflow(tmp_path):
    log = make_log(tmp_path)
    append_batch(log, 0, 1)
    far = 2 ** 31 + 5                                       # a gap (a compacted topic's follower)
    append_batch(log, far, 2)
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 2
    assert batch_base(log.read(1, 100).records.read()) == far      # offsets in the gap read the next batch


def test_append_rejects_offsets_below_the_end_and_batches_above_the_segment_size(tmp_path):
    log = make_log(tmp_path, segment_bytes=500)
    append_batch(log, 0, 3)
    with pytest.raises(UnexpectedAppendOffset):
        append_batch(log, 2, 3)
    with pytest.raises(RecordBatchTooLarge):
        append_batch(log, 3, 5, value_size=200)
    assert log.log_end_offset == 3


def test_min_one_message_with_a_huge_first_batch(tmp_path):
    log = make_log(tmp_path)
    huge = append_batch(log, 0, 10, value_size=10000)
    append_batch(log, 10, 1)
    info = log.read(0, 500)
    assert info.records.read() == huge
    info = log.read(0, 500, min_one_message=False)
    assert info.first_entry_incomplete and info.records.length == 500


def test_reads_at_and_beyond_the_ends(tmp_path):
    log = make_log(tmp_path)
    batches = fill(log, 4, count=5)
    log.update_high_watermark(10)
    assert log.read(20, 100).records.length == 0                    # at the log end offset: empty
    assert log.read(20, 100).fetch_offset_metadata.message_offset == 20
    with pytest.raises(OffsetOutOfRange):
        log.read(21, 100)                                           # beyond it
    assert log.read(12, 10 ** 6, max_offset=10).records.length == 0     # beyond the high watermark: empty
    assert log.read(10, 10 ** 6, max_offset=10).records.length == 0
    got = log.read(0, 10 ** 6, max_offset=log.high_watermark).records.read()
    assert got == batches[0] + batches[1]                          # only below the high watermark
    assert log.read(0, 10 ** 6, max_offset=12).records.read() == batches[0] + batches[1]
    log.maybe_increment_log_start_offset(5)
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100)
    assert batch_base(log.read(5, 100).records.read()) == 5


def test_high_watermark_is_clamped(tmp_path):
    log = make_log(tmp_path)
    fill(log, 2, count=5)
    assert log.high_watermark == 0
    assert log.update_high_watermark(99) == 10
    log.maybe_increment_log_start_offset(4)
    assert log.update_high_watermark(1) == 4
    with pytest.raises(OffsetOutOfRange):
        log.maybe_increment_log_start_offset(5)                    # above the high watermark


def test_fetch_offset_by_timestamp_across_segments(tmp_path):
    log = make_log(tmp_path, segment_bytes=1000, index_interval_bytes=100)
    for i in range(20):
        append_batch(log, 4 * i, 4, timestamps=[T0 + 1000 * i + 10 * j for j in range(4)], epoch=3)
    assert len(log.segments) > 2
    assert log.fetch_offset_by_timestamp(T0 + 7020) == OffsetAndTimestamp(30, T0 + 7020, 3)
    assert log.fetch_offset_by_timestamp(T0 + 7021) == OffsetAndTimestamp(31, T0 + 7030, 3)
    assert log.fetch_offset_by_timestamp(T0 + 7500) == OffsetAndTimestamp(32, T0 + 8000, 3)
    assert log.fetch_offset_by_timestamp(0) == OffsetAndTimestamp(0, T0, 3)
    assert log.fetch_offset_by_timestamp(T0 + 10 ** 7) is None
    assert log.fetch_offset_by_timestamp(-1) == OffsetAndTimestamp(80, -1, 3)   # latest
    assert log.fetch_offset_by_timestamp(-2) == OffsetAndTimestamp(0, -1, 3)    # earliest
    log.update_high_watermark(80)
    log.maybe_increment_log_start_offset(30)
    assert log.fetch_offset_by_timestamp(0) == OffsetAndTimestamp(30, T0 + 7020, 3)
    assert log.fetch_offset_by_timestamp(-2).offset == 30


# ---- recovery ----------------------------------------------------------------------------------------------


def crashed_log(tmp_path, batches=12, **config):
    """A log of three segments whose broker died: nothing flushed, no clean shutdown."""
    log = make_log(tmp_path, segment_bytes=1200, index_interval_bytes=200, **config)
    data = fill(log, batches, count=3, value_size=60)
    assert len(log.segments) == 3
    return log, data


def recovery_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "kbroker.log" and "recovered segment" in r.getMessage()]


def test_recovery_after_a_torn_tail(tmp_path, caplog):
    log, data = crashed_log(tmp_path)
    last = log.active_segment
    torn = len(data[-1]) // 3
    os.truncate(last.log_path, last.size - torn)
    with caplog.at_level(logging.INFO, logger="kbroker.log"):
        recovered = reopen(log, clean=False)
    assert recovered.log_end_offset == 33
    assert recovered.read(30, 10 ** 6).records.read() == data[10]
    truncating = [line for line in recovery_lines(caplog) if "truncated 0 bytes" not in line]
    assert len(truncating) == 1
    assert "%020d.log" % last.base_offset in truncating[0]
    assert f"truncated {len(data[-1]) - torn} bytes" in truncating[0]
    append_batch(recovered, 33, 3)                                  # appends continue at the new end
    assert recovered.read(33, 100).records.read()[:8] == struct.pack(">q", 33)


def test_recovery_after_appended_garbage(tmp_path, caplog):
    log, data = crashed_log(tmp_path)
    with open(log.active_segment.log_path, "ab") as f:
        f.write(os.urandom(300))
    with caplog.at_level(logging.INFO, logger="kbroker.log"):
        recovered = reopen(log, clean=False)
    assert recovered.log_end_offset == 36
    assert any("truncated 300 bytes" in line for line in recovery_lines(caplog))


def test_recovery_truncates_at_a_flipped_byte_and_drops_later_segments(tmp_path, caplog):
    log, data = crashed_log(tmp_path)
    middle = log.segments[1]
    mid_batch = middle.read(middle.base_offset + 3, 10 ** 6)        # the second batch of the middle segment
    position = mid_batch.records.position + 70
    with open(middle.log_path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x01]))
    later = log.segments[2].base_offset
    with caplog.at_level(logging.INFO, logger="kbroker.log"):
        recovered = reopen(log, clean=False)
    assert recovered.log_end_offset == middle.base_offset + 3
    assert [s.base_offset for s in recovered.segments] == [0, middle.base_offset]
    assert "%020d.log" % later not in files(recovered)                 # deleted (no delay in this test)
    lines = [line for line in recovery_lines(caplog) if "truncated 0 bytes" not in line]
    assert len(lines) == 1 and "%020d.log" % middle.base_offset in lines[0]
    assert f"at byte {mid_batch.records.position}" in lines[0]


def test_recovery_starts_at_the_recovery_point(tmp_path):
    log, data = crashed_log(tmp_path)
    first = log.segments[0]
    with open(first.log_path, "r+b") as f:               # corruption below the recovery point goes unseen,
        f.seek(100)                                      # as in Kafka: those segments were flushed
        f.write(b"\xee")
    recovered = reopen(log, clean=False, recovery_point=log.segments[1].base_offset)
    assert recovered.log_end_offset == 36
    recovered = reopen(log, clean=False, recovery_point=0)
    assert recovered.log_end_offset < log.segments[1].base_offset


def test_clean_shutdown_skips_recovery(tmp_path, caplog):
    log, data = crashed_log(tmp_path)
    log.close()
    with caplog.at_level(logging.INFO, logger="kbroker.log"):
        reopened = reopen(log, clean=True)
    assert recovery_lines(caplog) == []
    assert reopened.log_end_offset == 36 and reopened.recovery_point == 36
    assert all(reopened.read(o, 10 ** 6).records.read()[:len(data[o // 3])] == data[o // 3] for o in range(36))


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("damage", ["missing offset index", "missing time index", "garbage index", "zeroed index"])
def test_missing_or_corrupt_index_is_rebuilt(tmp_path, caplog, damage, clean):
    log, data = crashed_log(tmp_path)
    log.close()
    segment = log.segments[1]
    if damage == "missing offset index":
        os.unlink(segment.offset_index.path)
    elif damage == "missing time index":
        os.unlink(segment.time_index.path)
    elif damage == "garbage index":
        with open(segment.offset_index.path, "ab") as f:
            f.write(b"\x01\x02\x03")
    else:
        with open(segment.offset_index.path, "r+b") as f:
            f.write(struct.pack(">ii", 2 ** 30, 5))       # the first entry now above the last
    with caplog.at_level(logging.INFO, logger="kbroker.log"):   # unclean: a segment below the recovery point
        reopened = reopen(log, clean=clean, recovery_point=log.segments[2].base_offset)
    assert any("rebuilding the indexes" in r.getMessage() for r in caplog.records)
    rebuilt = reopened.segments[1]
    assert rebuilt.offset_index.entries > 0 and rebuilt.time_index.entries > 0
    rebuilt.sanity_check()
    assert all(reopened.read(o, 10 ** 6).records.read()[:8] == struct.pack(">q", o - o % 3) for o in range(36))


def test_stray_temporary_files_are_deleted_on_load(tmp_path):
    log, _ = crashed_log(tmp_path)
    log.close()
    for name in ("00000000000000000003.log.deleted", "00000000000000000099.log.cleaned",
                 "00000000000000000099.index.swap", "00000000000000000500.index"):
        open(os.path.join(log.dir, name), "wb").close()
    reopened = reopen(log, clean=True)
    assert all(not n.endswith((".deleted", ".cleaned", ".swap")) for n in files(reopened))
    assert "00000000000000000500.index" not in files(reopened)        # an orphaned index
    assert reopened.log_end_offset == 36


def test_interrupted_swap_is_completed(tmp_path):
    """A cleaner crashed after retiring the old segment: its replacement is only in `.log.swap`."""
    log = make_log(tmp_path, segment_bytes=1200)
    data = fill(log, 12, count=3, value_size=60)
    log.close()
    first = log.segments[0]
    next_base = log.segments[1].base_offset
    os.rename(first.log_path, first.log_path + ".swap")
    for path in (first.offset_index.path, first.time_index.path):
        os.rename(path, path + ".deleted")
    reopened = reopen(log, clean=True)
    assert [s.base_offset for s in reopened.segments][:2] == [0, next_base]
    assert not any(n.endswith((".swap", ".deleted")) for n in files(reopened))
    assert reopened.read(0, 10 ** 6).records.read()[:len(data[0])] == data[0]


# ---- retention -----------------------------------------------------------------------------------------------


def aged_log(tmp_path, clock, **config):
    """Three segments of four batches each, a minute apart; the last batch has the newest timestamp."""
    log = make_log(tmp_path, clock, segment_bytes=4 * len(v2_batch(0, 2, value_size=50)), **config)
    for i in range(12):
        append_batch(log, 2 * i, 2, T0 + 60_000 * i, value_size=50)
    assert [s.base_offset for s in log.segments] == [0, 8, 16]
    return log


def test_retention_by_time_renames_then_deletes_after_the_delay(tmp_path):
    clock = MockClock(now_ms=T0 + 11 * 60_000)
    log = aged_log(tmp_path, clock, retention_ms=5 * 60_000, file_delete_delay_ms=60_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 1                 # segment 0's newest record is 8 minutes old
    assert [s.base_offset for s in log.segments] == [8, 16] and log.log_start_offset == 8
    assert "00000000000000000000.log.deleted" in files(log) and "00000000000000000000.log" not in files(log)
    clock.advance(59_999)
    assert log.delete_pending_segments() == 0
    clock.advance(1)
    assert log.delete_pending_segments() == 1
    assert not any(n.startswith("00000000000000000000") for n in files(log))
    with pytest.raises(OffsetOutOfRange):
        log.read(7, 100)


def test_retention_by_time_rolls_the_active_segment_when_everything_expired(tmp_path):
    clock = MockClock(now_ms=T0 + 100 * 60_000)
    log = aged_log(tmp_path, clock, retention_ms=60_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 3
    assert [s.base_offset for s in log.segments] == [24] and log.active_segment.size == 0
    assert log.log_start_offset == 24 == log.log_end_offset
    # the snapshots the rolls at 8 and 16 took went with their segments; the roll at 24 took one
    assert files(log) == ["00000000000000000024.index", "00000000000000000024.log", "00000000000000000024.snapshot",
                          "00000000000000000024.timeindex", "leader-epoch-checkpoint"]
    assert log.delete_old_segments() == 0                  # an empty active segment is never deleted
    append_batch(log, 24, 2, clock.now_ms())
    assert log.read(24, 100).records.read()[:8] == struct.pack(">q", 24)


def test_retention_only_below_the_high_watermark(tmp_path):
    clock = MockClock(now_ms=T0 + 100 * 60_000)
    log = aged_log(tmp_path, clock, retention_ms=60_000)
    assert log.delete_old_segments() == 0                  # high watermark 0
    log.update_high_watermark(16)
    assert log.delete_old_segments() == 2                  # not the segment holding the high watermark
    assert [s.base_offset for s in log.segments] == [16]


def test_retention_forever(tmp_path):
    clock = MockClock(now_ms=T0 + 10 ** 12)
    log = aged_log(tmp_path, clock, retention_ms=-1)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0


def test_retention_by_size(tmp_path):
    clock = MockClock()
    log = aged_log(tmp_path, clock, retention_ms=-1)
    sizes = [s.size for s in log.segments]
    log.update_high_watermark(log.log_end_offset)
    log.update_config(LogConfig(**{**log.config.__dict__, "retention_bytes": sum(sizes) - sizes[0]}))
    assert log.delete_old_segments() == 1                  # deleting the oldest brings it to the limit
    assert [s.base_offset for s in log.segments] == [8, 16]
    assert log.delete_old_segments() == 0


def test_retention_below_the_log_start_offset_even_when_compacted(tmp_path):
    clock = MockClock()
    log = aged_log(tmp_path, clock, retention_ms=-1, cleanup_policy=("compact",))
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(9)                # DeleteRecords
    assert log.delete_old_segments() == 1                  # segment 0 is wholly below 9; segment 8 is not
    assert [s.base_offset for s in log.segments] == [8, 16] and log.log_start_offset == 9
    with pytest.raises(OffsetOutOfRange):
        log.read(8, 100)


def test_readers_keep_their_snapshot_while_segments_are_deleted(tmp_path):
    clock = MockClock(now_ms=T0 + 100 * 60_000)
    log = aged_log(tmp_path, clock, retention_ms=60_000, file_delete_delay_ms=60_000)
    log.update_high_watermark(log.log_end_offset)
    snapshot = log.segments
    info = log.read(0, 10 ** 6)
    log.delete_old_segments()
    assert len(snapshot) == 3 and log.segments != snapshot
    assert info.records.read()[:8] == struct.pack(">q", 0)   # still readable until the delay passes


# ---- truncation, flushing, epochs ----------------------------------------------------------------------------


def test_truncate_to_and_truncate_fully(tmp_path):
    log = make_log(tmp_path, segment_bytes=1200)
    data = fill(log, 12, count=3, value_size=60)
    log.update_high_watermark(36)
    bases = [s.base_offset for s in log.segments]
    assert not log.truncate_to(36)
    assert log.truncate_to(bases[1] + 3)
    assert log.log_end_offset == bases[1] + 3 and log.high_watermark == bases[1] + 3
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert "%020d.log" % bases[2] not in files(log)
    append_batch(log, bases[1] + 3, 3)
    assert log.read(bases[1] + 3, 100).records.read()[:8] == struct.pack(">q", bases[1] + 3)
    assert log.read(0, 10 ** 6).records.read()[:len(data[0])] == data[0]
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert files(log) == ["00000000000000000500.index", "00000000000000000500.log",
                          "00000000000000000500.timeindex", "leader-epoch-checkpoint"]
    append_batch(log, 500, 1)
    assert log.log_end_offset == 501


def test_flush_messages_and_the_flush_after_a_roll_go_through_run_blocking(tmp_path):
    calls = []

    def run_blocking(fn):
        calls.append(fn)
        return fn()
    log = make_log(tmp_path, flush_messages=5, segment_bytes=600, run_blocking=run_blocking)
    append_batch(log, 0, 3)
    assert log.recovery_point == 0 and not calls
    append_batch(log, 3, 3)
    assert log.recovery_point == 6 and len(calls) == 1
    log2 = make_log(tmp_path, name="other-0", segment_bytes=600, run_blocking=run_blocking)
    calls.clear()
    fill(log2, 6, count=3, value_size=60)
    assert len(log2.segments) > 1 and log2.recovery_point == 0 and not calls
    assert log2.maybe_flush() and log2.recovery_point == log2.active_segment.base_offset and calls
    assert not log2.maybe_flush()


def test_flush_ms_flushes_on_append(tmp_path):
    clock = MockClock()
    log = make_log(tmp_path, clock, flush_ms=1000)
    append_batch(log, 0, 2)
    assert log.recovery_point == 0
    clock.advance(1000)
    append_batch(log, 2, 2)
    assert log.recovery_point == 4


def test_leader_epochs_are_checkpointed_from_appended_batches(tmp_path):
    log = make_log(tmp_path)
    append_batch(log, 0, 5, epoch=3)
    append_batch(log, 5, 5, epoch=3)
    append_batch(log, 10, 5, epoch=5)
    path = os.path.join(log.dir, "leader-epoch-checkpoint")
    assert open(path).read() == "0\n2\n3 0\n5 10\n"
    assert log.end_offset_for_epoch(3) == (3, 10)
    assert log.end_offset_for_epoch(5) == (5, 15)
    log.truncate_to(10)
    assert open(path).read() == "0\n1\n3 0\n"
    data = legacy_messages(1, 10, 2)
    log.append(data, 10, 11, T0 + 1, 11, 2)                 # a v0/v1 append clears the cache, as Kafka
    assert open(path).read() == "0\n0\n"


def test_epochs_are_rebuilt_by_recovery(tmp_path):
    log = make_log(tmp_path)
    append_batch(log, 0, 5, epoch=1)
    append_batch(log, 5, 5, epoch=2)
    os.unlink(os.path.join(log.dir, "leader-epoch-checkpoint"))
    reopened = reopen(log, clean=False)
    assert reopened.leader_epoch_cache.entries == [(1, 0), (2, 5)]


def test_records_appended_counts_records(tmp_path):
    log = make_log(tmp_path)
    fill(log, 3, count=4)
    assert log.records_appended == 12


def test_an_off_hub_write_is_invisible_until_written(tmp_path):
    """A large append's write runs through run_blocking, holding the append lock; until it returns, reads, the
    log end offset, the segment size and the index are those before the append."""
    seen = []

    def run_blocking(write):
        seen.append((log.log_end_offset, log.active_segment.size, log.read(0, 10 ** 7).records.length,
                     log.active_segment.offset_index.entries, log.append_lock.locked()))
        write()
    log = make_log(tmp_path, run_blocking=run_blocking, index_interval_bytes=1)
    small = append_batch(log, 0, 3)
    assert seen == []   # below OFF_HUB_WRITE_BYTES: written in place
    big = append_batch(log, 3, 300, value_size=1024)
    assert len(big) >= OFF_HUB_WRITE_BYTES
    assert seen == [(3, len(small), len(small), 0, True)]
    assert (log.log_end_offset, log.active_segment.size) == (303, len(small) + len(big))
    assert log.read(3, 10 ** 7).records.read() == big
    assert log.active_segment.offset_index.entries == 1


def test_the_append_lock_is_reentrant_and_queues_other_greenlets():
    """Its semaphore is made only at the first contention: each greenlet, re-entering it and yielding inside,
    still keeps the others out until its last release; a release by a greenlet not holding it is refused."""
    lock = AppendLock()
    order = []

    def hold(name):
        with lock:
            with lock:
                order.append(f"{name} in")
                gevent.sleep(0)
            gevent.sleep(0)
            order.append(f"{name} out")
    gevent.joinall([gevent.spawn(hold, name) for name in "abc"])
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()


def test_a_preallocated_log_closed_unwritten_reopens_empty(tmp_path):
    """A new preallocated segment's fd is closed once the log is made (an idle replica holds none): closing the log
    must still cut the preallocated zeros, or the next clean start would take them for data."""
    log = make_log(tmp_path, preallocate=True, segment_bytes=100000)
    log.close()
    assert os.path.getsize(os.path.join(log.dir, "00000000000000000000.log")) == 0
    again = reopen(log, clean=True)
    assert again.log_end_offset == 0 and again.read(0, 1000).records.length == 0
