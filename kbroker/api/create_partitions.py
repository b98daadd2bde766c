"""CreatePartitions (key 37), v0-v3: add partitions to topics, through ZooKeeper as Kafka's ZkAdminManager
(kbroker.admin_manager).

The new partitions' replicas are spread over the live brokers as Kafka does (or taken from the request),
written to the topic znode; the controller then elects their leaders, which the answer waits for up to
timeout_ms (REQUEST_TIMED_OUT after that, as Kafka's DelayedCreatePartitions). validate_only checks without
writing. Errors per topic: INVALID_PARTITIONS (not an increase), INVALID_REPLICA_ASSIGNMENT,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (queued for deletion), INVALID_REQUEST (a topic named twice).
Authorization: needs Alter on each topic (else TOPIC_AUTHORIZATION_FAILED).
controller_mutation_rate (KIP-599): each topic costs the partitions it gains; from v3 the quota is strict
(THROTTLING_QUOTA_EXCEEDED for a topic met with an empty token bucket, left as it was), before v3 every topic
grows and the response is throttled.
"""
from __future__ import annotations

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from ..admin_manager import TopicResult
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 37
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = CreatePartitionsRequest, CreatePartitionsResponse
Result = RESPONSE.CreatePartitionsTopicResult


def handle(request, ctx: RequestContext):
    topics = [(t.name, t.count, None if t.assignments is None else [list(a.broker_ids) for a in t.assignments])
              for t in request.topics]
    allowed = ctx.authorized("Alter", "Topic", (name for name, _, _ in topics))
    quota = ctx.controller_mutation_quota(strict_since=3)
    results = iter(ctx.broker.admin_manager.create_partitions([t for t in topics if t[0] in allowed],
                                                              request.timeout_ms, request.validate_only, quota))
    ctx.report_mutations(quota)
    results = [next(results) if t[0] in allowed else
               TopicResult(t[0], Errors.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
               for t in topics]
    return RESPONSE(version=ctx.api_version,
                    results=[Result(name=r.name, error_code=r.error, error_message=r.message) for r in results])
