"""Replication throttles as Kafka 2.8 applies them (KIP-73), on real brokers and ZooKeeper: a follower out of the
ISR gets nothing of a leader-throttled partition while the leader rate is over, from the live config and from the
config read at start-up, and joins the ISR once the throttle goes; an in-sync follower under a tiny throttle stays
in the ISR; `kadmin reassign --throttle` writes what kafka-reassign-partitions.sh writes and --verify (or the
command's own wait) removes it, in both kadmin modes; bad values are refused with Kafka's messages, and a malformed
list written straight to ZooKeeper is ignored (logged) while the broker keeps serving."""
from __future__ import annotations

import os
import threading
import urllib.request

from confluent_kafka import Producer
from kafka.protocol.consumer import FetchRequest
from prometheus_client.parser import text_string_to_metric_families

from kbroker.protocol.client import Connection
from tests.conftest import free_port
from tests.integration.conftest import wait_until
from tests.integration.test_kadmin_modes import doc, kadmin, ok, one_error
from tests.integration.test_kadmin_replication import plan, raw, wait_in_sync, write_json

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
KB = 1024


def follower_fetch(broker, topic: str, replica_id: int, offset: int, max_bytes: int = 64 * KB) -> tuple[int, int]:
    """(record bytes, high watermark) of one Fetch of partition 0 as follower replica_id (or a consumer: -1)."""
    host, port = broker.bootstrap.rsplit(":", 1)
    conn = Connection(host, int(port), "throttle-test", 15.0)
    F = FetchRequest
    try:
        response = conn.send(F(version=11, replica_id=replica_id, max_wait_ms=100, min_bytes=1, max_bytes=max_bytes,
                               isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                               topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                                   partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                   partition_max_bytes=max_bytes)])]))
    finally:
        conn.close()
    p = response.responses[0].partitions[0]
    assert p.error_code == 0, p
    return len(p.records or b""), p.high_watermark


def held_back(broker, topic: str) -> bool:
    """A fetch as follower 2 from offset 0 gets no records although the partition has some (after the previous
    fetch took the leader rate over its bound), while a consumer's fetch of the same gets records."""
    size, hw = follower_fetch(broker, topic, 2, 0)
    return size == 0 and hw > 0 and follower_fetch(broker, topic, -1, 0)[0] > 0


