"""Metadata as real client libraries see it: kafka-python, confluent-kafka (librdkafka) and kcat against a
3-broker cluster with one topic of 6 partitions, replication factor 3 (created with kadmin).

One cluster serves the whole module (the tests only read metadata).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections import Counter

import pytest
from click.testing import CliRunner

from admin_cli.main import cli
from kbroker.protocol.client import KafkaError
from tests.clients._util import raw_metadata
from tests.integration.conftest import Cluster, wait_until

TOPIC = "orders"
PARTITIONS = 6
BROKER_IDS = {1, 2, 3}


def _topic_ready_everywhere(cluster: Cluster) -> bool:
    for b in cluster.brokers.values():
        try:
            md = raw_metadata(b.bootstrap)
        except KafkaError:
            return False
        topics = {t.name: t for t in md.topics}
        if {br.node_id for br in md.brokers} != BROKER_IDS or md.controller_id not in BROKER_IDS:
            return False
        t = topics.get(TOPIC)
        if t is None or t.error_code != 0 or len(t.partitions) != PARTITIONS:
            return False
        if any(p.error_code != 0 or p.leader_id < 0 or len(p.isr_nodes) != 3 for p in t.partitions):
            return False
    return True


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = Cluster(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path_factory.mktemp("clients")))
    try:
        for i in sorted(BROKER_IDS):
            c.add(i)
        c.wait_ready(BROKER_IDS)
        r = CliRunner().invoke(cli, ["--zookeeper", c.zk_connect, "create-topic", TOPIC,
                                     "--partitions", str(PARTITIONS), "--replication-factor", "3"])
        assert r.exit_code == 0, r.output
        wait_until(lambda: _topic_ready_everywhere(c), 20, message=f"{TOPIC} in every broker's metadata")
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def ports(cluster):
    return {i: b.port for i, b in cluster.brokers.items()}


def check_layout(partitions: dict[int, tuple[int, list[int]]]) -> None:
    """partitions: id -> (leader, replicas). Every leader is one of its replicas; each broker leads 2."""
    assert set(partitions) == set(range(PARTITIONS))
    for pid, (leader, replicas) in partitions.items():
        assert sorted(replicas) == sorted(BROKER_IDS), (pid, replicas)
        assert leader in replicas, (pid, leader, replicas)
    assert Counter(leader for leader, _ in partitions.values()) == {b: 2 for b in BROKER_IDS}


# ---- kafka-python ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("api_version", [None, (0, 8, 2), (0, 10, 0), (0, 11, 0)],
                         ids=["negotiated", "0.8.2", "0.10.0", "0.11.0"])
def test_kafka_python_consumer_sees_topic_and_partitions(cluster, ports, api_version):
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, api_version=api_version,
                             request_timeout_ms=10000, client_id="metadata-test")
    try:
        assert TOPIC in consumer.topics()
        assert consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
        md = consumer._client.cluster  # kafka-python's ClusterMetadata, as refreshed by topics()
        assert {b.node_id: (b.host, b.port) for b in md.brokers()} == \
            {i: ("127.0.0.1", p) for i, p in ports.items()}
        leaders = {p: md.leader_for_partition(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
        assert Counter(leaders.values()) == {b: 2 for b in BROKER_IDS}
    finally:
        consumer.close()


def test_kafka_python_negotiates_from_api_versions(cluster):
    """With api_version=None the client asks ApiVersions and picks versions from the ranges we advertise."""
    from kafka import KafkaConsumer
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, api_version=None, request_timeout_ms=10000)
    try:
        consumer.topics()
        client = consumer._client
        recorded = client._manager.broker_version_data.api_versions  # {api key: (min, max)} from ApiVersions
        assert recorded[MetadataRequest.API_KEY] == (0, 11)  # the library itself goes up to 13
        assert recorded[ApiVersionsRequest.API_KEY] == (0, 3)  # the library itself goes up to 4
        # kafka-python infers a broker release from the advertised APIs: Metadata v5+ means at least 1.0.
        # (It reads (1, 0) while Produce and Fetch are not advertised; that is the library's guess, not ours.)
        assert client.check_version() >= (1, 0)
    finally:
        consumer.close()


def test_kafka_python_admin_client_lists_and_describes_topics(cluster, ports):
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
    try:
        assert TOPIC in admin.list_topics()
        (topic,) = admin.describe_topics([TOPIC])
        check_layout({p["partition_index"]: (p["leader_id"], p["replica_nodes"]) for p in topic["partitions"]})
    finally:
        admin.close()


@pytest.mark.xfail(strict=True, reason="kafka-python 3.0.12 describe_cluster() pops 'endpoint_type' from the "
                   "DescribeCluster response, which v0 (the only version Kafka 2.8 serves) lacks: KeyError, "
                   "against Kafka 2.8 too")
def test_kafka_python_admin_client_describe_cluster(cluster, ports):
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
    try:
        described = admin.describe_cluster()
        assert {b["broker_id"]: (b["host"], b["port"]) for b in described["brokers"]} == \
            {i: ("127.0.0.1", p) for i, p in ports.items()}
        assert described["controller_id"] in BROKER_IDS
        assert described["cluster_id"] == cluster.zk.get_cluster_id()
    finally:
        admin.close()


# ---- confluent-kafka (librdkafka) --------------------------------------------------------------------------

@pytest.mark.parametrize("conf", [
    {},
    {"api.version.request": False, "broker.version.fallback": "0.9.0"},
    {"api.version.request": False, "broker.version.fallback": "0.10.0"},
], ids=["negotiated", "fallback-0.9.0", "fallback-0.10.0"])
def test_confluent_admin_list_topics(cluster, ports, conf):
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **conf})
    md = admin.list_topics(timeout=10)
    assert {i: (b.host, b.port) for i, b in md.brokers.items()} == {i: ("127.0.0.1", p) for i, p in ports.items()}
    if conf.get("broker.version.fallback") == "0.9.0":
        assert md.controller_id == -1  # Metadata v0 has no controller id
    else:
        assert md.controller_id in BROKER_IDS
    topic = md.topics[TOPIC]
    assert topic.error is None
    assert len(topic.partitions) == PARTITIONS
    for p in topic.partitions.values():
        assert p.error is None
        assert sorted(p.isrs) == sorted(BROKER_IDS)
    check_layout({pid: (p.leader, p.replicas) for pid, p in topic.partitions.items()})


# ---- kcat --------------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_metadata_listing(cluster, ports):
    bootstrap = cluster.brokers[1].bootstrap
    out = subprocess.run(["kcat", "-b", bootstrap, "-L", "-J", "-m", "10"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    md = json.loads(out.stdout)
    assert {b["id"]: b["name"] for b in md["brokers"]} == {i: f"127.0.0.1:{p}" for i, p in ports.items()}
    assert md["controllerid"] in BROKER_IDS
    (topic,) = [t for t in md["topics"] if t["topic"] == TOPIC]
    assert len(topic["partitions"]) == PARTITIONS
    check_layout({p["partition"]: (p["leader"], [r["id"] for r in p["replicas"]]) for p in topic["partitions"]})
