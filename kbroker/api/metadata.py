"""Metadata (key 3), v0-v11, served from the metadata cache.

Topics: v0 takes an empty list for "all topics"; v1+ takes null for all and an empty list for none. A topic
that does not exist is created when auto.create.topics.enable is on and the request allows it (always for
v0-v3, the allow_auto_topic_creation flag from v4), with num.partitions and default.replication.factor over the
live brokers, by the admin manager as Kafka's AdminZkClient does; it is answered LEADER_NOT_AVAILABLE until the
controller has elected its leaders (clients retry), INVALID_REPLICATION_FACTOR when there are too few brokers,
INVALID_TOPIC_EXCEPTION for an illegal name. Otherwise UNKNOWN_TOPIC_OR_PARTITION.
Partitions: LEADER_NOT_AVAILABLE with leader -1 when the partition has no live leader. v0 lists only live
replicas and answers REPLICA_NOT_AVAILABLE when some are down (as Kafka, which errors on unavailable
endpoints for v0); v5+ lists offline replicas (on dead brokers, or in failed log dirs as UpdateMetadata says).
Brokers are the live ones with an endpoint on the listener the request came in on. Authorized operations (v8+
topics, v8-v10 cluster), when asked for, are the operations the resource supports that the principal may do (all
of them without an authorizer; the cluster's need Describe on it, else none); "not requested" (INT32_MIN)
otherwise.
Authorization: a named topic without Describe answers TOPIC_AUTHORIZATION_FAILED with no partitions (whether
it exists is not revealed); all-topics requests leave such topics out. Auto-creation also needs Create on the
cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
v10+ carries topic ids; v11 drops the cluster authorized operations.
"""
from __future__ import annotations

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from ..common.internal_topics import INTERNAL_TOPICS
from ..protocol.acls import CLUSTER_NAME
from ..protocol.errors import Errors
from .context import RequestContext
from .describe_cluster import CLUSTER_OPERATIONS

API_KEY = 3
MIN_VERSION, MAX_VERSION = 0, 11
REQUEST, RESPONSE = MetadataRequest, MetadataResponse

_NOT_REQUESTED = None  # kafka-python encodes None as the "not requested" bitfield, INT32_MIN
# AclOperation codes a topic supports: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
TOPIC_OPERATIONS = frozenset({3, 4, 5, 6, 7, 8, 10, 11})
Broker = RESPONSE.MetadataResponseBroker
Topic = RESPONSE.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition


def _partition(cache, state, version: int):
    alive = cache.is_alive
    replicas, isr = state.replicas, state.isr
    offline = [r for r in replicas if not alive(r) or r in state.offline_replicas]
    error = Errors.NONE
    leader = state.leader
    if leader < 0 or not alive(leader):
        error, leader = Errors.LEADER_NOT_AVAILABLE, -1
    elif version == 0 and (offline or any(not alive(r) for r in isr)):
        error = Errors.REPLICA_NOT_AVAILABLE
    if version == 0:
        replicas = [r for r in replicas if alive(r)]
        isr = [r for r in isr if alive(r)]
    return Partition(error_code=error, partition_index=state.partition, leader_id=leader,
                     leader_epoch=state.leader_epoch, replica_nodes=list(replicas), isr_nodes=list(isr),
                     offline_replicas=offline)


def _topic(ctx: RequestContext, cache, name: str, version: int, create, operations):
    partitions = cache.topic_partitions(name)
    if partitions is None:
        error = create(name) if create else Errors.UNKNOWN_TOPIC_OR_PARTITION
        return Topic(error_code=error, name=name, topic_id=None, is_internal=False,
                     partitions=[], authorized_operations=_NOT_REQUESTED)
    if operations is not _NOT_REQUESTED:
        operations = ctx.authorized_operations("Topic", name, operations)
    return Topic(error_code=Errors.NONE, name=name, topic_id=cache.topic_ids.get(name),
                 is_internal=name in INTERNAL_TOPICS,
                 partitions=[_partition(cache, partitions[p], version) for p in sorted(partitions)],
                 authorized_operations=operations)


def _denied(name: str, internal: bool = False):
    return Topic(error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=None, is_internal=internal,
                 partitions=[], authorized_operations=_NOT_REQUESTED)


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    broker = ctx.broker
    cache = broker.metadata_cache
    requested = request.topics
    all_topics = requested is None or (version == 0 and not requested)
    names = cache.topics() if all_topics else [t.name for t in requested]
    allowed = ctx.authorized("Describe", "Topic", names, log_if_denied=not all_topics)
    create, not_creatable = None, set()
    if requested and (version < 4 or request.allow_auto_topic_creation):
        create = broker.admin_manager.auto_create_topic
        missing = {n for n in allowed if cache.topic_partitions(n) is None}
        if missing and broker.config["auto.create.topics.enable"] \
                and not ctx.authorize("Create", "Cluster", log_if_denied=False):
            not_creatable = missing - ctx.authorized("Create", "Topic", missing)
            allowed -= not_creatable
    brokers = [Broker(node_id=i, host=h, port=p, rack=r) for i, h, p, r in cache.alive_brokers(ctx.listener)]
    controller = cache.controller_id if cache.controller_id is not None else -1
    asked = lambda field: version >= 8 and bool(getattr(request, field, False))  # noqa: E731
    topic_ops = set(TOPIC_OPERATIONS) if asked("include_topic_authorized_operations") else _NOT_REQUESTED
    cluster_ops = _NOT_REQUESTED
    if asked("include_cluster_authorized_operations"):
        cluster_ops = ctx.authorized_operations("Cluster", CLUSTER_NAME, CLUSTER_OPERATIONS) \
            if ctx.authorize("Describe", "Cluster") else set()
    topics = []
    for n in names:
        if n in allowed:
            topics.append(_topic(ctx, cache, n, version, create, topic_ops))
        elif not all_topics:
            # Without Describe the topic's existence is not revealed; without Create it is not auto-created.
            topics.append(_denied(n, n in not_creatable and n in INTERNAL_TOPICS))
    return RESPONSE(version=version, brokers=brokers, cluster_id=broker.cluster_id,
                    controller_id=controller, topics=topics, authorized_operations=cluster_ops)
