"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against a real 3-broker cluster on a real
ZooKeeper: confluent-kafka's AdminClient and kafka-python's KafkaAdminClient; the /config znodes and the
change notifications Kafka would write."""
from __future__ import annotations

import json

from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   ResourceType)

from tests.integration.conftest import wait_until
from tests.integration.test_admin_client_topics import admin_result
from tests.integration.test_cluster import metadata
from zk import admin as zk_admin

DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = (ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
                                         ConfigSource.STATIC_BROKER_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value)


def _describe(admin, rtype, name):
    return admin_result(admin.describe_configs([ConfigResource(rtype, name)], request_timeout=20))


def _znode(zk, path):
    data, _ = zk.get(path)
    return None if data is None else json.loads(data)


def _notifications(zk):
    return {n: _znode(zk, f"/config/changes/{n}") for n in zk.children("/config/changes")}


def test_topic_configs_with_admin_clients(cluster_factory):
    c = cluster_factory(3, **{"log.retention.ms": "3600000"})
    # librdkafka sends alters to the controller: wait until every broker's metadata names it
    for b in c.brokers.values():
        wait_until(lambda: metadata(b.bootstrap, []).controller_id > 0, message=f"broker {b.id} knows the controller")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    zk_admin.AdminZkClient(c.zk).create_topic("cfg", {"cleanup.policy": "compact"}, assignment={0: [1, 2], 1: [2, 3]})

    # Describe: override, broker-level synonym, default; synonyms in Kafka's order.
    entries, err = _describe(admin, ResourceType.TOPIC, "cfg")
    assert err is None, err
    assert {"cleanup.policy", "retention.ms", "segment.bytes", "min.insync.replicas",
            "delete.retention.ms"} <= set(entries)
    cp, rm, sb = entries["cleanup.policy"], entries["retention.ms"], entries["segment.bytes"]
    assert (cp.value, cp.source) == ("compact", DYNAMIC_TOPIC)
    assert list(cp.synonyms) == ["cleanup.policy", "log.cleanup.policy"]
    assert cp.synonyms["log.cleanup.policy"].source == DEFAULT
    assert (rm.value, rm.source) == ("3600000", STATIC_BROKER)
    assert list(rm.synonyms) == ["log.retention.ms", "log.retention.hours"]
    assert rm.synonyms["log.retention.hours"].value == "168"
    assert (sb.value, sb.source, sb.is_default) == (str(1024 ** 3), DEFAULT, True)
    assert entries["preallocate"].value == "false"

    # Legacy AlterConfigs replaces the whole override set; ZooKeeper shows what Kafka writes.
    before = set(c.zk.children("/config/changes"))
    _, err = admin_result(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "cfg",
                                                      set_config={"retention.ms": "60000"})], request_timeout=20))
    assert err is None, err
    assert _znode(c.zk, "/config/topics/cfg") == {"version": 1, "config": {"retention.ms": "60000"}}
    new = {n: v for n, v in _notifications(c.zk).items() if n not in before}
    assert len(new) == 1 and next(iter(new)).startswith("config_change_")
    assert list(new.values()) == [{"version": 2, "entity_path": "topics/cfg"}]
    entries, _ = _describe(admin, ResourceType.TOPIC, "cfg")
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("60000", DYNAMIC_TOPIC)
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == ("delete", DEFAULT)

    # Incremental: SET and DELETE on the current overrides.
    inc = [ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)]
    _, err = admin_result(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "cfg",
                                                                  incremental_configs=inc)], request_timeout=20))
    assert err is None, err
    assert _znode(c.zk, "/config/topics/cfg")["config"] == {"max.message.bytes": "2000"}
    assert list(_notifications(c.zk).values()).count({"version": 2, "entity_path": "topics/cfg"}) == 2

    # Errors: a bad value names the key and writes nothing (Kafka 2.8: INVALID_REQUEST, its ConfigException),
    # an unknown name is INVALID_CONFIG; unknown topic; APPEND on a non-list.
    _, err = admin_result(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "cfg",
                                                      set_config={"retention.ms": "soon"})], request_timeout=20))
    assert err.code() == 42 and "retention.ms" in err.str() and "ConfigResource(type=TOPIC, name='cfg')" in err.str()
    _, err = admin_result(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "cfg",
                                                      set_config={"retention.msx": "1"})], request_timeout=20))
    assert err.code() == 40 and "Unknown topic config name: retention.msx" in err.str()
    inc = [ConfigEntry("segment.ms", "-5", incremental_operation=AlterConfigOpType.SET)]
    _, err = admin_result(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "cfg",
                                                                  incremental_configs=inc)], request_timeout=20))
    assert err.code() == 42 and "segment.ms" in err.str()
    inc = [ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)]
    _, err = admin_result(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "cfg",
                                                                  incremental_configs=inc)], request_timeout=20))
    assert err.code() == 42
    assert _znode(c.zk, "/config/topics/cfg")["config"] == {"max.message.bytes": "2000"}
    _, err = _describe(admin, ResourceType.TOPIC, "nope")
    assert err.code() == 3
    _, err = admin_result(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "nope",
                                                      set_config={"retention.ms": "1"})], request_timeout=20))
    assert err.code() == 3
    # kafka-python's KafkaAdminClient.
    from kafka.admin import ConfigResource as KResource, ConfigResourceType, KafkaAdminClient
    kadmin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=20000)
    try:
        result = kadmin.describe_configs([KResource(ConfigResourceType.TOPIC, "cfg")], config_filter="all")
        assert "max.message.bytes" in repr(result) and "2000" in repr(result) and "3600000" in repr(result), result
    finally:
        kadmin.close()
