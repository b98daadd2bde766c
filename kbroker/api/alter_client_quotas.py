"""AlterClientQuotas (key 49), v0-1 (flexible from v1): set and remove client quotas of user, client-id,
(user, client-id) and IP entities (KIP-546), written to their znodes with a /config/changes notification as
Kafka 2.8's ZkAdminManager does, so every broker applies them; any broker serves it, and validate_only checks
everything and writes nothing.

Each entry names an entity (types user, client-id, ip; a null name is the default entity) and operations (key,
value, remove). Values are doubles: a DOUBLE key (request_percentage, controller_mutation_rate) is stored as
Java's Double.toString writes it ("200.0"), a LONG or INT key (producer_byte_rate, consumer_byte_rate,
connection_creation_rate) as an integer, refused unless within 1e-6 of one. Names are stored sanitized as Kafka
writes them (an IP as given). Errors are per entity, one answer per distinct entity, INVALID_REQUEST with Kafka's
message: no entity part, an unknown type, an empty name, an IP with a user or client id, an IP that neither
parses nor resolves, a key the entity does not take, a non-integral LONG/INT value. Beyond 2.8: a type twice in
one entity, a negative or non-finite value, or removing a key that is not a quota key is INVALID_REQUEST too
(2.8 keeps the last type, stores the value, removes the key). Removing a key that is not set succeeds. Kafka
authorizes ALTER_CONFIGS on the CLUSTER first (CLUSTER_AUTHORIZATION_FAILED for every entry).
throttle_time_ms is 0 here (the dispatcher owns that field).
"""
from __future__ import annotations

from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 49
MIN_VERSION, MAX_VERSION = 0, 1
REQUEST, RESPONSE = AlterClientQuotasRequest, AlterClientQuotasResponse
Entry = RESPONSE.EntryData
AUTHORIZATION_MESSAGE = "Cluster authorization failed."   # Errors.CLUSTER_AUTHORIZATION_FAILED.message()


def handle(request, ctx: RequestContext):
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                [(op.key, op.value, bool(op.remove)) for op in entry.ops]) for entry in request.entries]
    if ctx.authorize("AlterConfigs", "Cluster"):
        results = ctx.broker.admin_manager.alter_client_quotas(entries, bool(request.validate_only))
    else:
        results = [(parts, Errors.CLUSTER_AUTHORIZATION_FAILED, AUTHORIZATION_MESSAGE) for parts, _ in entries]
    return RESPONSE(version=ctx.api_version, throttle_time_ms=0, entries=[
        Entry(error_code=error, error_message=message,
              entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in parts])
        for parts, error, message in results])
