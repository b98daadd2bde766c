"""CreatePartitions (key 37), v0-v3: add partitions to topics, through ZooKeeper as Kafka's ZkAdminManager.

The new partitions' replicas are spread as Kafka does (or taken from the request), written to the topic
znode; the controller then elects their leaders. validate_only checks without writing. Errors per topic:
INVALID_PARTITIONS (not an increase), INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_TOPIC_EXCEPTION (queued for deletion), INVALID_REQUEST (a topic named twice).
"""
from __future__ import annotations

from collections import Counter

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from zk import admin as zk_admin
from zk.admin_errors import AdminError
from zk.client import ZkError
from ..protocol.errors import Errors

API_KEY = 37
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = CreatePartitionsRequest, CreatePartitionsResponse
Result = RESPONSE.CreatePartitionsTopicResult


def handle(request, ctx):
    zk = ctx.broker.zk
    named = Counter(t.name for t in request.topics)
    results = []
    for t in request.topics:
        error, message = Errors.NONE, None
        if named[t.name] > 1:
            error, message = Errors.INVALID_REQUEST, "Duplicate topic in request."
        else:
            try:
                assignments = None if t.assignments is None else [a.broker_ids for a in t.assignments]
                zk_admin.add_partitions(zk, t.name, t.count, assignments, request.validate_only)
            except AdminError as e:
                error, message = Errors(e.code), str(e)
            except ZkError as e:
                error, message = Errors.UNKNOWN_SERVER_ERROR, str(e)
        results.append(Result(name=t.name, error_code=error, error_message=message))
    return RESPONSE(version=ctx.api_version, throttle_time_ms=0, results=results)
