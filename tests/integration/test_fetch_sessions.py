"""Incremental fetch sessions (KIP-227) against real brokers, in raw Fetch v11 requests as a consumer sends them:
a full fetch opens a session, incremental fetches name only added/changed/forgotten partitions and get only the
partitions with news, the session errors, closing, a full cache; then replication over sessions (and without
them when the leader has no slot), and kafka-python, which fetches through sessions, consuming."""
from __future__ import annotations

import threading
import time

import pytest
from kafka.protocol.consumer import FetchRequest

from kbroker.protocol.client import Connection
from kbroker.protocol.client.requests import produce_request
from tests.clients._util import Rec, build_batch, create_topic, log_entries, raw_metadata, segment_path, unique
from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster, wait_until

TOPIC = "sessions"
SLOTS = 3
NONE, UNKNOWN_TOPIC_OR_PARTITION = 0, 3
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71


@pytest.fixture(scope="module")
def broker(zookeeper, tmp_path_factory):
    """One broker with a 3-slot session cache and a 3-partition topic."""
    cluster = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("fetch-sessions")))
    try:
        cluster.start_brokers(1, **{"max.incremental.fetch.session.cache.slots": SLOTS})
        create_topic(cluster, TOPIC, partitions=3)
        yield cluster.brokers[1]
    finally:
        cluster.stop()


class Fetcher:
    """A consumer's connection sending Fetch v11 with whatever session metadata the test says."""

    def __init__(self, broker):
        host, port = broker.bootstrap.rsplit(":", 1)
        self.conn = Connection(host, int(port), "fetch-session-test", 15.0)

    def fetch(self, session_id: int, epoch: int, partitions=(), forget=(), max_wait_ms: int = 0):
        """(top-level error, session id, {partition: (error, high watermark, log start, record bytes)}) for
        partitions [(partition, fetch offset)] of TOPIC and forgotten partition numbers."""
        F = FetchRequest
        topics = [F.FetchTopic(topic=TOPIC, partitions=[F.FetchTopic.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=o, log_start_offset=-1, partition_max_bytes=1 << 20)
            for p, o in partitions])] if partitions else []
        forgotten = [F.ForgottenTopic(topic=TOPIC, partitions=list(forget))] if forget else []
        resp = self.conn.send(F(version=11, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 22,
                                isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
                                forgotten_topics_data=forgotten, rack_id=""))
        got = {}
        for t in resp.responses:
            assert t.topic == TOPIC
            for p in t.partitions:
                got[p.partition_index] = (p.error_code, p.high_watermark, p.log_start_offset, bytes(p.records or b""))
        return resp.error_code, resp.session_id, got

    def close(self):
        self.conn.close()


@pytest.fixture
def fetcher(broker):
    f = Fetcher(broker)
    yield f
    f.close()


def produce(broker, partition: int, n: int) -> None:
    batch = build_batch(2, 0, [Rec(b"k%d" % i, b"v%d" % i, int(time.time() * 1000)) for i in range(n)])
    host, port = broker.bootstrap.rsplit(":", 1)
    conn = Connection(host, int(port), "fetch-session-test", 15.0)
    try:
        resp = conn.send(produce_request(7, TOPIC, partition, batch, acks=1, timeout_ms=5000))
    finally:
        conn.close()
    assert resp.responses[0].partition_responses[0].error_code == NONE


def end_offset(fetcher, partition: int) -> int:
    _, _, got = fetcher.fetch(0, -1, [(partition, 0)])
    return got[partition][1]


def test_incremental_fetches_carry_only_what_changed(broker, fetcher):
    ends = [end_offset(fetcher, p) for p in range(3)]
    error, sid, got = fetcher.fetch(0, 0, [(0, ends[0]), (1, ends[1])])
    assert error == NONE and sid != 0
    assert sorted(got) == [0, 1] and all(v[0] == NONE and v[1] == ends[p] and not v[3] for p, v in got.items())

    assert fetcher.fetch(sid, 1) == (NONE, sid, {})                     # nothing new: an empty answer
    produce(broker, 1, 2)
    error, _, got = fetcher.fetch(sid, 2)                               # partition 1 read at the cached offset
    assert error == NONE and list(got) == [1] and got[1][1] == ends[1] + 2 and got[1][3]
    assert fetcher.fetch(sid, 3, [(1, ends[1] + 2)]) == (NONE, sid, {})  # moved on; nothing new since
    error, _, got = fetcher.fetch(sid, 4, [(2, ends[2])])               # added: sent once
    assert list(got) == [2] and got[2][:2] == (NONE, ends[2])
    assert fetcher.fetch(sid, 5, forget=[0]) == (NONE, sid, {})         # forgotten...
    produce(broker, 0, 1)
    assert fetcher.fetch(sid, 6) == (NONE, sid, {})                     # ...so its new records are not sent
    produce(broker, 2, 1)
    error, _, got = fetcher.fetch(sid, 7, max_wait_ms=5000)
    assert list(got) == [2] and got[2][1] == ends[2] + 1
    error, sid_after, got = fetcher.fetch(sid, -1, [(0, ends[0])])      # close: answered sessionless
    assert (error, sid_after, list(got)) == (NONE, 0, [0]) and got[0][1] == ends[0] + 1
    assert fetcher.fetch(sid, 8)[0] == FETCH_SESSION_ID_NOT_FOUND


