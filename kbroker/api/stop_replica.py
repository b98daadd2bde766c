"""StopReplica (key 5), v0-v3: the controller tells a broker to stop hosting partitions (and maybe delete them).

v0 lists partitions ungrouped, v1-v2 group them by topic with one delete flag for all, v3 carries a leader
epoch and a delete flag per partition (an epoch older than the applied one is FENCED_LEADER_EPOCH).
Stale controller or broker epochs refuse the whole request, as for LeaderAndIsr.
Authorization: needs ClusterAction on the cluster (else CLUSTER_AUTHORIZATION_FAILED, for every partition too).
"""
from __future__ import annotations

from .. import collector
from ..protocol.errors import Errors
from ..protocol.interbroker import StopReplicaRequest, StopReplicaResponse
from .context import RequestContext

API_KEY = 5
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = StopReplicaRequest, StopReplicaResponse
PartitionError = RESPONSE.StopReplicaPartitionError


def _partitions(request, version):
    """(topic, partition, delete, leader epoch) for every partition in the request."""
    if version == 0:
        return [(p.topic_name, p.partition_index, request.delete_partitions, -1)
                for p in request.ungrouped_partitions]
    if version < 3:
        return [(t.name, p, request.delete_partitions, -1) for t in request.topics for p in t.partition_indexes]
    return [(t.topic_name, s.partition_index, s.delete_partition, s.leader_epoch)
            for t in request.topic_states for s in t.partition_states]


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    replicas = ctx.broker.replica_manager
    if not ctx.authorize("ClusterAction", "Cluster"):
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        return RESPONSE(version=version, error_code=denied, partition_errors=[
            PartitionError(topic_name=t, partition_index=p, error_code=denied)
            for t, p, *_ in _partitions(request, version)])
    if replicas.is_broker_epoch_stale(request.broker_epoch if version >= 1 else -1):
        return RESPONSE(version=version, error_code=Errors.STALE_BROKER_EPOCH, partition_errors=[])
    error = replicas.check_controller_epoch(request.controller_id, request.controller_epoch, "StopReplica")
    if error:
        return RESPONSE(version=version, error_code=error, partition_errors=[])
    partitions = _partitions(request, version)
    with collector.bulk():
        errors = replicas.stop_replicas(partitions)
    return RESPONSE(version=version, error_code=Errors.NONE, partition_errors=[
        PartitionError(topic_name=t, partition_index=p, error_code=e) for (t, p, _, _), e in zip(partitions, errors)])
