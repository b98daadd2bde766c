"""kbroker.log.config.LogConfig: Kafka's topic config names, defaults from the broker's settings and their
synonyms, validation of topic overrides."""
import pytest

from kbroker.config import BrokerConfig
from kbroker.log.config import TOPIC_CONFIG_NAMES, LogConfig, record_version
from kbroker.log.errors import InvalidConfig


def broker(**props):
    return BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", **props}).values


def test_kafka_defaults():
    config = LogConfig.from_props(broker(), {})
    assert config == LogConfig()      # kbroker.config's default is LogConfig's: 2.8-IV1, as Kafka
    assert (config.segment_bytes, config.segment_ms, config.segment_index_bytes) == (1073741824, 604800000, 10485760)
    assert (config.retention_ms, config.retention_bytes, config.file_delete_delay_ms) == (604800000, -1, 60000)
    assert (config.max_message_bytes, config.index_interval_bytes) == (1048588, 4096)
    assert config.flush_messages == config.flush_ms == 2 ** 63 - 1
    assert config.cleanup_policy == ("delete",) and config.delete and not config.compact
    assert config.message_timestamp_type == "CreateTime" and config.compression_type == "producer"
    assert config.record_version == 2 and config.min_insync_replicas == 1
    assert not config.unclean_leader_election_enable and not config.preallocate


def test_broker_settings_and_their_synonyms():
    config = LogConfig.from_props(broker(**{
        "log.segment.bytes": "1000", "log.roll.hours": "2", "log.retention.minutes": "3",
        "log.index.size.max.bytes": "4096", "log.flush.scheduler.interval.ms": "500", "message.max.bytes": "2000",
        "log.cleanup.policy": "compact,delete", "min.insync.replicas": "2", "log.message.format.version": "0.10.2",
        "log.preallocate": "true", "unclean.leader.election.enable": "true"}))
    assert config.segment_bytes == 1000 and config.segment_ms == 7200000 and config.retention_ms == 180000
    assert config.segment_index_bytes == 4096 and config.flush_ms == 500 and config.max_message_bytes == 2000
    assert config.cleanup_policy == ("compact", "delete") and config.min_insync_replicas == 2
    assert config.record_version == 1 and config.preallocate and config.initial_file_size == 1000
    assert config.unclean_leader_election_enable
    more = LogConfig.from_props(broker(**{"log.roll.ms": "5", "log.roll.hours": "2", "log.retention.ms": "-5",
                                          "log.flush.interval.ms": "7"}))
    assert more.segment_ms == 5 and more.retention_ms == -1 and more.flush_ms == 7
    assert LogConfig.from_props({"log.segment.delete.delay.ms": 10}).file_delete_delay_ms == 10


def test_topic_overrides_win_and_are_recorded():
    config = LogConfig.from_props(broker(**{"log.retention.hours": "1"}),
                                  {"retention.ms": "-1", "cleanup.policy": "compact", "segment.bytes": "2048",
                                   "message.timestamp.type": "LogAppendTime", "preallocate": "TRUE",
                                   "delete.retention.ms": "100"})
    assert config.retention_ms == -1 and config.compact and not config.delete and config.segment_bytes == 2048
    assert config.message_timestamp_type == "LogAppendTime" and config.preallocate
    assert config.overridden == {"retention.ms", "cleanup.policy", "segment.bytes", "message.timestamp.type",
                                 "preallocate"}
    assert config.passthrough == {"delete.retention.ms": "100"}
    props = config.as_props()
    assert set(props) == set(TOPIC_CONFIG_NAMES) | {"delete.retention.ms"}
    assert props["retention.ms"] == "-1" and props["preallocate"] == "true" and props["cleanup.policy"] == "compact"


@pytest.mark.parametrize("overrides", [
    {"segment.bytes": "13"}, {"segment.bytes": "abc"}, {"segment.bytes": str(2 ** 31)}, {"retention.ms": "-2"},
    {"cleanup.policy": "compact,forever"}, {"compression.type": "brotli"}, {"message.format.version": "3.0"},
    {"message.timestamp.type": "create"}, {"unclean.leader.election.enable": "yes"}, {"min.insync.replicas": "0"},
    {"no.such.config": "1"},
])
def test_invalid_overrides_are_refused(overrides):
    with pytest.raises(InvalidConfig) as e:
        LogConfig.from_props({}, overrides)
    assert e.value.code == 40        # INVALID_CONFIG


def test_record_versions():
    assert [record_version(v) for v in ("0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0.1", "0.10.2", "0.11.0", "1.0",
                                        "2.8", "2.8-IV1", "2.8.0")] == [0, 0, 1, 1, 1, 2, 2, 2, 2, 2]
