"""DeleteRecords (key 21), v0-v2: move a partition's log start offset forward (records below it go).

Offset -1 means the high watermark; an offset above the high watermark is OFFSET_OUT_OF_RANGE. The answer is
the new low watermark (log start offset). Segments wholly below it are deleted by the next retention pass.
Authorization: needs Delete on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 21
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = DeleteRecordsRequest, DeleteRecordsResponse
TopicResult = RESPONSE.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


def handle(request, ctx: RequestContext):
    replicas = ctx.broker.replica_manager
    allowed = ctx.authorized("Delete", "Topic", (t.name for t in request.topics))
    topics = []
    for t in request.topics:
        results = []
        for p in t.partitions:
            try:
                if t.name not in allowed:
                    raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED)
                low = replicas.delete_records((t.name, p.partition_index), p.offset)
                results.append(PartitionResult(partition_index=p.partition_index, low_watermark=low,
                                               error_code=Errors.NONE))
            except KafkaError as e:
                results.append(PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                               error_code=e.code))
        topics.append(TopicResult(name=t.name, partitions=results))
    return RESPONSE(version=ctx.api_version, topics=topics)
