"""Round trips on a replicated topic (3 brokers, 3 partitions, replication factor 3): producers with acks=all
(kafka-python's and librdkafka's defaults), keyed records spread over the partitions by the clients'
partitioners, consumers of every era reading each partition from its leader; the followers' segment files end
up byte-for-byte equal to the leader's (followers append the leader's batches unchanged).

One 3-broker cluster serves the module.
"""
from __future__ import annotations

import os

import pytest

from tests.clients._util import ck_consume, create_topic, kp_consume, log_entries, sample_records, unique
from tests.integration.conftest import wait_until

PARTITIONS = 3


@pytest.fixture(scope="module")
def replicated(cluster3m):
    """30 keyed records from kafka-python (gzip, idempotent, acks=all) then 30 from librdkafka (snappy,
    acks=all). Returns (topic, {partition: [(offset, key, value, ts, headers)]})."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer
    bs = cluster3m.bootstrap
    topic = create_topic(cluster3m, unique("replicated"), partitions=PARTITIONS, replication_factor=3)
    expected = {p: [] for p in range(PARTITIONS)}

    kp = KafkaProducer(bootstrap_servers=bs, compression_type="gzip", linger_ms=20)
    try:
        assert kp.config["acks"] == -1 and kp.config["enable_idempotence"]
        recs = sample_records(30, tag="kp-")
        futures = [kp.send(topic, key=b"key-%d" % i, value=r.value, timestamp_ms=r.ts, headers=r.headers)
                   for i, r in enumerate(recs)]
        kp.flush(30)
        for i, (f, r) in enumerate(zip(futures, recs)):
            md = f.get(10)
            expected[md.partition].append((md.offset, b"key-%d" % i, r.value, r.ts, list(r.headers)))
    finally:
        kp.close(5)

    reports = []
    ck = Producer({"bootstrap.servers": bs, "compression.type": "snappy", "linger.ms": 20})
    recs = sample_records(30, tag="ck-")
    for i, r in enumerate(recs):
        ck.produce(topic, key=b"ck-key-%d" % i, value=r.value, timestamp=r.ts, headers=r.headers or None,
                   on_delivery=lambda err, m, i=i: reports.append((i, err, m.partition(), m.offset())))
    assert ck.flush(30) == 0
    for i, err, partition, offset in sorted(reports):
        assert err is None
        r = recs[i]
        expected[partition].append((offset, b"ck-key-%d" % i, r.value, r.ts, list(r.headers)))
    for p in expected:
        expected[p].sort()
        assert [o for o, *_ in expected[p]] == list(range(len(expected[p]))), p
    assert all(expected[p] for p in expected), "the partitioners left a partition empty"
    return topic, expected


def test_every_partition_read_back_by_kafka_python(cluster3m, replicated):
    topic, expected = replicated
    for p, want in expected.items():
        got = kp_consume(cluster3m.bootstrap, topic, len(want), partition=p)
        assert [(g.offset, g.key, g.value, g.timestamp, list(g.headers)) for g in got] == want, p


@pytest.mark.parametrize("era", [(0, 8, 2), (0, 10, 0)], ids=["0.8.2", "0.10.0"])
def test_every_partition_read_back_by_old_consumers(cluster3m, replicated, era):
    topic, expected = replicated
    for p, want in expected.items():
        got = kp_consume(cluster3m.bootstrap, topic, len(want), partition=p, api_version=era)
        assert [(g.offset, g.key, g.value) for g in got] == [w[:3] for w in want], p
        if era >= (0, 10, 0):
            assert [g.timestamp for g in got] == [w[3] for w in want]


def test_every_partition_read_back_by_librdkafka(cluster3m, replicated):
    topic, expected = replicated
    for p, want in expected.items():
        msgs = ck_consume(cluster3m.bootstrap, topic, len(want), partition=p)
        assert [(m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers() or []) for m in msgs] == want, p


def test_followers_hold_the_leaders_bytes(cluster3m, replicated):
    topic, expected = replicated

    def files(p):
        out = {}
        for b in cluster3m.brokers.values():
            path = os.path.join(b.dir, "data", f"{topic}-{p}", "00000000000000000000.log")
            with open(path, "rb") as f:
                out[b.id] = f.read()
        return out

    for p, want in expected.items():
        wait_until(lambda: len(set(files(p).values())) == 1, 15, message=f"replicas of {topic}-{p} equal")
        data = next(iter(files(p).values()))
        path = os.path.join(cluster3m.brokers[1].dir, "data", f"{topic}-{p}", "00000000000000000000.log")
        entries = log_entries(path)
        assert entries[-1].last_offset == len(want) - 1 and len(data) > 0
