"""kbroker.admin_manager.AdminManager on a real ZooKeeper (a fresh chroot of the session's server) and a real
metadata cache, without broker processes: what each admin API answers, and the znodes it leaves as an operator
reads them back (their JSON, /config/changes notifications in sequence order, and the order of the writes by
their zxids). The same APIs over the wire are in tests/integration/test_admin_*.py."""
import json

import gevent
import pytest

from kbroker.admin_manager import APPEND, BROKER, DELETE, SET, SUBTRACT, TOPIC, AdminManager, NewTopic
from kbroker.clock import MockClock
from kbroker.config import BrokerConfig
from kbroker.metadata_cache import CachedBroker, MetadataCache, PartitionState
from kbroker.protocol.errors import Errors
from kbroker.quota.client_quotas import ClientQuotaManagers
from zk import znodes as z


def tree(zk, path="/") -> dict:
    """{path: (data, stat)} of every znode from path down: any create, setData or delete changes it."""
    data, stat = zk.get(path)
    out = {path: (data, stat)}
    for child in zk.children(path):
        out.update(tree(zk, f"{path.rstrip('/')}/{child}"))
    return out


def read_json(zk, path):
    data, stat = zk.get(path)
    assert stat is not None, f"{path} does not exist"
    return None if data is None else json.loads(data)


def notifications(zk) -> list:
    """The /config/changes notifications as (name, JSON), in sequence order."""
    return [(name, read_json(zk, f"/config/changes/{name}")) for name in sorted(zk.children("/config/changes"))]


def config_json(config: dict) -> dict:
    return {"version": 1, "config": config}


@pytest.fixture
def setup(zk_client):
    zk_client.create_top_level_paths()
    cache = MetadataCache(1)
    cache.update(1, [CachedBroker(i, {}) for i in (1, 2, 3)], [], {})
    config = BrokerConfig({"zookeeper.connect": zk_client.connect_string, "broker.id": "1", "num.io.threads": "8"})
    return AdminManager(1, config, zk_client, cache, MockClock(), lambda: True), zk_client, cache


def no_quota():
    """A request's controller mutation quota where no client has one (the quota managers record nothing)."""
    config = BrokerConfig({"zookeeper.connect": "127.0.0.1:1", "broker.id": "1"})
    return ClientQuotaManagers(config, MockClock()).controller_mutation.new_quota("ANONYMOUS", None, strict=True)


def elect(cache, name, partitions):
    """The controller's UpdateMetadata: the topic's partitions have leaders."""
    cache.update(1, [CachedBroker(i, {}) for i in (1, 2, 3)],
                 [PartitionState(name, p, 1, 0, [1], [1]) for p in range(partitions)], {})


def test_create_topics_checks_each_topic_and_writes_config_before_topic(setup):
    manager, zk, _ = setup
    results = manager.create_topics([
        NewTopic("ok", 2, 3, configs={"cleanup.policy": "compact"}),
        NewTopic("twice"), NewTopic("twice"),
        NewTopic("nulls", configs={"retention.ms": None}),
        NewTopic("bad", configs={"retention.ms": "-2"}),
        NewTopic("big", 1, 4),
        NewTopic("both", 2, -1, assignments={0: [1]}),
    ], timeout_ms=0, validate_only=False, quota=no_quota())
    assert [(r.name, r.error) for r in results] == [
        ("ok", Errors.REQUEST_TIMED_OUT), ("twice", Errors.INVALID_REQUEST), ("twice", Errors.INVALID_REQUEST),
        ("nulls", Errors.INVALID_REQUEST), ("bad", Errors.INVALID_CONFIG),
        ("big", Errors.INVALID_REPLICATION_FACTOR), ("both", Errors.INVALID_REQUEST)]
    assert results[4].message == "Invalid value -2 for configuration retention.ms: Value must be at least -1"
    # Only "ok" is written: its config, then its topic znode (the controller reacts to that one), and no
    # change notification at creation.
    assert zk.children("/brokers/topics") == ["ok"] and zk.children("/config/topics") == ["ok"]
    assert read_json(zk, "/config/topics/ok") == config_json({"cleanup.policy": "compact"})
    topic = read_json(zk, "/brokers/topics/ok")
    assert (topic["version"], topic["adding_replicas"], topic["removing_replicas"]) == (3, {}, {})
    assert "topic_id" not in topic                                   # the controller backfills it
    assert sorted(topic["partitions"]) == ["0", "1"]
    assert all(sorted(replicas) == [1, 2, 3] for replicas in topic["partitions"].values())
    assert zk.get("/config/topics/ok")[1].mzxid < zk.get("/brokers/topics/ok")[1].czxid
    assert notifications(zk) == [] and zk.children("/admin/delete_topics") == []


