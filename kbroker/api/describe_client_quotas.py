"""DescribeClientQuotas (key 48), v0-1 (flexible from v1): the client quotas of the entities a filter matches
(KIP-546), read from /config/users, /config/clients and /config/ips as Kafka 2.8's ZkAdminManager does; any
broker answers.

The filter is one component per entity type (user, client-id, ip) with a match type: 0 that name, 1 the default
entity, 2 any name (the default included). A type without a component matches entities without it; with
`strict` false, any. Each entry is an entity (type, name; null for the default) with its values as doubles; only
entities holding a quota key appear (a user with SCRAM credentials only does not).
Errors are the whole answer's, entries null: a type given twice or empty, or ip with user or client-id
INVALID_REQUEST; another type UNSUPPORTED_VERSION. Beyond 2.8 (UNKNOWN_SERVER_ERROR): an unknown match type, or
match type 0 without a name, INVALID_REQUEST. A znode or value that does not parse (written by hand) is left out
and logged (2.8 fails the whole request). Kafka authorizes DESCRIBE_CONFIGS on the CLUSTER first
(CLUSTER_AUTHORIZATION_FAILED, no message). throttle_time_ms is 0 here (the dispatcher owns that field).
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 48
MIN_VERSION, MAX_VERSION = 0, 1
REQUEST, RESPONSE = DescribeClientQuotasRequest, DescribeClientQuotasResponse
Entry = RESPONSE.EntryData


def handle(request, ctx: RequestContext):
    if not ctx.authorize("DescribeConfigs", "Cluster"):
        return RESPONSE(version=ctx.api_version, throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=None, entries=None)
    error, message, found = ctx.broker.admin_manager.describe_client_quotas(
        [(c.entity_type, c.match_type, c.match) for c in request.components], bool(request.strict))
    entries = None if found is None else [
        Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
              values=[Entry.ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for entity, values in found]
    return RESPONSE(version=ctx.api_version, throttle_time_ms=0, error_code=error, error_message=message,
                    entries=entries)
