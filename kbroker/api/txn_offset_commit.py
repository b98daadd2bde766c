"""TxnOffsetCommit (key 28), v0-v3: a transactional producer's consumed offsets, sent to the group coordinator
after AddOffsetsToTxn (Kafka 2.8's KafkaApis.handleTxnOffsetCommitRequest).

The offsets are written to the group's `__consumer_offsets` partition as a transactional batch of the request's
producer id and epoch (acks = offsets.commit.required.acks) and stay pending for that producer: OffsetFetch
does not show them (v7 require_stable answers UNSTABLE_OFFSET_COMMIT) until the transaction's COMMIT marker
makes them the committed offsets; an ABORT marker drops them. Group checks as OffsetCommit, but the member id
and generation are checked only when set (v3, KIP-447; v0-v2 and producers outside a group send none):
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID; COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS (COORDINATOR_NOT_AVAILABLE for v0-v1, whose clients did not know it),
INVALID_GROUP_ID (empty group id). Per partition: UNKNOWN_TOPIC_OR_PARTITION for partitions the broker does not
know, OFFSET_METADATA_TOO_LARGE, and the append's errors as OffsetCommit maps them (INVALID_PRODUCER_EPOCH
for a fenced epoch).
Version notes: v2 adds the committed leader epoch; v3 GenerationId, MemberId, GroupInstanceId and is flexible.
Authorization: needs Write on the transactional id, Read on the group, Read on each topic (else
TRANSACTIONAL_ID_, GROUP_ or TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from ..coordinator.schemas import OffsetAndMetadata
from ..metrics import remote_wait
from ..protocol.errors import Errors
from .context import RequestContext
from .offset_commit import known_partitions, refuse_unreadable_topics, response_topics

API_KEY = 28
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = TxnOffsetCommitRequest, TxnOffsetCommitResponse
Topic = RESPONSE.TxnOffsetCommitResponseTopic
Partition = Topic.TxnOffsetCommitResponsePartition


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    broker = ctx.broker
    now = broker.clock.now_ms()
    order, errors, known = known_partitions(request, broker.metadata_cache)
    if not ctx.authorize("Write", "TransactionalId", request.transactional_id):
        errors, known = dict.fromkeys(order, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), {}
    elif not ctx.authorize("Read", "Group", request.group_id):
        errors, known = dict.fromkeys(order, Errors.GROUP_AUTHORIZATION_FAILED), {}
    else:
        refuse_unreadable_topics(ctx, order, errors, known)
    offsets = {tp: OffsetAndMetadata(
        offset=p.committed_offset, leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
        metadata=p.committed_metadata if p.committed_metadata is not None else "", commit_timestamp=now)
        for tp, p in known.items()}
    if offsets:
        result = gevent.event.AsyncResult()
        if version >= 3:
            member_id, instance_id, generation = request.member_id, request.group_instance_id, request.generation_id
        else:
            member_id, instance_id, generation = "", None, -1
        broker.group_coordinator.handle_txn_commit_offsets(request.group_id, request.producer_id,
                                                           request.producer_epoch, member_id, instance_id,
                                                           generation, offsets, result.set)
        remote_wait(result)         # the __consumer_offsets append's replication
        errors.update(result.get())
    if version < 2:
        errors = {tp: Errors.COORDINATOR_NOT_AVAILABLE if e == Errors.COORDINATOR_LOAD_IN_PROGRESS else e
                  for tp, e in errors.items()}
    return RESPONSE(version=version, topics=response_topics(Topic, Partition, order, errors))
