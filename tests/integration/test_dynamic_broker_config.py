"""Dynamic broker configs against real brokers: confluent-kafka's AdminClient alters /config/brokers/<id> and
/config/brokers/<default> (the znodes and change notifications Kafka writes), DescribeConfigs shows the new
sources and synonyms, and the running brokers apply the values without a restart."""
from __future__ import annotations

import json
import time

from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   ResourceType)
from kafka import KafkaProducer
from kafka.errors import MessageSizeTooLargeError, NotEnoughReplicasError

from admin_cli.configs import Entity, alter_config_zk
from kbroker.protocol.client import Connection, KafkaError
from tests.integration.conftest import wait_until
from tests.integration.test_admin_client_topics import admin_result
from tests.integration.test_cluster import metadata, zkcli_get
from tests.integration.test_dynamic_config import produce_hour_old
from zk import admin as zk_admin

DYN_BROKER, DYN_DEFAULT = ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
STATIC, DEFAULT = ConfigSource.STATIC_BROKER_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value


def _describe(admin, name: str) -> dict:
    configs, err = admin_result(admin.describe_configs([ConfigResource(ResourceType.BROKER, name)], request_timeout=20))
    assert err is None, err
    return configs


def _alter_defaults(bootstrap: str, ops: dict) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 on the cluster defaults (BROKER resource ""), as Java's AdminClient sends it
    (librdkafka and kafka-python cannot name that resource): (error code, message)."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as Req
    host, port = bootstrap.split(",")[0].split(":")
    client = Connection(host, int(port), "test")
    try:
        resource = Req.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            Req.AlterConfigsResource.AlterableConfig(name=k, config_operation=1 if v is None else 0, value=v)
            for k, v in ops.items()])
        (result,) = client.send(Req(version=1, resources=[resource], validate_only=False)).responses
    finally:
        client.close()
    return result.error_code, result.error_message


def _incremental(admin, name: str, ops: dict, validate_only=False):
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None else
                           AlterConfigOpType.SET) for k, v in ops.items()]
    return admin_result(admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, name,
                                                                   incremental_configs=entries)],
                                                   request_timeout=20, validate_only=validate_only))[1]


def _znode(zk, path):
    data, _ = zk.get(path)
    return None if data is None else json.loads(data)


def _synonyms(bootstrap: str, broker: str, name: str) -> list[tuple]:
    """The synonyms of one config in the order the broker sends them (confluent-kafka keys them by name, which
    merges the layers of a config that has a single name), through kafka-python's KafkaAdminClient."""
    from kafka.admin import ConfigResource as KResource, ConfigResourceType, KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        result = client.describe_configs([KResource(ConfigResourceType.BROKER, broker)], include_synonyms=True,
                                         config_filter="all")
    finally:
        client.close()
    source_ids = {s.name: s.value for s in ConfigSource}
    return [(s["name"], s["value"], source_ids[s["source"]]) for s in result["broker"][broker][name]["synonyms"]]


