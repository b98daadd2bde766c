"""Heartbeat (key 12), v0-v4: a member tells the coordinator it is alive (resets its session timeout).

Answers NONE in a stable (or completing) group, REBALANCE_IN_PROGRESS while the group prepares a rebalance
(the member must rejoin), ILLEGAL_GENERATION for another generation, UNKNOWN_MEMBER_ID for a member the group
does not know, FENCED_INSTANCE_ID for a replaced static member; NONE while the coordinator is still loading the
group (answered blindly, as Kafka), and the usual COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR /
INVALID_GROUP_ID.
Version notes: v1 adds the throttle time; v3 group.instance.id; v4 is flexible.
Authorization: needs Read on the group (else GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 12
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = HeartbeatRequest, HeartbeatResponse


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    if not ctx.authorize("Read", "Group", request.group_id):
        return RESPONSE(version=version, error_code=Errors.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.group_coordinator.handle_heartbeat(
        request.group_id, request.member_id, request.group_instance_id if version >= 3 else None,
        request.generation_id)
    return RESPONSE(version=version, error_code=error)
