"""The API registry: one module per API key, and the dispatch from a request frame to a response frame.

Each API module defines API_KEY, MIN_VERSION, MAX_VERSION (the range Kafka 2.8 serves), REQUEST and RESPONSE
(message classes) and handle(request, ctx) -> response (or None when no response is sent, as Produce with
acks=0); ctx is a context.RequestContext, whose `broker` offers the handler the broker services it may use
(context.BrokerServices). A response is a message object (Fetch's is protocol.hotpath's FetchResponseData, encoded
as pieces: bytes and FileSlices in wire order), or a protocol.deferred.DeferredAnswer of one that the handler
completes later (Produce with acks=-1, so the connection reads on while it waits). A module may define
decode(body, version) to replace the library decoder (Produce does, to keep records as views into the frame).
ApiVersions advertises exactly the modules listed in API_MODULES.

Quotas (kbroker.quota.client_quotas; KIP-219 as Kafka 2.8 does it for every version): the loop time of each
request is recorded in its client's request quota when the handler returns (in exempt-request-time for
ClusterAction APIs, follower fetches and acks=0 produces; requests of a SASL exchange still under way are not
counted, as Kafka's network layer answers them), handlers report the throttles of their own quotas (Produce and
Fetch bytes, controller mutations) through the context, and the longest one is the response's throttle_time_ms,
set here and nowhere else, in every response whose version has the field. The connection then reads nothing more
until the throttle ends (network.server: the session's mute), an unanswered acks=0 Produce's included.

What dispatch does with bad input, as Kafka's SocketServer does:
- an ApiVersions request of a version we do not serve gets a v0 response with UNSUPPORTED_VERSION and the
  supported ranges, so the client can pick a version;
- an unknown API key, any other unsupported version or a body that does not decode raises
  MalformedRequest: the connection is closed.
"""
from __future__ import annotations

import logging
import struct
import time

from ..metrics import current_request
from ..protocol.deferred import DeferredAnswer
from ..protocol.header import (MalformedRequest, parse_request_header_v1, response_header,
                               skip_tagged_fields)
from ..protocol.hotpath import piece_size
from . import (add_offsets_to_txn, add_partitions_to_txn, alter_configs, alter_partition_reassignments,
               api_versions, controlled_shutdown, create_acls, create_partitions, create_topics, delete_acls,
               delete_groups, delete_topics, delete_records, describe_acls, describe_cluster, describe_configs,
               describe_groups, describe_log_dirs,
               describe_producers, describe_transactions, elect_leaders, end_txn, fetch, find_coordinator, heartbeat,
               incremental_alter_configs, init_producer_id,
               join_group, leader_and_isr, leave_group, list_groups, list_offsets, list_partition_reassignments,
               list_transactions,
               metadata, offset_commit, offset_delete, offset_fetch, offset_for_leader_epoch, produce,
               sasl_authenticate, sasl_handshake, stop_replica, sync_group, txn_offset_commit, update_metadata,
               write_txn_markers)
from . import alter_replica_log_dirs, alter_user_scram_credentials, describe_user_scram_credentials
from . import alter_client_quotas, describe_client_quotas
from .context import BrokerServices, RequestContext

# Kafka's request log: one DEBUG line per request (kbroker start writes it to kafka-request.log when enabled).
request_log = logging.getLogger("kafka.request.logger")

API_MODULES = (produce, fetch, list_offsets, metadata, leader_and_isr, stop_replica, update_metadata, api_versions,
               controlled_shutdown, delete_records, init_producer_id, offset_for_leader_epoch, create_partitions,
               add_partitions_to_txn, add_offsets_to_txn, end_txn,
               elect_leaders, alter_partition_reassignments, list_partition_reassignments,
               offset_commit, offset_fetch, find_coordinator, join_group, heartbeat, leave_group, sync_group,
               sasl_handshake, sasl_authenticate,
               describe_groups, list_groups, delete_groups, offset_delete, create_topics, delete_topics,
               describe_configs, alter_configs, incremental_alter_configs, alter_replica_log_dirs, describe_log_dirs,
               describe_cluster,
               txn_offset_commit, write_txn_markers, describe_acls, create_acls, delete_acls,
               describe_client_quotas, alter_client_quotas,
               describe_user_scram_credentials, alter_user_scram_credentials, describe_producers,
               describe_transactions, list_transactions)   # KIP-664's Kafka 3.0 APIs, served as extensions
