"""JBOD: two brokers with two log dirs each. AlterReplicaLogDirs (kafka-python's KafkaAdminClient) moves replicas
between dirs while a producer writes, through a kill -9 in the middle of a move; DescribeLogDirs shows the future
replica and where each replica ends; its errors; `kadmin reassign` with "log_dirs" in both modes."""
from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError

from admin_cli.main import cli
from tests.integration.conftest import Cluster, wait_until
from tests.integration.test_cluster import wait_topic
from zk import admin as zk_admin

BROKERS = (1, 2)
THROTTLE = 30_000   # replica.alter.log.dirs.io.max.bytes.per.second while a move is watched
UNLIMITED = 2 ** 63 - 1


def log_dirs(c: Cluster, broker_id: int) -> list[str]:
    return [os.path.join(c.workdir, f"broker-{broker_id}", d) for d in ("d0", "d1")]


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = Cluster(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path_factory.mktemp("jbod")))
    for i in BROKERS:
        c.add(i, **{"log.dirs": ",".join(log_dirs(c, i)), "log.segment.bytes": 64 * 1024,
                    "log.segment.delete.delay.ms": 100, "auto.leader.rebalance.enable": "false",
                    "replica.alter.log.dirs.io.max.bytes.per.second": THROTTLE})
    c.wait_ready(BROKERS)
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=10000)
    yield c, admin
    admin.close()
    c.stop()


def kadmin(c: Cluster, mode: str, *args):
    target = ["--zookeeper", c.zk_connect] if mode == "zk" else ["--bootstrap-server", c.bootstrap]
    result = CliRunner().invoke(cli, [*target, "--output", "json", *map(str, args)], catch_exceptions=False)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def placement(admin, broker_id: int, topic: str) -> dict:
    """{partition: (current log dir, future log dir or None)} of the topic's replicas on the broker, with the
    future replica's offset lag: {partition: (current, future, lag)}."""
    (r,) = admin.describe_log_dirs({topic: list(range(4))}, brokers=[broker_id])
    out: dict = {}
    for d in r["log_dirs"]:
        for t in d["topics"]:
            for p in t["partitions"]:
                current, future, lag = out.get(p["partition_index"], (None, None, None))
                if p["is_future_key"]:
                    future, lag = d["log_dir"], p["offset_lag"]
                else:
                    current = d["log_dir"]
                out[p["partition_index"]] = (current, future, lag)
    return out


def sizes(admin, topic: str) -> dict:
    return {b: {p["partition_index"]: p["partition_size"] for d in r["log_dirs"] for t in d["topics"]
                for p in t["partitions"] if not p["is_future_key"]}
            for b in BROKERS for r in admin.describe_log_dirs({topic: [0]}, brokers=[b])}


def unlikely_dir(c: Cluster, admin, broker_id: int) -> str:
    """The broker's log dir a new log would not go to by default (not the one with the fewest partitions)."""
    dirs = log_dirs(c, broker_id)
    (r,) = admin.describe_log_dirs(brokers=[broker_id])
    counts = {d["log_dir"]: sum(len(t["partitions"]) for t in d["topics"]) for d in r["log_dirs"]}
    default = min(dirs, key=lambda d: counts.get(d, 0))
    return next(d for d in dirs if d != default)


def entries(path: str) -> list[str]:
    return sorted(n for n in os.listdir(path) if not n.startswith(".") and "checkpoint" not in n
                  and n != "meta.properties")


