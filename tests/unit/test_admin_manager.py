"""kbroker.admin_manager.AdminManager over an in-memory ZooKeeper stand-in and a real metadata cache: what each
admin API answers and writes (the end-to-end behaviour is in tests/integration/test_admin_*.py)."""
import gevent
import pytest

from kbroker.admin_manager import APPEND, BROKER, DELETE, SET, SUBTRACT, TOPIC, AdminManager, NewTopic
from kbroker.clock import MockClock
from kbroker.config import BrokerConfig
from kbroker.metadata_cache import CachedBroker, MetadataCache, PartitionState
from kbroker.protocol.errors import Errors
from zk import znodes as z
from zk.client import TopicAlreadyMarkedForDeletionError, TopicExistsError


class FakeZk:
    """The KafkaZkClient calls AdminZkClient makes, on dicts; `writes` logs them in order."""

    def __init__(self):
        self.topics, self.configs, self.deletions, self.writes = {}, {}, set(), []

    def topic_exists(self, name):
        return name in self.topics

    def get_all_topics(self):
        return sorted(self.topics)

    def get_topic_deletions(self):
        return sorted(self.deletions)

    def get_topic_assignment(self, name):
        return self.topics.get(name)

    def create_topic_assignment(self, name, assignment):
        if name in self.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        self.topics[name] = assignment
        self.writes.append(("topic", name))

    def set_topic_assignment(self, name, assignment):
        self.topics[name] = assignment
        self.writes.append(("topic", name))

    def get_entity_config(self, kind, name):
        return dict(self.configs.get((kind, name), {}))

    def set_or_create_entity_config(self, kind, name, config):
        self.configs[(kind, name)] = dict(config)
        self.writes.append(("config", f"{kind}/{name}"))

    def create_config_change_notification(self, entity_path):
        self.writes.append(("notification", entity_path))

    def create_delete_topic_marker(self, name):
        if name in self.deletions:
            raise TopicAlreadyMarkedForDeletionError(name)
        self.deletions.add(name)
        self.writes.append(("delete", name))


@pytest.fixture
def setup():
    zk, cache = FakeZk(), MetadataCache(1)
    cache.update(1, [CachedBroker(i, {}) for i in (1, 2, 3)], [], {})
    config = BrokerConfig({"zookeeper.connect": "zk", "broker.id": "1", "num.io.threads": "8"})
    return AdminManager(1, config, zk, cache, MockClock(), lambda: True), zk, cache


def elect(cache, name, partitions):
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
    ], timeout_ms=0, validate_only=False)
    assert [(r.name, r.error) for r in results] == [
        ("ok", Errors.REQUEST_TIMED_OUT), ("twice", Errors.INVALID_REQUEST), ("twice", Errors.INVALID_REQUEST),
        ("nulls", Errors.INVALID_REQUEST), ("bad", Errors.INVALID_CONFIG),
        ("big", Errors.INVALID_REPLICATION_FACTOR), ("both", Errors.INVALID_REQUEST)]
    assert results[4].message == "Invalid value -2 for configuration retention.ms: Value must be at least -1"
    assert zk.writes == [("config", "topics/ok"), ("topic", "ok")]     # no notification at creation
    assert zk.configs[("topics", "ok")] == {"cleanup.policy": "compact"}
    assert len(zk.topics["ok"].partitions) == 2 and all(len(r) == 3 for r in zk.topics["ok"].partitions.values())


def test_create_topics_validate_only_and_not_controller(setup):
    manager, zk, _ = setup
    (r,) = manager.create_topics([NewTopic("v", 3, 2)], timeout_ms=1000, validate_only=True)
    assert (r.error, r.num_partitions, r.replication_factor) == (Errors.NONE, 3, 2) and not zk.writes
    manager.is_active_controller = lambda: False
    (r,) = manager.create_topics([NewTopic("v")], timeout_ms=1000, validate_only=False)
    assert r.error == Errors.NOT_CONTROLLER and not zk.writes


def test_create_topics_waits_for_leaders_in_the_purgatory(setup):
    manager, zk, cache = setup
    waiting = gevent.spawn(manager.create_topics, [NewTopic("w", 2, 1)], 60_000, False)
    gevent.sleep(0)
    assert not waiting.ready() and manager.topic_purgatory.watched("w") == 1
    elect(cache, "w", 2)
    manager.try_complete_delayed_topic_operations(["w"])
    (r,) = waiting.get(timeout=1)
    assert (r.error, r.num_partitions) == (Errors.NONE, 2)