def produce(bootstrap: str, topic: str, count: int, size: int = KB) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    errors = []
    for i in range(count):
        producer.produce(topic, value=b"%08d" % i + b"x" * (size - 8), partition=0,
                         on_delivery=lambda err, msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors


def isr(c, topic: str) -> list[int]:
    return sorted(c.zk.get_partition_state(topic, 0).isr)


def byte_rate(broker, kind: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == f"kafka_server_{kind}replication_byte_rate")


def in_force(c, mode: str) -> dict[int, dict]:
    """kadmin cluster describe's throttles per broker."""
    return {b["id"]: b["throttles"] for b in doc(c, mode, "cluster", "describe")["brokers"]}


def test_a_follower_out_of_the_isr_is_held_back_live_and_after_a_restart_and_joins_once_the_throttle_goes(
        cluster_factory):
    c = cluster_factory()
    for i in (1, 2):   # small follower fetches, so 10 KB/s holds a 2 MB backlog back for minutes
        port = free_port()
        c.add(i, **{"metrics.port": port, "replica.fetch.max.bytes": 64 * KB}).metrics_port = port
    c.wait_ready([1, 2])
    leader = c.brokers[1]
    ok(kadmin(c, "zk", "create-topic", "held", "--replica-assignment", "1:2"))
    wait_in_sync(c, "held", {0: [1, 2]}, {0: 1})
    c.brokers[2].stop()
    wait_until(lambda: isr(c, "held") == [1], 20, 0.2, "broker 2 out of the ISR")
    produce(leader.bootstrap, "held", 2000)
    assert not held_back(leader, "held")   # no throttle yet

    # Live: the leader rate on broker 1 and partition 0's replica on broker 1 as leader-throttled.
    ok(kadmin(c, "zk", "alter-config", "--topic", "held", "--add-config", f"{LEADER_REPLICAS}=0:1"))
    ok(kadmin(c, "bs", "alter-config", "--broker", 1, "--add-config", f"{LEADER_RATE}=10000"))
    wait_until(lambda: held_back(leader, "held"), 20, 0.2, "follower fetches held back by the leader throttle")
    assert byte_rate(leader, "leader") > 10000

    # A malformed list written straight to ZooKeeper is logged and ignored: the throttle stays, the broker serves.
    c.zk.set_or_create_entity_config("topics", "held", {LEADER_REPLICAS: "0-1"})
    c.zk.create_config_change_notification("topics/held")
    ok(kadmin(c, "zk", "alter-config", "--broker", 1, "--add-config", f"{LEADER_RATE}=10001"))
    wait_until(lambda: in_force(c, "bs")[1] == {LEADER_RATE: 10001}, 20, 0.2, "the later change applied")
    assert held_back(leader, "held")
    c.zk.set_or_create_entity_config("topics", "held", {LEADER_REPLICAS: "0:1"})

    # At start-up: broker 1 restarted reads the throttles (the notifications in place are not replayed); a znode
    # that is not Kafka's JSON is logged and passed over.
    c.zk.create_recursive("/config/topics/junk", b"{not json")
    leader.stop()
    leader.start()
    c.wait_ready([1])
    wait_until(lambda: c.zk.get_partition_state("held", 0).leader == 1, 20, 0.2, "broker 1 leading again")
    wait_until(lambda: held_back(leader, "held"), 20, 0.2, "the throttle read at start-up")

    # The real follower comes back: it copies some, at the throttle's pace, and stays out of the ISR...
    c.brokers[2].start()
    segment = os.path.join(c.brokers[2].dir, "data", "held-0", "00000000000000000000.log")
    wait_until(lambda: os.path.exists(segment) and os.path.getsize(segment) > 0, 30, 0.2, "broker 2 copying")
    assert isr(c, "held") == [1] and held_back(leader, "held")
    # ...until the throttle goes: then it catches up and joins.
    ok(kadmin(c, "zk", "alter-config", "--broker", 1, "--delete-config", LEADER_RATE))
    wait_until(lambda: isr(c, "held") == [1, 2], 60, 0.2, "broker 2 back in the ISR")
    assert not held_back(leader, "held")


def test_an_in_sync_follower_under_a_tiny_throttle_stays_in_the_isr_while_producing(cluster_factory):
    c = cluster_factory(2, **{"replica.lag.time.max.ms": 2000})
    ok(kadmin(c, "zk", "create-topic", "busy", "--replica-assignment", "1:2"))
    wait_in_sync(c, "busy", {0: [1, 2]}, {0: 1})
    ok(kadmin(c, "zk", "alter-config", "--topic", "busy", "--add-config", f"{LEADER_REPLICAS}=*",
              "--add-config", f"{FOLLOWER_REPLICAS}=*"))
    for b in (1, 2):
        ok(kadmin(c, "zk", "alter-config", "--broker", b, "--add-config", f"{LEADER_RATE}=100",
                  "--add-config", f"{FOLLOWER_RATE}=100"))
    throttled = {LEADER_RATE: 100, FOLLOWER_RATE: 100}
    wait_until(lambda: in_force(c, "bs") == {1: throttled, 2: throttled}, 20, 0.2, "the throttles applied")

    # acks=all for three times replica.lag.time.max.ms, far over 100 B/s: every record acknowledged by both
    # replicas, and the follower never leaves the ISR.
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    delivered, errors, seen = [], [], set()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.add(tuple(isr(c, "busy")))
            stop.wait(0.1)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        deadline = threading.Event()
        threading.Timer(6.0, deadline.set).start()
        i = 0
        while not deadline.is_set():
            producer.produce("busy", value=b"v" * 1000, partition=0,
                             on_delivery=lambda err, msg: (errors if err else delivered).append(err or msg))
            producer.poll(0.001)
            i += 1
        assert producer.flush(30) == 0
    finally:
        stop.set()
        watcher.join()
    assert not errors and len(delivered) == i and i > 1000, (errors[:3], len(delivered), i)
    assert seen == {(1, 2)}


def test_kadmin_reassign_throttle_writes_kafkas_configs_and_verify_removes_them(cluster_factory, tmp_path):
    c = cluster_factory(3)
    ok(kadmin(c, "zk", "alter-config", "--broker", 3, "--add-config", "log.cleaner.backoff.ms=20000"))
    for mode in ("zk", "bs"):
        topic = f"thr-{mode}"
        ok(kadmin(c, "zk", "create-topic", topic, "--replica-assignment", "1:2,2:1",
                  "--config", "retention.ms=3600000"))
        wait_in_sync(c, topic, {0: [1, 2], 1: [2, 1]})
        produce(c.bootstrap, topic, 100)
        f = write_json(tmp_path, plan((topic, 0, [2, 3]), (topic, 1, [2, 1])))
        notes = set(c.zk.get_config_change_notifications())
        r = doc(c, mode, "reassign", "--reassignment-json-file", f, "--throttle", 1000000, "--no-wait")
        rate = {LEADER_RATE: "1000000", FOLLOWER_RATE: "1000000"}
        assert r["throttles"] == {"topics": {topic: {LEADER_REPLICAS: "0:1,0:2,1:1,1:2", FOLLOWER_REPLICAS: "0:3"}},
                                  "brokers": {"1": rate, "2": rate, "3": rate}}
        # Exactly what kafka-reassign-partitions.sh writes, the entities' other keys kept, each notified.
        assert raw(c.zk, f"/config/topics/{topic}") == {"version": 1, "config": {
            "retention.ms": "3600000", LEADER_REPLICAS: "0:1,0:2,1:1,1:2", FOLLOWER_REPLICAS: "0:3"}}
        assert [raw(c.zk, f"/config/brokers/{b}")["config"] for b in (1, 2, 3)] == [
            rate, rate, {"log.cleaner.backoff.ms": "20000", **rate}]
        written = [c.zk.read_config_change_notification(n) for n in c.zk.get_config_change_notifications()
                   if n not in notes]
        assert written == [f"topics/{topic}", "brokers/1", "brokers/2", "brokers/3"]
        wait_until(lambda: set(map(str, in_force(c, "bs")[1].values())) == {"1000000"}, 20, 0.2,
                   "broker 1 applying its throttles")
        assert in_force(c, "zk") == {b: {k: 1000000 for k in rate} for b in (1, 2, 3)}

        # --verify once the reassignment is done: Kafka's lines, and every throttle key gone.
        def verified(mode=mode, f=f):
            r = kadmin(c, mode, "reassign", "--reassignment-json-file", f, "--verify", output="table")
            return r.stdout if r.exit_code == 0 else None
        text = wait_until(verified, 60, 0.5, "the reassignment verified").splitlines()
        assert text[-2:] == ["Clearing broker-level throttles on brokers 1,2,3",
                             f"Clearing topic-level throttles on topic {topic}"]
        assert raw(c.zk, f"/config/topics/{topic}") == {"version": 1, "config": {"retention.ms": "3600000"}}
        assert [raw(c.zk, f"/config/brokers/{b}")["config"] for b in (1, 2, 3)] == [
            {}, {}, {"log.cleaner.backoff.ms": "20000"}]

    # Waiting: the command removes them itself once done; --preserve-throttles keeps them for --verify.
    f = write_json(tmp_path, plan(("thr-bs", 0, [3, 1])))
    r = doc(c, "bs", "reassign", "--reassignment-json-file", f, "--throttle", 2000000, "--timeout", 60)
    assert [s["state"] for s in r["status"]] == ["complete"]
    assert r["throttles_cleared"] == {"brokers": [1, 2, 3], "topics": ["thr-bs"]}
    assert raw(c.zk, "/config/topics/thr-bs")["config"] == {"retention.ms": "3600000"}
    assert raw(c.zk, "/config/brokers/1")["config"] == {}
    f = write_json(tmp_path, plan(("thr-zk", 0, [1, 3])))
    r = doc(c, "zk", "reassign", "--reassignment-json-file", f, "--throttle", 3000000, "--preserve-throttles")
    assert r["throttles_cleared"] is None
    assert raw(c.zk, "/config/brokers/1")["config"] == {LEADER_RATE: "3000000", FOLLOWER_RATE: "3000000"}
    assert doc(c, "zk", "reassign", "--reassignment-json-file", f, "--verify", "--preserve-throttles")[
        "throttles_cleared"] is None
    assert doc(c, "zk", "reassign", "--reassignment-json-file", f, "--verify")["throttles_cleared"] == {
        "brokers": [1, 2, 3], "topics": ["thr-zk"]}
    assert raw(c.zk, "/config/topics/thr-zk")["config"] == {"retention.ms": "3600000"}

    # Bad input: refused with Kafka's messages, nothing written.
    for mode in ("zk", "bs"):
        for value in ("-1", "abc"):
            line = one_error(kadmin(c, mode, "alter-config", "--broker", 1, "--add-config",
                                    f"{LEADER_RATE}={value}"), 1)
            assert f"Invalid value {value} for configuration {LEADER_RATE}" in line
            assert mode == "zk" or line.endswith("(INVALID_REQUEST)"), line   # Kafka 2.8's code for a broker config
        for value in ("0-1", "*,0:1", "x:2"):
            line = one_error(kadmin(c, mode, "alter-config", "--topic", "thr-zk", "--add-config",
                                    f"{FOLLOWER_REPLICAS}=[{value}]"), 1)   # kafka-configs' list syntax
            assert f"Invalid value {value} for configuration {FOLLOWER_REPLICAS}: must be the literal '*'" in line
            assert mode == "zk" or line.endswith("(INVALID_REQUEST)"), line
    assert raw(c.zk, "/config/brokers/1")["config"] == {}
    assert raw(c.zk, "/config/topics/thr-zk")["config"] == {"retention.ms": "3600000"}
    for args in (("--throttle", -5), ("--throttle", "1MB"), ("--verify", "--throttle", 100)):
        r = kadmin(c, "zk", "reassign", "--reassignment-json-file", f, *args)
        assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    one_error(kadmin(c, "zk", "reassign", "--reassignment-json-file", write_json(tmp_path, plan(("thr-zk", 0, [9]))),
                     "--throttle", 100), 1)
    assert raw(c.zk, "/config/brokers/1")["config"] == {}
