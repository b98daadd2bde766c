"""No acknowledged write is lost: an acks=all producer runs while brokers are killed, stopped, paused past
their ZooKeeper session and restarted; afterwards every acknowledged record is at its acknowledged offset, and
the three replicas' logs agree entry for entry. Run on a plaintext cluster and on a secured one (the
`kbroker cluster up --security sasl_ssl` preset: SASL_SSL for clients, the controller channel and the replica
fetchers, SCRAM-SHA-512, the authorizer on; the clients log in as the admin)."""
from __future__ import annotations

import glob
import os
import signal
import struct
import threading
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from admin_cli.main import cli as kadmin
from kbroker.records.entries import iter_entries
from tests.integration.conftest import SESSION_TIMEOUT_MS, wait_until

TOPIC = "chaos"
PARTITIONS = 3


class AckedProducer:
    """Produces unique values with acks=all until stopped; remembers what was acknowledged where."""

    def __init__(self, bootstrap: str, security: dict):
        self.producer = Producer({**security, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 100})
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg):
        if err is None:
            self.acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            self.failed += 1

    def _run(self):
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, value=b"value-%08d" % i, partition=i % PARTITIONS,
                                      on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(120)


def leader_of(c, partition: int) -> int:
    state = c.zk.get_partition_state(TOPIC, partition)
    return state.leader if state else -1


def all_in_sync(c) -> bool:
    for p in range(PARTITIONS):
        state = c.zk.get_partition_state(TOPIC, p)
        if state is None or sorted(state.isr) != [1, 2, 3] or state.leader < 0:
            return False
    return True


def log_entries(broker_dir: str, partition: int) -> dict[int, tuple[int, int]]:
    """last offset -> (size, crc) of every entry in a replica's log files."""
    out = {}
    for path in sorted(glob.glob(os.path.join(broker_dir, "data", f"{TOPIC}-{partition}", "*.log"))):
        data = open(path, "rb").read()
        for e in iter_entries(data):
            out[e.last_offset] = (e.size, struct.unpack_from(">I", data, e.position + 17)[0])
    return out


def kafka_python_security(c) -> dict:
    """The admin's login as kafka-python's options ({} on a plaintext cluster)."""
    props = c.client_properties
    if not props:
        return {}
    return {"security_protocol": props["security.protocol"], "sasl_mechanism": props["sasl.mechanism"],
            "sasl_plain_username": "admin", "sasl_plain_password": c.security.admin_password,
            "ssl_cafile": props["ssl.truststore.location"]}


@pytest.mark.parametrize("security", [None, "sasl_ssl"], ids=["plaintext", "sasl_ssl"])
def test_acks_all_survives_kills_stops_pauses_and_restarts(cluster_factory, security):
    c = cluster_factory(3, security, **{"replica.lag.time.max.ms": 6000, "unclean.leader.election.enable": "false"})
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "create-topic", TOPIC, "--partitions",
                                         str(PARTITIONS), "--replication-factor", "3",
                                         "--config", "min.insync.replicas=2"])
    assert result.exit_code == 0, result.output
    wait_until(lambda: all_in_sync(c), message="topic online")

    producer = AckedProducer(c.bootstrap, c.librdkafka_config)
    producer.thread.start()
    time.sleep(2)

    def restart(b):
        b.start()
        c.wait_ready([b.id])

    # 1. kill -9 the leader of partition 0, then bring it back.
    victim = c.brokers[leader_of(c, 0)]
    victim.kill9()
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 2)
    restart(victim)
    wait_until(lambda: all_in_sync(c), timeout=40, message="ISR restored after kill -9")
    # 2. SIGTERM (controlled shutdown) of another broker.
    stopped = c.brokers[leader_of(c, 1)]
    assert stopped.terminate() == 0
    time.sleep(1)
    restart(stopped)
    wait_until(lambda: all_in_sync(c), timeout=40, message="ISR restored after controlled shutdown")
    # 3. SIGSTOP a broker past its session timeout, then let it go on.
    paused = c.brokers[leader_of(c, 2)]
    paused.proc.send_signal(signal.SIGSTOP)
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 3)
    paused.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: all_in_sync(c), timeout=40, message="ISR restored after a pause")
    time.sleep(2)

    producer.stop.set()
    producer.thread.join(150)
    assert len(producer.acked) > 500, "the producer made too little progress to mean anything"

    # Every acknowledged record is where it was acknowledged.
    consumer = KafkaConsumer(bootstrap_servers=c.bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=5000, max_partition_fetch_bytes=10 ** 6, **kafka_python_security(c))
    parts = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(parts)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(parts)
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in parts):
        for tp, records in consumer.poll(timeout_ms=1000).items():
            for r in records:
                seen[(tp.partition, r.offset)] = r.value
    consumer.close()
    lost = {k: v for k, v in producer.acked.items() if seen.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {sorted(lost.items())[:5]}"

    # The replicas agree entry for entry (no offset holds two different records).
    for b in c.brokers.values():
        assert b.terminate() == 0
    for p in range(PARTITIONS):
        logs = [log_entries(b.dir, p) for b in c.brokers.values()]
        common = set(logs[0]) & set(logs[1]) & set(logs[2])
        assert max(common) >= max(o for (q, o) in producer.acked if q == p)
        for offset in common:
            assert logs[0][offset] == logs[1][offset] == logs[2][offset], f"replicas differ at {TOPIC}-{p}@{offset}"
