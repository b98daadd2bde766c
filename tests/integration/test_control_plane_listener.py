"""control.plane.listener.name (KIP-291) on 3 real brokers with a client listener (PLAINTEXT, also the inter-broker
one) and a CONTROL listener: every broker's request log shows LeaderAndIsr, UpdateMetadata and StopReplica
arriving on CONTROL only, and clients, follower fetches and ControlledShutdown on PLAINTEXT; a broker restart,
a leader election after a kill and a topic deletion all work over it. A broker whose control.plane.listener.name
is not a listener of its own exits 2 with Kafka's message."""
from __future__ import annotations

import os
import re
from collections import defaultdict

from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition

from admin_cli.main import cli as kadmin
from kbroker.cluster import BrokerProcess, free_port_range
from tests.integration.conftest import wait_until

CONTROL_SETTINGS = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:PLAINTEXT",
                    "inter.broker.listener.name": "PLAINTEXT", "control.plane.listener.name": "CONTROL"}
CONTROLLER_REQUESTS = {"LeaderAndIsr", "UpdateMetadata", "StopReplica"}
REQUEST = re.compile(r"Completed request: (\w+) v\d+ .* on (\S+) in ")


def requests_by_listener(broker) -> dict[str, set[str]]:
    """{request name: the listeners it came in on} from the broker's kafka-request.log."""
    out = defaultdict(set)
    path = os.path.join(broker.dir, "logs", "kafka-request.log")
    with open(path, errors="replace") as f:
        for line in f:
            m = REQUEST.search(line)
            if m:
                out[m.group(1)].add(m.group(2))
    return out


def kadmin_ok(*args):
    r = CliRunner().invoke(kadmin, list(args))
    assert r.exit_code == 0, r.output


def roundtrip(c, topic: str, n: int, start: int = 0) -> None:
    """Produce n records with acks=all through the client listener, and read every record of the topic back."""
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=b"%d" % (start + i), partition=0)
    assert p.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "cp", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while len(got) < start + n:
            m = consumer.poll(10)
            assert m is not None and m.error() is None, m and m.error()
            got.append(int(m.value()))
    finally:
        consumer.close()
    assert got == list(range(start + n))


def test_controller_requests_use_the_control_plane_listener_only(cluster_factory):
    c = cluster_factory()
    for i in (1, 2, 3):
        port = free_port_range(2)
        b = c.add(i, start=False, **{**CONTROL_SETTINGS, "listeners": f"PLAINTEXT://127.0.0.1:{port},"
                                                                    f"CONTROL://127.0.0.1:{port + 1}"})
        b.port = port   # clients (and the fixtures' readiness checks) use the PLAINTEXT listener
        b.start("--logger", "kafka.request.logger=DEBUG")
    c.wait_ready([1, 2, 3])
    for i in (1, 2, 3):   # registered with both endpoints, as Kafka advertises every listener
        assert {e.listener for e in c.zk.get_broker(i).endpoints} == {"PLAINTEXT", "CONTROL"}

    kadmin_ok("--zookeeper", c.zk_connect, "create-topic", "cp", "--replica-assignment", "1:2:3")
    kadmin_ok("--zookeeper", c.zk_connect, "create-topic", "gone", "--replica-assignment", "2:3:1")
    wait_until(lambda: (s := c.zk.get_partition_state("cp", 0)) and sorted(s.isr) == [1, 2, 3], message="isr")
    roundtrip(c, "cp", 20)

    c.brokers[2].terminate()                  # a controlled shutdown, then a restart
    c.brokers[2].start("--logger", "kafka.request.logger=DEBUG")
    c.wait_ready([1, 2, 3])
    wait_until(lambda: sorted(c.zk.get_partition_state("cp", 0).isr) == [1, 2, 3], message="broker 2 back in sync")
    kadmin_ok("--zookeeper", c.zk_connect, "delete-topic", "gone")   # StopReplica to its replicas
    wait_until(lambda: "gone" not in c.zk.get_all_topics(), message="topic deleted")
    c.brokers[1].kill9()                      # the leader dies: another is elected
    wait_until(lambda: c.zk.get_partition_state("cp", 0).leader in (2, 3), message="a new leader")
    roundtrip(c, "cp", 10, start=20)

    seen = {i: requests_by_listener(c.brokers[i]) for i in (1, 2, 3)}
    for i, requests in seen.items():
        for name in CONTROLLER_REQUESTS & requests.keys():
            assert requests[name] == {"CONTROL"}, (i, name, requests[name])
        for name in ("Produce", "FetchConsumer", "FetchFollower", "Metadata"):
            assert requests.get(name, {"PLAINTEXT"}) == {"PLAINTEXT"}, (i, name, requests[name])
    assert all({"LeaderAndIsr", "UpdateMetadata"} <= seen[i].keys() for i in (1, 2, 3))
    assert all("StopReplica" in seen[i] for i in (1, 2, 3))
    assert any(seen[i].get("ControlledShutdown") == {"PLAINTEXT"} for i in (1, 2, 3))


def test_a_control_plane_listener_that_is_not_a_listener_stops_the_start(tmp_path, zk_connect):
    b = BrokerProcess.create(1, str(tmp_path / "b"), zk_connect, {**CONTROL_SETTINGS})   # no CONTROL listener
    b.start()
    assert b.proc.wait(60) == 2
    assert ("control.plane.listener.name must be a listener name defined in advertised.listeners. The valid options "
            "based on currently configured listeners are PLAINTEXT") in b.log()
