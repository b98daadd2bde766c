"""Follower fetching (KIP-392): which replica a consumer should read from, as Kafka 2.8's leader picks it.

replica.selector.class: None (Kafka's default) sends every consumer to the leader;
org.apache.kafka.common.replica.RackAwareReplicaSelector (the one selector Kafka ships; kbroker cannot load another
Java class, so the config refuses any other name) picks, for a consumer fetching with Fetch v11+ and a rack_id,
among the leader and the followers that hold the fetch offset (log start <= offset <= log end offset, as their
fetches last said; in the ISR or not, as 2.8: the ISR requirement came in 3.4): the leader when the client names no
rack, no replica is in its rack or the leader is; else the same-rack replica most caught up (largest log end offset,
then least time since it last caught up, then the largest broker id). A replica counts only with a live broker that
has an endpoint on the listener the consumer came in on; the leader picked, or a pick with no such endpoint, means
no preferred replica (ReplicaManager.findPreferredReadReplica).

The leader's answer to a consumer sent elsewhere carries no records, error NONE, the leader's high watermark,
last stable offset and log start offset, and preferred_read_replica; the follower then serves that consumer up to
its own high watermark (replica.manager's read path).
"""
from __future__ import annotations

from dataclasses import dataclass

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the selector sees it (Kafka's ReplicaView); rack None and has_endpoint False for a broker
    that is down or has no endpoint on the consumer's listener (Node.noNode)."""
    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int
    has_endpoint: bool = True
    log_start_offset: int = -1   # -1: unknown (a follower that has not said), which does not rule it out


def rack_aware_select(client_rack: str, leader: ReplicaView, followers: list[ReplicaView]) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector.select over the leader and the followers that hold the offset."""
    if not client_rack:
        return leader
    same_rack = [r for r in (leader, *followers) if r.has_endpoint and r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms, r.broker_id))


def preferred_read_replica(client_rack: str, leader: ReplicaView, followers: list[ReplicaView],
                           fetch_offset: int) -> int:
    """The broker id a consumer at fetch_offset should read from instead of the leader, or -1 (read here)."""
    holding = [r for r in followers if r.log_start_offset <= fetch_offset <= r.log_end_offset]
    selected = rack_aware_select(client_rack, leader, holding)
    return selected.broker_id if selected is not leader and selected.has_endpoint else -1