def test_create_topics_validate_only_and_not_controller(setup):
    manager, zk, _ = setup
    before = tree(zk)
    (r,) = manager.create_topics([NewTopic("v", 3, 2)], timeout_ms=1000, validate_only=True, quota=no_quota())
    assert (r.error, r.num_partitions, r.replication_factor) == (Errors.NONE, 3, 2)
    assert tree(zk) == before
    manager.is_active_controller = lambda: False
    (r,) = manager.create_topics([NewTopic("v")], timeout_ms=1000, validate_only=False, quota=no_quota())
    assert r.error == Errors.NOT_CONTROLLER
    assert tree(zk) == before


def test_create_topics_waits_for_leaders_in_the_purgatory(setup):
    manager, zk, cache = setup
    waiting = gevent.spawn(manager.create_topics, [NewTopic("w", 2, 1)], 60_000, False, no_quota())
    gevent.sleep(0)
    assert not waiting.ready() and manager.topic_purgatory.watched("w") == 1
    assert sorted(read_json(zk, "/brokers/topics/w")["partitions"]) == ["0", "1"]   # written before waiting
    elect(cache, "w", 2)
    manager.try_complete_delayed_topic_operations(["w"])
    (r,) = waiting.get(timeout=1)
    assert (r.error, r.num_partitions) == (Errors.NONE, 2)


