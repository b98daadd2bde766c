"""DescribeConfigs (key 32), v0-v4 (flexible from v4): topic and broker configs as Kafka 2.8's
ZkAdminManager.describeConfigs shows them.

TOPIC (resource type 2): every topic config with its effective value (the topic override from
/config/topics/<T>, else the broker setting it falls back to, else LogConfig's default), formatted as Kafka
formats it (lists comma-separated, booleans true/false). An unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.

BROKER (resource type 4), this broker's id: every broker setting with its effective value; read_only unless it
is a dynamic broker config (zk.broker_config). The cluster defaults (empty name): the entries of
/config/brokers/<default> this broker applies. Another broker's id -> INVALID_REQUEST (clients send it to that
broker).

Sources and synonyms follow Kafka's precedence, each layer over all of a config's synonyms in turn:
DYNAMIC_TOPIC_CONFIG (topics only), DYNAMIC_BROKER_CONFIG (/config/brokers/<id>), DYNAMIC_DEFAULT_BROKER_CONFIG
(/config/brokers/<default>), STATIC_BROKER_CONFIG (server.properties, KAFKA_* env, --override), DEFAULT_CONFIG;
the source of an entry is that of its first synonym. A broker setting's synonyms are Kafka's
(log.retention.ms, log.retention.minutes, log.retention.hours; log.roll.ms, log.roll.hours; ...); a topic
config's are those of the broker setting it falls back to. Synonyms are sent from v1 when include_synonyms.

Documentation (v3+) is always null; config_type (v3+) carries Kafka's ConfigType ids.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from zk import admin as zk_admin
from zk.admin_errors import AdminError
from zk.client import ZkError
from zk.broker_config import DYNAMIC_BROKER_CONFIGS
from zk.topic_config import TOPIC_CONFIGS
from ..config import SETTINGS
from ..log.config import _DEFS, LogConfig
from ..log.errors import InvalidConfig
from ..protocol.errors import Errors

API_KEY = 32
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = DescribeConfigsRequest, DescribeConfigsResponse
Result = RESPONSE.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
# Kafka's ConfigType ids
CONFIG_TYPES = {"boolean": 1, "bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}

MAX_LONG = 2 ** 63 - 1
# Topic configs LogConfig keeps as passthrough: (broker synonym or None, LogConfig default as Kafka shows it)
_PASSTHROUGH_DEFAULTS = {
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", "86400000"),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", "0"),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", str(MAX_LONG)),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", "0.5"),
    "segment.jitter.ms": (None, "0"),
    "message.downconversion.enable": (None, "true"),
    "leader.replication.throttled.replicas": (None, ""),
    "follower.replication.throttled.replicas": (None, ""),
}


def format_value(value) -> str | None:
    """A typed value as Kafka's ConfigDef.convertToString shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def topic_synonym_names(name: str) -> list[str]:
    """The broker settings a topic config falls back to, in Kafka's order."""
    if name in _DEFS:
        return [broker_name for broker_name, _ in _DEFS[name][3]]
    broker_name = _PASSTHROUGH_DEFAULTS.get(name, (None, None))[0]
    return [broker_name] if broker_name else []


# Broker settings with more than one name (DynamicBrokerConfig.brokerConfigSynonyms), highest precedence first
_BROKER_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                          ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                          ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))


def broker_synonym_names(name: str) -> list[str]:
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return list(group) if name != "log.flush.scheduler.interval.ms" else [name]
    return [name]


def _broker_synonyms(cfg, names: list[str]) -> list[tuple[str, str | None, int]]:
    """Kafka's configSynonyms: per layer (dynamic per-broker, dynamic default, static, default), each name that
    has a value there."""
    layers = ((lambda n: cfg.dynamic_broker.get(n), DYNAMIC_BROKER_CONFIG),
              (lambda n: cfg.dynamic_default.get(n), DYNAMIC_DEFAULT_BROKER_CONFIG),
              (lambda n: format_value(cfg.static_values[n]) if n in cfg.originals else None, STATIC_BROKER_CONFIG),
              (lambda n: format_value(SETTINGS[n].default), DEFAULT_CONFIG))
    out = []
    for value_of, source in layers:
        for name in names:
            if name not in SETTINGS:
                continue
            value = value_of(name)
            if value is not None:
                out.append((name, value, source))
    return out


