"""DescribeLogDirs and DescribeCluster against a real 3-broker cluster: kafka-python's KafkaAdminClient,
confluent-kafka's AdminClient and raw requests; sizes checked against the segment files on disk, the
controller and brokers against ZooKeeper."""
from __future__ import annotations

import glob
import os

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kbroker.protocol.client import Connection
from tests.integration.conftest import wait_until
from tests.integration.test_cluster import wait_topic
from zk import admin as zk_admin

KAFKA_STORAGE_ERROR = 56
NOT_REQUESTED = -2 ** 31


def _send(broker, request):
    host, port = broker.bootstrap.split(":")
    client = Connection(host, int(port), "test", timeout=10)
    try:
        return client.send(request)
    finally:
        client.close()


def _data_dir(broker) -> str:
    return os.path.abspath(os.path.join(broker.dir, "data"))


def _disk_sizes(broker, topics) -> dict:
    """{(topic, partition): bytes of its .log files} for the broker's partition directories of these topics."""
    out = {}
    for topic in topics:
        for path in glob.glob(os.path.join(_data_dir(broker), f"{topic}-*")):
            partition = int(path.rsplit("-", 1)[1])
            out[(topic, partition)] = sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.log")))
    return out


def _reported(log_dirs: list) -> dict:
    """{(topic, partition): (size, lag, future)} from one broker's log dir results (kafka-python dicts)."""
    return {(t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"], p["is_future_key"])
            for d in log_dirs for t in d["topics"] for p in t["partitions"]}


def test_describe_log_dirs(cluster3):
    from kafka.admin import KafkaAdminClient
    c = cluster3
    zk_admin.AdminZkClient(c.zk).create_topic("sized", {}, assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    zk_admin.AdminZkClient(c.zk).create_topic("bystander", {}, assignment={0: [1, 2, 3]})
    for topic, n in (("sized", 3), ("bystander", 1)):
        for b in c.brokers.values():
            wait_topic(c, b, topic, n)
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=10000)
    try:
        def described():
            return {r["broker"]: r["log_dirs"] for r in admin.describe_log_dirs()}

        # Every log dir of every broker, by its absolute path; empty logs have size 0, lag 0, no future logs
        # (moves between log dirs: test_jbod.py).
        before = described()
        assert set(before) == {1, 2, 3}
        for i, dirs in before.items():
            assert [(d["log_dir"], d["error_code"]) for d in dirs] == [(_data_dir(c.brokers[i]), 0)]
        expected = {1: {("sized", 0), ("sized", 2), ("bystander", 0)}, 2: {("sized", 0), ("sized", 1),
                    ("bystander", 0)}, 3: {("sized", 1), ("sized", 2), ("bystander", 0)}}
        for i, dirs in before.items():
            assert _reported(dirs) == {tp: (0, 0, False) for tp in expected[i]}

        # Produce: sizes grow, and match the .log files on disk on leaders and followers alike.
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
        for n in range(300):
            producer.produce("sized", value=b"v" * 100, key=str(n).encode(), partition=n % 3)
        assert producer.flush(20) == 0

        def sizes_match_disk():
            now = described()
            ok = all({tp: s for tp, (s, _, _) in _reported(now[i]).items()}
                     == _disk_sizes(c.brokers[i], ["sized", "bystander"]) for i in now)
            return now if ok else None
        after = wait_until(sizes_match_disk, timeout=10, message="reported sizes equal the .log files")
        for i, dirs in after.items():
            got = _reported(dirs)
            assert set(got) == expected[i]
            for tp, (size, lag, future) in got.items():
                assert (size > 100 * 100 if tp[0] == "sized" else size == 0) and lag == 0 and not future, (tp, size)

        # Filtering: only the requested partitions; unknown topics and partitions are simply absent.
        for i in c.brokers:
            (r,) = admin.describe_log_dirs({"sized": [0, 1], "nope": [0], "bystander": [7]}, brokers=[i])
            assert set(_reported(r["log_dirs"])) == {("sized", p) for p in (0, 1) if ("sized", p) in expected[i]}
            assert {t["name"] for d in r["log_dirs"] for t in d["topics"]} <= {"sized"}
    finally:
        admin.close()

    # v0 (not flexible) over a raw connection, null topics = all; the sizes are the same.
    b1 = c.brokers[1]
    r = _send(b1, DescribeLogDirsRequest(version=0, topics=None))
    assert _reported([d.to_dict() for d in r.results]) == _reported(after[1])

    # A log dir that is gone (removed under the broker) answers KAFKA_STORAGE_ERROR with no topics.
    data = _data_dir(c.brokers[3])
    os.rename(data, data + ".away")
    try:
        r = _send(c.brokers[3], DescribeLogDirsRequest(version=1, topics=None))
    finally:
        os.rename(data + ".away", data)
    assert [(d.log_dir, d.error_code, d.topics) for d in r.results] == [(data, KAFKA_STORAGE_ERROR, [])]


def test_describe_cluster_and_api_versions(cluster3):
    c = cluster3
    controller = c.zk.get_controller_id()
    zk_endpoints = {i: c.zk.get_broker(i).endpoint("PLAINTEXT") for i in c.zk.get_broker_ids()}
    expected_nodes = {i: (e.host, e.port) for i, e in zk_endpoints.items()}
    assert expected_nodes == {i: ("127.0.0.1", b.port) for i, b in c.brokers.items()}

    # Every broker advertises Kafka 2.8's ranges.
    for b in c.brokers.values():
        r = _send(b, ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"))
        ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert (ranges[34], ranges[35], ranges[60]) == ((0, 2), (0, 2), (0, 0))

    # Raw v0: with and without cluster authorized operations, from a broker that is not the controller.
    other = next(b for i, b in c.brokers.items() if i != controller)
    wait_until(lambda: _send(other, DescribeClusterRequest(
        version=0, include_cluster_authorized_operations=False)).controller_id == controller,
               timeout=10, message="the controller known to every broker")
    for include, ops in ((False, None), (True, {5, 7, 8, 9, 10, 11, 12})):
        r = _send(other, DescribeClusterRequest(version=0, include_cluster_authorized_operations=include))
        assert (r.error_code, r.error_message, r.cluster_id, r.controller_id) == \
            (0, None, c.zk.get_cluster_id(), controller)
        assert {x.broker_id: (x.host, x.port) for x in r.brokers} == expected_nodes
        assert all(x.rack is None for x in r.brokers)
        assert r.authorized_operations == ops

    # confluent-kafka's AdminClient (librdkafka describes the cluster with Metadata, not DescribeCluster).
    # kafka-python's describe_cluster() sends DescribeCluster but fails on any v0 answer, Kafka 2.8's too: see
    # tests/clients/test_metadata_clients.py.
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    result = admin.describe_cluster(request_timeout=10).result(timeout=20)
    assert (result.cluster_id, result.controller.id) == (c.zk.get_cluster_id(), controller)
    assert {n.id: (n.host, n.port) for n in result.nodes} == expected_nodes


def test_confluent_authorized_operations_without_authorizer(cluster1):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation
    zk_admin.AdminZkClient(cluster1.zk).create_topic("ops", {}, assignment={0: [1]})
    wait_topic(cluster1, cluster1.brokers[1], "ops", 1)
    admin = AdminClient({"bootstrap.servers": cluster1.bootstrap})
    result = admin.describe_cluster(request_timeout=10, include_authorized_operations=True).result(timeout=20)
    assert set(result.authorized_operations or ()) == {
        AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
    (fut,) = admin.describe_topics(TopicCollection(["ops"]), request_timeout=10,
                                   include_authorized_operations=True).values()
    assert set(fut.result(timeout=20).authorized_operations or ()) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
