"""CreateTopics (key 19), v0-v7 (flexible from v5): create topics through ZooKeeper as Kafka 2.8's
KafkaApis.handleCreateTopicsRequest and ZkAdminManager.createTopics do.

Only the active controller answers (NOT_CONTROLLER for every topic otherwise; clients send it there). Per topic:
a name given twice -> INVALID_REQUEST; an existing topic (or one queued for deletion) -> TOPIC_ALREADY_EXISTS;
a null config value, or num_partitions / replication_factor set together with explicit assignments ->
INVALID_REQUEST; -1 partitions / replication factor take num.partitions / default.replication.factor; then
name, configs (INVALID_CONFIG), partitions (INVALID_PARTITIONS), replication factor (INVALID_REPLICATION_FACTOR)
and assignment (INVALID_REPLICA_ASSIGNMENT) are checked and nothing is written for a topic that fails.
validate_only stops there. Otherwise /config/topics/<T> then /brokers/topics/<T> are written and the answer waits
(up to timeout_ms, polling the metadata cache with gevent.sleep) until every new partition has a leader; topics
not ready by then get REQUEST_TIMED_OUT, as Kafka's DelayedCreatePartitions. timeout_ms <= 0 answers at once
with REQUEST_TIMED_OUT for the topics written (Kafka does the same).

v5+ results carry num_partitions, replication_factor and the configs given in the request (as written to
/config/topics, source DYNAMIC_TOPIC_CONFIG); Kafka also lists every defaulted config, which we leave out.
v7 results carry the topic id once the controller has assigned it (zero otherwise).
"""
from __future__ import annotations

import time
from collections import Counter

import gevent
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from zk import admin as zk_admin
from zk.admin_errors import AdminError
from zk.assignment import assign_replicas, check_assignment
from zk.client import TopicExistsError, ZkError
from zk.topic_config import validate_topic_config
from ..protocol.errors import Errors

API_KEY = 19
MIN_VERSION, MAX_VERSION = 0, 7
REQUEST, RESPONSE = CreateTopicsRequest, CreateTopicsResponse
Result = RESPONSE.CreatableTopicResult
ConfigEntry = Result.CreatableTopicConfigs

DYNAMIC_TOPIC_CONFIG = 1
POLL_INTERVAL = 0.05


class _Refused(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _plan(zk, cfg, topic, brokers) -> tuple[dict[int, list[int]], dict[str, str]]:
    """Check one topic as ZkAdminManager.createTopics does; returns (assignment, configs) or raises."""
    name = topic.name
    if name and zk.topic_exists(name):   # "" would look up /brokers/topics itself
        raise _Refused(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    configs = list(topic.configs or [])
    null_configs = [c.name for c in configs if c.value is None]
    if null_configs:
        raise _Refused(Errors.INVALID_REQUEST,
                       f"Null value not supported for topic configs : {','.join(null_configs)}")
    assignments = list(topic.assignments or [])
    if assignments and (topic.num_partitions != -1 or topic.replication_factor != -1):
        raise _Refused(Errors.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments "
                                               "were set. Both cannot be used at the same time.")
    config = {c.name: c.value for c in configs}
    zk_admin.validate_topic_name(name)
    if name in zk.get_topic_deletions():
        raise _Refused(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
    validate_topic_config(config)
    if assignments:
        assignment = {a.partition_index: list(a.broker_ids) for a in assignments}
        check_assignment(assignment)
    else:
        partitions = cfg["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
        rf = cfg["default.replication.factor"] if topic.replication_factor == -1 else topic.replication_factor
        assignment = assign_replicas(brokers, partitions, rf)
    zk_admin._check_topic_free(zk, name)
    return assignment, config


def _ready(cache, name: str, count: int) -> bool:
    partitions = cache.topic_partitions(name)
    return (partitions is not None and len(partitions) >= count
            and all(s.leader >= 0 for s in partitions.values()))


def handle(request, ctx):
    version = ctx.api_version
    broker = ctx.broker
    zk, cfg = broker.zk, broker.config
    validate_only = bool(getattr(request, "validate_only", False))
    topics = list(request.topics or [])
    results = {}     # index -> dict of result fields
    if broker.controller is None or not broker.controller.active:
        out = [Result(name=t.name, topic_id=None, error_code=Errors.NOT_CONTROLLER,
                      error_message="This is not the correct controller for this cluster.",
                      topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=[])
               for t in topics]
        return RESPONSE(version=version, throttle_time_ms=0, topics=out)

    named = Counter(t.name for t in topics)
    created: dict[int, int] = {}   # index -> partition count, for the topics written
    try:
        brokers = zk.get_broker_ids()
    except ZkError:
        brokers = []
    for i, t in enumerate(topics):
        r = dict(error=Errors.NONE, message=None, num_partitions=-1, replication_factor=-1, configs=[])
        results[i] = r
        if named[t.name] > 1:
            r.update(error=Errors.INVALID_REQUEST, message="Found multiple entries for this topic.")
            continue
        try:
            assignment, config = _plan(zk, cfg, t, brokers)
            if not validate_only:
                zk_admin.create_topic_with_assignment(zk, t.name, assignment, config)
                created[i] = len(assignment)
            r.update(num_partitions=len(assignment), replication_factor=len(assignment[0]),
                     configs=[ConfigEntry(name=k, value=v, read_only=False, config_source=DYNAMIC_TOPIC_CONFIG,
                                          is_sensitive=False) for k, v in config.items()])
        except _Refused as e:
            r.update(error=e.code, message=str(e))
        except TopicExistsError as e:
            r.update(error=Errors.TOPIC_ALREADY_EXISTS, message=str(e))
        except AdminError as e:
            r.update(error=Errors(e.code), message=str(e))
        except ZkError as e:
            r.update(error=Errors.UNKNOWN_SERVER_ERROR, message=str(e))

    if created:
        cache = broker.metadata_cache
        timeout_ms = request.timeout_ms
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        pending = dict(created)
        while pending and timeout_ms > 0:
            pending = {i: n for i, n in pending.items() if not _ready(cache, topics[i].name, n)}
            if not pending or time.monotonic() >= deadline:
                break
            gevent.sleep(POLL_INTERVAL)
        for i in pending:
            results[i].update(error=Errors.REQUEST_TIMED_OUT, message=None)

    out = []
    for i, t in enumerate(topics):
        r = results[i]
        if r["error"] != Errors.NONE:   # Kafka resets metadata and configs of failed topics
            r.update(num_partitions=-1, replication_factor=-1, configs=[])
        topic_id = broker.metadata_cache.topic_ids.get(t.name) if i in created else None
        out.append(Result(name=t.name, topic_id=topic_id, error_code=r["error"], error_message=r["message"],
                          topic_config_error_code=0, num_partitions=r["num_partitions"],
                          replication_factor=r["replication_factor"], configs=r["configs"]))
    return RESPONSE(version=version, throttle_time_ms=0, topics=out)
