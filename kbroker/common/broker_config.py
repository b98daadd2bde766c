"""Kafka 2.8's dynamic broker configs: which broker settings may change without a restart and how their values
are checked (the writes are zk.admin.AdminZkClient's).

A dynamic broker config lives in /config/brokers/<id> (one broker) or /config/brokers/<default> (every broker
without its own value), in the same JSON as topic configs, and takes effect when a
/config/changes/config_change_ notification names "brokers/<id>" or "brokers/<default>" (Kafka's
AdminZkClient.changeBrokerConfig). Precedence on a broker: its own dynamic value, then the cluster default, then
its static server.properties, then Kafka's default (DynamicBrokerConfig).

The names are Kafka's DynamicBrokerConfig.AllDynamicConfigs that kbroker can honour: the broker defaults of
topic configs (DynamicLogConfig: log.retention.ms, message.max.bytes, min.insync.replicas, ...; not
log.message.format.version, as Kafka), the log cleaner's settings, thread-pool sizes (kept for compatibility:
gevent has no pools to resize), the connection limits (max.connections and max.connection.creation.rate also per
listener, as listener.name.<listener>.<name>), metric.reporters (Kafka's JmxReporter only) and the replication
quota rates. Kafka's per-broker dynamic settings (PER_BROKER_CONFIGS: listeners, SSL and SASL) are refused:
kbroker takes them at start-up only. Names Kafka does not know ("custom" configs, read by plugins) are stored
as Kafka stores them; kbroker has no plugins to read them.
"""
from __future__ import annotations

import sys

from .admin_errors import InvalidConfigValueError
from .config_def import MAX_INT, MAX_LONG, ConfigKey, all_of, at_least, checked_value, kafka_classes, one_of, rule
from .topic_config import COMPRESSION_TYPES

DEFAULT_ENTITY = "<default>"
LISTENER_PREFIX = "listener.name."
_MB = 1024 * 1024


def parse_ip_overrides(value: str) -> list[tuple[str, int]]:
    """max.connections.per.ip.overrides "host:count,...", as Kafka's parseCsvMap splits it (at the last colon, so
    an IPv6 host keeps its own); ValueError for an entry without a count."""
    out = []
    for item in value.split(","):
        if item.strip():
            host, _, count = item.rpartition(":")
            if not host.strip() or not count.strip().isdigit():
                raise ValueError(f"{item.strip()!r} is not host:count")
            out.append((host.strip(), int(count)))
    return out


def _valid_ip_overrides(value: str) -> bool:
    try:
        parse_ip_overrides(value)
    except ValueError:
        return False
    return True

