"""Kafka 2.8's dynamic broker configs: which broker settings may change without a restart, how values are
checked, and the ZooKeeper writes that change them.

A dynamic broker config lives in /config/brokers/<id> (one broker) or /config/brokers/<default> (every broker
without its own value), in the same JSON as topic configs, and takes effect when a
/config/changes/config_change_ notification names "brokers/<id>" or "brokers/<default>" (Kafka's
AdminZkClient.changeBrokerConfig). Precedence on a broker: its own dynamic value, then the cluster default, then
its static server.properties, then Kafka's default (DynamicBrokerConfig).

The names are Kafka's DynamicBrokerConfig.AllDynamicConfigs that kbroker can honour: the broker defaults of
topic configs (DynamicLogConfig: log.retention.ms, message.max.bytes, min.insync.replicas, ...; not
log.message.format.version, as Kafka), the log cleaner's settings, thread-pool sizes and connection limits (kept
for compatibility: gevent has no pools to resize) and the replication quota rates. Listener and SSL settings,
dynamic per broker in Kafka, are refused: kbroker serves plaintext listeners fixed at start-up. Kafka would also
store unknown ("custom") names; kbroker has no plugins to read them, so an unknown name is refused like a static
one — a typo should not be stored silently.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .admin_errors import InvalidConfigError, InvalidConfigValueError
from .topic_config import all_of, at_least, checked_value, one_of

if TYPE_CHECKING:  # kbroker.config imports this module before gevent patches the standard library for kazoo
    from .client import KafkaZkClient

DEFAULT_ENTITY = "<default>"
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# name -> (type, check or None); types as zk.topic_config's
DYNAMIC_BROKER_CONFIGS: dict[str, tuple] = {
    # DynamicLogConfig: broker defaults of topic configs
    "log.segment.bytes": ("int", at_least(14)),
    "log.roll.ms": ("long", None),
    "log.roll.jitter.ms": ("long", None),
    "log.index.size.max.bytes": ("int", at_least(4)),
    "log.flush.interval.messages": ("long", at_least(1)),
    "log.flush.interval.ms": ("long", None),
    "log.retention.bytes": ("long", None),
    "log.retention.ms": ("long", None),
    "message.max.bytes": ("int", at_least(0)),
    "log.index.interval.bytes": ("int", at_least(0)),
    "log.cleaner.delete.retention.ms": ("long", None),
    "log.cleaner.min.compaction.lag.ms": ("long", None),
    "log.cleaner.max.compaction.lag.ms": ("long", None),
    "log.segment.delete.delay.ms": ("long", at_least(0)),
    "log.cleaner.min.cleanable.ratio": ("double", None),
    "log.cleanup.policy": ("list", all_of("compact", "delete")),
    "unclean.leader.election.enable": ("boolean", None),
    "min.insync.replicas": ("int", at_least(1)),
    "compression.type": ("string", one_of(*_COMPRESSION)),
    "log.preallocate": ("boolean", None),
    "log.message.timestamp.type": ("string", one_of("CreateTime", "LogAppendTime")),
    "log.message.timestamp.difference.max.ms": ("long", None),
    "log.message.downconversion.enable": ("boolean", None),
    # LogCleaner
    "log.cleaner.threads": ("int", at_least(0)),
    "log.cleaner.dedupe.buffer.size": ("long", None),
    "log.cleaner.io.buffer.load.factor": ("double", None),
    "log.cleaner.io.buffer.size": ("int", at_least(0)),
    "log.cleaner.io.max.bytes.per.second": ("double", None),
    "log.cleaner.backoff.ms": ("long", at_least(0)),
    # DynamicThreadPool (accepted and validated; nothing to resize under gevent)
    "num.io.threads": ("int", at_least(1)),
    "num.network.threads": ("int", at_least(1)),
    "num.replica.fetchers": ("int", None),
    "num.recovery.threads.per.data.dir": ("int", at_least(1)),
    "background.threads": ("int", at_least(1)),
    # SocketServer
    "max.connections": ("int", at_least(0)),
    "max.connections.per.ip": ("int", at_least(0)),
    "max.connections.per.ip.overrides": ("string", None),
    "max.connection.creation.rate": ("int", at_least(0)),
    # DynamicConfig.Broker: replication quotas
    "leader.replication.throttled.rate": ("long", at_least(0)),
    "follower.replication.throttled.rate": ("long", at_least(0)),
    "replica.alter.log.dirs.io.max.bytes.per.second": ("long", at_least(0)),
}
# Thread counts a running broker may change only within half to double of the current value (Kafka's
# DynamicThreadPool and LogCleaner validation).
THREAD_COUNTS = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                 "num.recovery.threads.per.data.dir", "background.threads", "log.cleaner.threads")


def entity_name(broker_id: int | None) -> str:
    """The /config/brokers child: the broker id, or <default> for the cluster-wide defaults (None)."""
    return DEFAULT_ENTITY if broker_id is None else str(broker_id)


def parse_entity_name(name: str) -> int | None:
    """Inverse of entity_name; ValueError for anything else."""
    if name == DEFAULT_ENTITY:
        return None
    if not name.isdigit():
        raise ValueError(f"Error parsing broker {name}. The broker's Entity Name must be a single integer value")
    return int(name)


def parse_dynamic_value(name: str, raw: str):
    """The typed value of one dynamic broker config; InvalidConfigError naming the key."""
    if name not in DYNAMIC_BROKER_CONFIGS:
        raise InvalidConfigValueError(f"Cannot update these configs dynamically: Set({name})")
    return checked_value(name, *DYNAMIC_BROKER_CONFIGS[name], raw)


def validate_broker_config(config: dict[str, str]) -> dict:
    """Check every name is dynamic and every value parses and is in range (Kafka's
    DynamicBrokerConfig.validateConfigs); returns the typed values. Every name kbroker accepts may be set both
    per broker and cluster-wide (Kafka's per-broker-only names are the listener/SSL ones, refused here)."""
    static = sorted(n for n in config if n not in DYNAMIC_BROKER_CONFIGS)
    if static:
        raise InvalidConfigValueError(f"Cannot update these configs dynamically: Set({', '.join(static)})")
    return {name: parse_dynamic_value(name, raw) for name, raw in config.items()}


def describe_broker_config(zk: KafkaZkClient, broker_id: int | None) -> dict[str, str]:
    """The dynamic configs stored for a broker (or the cluster defaults, None)."""
    return zk.get_entity_config("brokers", entity_name(broker_id))


def write_broker_config(zk: KafkaZkClient, broker_id: int | None, config: dict[str, str]) -> None:
    """/config/brokers/<id|<default>>, then the change notification the brokers act on."""
    name = entity_name(broker_id)
    zk.set_or_create_entity_config("brokers", name, config)
    zk.create_config_change_notification(f"brokers/{name}")


def alter_broker_config(zk: KafkaZkClient, broker_id: int | None, to_add: dict[str, str],
                        to_delete: list[str]) -> dict[str, str]:
    """kafka-configs.sh --entity-type brokers --alter: merge into the stored dynamic configs, validate, write.
    Returns the new configs. Raises InvalidConfigError (nothing written) for a key both added and deleted, a
    deleted key that is not set, or a name or value refused by validate_broker_config."""
    both = [k for k in to_delete if k in to_add]
    if both:
        raise InvalidConfigError(f"Config(s) both added and deleted: {','.join(both)}")
    current = describe_broker_config(zk, broker_id)
    missing = [k for k in to_delete if k not in current]
    if missing:
        raise InvalidConfigError(f"Invalid config(s): {','.join(missing)}")
    validate_broker_config(to_add)
    config = {k: v for k, v in current.items() if k not in to_delete}
    config.update(to_add)
    write_broker_config(zk, broker_id, config)
    return config
