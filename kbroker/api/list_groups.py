"""ListGroups (key 16), v0-v4: the groups this broker coordinates (clients ask every broker to list all).

Each group with its protocol type (and, v4+, its state). COORDINATOR_LOAD_IN_PROGRESS (with the groups loaded
so far) while any offsets partition is still loading; COORDINATOR_NOT_AVAILABLE before the coordinator starts.
Version notes: v1 adds the throttle time; v3 is flexible; v4 filters by state names (empty or null: all
states) and answers each group's state.
Authorization: with Describe on the cluster every group is listed, else only the groups the principal may Describe.
"""
from __future__ import annotations

from kafka.protocol.admin.groups import ListGroupsRequest, ListGroupsResponse

from .context import RequestContext

API_KEY = 16
MIN_VERSION, MAX_VERSION = 0, 4
REQUEST, RESPONSE = ListGroupsRequest, ListGroupsResponse
Listed = RESPONSE.ListedGroup


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    states = set(request.states_filter or []) if version >= 4 else set()
    error, groups = ctx.broker.group_coordinator.handle_list_groups(states)
    if not ctx.authorize("Describe", "Cluster"):
        allowed = ctx.authorized("Describe", "Group", (g for g, _, _ in groups))
        groups = [g for g in groups if g[0] in allowed]
    return RESPONSE(version=version, error_code=error, groups=[
        Listed(group_id=g, protocol_type=t, group_state=s) for g, t, s in groups])
