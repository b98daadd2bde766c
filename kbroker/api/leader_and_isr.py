"""LeaderAndIsr (key 4), v0-v5: the controller tells a broker which partitions it leads or follows.

v0-v1 carry partition states ungrouped (topic name in each); v2+ group them by topic; v5 adds topic ids and
answers per topic id. The whole request is refused with STALE_CONTROLLER_EPOCH when it comes from an older
controller, and with STALE_BROKER_EPOCH when it was addressed to this broker's previous registration.
Each request is one line on the state-change log, and the replica manager adds one per partition applied.
Authorization: needs ClusterAction on the cluster (else CLUSTER_AUTHORIZATION_FAILED, for every partition too).
"""
from __future__ import annotations

import logging

from .. import collector
from ..protocol.errors import Errors
from ..protocol.interbroker import LeaderAndIsrRequest, LeaderAndIsrResponse
from .context import RequestContext

API_KEY = 4
MIN_VERSION, MAX_VERSION = 0, 5
REQUEST, RESPONSE = LeaderAndIsrRequest, LeaderAndIsrResponse
PartitionError = RESPONSE.LeaderAndIsrPartitionError

state_change = logging.getLogger("state-change")


def _states(request, version):
    """(partition states with topic_name set, {topic: topic id})."""
    if version < 2:
        return list(request.ungrouped_partition_states), {}
    states, ids = [], {}
    for t in request.topic_states:
        ids[t.topic_name] = t.topic_id if version >= 5 else None
        for s in t.partition_states:
            s.topic_name = t.topic_name
            states.append(s)
    return states, ids


def _response(version, error, errors: dict, topic_ids: dict):
    if version < 5:
        return RESPONSE(version=version, error_code=error, partition_errors=[
            PartitionError(topic_name=t, partition_index=p, error_code=e) for (t, p), e in errors.items()])
    by_topic: dict = {}
    for (t, p), e in errors.items():
        by_topic.setdefault(t, []).append(PartitionError(partition_index=p, error_code=e))
    return RESPONSE(version=version, error_code=error, topics=[
        RESPONSE.LeaderAndIsrTopicError(topic_id=topic_ids.get(t), partition_errors=errs)
        for t, errs in by_topic.items()])


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    replicas = ctx.broker.replica_manager
    states, topic_ids = _states(request, version)
    if not ctx.authorize("ClusterAction", "Cluster"):
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        return _response(version, denied, {(s.topic_name, s.partition_index): denied for s in states}, topic_ids)
    state_change.info("handling LeaderAndIsr request v%d correlation id %d from controller %d epoch %d for %d "
                      "partitions", version, ctx.correlation_id, request.controller_id, request.controller_epoch,
                      len(states))
    broker_epoch = request.broker_epoch if version >= 2 else -1
    if replicas.is_broker_epoch_stale(broker_epoch):
        state_change.warning("ignoring LeaderAndIsr request correlation id %d from controller %d: broker epoch %d "
                             "is older than ours, %d", ctx.correlation_id, request.controller_id, broker_epoch,
                             replicas.broker_epoch)
        return _response(version, Errors.STALE_BROKER_EPOCH, {}, topic_ids)
    error = replicas.check_controller_epoch(request.controller_id, request.controller_epoch, "LeaderAndIsr")
    if error:
        return _response(version, error, {}, topic_ids)
    live_leaders = {l.broker_id: (l.host_name, l.port) for l in request.live_leaders}
    with collector.bulk():
        errors = replicas.become_leader_or_follower(request.controller_id, states, topic_ids, live_leaders)
    return _response(version, Errors.NONE, errors, topic_ids)
