"""ListOffsets (key 2), v0-v6: offsets by time, and the earliest and latest offsets.

Timestamps: -2 earliest (the log start offset), -1 latest (the high watermark for consumers, the last
stable offset for v2+ READ_COMMITTED ones; the log end offset for a replica), otherwise the first offset
whose timestamp is at or after it, found through the time indexes, below that same latest bound (topics in
message format v0 answer UNSUPPORTED_FOR_MESSAGE_FORMAT). v0 answers a list of up to max_num_offsets
offsets: for latest, the end offset followed by segment base offsets newest first; for earliest, the log start
offset; for a time, the base offsets of segments last written before it.
v4+ fences with the current leader epoch and answers the leader epoch of the offset.
A partition asked twice in one request is INVALID_REQUEST, as in Kafka.
Authorization: needs Describe on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

from collections import Counter

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 2
MIN_VERSION, MAX_VERSION = 0, 6
REQUEST, RESPONSE = ListOffsetsRequest, ListOffsetsResponse
TopicResponse = RESPONSE.ListOffsetsTopicResponse
PartitionResponse = TopicResponse.ListOffsetsPartitionResponse

LATEST, EARLIEST = -1, -2


def _v0_offsets(partition, timestamp: int, max_num: int) -> list[int]:
    log = partition.log
    bases = [s.base_offset for s in log.segments]
    if timestamp == EARLIEST:
        offsets = [log.log_start_offset]
    elif timestamp == LATEST:
        offsets = [log.log_end_offset] + [b for b in reversed(bases) if b != log.log_end_offset]
    else:
        offsets = [s.base_offset for s in reversed(log.segments) if s.last_modified_ms <= timestamp]
    return offsets[:max(0, max_num)]


def _answer(version, replicas, tp, p, isolation: int, from_replica: bool):
    partition = replicas.leader_partition(tp)
    if version >= 4:
        partition.check_leader_epoch(p.current_leader_epoch)
    if version == 0:
        return PartitionResponse(partition_index=tp[1], error_code=Errors.NONE,
                                 old_style_offsets=_v0_offsets(partition, p.timestamp, p.max_num_offsets))
    if from_replica and p.timestamp == LATEST:
        offset, ts, epoch = partition.log.log_end_offset, -1, partition.leader_epoch
    else:
        offset, ts, epoch = partition.offset_for_timestamp(p.timestamp, isolation)
    return PartitionResponse(partition_index=tp[1], error_code=Errors.NONE, timestamp=ts, offset=offset,
                             leader_epoch=epoch)


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    replicas = ctx.broker.replica_manager
    isolation = request.isolation_level if version >= 2 else 0
    from_replica = request.replica_id >= 0
    asked = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    allowed = ctx.authorized("Describe", "Topic", (t.name for t in request.topics))
    topics = []
    for t in request.topics:
        answers = []
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            try:
                if t.name not in allowed:
                    raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED)
                if asked[tp] > 1:
                    raise KafkaError(Errors.INVALID_REQUEST, "partition listed twice")
                answers.append(_answer(version, replicas, tp, p, isolation, from_replica))
            except KafkaError as e:
                answers.append(PartitionResponse(partition_index=tp[1], error_code=e.code, old_style_offsets=[],
                                                 timestamp=-1, offset=-1, leader_epoch=-1))
        topics.append(TopicResponse(name=t.name, partitions=answers))
    return RESPONSE(version=version, topics=topics)
