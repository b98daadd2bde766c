"""UpdateMetadata (key 6), v0-v7: the controller refreshes every broker's metadata cache.

v0 brokers have one host/port (PLAINTEXT); v1+ list endpoints, v3+ with listener names; v2+ racks;
v5+ group partition states by topic; v7 adds topic ids. Refused with STALE_CONTROLLER_EPOCH from an older
controller and STALE_BROKER_EPOCH when addressed to this broker's previous registration. The topics it names
complete the admin manager's waiting CreateTopics/CreatePartitions/DeleteTopics (Kafka's
tryCompleteDelayedTopicOperations).
Authorization: needs ClusterAction on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from .. import collector
from ..metadata_cache import CachedBroker, PartitionState, shared_tuple
from ..protocol.errors import Errors
from ..protocol.interbroker import UpdateMetadataRequest, UpdateMetadataResponse
from .context import RequestContext

API_KEY = 6
MIN_VERSION, MAX_VERSION = 0, 7
REQUEST, RESPONSE = UpdateMetadataRequest, UpdateMetadataResponse

SECURITY_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def _brokers(request, version):
    out = []
    for b in request.live_brokers:
        if version == 0:
            endpoints = {"PLAINTEXT": (b.v0_host, b.v0_port, 0)}
        else:
            endpoints = {}
            for e in b.endpoints:
                name = e.listener if version >= 3 else SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT")
                endpoints[name] = (e.host, e.port, e.security_protocol)
        out.append(CachedBroker(b.id, endpoints, b.rack if version >= 2 else None))
    return out


def _states(request, version):
    if version < 5:
        pairs = [(s.topic_name, s) for s in request.ungrouped_partition_states]
        ids = {}
    else:
        pairs = [(t.topic_name, s) for t in request.topic_states for s in t.partition_states]
        ids = {t.topic_name: t.topic_id for t in request.topic_states} if version >= 7 else {}
    shared: dict = {}
    states = [PartitionState(topic, s.partition_index, s.leader, s.leader_epoch, shared_tuple(s.isr, shared),
                             shared_tuple(s.replicas, shared),
                             shared_tuple(s.offline_replicas or (), shared) if version >= 4 else (), s.zk_version,
                             s.controller_epoch)
              for topic, s in pairs]
    return states, ids


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    broker = ctx.broker
    replicas = broker.replica_manager
    if not ctx.authorize("ClusterAction", "Cluster"):
        return RESPONSE(version=version, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED)
    if replicas.is_broker_epoch_stale(request.broker_epoch if version >= 5 else -1):
        return RESPONSE(version=version, error_code=Errors.STALE_BROKER_EPOCH)
    error = replicas.check_controller_epoch(request.controller_id, request.controller_epoch, "UpdateMetadata")
    if error:
        return RESPONSE(version=version, error_code=error)
    with collector.bulk():
        states, ids = _states(request, version)
        deleted = broker.metadata_cache.update(request.controller_id, _brokers(request, version), states, ids)
    if deleted:   # partitions of deleted topics: their committed offsets go too (Kafka's handleDeletedPartitions)
        broker.group_coordinator.handle_deleted_partitions(deleted)
    broker.admin_manager.try_complete_delayed_topic_operations({s.topic for s in states})
    return RESPONSE(version=version, error_code=Errors.NONE)