def test_delete_topics(setup):
    manager, zk, cache = setup
    zk.create_topic_assignment("gone", z.TopicAssignment({0: [1]}))
    elect(cache, "gone", 1)
    results = manager.delete_topics([("gone", None), ("nope", None)], timeout_ms=0, quota=no_quota())
    assert [(r.name, r.error) for r in results] == [("gone", Errors.REQUEST_TIMED_OUT),
                                                    ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    # The marker the controller acts on (null data, as Kafka's); the topic itself is the controller's to delete.
    assert zk.children("/admin/delete_topics") == ["gone"]
    assert zk.get("/admin/delete_topics/gone")[0] is None
    assert zk.children("/brokers/topics") == ["gone"]
    # Asked again while the controller has not deleted it yet: still waited on, nothing written.
    before = tree(zk)
    (r,) = manager.delete_topics([("gone", None)], timeout_ms=0, quota=no_quota())
    assert r.error == Errors.REQUEST_TIMED_OUT and tree(zk) == before
    manager.config.values["delete.topic.enable"] = False
    (r,) = manager.delete_topics([("gone", None)], timeout_ms=0, quota=no_quota())
    assert (r.error, r.message) == (Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
    assert tree(zk) == before


def test_create_partitions(setup):
    manager, zk, _ = setup
    zk.create_topic_assignment("t", z.TopicAssignment({0: [1, 2]}))
    before = tree(zk)
    results = manager.create_partitions([("t", 3, None), ("t2", 2, None), ("t", 1, None)], 0, False, no_quota())
    assert [r.error for r in results] == [Errors.INVALID_REQUEST, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                          Errors.INVALID_REQUEST]
    assert tree(zk) == before
    (r,) = manager.create_partitions([("t", 3, None)], 0, False, no_quota())
    assert r.error == Errors.NONE
    partitions = read_json(zk, "/brokers/topics/t")["partitions"]
    assert sorted(partitions) == ["0", "1", "2"] and partitions["0"] == [1, 2]
    assert all(len(set(replicas)) == 2 and set(replicas) <= {1, 2, 3} for replicas in partitions.values())
    assert zk.children("/brokers/topics") == ["t"]
    (r,) = manager.create_partitions([("t", 3, None)], 0, False, no_quota())
    assert r.error == Errors.INVALID_PARTITIONS


def test_alter_configs_replace_and_incremental_share_one_path(setup):
    manager, zk, _ = setup
    zk.create_topic_assignment("t", z.TopicAssignment({0: [1]}))
    assert manager.alter_configs([(TOPIC, "t", [("retention.ms", "1000"), ("cleanup.policy", "compact")])],
                                 False) == [(Errors.NONE, None)]
    assert read_json(zk, "/config/topics/t") == config_json({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert notifications(zk) == [("config_change_0000000000", {"version": 2, "entity_path": "topics/t"})]
    # The notification comes after the config it announces, so a broker acting on it reads the new config.
    assert zk.get("/config/topics/t")[1].mzxid < zk.get("/config/changes/config_change_0000000000")[1].czxid
    assert manager.incremental_alter_configs(
        [(TOPIC, "t", [("cleanup.policy", APPEND, "delete"), ("retention.ms", DELETE, None)])],
        False) == [(Errors.NONE, None)]
    assert read_json(zk, "/config/topics/t") == config_json({"cleanup.policy": "compact,delete"})
    assert manager.incremental_alter_configs([(TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")])],
                                             False) == [(Errors.NONE, None)]
    assert read_json(zk, "/config/topics/t") == config_json({"cleanup.policy": "delete"})
    assert notifications(zk) == [(f"config_change_000000000{i}", {"version": 2, "entity_path": "topics/t"})
                                 for i in range(3)]
    before = tree(zk)
    assert manager.alter_configs([(TOPIC, "t", [("retention.ms", None)])], False) == \
        [(Errors.INVALID_REQUEST, "Null value not supported for : retention.ms")]
    assert manager.incremental_alter_configs([(TOPIC, "t", [("retention.ms", APPEND, "1")])], False) == \
        [(Errors.INVALID_REQUEST, "Config value append is not allowed for config key: retention.ms")]
    assert manager.alter_configs([(TOPIC, "t", [("segment.bytes", "1")])], False) == [(
        Errors.INVALID_REQUEST, "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
                                "Invalid value 1 for configuration segment.bytes: Value must be at least 14")]
    assert manager.alter_configs([(TOPIC, "nope", [])], False) == \
        [(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")]
    assert manager.alter_configs([(TOPIC, "t", [("retention.ms", "5")])], True) == [(Errors.NONE, None)]
    assert tree(zk) == before     # nothing written for refusals and validate_only


def test_alter_broker_configs(setup):
    manager, zk, _ = setup
    assert manager.incremental_alter_configs([(BROKER, "", [("log.retention.ms", SET, "5000")])], False) == \
        [(Errors.NONE, None)]
    assert read_json(zk, "/config/brokers/<default>") == config_json({"log.retention.ms": "5000"})
    assert notifications(zk) == [("config_change_0000000000", {"version": 2, "entity_path": "brokers/<default>"})]
    assert zk.get("/config/brokers/<default>")[1].mzxid < \
        zk.get("/config/changes/config_change_0000000000")[1].czxid
    before = tree(zk)
    assert manager.alter_configs([(BROKER, "2", [])], False) == \
        [(Errors.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")]
    assert manager.alter_configs([(BROKER, "1", [("num.io.threads", "17")])], False) == [(
        Errors.INVALID_REQUEST, "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Dynamic "
                                "thread count update validation failed for num.io.threads=17, value should not be "
                                "greater than double the current value 8")]
    assert manager.alter_configs([(BROKER, "1", [("broker.id", "3")])], False)[0][0] == Errors.INVALID_REQUEST
    assert tree(zk) == before
    assert manager.alter_configs([(BROKER, "1", [("num.io.threads", "16")])], False) == [(Errors.NONE, None)]
    assert read_json(zk, "/config/brokers/1") == config_json({"num.io.threads": "16"})
    assert [n[1]["entity_path"] for n in notifications(zk)] == ["brokers/<default>", "brokers/1"]


def test_describe_topic_configs(setup):
    manager, zk, _ = setup
    zk.create_topic_assignment("t", z.TopicAssignment({0: [1]}))
    zk.set_or_create_entity_config("topics", "t", {"retention.ms": "100", "delete.retention.ms": "7"})
    before = tree(zk)
    ((error, _, entries),) = manager.describe_configs([(TOPIC, "t", None)])
    assert error == Errors.NONE
    by_name = {e.name: e for e in entries}
    assert (by_name["retention.ms"].value, by_name["retention.ms"].source) == ("100", 1)
    # log.retention.ms unset: Kafka 2.8 drops log.retention.hours' synonyms before it (ConfigHelper.configSynonyms)
    assert [s[0] for s in by_name["retention.ms"].synonyms] == ["retention.ms"]
    assert (by_name["preallocate"].value, by_name["preallocate"].source) == ("false", 5)
    assert by_name["delete.retention.ms"].value == "7"
    assert (by_name["segment.jitter.ms"].value, by_name["segment.jitter.ms"].synonyms) == ("0", [])
    ((error, message, _),) = manager.describe_configs([(TOPIC, "nope", None)])
    assert (error, message) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")
    assert tree(zk) == before     # describing reads only
