"""DeleteTopics (key 20), v0-v6 (flexible from v4): queue topics for deletion through ZooKeeper as Kafka 2.8's
KafkaApis.handleDeleteTopicsRequest and ZkAdminManager.deleteTopics do (kbroker.admin_manager).

Only the active controller answers (NOT_CONTROLLER for every topic otherwise). With delete.topic.enable=false
every topic gets TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3). v6 names topics by name or by id: an id
that no topic has -> UNKNOWN_TOPIC_ID, both given -> INVALID_REQUEST. A topic the metadata cache does not know
-> UNKNOWN_TOPIC_OR_PARTITION. Otherwise the /admin/delete_topics/<T> marker is written (already there is
fine) and the answer waits, up to timeout_ms (a delayed operation in the topic purgatory, as Kafka's
DelayedDeleteTopics), for the controller to delete the topic; topics still there then get REQUEST_TIMED_OUT.
timeout_ms <= 0 answers at once with REQUEST_TIMED_OUT for the topics marked (Kafka does the same).
Authorization: needs Delete on each topic, and Describe for one named by id (else TOPIC_AUTHORIZATION_FAILED).
controller_mutation_rate (KIP-599): each topic deleted costs its partitions; from v5 the quota is strict
(THROTTLING_QUOTA_EXCEEDED for a topic met with an empty token bucket, left in place), before v5 every topic is
deleted and the response throttled.
"""
from __future__ import annotations

from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from ..admin_manager import TopicResult
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 20
MIN_VERSION, MAX_VERSION = 0, 6
REQUEST, RESPONSE = DeleteTopicsRequest, DeleteTopicsResponse
Result = RESPONSE.DeletableTopicResult


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    if version >= 6:
        topics = [(t.name, t.topic_id) for t in request.topics or []]
    else:
        topics = [(name, None) for name in request.topic_names or []]
    # Each topic needs Delete (TOPIC_AUTHORIZATION_FAILED); one named by id also Describe, or its name stays hidden.
    names_by_id = {i: n for n, i in ctx.broker.metadata_cache.topic_ids.items()}
    named = [name if name is not None else names_by_id.get(topic_id) for name, topic_id in topics]
    describable = ctx.authorized("Describe", "Topic", (n for n in named if n is not None))
    deletable = ctx.authorized("Delete", "Topic", (n for n in named if n is not None))
    denied = [n is not None and (n not in deletable or (name is None and n not in describable))
              for n, (name, _) in zip(named, topics)]
    quota = ctx.controller_mutation_quota(strict_since=5)
    results = iter(ctx.broker.admin_manager.delete_topics([t for t, d in zip(topics, denied) if not d],
                                                          request.timeout_ms, quota))
    ctx.report_mutations(quota)
    results = [TopicResult(name, Errors.TOPIC_AUTHORIZATION_FAILED, None, topic_id) if d else next(results)
               for (name, topic_id), d in zip(topics, denied)]
    disabled = Errors.TOPIC_DELETION_DISABLED if version >= 3 else Errors.INVALID_REQUEST
    return RESPONSE(version=version,
                    responses=[Result(name=r.name, topic_id=r.topic_id, error_message=r.message,
                                      error_code=disabled if r.error == Errors.TOPIC_DELETION_DISABLED else r.error)
                               for r in results])
