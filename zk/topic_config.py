"""Kafka 2.8's topic-level configs (LogConfig): the names a topic override may use, with their types and
valid ranges, and the validation `kafka-topics.sh --config` applies before anything is written.

Values are checked the way Kafka's ConfigDef parses them (surrounding whitespace ignored, ints 32-bit, longs
64-bit, booleans true/false in any case, lists comma-separated) but stored as the user typed them (only
spaces around '=' dropped), as Kafka stores them in /config/topics/<topic>.
"""
from __future__ import annotations

import re

from .admin_errors import InvalidConfigError, InvalidConfigValueError

INT_RANGE = (-2 ** 31, 2 ** 31 - 1)
LONG_RANGE = (-2 ** 63, 2 ** 63 - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")

# Inter-broker/message format versions Kafka 2.8 knows (ApiVersion), oldest first. A value names one of
# them, or a release ("2.8", "0.10.2"), optionally with more dot-separated parts ("2.8.1").
API_VERSIONS = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0",
    "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0",
    "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1",
    "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1",
    "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1",
)
_API_VERSION_NAMES = frozenset(API_VERSIONS) | {v.split("-")[0] for v in API_VERSIONS}


def at_least(low):
    def check(v):
        if v < low:
            return f"Value must be at least {low}"
    return check


def between(low, high):
    def check(v):
        if not low <= v <= high:
            return f"Value must be no less than {low} and no more than {high}"
    return check


def one_of(*allowed):
    def check(v):
        if v not in allowed:
            return f"String must be one of: {', '.join(allowed)}"
    return check


def all_of(*allowed):
    def check(items):
        for item in items:
            if item not in allowed:
                return f"'{item}' is not one of: {', '.join(allowed)}"
    return check


def _api_version(v):
    parts = v.split(".")
    key = ".".join(parts[:3] if v.startswith("0.") else parts[:2])
    if key not in _API_VERSION_NAMES:
        return f"Version `{v}` is not a valid version (2.8 knows {API_VERSIONS[0]} to {API_VERSIONS[-1]})"


def _throttled_replicas(items):
    if [i.strip() for i in items] == ["*"]:
        return None
    if not all(re.fullmatch(r"([0-9]+:[0-9]+)?", i.strip()) for i in items):
        return "must be the literal '*' or a list of replicas in the form [partitionId]:[brokerId],..."


# name -> (type, check or None). Types: int, long, double, boolean, string, list.
TOPIC_CONFIGS = {
    "cleanup.policy": ("list", all_of("compact", "delete")),
    "compression.type": ("string", one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    "delete.retention.ms": ("long", at_least(0)),
    "file.delete.delay.ms": ("long", at_least(0)),
    "flush.messages": ("long", at_least(0)),
    "flush.ms": ("long", at_least(0)),
    "follower.replication.throttled.replicas": ("list", _throttled_replicas),
    "index.interval.bytes": ("int", at_least(0)),
    "leader.replication.throttled.replicas": ("list", _throttled_replicas),
    "max.compaction.lag.ms": ("long", at_least(1)),
    "max.message.bytes": ("int", at_least(0)),
    "message.downconversion.enable": ("boolean", None),
    "message.format.version": ("string", _api_version),
    "message.timestamp.difference.max.ms": ("long", at_least(0)),
    "message.timestamp.type": ("string", one_of("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": ("double", between(0, 1)),
    "min.compaction.lag.ms": ("long", at_least(0)),
    "min.insync.replicas": ("int", at_least(1)),
    "preallocate": ("boolean", None),
    "retention.bytes": ("long", None),
    "retention.ms": ("long", at_least(-1)),
    "segment.bytes": ("int", at_least(14)),  # the smallest v0 record (LegacyRecord.RECORD_OVERHEAD_V0)
    "segment.index.bytes": ("int", at_least(0)),
    "segment.jitter.ms": ("long", at_least(0)),
    "segment.ms": ("long", at_least(1)),
    "unclean.leader.election.enable": ("boolean", None),
}


def parse_value(kind: str, raw: str):
    """The typed value of raw, or raise ValueError with the reason."""
    v = raw.strip()
    if kind in ("int", "long"):
        low, high = INT_RANGE if kind == "int" else LONG_RANGE
        if not _INTEGER.fullmatch(v) or not low <= int(v) <= high:
            raise ValueError(f"Not a number of type {kind.upper()}")
        return int(v)
    if kind == "double":
        if not _DOUBLE.fullmatch(v):
            raise ValueError("Not a number of type DOUBLE")
        return float(v)
    if kind == "boolean":
        if v.lower() not in ("true", "false"):
            raise ValueError("Expected value to be either true or false")
        return v.lower() == "true"
    if kind == "list":
        items = re.split(r"\s*,\s*", v) if v else []
        while items and items[-1] == "":  # Java's split drops trailing empty strings
            items.pop()
        return items
    return v


def checked_value(name: str, kind: str, check, raw: str):
    """raw parsed as `kind` and passed through `check`; InvalidConfigValueError naming the key otherwise."""
    try:
        value = parse_value(kind, raw)
    except ValueError as e:
        raise InvalidConfigValueError(f"Invalid value {raw} for configuration {name}: {e}") from None
    reason = check(value) if check else None
    if reason:
        raise InvalidConfigValueError(f"Invalid value {raw} for configuration {name}: {reason}")
    return value


def validate_topic_config(config: dict[str, str]) -> None:
    """Raise AdminError for an unknown name, a value of the wrong type or out of range, or
    min.compaction.lag.ms > max.compaction.lag.ms (Kafka's LogConfig.validate)."""
    for name in config:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
    values = {name: checked_value(name, *TOPIC_CONFIGS[name], raw) for name, raw in config.items()}
    low, high = values.get("min.compaction.lag.ms", 0), values.get("max.compaction.lag.ms", LONG_RANGE[1])
    if low > high:
        raise InvalidConfigError(f"Conflicting topic configs: min.compaction.lag.ms ({low}) > "
                         f"max.compaction.lag.ms ({high})")