REGISTRY = {m.API_KEY: m for m in API_MODULES}
# Kafka's ClusterAction APIs (the brokers' own requests): exempt from request quotas, never throttled
CLUSTER_ACTIONS = frozenset((leader_and_isr, stop_replica, update_metadata, controlled_shutdown, write_txn_markers))


def _frame(header: bytes, body) -> list:
    """The whole response frame as pieces: size prefix and header, then the body's pieces."""
    pieces = body if isinstance(body, list) else [body]
    size = len(header) + sum(piece_size(p) for p in pieces)
    return [struct.pack(">i", size) + header, *pieces]


def decode_body(request_class, body: memoryview, version: int):
    """Decode a request body; MalformedRequest if it does not decode, runs past the frame or has a null where
    the schema allows none.

    kafka-python's decoder slices strings and bytes without checking they fit, so a body cut inside a
    string would decode to a shorter string; the end position it reaches tells. It also decodes a negative
    length as null whatever the field's nullableVersions say, where Kafka refuses the request ("non-nullable
    field ... was serialized as null") and closes the connection."""
    flexible = request_class.flexible_version_q(version)
    decode = request_class._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                                        data_class=request_class[None])
    try:
        request, end = decode(body, 0)
    except Exception as e:  # the library raises assorted errors on short or inconsistent bodies
        raise MalformedRequest(f"cannot decode {request_class.name} v{version}: {e!r}") from None
    if end > len(body):
        raise MalformedRequest(f"{request_class.name} v{version} body is truncated ({len(body)} bytes, "
                               f"fields need {end})")
    null = _null_field(request_class._struct, request, version)
    if null is not None:
        raise MalformedRequest(f"{request_class.name} v{version}: non-nullable field {null} was serialized as null")
    return request


_NULLABLE_SCALARS = ("string", "bytes", "records")   # the scalar types kafka-python may decode as None
_NULL_CHECKS: dict = {}


def _null_checks(struct_field, version: int) -> tuple:
    """What _null_field must look at in a struct of this schema and version, computed once: (name, nullable,
    elements, nested) for every field that can decode as None — strings, bytes, records, arrays, structs. elements
    tells to look inside an array of strings; nested are the checks of a struct (array) field's own fields, left
    out when it has none (an array of ints-only structs is not walked)."""
    key = (id(struct_field), version)
    checks = _NULL_CHECKS.get(key)
    if checks is None:
        checks = []
        for field in struct_field.untagged_fields(version):
            nullable = field.nullable_for_version_q(version)
            if field.is_struct_array():
                checks.append((field.name, nullable, False, _null_checks(field.array_of, version)))
            elif field.is_struct():
                checks.append((field.name, nullable, False, _null_checks(field, version)))
            elif field.is_array():
                checks.append((field.name, nullable, field.type_str[2:] in _NULLABLE_SCALARS, ()))
            elif field.type_str in _NULLABLE_SCALARS and not nullable:
                checks.append((field.name, False, False, ()))
        checks = _NULL_CHECKS[key] = tuple(checks)
    return checks


def _null_field(struct_field, item, version: int) -> str | None:
    """The name of the first field of item (a decoded struct) that is null though the version allows no null."""
    return _first_null(_null_checks(struct_field, version), item)


def _first_null(checks: tuple, item) -> str | None:
    for name, nullable, elements, nested in checks:
        value = getattr(item, name)
        if value is None:
            if not nullable:
                return name
        elif elements:
            if any(element is None for element in value):
                return name   # (an array's strings are never nullable)
        elif nested:
            for element in (value if isinstance(value, list) else (value,)):
                null = _first_null(nested, element)
                if null is not None:
                    return null
    return None


