"""The replica fetcher's round (kbroker.replica.fetcher) against a leader's answer, with the partition leaving the
fetcher while its records are appended (a large append yields to the thread pool; a StopReplica or a new
leader can take the partition off the fetcher meanwhile)."""
from types import SimpleNamespace

import gevent.event

from kbroker.metrics import BrokerMetrics
from kbroker.protocol.client import FetchSessionHandler
from kbroker.protocol.hotpath import FetchPartitionData, encode_fetch_response, piece_size
from kbroker.quota.replication_quotas import ReplicationQuotaManager
from kbroker.quota.stats import QuotaWindow
from kbroker.replica.fetcher import FETCH_VERSION, FetchState, ReplicaFetcher

TP = ("t", 0)


class _Leader:
    """Answers every fetch with one partition's records and high watermark."""

    def __init__(self, records: bytes, high_watermark: int):
        self.answer = encode_fetch_response(FETCH_VERSION, 0, 0, 0, [("t", [FetchPartitionData(
            0, high_watermark=high_watermark, records=[records])])])

    def send(self, request, decode=True):
        return memoryview(b"".join(bytes(p) for p in self.answer if piece_size(p)))


class _Follower:
    """A follower partition whose append lets the fetcher lose the partition, as a yield to a StopReplica does."""

    def __init__(self, fetcher):
        self.fetcher, self.leader, self.appended = fetcher, 2, []
        self.log = SimpleNamespace(log_end_offset=0, log_start_offset=0)

    def append_as_follower(self, records, high_watermark):
        self.appended.append(bytes(records))
        self.fetcher.remove(TP)


def test_a_partition_that_leaves_the_fetcher_during_its_append_ends_the_round_cleanly():
    fetcher = ReplicaFetcher.__new__(ReplicaFetcher)
    config = {"replica.fetch.max.bytes": 1 << 20, "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
              "replica.fetch.response.max.bytes": 10 << 20}
    follower = _Follower(fetcher)
    quotas = SimpleNamespace(follower=ReplicationQuotaManager("FollowerReplication", QuotaWindow(), lambda: 0))
    fetcher.manager = SimpleNamespace(config=config, partitions={TP: follower}, replication_quotas=quotas,
                                      metrics=BrokerMetrics())
    fetcher.broker_id, fetcher.leader_id = 1, 2
    fetcher.client = _Leader(b"records", high_watermark=5)
    fetcher.partitions = {TP: FetchState(leader_epoch=0)}
    fetcher.truncating, fetcher.session = set(), FetchSessionHandler()
    fetcher.wanted, fetcher.stale, fetcher.full_every, fetcher.next_full = {}, {TP}, 15.0, 0.0
    fetcher.wakeup = gevent.event.Event()
    assert fetcher._fetch_once() is True      # was: KeyError ('t', 0), the fetcher's round failed
    assert follower.appended == [b"records"]
    assert TP not in fetcher.partitions
    assert fetcher.manager.metrics.replication_bytes_in == len(b"records")   # ReplicationBytesInPerSec
