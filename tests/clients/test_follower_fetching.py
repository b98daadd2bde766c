"""Follower fetching (KIP-392) as a user of 3 brokers in racks r1, r2, r3 with
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector sees it: a librdkafka consumer with
client.rack=r2 reads from broker 2 (the follower in its rack: the brokers' BytesOut metrics say which broker sent
the records) exactly what a consumer reading from the leader gets; kafka-python and aiokafka, which send no rack,
keep reading from the leader; a consumer's incremental fetch session works on a follower. Bad input on a follower:
Fetch v10, an offset at its high watermark (nothing yet), one out of range, a leader epoch it does not know yet;
and a broker configured with a selector class kbroker cannot load does not start."""
from __future__ import annotations

import asyncio
import os
import signal
import urllib.request

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from admin_cli.main import cli
from kbroker.cluster import BrokerProcess
from kbroker.protocol.client.requests import fetch_request
from kbroker.protocol.errors import Errors
from kbroker.replica.selector import RACK_AWARE_REPLICA_SELECTOR
from tests.conftest import free_port, fresh_chroot
from tests.integration.conftest import Cluster, wait_until

from ._util import raw_request, unique

N = 200


@pytest.fixture(scope="module")
def racks(zookeeper, tmp_path_factory):
    """Brokers 1-3 in racks r1-r3 with the rack-aware selector and a metrics endpoint each."""
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("racks")))
    try:
        for i in (1, 2, 3):
            port = free_port()
            # (a session timeout that outlasts a broker paused for a few seconds)
            b = c.add(i, **{"broker.rack": f"r{i}", "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR,
                            "metrics.port": port, "zookeeper.session.timeout.ms": 30000})
            b.metrics_port = port
        c.wait_ready([1, 2, 3])
        yield c
    finally:
        c.stop()


def bytes_out(broker, topic: str) -> float:
    """The broker's kafka_server_brokertopicmetrics_bytesout_total for the topic: bytes it sent to consumers."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "kafka_server_brokertopicmetrics_bytesout_total" and s.labels.get("topic") == topic:
                return s.value
    return 0.0


def replicated_topic(c) -> str:
    """A topic on brokers 1 (leader), 2, 3 holding N records of varied sizes, every replica's high watermark at N."""
    topic = unique("racks")
    r = CliRunner().invoke(cli, ["--zookeeper", c.zk_connect, "create-topic", topic, "--replica-assignment", "1:2:3"])
    assert r.exit_code == 0, r.output
    wait_until(lambda: (s := c.zk.get_partition_state(topic, 0)) and sorted(s.isr) == [1, 2, 3], message="isr")
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "lz4"})
    for i in range(N):
        p.produce(topic, key=b"k%d" % i, value=os.urandom(i % 50) + b"v%d" % i, partition=0,
                  headers=[("h", b"%d" % i)])
    assert p.flush(30) == 0
    wait_until(lambda: all(high_watermark(c.brokers[b], topic) == N for b in (2, 3)), message="followers' HW")
    return topic


def fetch(broker, topic, offset, version=11, rack="", epoch=-1, max_wait_ms=0):
    request = fetch_request(version, topic, 0, offset, 1 << 20, max_wait_ms=max_wait_ms)
    if version >= 11:
        request.rack_id = rack
    if version >= 9:
        request.topics[0].partitions[0].current_leader_epoch = epoch
    response = raw_request(broker.bootstrap, request)
    return response.responses[0].partitions[0]


def high_watermark(broker, topic) -> int:
    return fetch(broker, topic, 0).high_watermark


def librdkafka_read(c, topic, **settings) -> list:
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000, **settings})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while len(out) < N:
            m = consumer.poll(10)
            assert m is not None, f"no record after {len(out)}"
            assert m.error() is None, m.error()
            out.append((m.offset(), m.key(), m.value(), m.timestamp(), m.headers()))
    finally:
        consumer.close()
    return out


def test_rack_aware_consumer_reads_from_the_follower_in_its_rack(racks):
    c = racks
    topic = replicated_topic(c)
    before = {i: bytes_out(b, topic) for i, b in c.brokers.items()}

    from_follower = librdkafka_read(c, topic, **{"client.rack": "r2"})
    sent = {i: bytes_out(b, topic) - before[i] for i, b in c.brokers.items()}
    assert sent[2] > 0 and sent[1] == 0 and sent[3] == 0, sent   # every record came from broker 2

    from_leader = librdkafka_read(c, topic)                      # no client.rack: the leader
    sent_after = {i: bytes_out(b, topic) - before[i] for i, b in c.brokers.items()}
    assert sent_after[1] > 0 and sent_after[2] == sent[2] and sent_after[3] == 0
    assert [r[0] for r in from_follower] == list(range(N))
    assert from_follower == from_leader                          # the same records, keys, timestamps, headers

    # And the same bytes: the record batches broker 2 serves a consumer are the leader's, byte for byte.
    assert fetch(c.brokers[2], topic, 0).records == fetch(c.brokers[1], topic, 0).records