def test_broker_configs_altered_described_and_applied_live(cluster_factory):
    c = cluster_factory(3, **{"log.retention.hours": "100"})
    for b in c.brokers.values():
        wait_until(lambda: metadata(b.bootstrap, []).controller_id > 0, message=f"broker {b.id} knows the controller")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    zk_admin.AdminZkClient(c.zk).create_topic("solo2", {}, assignment={0: [2]})
    wait_until(lambda: c.zk.get_partition_state("solo2", 0), message="solo2 has a leader")

    configs = _describe(admin, "2")
    assert configs["broker.id"].value == "2" and configs["broker.id"].is_read_only
    mmb = configs["message.max.bytes"]
    assert (mmb.value, mmb.source, mmb.is_read_only) == ("1048588", DEFAULT, False)
    # Kafka 2.8's ConfigHelper drops the synonyms before the described name's own: none for an unset
    # log.retention.ms, its hours for log.retention.hours
    assert _synonyms(c.bootstrap, "2", "log.retention.ms") == []
    assert _synonyms(c.bootstrap, "2", "log.retention.hours") == [("log.retention.hours", "100", STATIC),
                                                                  ("log.retention.hours", "168", DEFAULT)]

    # The cluster default (resource name ""), incrementally: the <default> znode and its notification.
    assert _alter_defaults(c.bootstrap, {"log.retention.ms": "7200000", "min.insync.replicas": "2"}) == (0, None)
    assert _znode(c.zk, "/config/brokers/<default>") == {
        "version": 1, "config": {"log.retention.ms": "7200000", "min.insync.replicas": "2"}}
    notes = [_znode(c.zk, f"/config/changes/{n}") for n in c.zk.children("/config/changes")]
    assert {"version": 2, "entity_path": "brokers/<default>"} in notes
    # Every broker applies it: describe (answered from the broker's own state) shows the new source.
    for bid in (1, 2, 3):
        wait_until(lambda: _describe(admin, str(bid))["log.retention.ms"].source == DYN_DEFAULT,
                   message=f"broker {bid} applied the default")
    entry = _describe(admin, "3")["log.retention.ms"]
    assert entry.value == "7200000"
    assert _synonyms(c.bootstrap, "3", "log.retention.ms") == [
        ("log.retention.ms", "7200000", DYN_DEFAULT), ("log.retention.hours", "100", STATIC),
        ("log.retention.hours", "168", DEFAULT)]
    from kafka.protocol.admin import DescribeConfigsRequest as Req
    client = Connection("127.0.0.1", c.brokers[1].port, "test")
    try:
        req = Req(version=4, resources=[Req.DescribeConfigsResource(resource_type=4, resource_name="",
                                                                    configuration_keys=None)],
                  include_synonyms=True, include_documentation=False)
        (result,) = client.send(req).results
    finally:
        client.close()
    assert {(e.name, e.value, e.config_source, e.read_only) for e in result.configs} == {
        ("log.retention.ms", "7200000", DYN_DEFAULT, False), ("min.insync.replicas", "2", DYN_DEFAULT, False)}

    # Applied live: min.insync.replicas=2 refuses acks=all on a single-replica partition.
    producer = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", retries=0, max_request_size=10_000_000)
    try:
        try:
            producer.send("solo2", b"x").get(timeout=20)
            raise AssertionError("acks=all succeeded with 1 in-sync replica and min.insync.replicas=2")
        except NotEnoughReplicasError:
            pass

        # Per broker: broker 2's own value wins over the default, and its log takes it.
        assert _incremental(admin, "2", {"message.max.bytes": "5000", "min.insync.replicas": "1"}) is None
        assert _znode(c.zk, "/config/brokers/2")["config"] == {"message.max.bytes": "5000",
                                                                "min.insync.replicas": "1"}
        wait_until(lambda: _describe(admin, "2")["message.max.bytes"].source == DYN_BROKER,
                   message="broker 2 applied its config")
        assert _synonyms(c.bootstrap, "2", "min.insync.replicas") == [
            ("min.insync.replicas", "1", DYN_BROKER), ("min.insync.replicas", "2", DYN_DEFAULT),
            ("min.insync.replicas", "1", DEFAULT)]
        assert _describe(admin, "1")["message.max.bytes"].source == DEFAULT
        producer.send("solo2", b"x" * 100).get(timeout=20)   # min ISR 1 again on broker 2
        try:
            producer.send("solo2", b"x" * 8000).get(timeout=20)
            raise AssertionError("an 8000-byte record passed message.max.bytes=5000")
        except MessageSizeTooLargeError:
            pass
    finally:
        producer.close()

    # Refusals name the key and write nothing (Kafka: INVALID_REQUEST, "Invalid config value for resource ...").
    before = _znode(c.zk, "/config/brokers/2")
    err = _incremental(admin, "2", {"broker.id": "9"})
    assert err.code() == 42 and "Cannot update these configs dynamically" in err.str() and "broker.id" in err.str()
    err = _incremental(admin, "2", {"message.max.bytes": "lots"})
    assert err.code() == 42 and "message.max.bytes" in err.str()
    assert "ConfigResource(type=BROKER, name='2')" in err.str()
    err = _incremental(admin, "2", {"log.cleaner.threads": "3"})
    assert err.code() == 42 and "more than double" in err.str()
    assert _incremental(admin, "2", {"log.cleaner.threads": "2"}, validate_only=True) is None
    assert _znode(c.zk, "/config/brokers/2") == before

    # Legacy AlterConfigs replaces the whole set; deleting every key empties it.
    _, err = admin_result(admin.alter_configs([ConfigResource(ResourceType.BROKER, "2",
                                                         set_config={"log.cleaner.threads": "2"})],
                                         request_timeout=20))
    assert err is None, err
    assert _znode(c.zk, "/config/brokers/2")["config"] == {"log.cleaner.threads": "2"}
    wait_until(lambda: _describe(admin, "2")["message.max.bytes"].source == DEFAULT,
               message="broker 2 dropped its message.max.bytes")
    assert _alter_defaults(c.bootstrap, {"log.retention.ms": None, "min.insync.replicas": None}) == (0, None)
    assert _znode(c.zk, "/config/brokers/<default>")["config"] == {}
    for bid in (1, 2, 3):
        # log.retention.ms unset again: its own default, log.retention.hours' synonyms dropped (as Kafka)
        wait_until(lambda: (_describe(admin, str(bid))["log.retention.ms"].source,
                            _describe(admin, str(bid))["log.retention.ms"].value) == (DEFAULT, None),
                   message=f"broker {bid} back to its static retention")
    assert all(b.alive() for b in c.brokers.values())


