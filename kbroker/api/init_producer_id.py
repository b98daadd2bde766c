"""InitProducerId (key 22), v0-v4: a producer id and epoch for an idempotent producer.

Without a transactional id every request gets a new producer id with epoch 0 (as Kafka 2.8, which accepts
such requests blindly, KIP-360's epoch bump included). Transactions are not implemented yet: a request with
a transactional id is answered COORDINATOR_NOT_AVAILABLE, which producers treat as retriable and then report.
"""
from __future__ import annotations

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from zk.client import ZkError
from ..protocol.errors import Errors

API_KEY = 22
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = InitProducerIdRequest, InitProducerIdResponse


def handle(request, ctx):
    version = ctx.api_version

    def answer(error, pid=-1, epoch=-1):
        return RESPONSE(version=version, throttle_time_ms=0, error_code=error, producer_id=pid, producer_epoch=epoch)
    if request.transactional_id is not None:
        return answer(Errors.COORDINATOR_NOT_AVAILABLE)
    try:
        pid = ctx.broker.producer_ids.generate()
    except ZkError:
        return answer(Errors.COORDINATOR_NOT_AVAILABLE)
    return answer(Errors.NONE, pid, 0)