# name -> ConfigKey (type, default, check), the entries of kbroker.config.SETTINGS that may change live
DYNAMIC_BROKER_CONFIGS: dict[str, ConfigKey] = {
    # DynamicLogConfig: broker defaults of topic configs
    "log.segment.bytes": ConfigKey("int", 1024 * _MB, at_least(14)),
    "log.roll.ms": ConfigKey("long"),
    "log.roll.jitter.ms": ConfigKey("long"),
    "log.index.size.max.bytes": ConfigKey("int", 10 * _MB, at_least(4)),
    "log.flush.interval.messages": ConfigKey("long", MAX_LONG, at_least(1)),
    "log.flush.interval.ms": ConfigKey("long"),
    "log.retention.bytes": ConfigKey("long", -1),
    "log.retention.ms": ConfigKey("long"),
    "message.max.bytes": ConfigKey("int", 1048588, at_least(0)),
    "log.index.interval.bytes": ConfigKey("int", 4096, at_least(0)),
    "log.cleaner.delete.retention.ms": ConfigKey("long", 86400000),
    "log.cleaner.min.compaction.lag.ms": ConfigKey("long", 0, at_least(0)),
    "log.cleaner.max.compaction.lag.ms": ConfigKey("long", MAX_LONG, at_least(1)),
    "log.segment.delete.delay.ms": ConfigKey("long", 60000, at_least(0)),
    "log.cleaner.min.cleanable.ratio": ConfigKey("double", 0.5),
    "log.cleanup.policy": ConfigKey("list", ["delete"], all_of("compact", "delete")),
    "unclean.leader.election.enable": ConfigKey("boolean", False),
    "min.insync.replicas": ConfigKey("int", 1, at_least(1)),
    "compression.type": ConfigKey("string", "producer", one_of(*COMPRESSION_TYPES)),
    "log.preallocate": ConfigKey("boolean", False),
    "log.message.timestamp.type": ConfigKey("string", "CreateTime", one_of("CreateTime", "LogAppendTime")),
    "log.message.timestamp.difference.max.ms": ConfigKey("long", MAX_LONG),
    "log.message.downconversion.enable": ConfigKey("boolean", True),
    # LogCleaner
    "log.cleaner.threads": ConfigKey("int", 1, at_least(0)),
    "log.cleaner.dedupe.buffer.size": ConfigKey("long", 128 * _MB),
    "log.cleaner.io.buffer.load.factor": ConfigKey("double", 0.9),
    "log.cleaner.io.buffer.size": ConfigKey("int", 512 * 1024, at_least(0)),
    "log.cleaner.io.max.bytes.per.second": ConfigKey("double", sys.float_info.max),
    "log.cleaner.backoff.ms": ConfigKey("long", 15000, at_least(0)),
    # DynamicThreadPool (accepted and validated; nothing to resize under gevent)
    "num.io.threads": ConfigKey("int", 8, at_least(1)),
    "num.network.threads": ConfigKey("int", 3, at_least(1)),
    "num.replica.fetchers": ConfigKey("int", 1),
    "num.recovery.threads.per.data.dir": ConfigKey("int", 1, at_least(1)),
    "background.threads": ConfigKey("int", 10, at_least(1)),
    # SocketServer
    "max.connections": ConfigKey("int", MAX_INT, at_least(0)),
    "max.connections.per.ip": ConfigKey("int", MAX_INT, at_least(0)),
    "max.connections.per.ip.overrides": ConfigKey("string", "", rule(_valid_ip_overrides,
                                                                     "a list of host:count, comma-separated")),
    "max.connection.creation.rate": ConfigKey("int", MAX_INT, at_least(0)),
    # metrics are served to Prometheus (metrics.port); Kafka's own JMX reporter is accepted, with no effect
    "metric.reporters": ConfigKey("list", [], kafka_classes("org.apache.kafka.common.metrics.JmxReporter",
                                                            what="a Java metrics reporter")),
    # DynamicConfig.Broker: replication quotas (only dynamic in Kafka; kbroker also takes them statically)
    "leader.replication.throttled.rate": ConfigKey("long", MAX_LONG, at_least(0)),
    "follower.replication.throttled.rate": ConfigKey("long", MAX_LONG, at_least(0)),
    "replica.alter.log.dirs.io.max.bytes.per.second": ConfigKey("long", MAX_LONG, at_least(0)),
}
# SslConfigs.RECONFIGURABLE_CONFIGS: a listener's stores, dynamic per broker as listener.name.<listener>.<name> only
# (the type of each is SETTINGS'); the password-typed ones are written encoded (PASSWORD_CONFIGS)
LISTENER_SSL_CONFIGS = {
    "ssl.keystore.type": ConfigKey("string", "JKS"), "ssl.keystore.location": ConfigKey("string"),
    "ssl.keystore.password": ConfigKey("password"), "ssl.key.password": ConfigKey("password"),
    "ssl.truststore.type": ConfigKey("string", "JKS"), "ssl.truststore.location": ConfigKey("string"),
    "ssl.truststore.password": ConfigKey("password"), "ssl.keystore.certificate.chain": ConfigKey("password"),
    "ssl.keystore.key": ConfigKey("password"), "ssl.truststore.certificates": ConfigKey("password")}
