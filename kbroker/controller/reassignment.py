"""Partition reassignment (KIP-455 as Kafka 2.8's controller runs it), over the controller's context and state
machines.

Started by /admin/reassign_partitions (the legacy znode) or AlterPartitionReassignments. For a partition
moving from original replicas ORS to target replicas TRS:
1. the topic znode lists RS = TRS + (ORS - TRS), with adding (TRS - ORS) and removing (ORS - TRS) replicas;
   the leader epoch is bumped and LeaderAndIsr goes to RS, so the new replicas start fetching;
2. once every target replica is in the ISR (checked when leaders report ISR changes): the reassignment
   election (the leader moves to the first live in-sync target replica if it is not one already, else the
   epoch is bumped; the removed replicas leave the ISR), the removed replicas go Offline, through deletion to
   NonExistent (StopReplica with deletion), the topic znode lists TRS only, the partition leaves
   /admin/reassign_partitions (deleted when empty), and every broker gets UpdateMetadata.
Cancelling (AlterPartitionReassignments with null replicas) reassigns back to the original replicas. A
reassignment that replaces (or cancels) an ongoing one deletes at once the replicas the old one was adding and
the new one does not keep (Kafka's updateCurrentReassignment).
A new controller resumes reassignments from the topic znodes' adding/removing sets and the admin znode.
"""
from __future__ import annotations

import logging

from zk import znodes as z
from zk.client import ControllerMovedError, KafkaZkClient
from ..protocol.errors import Errors
from .channel import RequestBatch
from .context import ControllerContext, ReplicaState
from .partition_state_machine import PartitionStateMachine, ReassignmentElection
from .replica_state_machine import ReplicaStateMachine

state_change = logging.getLogger("state-change")


