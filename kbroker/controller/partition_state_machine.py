"""The partition state machine (Kafka's ZkPartitionStateMachine): NonExistent -> New -> Online <-> Offline.

States are derived from the context (context.py). The transitions that act:
- to Online from New: the first leader and ISR (election.new_partition_leader) are created in the state
  znodes, and the replicas get LeaderAndIsr with is_new;
- to Online from Offline or Online: a leader is elected by one of Kafka's strategies (election.py), written
  with the leader epoch bumped (fenced, compare-and-set on the partition epoch), and the partition's replicas
  get LeaderAndIsr:
    OfflineElection (a dead or missing leader; unclean per topic config, or forced by ElectLeaders type 1),
    ReassignmentElection (completing a reassignment), PreferredElection, ControlledShutdownElection;
- to Offline and to NonExistent: nothing to do; a partition is Offline as soon as its leader's broker is gone
  (the election that follows replaces it) and NonExistent once its topic is forgotten.
A partition of a topic queued for deletion is never elected. All writes of one call are pipelined, and its
outcome is one state-change line per kind (listing every partition), not one per partition: at 10 000
partitions the log records cost more than the elections.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from zk import znodes as z
from . import election
from .channel import RequestBatch
from .context import ControllerContext, PartitionState
from .partition_state_writer import PartitionStateWriter

state_change = logging.getLogger("state-change")

ONLINE_FROM = {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}   # valid previous states


@dataclass(frozen=True)
class OfflineElection:
    allow_unclean: bool | None = None      # None: the topic's unclean.leader.election.enable


@dataclass(frozen=True)
class ReassignmentElection:
    pass


@dataclass(frozen=True)
class PreferredElection:
    pass


@dataclass(frozen=True)
class ControlledShutdownElection:
    pass


class PartitionStateMachine:
    def __init__(self, ctx: ControllerContext, writer: PartitionStateWriter, batch: RequestBatch,
                 unclean_election_enabled: Callable[[str], bool]):
        """unclean_election_enabled(topic) reads the topic's unclean.leader.election.enable."""
        self.ctx = ctx
        self.writer = writer
        self.batch = batch
        self.unclean_election_enabled = unclean_election_enabled
        self.unclean_elections = 0   # leaders elected out of the ISR (Kafka's UncleanLeaderElectionsPerSec)

    def _valid(self, partitions) -> list:
        """The partitions that may go Online; the others (NonExistent) are logged, as Kafka does, and left out."""
        ok = []
        for tp in partitions:
            current = self.ctx.partition_state(tp)
            if current in ONLINE_FROM:
                ok.append(tp)
            else:
                state_change.error("partition %s-%d: invalid transition from %s to %s", *tp, current.value,
                                   PartitionState.ONLINE.value)
        return ok

    def trigger_online_state_change(self, partitions=None) -> None:
        """New and Offline partitions (of those given, else all) not queued for deletion become Online."""
        self.elect(self.needing_election(partitions), OfflineElection())

    def needing_election(self, partitions=None) -> list:
        """The New and Offline partitions (of those given, else all) not queued for deletion."""
        ctx = self.ctx
        candidates = ctx.assignments if partitions is None else partitions
        return [tp for tp in candidates if tp[0] not in ctx.topics_to_delete
                and ctx.partition_state(tp) in (PartitionState.NEW, PartitionState.OFFLINE)]

    def elect(self, partitions, strategy) -> dict:
        """Move the partitions to Online with the strategy; {tp: its new LeaderAndIsr, or None if no leader
        could be elected} for the partitions whose transition is valid."""
        decisions, finish = self.prepare(partitions, strategy)
        return finish(self.writer.update(decisions))

    def prepare(self, partitions, strategy) -> tuple[dict, Callable[[dict], dict]]:
        """elect() in two halves, so that a caller can write other partitions' changes in the same round: new
        partitions are created now; for the others, (the writer's decisions, finish(written) -> elect's
        result)."""
        ctx = self.ctx
        partitions = self._valid(partitions)
        new = [tp for tp in partitions if tp not in ctx.partition_states]
        existing = [tp for tp in partitions if tp in ctx.partition_states]
        results = self._initialize(new) if new else {}
        decisions, finish_existing = self._prepare_existing(existing, strategy)

        def finish(written: dict) -> dict:
            if existing:
                results.update(finish_existing(written))
            self.batch.add_update_metadata(ctx.live_brokers, [])
            return results
        return decisions, finish

    def _initialize(self, partitions) -> dict:
        ctx = self.ctx
        live = ctx.eligible_leaders()
        created, results = {}, {}
        for tp in partitions:
            chosen = election.new_partition_leader(ctx.assignments[tp], live)
            if chosen is None:
                results[tp] = None
                continue
            created[tp] = z.LeaderAndIsr(chosen[0], 0, chosen[1], ctx.epoch)
        stuck = [tp for tp, state in results.items() if state is None]
        if stuck:
            state_change.warning("%d new partitions stay new, no replica of theirs being live: %s", len(stuck),
                                 ", ".join(f"{t}-{p} {ctx.assignments[(t, p)]}" for t, p in stuck))
        if created:
            self.writer.create(created)
            for tp, state in sorted(created.items()):
                self.batch.add_leader_and_isr(ctx.assignments[tp], tp, is_new=True)
                results[tp] = state
            state_change.info("%d new partitions online (leader, isr): %s", len(created),
                              ", ".join(f"{t}-{p} {s.leader} {s.isr}" for (t, p), s in sorted(created.items())))
        return results

    def _prepare_existing(self, partitions, strategy):
        ctx = self.ctx
        eligible = ctx.eligible_leaders()
        unclean_elected: set = set()
        unclean_topics: dict[str, bool] = {}
        decisions = {}
        all_eligible = eligible
        for tp in partitions:
            replicas = ctx.assignments[tp]
            eligible = ctx.eligible_leaders_of(tp, all_eligible)
            if isinstance(strategy, OfflineElection):
                if strategy.allow_unclean is None:
                    def allow(topic=tp[0]):
                        if topic not in unclean_topics:
                            unclean_topics[topic] = self.unclean_election_enabled(topic)
                        return unclean_topics[topic]
                else:
                    def allow(forced=strategy.allow_unclean):
                        return forced
                decisions[tp] = self._offline_decision(tp, replicas, eligible, allow, unclean_elected)
            elif isinstance(strategy, ReassignmentElection):
                target, original = ctx.reassignments[tp]
                removing = [r for r in original if r not in target]
                decisions[tp] = lambda s, t=target, rm=removing, e=eligible: election.reassignment_leader(
                    t, rm, s.leader, s.isr, e)
            elif isinstance(strategy, PreferredElection):
                decisions[tp] = lambda s, a=replicas, e=eligible: election.preferred_replica_leader(a, s.leader,
                                                                                                   s.isr, e)
            else:
                decisions[tp] = lambda s, a=replicas, e=eligible: self._controlled_shutdown_decision(a, s, e)
        return decisions, lambda written: self._finish_existing(partitions, strategy, written, all_eligible,
                                                                unclean_elected)

    def _finish_existing(self, partitions, strategy, written: dict, all_eligible: set, unclean_elected: set) -> dict:
        ctx = self.ctx
        results, offline, elected_now = {}, [], []
        for tp in partitions:
            state = ctx.partition_states.get(tp)
            if isinstance(strategy, OfflineElection):
                # Also a success when a leader's write raced us and that leader is alive: nothing to elect.
                elected = state is not None and state.leader in ctx.eligible_leaders_of(tp, all_eligible)
            else:
                elected = tp in written
            if not elected:
                if isinstance(strategy, OfflineElection):
                    offline.append((tp, state.isr if state else []))
                results[tp] = None
                continue
            if tp in unclean_elected:
                self.unclean_elections += 1
                state_change.warning("partition %s-%d: UNCLEAN leader election: %d becomes leader although it was "
                                     "not in the ISR; records it did not have are lost", *tp, state.leader)
            elected_now.append((tp, state))
            recipients = ctx.assignments[tp]
            if isinstance(strategy, ControlledShutdownElection):
                recipients = [r for r in recipients if r not in ctx.shutting_down]
            elif isinstance(strategy, ReassignmentElection):
                recipients = ctx.reassignments[tp][0]
            self.batch.add_leader_and_isr(recipients, tp)
            results[tp] = state
        if offline:
            self.batch.add_update_metadata(ctx.live_brokers, [tp for tp, _ in offline])
            state_change.warning("%d partitions stay offline, no live in-sync replica among their isr: %s",
                                 len(offline), ", ".join(f"{t}-{p} {isr}" for (t, p), isr in offline))
        if elected_now:
            state_change.info("%d partitions have new leaders (%s) (leader, leader epoch, isr): %s", len(elected_now),
                              type(strategy).__name__, ", ".join(
                                  f"{t}-{p} {s.leader} {s.leader_epoch} {s.isr}"
                                  f"{' (unclean election)' if (t, p) in unclean_elected else ''}"
                                  for (t, p), s in elected_now))
        return results

    @staticmethod
    def _offline_decision(tp, replicas, eligible, allow_unclean, unclean_elected: set):
        """allow_unclean() is asked (the topic's config read) only when no live replica is in sync, as Kafka."""
        def decide(current):
            unclean_elected.discard(tp)
            if current.leader in eligible:
                return None
            unclean = eligible.isdisjoint(current.isr) and allow_unclean()
            chosen = election.offline_partition_leader(replicas, current.isr, eligible, unclean)
            if chosen is None:
                return None if current.leader == election.NO_LEADER else (election.NO_LEADER, current.isr)
            if chosen[2]:
                unclean_elected.add(tp)
            return chosen[0], chosen[1]
        return decide

    def _controlled_shutdown_decision(self, replicas, current, eligible):
        """The leader is a shutting-down broker: elect another (Kafka's controlled-shutdown strategy)."""
        if current.leader not in self.ctx.shutting_down:
            return None
        return election.controlled_shutdown_leader(replicas, current.leader, current.isr, current.leader, eligible)

    def bump_leader_epoch(self, tp) -> z.LeaderAndIsr | None:
        """Same leader and ISR, leader epoch + 1 (replicas were added or removed by a reassignment)."""
        return self.writer.update({tp: lambda s: (s.leader, s.isr)}).get(tp)
