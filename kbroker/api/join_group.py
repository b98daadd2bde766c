"""JoinGroup (key 11), v0-v7: join (or rejoin) a group and wait for the rebalance to complete.

The request waits (this connection's later requests queue behind it, as Kafka mutes the channel) until the
coordinator answers: at once for errors, MEMBER_ID_REQUIRED and unchanged followers of a stable group,
otherwise when the rebalance completes (all members rejoined, or the rebalance timeout). The leader's answer
lists every member with its metadata for the selected protocol; followers get an empty list.
Errors: INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms), UNKNOWN_MEMBER_ID,
INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED. A protocol the
member lists twice is taken once, with its first metadata.
Version notes: v0 has no rebalance timeout (the session timeout is used); v2 adds the throttle time; v4+ new
dynamic members get MEMBER_ID_REQUIRED first; v5 adds group.instance.id (static membership) in the request and
per member in the answer; v6 is flexible; v7 answers the protocol type, and a null protocol name when none was
selected (v0-v6: an empty string). The client host recorded is "/<ip>", as Kafka's InetAddress.toString.
Authorization: needs Read on the group (else GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import gevent.event
from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

from ..metrics import remote_wait
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 11
MIN_VERSION, MAX_VERSION = 0, 7
REQUEST, RESPONSE = JoinGroupRequest, JoinGroupResponse
Member = RESPONSE.JoinGroupResponseMember


def client_host(ctx: RequestContext) -> str:
    return "/" + str(ctx.client_address[0]) if ctx.client_address else ""


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    session_timeout = request.session_timeout_ms
    rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else session_timeout
    instance_id = request.group_instance_id if version >= 5 else None
    if not ctx.authorize("Read", "Group", request.group_id):
        return RESPONSE(version=version, error_code=Errors.GROUP_AUTHORIZATION_FAILED,
                        generation_id=-1, protocol_type=None, protocol_name=None if version >= 7 else "",
                        leader="", member_id="", members=[])
    # A protocol named twice counts once (its first metadata): counted twice, no protocol would be supported by
    # "every member" and the rebalance could never pick one.
    protocols: dict = {}
    for p in request.protocols:
        protocols.setdefault(p.name, bytes(p.metadata))
    result = gevent.event.AsyncResult()
    ctx.broker.group_coordinator.handle_join_group(
        request.group_id, request.member_id, instance_id, version >= 4 and instance_id is None,
        ctx.client_id or "", client_host(ctx), rebalance_timeout, session_timeout, request.protocol_type,
        list(protocols.items()), result.set)
    remote_wait(result)             # the rebalance: Kafka's join purgatory
    r = result.get()
    protocol_name = r.protocol_name if version >= 7 else (r.protocol_name or "")
    return RESPONSE(version=version, error_code=r.error, generation_id=r.generation_id,
                    protocol_type=r.protocol_type, protocol_name=protocol_name, leader=r.leader_id,
                    member_id=r.member_id,
                    members=[Member(member_id=m, group_instance_id=i, metadata=md) for m, i, md in (r.members or [])])
