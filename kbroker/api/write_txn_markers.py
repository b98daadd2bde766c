"""WriteTxnMarkers (key 27), v0-v1: the transaction coordinator asks this partition leader to end transactions.

Each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch, partitions) becomes one control batch
per partition (records.builder.control_batch), appended with acks=-1: the answer comes once every in-sync
replica has it, or with the partition's error. Per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION (not hosted
here, as Kafka's check of the local log), NOT_LEADER_OR_FOLLOWER (a follower here),
UNSUPPORTED_FOR_MESSAGE_FORMAT (message format below v2), INVALID_PRODUCER_EPOCH (epoch below the producer's
last seen one), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
REQUEST_TIMED_OUT. On `__consumer_offsets` partitions a written marker also completes the producer's pending
transactional offsets (ReplicaManager.on_txn_marker_appended).
Authorization: needs ClusterAction on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every partition).
"""
from __future__ import annotations

from ..protocol.errors import Errors
from ..protocol.interbroker import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from .context import RequestContext

API_KEY = 27
MIN_VERSION, MAX_VERSION = 0, 1
REQUEST, RESPONSE = WriteTxnMarkersRequest, WriteTxnMarkersResponse
MarkerResult = RESPONSE.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


def handle(request, ctx: RequestContext):
    markers = [(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                [(t.name, p) for t in m.topics for p in t.partition_indexes]) for m in request.markers]
    if ctx.authorize("ClusterAction", "Cluster"):
        results = ctx.broker.replica_manager.append_txn_markers(markers)
    else:
        results = [{tp: Errors.CLUSTER_AUTHORIZATION_FAILED for tp in tps} for *_, tps in markers]
    answers = []
    for (producer_id, *_), errors in zip(markers, results):
        by_topic: dict = {}
        for (topic, partition), error in errors.items():
            by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, error_code=error))
        answers.append(MarkerResult(producer_id=producer_id, topics=[
            TopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return RESPONSE(version=ctx.api_version, markers=answers)
