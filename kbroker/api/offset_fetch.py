"""OffsetFetch (key 9), v0-v7: a group's committed offsets.

v0 reads ZooKeeper (`/consumers/<group>/offsets/<topic>/<partition>`, as Kafka did): any broker answers;
UNKNOWN_TOPIC_OR_PARTITION (offset -1) for a partition with no stored offset or of an unknown topic,
UNKNOWN_SERVER_ERROR for one ZooKeeper fails to read.
v1+ ask the group coordinator: offset, leader epoch and metadata per partition, -1 with no error for a
partition without a commit; a null topic list (v2+) means every partition the group has committed. Group
errors (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID) go on every
requested partition for v1 and in the top-level error (with no partitions) for v2+.
Version notes: v2 adds the top-level error and null topics; v3 the throttle time; v5 the committed leader
epoch; v6 is flexible; v7 require_stable: UNSTABLE_OFFSET_COMMIT (offset -1) for a partition with an offset
commit still being written or a transactional commit (TxnOffsetCommit) whose transaction has no marker yet;
without it such a partition answers its last committed offset.
Authorization: needs Describe on the group (else GROUP_AUTHORIZATION_FAILED) and Describe on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions; left out of an all-partitions answer).
"""
from __future__ import annotations

from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 9
MIN_VERSION, MAX_VERSION = 0, 7
REQUEST, RESPONSE = OffsetFetchRequest, OffsetFetchResponse
Topic = RESPONSE.OffsetFetchResponseTopic
Partition = Topic.OffsetFetchResponsePartition

INVALID_OFFSET = -1


def _fetch_v0(ctx: RequestContext, group_id: str, tps) -> dict:
    cache = ctx.broker.metadata_cache
    store = ctx.broker.group_coordinator.zk_offsets
    out: dict = {}
    for tp in tps:
        try:
            offset = store.fetch(group_id, *tp) if cache.partition(*tp) is not None else None
            out[tp] = ((offset, -1, "", Errors.NONE) if offset is not None
                       else (INVALID_OFFSET, -1, "", Errors.UNKNOWN_TOPIC_OR_PARTITION))
        except KafkaError as e:
            out[tp] = (INVALID_OFFSET, -1, "", e.code)
    return out


def _response(version: int, error: Errors, data: dict):
    by_topic: dict = {}
    for (topic, partition), (offset, epoch, metadata, perr) in data.items():
        by_topic.setdefault(topic, []).append(Partition(partition_index=partition, committed_offset=offset,
                                                        committed_leader_epoch=epoch, metadata=metadata,
                                                        error_code=perr))
    return RESPONSE(version=version, error_code=error,
                    topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    tps = None if request.topics is None else list(dict.fromkeys(
        (t.name, p) for t in request.topics for p in t.partition_indexes))
    if not ctx.authorize("Describe", "Group", request.group_id):
        error, data = Errors.GROUP_AUTHORIZATION_FAILED, {}
    elif tps is not None:
        # Partitions of topics without Describe answer TOPIC_AUTHORIZATION_FAILED; only the others are read.
        allowed = ctx.authorized("Describe", "Topic", (t for t, _ in tps))
        denied = {tp: (INVALID_OFFSET, -1, "", Errors.TOPIC_AUTHORIZATION_FAILED) for tp in tps if tp[0] not in allowed}
        readable = [tp for tp in tps if tp[0] in allowed]
        if version == 0:
            error, data = Errors.NONE, _fetch_v0(ctx, request.group_id, readable)
        else:
            error, data = ctx.broker.group_coordinator.handle_fetch_offsets(
                request.group_id, readable, version >= 7 and request.require_stable)
        if error == Errors.NONE:   # in the request's order
            data = {tp: denied[tp] if tp in denied else data[tp] for tp in tps if tp in denied or tp in data}
    elif version == 0:
        error, data = Errors.NONE, {}
    else:
        # All partitions: those of topics without Describe are left out.
        error, data = ctx.broker.group_coordinator.handle_fetch_offsets(
            request.group_id, None, version >= 7 and request.require_stable)
        allowed = ctx.authorized("Describe", "Topic", (t for t, _ in data), log_if_denied=False)
        data = {tp: d for tp, d in data.items() if tp[0] in allowed}
    if error != Errors.NONE:
        if version < 2:
            return _response(version, Errors.NONE, {tp: (INVALID_OFFSET, -1, "", error) for tp in tps or []})
        return _response(version, error, {})
    return _response(version, Errors.NONE, data)
