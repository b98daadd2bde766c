"""OffsetCommit (key 8), v0-v8: store a group's consumed offsets.

v0 stores in ZooKeeper, as Kafka always did for version 0: `/consumers/<group>/offsets/<topic>/<partition>`
holding the offset as a decimal string; any broker serves it (there is no coordinator for v0); a write ZooKeeper
refuses answers UNKNOWN_SERVER_ERROR for its partition.
v1+ go to the group coordinator and `__consumer_offsets`: a member commits with its member id and generation
(UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while the group completes a rebalance,
FENCED_INSTANCE_ID); generation -1 is a simple commit for a group without members (an unknown group is then
created, Empty). The answer comes once the commit is in the offsets partition's ISR (acks=-1); if that does not
happen within offsets.commit.timeout.ms the partitions get REQUEST_TIMED_OUT (and COORDINATOR_NOT_AVAILABLE /
NOT_COORDINATOR when the write fails for leadership reasons). Also: UNKNOWN_TOPIC_OR_PARTITION for partitions
of topics the broker does not know, OFFSET_METADATA_TOO_LARGE beyond offset.metadata.max.bytes,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID.
Version notes: v1 adds member id, generation and a per-partition commit timestamp (-1: now); v2-v4 carry a
retention time (-1: the broker's offsets.retention.minutes; otherwise the offset expires at now + retention,
written as an offset value v1 with an expire timestamp); v3 adds the throttle time; v5 drops the retention
time; v6 adds the committed leader epoch; v7 group.instance.id; v8 is flexible.
Authorization: needs Read on the group (else GROUP_AUTHORIZATION_FAILED for every partition) and Read on each topic
(else TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from ..coordinator.schemas import OffsetAndMetadata
from ..metrics import remote_wait
from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 8
MIN_VERSION, MAX_VERSION = 0, 8
REQUEST, RESPONSE = OffsetCommitRequest, OffsetCommitResponse
Topic = RESPONSE.OffsetCommitResponseTopic
Partition = Topic.OffsetCommitResponsePartition


def _commit_v0(ctx: RequestContext, group_id: str, partitions: dict) -> dict:
    coordinator = ctx.broker.group_coordinator
    out: dict = {}
    for (topic, partition), p in partitions.items():
        if not coordinator.manager.valid_metadata(p.committed_metadata):
            out[(topic, partition)] = Errors.OFFSET_METADATA_TOO_LARGE
            continue
        try:
            coordinator.zk_offsets.commit(group_id, topic, partition, p.committed_offset)
            out[(topic, partition)] = Errors.NONE
        except KafkaError as e:
            out[(topic, partition)] = e.code
    return out


def known_partitions(request, cache) -> tuple[list, dict, dict]:
    """(the request's partitions in order, {tp: UNKNOWN_TOPIC_OR_PARTITION} for those the metadata cache does not
    know, {tp: the request's partition entry} for the others); TxnOffsetCommit splits its request the same way."""
    order, errors, known = [], {}, {}
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if cache.partition(*tp) is None:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known[tp] = p
    return order, errors, known


def refuse_unreadable_topics(ctx: RequestContext, order: list, errors: dict, known: dict) -> None:
    """TOPIC_AUTHORIZATION_FAILED, in place, for the partitions of topics the principal may not Read (Kafka checks
    Read on each topic after the group; TxnOffsetCommit does the same)."""
    allowed = ctx.authorized("Read", "Topic", (t for t, _ in order))
    for tp in order:
        if tp[0] not in allowed:
            errors[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
            known.pop(tp, None)


def response_topics(topic_class, partition_class, order: list, errors: dict) -> list:
    """The response's topics: each partition's error, in the request's order, grouped by topic (TxnOffsetCommit's
    response has the same shape)."""
    by_topic: dict = {}
    for topic, partition in dict.fromkeys(order):
        by_topic.setdefault(topic, []).append(partition_class(partition_index=partition,
                                                              error_code=errors[(topic, partition)]))
    return [topic_class(name=t, partitions=ps) for t, ps in by_topic.items()]


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    broker = ctx.broker
    order, errors, known = known_partitions(request, broker.metadata_cache)
    if not ctx.authorize("Read", "Group", request.group_id):
        errors, known = dict.fromkeys(order, Errors.GROUP_AUTHORIZATION_FAILED), {}
    else:
        refuse_unreadable_topics(ctx, order, errors, known)
    if known and version == 0:
        errors.update(_commit_v0(ctx, request.group_id, known))
    elif known:
        now = broker.clock.now_ms()
        retention = request.retention_time_ms if 2 <= version <= 4 else -1
        offsets = {}
        for tp, p in known.items():
            commit_ts = p.commit_timestamp if version == 1 else -1
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now if commit_ts == -1 else commit_ts,
                expire_timestamp=None if retention == -1 else _java_long(now + retention))
        result = gevent.event.AsyncResult()
        broker.group_coordinator.handle_commit_offsets(
            request.group_id, request.member_id, request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch, offsets, result.set)
        remote_wait(result)         # the __consumer_offsets append's replication
        errors.update(result.get())
    return RESPONSE(version=version, topics=response_topics(Topic, Partition, order, errors))


def _java_long(n: int) -> int:
    """n wrapped to a signed 64-bit value, as Kafka's Long arithmetic wraps now + retention time."""
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)
