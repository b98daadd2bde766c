"""Log dir failures at the log level (Kafka's LogDirFailureChannel): an append into a full filesystem raises
KafkaStorageError (KAFKA_STORAGE_ERROR) and reports the dir once; the log manager takes the dir offline and
keeps serving the others; a restart with space again recovers the half-written tail; a dir unusable at
start-up is offline from the start; no dir left halts."""
import os

import pytest

from kbroker.clock import MockClock
from kbroker.log.config import LogConfig
from kbroker.log.errors import KafkaStorageError
from kbroker.log.manager import LogManager
from kbroker.protocol.errors import Errors
from tests.tmpfs import remount, small_filesystem

from .test_log_batches import fill

CONFIG = LogConfig(segment_bytes=10 ** 6)


def manager(dirs, **kw):
    return LogManager([str(d) for d in dirs], CONFIG, MockClock(), **kw)


def fill_until_full(log) -> int:
    """Append 5-record batches of ~5 KB until the filesystem is full; the records appended before."""
    for _ in range(1000):
        try:
            fill(log, 1, count=5, value_size=1000)
        except KafkaStorageError as e:
            assert e.code == Errors.KAFKA_STORAGE_ERROR
            return log.log_end_offset
    raise AssertionError("the filesystem never filled up")


def test_full_dir_goes_offline_others_serve_and_restart_recovers(tmp_path):
    small, big = str(tmp_path / "small"), str(tmp_path / "big")
    with small_filesystem(small, "256k"):
        halted = []
        lm = manager([small, big], halt=halted.append)
        failed = []
        lm.dir_failure.set_listener(failed.append)
        log = lm.get_or_create_log(("t", 0))            # fewest partitions, first listed: the small dir
        other = lm.get_or_create_log(("t", 1))
        assert (log.parent_dir, other.parent_dir) == (small, big)
        appended = fill_until_full(log)
        assert appended > 0 and failed == [small]
        segment = log.active_segment
        assert os.path.getsize(segment.log_path) > segment.size   # a half-written batch at the end
        with pytest.raises(KafkaStorageError):           # nothing is read or written any more
            log.read(0, 1000)
        with pytest.raises(KafkaStorageError):
            fill(log, 1)
        assert lm.is_log_dir_online(small)               # until the failure is handled (the replica manager)
        assert lm.handle_log_dir_failure(small) == [("t", 0)]
        assert not lm.is_log_dir_online(small) and lm.offline_dirs == {small} and lm.live_log_dirs == [big]
        assert lm.get_log(("t", 0)) is None and halted == []
        left_alone = sorted(os.listdir(small))
        fill(other, 3)                                   # the other dir goes on
        lm.checkpoint_recovery_points()
        lm.checkpoint_high_watermarks()
        with pytest.raises(KafkaStorageError):           # a replica not new may have its log in the offline dir
            lm.get_or_create_log(("u", 0), is_new=False)
        assert lm.get_or_create_log(("u", 0)).parent_dir == big
        lm.shutdown()
        assert os.path.exists(os.path.join(big, ".kafka_cleanshutdown"))
        assert sorted(os.listdir(small)) == left_alone   # nothing more is written there (no clean shutdown
        #                                                  marker either: the log is recovered at restart)

        remount(small, "size=8m")                              # the disk is fixed
        lm2 = manager([small, big])
        recovered = lm2.get_log(("t", 0))
        assert recovered.log_end_offset == appended      # the half-written tail is gone
        assert len(recovered.read(appended - 5, 10 ** 6).records.read()) > 0
        fill(recovered, 1)
        lm2.shutdown()


def test_dir_unusable_at_startup_is_offline_and_no_dir_left_halts(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("not a directory")
    halted = []
    lm = manager([bad, good], halt=halted.append)
    assert lm.offline_dirs == {str(bad)} and not lm.is_log_dir_online(str(bad))
    assert lm.get_or_create_log(("t", 0)).parent_dir == str(good)
    lm.handle_log_dir_failure(str(good))
    assert halted == [1]                                  # Kafka: "all log dirs ... have failed", halt
    with pytest.raises(KafkaStorageError):
        manager([bad])
