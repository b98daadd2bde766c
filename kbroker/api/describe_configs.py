"""DescribeConfigs (key 32), v0-v4 (flexible from v4): topic and broker configs as Kafka 2.8's
ZkAdminManager.describeConfigs shows them (kbroker.admin_manager).

TOPIC (resource type 2): every topic config with its effective value (the topic override from
/config/topics/<T>, else the broker setting it falls back to, else LogConfig's default), formatted as Kafka
formats it (lists comma-separated, booleans true/false). An unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.

BROKER (resource type 4), this broker's id: every Kafka 2.8 broker setting (the internal KRaft ones only when
given, as Kafka's nonInternalValues) and every other name given (server.properties, KAFKA_* env, --override,
dynamic), as Kafka's ConfigHelper lists originals and values: a listener's override (listener.name.<l>.<setting>)
typed as its setting, with that setting as its synonym; a key Kafka does not know, of UNKNOWN type, sensitive.
read_only unless Kafka 2.8 can update the setting dynamically (per-broker or cluster-wide; kbroker applies the
cluster-wide ones and refuses the per-broker listener/SSL/SASL ones, kbroker.common.broker_config). The
cluster defaults (empty name): the entries of /config/brokers/<default> this broker applies. Another broker's
id -> INVALID_REQUEST (clients send it to that broker).

Sources and synonyms follow Kafka's precedence, each layer over all of a config's synonyms in turn:
DYNAMIC_TOPIC_CONFIG (topics only), DYNAMIC_BROKER_CONFIG (/config/brokers/<id>), DYNAMIC_DEFAULT_BROKER_CONFIG
(/config/brokers/<default>), STATIC_BROKER_CONFIG (server.properties, KAFKA_* env, --override), DEFAULT_CONFIG;
the source of an entry is that of its first synonym. A broker setting's synonyms are Kafka's
(log.retention.ms, log.retention.minutes, log.retention.hours; log.roll.ms, log.roll.hours; ...), those before
the described name's own first entry dropped as Kafka 2.8 drops them (an unset log.retention.ms has none); a
topic config's are those of the broker setting it falls back to. Synonyms are sent from v1 when include_synonyms.

Password-typed settings (ssl.keystore.key, ssl.key.password, sasl.jaas.config, ...) are sensitive, as Kafka
shows them: value null (in the synonyms too) and is_sensitive true.

Documentation (v3+) is always null; config_type (v3+) carries Kafka's ConfigType ids.
Authorization: needs DescribeConfigs on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for brokers, on the cluster
(else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from ..admin_manager import DEFAULT_CONFIG
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 32
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = DescribeConfigsRequest, DescribeConfigsResponse
Result = RESPONSE.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym

# Kafka's ConfigType ids
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                "password": 9}


def _entry(e, synonyms: bool):
    sensitive = e.type in ("password", None)
    return Entry(name=e.name, value=None if sensitive else e.value, read_only=e.read_only, config_source=e.source,
                 is_default=e.source == DEFAULT_CONFIG, is_sensitive=sensitive,
                 synonyms=[Synonym(name=n, value=None if sensitive else v, source=s) for n, v, s in e.synonyms]
                 if synonyms else [],
                 config_type=CONFIG_TYPES.get(e.type, 0), documentation=None)


TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8   # ConfigResource types


def config_authorization_error(ctx: RequestContext, operation: str, resource) -> int:
    """0 when the principal may do operation (DescribeConfigs, AlterConfigs) on the config resource: a topic's
    needs it on the topic (else TOPIC_AUTHORIZATION_FAILED), a broker's or broker logger's on the cluster (else
    CLUSTER_AUTHORIZATION_FAILED)."""
    if resource.resource_type == TOPIC:
        return 0 if ctx.authorize(operation, "Topic", resource.resource_name) else Errors.TOPIC_AUTHORIZATION_FAILED
    if resource.resource_type in (BROKER, BROKER_LOGGER):
        return 0 if ctx.authorize(operation, "Cluster") else Errors.CLUSTER_AUTHORIZATION_FAILED
    return 0


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    synonyms = version >= 1 and bool(getattr(request, "include_synonyms", False))
    resources = list(request.resources or [])
    denied = [config_authorization_error(ctx, "DescribeConfigs", r) for r in resources]
    described = iter(ctx.broker.admin_manager.describe_configs(
        [(r.resource_type, r.resource_name, None if r.configuration_keys is None else set(r.configuration_keys))
         for r, d in zip(resources, denied) if not d]))
    described = [(d, None, []) if d else next(described) for d in denied]
    out = [Result(error_code=error, error_message=message, resource_type=r.resource_type,
                  resource_name=r.resource_name,
                  configs=[_entry(e, synonyms) for e in entries])
           for r, (error, message, entries) in zip(resources, described)]
    return RESPONSE(version=version, results=out)
