"""Topic config commands over ZooKeeper, as Kafka 2.8's `kafka-configs.sh --zookeeper --entity-type topics`
(ConfigCommand with AdminZkClient.changeTopicConfig) performs them.

Altering merges --add-config/--delete-config into the topic's current overrides, validates the result
(zk.topic_config), writes /config/topics/<T> and then a /config/changes/config_change_<seq> notification so
every broker re-reads the topic's config. Nothing is written when anything is refused.
"""
from __future__ import annotations

import re

from zk.admin_errors import AdminError, InvalidConfigError, UnknownTopicError
from zk.client import KafkaZkClient
from zk.topic_config import validate_topic_config

# ConfigCommand's look-ahead: a ',' or '=' that is not inside [...].
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(values) -> dict[str, str]:
    """kafka-configs.sh --add-config 'k=v,k2=[a,b]' (each of values): commas inside [] belong to the value,
    the brackets are dropped ('cleanup.policy=[compact,delete]' -> 'compact,delete'), an empty value is
    allowed ('k='). Later settings of a key win. Raises ValueError for an item that is not key=value."""
    config: dict[str, str] = {}
    for value in values:
        for item in re.split("," + _OUTSIDE_BRACKETS, value):
            parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
            if len(parts) != 2 or not parts[0].strip():
                raise ValueError("Invalid entity config: all configs to be added must be in the format "
                                 f"\"key=val\" (got '{item}').")
            config[parts[0].strip()] = re.sub(r"[\[\]]", "", parts[1]).strip()
    return config


def parse_delete_config(values) -> list[str]:
    """--delete-config 'k,k2' (each of values) -> ['k', 'k2'], in order, without repeats."""
    keys: list[str] = []
    for value in values:
        for key in value.split(","):
            key = key.strip()
            if not key:
                raise ValueError(f"'{value}' has an empty config name.")
            if key not in keys:
                keys.append(key)
    return keys


def _require_topic(zk: KafkaZkClient, topic: str) -> None:
    if not zk.topic_exists(topic):
        raise UnknownTopicError(f"Topic '{topic}' does not exist.")


def alter_topic_config(zk: KafkaZkClient, topic: str, to_add: dict[str, str], to_delete: list[str]) -> dict[str, str]:
    """Merge into the topic's overrides, validate, write the config znode then the change notification.
    Returns the new overrides. Raises AdminError (nothing written) for an unknown topic, a deleted key that is
    not set, a key both added and deleted, or an invalid result."""
    both = [k for k in to_delete if k in to_add]
    if both:
        raise InvalidConfigError(f"Config(s) both added and deleted: {','.join(both)}")
    _require_topic(zk, topic)
    config = dict(zk.get_entity_config("topics", topic))
    missing = [k for k in to_delete if k not in config]
    if missing:
        raise InvalidConfigError(f"Invalid config(s): {','.join(missing)}")
    config.update(to_add)
    for k in to_delete:
        del config[k]
    validate_topic_config(config)
    zk.set_or_create_entity_config("topics", topic, config)
    zk.create_config_change_notification(f"topics/{topic}")
    return config


def describe_topic_configs(zk: KafkaZkClient, topic: str | None = None) -> list[tuple[str, dict[str, str]]]:
    """(topic, overrides) of topic, or of every topic (sorted by name) when topic is None."""
    if topic is not None:
        _require_topic(zk, topic)
        return [(topic, zk.get_entity_config("topics", topic))]
    return [(t, zk.get_entity_config("topics", t)) for t in zk.get_all_topics()]


def format_topic_configs(topic: str, config: dict[str, str]) -> list[str]:
    """kafka-configs.sh --describe (2.8): a header, then each dynamic override with its synonym."""
    lines = [f"Dynamic configs for topic {topic} are:"]
    for k, v in sorted(config.items()):
        lines.append(f"  {k}={v} sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:{k}={v}}}")
    return lines


__all__ = ["AdminError", "parse_add_config", "parse_delete_config", "alter_topic_config",
           "describe_topic_configs", "format_topic_configs"]
