"""Log compaction on a real broker process: a topic created by kadmin with cleanup.policy=compact, thousands of
updates over a few hundred keys from confluent-kafka (idempotent producer), cleaned by the broker's log cleaner
(log.cleaner.backoff.ms=200) down to the latest record of each key, read back by a kafka-python consumer
(no group: assign + seek); tombstoned keys are gone once delete.retention.ms has passed. The compacted log is
first read by an 0.10 consumer (down-converted to magic 1) that had read the log before cleaning: the broker's
conversion cache must not serve it the replaced segments' records."""
from __future__ import annotations

import os
import time

from click.testing import CliRunner
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from admin_cli.main import cli as kadmin
from tests.integration.conftest import wait_until

TOPIC = "compacted"
KEYS = 300
ROUNDS = 30                 # 9,000 updates
TOMBSTONED = range(0, KEYS, 10)
SEGMENT_BYTES = 16 * 1024
DELETE_RETENTION_MS = 3000


def key(i: int) -> bytes:
    return b"key-%04d" % i


def produce(bootstrap: str, messages) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "batch.num.messages": 50, "compression.type": "lz4"})
    errors = []
    for k, v in messages:
        p.produce(TOPIC, key=k, value=v, partition=0, on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(30) == 0
    assert errors == []


def filler(n: int, tag: bytes):
    """Updates of one key (incompressible), enough to roll the active segment so what came before can be
    cleaned (the active segment never is)."""
    return [(b"filler", tag + b"-%d-" % i + os.urandom(200)) for i in range(n)]


def read_all(bootstrap: str, **config):
    """Every record of the partition from offset 0 up to the end offset: (offset, key, value)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=15000, **config)
    tp = TopicPartition(TOPIC, 0)
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek(tp, 0)
        out = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.offset, r.key, r.value) for r in records)
        assert consumer.position(tp) >= end, "the consumer did not reach the end of the log"
        return out
    finally:
        consumer.close()


def log_bytes(broker) -> int:
    d = os.path.join(broker.dir, "data", f"{TOPIC}-0")
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".log"))


def test_compacted_topic_keeps_the_latest_value_of_each_key_and_drops_old_tombstones(cluster_factory):
    c = cluster_factory(1, **{"log.cleaner.backoff.ms": 200, "log.segment.delete.delay.ms": 200})
    broker = c.brokers[1]
    result = CliRunner().invoke(kadmin, [
        "--zookeeper", c.zk_connect, "create-topic", TOPIC, "--partitions", "1", "--replication-factor", "1",
        "--config", "cleanup.policy=compact", "--config", f"segment.bytes={SEGMENT_BYTES}",
        "--config", "min.cleanable.dirty.ratio=1", "--config", f"delete.retention.ms={DELETE_RETENTION_MS}"])
    assert result.exit_code == 0, result.output
    wait_until(lambda: (s := c.zk.get_partition_state(TOPIC, 0)) is not None and s.leader == 1, message="leader")

    updates = [(key(i), b"v%d-%d" % (i, r)) for r in range(ROUNDS) for i in range(KEYS)]
    produce(c.bootstrap, updates + [(key(i), None) for i in TOMBSTONED] + filler(200, b"a"))
    live = {key(i): b"v%d-%d" % (i, ROUNDS - 1) for i in range(KEYS) if i not in TOMBSTONED}
    old = {"api_version": (0, 10, 1)}       # Fetch v3: magic 1, down-converted and cached by the broker
    assert len(read_all(c.bootstrap, **old)) == len(updates) + len(TOMBSTONED) + 200     # nothing cleaned yet
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "alter-config", "--topic", TOPIC,
                                         "--add-config", "min.cleanable.dirty.ratio=0.01"])
    assert result.exit_code == 0, result.output

    # the cleaner (every 200 ms, dirty ratio above 0.01) shrinks the log to one record per key (and a few of the
    # filler key's, in the active segment)
    def compacted():
        records = read_all(c.bootstrap, **old)
        data = [(k, v) for _, k, v in records if k != b"filler"]
        return records if len(data) == len(live) + len(TOMBSTONED) else None
    records = wait_until(compacted, timeout=30, interval=0.5, message="one record per key")
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets))
    latest = {k: v for _, k, v in records if k != b"filler"}
    assert latest == {**live, **{key(i): None for i in TOMBSTONED}}     # tombstones kept for now
    # each survivor is at the offset of its last update: round ROUNDS - 1 of key i is offset (ROUNDS-1)*KEYS + i
    assert all(o == (ROUNDS - 1) * KEYS + int(k[4:]) for o, k, v in records if k != b"filler" and v is not None)
    assert sum(1 for _, k, _ in records if k == b"filler") < 200
    assert log_bytes(broker) < 100 * 1024          # from more than 200 KB

    # delete.retention.ms later, new dirty data makes the cleaner run again: the tombstones are gone
    time.sleep(DELETE_RETENTION_MS / 1000)
    produce(c.bootstrap, filler(200, b"b"))

    def tombstones_gone():
        records = read_all(c.bootstrap)
        return records if not any(v is None for _, _, v in records) else None
    records = wait_until(tombstones_gone, timeout=30, interval=0.5, message="tombstones removed")
    assert {k: v for _, k, v in records if k != b"filler"} == live
    assert [v for _, k, v in records if k == b"filler"][-1].startswith(b"b-199-")

    # the cleaner's checkpoint is Kafka's offset checkpoint file in the log dir
    with open(os.path.join(broker.dir, "data", "cleaner-offset-checkpoint")) as f:
        lines = f.read().splitlines()
    assert lines[:2] == ["0", "1"] and lines[2].startswith(f"{TOPIC} 0 ")
    assert "cleaned: dirty section" in broker.log()
