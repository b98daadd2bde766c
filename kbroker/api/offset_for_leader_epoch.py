"""OffsetForLeaderEpoch (key 23), v0-v4: where a leader epoch ends in the leader's log.

Followers ask it before fetching from a new leader, to truncate a divergent suffix (KIP-101/279); clients of
v2+ use it to detect log truncation. The answer is the largest epoch at or below the one asked and the
offset where the next epoch starts (the log end offset for the latest epoch); (-1, -1) when the leader knows
no such epoch. v1+ answer the epoch, v2+ fence with the current leader epoch, v3+ carry the replica id.
Authorization: needs ClusterAction on the cluster or Describe on each topic (else TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 23
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
TopicResult = RESPONSE.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    replicas = ctx.broker.replica_manager
    allowed = {t.topic for t in request.topics} if ctx.authorize("ClusterAction", "Cluster", log_if_denied=False) \
        else ctx.authorized("Describe", "Topic", (t.topic for t in request.topics))
    topics = []
    for t in request.topics:
        results = []
        for p in t.partitions:
            try:
                if t.topic not in allowed:
                    raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED)
                partition = replicas.leader_partition((t.topic, p.partition))
                if version >= 2:
                    partition.check_leader_epoch(p.current_leader_epoch)
                epoch, end_offset = partition.end_offset_for_epoch(p.leader_epoch)
                results.append(EpochEndOffset(error_code=Errors.NONE, partition=p.partition, leader_epoch=epoch,
                                              end_offset=end_offset))
            except KafkaError as e:
                results.append(EpochEndOffset(error_code=e.code, partition=p.partition, leader_epoch=-1,
                                              end_offset=-1))
        topics.append(TopicResult(topic=t.topic, partitions=results))
    return RESPONSE(version=version, topics=topics)
