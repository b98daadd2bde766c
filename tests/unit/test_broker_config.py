"""Dynamic broker configs: which names may change, how values are checked, and the precedence a broker applies
(its own dynamic value over the cluster default over server.properties)."""
import pytest

from kbroker.config import BrokerConfig
from kbroker.log.config import LogConfig
from kbroker.common.admin_errors import InvalidConfigValueError
from kbroker.common.broker_config import entity_name, parse_entity_name, validate_broker_config


def test_validation_names_the_key():
    assert validate_broker_config({"log.retention.ms": "1000", "log.cleanup.policy": "compact,delete",
                                   "unclean.leader.election.enable": "TRUE"}) == {
        "log.retention.ms": 1000, "log.cleanup.policy": ["compact", "delete"], "unclean.leader.election.enable": True}
    with pytest.raises(InvalidConfigValueError, match=r"Cannot update these configs dynamically: Set\(broker.id\)"):
        validate_broker_config({"broker.id": "3"})
    with pytest.raises(InvalidConfigValueError, match="log.message.format.version"):
        validate_broker_config({"log.message.format.version": "2.8"})   # excluded, as in Kafka
    with pytest.raises(InvalidConfigValueError, match="Invalid value soon for configuration log.retention.ms"):
        validate_broker_config({"log.retention.ms": "soon"})
    with pytest.raises(InvalidConfigValueError, match="min.insync.replicas: Value must be at least 1"):
        validate_broker_config({"min.insync.replicas": "0"})
    with pytest.raises(InvalidConfigValueError, match="compression.type"):
        validate_broker_config({"compression.type": "brotli"})


def test_custom_keys_pass_static_and_per_broker_settings_do_not():
    from kbroker.config import SETTINGS
    known = SETTINGS.__contains__
    assert validate_broker_config({"acme.plugin": "x", "metric.reporters": ""}, known) == {"metric.reporters": []}
    for name in ("broker.id", "ssl.client.auth", "listener.name.ssl.ssl.client.auth"):
        with pytest.raises(InvalidConfigValueError, match="Cannot update these configs dynamically"):
            validate_broker_config({name: "1"}, known)
    with pytest.raises(InvalidConfigValueError, match="metric.reporters"):
        validate_broker_config({"metric.reporters": "com.acme.Reporter"}, known)
    with pytest.raises(InvalidConfigValueError, match="acme.plugin"):     # without the table every name is a setting
        validate_broker_config({"acme.plugin": "x"})


def test_entity_names():
    assert entity_name(None) == "<default>" and entity_name(2) == "2"
    assert parse_entity_name("<default>") is None and parse_entity_name("7") == 7
    with pytest.raises(ValueError):
        parse_entity_name("x")


def test_precedence_and_invalid_entries_left_out():
    cfg = BrokerConfig({"zookeeper.connect": "zk", "broker.id": "1", "log.retention.hours": "5",
                        "min.insync.replicas": "2"})
    changed, problems = cfg.apply_dynamic({"log.retention.ms": "1000", "min.insync.replicas": "3",
                                           "broker.id": "9"},
                                          {"min.insync.replicas": "4", "message.max.bytes": "many"})
    assert changed == {"log.retention.ms", "min.insync.replicas"}
    assert cfg["min.insync.replicas"] == 4 and cfg.log_retention_ms == 1000 and cfg.broker_id == 1
    assert len(problems) == 2 and any("broker.id" in p for p in problems) and any("message.max.bytes" in p
                                                                                 for p in problems)
    assert cfg.dynamic_broker == {"min.insync.replicas": "4"}
    log_config = LogConfig.from_props(cfg.values)
    assert (log_config.retention_ms, log_config.min_insync_replicas) == (1000, 4)
    # Removing the dynamic values restores the static ones.
    changed, _ = cfg.apply_dynamic({}, {})
    assert changed == {"log.retention.ms", "min.insync.replicas"}
    assert cfg["min.insync.replicas"] == 2 and cfg.log_retention_ms == 5 * 3600_000


def test_log_config_rebuilt_over_new_defaults_keeps_topic_overrides():
    topic = LogConfig.from_props({"log.retention.ms": 1000}, {"segment.bytes": "2000", "cleanup.policy": "compact",
                                                              "delete.retention.ms": "5"})
    rebuilt = LogConfig.from_props({"log.retention.ms": 9000, "log.segment.bytes": 50000}, topic.overrides())
    assert (rebuilt.retention_ms, rebuilt.segment_bytes, rebuilt.cleanup_policy) == (9000, 2000, ("compact",))
    assert rebuilt.passthrough == {"delete.retention.ms": "5"}


