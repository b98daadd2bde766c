"""Moving leadership on purpose: controlled shutdown, preferred and unclean elections, auto-rebalance.

A mixin of KafkaController (it uses the controller's context, ZooKeeper client and request batches), kept
apart because each of these is a small policy over the same write path (Kafka's ElectionStrategy kinds):
- controlled shutdown (ControlledShutdown request): partitions the broker leads get a new leader from the
  live ISR other than it; it leaves the ISR of partitions it follows (and stops fetching them); the answer
  lists the partitions it still leads (a single replica cannot move). Until it is gone, the broker is never
  chosen as a leader.
- preferred election (/admin/preferred_replica_election, ElectLeaders type 0, auto.leader.rebalance.enable):
  the first assigned replica leads again if it is live and in the ISR.
- unclean election (ElectLeaders type 1): a partition without a leader takes the first live assigned
  replica, in sync or not.
"""
from __future__ import annotations

import logging

import gevent

from zk import znodes as z
from ..protocol.errors import Errors
from . import election
from .channel import RequestBatch

state_change = logging.getLogger("state-change")
log = logging.getLogger("kbroker.controller")

PREFERRED, UNCLEAN = 0, 1


class LeadershipMoves:
    # ---- controlled shutdown ------------------------------------------------------------------------------
    def controlled_shutdown(self, broker_id: int, broker_epoch: int, result) -> None:
        """Handle a ControlledShutdown request; sets result to (error, remaining partitions)."""
        self.enqueue(self._process_controlled_shutdown, broker_id, broker_epoch, result)

    def _process_controlled_shutdown(self, broker_id: int, broker_epoch: int, result) -> None:
        ctx = self.ctx
        if not self.active:
            result.set((Errors.NOT_CONTROLLER, []))
            return
        info = ctx.live_brokers.get(broker_id)
        if info is None:
            result.set((Errors.BROKER_NOT_AVAILABLE, []))
            return
        if broker_epoch != -1 and broker_epoch < info.epoch:
            result.set((Errors.STALE_BROKER_EPOCH, []))
            return
        ctx.shutting_down.add(broker_id)
        state_change.info("controlled shutdown of broker %d: moving its leaders away", broker_id)
        batch = RequestBatch(ctx)
        eligible = ctx.eligible_leaders()

        def move(current, replicas):
            if current.leader != broker_id:
                return None
            candidates = [r for r in replicas if r in current.isr and r in eligible]
            if not candidates:
                return None
            return candidates[0], [r for r in current.isr if r != broker_id]

        def leave(current):
            if broker_id not in current.isr or len(current.isr) < 2 or current.leader == broker_id:
                return None
            return current.leader, [r for r in current.isr if r != broker_id]
        computes = {}
        for tp, replicas in ctx.assignments.items():
            state = ctx.partition_states.get(tp)
            if state is None or broker_id not in replicas or len(replicas) < 2 or tp[0] in ctx.topics_being_deleted:
                continue
            if state.leader == broker_id:
                computes[tp] = lambda current, replicas=replicas: move(current, replicas)
            elif broker_id in state.isr:
                computes[tp] = leave
        for tp, new in sorted(self._write_states(computes).items()):
            replicas = ctx.assignments[tp]
            if new.leader != broker_id and broker_id not in new.isr and new.leader in replicas:
                state_change.info("partition %s-%d: leader %d, isr %s (controlled shutdown of %d)", *tp, new.leader,
                                  new.isr, broker_id)
                batch.add_leader_and_isr([r for r in replicas if r != broker_id], tp)
                batch.add_stop_replica([broker_id], tp, delete=False)
        batch.add_update_metadata(ctx.live_brokers, [])
        batch.send(self.channels, self._on_stop_replica_response)
        remaining = [tp for tp, s in ctx.partition_states.items() if s.leader == broker_id]
        result.set((Errors.NONE, sorted(remaining)))

    # ---- preferred and unclean elections ------------------------------------------------------------------
    def elect_leaders(self, election_type: int, partitions, result) -> None:
        """ElectLeaders: partitions None means all; sets result to {tp: (error, message)}."""
        self.enqueue(self._process_elect_leaders, election_type, partitions, result)

    def _process_elect_leaders(self, election_type: int, partitions, result) -> None:
        if not self.active:
            result.set(None)
            return
        result.set(self._elect_leaders_now(election_type, partitions))

    def _elect_leaders_now(self, election_type: int, partitions) -> dict:
        ctx = self.ctx
        wanted = sorted(ctx.assignments) if partitions is None else list(partitions)
        eligible = set(ctx.live_brokers) - ctx.shutting_down
        outcome, computes, batch = {}, {}, RequestBatch(ctx)
        for tp in wanted:
            replicas = ctx.assignments.get(tp)
            state = ctx.partition_states.get(tp)
            if tp[0] in ctx.topics_to_delete and replicas is not None:
                outcome[tp] = (Errors.INVALID_TOPIC, "The topic is being deleted")
                continue
            if replicas is None or state is None:
                outcome[tp] = (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            if election_type == PREFERRED:
                preferred = replicas[0]
                if state.leader == preferred:
                    outcome[tp] = (Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
                    continue

                def choose(current, preferred=preferred):
                    if current.leader == preferred or preferred not in current.isr or preferred not in eligible:
                        return None
                    return preferred, current.isr
            else:
                if state.leader in eligible:
                    outcome[tp] = (Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
                    continue

                def choose(current, replicas=replicas):
                    if current.leader in eligible:
                        return None
                    chosen = election.offline_partition_leader(replicas, current.isr, eligible, True)
                    return None if chosen is None else chosen[:2]
            computes[tp] = choose
            outcome[tp] = None   # decided below, with every other write of this election
        written = self._write_states(computes)
        for tp in computes:
            new = written.get(tp)
            if new is None:
                error = Errors.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED \
                    else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
                outcome[tp] = (error, f"Failed to elect leader for partition {tp[0]}-{tp[1]}")
                continue
            state_change.info("partition %s-%d: %s election made %d leader (epoch %d)", *tp,
                              "preferred" if election_type == PREFERRED else "unclean", new.leader, new.leader_epoch)
            batch.add_leader_and_isr(ctx.assignments[tp], tp)
            outcome[tp] = (Errors.NONE, None)
        batch.add_update_metadata(ctx.live_brokers, [])
        batch.send(self.channels, self._on_stop_replica_response)
        return outcome

    def _on_preferred_election_znode(self, _event) -> None:
        self.enqueue(self._process_preferred_election_znode)

    def _process_preferred_election_znode(self) -> None:
        if not self.active:
            return
        data, stat = self.zk.get(z.PreferredReplicaElectionZNode.path, watch=self._on_preferred_election_znode)
        if stat is None:
            return
        partitions = z.PreferredReplicaElectionZNode.decode(data) if data else None
        self._elect_leaders_now(PREFERRED, partitions)
        self._fenced_delete(z.PreferredReplicaElectionZNode.path)

    # ---- auto rebalance -----------------------------------------------------------------------------------
    def _auto_rebalance_loop(self) -> None:
        interval = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            gevent.sleep(interval)
            self.enqueue(self._check_leader_imbalance)

    def _check_leader_imbalance(self) -> None:
        """Per broker: if more than leader.imbalance.per.broker.percentage of the partitions it prefers to lead
        are led elsewhere, elect it back where it is in sync (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        ctx = self.ctx
        if not self.active:
            return
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100.0
        by_preferred: dict[int, list] = {}
        for tp, replicas in ctx.assignments.items():
            if tp in ctx.partition_states and tp[0] not in ctx.topics_to_delete:
                by_preferred.setdefault(replicas[0], []).append(tp)
        for broker, tps in sorted(by_preferred.items()):
            if broker not in ctx.live_brokers or broker in ctx.shutting_down:
                continue
            imbalanced = [tp for tp in tps if ctx.partition_states[tp].leader != broker]
            if imbalanced and len(imbalanced) / len(tps) > threshold:
                log.info("leader imbalance of broker %d is %.0f%%: electing preferred leaders", broker,
                         100.0 * len(imbalanced) / len(tps))
                self._elect_leaders_now(PREFERRED, [tp for tp in imbalanced
                                        if broker in ctx.partition_states[tp].isr])
