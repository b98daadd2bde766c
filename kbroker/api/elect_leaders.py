"""ElectLeaders (key 43), v0-v2: preferred (type 0) or unclean (type 1) leader elections, by the controller.

Only the active controller answers (NOT_CONTROLLER otherwise; admin clients send it to the controller).
Topic partitions null means every partition. Per partition: NONE, ELECTION_NOT_NEEDED (already led by the
preferred replica / already has a leader), PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION. v0 has no election type (preferred) and no top-level error code.
Authorization: needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 43
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = ElectLeadersRequest, ElectLeadersResponse
Result = RESPONSE.ReplicaElectionResult
PartitionResult = Result.PartitionResult


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    election_type = request.election_type if version >= 1 else 0
    partitions = None
    if request.topic_partitions is not None:
        partitions = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    if not ctx.authorize("Alter", "Cluster"):
        outcome = {tp: (Errors.CLUSTER_AUTHORIZATION_FAILED, None) for tp in partitions or []}
        top = Errors.CLUSTER_AUTHORIZATION_FAILED
    elif (outcome := ctx.broker.controller.elect_leaders(election_type, partitions)) is None:
        outcome = {tp: (Errors.NOT_CONTROLLER, "This broker is not the controller.") for tp in partitions or []}
        top = Errors.NOT_CONTROLLER
    else:
        top = Errors.NONE
    by_topic: dict = {}
    for (topic, p), (error, message) in outcome.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_id=p, error_code=error, error_message=message))
    return RESPONSE(version=version, error_code=top, replica_election_results=[
        Result(topic=t, partition_result=ps) for t, ps in by_topic.items()])
