"""AlterPartitionReassignments (key 45), v0: start or cancel partition reassignments (KIP-455).

Only the active controller answers (NOT_CONTROLLER otherwise). A partition with replicas moves to them (they
must be distinct live brokers: INVALID_REPLICA_ASSIGNMENT); null replicas cancel an ongoing reassignment
(NO_REASSIGNMENT_IN_PROGRESS if there is none). The answer comes once the reassignment has started; it
completes in the background (ListPartitionReassignments shows it until then).
Authorization: needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.admin import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 45
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
TopicResponse = RESPONSE.ReassignableTopicResponse
PartitionResponse = TopicResponse.ReassignablePartitionResponse


def handle(request, ctx: RequestContext):
    plan = {(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
            for t in request.topics for p in t.partitions}
    if not ctx.authorize("Alter", "Cluster"):
        return RESPONSE(version=ctx.api_version, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=None, responses=[])
    outcome = ctx.broker.controller.alter_reassignments(plan)
    if outcome is None:
        return RESPONSE(version=ctx.api_version, error_code=Errors.NOT_CONTROLLER,
                        error_message="This broker is not the controller.", responses=[])
    by_topic: dict = {}
    for (topic, p), (error, message) in outcome.items():
        by_topic.setdefault(topic, []).append(PartitionResponse(partition_index=p, error_code=error,
                                                                error_message=message))
    return RESPONSE(version=ctx.api_version, error_code=Errors.NONE, error_message=None,
                    responses=[TopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])
