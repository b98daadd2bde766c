"""Kafka 2.8's topic-level configs (LogConfig): THE table of the names a topic override may use, with their types,
defaults, valid ranges and the broker settings they fall back to, and the validation applied wherever topic
configs are written (CreateTopics, AlterConfigs, kadmin --zookeeper) and read (kbroker.log.config.LogConfig).

Both sides go through validate_topic_config, so a value accepted when written parses identically when loaded.
Values are stored as the user typed them (only spaces around '=' dropped), as Kafka stores them in
/config/topics/<topic>.
"""
from __future__ import annotations

import re

from .admin_errors import InvalidConfigError
from .config_def import MAX_LONG, ConfigKey, all_of, at_least, between, checked_value, one_of

# Inter-broker/message format versions Kafka 2.8 knows (ApiVersion), oldest first. A value names one of
# them, or a release ("2.8", "0.10.2": its latest), optionally with more dot-separated parts ("2.8.1").
API_VERSIONS = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0",
    "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0",
    "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1",
    "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1",
    "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1",
)
_LATEST_OF_RELEASE = {v.split("-")[0]: v for v in API_VERSIONS}   # later versions of a release overwrite
_HOURS, _MINUTES = 3_600_000, 60_000
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def api_version(version: str) -> str | None:
    """The ApiVersion a version string names (Kafka's ApiVersion.apply), None if 2.8 knows none."""
    parts = version.strip().split(".")
    key = ".".join(parts[:3] if version.strip().startswith("0.") else parts[:2])
    return key if key in API_VERSIONS else _LATEST_OF_RELEASE.get(key)


def valid_api_version(v):
    """The check of a Kafka version setting (ApiVersionValidator)."""
    if api_version(v) is None:
        return f"Version `{v}` is not a valid version (2.8 knows {API_VERSIONS[0]} to {API_VERSIONS[-1]})"


def _throttled_replicas(items):
    if [i.strip() for i in items] == ["*"]:
        return None
    if not all(re.fullmatch(r"([0-9]+:[0-9]+)?", i.strip()) for i in items):
        return "must be the literal '*' or a list of replicas in the form [partitionId]:[brokerId],..."


def _key(kind, default, check=None, *synonyms):
    """A topic config; a synonym is a broker setting name, or (name, factor) when its unit differs."""
    return ConfigKey(kind, default, check, tuple((s, 1) if isinstance(s, str) else s for s in synonyms))


# LogConfig's defaults; the synonyms are Kafka's (LogConfig.TopicConfigSynonyms and the extra names of
# KafkaConfig it reads), except that DescribeConfigs shows none for segment.jitter.ms and
# message.downconversion.enable, as kbroker always has.
TOPIC_CONFIGS: dict[str, ConfigKey] = {
    "cleanup.policy": _key("list", ["delete"], all_of("compact", "delete"), "log.cleanup.policy"),
    "compression.type": _key("string", "producer", one_of(*COMPRESSION_TYPES), "compression.type"),
    "delete.retention.ms": _key("long", 86400000, at_least(0), "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": _key("long", 60000, at_least(0), "log.segment.delete.delay.ms"),
    "flush.messages": _key("long", MAX_LONG, at_least(0), "log.flush.interval.messages"),
    "flush.ms": _key("long", MAX_LONG, at_least(0), "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "follower.replication.throttled.replicas": _key("list", [], _throttled_replicas),
    "index.interval.bytes": _key("int", 4096, at_least(0), "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": _key("list", [], _throttled_replicas),
    "max.compaction.lag.ms": _key("long", MAX_LONG, at_least(1), "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": _key("int", 1048588, at_least(0), "message.max.bytes"),
    "message.downconversion.enable": _key("boolean", True),
    "message.format.version": _key("string", "2.8-IV1", valid_api_version, "log.message.format.version"),
    "message.timestamp.difference.max.ms": _key("long", MAX_LONG, at_least(0),
                                                "log.message.timestamp.difference.max.ms"),
    "message.timestamp.type": _key("string", "CreateTime", one_of("CreateTime", "LogAppendTime"),
                                   "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": _key("double", 0.5, between(0, 1), "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": _key("long", 0, at_least(0), "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": _key("int", 1, at_least(1), "min.insync.replicas"),
    "preallocate": _key("boolean", False, None, "log.preallocate"),
    "retention.bytes": _key("long", -1, None, "log.retention.bytes"),
    "retention.ms": _key("long", 168 * _HOURS, at_least(-1), "log.retention.ms",
                         ("log.retention.minutes", _MINUTES), ("log.retention.hours", _HOURS)),
    # the smallest segment holds the smallest v0 record (LegacyRecord.RECORD_OVERHEAD_V0)
    "segment.bytes": _key("int", 1024 ** 3, at_least(14), "log.segment.bytes"),
    "segment.index.bytes": _key("int", 10 * 1024 * 1024, at_least(0), "log.index.size.max.bytes"),
    "segment.jitter.ms": _key("long", 0, at_least(0)),
    "segment.ms": _key("long", 168 * _HOURS, at_least(1), "log.roll.ms", ("log.roll.hours", _HOURS)),
    "unclean.leader.election.enable": _key("boolean", False, None, "unclean.leader.election.enable"),
}


def validate_topic_config(config: dict[str, str]) -> dict:
    """The typed values of a topic's overrides. Raises InvalidConfigError for an unknown name,
    InvalidConfigValueError for a value of the wrong type or out of range, and InvalidConfigError for
    min.compaction.lag.ms > max.compaction.lag.ms (Kafka's LogConfig.validate)."""
    for name in config:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
    values = {name: checked_value(name, TOPIC_CONFIGS[name], raw) for name, raw in config.items()}
    low, high = values.get("min.compaction.lag.ms", 0), values.get("max.compaction.lag.ms", MAX_LONG)
    if low > high:
        raise InvalidConfigError(f"Conflicting topic configs: min.compaction.lag.ms ({low}) > "
                                 f"max.compaction.lag.ms ({high})")
    return values