def test_a_long_poll_in_a_session_waits_for_any_session_partition(broker, fetcher):
    ends = [end_offset(fetcher, p) for p in range(3)]
    _, sid, _ = fetcher.fetch(0, 0, [(p, ends[p]) for p in range(3)])
    later = threading.Timer(0.5, produce, (broker, 2, 1))
    later.start()
    # a wait beyond the connection's 15 s timeout: only the record can answer it
    error, _, got = fetcher.fetch(sid, 1, max_wait_ms=60000)
    later.join()
    assert error == NONE and list(got) == [2] and got[2][3]
    fetcher.fetch(sid, -1)


def test_errors_in_a_session_are_sent_every_time(broker, fetcher):
    # A partition that does not exist, named in the session: its error comes back in every answer.
    error, sid, got = fetcher.fetch(0, 0, [(0, end_offset(fetcher, 0)), (9, 0)])
    assert got[9][0] == UNKNOWN_TOPIC_OR_PARTITION and sid != 0
    for epoch in (1, 2):
        error, _, got = fetcher.fetch(sid, epoch)
        assert error == NONE and list(got) == [9] and got[9][0] == UNKNOWN_TOPIC_OR_PARTITION
    fetcher.fetch(sid, -1)


def test_hostile_session_metadata_gets_session_errors_and_the_broker_stays_up(broker, fetcher):
    # Negative ids and epochs below -1 name no session; forgetting partitions a session never had changes nothing.
    for session_id, epoch in ((-3, 1), (-3, -5), (0, -7), (0, 5), (2 ** 31 - 1, 2 ** 31 - 1)):
        assert fetcher.fetch(session_id, epoch, [(0, 0)])[:2] == (FETCH_SESSION_ID_NOT_FOUND, 0)
    end = end_offset(fetcher, 0)
    _, sid, _ = fetcher.fetch(0, 0, [(0, end)])
    assert fetcher.fetch(sid, 1, forget=[1, 2, 9, 2 ** 31 - 1]) == (NONE, sid, {})
    produce(broker, 0, 1)
    error, _, got = fetcher.fetch(sid, 2)
    assert error == NONE and list(got) == [0] and got[0][1] == end + 1
    fetcher.fetch(sid, -1)


def test_session_errors(broker, fetcher):
    _, sid, _ = fetcher.fetch(0, 0, [(0, end_offset(fetcher, 0))])
    assert fetcher.fetch(sid, 5)[:2] == (INVALID_FETCH_SESSION_EPOCH, 0)
    assert fetcher.fetch(sid, 2)[0] == INVALID_FETCH_SESSION_EPOCH
    assert fetcher.fetch(sid ^ 1, 1)[:2] == (FETCH_SESSION_ID_NOT_FOUND, 0)
    assert fetcher.fetch(sid, 1)[:2] == (NONE, sid)                      # still there, at the right epoch
    # a non-zero id with epoch 0 closes that session and opens another
    error, new_sid, got = fetcher.fetch(sid, 0, [(1, 0)])
    assert error == NONE and new_sid not in (0, sid) and list(got) == [1]
    assert fetcher.fetch(sid, 2)[0] == FETCH_SESSION_ID_NOT_FOUND
    assert fetcher.fetch(new_sid, 1)[:2] == (NONE, new_sid)
    fetcher.fetch(new_sid, -1)


def test_a_full_cache_answers_without_a_session(broker, fetcher):
    sids = [fetcher.fetch(0, 0, [(0, 0)])[1] for _ in range(SLOTS)]
    try:
        assert 0 not in sids and len(set(sids)) == SLOTS
        error, sid, got = fetcher.fetch(0, 0, [(0, 0), (1, 0), (2, 0)])  # more partitions, but they are recent
        assert (error, sid, sorted(got)) == (NONE, 0, [0, 1, 2])
    finally:
        for s in sids:
            fetcher.fetch(s, -1)
    assert fetcher.fetch(0, 0, [(0, 0)])[1] != 0                        # slots free again


# ---- replication and clients over sessions ---------------------------------------------------------------------

@pytest.mark.parametrize("slots, eviction_ms", [(1000, 120000), (0, 120000), (1, 0)],
                         ids=["sessions", "no-session-slots", "followers-evicting-each-other"])
