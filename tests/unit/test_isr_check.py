"""The leader's ISR check (ReplicaManager.check_isrs) over real logs and the real read path: it looks only at the
partitions where a follower may have fallen behind, yet drops every follower out of sync for
replica.lag.time.max.ms, whether it stopped fetching one partition or stopped fetching altogether."""
import pytest

from kbroker.clock import MockClock
from kbroker.config import BrokerConfig
from kbroker.metadata_cache import MetadataCache
from kbroker.quota.replication_quotas import ReplicationQuotas
from kbroker.replica.manager import FetchParams, ReplicaManager
from kbroker.replica.partition import Partition

from .test_log_batches import v2_batch
from .test_log_partition_log import make_log

LAG_MS = 10_000
FOLLOWER = FetchParams(11, 2, 0, 1, 10 ** 6, 0)   # broker 2's fetch, answered at once


@pytest.fixture
def led(tmp_path, monkeypatch):
    """Broker 1 leading t-0..t-19 (replicas and ISR [1, 2], one batch each, broker 2 caught up at their end),
    and the partitions each ISR check looked at."""
    config = BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1",
                           "replica.lag.time.max.ms": str(LAG_MS)})
    clock = MockClock()
    rm = ReplicaManager(1, config, None, None, clock, MetadataCache(1), ReplicationQuotas(config, clock))
    for i in range(20):
        p = Partition("t", i, 1, make_log(tmp_path, clock, name=f"t-{i}"), clock, lambda partition, isr: True, LAG_MS)
        p.apply_state(1, 1, [1, 2], [1, 2], zk_version=0, controller_epoch=1, topic_id=None)
        p.append_as_leader(v2_batch(0, 3), 8, 1)
        rm.partitions[p.tp] = p
    fetch(rm, 0)
    fetch(rm, 3)   # at the end, the high watermark there too
    assert all(p.log.high_watermark == 3 for p in rm.partitions.values())
    looked = []
    maybe_shrink_isr = Partition.maybe_shrink_isr
    monkeypatch.setattr(Partition, "maybe_shrink_isr", lambda p: looked.append(p.index) or maybe_shrink_isr(p))

    def check():
        looked.clear()
        rm.check_isrs()
        return sorted(looked)
    return rm, clock, check


def fetch(rm, offset, indexes=range(20)):
    """Broker 2 fetches these partitions from offset (none: an incremental round with nothing to read)."""
    rm.fetch(FOLLOWER, [(("t", i), offset, 10 ** 6, 1) for i in indexes])


def isrs(rm):
    return {p.index: p.isr for p in rm.partitions.values() if p.isr != [1, 2]}


def test_quiet_partitions_are_not_looked_at_while_their_follower_fetches(led):
    rm, clock, check = led
    assert check() == list(range(20))     # read by the follower: looked at once, then left
    for _ in range(4):
        clock.advance(LAG_MS // 2)
        fetch(rm, 3, indexes=[])          # the follower's rounds go on, its session reading nothing
        assert check() == []
    assert isrs(rm) == {}


def test_a_follower_behind_on_one_partition_leaves_that_isr(led):
    rm, clock, check = led
    check()
    rm.partitions[("t", 7)].append_as_leader(v2_batch(0, 2), 8, 1)
    rm._complete_delayed(("t", 7))        # as the produce path does after an append
    assert check() == [7]
    for _ in range(3):
        clock.advance(LAG_MS // 2)
        fetch(rm, 3, indexes=[7])         # the follower stays at 3 on t-7 (its other partitions quiet)
        looked = check()
        assert looked == [7]
    assert isrs(rm) == {7: [1]}
    assert check() == [7]                 # changed by the shrink: looked at once more,
    assert check() == []                  # then, its ISR the leader alone, left


def test_a_follower_that_stops_fetching_leaves_every_isr(led):
    rm, clock, check = led
    check()
    clock.advance(LAG_MS // 2)
    assert check() == []
    clock.advance(LAG_MS // 2 + 1)        # its last fetch was more than replica.lag.time.max.ms ago
    assert check() == list(range(20))
    assert isrs(rm) == {i: [1] for i in range(20)}
    clock.advance(LAG_MS // 2)
    assert check() == list(range(20))     # changed by the shrinks: looked at once more,
    clock.advance(LAG_MS // 2)
    assert check() == []                  # then left: the follower is still stalled, but in no ISR
