"""Topic name rules (Kafka's Topic.validate and '.'/'_' collisions) and topic config validation (Kafka 2.8's
LogConfig names, types and ranges)."""
import pytest

from kbroker.common.admin_errors import AdminError
from admin_cli.topics import parse_config_args
from kbroker.common.topic_config import TOPIC_CONFIGS, validate_topic_config
from zk.admin import collides, has_collision_chars, validate_topic_name


@pytest.mark.parametrize("name", ["orders", "a", "A-b_c.d", "x" * 249, "...", "_", "-", "0", "__consumer_offsets"])
def test_valid_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name, message", [
    ("", "empty"),
    (".", r'"\." or "\.\."'),
    ("..", r'"\." or "\.\."'),
    ("x" * 250, "longer than 249"),
    ("a b", "illegal"),
    ("a/b", "illegal"),
    ("a:b", "illegal"),
    ("ørders", "illegal"),
    ("a\n", "illegal"),
    ("١٢", "illegal"),  # non-ASCII digits
])
def test_invalid_names(name, message):
    with pytest.raises(AdminError, match=message):
        validate_topic_name(name)


def test_collisions():
    assert has_collision_chars("a.b") and has_collision_chars("a_b") and not has_collision_chars("a-b")
    assert collides("a.b", "a_b") and collides("a_b_c", "a.b_c") and collides("x", "x")
    assert not collides("a.b", "a-b") and not collides("ab", "a_b")


def test_kafka_28_topic_config_names():
    assert set(TOPIC_CONFIGS) == {
        "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
        "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
        "leader.replication.throttled.replicas", "max.compaction.lag.ms", "max.message.bytes",
        "message.downconversion.enable", "message.format.version", "message.timestamp.difference.max.ms",
        "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
        "preallocate", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
        "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable"}


@pytest.mark.parametrize("name, value", [
    ("cleanup.policy", "compact"), ("cleanup.policy", "delete"), ("cleanup.policy", "compact,delete"),
    ("cleanup.policy", " delete , compact "), ("compression.type", "zstd"), ("compression.type", "producer"),
    ("message.format.version", "2.8-IV1"), ("message.format.version", "0.10.2"),
    ("message.format.version", "0.10.0-IV1"), ("message.format.version", "2.8.1"),
    ("message.format.version", "0.8.2.2"), ("message.format.version", "1.0"),
    ("min.insync.replicas", "1"), ("min.insync.replicas", "2147483647"), ("retention.ms", "-1"),
    ("retention.ms", "9223372036854775807"), ("retention.bytes", "-5"), ("segment.bytes", "14"),
    ("segment.bytes", " 1048576 "), ("max.message.bytes", "0"), ("message.timestamp.type", "LogAppendTime"),
    ("unclean.leader.election.enable", "TRUE"), ("preallocate", "false"), ("min.cleanable.dirty.ratio", "0"),
    ("min.cleanable.dirty.ratio", "1"), ("min.cleanable.dirty.ratio", "0.25"), ("segment.ms", "1"),
    ("leader.replication.throttled.replicas", "*"), ("follower.replication.throttled.replicas", "0:1,1:2"),
    ("max.compaction.lag.ms", "1"),
])
def test_valid_values(name, value):
    validate_topic_config({name: value})


@pytest.mark.parametrize("name, value, message", [
    ("retention.mss", "1", "Unknown topic config name: retention.mss"),
    ("log.retention.ms", "1", "Unknown topic config name"),  # a broker name, not a topic one
    ("cleanup.policy", "compacted", "compacted"),
    ("cleanup.policy", "compact,nope", "nope"),
    ("compression.type", "GZIP", "String must be one of"),
    ("compression.type", "brotli", "String must be one of"),
    ("message.format.version", "2.9", "not a valid version"),
    ("message.format.version", "3.0-IV0", "not a valid version"),
    ("message.format.version", "0.10", "not a valid version"),
    ("min.insync.replicas", "0", "at least 1"),
    ("min.insync.replicas", "two", "Not a number of type INT"),
    ("min.insync.replicas", "2147483648", "INT"),
    ("min.insync.replicas", "1.5", "INT"),
    ("retention.ms", "-2", "at least -1"),
    ("retention.ms", "9223372036854775808", "LONG"),
    ("retention.ms", "1_000", "LONG"),
    ("segment.bytes", "13", "at least 14"),
    ("max.message.bytes", "-1", "at least 0"),
    ("message.timestamp.type", "createtime", "CreateTime, LogAppendTime"),
    ("unclean.leader.election.enable", "yes", "true or false"),
    ("min.cleanable.dirty.ratio", "1.5", "no more than 1"),
    ("min.cleanable.dirty.ratio", "nan", "DOUBLE"),
    ("segment.ms", "0", "at least 1"),
    ("leader.replication.throttled.replicas", "0-1", "literal"),
    ("follower.replication.throttled.replicas", "*,0:1", "literal"),
])
def test_invalid_values(name, value, message):
    with pytest.raises(AdminError, match=message):
        validate_topic_config({name: value})


def test_value_error_names_value_and_config():
    with pytest.raises(AdminError, match=r"^Invalid value -2 for configuration retention\.ms: Value must be at least -1$"):
        validate_topic_config({"retention.ms": "-2"})


def test_compaction_lag_bounds_conflict():
    validate_topic_config({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"})
    with pytest.raises(AdminError, match="min.compaction.lag.ms"):
        validate_topic_config({"min.compaction.lag.ms": "11", "max.compaction.lag.ms": "10"})


def test_parse_config_args():
    assert parse_config_args([]) == {}
    assert parse_config_args(["retention.ms=1", "cleanup.policy = compact", "retention.ms=2"]) == {
        "retention.ms": "2", "cleanup.policy": "compact"}
    assert parse_config_args(["follower.replication.throttled.replicas=0:1,1:2"]) == {
        "follower.replication.throttled.replicas": "0:1,1:2"}


@pytest.mark.parametrize("pair", ["retention.ms", "retention.ms=", "=1", "a=b=c", ""])
def test_parse_config_args_rejects(pair):
    with pytest.raises(ValueError, match="key=value"):
        parse_config_args([pair])
