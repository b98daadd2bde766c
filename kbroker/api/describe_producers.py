"""DescribeProducers (key 61), v0 (KIP-664; Kafka 2.8's KafkaApis serves it, in ZooKeeper mode too): per
partition this broker leads, the producers its producer state knows, each with its epoch, last sequence and
timestamp, the coordinator epoch of its last marker and the first offset of its open transaction (-1 when
none): what hanging-transaction detection reads. Partition errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.
Authorization: needs Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 61
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = DescribeProducersRequest, DescribeProducersResponse
TopicResponse = RESPONSE.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState


def _partition(replicas, topic: str, index: int) -> PartitionResponse:
    try:
        state = replicas.leader_partition((topic, index)).producer_state
    except KafkaError as e:
        return PartitionResponse(partition_index=index, error_code=e.code, error_message=str(e), active_producers=[])
    producers = [ProducerState(producer_id=pid, producer_epoch=e.epoch, last_sequence=e.last_seq,
                               last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                               current_txn_start_offset=state.ongoing.get(pid, -1))
                 for pid, e in sorted(state.producers.items())]
    return PartitionResponse(partition_index=index, error_code=Errors.NONE, error_message=None,
                             active_producers=producers)


def handle(request, ctx: RequestContext):
    replicas = ctx.broker.replica_manager
    allowed = ctx.authorized("Read", "Topic", (t.name for t in request.topics or []))

    def denied(index):
        return PartitionResponse(partition_index=index, error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                 error_message=None, active_producers=[])
    return RESPONSE(version=ctx.api_version, topics=[
        TopicResponse(name=t.name, partitions=[_partition(replicas, t.name, p) if t.name in allowed else denied(p)
                                               for p in t.partition_indexes])
        for t in request.topics or []])