def _entry(version, include_synonyms, name, value, source, synonyms, config_type, read_only=False):
    return Entry(name=name, value=value, read_only=read_only, config_source=source,
                 is_default=source == DEFAULT_CONFIG, is_sensitive=False,
                 synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in synonyms]
                 if include_synonyms and version >= 1 else [],
                 config_type=config_type, documentation=None)


def topic_entries(broker, topic: str, keys, version: int, include_synonyms: bool) -> list:
    cfg = broker.config
    overrides = broker.zk.get_entity_config("topics", topic)
    effective = LogConfig.from_props(cfg.values, overrides).as_props()
    out = []
    for name, (kind, _) in TOPIC_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = []
        if name in overrides:
            synonyms.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
        broker_names = topic_synonym_names(name)
        synonyms += _broker_synonyms(cfg, broker_synonym_names(broker_names[0]) if broker_names else [])
        if name in effective:
            value = effective[name]
        elif synonyms:
            value = synonyms[0][1]
        else:
            value = _PASSTHROUGH_DEFAULTS[name][1]
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(_entry(version, include_synonyms, name, value, source, synonyms, CONFIG_TYPES.get(kind, 0)))
    return out


def broker_entries(broker, keys, version: int, include_synonyms: bool) -> list:
    cfg = broker.config
    out = []
    for name, setting in SETTINGS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = _broker_synonyms(cfg, broker_synonym_names(name))
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(_entry(version, include_synonyms, name, format_value(cfg.values.get(name)), source, synonyms,
                          CONFIG_TYPES.get(setting.type, 0), read_only=name not in DYNAMIC_BROKER_CONFIGS))
    return out


def default_broker_entries(broker, keys, version: int, include_synonyms: bool) -> list:
    """The cluster-wide dynamic defaults this broker applies, each with only its DYNAMIC_DEFAULT synonyms."""
    cfg = broker.config
    out = []
    for name, value in sorted(cfg.dynamic_default.items()):
        if keys is not None and name not in keys:
            continue
        synonyms = [s for s in _broker_synonyms(cfg, broker_synonym_names(name))
                    if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        out.append(_entry(version, include_synonyms, name, value, DYNAMIC_DEFAULT_BROKER_CONFIG, synonyms,
                          CONFIG_TYPES.get(SETTINGS[name].type, 0)))
    return out


def _describe(resource, ctx, include_synonyms):
    """(error, message, entries) for one resource."""
    broker = ctx.broker
    keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        try:
            zk_admin.validate_topic_name(name)
            if not broker.zk.topic_exists(name):
                return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.", []
            return Errors.NONE, None, topic_entries(broker, name, keys, ctx.api_version, include_synonyms)
        except AdminError as e:
            return Errors(e.code), str(e), []
        except InvalidConfig as e:
            return Errors.INVALID_CONFIG, str(e), []
    if resource.resource_type == BROKER:
        if name == "":
            return Errors.NONE, None, default_broker_entries(broker, keys, ctx.api_version, include_synonyms)
        try:
            broker_id = int(name)
        except ValueError:
            return Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}", []
        if broker_id != broker.config.broker_id:
            return (Errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.config.broker_id} or empty "
                                            f"string, but received {name}", [])
        return Errors.NONE, None, broker_entries(broker, keys, ctx.api_version, include_synonyms)
    return Errors.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}", []


def handle(request, ctx):
    version = ctx.api_version
    include_synonyms = bool(getattr(request, "include_synonyms", False)) if version >= 1 else False
    out = []
    for resource in request.resources or []:
        try:
            error, message, entries = _describe(resource, ctx, include_synonyms)
        except ZkError as e:
            error, message, entries = Errors.UNKNOWN_SERVER_ERROR, str(e), []
        out.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                          resource_name=resource.resource_name, configs=entries))
    return RESPONSE(version=version, throttle_time_ms=0, results=out)
