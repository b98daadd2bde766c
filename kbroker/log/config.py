"""LogConfig: a topic's log settings under Kafka's topic-level names, defaulted from the broker's settings.

`LogConfig.from_props(broker_values, overrides)` takes the broker's values keyed by broker property name
(typed, as BrokerConfig.values, or strings; None or absent = unset) and the topic's overrides (strings, as
stored in /config/topics/<topic>), validated as Kafka validates topic configs (InvalidConfig otherwise).
Broker synonyms are Kafka's: segment.ms <- log.roll.ms | log.roll.hours, retention.ms <- log.retention.ms |
log.retention.minutes | log.retention.hours, flush.ms <- log.flush.interval.ms | log.flush.scheduler.interval.ms,
max.message.bytes <- message.max.bytes, file.delete.delay.ms <- log.segment.delete.delay.ms, and `log.` + the
topic name for the rest (compression.type, min.insync.replicas, unclean.leader.election.enable as is).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .errors import InvalidConfig

MAX_LONG = 2 ** 63 - 1

# Kafka 2.8's ApiVersion keys: message.format.version values (a longer "2.8.0" or "0.10.0.1" is cut to these)
_VERSIONS = ("0.8.0 0.8.1 0.8.2 0.9.0 0.10.0-IV0 0.10.0-IV1 0.10.0 0.10.1-IV0 0.10.1-IV1 0.10.1-IV2 0.10.1 "
             "0.10.2-IV0 0.10.2 0.11.0-IV0 0.11.0-IV1 0.11.0-IV2 0.11.0 1.0-IV0 1.0 1.1-IV0 1.1 2.0-IV0 2.0-IV1 "
             "2.0 2.1-IV0 2.1-IV1 2.1-IV2 2.1 2.2-IV0 2.2-IV1 2.2 2.3-IV0 2.3-IV1 2.3 2.4-IV0 2.4-IV1 2.4 2.5-IV0 "
             "2.5 2.6-IV0 2.6 2.7-IV0 2.7-IV1 2.7-IV2 2.7 2.8-IV0 2.8-IV1 2.8").split()

# Kafka topic configs accepted and kept (LogConfig.passthrough) that kbroker does not act on yet
PASSTHROUGH_TOPIC_CONFIGS = ("delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
                             "min.cleanable.dirty.ratio", "segment.jitter.ms", "message.downconversion.enable",
                             "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def version_key(version: str) -> str:
    """Kafka's ApiVersion lookup key of a version string; InvalidConfig if it is not a known version."""
    parts = version.strip().split(".")
    key = ".".join(parts[:3] if version.strip().startswith("0.") else parts[:2])
    if key not in _VERSIONS:
        raise InvalidConfig(f"Version `{version}` is not a valid version")
    return key


def record_version(version: str) -> int:
    """The message format (magic) a message.format.version writes: 0 before 0.10.0, 1 before 0.11.0, else 2."""
    index = _VERSIONS.index(version_key(version))
    return 0 if index < _VERSIONS.index("0.10.0-IV0") else 1 if index < _VERSIONS.index("0.11.0-IV0") else 2


def _int_parser(bits: int) -> Callable[[Any], int]:
    def parse(raw) -> int:
        if isinstance(raw, bool):
            raise ValueError("expected an integer")
        value = int(str(raw).strip())
        if not -2 ** bits <= value < 2 ** bits:
            raise ValueError("out of range")
        return value
    return parse


def _bool(raw) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ValueError("expected true or false")
    return text == "true"


def _list(raw) -> tuple[str, ...]:
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    return tuple(s.strip() for s in items if str(s).strip())


def _string(raw) -> str:
    return str(raw).strip()


def _at_least(n: int):
    return lambda v: v >= n, f"at least {n}"


def _one_of(*choices: str):
    return lambda v: v in choices, "one of " + ", ".join(choices)


def _all_in(*choices: str):
    return lambda v: all(x in choices for x in v), "a list of " + ", ".join(choices)


def _version():
    def check(v: str) -> bool:
        version_key(v)
        return True
    return check, "a valid version"


_INT, _LONG = _int_parser(31), _int_parser(63)
_HOURS, _MINUTES = 3_600_000, 60_000

