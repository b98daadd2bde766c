"""DeleteGroups (key 42), v0-v2: delete Empty groups and their committed offsets.

Per group: NONE (offsets and group metadata are removed and tombstones written to its `__consumer_offsets`
partition), NON_EMPTY_GROUP (members are active), GROUP_ID_NOT_FOUND (no such group on its coordinator),
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID (null id). A group
named twice is answered once (Kafka removes duplicates).
Version notes: v0 and v1 are the same; v2 is flexible.
Authorization: needs Delete on each group (else GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.admin.groups import DeleteGroupsRequest, DeleteGroupsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 42
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = DeleteGroupsRequest, DeleteGroupsResponse
Result = RESPONSE.DeletableGroupResult


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    names = list(dict.fromkeys(request.groups_names))
    allowed = ctx.authorized("Delete", "Group", names)
    errors = ctx.broker.group_coordinator.handle_delete_groups([g for g in names if g in allowed])
    errors.update({g: Errors.GROUP_AUTHORIZATION_FAILED for g in names if g not in allowed})
    return RESPONSE(version=version, results=[
        Result(group_id=g, error_code=errors[g]) for g in names])
