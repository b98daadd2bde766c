"""IncrementalAlterConfigs (key 44), v0-v1 (flexible from v1): per-key config changes, as Kafka 2.8's
ZkAdminManager.incrementalAlterConfigs does them.

Each entry's operation — SET 0, DELETE 1, APPEND 2, SUBTRACT 3 (APPEND/SUBTRACT only for LIST configs, else
INVALID_REQUEST; they start from the current value, else the config's default) — is applied to the resource's
current dynamic configs: a topic's overrides (TOPIC) or a broker's /config/brokers/<id> or the cluster's
/config/brokers/<default> (BROKER, name = this broker's id or ""). A key given twice or a null value for anything
but DELETE -> INVALID_REQUEST. The result is validated and written with its change notification exactly as
AlterConfigs does (AdminManager._alter: error codes, messages, validate_only).
Authorization: needs AlterConfigs on the topic or, for brokers, on the cluster (as AlterConfigs).
"""
from __future__ import annotations

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from .alter_configs import authorized_alter, encode
from .context import RequestContext

API_KEY = 44
MIN_VERSION, MAX_VERSION = 0, 1
REQUEST, RESPONSE = IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse


def handle(request, ctx: RequestContext):
    resources = [(r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs or []])
                 for r in request.resources or []]
    results = authorized_alter(ctx, request, resources, lambda rs: ctx.broker.admin_manager.incremental_alter_configs(
        rs, bool(request.validate_only)))
    return encode(RESPONSE, request, results, ctx.api_version)