def test_delete_topics(setup):
    manager, zk, cache = setup
    zk.topics["gone"] = z.TopicAssignment({0: [1]})
    elect(cache, "gone", 1)
    results = manager.delete_topics([("gone", None), ("nope", None)], timeout_ms=0)
    assert [(r.name, r.error) for r in results] == [("gone", Errors.REQUEST_TIMED_OUT),
                                                    ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    assert zk.writes == [("delete", "gone")]
    manager.config.values["delete.topic.enable"] = False
    (r,) = manager.delete_topics([("gone", None)], timeout_ms=0)
    assert (r.error, r.message) == (Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")


def test_create_partitions(setup):
    manager, zk, _ = setup
    zk.topics["t"] = z.TopicAssignment({0: [1, 2]})
    results = manager.create_partitions([("t", 3, None), ("t2", 2, None), ("t", 1, None)], 0, False)
    assert [r.error for r in results] == [Errors.INVALID_REQUEST, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                          Errors.INVALID_REQUEST]
    (r,) = manager.create_partitions([("t", 3, None)], 0, False)
    assert r.error == Errors.NONE and sorted(zk.topics["t"].partitions) == [0, 1, 2]
    (r,) = manager.create_partitions([("t", 3, None)], 0, False)
    assert r.error == Errors.INVALID_PARTITIONS


def test_alter_configs_replace_and_incremental_share_one_path(setup):
    manager, zk, _ = setup
    zk.topics["t"] = z.TopicAssignment({0: [1]})
    assert manager.alter_configs([(TOPIC, "t", [("retention.ms", "1000"), ("cleanup.policy", "compact")])],
                                 False) == [(Errors.NONE, None)]
    assert zk.writes[-2:] == [("config", "topics/t"), ("notification", "topics/t")]
    assert manager.incremental_alter_configs(
        [(TOPIC, "t", [("cleanup.policy", APPEND, "delete"), ("retention.ms", DELETE, None)])],
        False) == [(Errors.NONE, None)]
    assert zk.configs[("topics", "t")] == {"cleanup.policy": "compact,delete"}
    assert manager.incremental_alter_configs([(TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")])],
                                             False) == [(Errors.NONE, None)]
    assert zk.configs[("topics", "t")] == {"cleanup.policy": "delete"}
    writes = len(zk.writes)
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
    assert len(zk.writes) == writes     # nothing written for refusals and validate_only


def test_alter_broker_configs(setup):
    manager, zk, _ = setup
    assert manager.incremental_alter_configs([(BROKER, "", [("log.retention.ms", SET, "5000")])], False) == \
        [(Errors.NONE, None)]
    assert zk.writes == [("config", "brokers/<default>"), ("notification", "brokers/<default>")]
    assert manager.alter_configs([(BROKER, "2", [])], False) == \
        [(Errors.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")]
    assert manager.alter_configs([(BROKER, "1", [("num.io.threads", "17")])], False) == [(
        Errors.INVALID_REQUEST, "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Dynamic "
                                "thread count update validation failed for num.io.threads=17, value should not be "
                                "greater than double the current value 8")]
    assert manager.alter_configs([(BROKER, "1", [("broker.id", "3")])], False)[0][0] == Errors.INVALID_REQUEST


def test_describe_topic_configs(setup):
    manager, zk, _ = setup
    zk.topics["t"] = z.TopicAssignment({0: [1]})
    zk.configs[("topics", "t")] = {"retention.ms": "100", "delete.retention.ms": "7"}
    ((error, _, entries),) = manager.describe_configs([(TOPIC, "t", None)])
    assert error == Errors.NONE
    by_name = {e.name: e for e in entries}
    assert (by_name["retention.ms"].value, by_name["retention.ms"].source) == ("100", 1)
    assert [s[0] for s in by_name["retention.ms"].synonyms] == ["retention.ms", "log.retention.hours"]
    assert (by_name["preallocate"].value, by_name["preallocate"].source) == ("false", 5)
    assert by_name["delete.retention.ms"].value == "7"
    assert (by_name["segment.jitter.ms"].value, by_name["segment.jitter.ms"].synonyms) == ("0", [])
    ((error, message, _),) = manager.describe_configs([(TOPIC, "nope", None)])
    assert (error, message) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")
