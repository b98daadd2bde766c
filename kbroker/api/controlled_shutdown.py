"""ControlledShutdown (key 7), v0-v3: a broker asks the controller to move its leaders away before it stops.

Only the active controller answers (else NOT_CONTROLLER). v0 is sent with request header v0 (no client id);
v2+ carry the broker epoch (an older one is STALE_BROKER_EPOCH). The answer lists the replicated partitions the
broker still leads (no other in-sync replica could take over); single-replica partitions cannot move and are
left out, as in Kafka 2.8. The broker retries until it is empty or controlled.shutdown.max.retries is used up,
then stops anyway.
Authorization: needs ClusterAction on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event

from ..protocol.errors import Errors
from ..protocol.interbroker import ControlledShutdownRequest, ControlledShutdownResponse
from .context import RequestContext

API_KEY = 7
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = ControlledShutdownRequest, ControlledShutdownResponse
Remaining = RESPONSE.RemainingPartition


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    controller = ctx.broker.controller
    if not ctx.authorize("ClusterAction", "Cluster"):
        return RESPONSE(version=version, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=[])
    if not controller.active:
        return RESPONSE(version=version, error_code=Errors.NOT_CONTROLLER, remaining_partitions=[])
    result = gevent.event.AsyncResult()
    controller.controlled_shutdown(request.broker_id, request.broker_epoch if version >= 2 else -1, result)
    error, remaining = result.get()
    return RESPONSE(version=version, error_code=error, remaining_partitions=[
        Remaining(topic_name=t, partition_index=p) for t, p in remaining])
