"""Pipelined acks=all produces (network.server's deferred answers): while a Produce waits for its followers, the
leader reads the connection on and appends the next Produce at once; answers still come back in request order
(kbroker's client checks each correlation id), any other request waits for the answers before it, and at most
MAX_DEFERRED answers wait per connection. The follower is paused with SIGSTOP (its ZooKeeper session outlives
the pause and replica.lag.time.max.ms keeps it in the ISR), so nothing can be acknowledged meanwhile."""
from __future__ import annotations

import contextlib
import glob
import os
import signal
import time

import pytest
from kafka.protocol.metadata import MetadataRequest

from kbroker.network.server import MAX_DEFERRED
from kbroker.protocol.client import Connection, KafkaError
from tests.integration.conftest import wait_until
from tests.integration.test_produce_fetch_bad_input import NONE, create_topic, produce_request, v2_batch

TOPIC = "pipelined"
REQUEST_TIMED_OUT = 7


@pytest.fixture(params=[None, "sasl_ssl"])
def pair(request, cluster_factory):
    """Broker 1 leads TOPIC-0, broker 2 follows, both in the ISR; one record is committed already. Plaintext,
    and SASL_SSL (answers sent from the purgatory's greenlet while the reader waits in an SSL read)."""
    cluster = cluster_factory(2, security=request.param, **{"zookeeper.session.timeout.ms": 30000})
    create_topic(cluster, TOPIC, "--replica-assignment", "1:2")
    leader = cluster.brokers[1]

    def first_committed():
        try:
            return produce_one(leader, b"first").error_code == NONE
        except KafkaError:
            return False
    wait_until(first_committed, 20, message="the first record committed")
    return cluster


def client_for(broker) -> Connection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return Connection(host, int(port), "pipelining-test", 10.0, security=broker.security)


def produce_one(broker, value: bytes):
    """The partition response of one acks=all Produce of `value` on a connection of its own."""
    c = client_for(broker)
    try:
        [t] = c.send(produce_request(TOPIC, 0, v2_batch([value]), 8, acks=-1)).responses
        return t.partition_responses[0]
    finally:
        c.close()


def segment_bytes(broker) -> int:
    [path] = glob.glob(os.path.join(broker.dir, "data", f"{TOPIC}-0", "*.log"))
    return os.path.getsize(path)


def answers(c, n: int) -> list:
    return [c.receive(timeout=30) for _ in range(n)]


@contextlib.contextmanager
def stopped(broker):
    """The broker SIGSTOPped for the block (its ZooKeeper session outlives it), then continued."""
    broker.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        broker.proc.send_signal(signal.SIGCONT)


def test_produces_behind_a_waiting_one_are_appended_at_once_and_answered_in_order(pair):
    leader, follower = pair.brokers[1], pair.brokers[2]
    batch = v2_batch([b"a", b"b"])
    before = segment_bytes(leader)
    c = client_for(leader)
    with stopped(follower):
        for _ in range(4):
            c.submit(produce_request(TOPIC, 0, batch, 8, acks=-1))
        c.submit(MetadataRequest(version=1, topics=[TOPIC]))
        c.submit(produce_request(TOPIC, 0, batch, 8, acks=1))
        # All four acks=all batches are in the leader's log although none can be acknowledged yet (Kafka would
        # read the second request only after answering the first).
        wait_until(lambda: segment_bytes(leader) == before + 4 * len(batch), 10, message="4 batches appended")
        assert c.in_flight == 6
    *produced, metadata, last = answers(c, 6)
    c.close()
    offsets = []
    for response in produced:
        [t] = response.responses
        [p] = t.partition_responses
        assert p.error_code == NONE
        offsets.append(p.base_offset)
    assert offsets == [1, 3, 5, 7]
    assert [t[1] for t in metadata.topics] == [TOPIC]
    # The Metadata request waited for the answers before it, so the acks=1 one was appended after them all.
    assert last.responses[0].partition_responses[0].base_offset == 9
    assert segment_bytes(leader) == before + 5 * len(batch)


def test_waiting_produces_time_out_in_order(pair):
    leader, follower = pair.brokers[1], pair.brokers[2]
    c = client_for(leader)
    with stopped(follower):
        for i in range(3):
            request = produce_request(TOPIC, 0, v2_batch([b"late-%d" % i]), 8, acks=-1)
            request.timeout_ms = 300
            c.submit(request)
        results = [r.responses[0].partition_responses[0] for r in answers(c, 3)]
    c.close()
    assert [p.error_code for p in results] == [REQUEST_TIMED_OUT] * 3
    # Once the follower is back, acks=all works again on a new connection.
    after = produce_one(leader, b"after")
    assert after.error_code == NONE
    assert after.base_offset == 4


def test_a_connection_stops_reading_at_max_deferred_answers(pair):
    leader, follower = pair.brokers[1], pair.brokers[2]
    batch = v2_batch([b"x"])
    before = segment_bytes(leader)
    c = client_for(leader)
    with stopped(follower):
        for _ in range(MAX_DEFERRED + 3):
            c.submit(produce_request(TOPIC, 0, batch, 8, acks=-1))
        wait_until(lambda: segment_bytes(leader) == before + MAX_DEFERRED * len(batch), 10,
                   message=f"{MAX_DEFERRED} batches appended")
        time.sleep(1)   # the rest stay unread while the answers wait
        assert segment_bytes(leader) == before + MAX_DEFERRED * len(batch)
    results = [r.responses[0].partition_responses[0] for r in answers(c, MAX_DEFERRED + 3)]
    c.close()
    assert [p.error_code for p in results] == [NONE] * (MAX_DEFERRED + 3)
    assert [p.base_offset for p in results] == list(range(1, MAX_DEFERRED + 4))


def test_a_client_leaving_with_answers_pending_harms_nothing(pair):
    leader, follower = pair.brokers[1], pair.brokers[2]
    c = client_for(leader)
    with stopped(follower):
        for i in range(3):
            c.submit(produce_request(TOPIC, 0, v2_batch([b"orphan-%d" % i]), 8, acks=-1))
        wait_until(lambda: segment_bytes(leader) > 0 and c.in_flight == 3, 10)
        c.close()
    after = produce_one(leader, b"next")
    assert after.error_code == NONE
    assert after.base_offset == 4   # the orphans were appended (and replicated) before it
    assert leader.alive() and "Traceback" not in leader.log()