def dispatch(frame: memoryview, broker: BrokerServices, session, times) -> list | DeferredAnswer | None:
    """Decode one request frame, run its handler, return the whole response frame (size prefix included)
    as a list of pieces (a DeferredAnswer of it when the handler answers later), or None when no response is
    due. Stamps the request's times (network.server.RequestTimes: handling, handler done, response made) and
    names it for the broker's request metrics (Fetch as FetchConsumer or FetchFollower, as Kafka's), which the
    network reports once the answer is sent; logs it on the request log at DEBUG."""
    times.dequeued = time.perf_counter()
    header = parse_request_header_v1(frame)
    module = REGISTRY.get(header.api_key)
    if module is None:
        raise MalformedRequest(f"unknown api key {header.api_key}")
    version = header.api_version
    if not module.MIN_VERSION <= version <= module.MAX_VERSION:
        if module is api_versions:
            body = api_versions.unsupported_version_response()
            return _frame(response_header(header.correlation_id, False), body)
        raise MalformedRequest(f"{module.REQUEST.name} v{version} is not supported "
                               f"(served: v{module.MIN_VERSION}-v{module.MAX_VERSION})")
    flexible = module.REQUEST.flexible_version_q(version)
    pos = skip_tagged_fields(frame, header.size) if flexible else header.size
    decode = getattr(module, "decode", None)
    request = decode(frame[pos:], version) if decode else decode_body(module.REQUEST, frame[pos:], version)
    ctx = RequestContext(broker, session, header.client_id, version, header.correlation_id, len(frame))
    if broker.client_quotas.request.enabled and (session.sasl is None or session.sasl.complete):
        ctx.request_timer = broker.client_quotas.request.start_timer()
    handling = current_request.set(times)   # the handler's remote waits (metrics.remote_wait) count for it
    try:
        response = module.handle(request, ctx)
    finally:
        times.local_done = time.perf_counter()
        current_request.reset(handling)
        if ctx.request_timer is not None:
            ctx.record_request_time(exempt=module in CLUSTER_ACTIONS or (module is fetch and request.replica_id >= 0)
                                    or (module is produce and request.acks == 0))
    if isinstance(response, DeferredAnswer):   # a Produce waiting for acks=all (network.server's overlap)
        return response.then(lambda r: _finish(r, module, request, header, flexible, ctx, times))
    return _finish(response, module, request, header, flexible, ctx, times)


def _finish(response, module, request, header, flexible: bool, ctx: RequestContext, times) -> list | None:
    """The response frame of a handler's response, with the request's throttle (the connection muted for it),
    named and stamped ready in its times, and logged on the request log."""
    version = header.api_version
    session = ctx.session
    throttle = ctx.throttle_ms
    if throttle:
        ctx.throttled_by.throttled(ctx.quota_user, ctx.client_id, throttle)
        session.mute_for(throttle)
        if response is not None:
            response.throttle_time_ms = throttle
    body = None if response is None else response.encode(version=version)
    name = module.REQUEST.name[:-7]   # "ProduceRequest" -> "Produce"
    if module is fetch:
        name = "FetchFollower" if request.replica_id >= 0 else "FetchConsumer"
    times.name, times.version, times.throttle_ms = name, version, throttle
    if request_log.isEnabledFor(logging.DEBUG):
        elapsed = time.perf_counter() - times.dequeued
        request_log.debug("Completed request: %s v%d correlation_id=%d client_id=%s from %s:%s on %s in %.3f ms%s "
                          "principal=%s", name, version, header.correlation_id, header.client_id,
                          session.client_address[0], session.client_address[1], session.listener, elapsed * 1000,
                          "" if body is not None else " (no response)", session.principal)
    # ApiVersions responses always use header v0, whatever the body version.
    out = None if body is None else _frame(response_header(header.correlation_id,
                                                           flexible and module is not api_versions), body)
    times.ready = time.perf_counter()
    return out