def test_clients_without_a_rack_read_from_the_leader(racks):
    c = racks
    topic = replicated_topic(c)
    before = {i: bytes_out(b, topic) for i, b in c.brokers.items()}

    consumer = KafkaConsumer(bootstrap_servers=c.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    kafka_python = [(r.offset, r.key, r.value) for r in consumer]
    consumer.close()

    async def aiokafka_read():
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition as ATopicPartition
        ac = AIOKafkaConsumer(bootstrap_servers=c.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await ac.start()
        try:
            ac.assign([ATopicPartition(topic, 0)])
            out = []
            while len(out) < N:
                batch = await ac.getmany(timeout_ms=10000)
                assert batch, f"no record after {len(out)}"
                out += [(r.offset, r.key, r.value) for records in batch.values() for r in records]
            return out
        finally:
            await ac.stop()
    aiokafka = asyncio.run(aiokafka_read())

    assert [r[0] for r in kafka_python] == [r[0] for r in aiokafka] == list(range(N))
    assert kafka_python == aiokafka
    sent = {i: bytes_out(b, topic) - before[i] for i, b in c.brokers.items()}
    assert sent[1] > 0 and sent[2] == 0 and sent[3] == 0, sent


def test_the_leader_names_the_replica_and_followers_refuse_what_kafka_refuses(racks):
    c = racks
    topic = replicated_topic(c)
    leader, follower = c.brokers[1], c.brokers[2]
    epoch = c.zk.get_partition_state(topic, 0).leader_epoch

    sent = fetch(leader, topic, 0, rack="r2")   # the leader's answer: no records, broker 2, its own offsets
    assert (sent.error_code, sent.preferred_read_replica, sent.high_watermark) == (0, 2, N)
    assert not sent.records
    assert fetch(leader, topic, 0, rack="r1").preferred_read_replica == -1   # the leader is in the rack
    assert fetch(leader, topic, 0, rack="r9").preferred_read_replica == -1   # no replica there

    served = fetch(follower, topic, 0, epoch=epoch)
    assert served.error_code == 0 and served.records and served.high_watermark == N
    assert fetch(follower, topic, 0, version=10).error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert fetch(follower, topic, 0, epoch=epoch + 1).error_code == Errors.UNKNOWN_LEADER_EPOCH   # (FENCED: unit)
    assert fetch(follower, topic, N + 1).error_code == Errors.OFFSET_OUT_OF_RANGE
    at_end = fetch(follower, topic, N, max_wait_ms=200)    # nothing above its high watermark yet: an empty answer
    assert at_end.error_code == 0 and not at_end.records


def test_a_follower_answers_nothing_above_its_high_watermark_until_it_moves(racks):
    """Broker 3 paused (still in the ISR): the leader's high watermark stays at N while broker 2 copies 5 more
    records, so broker 2 holds offsets its high watermark does not cover yet. A consumer asking it for one of them
    gets no records and no error; past its log end, OFFSET_OUT_OF_RANGE; once broker 3 resumes, the records."""
    c = racks
    topic = replicated_topic(c)
    leader, follower, paused = c.brokers[1], c.brokers[2], c.brokers[3]
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        p = Producer({"bootstrap.servers": leader.bootstrap, "acks": 1})
        for i in range(5):
            p.produce(topic, value=b"unreplicated %d" % i, partition=0)
        assert p.flush(30) == 0
        wait_until(lambda: fetch(follower, topic, N + 5).error_code == 0, message="broker 2's log end at N + 5")
        above = fetch(follower, topic, N + 2)
        assert (above.error_code, above.high_watermark, above.records) == (0, N, b"")
        assert fetch(follower, topic, N + 6).error_code == Errors.OFFSET_OUT_OF_RANGE
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    wait_until(lambda: fetch(follower, topic, N + 2).records, message="broker 2's high watermark past N + 2")
    assert fetch(follower, topic, N + 2).high_watermark == N + 5


def test_a_consumers_fetch_session_on_a_follower(racks):
    """An incremental fetch session (KIP-227) on a follower works as on a leader: opened by a full fetch, then
    asking only for what changed, and a long poll there answered with the next record once it is replicated."""
    c = racks
    topic = replicated_topic(c)
    follower = c.brokers[3]

    def session_fetch(session_id, epoch, offset=None, max_wait_ms=0):
        request = fetch_request(12, topic, 0, 0 if offset is None else offset, 1 << 20, max_wait_ms=max_wait_ms)
        request.session_id, request.session_epoch = session_id, epoch
        if offset is None:   # an incremental fetch naming no partition: the session's cached ones
            request.topics = []
        return raw_request(follower.bootstrap, request)

    opened = session_fetch(0, 0, offset=0)
    assert opened.error_code == 0 and opened.session_id != 0
    assert opened.responses[0].partitions[0].records
    moved = session_fetch(opened.session_id, 1, offset=N)   # nothing new at N yet: no partition in the answer
    assert (moved.error_code, moved.session_id, moved.responses) == (0, opened.session_id, [])

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    p.produce(topic, value=b"one more", partition=0)
    assert p.flush(30) == 0
    waited = session_fetch(opened.session_id, 2, max_wait_ms=10000)
    [partition] = waited.responses[0].partitions
    assert partition.error_code == 0 and partition.high_watermark == N + 1 and b"one more" in partition.records


def test_a_selector_class_kbroker_cannot_load_stops_the_start(tmp_path, zk_connect):
    b = BrokerProcess.create(1, str(tmp_path / "b"), zk_connect, {"replica.selector.class": "com.example.Nearest"})
    b.start()
    assert b.proc.wait(60) == 2
    assert "replica.selector.class" in b.log() and "com.example.Nearest" in b.log()
