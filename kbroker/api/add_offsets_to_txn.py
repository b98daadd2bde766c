"""AddOffsetsToTxn (key 25), v0-v3: a transactional producer will commit offsets of a group in its transaction;
the group's `__consumer_offsets` partition is added to the transaction (as AddPartitionsToTxn, same errors:
NONE once written, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH below v2,
CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, ...). The producer then sends
TxnOffsetCommit to the group coordinator.
Version notes: v1 is v0 (throttling); v2 PRODUCER_FENCED; v3 is flexible. librdkafka and aiokafka send v0.
Authorization: needs Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Read on the
group (else GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from ..common.internal_topics import GROUP_METADATA_TOPIC
from ..protocol.errors import Errors
from .add_partitions_to_txn import fenced_for
from .context import RequestContext

API_KEY = 25
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = AddOffsetsToTxnRequest, AddOffsetsToTxnResponse


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    broker = ctx.broker
    offsets_tp = (GROUP_METADATA_TOPIC, broker.group_coordinator.partition_for(request.group_id or ""))
    if not ctx.authorize("Write", "TransactionalId", request.transactional_id):
        return RESPONSE(version=version, error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize("Read", "Group", request.group_id):
        return RESPONSE(version=version, error_code=Errors.GROUP_AUTHORIZATION_FAILED)
    result = gevent.event.AsyncResult()
    broker.txn_coordinator.handle_add_partitions(request.transactional_id, request.producer_id,
                                                 request.producer_epoch, [offsets_tp], result.set)
    return RESPONSE(version=version, error_code=fenced_for(version, result.get()))
