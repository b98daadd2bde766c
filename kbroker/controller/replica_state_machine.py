"""The replica state machine (Kafka's ZkReplicaStateMachine) over (topic, partition, broker) replicas.

States are derived from the context (context.py) except the three deletion states, which it stores. The
transitions that act:
- to Online: the replica's broker gets LeaderAndIsr for its partition (once the partition has a leader);
- to Offline: the replica leaves the ISR of its partition (fenced, pipelined; never the last member, never a
  live leader, which needs an election instead), the partition's other replicas get LeaderAndIsr, and a live
  replica (controlled shutdown) gets StopReplica without deletion;
- to ReplicaDeletionStarted: StopReplica with deletion. Unlike Kafka, a live replica of a topic being deleted
  goes there directly, without an Offline step and its ISR write: the partitions are leaderless (-2) anyway;
- to ReplicaDeletionSuccessful when its broker answered; ReplicaDeletionIneligible while its broker is down;
- to NonExistent: the replica is forgotten (its topic or reassignment completed).
"""
from __future__ import annotations

import logging
from typing import Callable

from . import election
from .channel import RequestBatch
from .context import ControllerContext, ReplicaState
from .partition_state_writer import PartitionStateWriter

state_change = logging.getLogger("state-change")

S = ReplicaState
VALID_PREVIOUS = {
    S.ONLINE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
    S.OFFLINE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
    S.DELETION_STARTED: {S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
    S.DELETION_SUCCESSFUL: {S.DELETION_STARTED},
    S.DELETION_INELIGIBLE: {S.ONLINE, S.OFFLINE, S.DELETION_STARTED, S.DELETION_INELIGIBLE},
    S.NON_EXISTENT: {S.DELETION_SUCCESSFUL},
}
_STORED = (S.DELETION_STARTED, S.DELETION_SUCCESSFUL, S.DELETION_INELIGIBLE)


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, writer: PartitionStateWriter, batch: RequestBatch):
        self.ctx = ctx
        self.writer = writer
        self.batch = batch

    def _valid(self, replicas, target: ReplicaState) -> list:
        """The replicas whose transition to target is valid (the others are logged)."""
        valid = []
        for replica in replicas:
            current = self.ctx.replica_state(replica)
            if current in VALID_PREVIOUS[target]:
                valid.append(replica)
            else:
                state_change.error("replica %d of partition %s-%d: invalid transition from %s to %s", replica[2],
                                   replica[0], replica[1], current.value, target.value)
        return valid

    def handle_state_changes(self, replicas, target: ReplicaState) -> list:
        """Move the replicas to target; returns those whose transition was valid (the others are logged)."""
        ctx = self.ctx
        valid = self._valid(replicas, target)
        if target is S.ONLINE:
            for t, p, b in valid:
                ctx.replica_deletion_states.pop((t, p, b), None)
                if (t, p) in ctx.partition_states:
                    self.batch.add_leader_and_isr([b], (t, p))
        elif target is S.OFFLINE:
            decisions, finish = self._prepare_offline(valid)
            finish(self.writer.update(decisions) if decisions else {})
        elif target is S.DELETION_STARTED:
            for t, p, b in valid:
                self.batch.add_stop_replica([b], (t, p), delete=True)
        elif target is S.NON_EXISTENT:
            for replica in valid:
                ctx.replica_deletion_states.pop(replica, None)
        if target in _STORED:
            for replica in valid:
                ctx.replica_deletion_states[replica] = target
        return valid

    def prepare_offline(self, replicas) -> tuple[dict, Callable[[dict], None]]:
        """handle_state_changes(replicas, Offline) in two halves, so that a caller can write other partitions'
        changes in the same round: (the writer's decisions, finish(written))."""
        return self._prepare_offline(self._valid(replicas, S.OFFLINE))

    def _prepare_offline(self, replicas):
        ctx = self.ctx
        for replica in replicas:
            ctx.replica_deletion_states.pop(replica, None)
        by_partition: dict[tuple, set] = {}
        for t, p, b in replicas:
            by_partition.setdefault((t, p), set()).add(b)

        def leave_isr(tp, offline):
            def decide(current):
                leader, isr = current.leader, current.isr
                for r in [r for r in isr if r in offline and not (r == leader and ctx.is_replica_online(r, tp))]:
                    leader, isr = election.remove_replica_from_isr(leader, isr, r)
                return None if (leader, isr) == (current.leader, current.isr) else (leader, isr)
            return decide
        decisions = {tp: leave_isr(tp, offline) for tp, offline in by_partition.items()
                     if tp in ctx.partition_states and not offline.isdisjoint(ctx.partition_states[tp].isr)}
        return decisions, lambda written: self._finish_offline(by_partition, written)

    def _finish_offline(self, by_partition: dict, written: dict) -> None:
        ctx = self.ctx
        written = {tp: new for tp, new in written.items() if tp in by_partition}
        for tp, new in sorted(written.items()):
            self.batch.add_leader_and_isr([r for r in ctx.assignments[tp] if r not in by_partition[tp]], tp)
        if written:
            state_change.info("%d partitions changed their isr as replicas went offline (isr, replicas offline): %s",
                              len(written), ", ".join(f"{t}-{p} {new.isr} {sorted(by_partition[(t, p)])}"
                                                      for (t, p), new in sorted(written.items())))
        for tp, offline in by_partition.items():
            self.batch.add_stop_replica(offline, tp, delete=False)
