"""AlterConfigs (key 33), v0-v2 (flexible from v2): the legacy whole-set config change, as Kafka 2.8's
ZkAdminManager.alterConfigs does it (kbroker.admin_manager, one path with IncrementalAlterConfigs).

The given entries replace the resource's whole set of dynamic configs; a null value -> INVALID_REQUEST.
- TOPIC (2): unknown topic -> UNKNOWN_TOPIC_OR_PARTITION, an unknown config name -> INVALID_CONFIG; then
  /config/topics/<T> and a /config/changes notification "topics/<T>" (zk.admin.AdminZkClient.change_topic_config).
- BROKER (4): the name is this broker's id (per-broker configs, /config/brokers/<id>) or "" (the cluster
  defaults, /config/brokers/<default>); another id -> INVALID_REQUEST, as the client must send it to that
  broker. Names must be dynamic broker configs (common.broker_config); thread counts may change to between
  half and double their current value (Kafka's DynamicThreadPool / LogCleaner checks). Then the znode and a notification
  "brokers/<id|<default>>" (AdminZkClient.changeBrokerConfig); every broker concerned applies it live.
A value that does not parse or is out of range, or a broker config that cannot change dynamically, is Kafka's
ConfigException: INVALID_REQUEST with "Invalid config value for resource ConfigResource(type=.., name='..'): ..."
naming the key. validate_only checks everything and writes nothing. Any broker serves TOPIC resources.
Authorization: needs AlterConfigs on the topic (else TOPIC_AUTHORIZATION_FAILED) or, for brokers, on the cluster
(else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from .context import RequestContext
from .describe_configs import config_authorization_error

API_KEY = 33
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = AlterConfigsRequest, AlterConfigsResponse


def encode(response_class, request, results, version: int):
    """The answer of AlterConfigs and IncrementalAlterConfigs (same shape): one (error, message) per resource."""
    result = response_class.AlterConfigsResourceResponse
    return response_class(version=version,
                          responses=[result(error_code=error, error_message=message, resource_type=r.resource_type,
                                            resource_name=r.resource_name)
                                     for r, (error, message) in zip(request.resources or [], results)])


def authorized_alter(ctx: RequestContext, request, resources, alter) -> list:
    """alter(the resources authorized for AlterConfigs) -> their results; the others answer
    TOPIC_AUTHORIZATION_FAILED (topics) or CLUSTER_AUTHORIZATION_FAILED (brokers)."""
    denied = [config_authorization_error(ctx, "AlterConfigs", r) for r in request.resources or []]
    results = iter(alter([r for r, d in zip(resources, denied) if not d]))
    return [(d, None) if d else next(results) for d in denied]


def handle(request, ctx: RequestContext):
    resources = [(r.resource_type, r.resource_name, [(c.name, c.value) for c in r.configs or []])
                 for r in request.resources or []]
    results = authorized_alter(ctx, request, resources,
                               lambda rs: ctx.broker.admin_manager.alter_configs(rs, bool(request.validate_only)))
    return encode(RESPONSE, request, results, ctx.api_version)