# topic config -> (field, parser, (check, rule) or None, broker synonyms as (name, multiplier));
# defaults are LogConfig's
_DEFS: dict[str, tuple] = {
    "segment.bytes": ("segment_bytes", _INT, _at_least(14), [("log.segment.bytes", 1)]),
    "segment.ms": ("segment_ms", _LONG, _at_least(1), [("log.roll.ms", 1), ("log.roll.hours", _HOURS)]),
    "segment.index.bytes": ("segment_index_bytes", _INT, _at_least(0), [("log.index.size.max.bytes", 1)]),
    "index.interval.bytes": ("index_interval_bytes", _INT, _at_least(0), [("log.index.interval.bytes", 1)]),
    "flush.messages": ("flush_messages", _LONG, _at_least(0), [("log.flush.interval.messages", 1)]),
    "flush.ms": ("flush_ms", _LONG, _at_least(0),
                 [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)]),
    "retention.ms": ("retention_ms", _LONG, _at_least(-1),
                     [("log.retention.ms", 1), ("log.retention.minutes", _MINUTES), ("log.retention.hours", _HOURS)]),
    "retention.bytes": ("retention_bytes", _LONG, None, [("log.retention.bytes", 1)]),
    "file.delete.delay.ms": ("file_delete_delay_ms", _LONG, _at_least(0), [("log.segment.delete.delay.ms", 1)]),
    "max.message.bytes": ("max_message_bytes", _INT, _at_least(0), [("message.max.bytes", 1)]),
    "message.format.version": ("message_format_version", _string, _version(),
                               [("log.message.format.version", 1)]),
    "message.timestamp.type": ("message_timestamp_type", _string, _one_of("CreateTime", "LogAppendTime"),
                               [("log.message.timestamp.type", 1)]),
    "message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", _LONG, _at_least(0),
                                            [("log.message.timestamp.difference.max.ms", 1)]),
    "cleanup.policy": ("cleanup_policy", _list, _all_in("compact", "delete"), [("log.cleanup.policy", 1)]),
    "compression.type": ("compression_type", _string,
                         _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
                         [("compression.type", 1)]),
    "min.insync.replicas": ("min_insync_replicas", _INT, _at_least(1), [("min.insync.replicas", 1)]),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool, None,
                                       [("unclean.leader.election.enable", 1)]),
    "preallocate": ("preallocate", _bool, None, [("log.preallocate", 1)]),
}
TOPIC_CONFIG_NAMES = tuple(_DEFS)


def _value(name: str, where: str, raw, parser, check):
    try:
        value = parser(raw)
        if check is not None and not check[0](value):
            raise ValueError(f"must be {check[1]}")
    except (ValueError, InvalidConfig) as e:
        raise InvalidConfig(f"Invalid value {raw!r} for configuration {name}{where}: {e}") from None
    return value


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1024 ** 3
    segment_ms: int = 168 * _HOURS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = MAX_LONG
    flush_ms: int = MAX_LONG
    retention_ms: int = 168 * _HOURS          # -1: forever
    retention_bytes: int = -1                 # -1: unlimited
    file_delete_delay_ms: int = 60000
    max_message_bytes: int = 1048588
    message_format_version: str = "2.8-IV1"
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = MAX_LONG
    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    overridden: frozenset[str] = frozenset()                     # topic config names set by the topic
    passthrough: Mapping[str, str] = field(default_factory=dict)  # PASSTHROUGH_TOPIC_CONFIGS set by the topic

    @classmethod
    def from_props(cls, broker_values: Mapping[str, Any] | None = None,
                   overrides: Mapping[str, str] | None = None) -> "LogConfig":
        broker_values = broker_values or {}
        overrides = overrides or {}
        kwargs: dict[str, Any] = {}
        for name, (attr, parser, check, synonyms) in _DEFS.items():
            if name in overrides:
                kwargs[attr] = _value(name, "", overrides[name], parser, check)
                continue
            for broker_name, multiplier in synonyms:
                raw = broker_values.get(broker_name)
                if raw is not None:
                    value = _value(broker_name, " (broker)", raw, parser, None)
                    kwargs[attr] = value * multiplier if multiplier != 1 else value
                    break
            else:
                kwargs[attr] = cls.__dataclass_fields__[attr].default
        if kwargs["retention_ms"] < 0:
            kwargs["retention_ms"] = -1
        unknown = sorted(k for k in overrides if k not in _DEFS and k not in PASSTHROUGH_TOPIC_CONFIGS)
        if unknown:
            raise InvalidConfig(f"Unknown topic config name: {unknown[0]}")
        return cls(**kwargs, overridden=frozenset(k for k in overrides if k in _DEFS),
                   passthrough={k: str(v) for k, v in overrides.items() if k in PASSTHROUGH_TOPIC_CONFIGS})

    def as_props(self) -> dict[str, str]:
        """Every setting under its topic config name, formatted as Kafka shows it (DescribeConfigs)."""
        out = {}
        for name, (attr, *_) in _DEFS.items():
            value = getattr(self, attr)
            out[name] = (",".join(value) if isinstance(value, tuple) else
                         str(value).lower() if isinstance(value, bool) else str(value))
        out.update(self.passthrough)
        return out

    def overrides(self) -> dict[str, str]:
        """The topic's own settings, as /config/topics holds them: what to rebuild this config from over new
        broker defaults (LogConfig.from_props(new_broker_values, config.overrides()))."""
        props = self.as_props()
        return {**{name: props[name] for name in self.overridden}, **self.passthrough}

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def record_version(self) -> int:
        return record_version(self.message_format_version)

    @property
    def initial_file_size(self) -> int:
        return self.segment_bytes if self.preallocate else 0

