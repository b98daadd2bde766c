"""OffsetDelete (key 47), v0: delete a group's committed offsets for some partitions.

Allowed for an Empty group, and for a consumer group's partitions of topics no member subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC for the others); a non-consumer group with members is NON_EMPTY_GROUP. Deleted
offsets are written as tombstones. Group errors (no partitions answered): GROUP_ID_NOT_FOUND, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID, NON_EMPTY_GROUP. Partitions of
unknown topics: UNKNOWN_TOPIC_OR_PARTITION.
Authorization: needs Delete on the group (else GROUP_AUTHORIZATION_FAILED) and Read on each topic (else
TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 47
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = OffsetDeleteRequest, OffsetDeleteResponse
Topic = RESPONSE.OffsetDeleteResponseTopic
Partition = Topic.OffsetDeleteResponsePartition


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    cache = ctx.broker.metadata_cache
    errors: dict = {}
    known = []
    if not ctx.authorize("Delete", "Group", request.group_id):
        return RESPONSE(version=version, error_code=Errors.GROUP_AUTHORIZATION_FAILED, topics=[])
    allowed = ctx.authorized("Read", "Topic", (t.name for t in request.topics))
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if t.name not in allowed:
                errors[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
            elif cache.partition(*tp) is None:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)
    group_error, partition_errors = ctx.broker.group_coordinator.handle_delete_offsets(request.group_id, known)
    if group_error != Errors.NONE:
        return RESPONSE(version=version, error_code=group_error, topics=[])
    errors.update(partition_errors)
    by_topic: dict = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(Partition(partition_index=partition, error_code=error))
    return RESPONSE(version=version, error_code=Errors.NONE,
                    topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])