def test_dynamic_default_retention_deletes_old_segments_and_is_read_at_startup(cluster_factory):
    c = cluster_factory(0)
    # Written before the broker starts: read at start-up, before the logs load.
    zk_admin.AdminZkClient(c.zk).change_broker_config(None, {"log.segment.bytes": "2000"})
    c.add(1, **{"log.retention.check.interval.ms": 300, "log.segment.delete.delay.ms": 0})
    c.wait_ready([1])
    zk_admin.AdminZkClient(c.zk).create_topic("old", partitions=1, replication_factor=1)
    wait_until(lambda: c.zk.get_partition_state("old", 0), message="leader")
    segments = produce_hour_old(c, "old", 40)
    assert len(segments()) > 3    # log.segment.bytes=2000 from the dynamic default
    time.sleep(1)
    assert len(segments()) > 3

    # kafka-configs.sh --entity-default --alter, as ZooKeeper sees it.
    alter_config_zk(c.zk, Entity("broker", None), {"log.retention.ms": "60000"}, [])
    assert json.loads(zkcli_get(c.zk_connect, "/config/brokers/<default>")) == {
        "version": 1, "config": {"log.segment.bytes": "2000", "log.retention.ms": "60000"}}
    wait_until(lambda: len(segments()) == 1, timeout=15, message="old segments deleted by the new default retention")
    assert "applied dynamic config change of broker entity <default>" in c.brokers[1].log()


def test_enabling_unclean_election_dynamically_elects_offline_partitions(cluster_factory):
    c = cluster_factory(3, **{"replica.lag.time.max.ms": 1000})
    zk_admin.AdminZkClient(c.zk).create_topic("fragile", {}, assignment={0: [1, 2]})
    wait_until(lambda: (s := c.zk.get_partition_state("fragile", 0)) and s.isr == [1, 2], message="isr [1, 2]")
    c.brokers[2].kill9()
    wait_until(lambda: c.zk.get_partition_state("fragile", 0).isr == [1] and 2 not in c.zk.get_broker_ids(),
               message="isr shrinks to [1] and broker 2's registration expires")
    c.brokers[1].kill9()
    wait_until(lambda: c.zk.get_partition_state("fragile", 0).leader == -1, message="partition offline")
    c.brokers[2].start()
    wait_until(lambda: 2 in c.zk.get_broker_ids(), message="broker 2 back")
    time.sleep(1)
    assert c.zk.get_partition_state("fragile", 0).leader == -1   # 2 is not in the ISR: no clean election

    alter_config_zk(c.zk, Entity("broker", None), {"unclean.leader.election.enable": "true"}, [])
    wait_until(lambda: c.zk.get_partition_state("fragile", 0).leader == 2, timeout=15,
               message="the controller elects broker 2 uncleanly once the default allows it")


def test_connection_limit_changes_live(cluster1):
    from kafka.protocol.metadata import ApiVersionsRequest

    def answered(n: int) -> int:
        """Open n connections at once; how many answer ApiVersions."""
        clients = [Connection("127.0.0.1", cluster1.brokers[1].port, "test", timeout=5) for _ in range(n)]
        ok = 0
        try:
            for client in clients:
                try:
                    client.send(ApiVersionsRequest(version=0))
                    ok += 1
                except KafkaError:
                    pass
        finally:
            for client in clients:
                client.close()
        return ok

    assert answered(8) == 8
    alter_config_zk(cluster1.zk, Entity("broker", "1"), {"max.connections.per.ip": "4"}, [])
    # The controller's own connection to this broker also comes from 127.0.0.1.
    wait_until(lambda: answered(8) in (3, 4), message="at most 4 connections from 127.0.0.1")
    assert "max.connections.per.ip=4" in cluster1.brokers[1].log()
    alter_config_zk(cluster1.zk, Entity("broker", "1"), {}, ["max.connections.per.ip"])
    wait_until(lambda: answered(8) == 8, message="the limit is lifted")
