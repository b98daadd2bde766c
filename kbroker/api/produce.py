"""Produce (key 0), v0-v9: append record batches to the partitions this broker leads.

The request is decoded by hand (protocol.hotpath) so each partition's records stay a view into the frame;
the v2 path validates batch headers, patches offsets in place and appends those same bytes.
Per partition, any error means nothing of that partition is appended: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP, INVALID_RECORD,
UNSUPPORTED_COMPRESSION_TYPE, idempotence errors, INVALID_TXN_STATE (a non-transactional batch from a producer
with an open transaction), INVALID_TOPIC_EXCEPTION for internal topics. Authorization: transactional batches
need Write on the request's transactional id (without one, or denied, the request fails whole with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic needs Write (else TOPIC_AUTHORIZATION_FAILED).
acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every partition). With acks=0 there is no response,
and as in Kafka an error closes the connection so the producer notices. v2+ answers the log append time,
v5+ the log start offset, v8+ an error message and the index of each rejected record. With acks=-1 the
records are appended at once and the answer is a DeferredAnswer completed once the in-sync replicas have them.
Client quotas: when answering (or, with acks=0, not answering) the request's size, header and body, is recorded in
its client's producer_byte_rate quota; the response's throttle is the longer of that quota's and the request
quota's (the dispatcher's; acks=0 is exempt from the latter).
"""
from __future__ import annotations

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from ..protocol.deferred import DeferredAnswer
from ..protocol.errors import Errors
from ..protocol.header import CloseConnection
from ..protocol.hotpath import decode_produce_request
from ..records.entries import MAGIC_OFFSET, TRANSACTIONAL_MASK, V2_ATTRIBUTES_OFFSET
from .context import RequestContext

API_KEY = 0
MIN_VERSION, MAX_VERSION = 0, 9
REQUEST, RESPONSE = ProduceRequest, ProduceResponse
TopicResponse = RESPONSE.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
RecordError = PartitionResponse.BatchIndexAndErrorMessage


def decode(body, version):
    return decode_produce_request(body, version)


def _transactional(records) -> bool:
    """Whether the (first) batch is a transactional v2 batch."""
    return (records is not None and len(records) > V2_ATTRIBUTES_OFFSET + 1 and records[MAGIC_OFFSET] == 2
            and bool(records[V2_ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK))


def _record_bytes(ctx: RequestContext) -> None:
    """The request's bytes in its client's produce quota, recorded as the answer is made (as Kafka's
    sendResponseCallback)."""
    quota = ctx.broker.client_quotas.produce
    if quota.enabled:
        ctx.record_quota(quota, ctx.size)


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    entries = {}
    for topic in request.topics:
        for p in topic.partitions:
            entries[(topic.name, p.index)] = p.records
    if request.acks not in (-1, 0, 1):
        results = {tp: (Errors.INVALID_REQUIRED_ACKS, -1, -1, -1, None, []) for tp in entries}
    elif any(_transactional(r) for r in entries.values()) and (request.transactional_id is None or not ctx.authorize(
            "Write", "TransactionalId", request.transactional_id)):
        results = {tp: (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1, -1, None, []) for tp in entries}
    else:
        allowed = ctx.authorized("Write", "Topic", (t for t, _ in entries))
        denied = {tp: (Errors.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, None, []) for tp in entries
                  if tp[0] not in allowed}
        if request.acks == -1:
            # Appended now; answered once replicated, the connection reading on meanwhile (network.server)
            answer = DeferredAnswer()

            def replicated(results):
                try:
                    _record_bytes(ctx)
                    response = _response({**results, **denied}, version)
                except Exception:
                    answer.fail()
                    raise
                answer.complete(response)
            ctx.broker.replica_manager.append_records(
                -1, request.timeout_ms, {tp: r for tp, r in entries.items() if tp[0] in allowed}, version,
                callback=replicated)
            return answer.value if answer.ready else answer
        results = ctx.broker.replica_manager.append_records(
            request.acks, request.timeout_ms, {tp: r for tp, r in entries.items() if tp[0] in allowed}, version)
        results.update(denied)
    _record_bytes(ctx)
    if request.acks == 0:
        failed = [(tp, r[0]) for tp, r in results.items() if r[0]]
        if failed:
            (topic, partition), error = failed[0]
            raise CloseConnection(f"acks=0 produce to {topic}-{partition} failed with {Errors(error).name}")
        return None
    return _response(results, version)


def _response(results: dict, version: int):
    by_topic: dict = {}
    for (topic, partition), (error, base_offset, append_time, log_start, message, record_errors) in results.items():
        by_topic.setdefault(topic, []).append(PartitionResponse(
            index=partition, error_code=error, base_offset=base_offset, log_append_time_ms=append_time,
            log_start_offset=log_start, error_message=message, record_errors=[
                RecordError(batch_index=i, batch_index_error_message=m) for i, m in record_errors]))
    return RESPONSE(version=version, responses=[
        TopicResponse(name=t, partition_responses=ps) for t, ps in by_topic.items()])
