"""AddPartitionsToTxn (key 24), v0-v3: a transactional producer adds partitions to its ongoing transaction.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing is
added, as Kafka). Otherwise the transaction coordinator answers one error for every partition
(coordinator/transaction/coordinator.py): NONE once the Ongoing state with the partitions is written,
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2), CONCURRENT_TRANSACTIONS,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (empty id).
Version notes: v1 is v0 (throttling); v2 PRODUCER_FENCED; v3 is flexible. librdkafka and aiokafka send v0.
Authorization: needs Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each
topic (else TOPIC_AUTHORIZATION_FAILED, the other partitions OPERATION_NOT_ATTEMPTED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from ..common.internal_topics import INTERNAL_TOPICS
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 24
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
Topic = RESPONSE.AddPartitionsToTxnTopicResult
Partition = Topic.AddPartitionsToTxnPartitionResult


def fenced_for(version: int, error: Errors) -> Errors:
    """PRODUCER_FENCED as versions before 2 know it (also used by AddOffsetsToTxn and EndTxn)."""
    return Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED and version < 2 else error


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    cache = ctx.broker.metadata_cache
    partitions = list(dict.fromkeys((t.name, p) for t in request.v3_and_below_topics for p in t.partitions))
    allowed = ctx.authorized("Write", "Topic", (t for t, _ in partitions if t not in INTERNAL_TOPICS))
    unknown = {tp: Errors.TOPIC_AUTHORIZATION_FAILED if tp[0] not in allowed else Errors.UNKNOWN_TOPIC_OR_PARTITION
               for tp in partitions if tp[0] not in allowed or cache.partition(*tp) is None}
    if not ctx.authorize("Write", "TransactionalId", request.v3_and_below_transactional_id):
        errors = dict.fromkeys(partitions, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif unknown:
        errors = {tp: unknown.get(tp, Errors.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    else:
        result = gevent.event.AsyncResult()
        ctx.broker.txn_coordinator.handle_add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, partitions, result.set)
        error = fenced_for(version, result.get())
        errors = {tp: error for tp in partitions}
    by_topic: dict = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(Partition(partition_index=partition, partition_error_code=error))
    return RESPONSE(version=version,
                    results_by_topic_v3_and_below=[Topic(name=t, results_by_partition=ps)
                                                   for t, ps in by_topic.items()])
