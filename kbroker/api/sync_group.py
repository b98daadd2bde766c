"""SyncGroup (key 14), v0-v5: after a join, the leader sends every member's assignment; each member waits for
its own.

The leader's assignment is written to the group's `__consumer_offsets` partition (acks=-1) before anyone is
answered; followers that arrive first wait. A member of a stable group gets its current assignment at once.
Errors: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS (also while the coordinator is loading the group: the member must rejoin),
FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL (v5 protocol type or name differing from the group's, or
missing), and the write's errors (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, REBALANCE_IN_PROGRESS on a
timeout).
Version notes: v1 adds the throttle time; v3 group.instance.id; v4 is flexible; v5 sends and answers the
protocol type and name (both mandatory in the request).
Authorization: needs Read on the group (else GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.consumer import SyncGroupRequest, SyncGroupResponse

from ..coordinator.group import SyncGroupResult
from ..metrics import remote_wait
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 14
MIN_VERSION, MAX_VERSION = 0, 5
REQUEST, RESPONSE = SyncGroupRequest, SyncGroupResponse


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    if not ctx.authorize("Read", "Group", request.group_id):
        r = SyncGroupResult(Errors.GROUP_AUTHORIZATION_FAILED)
    elif version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        r = SyncGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL)
    else:
        result = gevent.event.AsyncResult()
        ctx.broker.group_coordinator.handle_sync_group(
            request.group_id, request.generation_id, request.member_id,
            request.protocol_type if version >= 5 else None, request.protocol_name if version >= 5 else None,
            request.group_instance_id if version >= 3 else None,
            {a.member_id: bytes(a.assignment) for a in request.assignments}, result.set)
        remote_wait(result)         # the leader's assignment: Kafka's sync wait
        r = result.get()
    return RESPONSE(version=version, error_code=r.error, protocol_type=r.protocol_type,
                    protocol_name=r.protocol_name, assignment=r.assignment)
