"""FindCoordinator (key 10), v0-v3: which broker coordinates a group (or, later, a transactional id).

Key type 0 (group; v0 has no key type): the leader of the group's `__consumer_offsets` partition
(Utils.abs(groupId.hashCode) % partitions), with its host and port on the listener the request came in on.
When the topic does not exist yet the group coordinator has the admin manager create it
(offsets.topic.num.partitions, offsets.topic.replication.factor, compacted) and the answer is
COORDINATOR_NOT_AVAILABLE, as it is while the partition has no live leader, the leader has no endpoint on this
listener, or there are fewer live brokers than the replication factor (the topic is then created once there
are enough). Clients retry on COORDINATOR_NOT_AVAILABLE.
Key type 1 (transaction): the same for the transactional id's `__transaction_state` partition (created by the
transaction coordinator: transaction.state.log.num.partitions, transaction.state.log.replication.factor,
min ISR transaction.state.log.min.isr, compacted). Any other key type is INVALID_REQUEST.
Version notes: v1 adds the key type, the throttle time and an error message; v2 is v1 (throttling semantics);
v3 is the flexible encoding. The error message is Kafka's Errors.message(): the code's default message, and
"NONE" on success (Kafka sends that string too).
Authorization: needs Describe on the group (else GROUP_AUTHORIZATION_FAILED) or the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from ..common.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 10
MIN_VERSION, MAX_VERSION = 0, 3
REQUEST, RESPONSE = FindCoordinatorRequest, FindCoordinatorResponse

GROUP, TRANSACTION = 0, 1
_MESSAGES = {
    Errors.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    Errors.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library "
                            "or the message was sent to an incompatible broker. See the broker logs for more "
                            "details.",
}


def _answer(version: int, error: Errors, node=(-1, "", -1)):
    node_id, host, port = node
    return RESPONSE(version=version, error_code=error,
                    error_message=_MESSAGES.get(error, error.name),
                    node_id=node_id, host=host, port=port)


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else GROUP
    broker = ctx.broker
    if key_type == GROUP:
        coordinator, topic = broker.group_coordinator, GROUP_METADATA_TOPIC
        create = coordinator.create_offsets_topic
    elif key_type == TRANSACTION:
        coordinator, topic = broker.txn_coordinator, TRANSACTION_STATE_TOPIC
        create = coordinator.create_topic
    else:
        return _answer(version, Errors.INVALID_REQUEST)
    if key_type == GROUP and not ctx.authorize("Describe", "Group", request.key or ""):
        return _answer(version, Errors.GROUP_AUTHORIZATION_FAILED)
    if key_type == TRANSACTION and not ctx.authorize("Describe", "TransactionalId", request.key or ""):
        return _answer(version, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    cache = broker.metadata_cache
    partitions = cache.topic_partitions(topic)
    if partitions is None:
        create()
        return _answer(version, Errors.COORDINATOR_NOT_AVAILABLE)
    state = partitions.get(coordinator.partition_for(request.key or ""))
    if state is None or state.leader < 0 or not cache.is_alive(state.leader):
        return _answer(version, Errors.COORDINATOR_NOT_AVAILABLE)
    endpoint = cache.brokers[state.leader].endpoints.get(ctx.listener)
    if endpoint is None:
        return _answer(version, Errors.COORDINATOR_NOT_AVAILABLE)
    return _answer(version, Errors.NONE, (state.leader, endpoint[0], endpoint[1]))
