"""EndTxn (key 26), v0-v3: a transactional producer commits or aborts its transaction.

The transaction coordinator (coordinator/transaction/coordinator.py) answers NONE only once the
PrepareCommit/PrepareAbort record is durable (acks=-1); the markers and the Complete* record follow. A retry of
the finished outcome is NONE, of the outcome in progress CONCURRENT_TRANSACTIONS; the opposite outcome, or
ending a transaction that never added a partition (Empty), INVALID_TXN_STATE. Other answers:
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2), COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (empty id).
Version notes: v1 is v0 (throttling); v2 PRODUCER_FENCED; v3 is flexible.
Authorization: needs Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from ..protocol.errors import Errors
from .add_partitions_to_txn import fenced_for
from .context import RequestContext

API_KEY = 26
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = EndTxnRequest, EndTxnResponse


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    if not ctx.authorize("Write", "TransactionalId", request.transactional_id):
        return RESPONSE(version=version, error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = gevent.event.AsyncResult()
    ctx.broker.txn_coordinator.handle_end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                              request.committed, result.set)
    return RESPONSE(version=version, error_code=fenced_for(version, result.get()))
