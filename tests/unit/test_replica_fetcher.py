"""The replica fetcher's round (kbroker.replica.fetcher) against a leader's answers: the partition leaving the
fetcher while its records are appended (a large append yields to the thread pool; a StopReplica or a new
leader can take the partition off the fetcher meanwhile), and which rounds look at every partition again."""
from types import SimpleNamespace

import gevent.event

from kbroker.log.log import Log
from kbroker.metrics import BrokerMetrics
from kbroker.protocol.client import FetchSessionHandler
from kbroker.protocol.hotpath import FetchPartitionData, encode_fetch_response, piece_size
from kbroker.quota.replication_quotas import ReplicationQuotaManager
from kbroker.quota.stats import QuotaWindow
from kbroker.replica.fetcher import FETCH_VERSION, FetchState, ReplicaFetcher

TP = ("t", 0)


class _Leader:
    """Answers each fetch with the next of `answers` (one partition's records and high watermark, or nothing), in
    fetch session 7; keeps the requests."""

    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []

    def send(self, request, decode=True):
        self.requests.append(request)
        records, high_watermark = self.answers.pop(0) if self.answers else (None, 0)
        topics = [] if records is None else [("t", [FetchPartitionData(0, high_watermark=high_watermark,
                                                                         records=[records])])]
        answer = encode_fetch_response(FETCH_VERSION, 0, 0, 7, topics)
        return memoryview(b"".join(bytes(p) for p in answer if piece_size(p)))


class _Follower:
    """A follower partition; leaving=True: its append lets the fetcher lose the partition, as a yield to a
    StopReplica does."""

    def __init__(self, fetcher, leaving=False):
        self.fetcher, self.leader, self.appended, self.leaving = fetcher, 2, [], leaving
        self.log = SimpleNamespace(log_end_offset=0, log_start_offset=0)

    def append_as_follower(self, records, high_watermark):
        self.appended.append(bytes(records))
        if self.leaving:
            self.fetcher.remove(TP)


def fetcher_of(leader, leaving=False):
    """A fetcher from broker 1 to `leader` (broker 2) following TP, its first round due."""
    fetcher = ReplicaFetcher.__new__(ReplicaFetcher)
    config = {"replica.fetch.max.bytes": 1 << 20, "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
              "replica.fetch.response.max.bytes": 10 << 20}
    follower = _Follower(fetcher, leaving)
    quotas = SimpleNamespace(follower=ReplicationQuotaManager("FollowerReplication", QuotaWindow(), lambda: 0))
    fetcher.manager = SimpleNamespace(config=config, partitions={TP: follower}, replication_quotas=quotas,
                                      metrics=BrokerMetrics())
    fetcher.broker_id, fetcher.leader_id = 1, 2
    fetcher.client = leader
    fetcher.partitions = {TP: FetchState(leader_epoch=0)}
    fetcher.truncating, fetcher.session = set(), FetchSessionHandler()
    fetcher.wanted, fetcher.stale, fetcher.full_every, fetcher.next_full = {}, {TP}, 15.0, 0.0
    fetcher.full_mark, fetcher.throttled = None, False
    fetcher.wakeup = gevent.event.Event()
    return fetcher, follower


def test_a_partition_that_leaves_the_fetcher_during_its_append_ends_the_round_cleanly():
    fetcher, follower = fetcher_of(_Leader((b"records", 5)), leaving=True)
    assert fetcher._fetch_once() is True      # was: KeyError ('t', 0), the fetcher's round failed
    assert follower.appended == [b"records"]
    assert TP not in fetcher.partitions
    assert fetcher.manager.metrics.replication_bytes_in == len(b"records")   # ReplicationBytesInPerSec


def test_the_periodic_full_look_sends_only_what_no_answer_marked():
    """Every replica.lag.time.max.ms / 2 the fetcher looks at all its partitions again, for what moved without
    an answer naming the partition (retention moving the follower's log start offset); not while no log changed."""
    leader = _Leader((b"", 0))
    fetcher, follower = fetcher_of(leader)

    def sent():
        fetcher._fetch_once()
        return [(p.fetch_offset, p.log_start_offset) for t in leader.requests[-1].topics for p in t.partitions]
    assert sent() == [(0, 0)]                 # the session's first, full request
    assert sent() == []                       # the answer named it: looked at again, nothing new
    follower.log.log_start_offset = 3         # (behind Log's back: only a full look would see it)
    fetcher.next_full = 0.0
    assert sent() == []                       # the full look is due, but no log changed: none
    Log.changes += 1                          # as retention moving the log start offset does
    assert sent() == [(0, 3)]
    follower.log.log_start_offset = 4
    Log.changes += 1
    assert sent() == []                       # the next full look is not due yet
    fetcher.next_full = 0.0
    assert sent() == [(0, 4)]