def test_move_replicas_while_producing_through_a_crash(cluster):
    c, admin = cluster
    zk_admin.AdminZkClient(c.zk).create_topic("moving", {"min.insync.replicas": "1"}, assignment={0: [1, 2]})
    for b in BROKERS:
        wait_topic(c, c.brokers[b], "moving", 1)
    acked: list[bytes] = []
    stop = threading.Event()

    def produce():
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "batch.size": 16384})

        def delivered(err, msg):
            if err is None:
                acked.append(msg.value())
        n = 0
        while not stop.is_set():
            producer.produce("moving", value=b"%08d" % n + b"." * 92, partition=0, on_delivery=delivered)
            n += 1
            if n == 2000:           # 200 KB first, then ~50 KB/s
                producer.flush(30)
            elif n > 2000:
                producer.poll(0)
                time.sleep(0.002)
        assert producer.flush(30) == 0
    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_until(lambda: len(acked) >= 2000, timeout=30, message="200 KB produced")
        (src1, dst1), (src2, dst2) = (sorted(log_dirs(c, b), key=lambda d: placement(admin, b, "moving")[0][0] != d)
                                      for b in BROKERS)
        assert placement(admin, 1, "moving") == {0: (src1, None, None)}
        moves = {TopicPartitionReplica("moving", 0, 1): dst1, TopicPartitionReplica("moving", 0, 2): dst2}
        assert admin.alter_replica_log_dirs(moves) == {r: NoError for r in moves}

        # Throttled: the future replica (created before the answer) is in the target dir, behind the current one.
        (current, future, lag) = placement(admin, 1, "moving")[0]
        assert (current, future) == (src1, dst1) and lag > 0
        assert [n for n in entries(dst1) if n.startswith("moving-0.")][0].endswith("-future")

        # kill -9 in the middle of the move: the future log is loaded and the move resumes.
        c.brokers[1].kill9()
        wait_until(lambda: 1 not in c.zk.get_broker_ids(), timeout=15, message="broker 1's session to expire")
        c.brokers[1].start()
        c.wait_ready(BROKERS)
        assert placement(admin, 1, "moving")[0][:2] == (src1, dst1)
        for b in BROKERS:
            kadmin(c, "bs", "alter-config", "--broker", b, "--add-config",
                   f"replica.alter.log.dirs.io.max.bytes.per.second={UNLIMITED}")
        for b, dst in ((1, dst1), (2, dst2)):
            wait_until(lambda b=b, dst=dst: placement(admin, b, "moving") == {0: (dst, None, None)}, timeout=30,
                       message=f"the replica on broker {b} in {dst}")
        stop.set()
    finally:
        stop.set()
        writer.join()
    # The old dirs lose the partition (renamed -delete, deleted after log.segment.delete.delay.ms).
    for src in (src1, src2):
        wait_until(lambda src=src: not [n for n in entries(src) if n.startswith("moving-0")], timeout=10,
                   message=f"moving-0 gone from {src}")

    # Every acknowledged record once, in order of acknowledgement per producer; the replicas agree byte for byte.
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "jbod", "enable.auto.commit": False})
    consumer.assign([TopicPartition("moving", 0, 0)])
    read: list[bytes] = []
    while len(read) < len(acked):
        msg = consumer.poll(10)
        assert msg is not None, f"read {len(read)} of {len(acked)}"
        read.append(msg.value())
    consumer.close()
    assert len(set(read)) == len(read) and set(read) == set(acked), len(acked)
    wait_until(lambda: len(set(sizes(admin, "moving")[b][0] for b in BROKERS)) == 1, timeout=20,
               message="equal replica sizes")

    # A restart loads the partition from its new dir.
    c.brokers[1].stop()
    c.brokers[1].start()
    c.wait_ready(BROKERS)
    assert placement(admin, 1, "moving") == {0: (dst1, None, None)}
    assert "moving-0" in entries(dst1) and not [n for n in entries(src1) if n.startswith("moving-0")]
    print(f"\n[jbod] {len(acked)} records acknowledged during the moves, 0 lost")


def test_errors_preferred_dir_and_kadmin_reassign(cluster, tmp_path):
    c, admin = cluster
    zk_admin.AdminZkClient(c.zk).create_topic("placed", {}, assignment={0: [1], 1: [1]})
    for b in BROKERS:
        wait_topic(c, c.brokers[b], "placed", 2)
    d1 = log_dirs(c, 1)
    here = placement(admin, 1, "placed")
    other = {p: next(d for d in d1 if d != here[p][0]) for p in (0, 1)}

    # kadmin with --zookeeper: broker 2 gets placed-0 in the dir named, broker 1 moves its replica.
    target = unlikely_dir(c, admin, 2)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "placed", "partition": 0, "replicas": [1, 2], "log_dirs": [other[0], target]}]}))
    done = kadmin(c, "zk", "reassign", "--reassignment-json-file", plan)
    assert done["log_dir_moves"] == ["placed-0-1", "placed-0-2"]
    assert [m["state"] for m in done["log_dirs"]] == ["complete", "complete"]
    assert placement(admin, 1, "placed")[0] == (other[0], None, None)
    assert placement(admin, 2, "placed") == {0: (target, None, None)}

    # Not a log dir; a replica broker 2 does not host yet: its dir is remembered, and LeaderAndIsr creates the
    # log there (kadmin --bootstrap-server with no log_dirs of its own).
    remembered = unlikely_dir(c, admin, 2)
    assert admin.alter_replica_log_dirs({TopicPartitionReplica("placed", 0, 1): "/nowhere",
                                         TopicPartitionReplica("placed", 1, 2): remembered}) == {
        TopicPartitionReplica("placed", 0, 1): LogDirNotFoundError,
        TopicPartitionReplica("placed", 1, 2): ReplicaNotAvailableError}
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "placed", "partition": 1, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}))
    kadmin(c, "bs", "reassign", "--reassignment-json-file", plan)
    assert placement(admin, 2, "placed")[1] == (remembered, None, None)

    # Both replicas of placed-1 move to their other dirs; --verify (through ZooKeeper) agrees.
    back = next(d for d in log_dirs(c, 2) if d != remembered)
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "placed", "partition": 1, "replicas": [2, 1], "log_dirs": [back, other[1]]}]}))
    done = kadmin(c, "bs", "reassign", "--reassignment-json-file", plan)
    assert [(m["broker"], m["current"], m["state"]) for m in done["log_dirs"]] == [
        (1, other[1], "complete"), (2, back, "complete")]
    assert kadmin(c, "zk", "reassign", "--verify", "--reassignment-json-file", plan)["log_dirs"] == done["log_dirs"]
    text = CliRunner().invoke(cli, ["--zookeeper", c.zk_connect, "reassign", "--verify", "--reassignment-json-file",
                                    str(plan)], catch_exceptions=False).stdout.splitlines()
    assert text[-5:] == ["Reassignment of replica log directories:",
                         "Reassignment of replica placed-1-1 completed successfully.",
                         "Reassignment of replica placed-1-2 completed successfully.",
                         "Clearing broker-level throttles on brokers 1,2",
                         "Clearing topic-level throttles on topic placed"]
