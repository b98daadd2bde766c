"""InitProducerId (key 22), v0-v4: a producer id and epoch for an idempotent or transactional producer.

Without a transactional id every request gets a new producer id with epoch 0 (as Kafka 2.8, which accepts
such requests blindly, KIP-360's epoch bump included); COORDINATOR_NOT_AVAILABLE when the broker cannot claim a
block of ids in ZooKeeper (coordinator/producer_id_manager.py). With one, the transaction coordinator answers
(coordinator/transaction/coordinator.py: epoch bumps, fencing an ongoing transaction, producer id rotation,
KIP-360 recovery). v3+ carries the producer's current id and epoch: both -1 (a fresh producer), or both set;
one of them -1 is INVALID_REQUEST. PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v4.
Version notes: v1 is v0 (throttling); v2 is flexible; v3 adds ProducerId/ProducerEpoch; v4 PRODUCER_FENCED.
Authorization: needs Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one,
IdempotentWrite on the cluster or Write on some topic (KIP-679; else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 22
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = InitProducerIdRequest, InitProducerIdResponse


def handle(request, ctx: RequestContext):
    version = ctx.api_version

    def answer(error, pid=-1, epoch=-1):
        if error == Errors.PRODUCER_FENCED and version < 4:
            error = Errors.INVALID_PRODUCER_EPOCH
        return RESPONSE(version=version, error_code=error, producer_id=pid, producer_epoch=epoch)
    if request.transactional_id is not None:
        if not ctx.authorize("Write", "TransactionalId", request.transactional_id):
            return answer(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        expected = None
        if version >= 3:
            pid, epoch = request.producer_id, request.producer_epoch
            if (pid == -1) != (epoch == -1):
                return answer(Errors.INVALID_REQUEST)
            expected = None if pid == -1 else (pid, epoch)
        result = gevent.event.AsyncResult()
        ctx.broker.txn_coordinator.handle_init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, expected,
            lambda error, pid, epoch: result.set((error, pid, epoch)))
        return answer(*result.get())
    # KIP-679: an idempotent producer needs IdempotentWrite on the cluster or Write on some topic.
    if not ctx.authorize("IdempotentWrite", "Cluster", log_if_denied=False) and not ctx.authorize_any("Write", "Topic"):
        return answer(Errors.CLUSTER_AUTHORIZATION_FAILED)
    try:
        pid = ctx.broker.producer_ids.generate()
    except KafkaError as e:
        return answer(e.code)
    return answer(Errors.NONE, pid, 0)
