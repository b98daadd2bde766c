"""The controller's reads and writes of the partition state znodes (`/brokers/topics/<t>/partitions/<p>/state`:
leader, ISR, leader epoch), for both state machines.

Every write is fenced by the controller epoch's zkVersion and pipelined: a whole event's partitions go to
ZooKeeper as few multis (zk.client.create_partition_states_fenced / update_partition_states_fenced), never
one round trip per partition. Updates are compare-and-set on each znode's version (the partition epoch):
leaders change their ISR behind the controller's back, so a conflict re-reads and decides again, as Kafka's
partition state machine retries. Kafka reads every state before deciding; here the first decision is made on
the context's copy (kept current by the controller's own writes and the ISR change notifications): a write
decided on a copy that is out of date is refused by the compare-and-set, and a partition left alone on the
strength of the copy is read and decided again (a leader may have changed its ISR: the ISR change notification
can still be on its way). The outcome is Kafka's, without reading thousands of znodes first.
"""
from __future__ import annotations

from typing import Callable

from zk import znodes as z
from zk.client import KafkaZkClient
from .context import ControllerContext

# current state -> (leader, isr), or None to leave the partition as it is
Decide = Callable[[z.LeaderAndIsr], "tuple[int, list[int]] | None"]


class PartitionStateWriter:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient):
        self.ctx = ctx
        self.zk = zk

    def refresh(self, partitions) -> list:
        """Read the state znodes of the partitions into the context; returns those that exist."""
        found = []
        if not partitions:
            return found
        for tp, fresh in self.zk.get_partition_states(partitions).items():
            if fresh is not None:
                self.ctx.partition_states[tp] = fresh
                found.append(tp)
        return found

    def create(self, states: dict) -> None:
        """The first state znodes of new partitions {tp: LeaderAndIsr}."""
        self.zk.create_partition_states_fenced(states, self.ctx.epoch_zk_version)
        self.ctx.partition_states.update(states)

    def update(self, decisions: dict[tuple, Decide]) -> dict:
        """For each partition, write decide(current state) -> (leader, isr) with the leader epoch bumped
        (expected version = partition epoch). Partitions whose decision declines (None) are left out of the
        result {tp: new state}."""
        ctx = self.ctx
        written = {}
        if not decisions:
            return written
        pending = {tp: decide for tp, decide in decisions.items() if tp in ctx.partition_states}
        read = set()   # partitions whose state was read from ZooKeeper in this call
        while pending:
            proposals, again = {}, []
            for tp, decide in pending.items():
                current = ctx.partition_states[tp]
                decided = decide(current)
                if decided is not None:
                    proposals[tp] = z.LeaderAndIsr(decided[0], current.leader_epoch + 1, list(decided[1]), ctx.epoch,
                                                   current.zk_version)
                elif tp not in read:
                    again.append(tp)
            versions = self.zk.update_partition_states_fenced(proposals, ctx.epoch_zk_version) if proposals else {}
            for tp, version in versions.items():
                if version is None:
                    again.append(tp)
                    continue
                proposals[tp].zk_version = version
                ctx.partition_states[tp] = written[tp] = proposals[tp]
            fresh = self.refresh(again)
            read.update(fresh)
            pending = {tp: decisions[tp] for tp in fresh}
        return written
