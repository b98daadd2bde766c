"""LogConfig: a topic's log settings under Kafka's topic-level names, defaulted from the broker's settings.

`LogConfig.from_props(broker_values, overrides)` takes the broker's values keyed by broker property name
(typed, as BrokerConfig.values, or strings; None or absent = unset) and the topic's overrides (strings, as
stored in /config/topics/<topic>). The names, types, defaults, checks and broker synonyms are
common.topic_config's table, and the overrides are validated by the same validate_topic_config that checks them
when they are written, so what CreateTopics, AlterConfigs or kadmin accepted loads identically (InvalidConfig otherwise).
Topic configs kbroker does not act on yet are kept as given (LogConfig.passthrough).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from ..common.admin_errors import AdminError
from ..common.config_def import MAX_LONG, format_value, parse_value
from ..common.topic_config import API_VERSIONS, TOPIC_CONFIGS, api_version, validate_topic_config

from .errors import InvalidConfig

__all__ = ["MAX_LONG", "TOPIC_CONFIG_NAMES", "LogConfig", "record_version"]


def record_version(version: str) -> int:
    """The message format (magic) a message.format.version writes: 0 before 0.10.0, 1 before 0.11.0, else 2."""
    key = api_version(version)
    if key is None:
        raise InvalidConfig(f"Version `{version}` is not a valid version")
    index = API_VERSIONS.index(key)
    return 0 if index < API_VERSIONS.index("0.10.0-IV0") else 1 if index < API_VERSIONS.index("0.11.0-IV0") else 2


def _default(name: str):
    value = TOPIC_CONFIGS[name].default
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class LogConfig:
    """The topic configs kbroker acts on, one field each (the topic config name with '_' for '.')."""
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    retention_ms: int = _default("retention.ms")                # -1: forever
    retention_bytes: int = _default("retention.bytes")          # -1: unlimited
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_format_version: str = _default("message.format.version")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    compression_type: str = _default("compression.type")
    min_insync_replicas: int = _default("min.insync.replicas")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    preallocate: bool = _default("preallocate")
    overridden: frozenset[str] = frozenset()                     # topic config names set by the topic
    passthrough: Mapping[str, str] = field(default_factory=dict)  # the topic's configs kbroker keeps as given

    @classmethod
    def from_props(cls, broker_values: Mapping[str, Any] | None = None,
                   overrides: Mapping[str, str] | None = None) -> "LogConfig":
        broker_values = broker_values or {}
        overrides = dict(overrides or {})
        try:
            typed = validate_topic_config(overrides)
        except AdminError as e:
            raise InvalidConfig(str(e)) from None
        kwargs: dict[str, Any] = {}
        for name in TOPIC_CONFIG_NAMES:
            key = TOPIC_CONFIGS[name]
            if name in typed:
                value = typed[name]
            else:
                value = next((_broker_value(broker_name, key.type, broker_values[broker_name], factor)
                              for broker_name, factor in key.synonyms
                              if broker_values.get(broker_name) is not None), key.default)
            kwargs[name.replace(".", "_")] = tuple(value) if isinstance(value, list) else value
        if kwargs["retention_ms"] < 0:
            kwargs["retention_ms"] = -1
        return cls(**kwargs, overridden=frozenset(k for k in overrides if k in TOPIC_CONFIG_NAMES),
                   passthrough={k: str(v) for k, v in overrides.items() if k not in TOPIC_CONFIG_NAMES})

    def as_props(self) -> dict[str, str]:
        """Every setting under its topic config name, formatted as Kafka shows it (DescribeConfigs)."""
        out = {name: format_value(getattr(self, name.replace(".", "_"))) for name in TOPIC_CONFIG_NAMES}
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


# The topic configs LogConfig has a field for, in the table's order; the others are passthrough.
_FIELDS = {f.name for f in fields(LogConfig)}
TOPIC_CONFIG_NAMES = tuple(n for n in TOPIC_CONFIGS if n.replace(".", "_") in _FIELDS)


def _broker_value(name: str, kind: str, raw, factor: int):
    """A broker setting as the topic config's type and unit: typed already (BrokerConfig.values), or a string."""
    if isinstance(raw, str):
        try:
            raw = parse_value(kind, raw)
        except ValueError as e:
            raise InvalidConfig(f"Invalid value {raw!r} for configuration {name} (broker): {e}") from None
    return raw if factor == 1 else raw * factor
