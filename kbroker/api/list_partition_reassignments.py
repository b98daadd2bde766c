"""ListPartitionReassignments (key 46), v0: the reassignments in progress, from the controller.

Only the active controller answers (NOT_CONTROLLER otherwise). Null topics lists all; each partition shows
its full replica set and the replicas being added and removed.
Authorization: needs Describe on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.admin import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 46
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
Topic = RESPONSE.OngoingTopicReassignment
Partition = Topic.OngoingPartitionReassignment


def handle(request, ctx: RequestContext):
    wanted = None
    if request.topics is not None:
        wanted = {(t.name, p) for t in request.topics for p in t.partition_indexes}
    if not ctx.authorize("Describe", "Cluster"):
        return RESPONSE(version=ctx.api_version, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=None, topics=[])
    outcome = ctx.broker.controller.list_reassignments(wanted)
    if outcome is None:
        return RESPONSE(version=ctx.api_version, error_code=Errors.NOT_CONTROLLER,
                        error_message="This broker is not the controller.", topics=[])
    by_topic: dict = {}
    for (topic, p), (replicas, adding, removing) in sorted(outcome.items()):
        by_topic.setdefault(topic, []).append(Partition(partition_index=p, replicas=replicas, adding_replicas=adding,
                                                        removing_replicas=removing))
    return RESPONSE(version=ctx.api_version, error_code=Errors.NONE, error_message=None,
                    topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])
