"""DescribeGroups (key 15), v0-v5: state, protocol and members of groups this broker coordinates.

Per group: the state name (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead), the protocol type,
the selected protocol (empty unless Stable), and members with client id, client host ("/ip") and, only when
Stable, each member's metadata and assignment. A group the coordinator does not know is answered as Dead with
no members and no error (Kafka). Errors per group: INVALID_GROUP_ID (null id; an empty id is allowed),
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR.
Version notes: v1 adds the throttle time; v3 asks for authorized operations: those of READ, DELETE, DESCRIBE the
principal may do on the group (all without an authorizer), and "not requested" otherwise; v4 adds
group.instance.id per member; v5 is flexible.
"""
from __future__ import annotations

from kafka.protocol.admin.groups import DescribeGroupsRequest, DescribeGroupsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 15
MIN_VERSION, MAX_VERSION = 0, 5
REQUEST, RESPONSE = DescribeGroupsRequest, DescribeGroupsResponse
Group = RESPONSE.DescribedGroup
Member = Group.DescribedGroupMember

READ, DELETE, DESCRIBE = 3, 6, 8          # AclOperation codes
GROUP_OPERATIONS = {READ, DELETE, DESCRIBE}


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    coordinator = ctx.broker.group_coordinator
    include_ops = version >= 3 and request.include_authorized_operations
    groups = []
    for group_id in request.groups:
        if not ctx.authorize("Describe", "Group", group_id):
            groups.append(Group(error_code=Errors.GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
                                protocol_type="", protocol_data="", members=[], authorized_operations=None))
            continue
        error, (state, protocol_type, protocol, members) = coordinator.handle_describe_group(group_id)
        groups.append(Group(
            error_code=error, group_id=group_id, group_state=state, protocol_type=protocol_type,
            protocol_data=protocol,
            members=[Member(member_id=m, group_instance_id=i, client_id=c, client_host=h, member_metadata=md,
                            member_assignment=a) for m, i, c, h, md, a in members],
            authorized_operations=ctx.authorized_operations("Group", group_id, GROUP_OPERATIONS)
            if include_ops and error == Errors.NONE else None))
    return RESPONSE(version=version, groups=groups)
