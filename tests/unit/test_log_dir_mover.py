"""kbroker.replica.log_dir_mover: a partition's log copied into its future log while appends and a truncation
hit the current log, then swapped in; the partition ends on the new log with the same entries and epochs."""
import os
from types import SimpleNamespace

import gevent

from kbroker.clock import MockClock
from kbroker.log.config import LogConfig
from kbroker.log.manager import LogManager
from kbroker.quota.replication_quotas import ALTER_LOG_DIRS, ReplicationQuotaManager
from kbroker.quota.stats import QuotaWindow
from kbroker.replica.log_dir_mover import LogDirMover
from kbroker.replica.partition import Partition

from .test_log_batches import fill

TP = ("t", 0)


def log_bytes(log) -> bytes:
    """Every entry of the log in order (segment boundaries may differ between two logs with the same entries)."""
    out = b""
    for segment in log.segments:
        with open(segment.log_path, "rb") as f:
            out += f.read()
    return out


def wait(condition, timeout: float = 10.0) -> None:
    """Yield to the mover until condition() holds; AssertionError after timeout seconds."""
    with gevent.Timeout(timeout, AssertionError("timed out")):
        while not condition():
            gevent.sleep(0.01)


def test_move_follows_appends_and_truncation_then_swaps(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lm = LogManager([a, b], LogConfig(segment_bytes=1200), MockClock())
    lm.maybe_update_preferred_log_dir(TP, a)
    current = lm.get_or_create_log(TP)
    partition = Partition(*TP, 1, current, MockClock(), None, 10000)
    fill(current, 20, epoch=3)
    current.update_high_watermark(current.log_end_offset)
    replicas = SimpleNamespace(partitions={TP: partition}, log_manager=lm)
    quota = ReplicationQuotaManager(ALTER_LOG_DIRS, QuotaWindow(), lambda: int(gevent.get_hub().loop.now() * 1000))
    quota.update_bound(300)   # replica.alter.log.dirs.io.max.bytes.per.second
    mover = LogDirMover(replicas, 1 << 20, quota)
    lm.maybe_update_preferred_log_dir(TP, b)
    future = lm.get_or_create_future_log(TP)
    mover.add(TP)
    wait(lambda: future.log_end_offset > 0)      # throttled: a few batches, then a second's pause
    assert mover.moving == {TP} and partition.log is current
    wait(quota.is_quota_exceeded)                # over the bound: the mover waits, the copy stays behind
    assert 0 < future.log_end_offset < current.log_end_offset

    # The current log diverges below what was copied (a follower truncating), then grows with other entries.
    partition.truncate_to(3, "test")
    fill(current, 10, value_size=30, epoch=5)
    partition.log.leader_epoch_cache.assign(6, current.log_end_offset)   # a new leader's epoch, no batch yet
    quota.update_bound(1 << 40)
    wait(lambda: not mover.moving)
    assert partition.log is future and lm.get_log(TP) is future and lm.future_logs == {}
    assert future.dir == os.path.join(b, "t-0") and current.dir.endswith("-delete")
    assert log_bytes(future) == log_bytes(current)
    assert (future.log_end_offset, future.high_watermark) == (current.log_end_offset, current.high_watermark)
    assert future.leader_epoch_cache.entries == current.leader_epoch_cache.entries
    assert [e.epoch for e in future.leader_epoch_cache.entries] == [3, 5, 6]
