"""LeaveGroup (key 13), v0-v4: members leave a group at once (the group rebalances without waiting for their
session timeout).

v0-v2 name one member; v3+ a batch of members, each by member id and/or group.instance.id (a static member may
be removed by its instance id alone, as kafka-consumer-groups --delete-members does), with an error per member:
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (the instance id belongs to another member id). Group-level errors:
INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR. An unknown group
answers UNKNOWN_MEMBER_ID for each member.
Version notes: v1 adds the throttle time; v0-v2 carry the one member's error as the top-level error (Kafka's
LeaveGroupResponse for old versions); v3 the batch; v4 is flexible.
Authorization: needs Read on the group (else GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 13
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = LeaveGroupRequest, LeaveGroupResponse
MemberResponse = RESPONSE.MemberResponse


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    if not ctx.authorize("Read", "Group", request.group_id):
        return RESPONSE(version=version, error_code=Errors.GROUP_AUTHORIZATION_FAILED, members=[])
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    error, results = ctx.broker.group_coordinator.handle_leave_group(request.group_id, leaving)
    if version <= 2:
        if error == Errors.NONE:
            error = next((e for _, _, e in results if e != Errors.NONE), Errors.NONE)
        return RESPONSE(version=version, error_code=error)
    return RESPONSE(version=version, error_code=error, members=[
        MemberResponse(member_id=m, group_instance_id=i, error_code=e) for m, i, e in results])
