"""CreateTopics (key 19), v0-v7 (flexible from v5): create topics through ZooKeeper as Kafka 2.8's
KafkaApis.handleCreateTopicsRequest and ZkAdminManager.createTopics do (kbroker.admin_manager).

Only the active controller answers (NOT_CONTROLLER for every topic otherwise; clients send it there). Per topic:
a name given twice -> INVALID_REQUEST; an existing topic (or one queued for deletion) -> TOPIC_ALREADY_EXISTS;
a null config value, or num_partitions / replication_factor set together with explicit assignments ->
INVALID_REQUEST; -1 partitions / replication factor take num.partitions / default.replication.factor; then
name, configs (INVALID_CONFIG), partitions (INVALID_PARTITIONS), replication factor (INVALID_REPLICATION_FACTOR)
and assignment (INVALID_REPLICA_ASSIGNMENT) are checked and nothing is written for a topic that fails.
validate_only stops there. Otherwise /config/topics/<T> then /brokers/topics/<T> are written and the answer waits
(up to timeout_ms, a delayed operation in the topic purgatory) until every new partition has a leader; topics
not ready by then get REQUEST_TIMED_OUT, as Kafka's DelayedCreatePartitions. timeout_ms <= 0 answers at once
with REQUEST_TIMED_OUT for the topics written (Kafka does the same).

v5+ results carry num_partitions, replication_factor and the configs given in the request (as written to
/config/topics, source DYNAMIC_TOPIC_CONFIG); Kafka also lists every defaulted config, which we leave out.
v7 results carry the topic id once the controller has assigned it (zero otherwise).
Authorization: needs Create on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED); without DescribeConfigs
on the topic its topic_config_error_code is TOPIC_AUTHORIZATION_FAILED.
controller_mutation_rate (KIP-599): each topic created costs its partitions; from v6 the quota is strict (a topic
met with an empty token bucket gets THROTTLING_QUOTA_EXCEEDED and is not created), before v6 every topic is
created and the response throttled.
"""
from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from ..admin_manager import DYNAMIC_TOPIC_CONFIG, NewTopic, TopicResult
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 19
MIN_VERSION, MAX_VERSION = 0, 7
REQUEST, RESPONSE = CreateTopicsRequest, CreateTopicsResponse
Result = RESPONSE.CreatableTopicResult
ConfigEntry = Result.CreatableTopicConfigs


def handle(request, ctx: RequestContext):
    topics = [NewTopic(t.name, t.num_partitions, t.replication_factor,
                       {a.partition_index: list(a.broker_ids) for a in t.assignments or []},
                       {c.name: c.value for c in t.configs or []})
              for t in request.topics or []]
    names = [t.name for t in topics]
    allowed = set(names) if ctx.authorize("Create", "Cluster", log_if_denied=False) \
        else ctx.authorized("Create", "Topic", names)
    describable = ctx.authorized("DescribeConfigs", "Topic", names, log_if_denied=False)
    quota = ctx.controller_mutation_quota(strict_since=6)
    results = iter(ctx.broker.admin_manager.create_topics([t for t in topics if t.name in allowed], request.timeout_ms,
                                                          bool(getattr(request, "validate_only", False)), quota))
    ctx.report_mutations(quota)
    out = []
    for name in names:
        r = next(results) if name in allowed else TopicResult(name, Errors.TOPIC_AUTHORIZATION_FAILED,
                                                              "Authorization failed.")
        out.append(Result(name=r.name, topic_id=r.topic_id, error_code=r.error, error_message=r.message,
                          topic_config_error_code=0 if name in describable else Errors.TOPIC_AUTHORIZATION_FAILED,
                          num_partitions=r.num_partitions, replication_factor=r.replication_factor,
                          configs=[ConfigEntry(name=k, value=v, read_only=False, config_source=DYNAMIC_TOPIC_CONFIG,
                                               is_sensitive=False) for k, v in r.configs.items()]))
    return RESPONSE(version=ctx.api_version, topics=out)