def test_followers_replicate_whatever_the_session_cache(cluster_factory, slots, eviction_ms):
    """acks=all produces to many partitions complete and every follower ends with the leader's records: the
    followers fetch in sessions; or sessionless when the leaders have no slot for them; or, with one slot and
    no minimum age, each follower's new session evicts the other's, whose next fetch is then refused
    (FETCH_SESSION_ID_NOT_FOUND) and starts over with a full one."""
    cluster = cluster_factory(3, **{"max.incremental.fetch.session.cache.slots": slots,
                                    "min.incremental.fetch.session.eviction.ms": eviction_ms})
    topic = create_topic(cluster, unique("repl"), partitions=8, replication_factor=3)
    md = raw_metadata(cluster.brokers[1].bootstrap, [topic])
    [t] = md.topics
    hosts = {b.node_id: (b.host, b.port) for b in md.brokers}
    leaders = {p.partition_index: hosts[p.leader_id] for p in t.partitions}
    for round_ in range(3):
        for p in range(8):
            batch = build_batch(2, 0, [Rec(b"k", b"r%d-p%d" % (round_, p), int(time.time() * 1000))])
            conn = Connection(*leaders[p], "fetch-session-test", 15.0)
            try:
                resp = conn.send(produce_request(7, topic, p, batch, acks=-1, timeout_ms=10000))
            finally:
                conn.close()
            assert resp.responses[0].partition_responses[0].error_code == NONE

    def local_end(broker_id, p) -> int:
        try:
            entries = log_entries(segment_path(cluster, broker_id, topic, p))
        except AssertionError:   # a write in progress
            return -1
        return entries[-1].last_offset + 1 if entries else 0
    wait_until(lambda: all(local_end(b, p) == 3 for b in (1, 2, 3) for p in range(8)), 20,
               message="every replica has the 3 records of each partition")


def test_idle_partitions_in_a_followers_session_stay_in_sync(cluster_factory):
    """A follower's incremental fetches name no idle partition, yet the leader counts each fetch as the follower
    being caught up on every partition of the session: with a short replica.lag.time.max.ms, a while of
    produces to one partition shrinks no ISR."""
    cluster = cluster_factory(2, **{"replica.lag.time.max.ms": 1000})
    topic = create_topic(cluster, unique("idle"), partitions=6, replication_factor=2)
    tps = [(topic, p) for p in range(6)]
    wait_until(lambda: all(len(s.isr) == 2 for s in cluster.zk.get_partition_states(tps).values()), 20,
               message="full ISRs")
    before = cluster.zk.get_partition_states(tps)
    md = raw_metadata(cluster.brokers[1].bootstrap, [topic])
    leader = {b.node_id: (b.host, b.port) for b in md.brokers}[md.topics[0].partitions[0].leader_id]
    end = time.monotonic() + 4                              # four times the lag
    while time.monotonic() < end:
        conn = Connection(*leader, "fetch-session-test", 15.0)
        try:
            batch = build_batch(2, 0, [Rec(b"k", b"busy", int(time.time() * 1000))])
            resp = conn.send(produce_request(7, topic, 0, batch, acks=-1, timeout_ms=10000))
        finally:
            conn.close()
        assert resp.responses[0].partition_responses[0].error_code == NONE
        time.sleep(0.2)
    # the idle partitions' state znodes are unchanged: no ISR change at all (a shrink and a later expansion would
    # bump the zkVersion); the busy partition 0 is left out: on a loaded machine its follower may really lag 1 s
    idle = tps[1:]
    assert cluster.zk.get_partition_states(idle) == {tp: before[tp] for tp in idle}


def test_kafka_python_consumes_through_a_session(cluster_factory):
    """kafka-python 3 asks for incremental fetch sessions by default: it reads records produced before and
    while it polls, and its session with the broker is incremental by then."""
    from kafka import KafkaConsumer, TopicPartition
    cluster = cluster_factory(1)
    topic = create_topic(cluster, unique("kp"), partitions=2)
    broker = cluster.brokers[1]
    host, port = broker.bootstrap.rsplit(":", 1)

    def send(partition, value):
        conn = Connection(host, int(port), "fetch-session-test", 15.0)
        try:
            conn.send(produce_request(7, topic, partition, build_batch(2, 0, [Rec(b"k", value,
                                                                                   int(time.time() * 1000))]),
                                      acks=1, timeout_ms=5000))
        finally:
            conn.close()
    send(0, b"before")
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                      request_timeout_ms=15000, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got = []

        def poll_until(n):
            deadline = time.monotonic() + 15
            while len(got) < n and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=200).values():
                    got.extend(r.value for r in recs)
        poll_until(1)
        send(1, b"during-1")
        send(0, b"during-0")
        poll_until(3)
        assert sorted(got) == [b"before", b"during-0", b"during-1"]
        # (the client's own handler: a session id from the broker and incremental epochs since)
        [handler] = c._fetcher._session_handlers.values()
        assert handler.next_metadata.session_id != 0 and handler.next_metadata.epoch > 1
    finally:
        c.close()
