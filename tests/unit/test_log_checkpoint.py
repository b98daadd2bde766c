"""kbroker.log.checkpoint: Kafka's offset checkpoint and leader-epoch-checkpoint formats, atomic writes, tolerant
of a missing file and strict about a malformed one; the leader epoch cache."""
import os

import pytest

from kbroker.log.checkpoint import EpochEntry, LeaderEpochCheckpointFile, LeaderEpochFileCache, OffsetCheckpointFile
from kbroker.log.errors import CorruptCheckpoint


def test_offset_checkpoint_round_trip_in_kafkas_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(str(path))
    cp.write({("orders", 1): 7, ("my-topic", 0): 12345678901, ("orders", 0): 0})
    assert path.read_text() == "0\n3\nmy-topic 0 12345678901\norders 0 0\norders 1 7\n"
    assert cp.read() == {("orders", 1): 7, ("my-topic", 0): 12345678901, ("orders", 0): 0}
    assert os.listdir(tmp_path) == ["recovery-point-offset-checkpoint"]      # no .tmp left behind
    cp.write({})
    assert path.read_text() == "0\n0\n" and cp.read() == {}


def test_missing_or_empty_checkpoint_reads_empty(tmp_path):
    assert OffsetCheckpointFile(str(tmp_path / "nope")).read() == {}
    (tmp_path / "empty").write_text("")
    assert OffsetCheckpointFile(str(tmp_path / "empty")).read() == {}
    assert LeaderEpochCheckpointFile(str(tmp_path / "nope")).read() == []


@pytest.mark.parametrize("text", [
    "1\n1\nt 0 5\n",            # unknown version
    "x\n1\nt 0 5\n",            # not a number
    "0\n2\nt 0 5\n",            # fewer entries than announced
    "0\n1\nt 0 5\nt 1 6\n",     # more
    "0\n1\nt 0\n",              # a field missing
    "0\n1\nt zero 5\n",         # partition not a number
    "0\n1\nt 0 5 9\n",          # a field too many
    "0\none\n",
])
def test_malformed_offset_checkpoint_raises(tmp_path, text):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpoint):
        OffsetCheckpointFile(str(path)).read()


def test_leader_epoch_checkpoint_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(str(path)).write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    path.write_text("0\n1\n3\n")
    with pytest.raises(CorruptCheckpoint):
        LeaderEpochCheckpointFile(str(path)).read()


def test_leader_epoch_cache(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    leo = 100   # the log end offset
    writes = []

    def run_blocking(fn):
        writes.append(fn)
        fn()
    cache = LeaderEpochFileCache(path, run_blocking)
    assert os.path.getsize(path) == 0 and cache.latest_epoch is None
    assert cache.end_offset_for(0, leo) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(1, 10)                 # same epoch, later offset: nothing to record
    cache.assign(2, 40)
    cache.assign(4, 70)
    assert cache.entries == [(1, 0), (2, 40), (4, 70)] and len(writes) == 3
    assert LeaderEpochFileCache(path).entries == cache.entries          # persisted
    assert cache.end_offset_for(4, leo) == (4, 100)                  # the latest epoch ends at the log end offset
    assert cache.end_offset_for(2, leo) == (2, 70)
    assert cache.end_offset_for(3, leo) == (2, 70)                   # unknown epoch: the one before it
    assert cache.end_offset_for(0, leo) == (0, 0)                    # below every epoch: the first start offset
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert cache.end_offset_for(9, leo) == (-1, -1)
    cache.assign(3, 50)                 # a new leader's epoch conflicting with entries after it
    assert cache.entries == [(1, 0), (2, 40), (3, 50)]
    cache.truncate_from_end(50)
    assert cache.entries == [(1, 0), (2, 40)]
    cache.truncate_from_start(45)
    assert cache.entries == [(2, 45)] and cache.earliest_entry == (2, 45)
    assert open(path).read() == "0\n1\n2 45\n"
    cache.clear_and_flush()
    assert open(path).read() == "0\n0\n"
