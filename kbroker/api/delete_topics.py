"""DeleteTopics (key 20), v0-v6 (flexible from v4): queue topics for deletion through ZooKeeper as Kafka 2.8's
KafkaApis.handleDeleteTopicsRequest and ZkAdminManager.deleteTopics do.

Only the active controller answers (NOT_CONTROLLER for every topic otherwise). With delete.topic.enable=false
every topic gets TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3). v6 names topics by name or by id: an id
that no topic has -> UNKNOWN_TOPIC_ID, both given -> INVALID_REQUEST. A topic the metadata cache does not know
-> UNKNOWN_TOPIC_OR_PARTITION. Otherwise the /admin/delete_topics/<T> marker is written (already there is
fine) and the answer waits, up to timeout_ms (polling the metadata cache with gevent.sleep), for the
controller to delete the topic; topics still there then get REQUEST_TIMED_OUT. timeout_ms <= 0 answers at once
with REQUEST_TIMED_OUT for the topics marked (Kafka does the same).
"""
from __future__ import annotations

import time

import gevent
from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from zk.client import TopicAlreadyMarkedForDeletionError, ZkError
from ..protocol.errors import Errors

API_KEY = 20
MIN_VERSION, MAX_VERSION = 0, 6
REQUEST, RESPONSE = DeleteTopicsRequest, DeleteTopicsResponse
Result = RESPONSE.DeletableTopicResult

POLL_INTERVAL = 0.05


def _no_id(topic_id) -> bool:
    return topic_id is None or getattr(topic_id, "int", 0) == 0


def handle(request, ctx):
    version = ctx.api_version
    broker = ctx.broker
    cache = broker.metadata_cache
    # entries: [name, topic_id, error, message]
    if version >= 6:
        entries = [[t.name, t.topic_id, Errors.NONE, None] for t in (request.topics or [])]
    else:
        entries = [[name, None, Errors.NONE, None] for name in (request.topic_names or [])]

    def respond():
        return RESPONSE(version=version, throttle_time_ms=0,
                        responses=[Result(name=n, topic_id=i, error_code=e, error_message=m)
                                   for n, i, e, m in entries])

    if broker.controller is None or not broker.controller.active:
        for e in entries:
            e[2], e[3] = Errors.NOT_CONTROLLER, "This is not the correct controller for this cluster."
        return respond()
    if not broker.config["delete.topic.enable"]:
        error = Errors.TOPIC_DELETION_DISABLED if version >= 3 else Errors.INVALID_REQUEST
        for e in entries:
            e[2], e[3] = error, "Topic deletion is disabled."
        return respond()

    names_by_id = {i: n for n, i in cache.topic_ids.items()}
    to_delete = []
    for e in entries:
        name, topic_id = e[0], e[1]
        if not _no_id(topic_id):
            if name is not None:
                e[2], e[3] = Errors.INVALID_REQUEST, "Topic name and topic ID can not both be specified."
                continue
            name = e[0] = names_by_id.get(topic_id)
            if name is None:
                e[2], e[3] = Errors.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."
                continue
        if name is None or cache.topic_partitions(name) is None:
            e[2], e[3] = Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            continue
        to_delete.append(e)

    zk = broker.zk
    pending = []
    for e in to_delete:
        try:
            if not zk.topic_exists(e[0]):
                e[2], e[3] = Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
                continue
            zk.create_delete_topic_marker(e[0])
        except TopicAlreadyMarkedForDeletionError:
            pass
        except ZkError as err:
            e[2], e[3] = Errors.UNKNOWN_SERVER_ERROR, str(err)
            continue
        pending.append(e)

    timeout_ms = request.timeout_ms
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
    while pending and timeout_ms > 0:
        pending = [e for e in pending if cache.topic_partitions(e[0]) is not None]
        if not pending or time.monotonic() >= deadline:
            break
        gevent.sleep(POLL_INTERVAL)
    for e in pending:
        e[2], e[3] = Errors.REQUEST_TIMED_OUT, None
    return respond()
