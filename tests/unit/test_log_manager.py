"""kbroker.log.manager.LogManager: loading log dirs, restarts with and without the clean shutdown marker,
placement of new logs, asynchronous deletion of logs, retention, checkpoints."""
import logging
import os
import struct
import threading

from kbroker.clock import MockClock
from kbroker.log import checkpoint as checkpoint_module
from kbroker.log.checkpoint import OffsetCheckpointFile
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.manager import LogManager
from kbroker.replica.partition import Partition

from .test_log_batches import T0, append_batch, fill

CONFIG = LogConfig(segment_bytes=1200, file_delete_delay_ms=1000)


def manager(dirs, clock=None, **kw):
    return LogManager([str(d) for d in dirs], kw.pop("config", CONFIG), clock or MockClock(), **kw)


def checkpoint(log_dir, name):
    return OffsetCheckpointFile(os.path.join(str(log_dir), name)).read()


def test_new_logs_go_to_the_log_dir_with_fewest_partitions(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    lm = manager([a, b])
    lm.get_or_create_log(("t", 0))
    lm.get_or_create_log(("t", 1))
    lm.get_or_create_log(("u", 0))
    assert sorted(os.listdir(a)) == ["t-0", "u-0"] and os.listdir(b) == ["t-1"]
    assert lm.get_or_create_log(("t", 1)) is lm.get_log(("t", 1))
    assert lm.get_log(("t", 9)) is None
    assert sorted(os.listdir(a / "t-0")) == ["00000000000000000000.index", "00000000000000000000.log",
                                             "00000000000000000000.timeindex", "leader-epoch-checkpoint"]


def test_clean_restart(tmp_path, caplog):
    lm = manager([tmp_path])
    log = lm.get_or_create_log(("orders-eu", 2))
    data = fill(log, 12, count=3, value_size=60)
    log.update_high_watermark(30)
    lm.shutdown()
    assert os.path.exists(tmp_path / ".kafka_cleanshutdown")
    assert checkpoint(tmp_path, "recovery-point-offset-checkpoint") == {("orders-eu", 2): 36}
    assert checkpoint(tmp_path, "replication-offset-checkpoint") == {("orders-eu", 2): 30}
    with caplog.at_level(logging.INFO, logger="kbroker.log"):
        lm2 = manager([tmp_path])
    assert not os.path.exists(tmp_path / ".kafka_cleanshutdown")      # removed at once: a crash now is unclean
    assert not [r for r in caplog.records if "recovered segment" in r.getMessage()]
    log2 = lm2.get_log(("orders-eu", 2))
    assert (log2.log_end_offset, log2.recovery_point, log2.high_watermark) == (36, 36, 30)
    assert log2.read(0, 10 ** 6).records.read()[:len(data[0])] == data[0]


def test_unclean_restart_recovers_from_the_recovery_point(tmp_path, caplog):
    lm = manager([tmp_path])
    log = lm.get_or_create_log(("t", 0))
    data = fill(log, 12, count=3, value_size=60)
    log.flush(log.segments[1].base_offset)
    lm.checkpoint_recovery_points()
    active = log.active_segment
    os.truncate(active.log_path, active.size - 10)                  # the crash tore the last batch
    with caplog.at_level(logging.INFO, logger="kbroker.log"):
        lm2 = manager([tmp_path])                                   # no clean shutdown marker
    recovered = [r.getMessage() for r in caplog.records if "recovered segment" in r.getMessage()]
    assert len(recovered) == 2                                      # segments 1 and 2, not 0
    assert not any("00000000000000000000.log" in line for line in recovered)
    assert any("%020d.log: truncated %d bytes" % (active.base_offset, len(data[-1]) - 10) in line
               for line in recovered)
    assert lm2.get_log(("t", 0)).log_end_offset == 33


def test_malformed_checkpoint_is_ignored_and_recovery_starts_at_zero(tmp_path, caplog):
    lm = manager([tmp_path])
    fill(lm.get_or_create_log(("t", 0)), 12, count=3, value_size=60)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n5\nbroken\n")
    with caplog.at_level(logging.INFO, logger="kbroker.log"):
        lm2 = manager([tmp_path])
    assert any("recovery-point-offset-checkpoint" in r.getMessage() for r in caplog.records)
    assert len([r for r in caplog.records if "recovered segment" in r.getMessage()]) == 3
    assert lm2.get_log(("t", 0)).log_end_offset == 36


def test_delete_log_renames_then_deletes_after_the_delay(tmp_path):
    clock = MockClock()
    lm = manager([tmp_path], clock)
    fill(lm.get_or_create_log(("gone", 0)), 3)
    fill(lm.get_or_create_log(("kept", 0)), 3)
    lm.checkpoint_recovery_points()
    assert set(checkpoint(tmp_path, "recovery-point-offset-checkpoint")) == {("gone", 0), ("kept", 0)}
    removed = lm.delete_logs([("gone", 0)])[("gone", 0)]
    assert lm.get_log(("gone", 0)) is None
    [renamed] = [n for n in os.listdir(tmp_path) if n.startswith("gone-0.")]
    assert renamed.endswith("-delete") and len(renamed) == len("gone-0.") + 32 + len("-delete")
    assert removed.dir == str(tmp_path / renamed)
    assert set(checkpoint(tmp_path, "recovery-point-offset-checkpoint")) == {("kept", 0)}
    clock.advance(999)
    lm.delete_pending_files()
    assert os.path.exists(tmp_path / renamed)
    clock.advance(1)
    lm.delete_pending_files()
    assert not os.path.exists(tmp_path / renamed) and os.path.exists(tmp_path / "kept-0")


def test_many_logs_are_created_in_one_blocking_call_spread_over_the_dirs(tmp_path):
    # A LeaderAndIsr of thousands of new partitions: their directories and files are made in one run_blocking
    # call (the broker's thread pool), not on the hub one by one; placement balances the log dirs as before.
    a, b = tmp_path / "a", tmp_path / "b"
    calls = []
    lm = manager([a, b], run_blocking=lambda fn: (calls.append(fn), fn())[1])
    kept = lm.get_or_create_log(("t", 0))
    calls.clear()
    out = lm.get_or_create_logs({("t", p): (None, True) for p in range(9)})
    assert len(calls) == 1 and out[("t", 0)] is kept
    assert sorted(out) == sorted(lm.logs) and all(out[tp] is lm.get_log(tp) for tp in out)
    assert sorted(len([n for n in os.listdir(d) if n.startswith("t-")]) for d in (a, b)) == [4, 5]
    assert sorted(os.listdir(out[("t", 1)].dir)) == ["00000000000000000000.index", "00000000000000000000.log",
                                                     "00000000000000000000.timeindex", "leader-epoch-checkpoint"]


def test_deleting_a_topic_writes_each_dirs_checkpoints_once(tmp_path, monkeypatch):
    # A topic of thousands of partitions is deleted by one StopReplica: its log dirs' checkpoints (which list
    # every log of the dir) are written once for all, not once per partition, which was quadratic.
    a, b = tmp_path / "a", tmp_path / "b"
    lm = manager([a, b])
    gone = [("gone", p) for p in range(40)]
    for tp in [*gone, ("kept", 0)]:
        lm.get_or_create_log(tp)
    written = []
    original = OffsetCheckpointFile.write
    monkeypatch.setattr(OffsetCheckpointFile, "write",
                        lambda self, offsets: (written.append(self.path), original(self, offsets))[1])
    assert sorted(lm.delete_logs(gone)) == gone
    assert sorted(written) == sorted(os.path.join(str(d), name) for d in (a, b)
                                     for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint"))
    assert {tp for d in (a, b) for tp in checkpoint(d, "recovery-point-offset-checkpoint")} == {("kept", 0)}
    assert sorted(lm.logs) == [("kept", 0)]


def test_delete_log_waits_for_a_leader_epoch_checkpoint_being_written(tmp_path, monkeypatch):
    """DeleteRecords moves the log start offset, which rewrites leader-epoch-checkpoint in a thread; a topic
    deletion renaming the directory meanwhile made that write fail on the vanished path (found by the fuzz
    test). The rename now waits for the write, and the checkpoint moves with the directory."""
    started, go = threading.Event(), threading.Event()
    held = []

    def write_checkpoint(path, lines, *args):   # once armed, the write waits with its path already chosen
        if held:
            started.set()
            go.wait(5)
        original(path, lines, *args)
    original = checkpoint_module.write_checkpoint
    monkeypatch.setattr(checkpoint_module, "write_checkpoint", write_checkpoint)
    lm = manager([tmp_path])
    log = lm.get_or_create_log(("gone", 0))
    log.leader_epoch_cache.assign(0, 0)
    fill(log, 3)
    log.update_high_watermark(log.log_end_offset)
    held.append(True)
    failed = []

    def delete_records():
        try:
            log.maybe_increment_log_start_offset(4)
        except Exception as e:
            failed.append(e)
    writer = threading.Thread(target=delete_records)
    writer.start()
    assert started.wait(5)
    deleter = threading.Thread(target=lm.delete_logs, args=([("gone", 0)],))
    deleter.start()
    deleter.join(0.5)   # (without the wait, the directory is renamed by now)
    go.set()
    writer.join(5)
    deleter.join(5)
    assert failed == []
    assert log.dir.endswith("-delete")
    with open(os.path.join(log.dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n1\n0 4\n"


def test_startup_deletes_marked_dirs_and_ignores_strangers(tmp_path):
    (tmp_path / "old-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "old-0.0123456789abcdef0123456789abcdef-delete" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "meta.properties").write_text("version=0\n")
    lm = manager([tmp_path])
    assert lm.logs == {}
    assert sorted(os.listdir(tmp_path)) == ["lost+found", "meta.properties"]


def test_cleanup_logs_and_log_start_offset_checkpoint(tmp_path):
    clock = MockClock(now_ms=T0 + 3_600_000)
    lm = manager([tmp_path], clock, config=LogConfig(segment_bytes=1200, retention_ms=60_000,
                                                     file_delete_delay_ms=0))
    old = lm.get_or_create_log(("old", 0))
    fill(old, 12, count=3, value_size=60)
    old.update_high_watermark(old.log_end_offset)
    fresh = lm.get_or_create_log(("fresh", 0))
    for i in range(12):
        append_batch(fresh, 3 * i, 3, clock.now_ms(), value_size=60)
    fresh.update_high_watermark(fresh.log_end_offset)
    assert lm.cleanup_logs() == 3
    assert old.log_start_offset == 36 and len(fresh.segments) == 3
    lm.checkpoint_log_start_offsets()
    assert checkpoint(tmp_path, "log-start-offset-checkpoint") == {}     # 36 is the first segment's base offset
    fresh.maybe_increment_log_start_offset(5)
    lm.checkpoint_log_start_offsets()
    assert checkpoint(tmp_path, "log-start-offset-checkpoint") == {("fresh", 0): 5}
    lm.shutdown()
    lm2 = manager([tmp_path], clock)
    assert lm2.get_log(("fresh", 0)).log_start_offset == 5
    assert lm2.get_log(("old", 0)).log_start_offset == 36


def test_high_watermark_checkpoint_and_topic_configs(tmp_path):
    lm = manager([tmp_path], topic_configs={"big": LogConfig(segment_bytes=10 ** 6)})
    assert lm.get_or_create_log(("big", 0)).config.segment_bytes == 10 ** 6
    log = lm.get_or_create_log(("small", 0))
    assert log.config is CONFIG
    fill(log, 4)
    log.update_high_watermark(9)
    lm.checkpoint_high_watermarks({("big", 0): 0})
    assert checkpoint(tmp_path, "replication-offset-checkpoint") == {("big", 0): 0, ("small", 0): 9}
    lm.update_topic_config("small", LogConfig(retention_ms=5))
    assert log.config.retention_ms == 5


def test_high_watermark_checkpoint_follows_every_move_and_new_log(tmp_path):
    """The periodic checkpoint skips its pass when nothing moved: a move, a new log or a deleted one still
    reach the file."""
    lm = manager([tmp_path])
    log = lm.get_or_create_log(("a", 0))
    fill(log, 4)
    lm.checkpoint_high_watermarks()
    assert checkpoint(tmp_path, "replication-offset-checkpoint") == {("a", 0): 0}
    lm.checkpoint_high_watermarks()
    log.update_high_watermark(2)
    lm.checkpoint_high_watermarks()
    assert checkpoint(tmp_path, "replication-offset-checkpoint") == {("a", 0): 2}
    log.update_high_watermark(2)
    lm.get_or_create_log(("b", 0))
    lm.checkpoint_high_watermarks()
    assert checkpoint(tmp_path, "replication-offset-checkpoint") == {("a", 0): 2, ("b", 0): 0}
    lm.delete_logs([("b", 0)])
    lm.checkpoint_high_watermarks()
    assert checkpoint(tmp_path, "replication-offset-checkpoint") == {("a", 0): 2}


def test_minute_checkpoints_pass_over_the_logs_only_after_a_change(tmp_path, monkeypatch):
    """The recovery-point and log-start checkpoints look at no log while none changed (an idle broker's every
    minute), and every change still reaches the files: a flush, a log start move, a truncation, a new or deleted
    log."""
    clock = MockClock()
    lm = manager([tmp_path], clock, config=LogConfig(segment_bytes=1200, file_delete_delay_ms=0))
    log = lm.get_or_create_log(("a", 0))
    passes = []
    logs_in_dir = LogManager._logs_in_dir
    monkeypatch.setattr(LogManager, "_logs_in_dir", lambda self, d: passes.append(d) or logs_in_dir(self, d))

    def both():
        passes.clear()
        lm.checkpoint_recovery_points()
        lm.checkpoint_log_start_offsets()
        return len(passes), checkpoint(tmp_path, "recovery-point-offset-checkpoint"), \
            checkpoint(tmp_path, "log-start-offset-checkpoint")
    assert both() == (2, {("a", 0): 0}, {})
    assert both()[0] == 0
    fill(log, 12, count=3, value_size=60)           # rolls, then the flush of the rolled segments
    log.update_high_watermark(log.log_end_offset)
    lm.flush_dirty_logs()
    assert both() == (2, {("a", 0): log.active_segment.base_offset}, {})
    assert both()[0] == 0
    log.maybe_increment_log_start_offset(5)
    assert both() == (2, {("a", 0): log.active_segment.base_offset}, {("a", 0): 5})
    log.truncate_to(20)
    assert both() == (2, {("a", 0): 20}, {("a", 0): 5})
    lm.get_or_create_log(("b", 0))
    assert both() == (2, {("a", 0): 20, ("b", 0): 0}, {("a", 0): 5})
    assert both()[0] == 0
    lm.delete_logs([("b", 0)])
    assert both() == (2, {("a", 0): 20}, {("a", 0): 5})


def test_flush_dirty_logs_and_fsync_off_the_caller(tmp_path):
    calls = []

    def run_blocking(fn):
        calls.append(fn)
        return fn()
    lm = manager([tmp_path], run_blocking=run_blocking)
    log = lm.get_or_create_log(("t", 0))
    fill(log, 12, count=3, value_size=60)
    calls.clear()
    lm.flush_dirty_logs()                           # the flush after the rolls
    assert calls and log.recovery_point == log.active_segment.base_offset
    calls.clear()
    lm.shutdown()
    assert len(calls) >= 5                          # flush, close, three checkpoints, the marker
    assert struct.unpack(">q", open(log.segments[0].log_path, "rb").read(8))[0] == 0


def test_periodic_rounds_visit_only_logs_with_work_and_still_do_all_of_it(tmp_path, monkeypatch):
    # The per-second flush and deletion rounds must not visit every idle log (with 10 000 partitions that scan
    # was a sixth of an idle broker's CPU), yet whatever gives a log work later is done by the next rounds: a
    # roll's flush, retention's deletions, snapshots written by a truncation, a flush.ms brought down.
    clock = MockClock()
    lm = manager([tmp_path], clock)
    idle = [lm.get_or_create_log(("idle", p)) for p in range(20)]
    busy = lm.get_or_create_log(("busy", 0))
    visited = []
    maybe_flush = Log.maybe_flush
    monkeypatch.setattr(Log, "maybe_flush", lambda log: visited.append(log) or maybe_flush(log))

    def rounds():
        visited.clear()
        lm.flush_dirty_logs()
        lm.delete_pending_files()
        return visited
    rounds()                                        # new logs are visited once (loading may leave work)
    assert rounds() == []

    fill(busy, 12, count=3, value_size=60)          # 36 records, rolled (segment.bytes 1200)
    assert len(busy.segments) > 1 and busy.recovery_point == 0
    assert rounds() == [busy] and busy.recovery_point == busy.active_segment.base_offset
    assert rounds() == []

    busy.update_high_watermark(busy.log_end_offset)
    lm.update_topic_config("busy", LogConfig(segment_bytes=1200, file_delete_delay_ms=1000, retention_bytes=1))
    assert lm.cleanup_logs() > 0
    deleted = [n for n in os.listdir(busy.dir) if n.endswith(".deleted")]
    assert deleted and rounds() == [busy] and not set(deleted) - set(os.listdir(busy.dir))
    clock.advance(1000)
    rounds()
    assert not [n for n in os.listdir(busy.dir) if n.endswith(".deleted")] and rounds() == []

    fill(busy, 1, count=3)
    assert busy.truncate_to(busy.log_end_offset - 2) and busy.producer_state.has_unflushed
    assert rounds() == [busy] and not busy.producer_state.has_unflushed
    assert rounds() == []

    fill(idle[3], 1, count=3)
    assert idle[3].recovery_point == 0 and rounds() == []
    lm.update_topic_config("idle", LogConfig(segment_bytes=1200, file_delete_delay_ms=1000, flush_ms=100))
    clock.advance(100)
    assert set(rounds()) == set(idle) and idle[3].recovery_point == 3
    lm.delete_logs([("idle", p) for p in range(20)])
    assert rounds() == [] and lm._with_periodic_work == set()     # deleted logs are not kept


def test_future_logs_load_swap_and_survive_restarts(tmp_path):
    """A future log (JBOD move) is created in the preferred dir, checkpointed and reloaded with its dir, swapped
    in (the old dir renamed -delete, deleted later); a crash between the swap's two renames is repaired at load."""
    a, b = tmp_path / "a", tmp_path / "b"
    clock = MockClock()
    lm = manager([a, b], clock)
    lm.maybe_update_preferred_log_dir(("t", 0), str(b))       # not hosted yet: remembered
    assert lm.get_or_create_log(("t", 0)).parent_dir == str(b)
    lm.get_or_create_log(("t", 1))
    current = lm.get_or_create_log(("t", 2))
    assert current.parent_dir == str(a)
    fill(current, 4)
    current.update_high_watermark(9)
    lm.maybe_update_preferred_log_dir(("t", 2), str(b))
    future = lm.get_or_create_future_log(("t", 2))
    assert future.is_future and future.parent_dir == str(b) and lm.future_logs == {("t", 2): future}
    assert os.path.basename(future.dir).startswith("t-2.") and future.dir.endswith("-future")
    Partition.append_replicated(future, current.read(0, 10 ** 6).records.read())
    future.update_high_watermark(9)
    lm.shutdown()
    assert checkpoint(b, "recovery-point-offset-checkpoint") == {("t", 0): 0, ("t", 2): 12}
    assert checkpoint(b, "replication-offset-checkpoint") == {("t", 0): 0, ("t", 2): 9}

    lm = manager([a, b], clock)                                  # the move resumes: both logs are back
    current, future = lm.get_log(("t", 2)), lm.get_future_log(("t", 2))
    assert (current.parent_dir, future.parent_dir, future.log_end_offset) == (str(a), str(b), 12)
    new, old = lm.replace_current_with_future_log(("t", 2))
    assert new is future and lm.get_log(("t", 2)) is new and lm.future_logs == {}
    assert (new.dir, new.high_watermark) == (str(b / "t-2"), 9) and old.dir.endswith("-delete")
    assert os.path.isdir(old.dir)
    clock.advance(CONFIG.file_delete_delay_ms)
    lm.delete_pending_files()
    assert [n for n in os.listdir(a) if n.startswith("t-")] == ["t-1"]
    lm.shutdown()

    # A crash after the current log was renamed -delete but before the future took its name: promoted at load.
    lm = manager([a, b], clock)
    lm.maybe_update_preferred_log_dir(("t", 1), str(b))
    moving = lm.get_or_create_future_log(("t", 1))
    fill(moving, 1)
    lm.get_log(("t", 1)).rename_dir("t-1.0123456789abcdef0123456789abcdef-delete")
    lm.shutdown()
    lm = manager([a, b], clock)
    log = lm.get_log(("t", 1))
    assert (log.dir, log.log_end_offset, lm.future_logs) == (str(b / "t-1"), 3, {})
    assert not [n for n in os.listdir(a) if n.startswith("t-1")]