def test_running_broker_keeps_thread_counts_outside_half_to_double():
    cfg = BrokerConfig({"zookeeper.connect": "zk", "broker.id": "1", "log.cleaner.threads": "2"})
    cfg.apply_dynamic({}, {"log.cleaner.threads": "100"})          # at start-up: taken as it is
    assert cfg["log.cleaner.threads"] == 100
    cfg = BrokerConfig({"zookeeper.connect": "zk", "broker.id": "1", "log.cleaner.threads": "2"})
    changed, problems = cfg.apply_dynamic({"num.io.threads": "16"}, {"log.cleaner.threads": "4"}, running=True)
    assert changed == {"num.io.threads", "log.cleaner.threads"} and not problems
    changed, problems = cfg.apply_dynamic({"num.io.threads": "16"}, {"log.cleaner.threads": "100"}, running=True)
    assert not changed and cfg["log.cleaner.threads"] == 4 and cfg.dynamic_broker == {"log.cleaner.threads": "4"}
    assert len(problems) == 1 and "log.cleaner.threads=100" in problems[0]
    changed, problems = cfg.apply_dynamic({}, {}, running=True)   # back to static 2 and 8: within the range
    assert changed == {"num.io.threads", "log.cleaner.threads"} and not problems


def test_listener_connection_limits_are_dynamic_per_listener_and_checked_as_the_broker_wide_setting():
    assert validate_broker_config({"listener.name.internal.max.connections": "10",
                                   "listener.name.external.max.connection.creation.rate": "5"}) == {
        "listener.name.internal.max.connections": 10, "listener.name.external.max.connection.creation.rate": 5}
    with pytest.raises(InvalidConfigValueError, match="Invalid value -1 for configuration "
                                                      "listener.name.internal.max.connections"):
        validate_broker_config({"listener.name.internal.max.connections": "-1"})
    with pytest.raises(InvalidConfigValueError, match="Cannot update these configs dynamically"):
        validate_broker_config({"listener.name.internal.ssl.client.auth": "required"})   # a listener's TLS: static
    with pytest.raises(InvalidConfigValueError, match="max.connections.per.ip.overrides: Value must be a list of"):
        validate_broker_config({"max.connections.per.ip.overrides": "127.0.0.1:x"})
    assert validate_broker_config({"max.connections.per.ip.overrides": "127.0.0.1:5, ::1:7"})


def test_a_listener_override_beats_the_broker_wide_value_of_any_layer_and_goes_when_removed():
    cfg = BrokerConfig({"zookeeper.connect": "zk", "broker.id": "1", "max.connections": "100",
                        "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                        "listener.name.internal.max.connections": "20"})
    assert cfg.listener_value("INTERNAL", "max.connections") == 20
    changed, problems = cfg.apply_dynamic({"listener.name.plaintext.max.connections": "30"},
                                          {"max.connections": "50", "listener.name.internal.max.connections": "40"})
    assert problems == []
    assert changed == {"max.connections", "listener.name.plaintext.max.connections",
                       "listener.name.internal.max.connections"}
    assert (cfg["max.connections"], cfg.listener_value("PLAINTEXT", "max.connections"),
            cfg.listener_value("INTERNAL", "max.connections")) == (50, 30, 40)
    changed, _ = cfg.apply_dynamic({}, {})
    assert (cfg["max.connections"], cfg.listener_value("PLAINTEXT", "max.connections"),
            cfg.listener_value("INTERNAL", "max.connections")) == (100, 100, 20)
    assert changed == {"max.connections", "listener.name.plaintext.max.connections",
                       "listener.name.internal.max.connections"}
    _, problems = cfg.apply_dynamic({"listener.name.internal.max.connections": "many"}, {})
    assert len(problems) == 1 and "listener.name.internal.max.connections" in problems[0]
    assert cfg.listener_value("INTERNAL", "max.connections") == 20


def test_a_listeners_stores_are_per_broker_and_need_the_listener_prefix():
    """Kafka's DynamicBrokerConfig.validateConfigs on SslConfigs.RECONFIGURABLE_CONFIGS."""
    from kbroker.config import SETTINGS
    known = SETTINGS.__contains__
    name = "listener.name.external.ssl.keystore.location"
    assert validate_broker_config({name: "/new.jks", "listener.name.external.ssl.keystore.password": "pw"},
                                  known) == {name: "/new.jks", "listener.name.external.ssl.keystore.password": "pw"}
    with pytest.raises(InvalidConfigValueError, match=r"only per-listener using the listener prefix: "
                                                      r"Set\(ssl.keystore.location\)"):
        validate_broker_config({"ssl.keystore.location": "/new.jks"}, known)
    with pytest.raises(InvalidConfigValueError, match=r"Cannot update these configs at default cluster level, broker "
                                                      r"id must be specified: Set\(" + name):
        validate_broker_config({name: "/new.jks"}, known, per_broker=False)