PASSWORD_CONFIGS = frozenset(n for n, key in LISTENER_SSL_CONFIGS.items() if key.type == "password")
# Kafka's dynamic settings that only a broker's own /config/brokers/<id> may set (DynamicBrokerConfig's
# PerBrokerConfigs); kbroker takes them statically only, but for a listener's stores (LISTENER_SSL_CONFIGS, with
# the listener prefix). Reported with their mode; see update_mode.
PER_BROKER_CONFIGS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.mechanism.inter.broker.protocol",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class", "ssl.key.password",
    "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.provider", "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm", "ssl.truststore.certificates", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.type"})


def update_mode(name: str) -> str:
    """Kafka 2.8's dynamic update mode of a broker setting: read-only, per-broker or cluster-wide."""
    if name in PER_BROKER_CONFIGS:
        return "per-broker"
    return "cluster-wide" if name in DYNAMIC_BROKER_CONFIGS else "read-only"


# Thread counts a running broker may change only within half to double of the current value (Kafka's
# DynamicThreadPool and LogCleaner validation).
THREAD_COUNTS = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                 "num.recovery.threads.per.data.dir", "background.threads", "log.cleaner.threads")
# The connection limits a listener may also set for itself, as listener.name.<listener>.<name> (Kafka's
# ListenerReconfigurable connection quotas), dynamically per broker or cluster-wide too; over the broker-wide value.
LISTENER_CONNECTION_CONFIGS = ("max.connections", "max.connection.creation.rate")


def listener_config_base(name: str) -> str | None:
    """The setting a listener.name.<listener>.<setting> name overrides (None for other names). Listener names hold
    no dot; a SASL mechanism's prefix stays in the result (listener.name.l.plain.sasl.jaas.config)."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, base = name[len(LISTENER_PREFIX):].partition(".")
    return base if listener and base else None


def dynamic_broker_key(name: str) -> ConfigKey | None:
    """The ConfigKey of a dynamic broker config name, a listener-prefixed connection limit included; None when
    the name cannot change live."""
    key = DYNAMIC_BROKER_CONFIGS.get(name)
    if key is None and listener_config_base(name) in LISTENER_CONNECTION_CONFIGS:
        key = DYNAMIC_BROKER_CONFIGS[listener_config_base(name)]
    return key or LISTENER_SSL_CONFIGS.get(listener_config_base(name) or "")


def per_broker_only(name: str) -> bool:
    """A dynamic name only a broker's own entity may set (a listener's stores)."""
    return (listener_config_base(name) or "") in LISTENER_SSL_CONFIGS


def is_password(name: str) -> bool:
    """A dynamic name whose value is written encoded (Kafka's DynamicBrokerConfig.isPasswordConfig)."""
    return (listener_config_base(name) or "") in PASSWORD_CONFIGS


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


def validate_broker_config(config: dict[str, str], known=lambda name: True, per_broker: bool = True) -> dict:
    """Check no name is a static setting (known(name) and not dynamic), a listener's store is named with its
    listener prefix and for one broker (per_broker), and every dynamic value parses and is in range (Kafka's
    DynamicBrokerConfig.validateConfigs, its messages); returns the typed values of the dynamic ones. Names
    unknown to the broker pass, as Kafka keeps custom configs."""
    def refuse(names, message: str) -> None:
        if names:
            raise InvalidConfigValueError(f"{message}: Set({', '.join(sorted(names))})")
    unprefixed = [n for n in config if n in LISTENER_SSL_CONFIGS]
    refuse([n for n in config if n not in unprefixed and dynamic_broker_key(n) is None and
            (known(n) or listener_config_base(n) is not None)], "Cannot update these configs dynamically")
    refuse(unprefixed, "These security configs can be dynamically updated only per-listener using the listener "
                       "prefix")
    if not per_broker:
        refuse([n for n in config if per_broker_only(n)],
               "Cannot update these configs at default cluster level, broker id must be specified")
    return {name: checked_value(name, dynamic_broker_key(name), raw) for name, raw in config.items()
            if dynamic_broker_key(name) is not None}