class Reassignments:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient, partitions: PartitionStateMachine,
                 replicas: ReplicaStateMachine, batch: RequestBatch):
        self.ctx = ctx
        self.zk = zk
        self.partitions = partitions
        self.replicas = replicas
        self.batch = batch

    # ---- entry points -------------------------------------------------------------------------------------
    def process_znode(self, watch) -> None:
        """/admin/reassign_partitions changed (or a new controller reads it); watch is re-set on it."""
        data, stat = self.zk.get(z.ReassignPartitionsZNode.path, watch=watch)
        if stat is None:
            return
        plan = z.ReassignPartitionsZNode.decode(data) if data else {}
        results = self.start(plan, from_znode=True)
        failed = [tp for tp, (error, _) in results.items() if error]
        if failed:
            state_change.warning("reassignment of %s refused: %s", failed,
                                 {f"{t}-{p}": results[(t, p)][1] for t, p in failed})
            self._update_reassign_znode(remove=failed)

    def list(self, partitions) -> dict:
        """ListPartitionReassignments: {tp: (replicas, adding, removing)}."""
        out = {}
        for tp, (target, original) in self.ctx.reassignments.items():
            if partitions is None or tp in partitions:
                full = target + [r for r in original if r not in target]
                out[tp] = (full, [r for r in target if r not in original], [r for r in original if r not in target])
        return out

    # ---- phase 1 ------------------------------------------------------------------------------------------
    def start(self, plan: dict, from_znode: bool) -> dict:
        """Start (or cancel: replicas None) reassignments {tp: replicas}; {tp: (error, message)}."""
        ctx = self.ctx
        results = {}
        for tp, target in sorted(plan.items()):
            current = ctx.assignments.get(tp)
            if current is None or tp[0] in ctx.topics_to_delete:
                results[tp] = (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            ongoing = ctx.reassignments.get(tp)
            if target is None:
                if ongoing is None:
                    results[tp] = (Errors.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress.")
                    continue
                target = list(ongoing[1])
            error = self._check_target(target)
            if error:
                results[tp] = (Errors.INVALID_REPLICA_ASSIGNMENT, error)
                continue
            original = list(ongoing[1]) if ongoing else list(current)
            if target == original and ongoing is None:
                results[tp] = (Errors.NONE, None)
                if from_znode:
                    self._update_reassign_znode(remove=[tp])
                continue
            # replicas a replaced (or cancelled) reassignment was adding and this one does not keep (while
            # ctx.assignments still lists them: their state derives from it)
            full = target + [r for r in original if r not in target]
            self._delete_replicas(tp, [r for r in current if r not in full])
            ctx.reassignments[tp] = (list(target), original)
            if from_znode:
                ctx.znode_reassignments.add(tp)
            state_change.info("reassigning partition %s-%d: %s -> %s", *tp, original, target)
            self._write_topic_assignment(tp[0])
            if self.partitions.bump_leader_epoch(tp) is not None:
                self.replicas.handle_state_changes([(*tp, r) for r in ctx.assignments[tp]], ReplicaState.ONLINE)
            self.batch.add_update_metadata(ctx.live_brokers, [tp])
            self.batch.send()
            results[tp] = (Errors.NONE, None)
        self.maybe_complete(list(plan))
        return results

    def _check_target(self, target) -> str | None:
        if not target:
            return "The replica list is empty."
        if len(set(target)) != len(target):
            return "The replica list has duplicate entries."
        unknown = [r for r in target if r not in self.ctx.live_brokers]
        if unknown:
            return f"Replica assignment has brokers that are not alive: {unknown}"
        return None

    def _write_topic_assignment(self, topic: str) -> None:
        """The topic znode with each partition's full replica set and its adding/removing replicas."""
        ctx = self.ctx
        partitions, adding, removing = {}, {}, {}
        for (t, p) in ctx.partitions_of(topic):
            ongoing = ctx.reassignments.get((t, p))
            if ongoing is None:
                partitions[p] = list(ctx.assignments[(t, p)])
                continue
            target, original = ongoing
            partitions[p] = target + [r for r in original if r not in target]
            adding[p] = [r for r in target if r not in original]
            removing[p] = [r for r in original if r not in target]
            ctx.assignments[(t, p)] = list(partitions[p])
        assignment = z.TopicAssignment(partitions, ctx.topic_ids.get(topic), adding, removing)
        self.zk.set_topic_assignment_fenced(topic, assignment, ctx.epoch_zk_version)

    # ---- phase 2 ------------------------------------------------------------------------------------------
    def maybe_complete(self, partitions) -> None:
        """Complete the reassignments of these partitions whose target replicas are all in sync."""
        ctx = self.ctx
        for tp in partitions:
            ongoing = ctx.reassignments.get(tp)
            state = ctx.partition_states.get(tp)
            if ongoing is None or state is None:
                continue
            target, original = ongoing
            if all(r in state.isr for r in target):
                self._complete_reassignment(tp, target, original)

    def _complete_reassignment(self, tp, target, original) -> None:
        ctx = self.ctx
        new = self.partitions.elect([tp], ReassignmentElection()).get(tp)
        if new is None:
            state_change.warning("partition %s-%d: no live in-sync target replica to lead; reassignment waits", *tp)
            return
        self._delete_replicas(tp, [r for r in original if r not in target])
        del ctx.reassignments[tp]
        ctx.assignments[tp] = list(target)
        self._write_topic_assignment(tp[0])
        self.batch.add_update_metadata(ctx.live_brokers, [tp])
        self.batch.send()
        state_change.info("partition %s-%d: reassignment to %s completed (leader %d)", *tp, target, new.leader)
        if tp in ctx.znode_reassignments:
            ctx.znode_reassignments.discard(tp)
            self._update_reassign_znode(remove=[tp])

    def _delete_replicas(self, tp, brokers) -> None:
        """Take the partition's replicas on these brokers Offline and through deletion to NonExistent (StopReplica
        with deletion), as Kafka's stopRemovedReplicasOfReassignedPartition."""
        removed = [(*tp, r) for r in brokers]
        for state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                      ReplicaState.NON_EXISTENT):
            self.replicas.handle_state_changes(removed, state)

    def _update_reassign_znode(self, remove) -> None:
        """Drop finished partitions from /admin/reassign_partitions; delete it when empty (fenced)."""
        data, stat = self.zk.get(z.ReassignPartitionsZNode.path)
        if stat is None:
            return
        plan = z.ReassignPartitionsZNode.decode(data) if data else {}
        for tp in remove:
            plan.pop(tp, None)
        try:
            if plan:
                self.zk.fenced(self.ctx.epoch_zk_version, lambda t: t.set_data(
                    z.ReassignPartitionsZNode.path, z.ReassignPartitionsZNode.encode(plan)))
            else:
                self.zk.fenced(self.ctx.epoch_zk_version, lambda t: t.delete(z.ReassignPartitionsZNode.path))
        except ControllerMovedError:
            raise
        except Exception:
            pass

    # ---- failover -----------------------------------------------------------------------------------------
    def resume(self, topic_assignments: dict, watch) -> None:
        """Rebuild ongoing reassignments from the topic znodes, then take in the admin znode (watched)."""
        ctx = self.ctx
        for topic, assignment in topic_assignments.items():
            for p, adding in assignment.adding_replicas.items():
                removing = assignment.removing_replicas.get(p, [])
                full = assignment.partitions.get(p, [])
                target = [r for r in full if r not in removing]
                original = [r for r in full if r not in adding]
                if adding or removing:
                    ctx.reassignments[(topic, p)] = (target, original)
            for p, removing in assignment.removing_replicas.items():
                if p not in assignment.adding_replicas and removing:
                    full = assignment.partitions.get(p, [])
                    ctx.reassignments[(topic, p)] = ([r for r in full if r not in removing], list(full))
        self.maybe_complete(list(ctx.reassignments))
        self.process_znode(watch)
