"""KafkaController: runs on every broker; the one elected through ZooKeeper manages partition leadership.

One event queue drained by one greenlet (Kafka's ControllerEventManager): ZooKeeper watches and broker
responses only enqueue events, all state changes happen here, in order, without locks.

Election: an exists watch on /controller; when it is absent, one multi creates the ephemeral /controller and
bumps /controller_epoch with a version check (zk.client.register_controller_and_increment_epoch). Every
later write is fenced by the /controller_epoch zkVersion; a failed fence makes the controller resign.

As active controller it watches /brokers/ids, /brokers/topics (and each topic), /admin/delete_topics, and
reacts as Kafka 2.8 does: new partitions get a leader and ISR written to their state znode and pushed with
LeaderAndIsr + UpdateMetadata; a dead broker's partitions get new leaders from the live ISR (leader_epoch + 1),
its replicas leave the ISR of the partitions it followed; topic deletion stops and deletes the replicas, then
removes the topic's znodes.
"""
from __future__ import annotations

import gc
import logging
from dataclasses import dataclass, field

import gevent
from gevent.queue import Queue

from zk import znodes as z
from zk.client import ControllerMovedError, KafkaZkClient, ZkConnectionLoss, ZkSessionExpired
from . import election
from .channel import ControllerChannelManager, RequestBatch
from .leadership import LeadershipMoves
from .reassignment import Reassignments

log = logging.getLogger("kbroker.controller")
state_change = logging.getLogger("state-change")


@dataclass
class ControllerContext:
    broker_id: int
    inter_broker_listener: str
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict = field(default_factory=dict)       # id -> BrokerInfo (epoch = czxid)
    assignments: dict = field(default_factory=dict)        # (topic, partition) -> replicas
    partition_states: dict = field(default_factory=dict)   # (topic, partition) -> LeaderAndIsr
    topic_ids: dict = field(default_factory=dict)          # topic -> base64 topic id
    topics_to_delete: set = field(default_factory=set)
    topics_being_deleted: set = field(default_factory=set)
    pending_deletion_replicas: dict = field(default_factory=dict)  # topic -> {(partition, broker)}
    shutting_down: set = field(default_factory=set)         # brokers in controlled shutdown: never leaders
    reassignments: dict = field(default_factory=dict)       # (topic, partition) -> (target, original replicas)
    znode_reassignments: set = field(default_factory=set)   # those listed in /admin/reassign_partitions

    def eligible_leaders(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down

    def topics(self) -> set[str]:
        return {t for t, _ in self.assignments}

    def partitions_of(self, topic: str) -> list[tuple[str, int]]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def clear(self):
        keep = (self.broker_id, self.inter_broker_listener)
        self.__init__(*keep)


class KafkaController(LeadershipMoves, Reassignments):
    def __init__(self, broker_id: int, zk: KafkaZkClient, config, inter_broker_listener: str):
        self.broker_id = broker_id
        self.zk = zk
        self.config = config
        self.ctx = ControllerContext(broker_id, inter_broker_listener)
        self.channels: ControllerChannelManager | None = None
        self.active = False
        self.queue: Queue = Queue()
        self.worker = None
        self.session_generation = 0
        self.active_tasks: list = []   # greenlets that run only while this broker is controller

    # ---- event loop --------------------------------------------------------------------------------------
    def startup(self) -> None:
        self.worker = gevent.spawn(self._run)
        self.enqueue(self._process_startup)

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.kill()
        self._resign()

    def enqueue(self, fn, *args) -> None:
        self.queue.put((fn, args))

    def _run(self) -> None:
        while True:
            fn, args = self.queue.get()
            try:
                self._process(fn, args)
            except gevent.GreenletExit:
                raise
            except Exception:
                log.exception("controller event %s failed", fn.__name__)

    def _process(self, fn, args) -> None:
        """Run one event; like Kafka's retryRequestsUntilConnected, a lost connection retries the event once
        ZooKeeper is back, and a lost session resigns (the broker re-registers and re-elects)."""
        while True:
            try:
                fn(*args)
                return
            except ZkConnectionLoss:
                log.info("ZooKeeper connection lost during %s; retrying when reconnected", fn.__name__)
                generation = self.session_generation
                while not self.zk.connected and generation == self.session_generation:
                    gevent.sleep(0.1)
                if generation != self.session_generation:
                    return
            except ZkSessionExpired:
                self._resign()
                return
            except ControllerMovedError:
                log.info("controller moved away from broker %d: resigning", self.broker_id)
                self._resign()
                return
            except Exception:
                log.exception("controller event %s failed; moving the controller", fn.__name__)
                try:
                    self._trigger_controller_move()
                except Exception:
                    log.exception("could not delete /controller; resigning only")
                    self._resign()
                return

    # ---- watches (they only enqueue) ---------------------------------------------------------------------
    def _on_controller_znode(self, event):
        if event.type == "DELETED":
            self.enqueue(self._process_reelect)
        else:
            self.enqueue(self._process_controller_change)

    def _on_brokers(self, _event):
        self.enqueue(self._process_broker_change)

    def _on_topics(self, _event):
        self.enqueue(self._process_topic_change)

    def _on_topic(self, event):
        topic = event.path.rsplit("/", 1)[-1]
        self.enqueue(self._process_partition_modifications, topic)

    def _on_deletions(self, _event):
        self.enqueue(self._process_topic_deletion)

    def _on_isr_changes(self, _event):
        self.enqueue(self._process_isr_change_notification)

    # ---- election ----------------------------------------------------------------------------------------
    def _process_startup(self):
        self.zk.watch_controller(self._on_controller_znode)
        self._elect()

    def _process_controller_change(self):
        self.zk.watch_controller(self._on_controller_znode)
        self._maybe_resign()

    def _process_reelect(self):
        self.zk.watch_controller(self._on_controller_znode)
        self._maybe_resign()
        self._elect()

    def session_expired(self):
        """The broker lost its ZooKeeper session: drop queued events and resign (Kafka's clearAndPut(Expire)).
        An event waiting for the connection gives up, since what it read belongs to the old session."""
        self.session_generation += 1
        while not self.queue.empty():
            self.queue.get_nowait()
        self.enqueue(self._resign)

    def session_renewed(self):
        """After the broker re-registered in a new session: watch and elect again."""
        self.enqueue(self._process_reelect)

    def _elect(self):
        current = self.zk.get_controller_id()
        if current == self.broker_id and not self.active:
            stat = self.zk.exists(z.ControllerZNode.path)
            if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                # Our own election in this session whose failover was interrupted: finish it.
                self.ctx.epoch, self.ctx.epoch_zk_version = self.zk.get_controller_epoch()
                self._on_controller_failover()
            return
        if current is not None:
            return
        try:
            epoch, version = self.zk.register_controller_and_increment_epoch(self.broker_id)
        except ControllerMovedError:
            log.info("broker %d lost the controller election to broker %s", self.broker_id,
                     self.zk.get_controller_id())
            self._maybe_resign()
            return
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, version
        state_change.info("broker %d elected controller, epoch %d (zkVersion %d)", self.broker_id, epoch, version)
        self._on_controller_failover()

    def _maybe_resign(self):
        if self.active and self.zk.get_controller_id() != self.broker_id:
            self._resign()

    def _resign(self):
        if not self.active:
            return
        state_change.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.ctx.epoch)
        self.active = False
        for task in self.active_tasks:
            task.kill(block=False)
        self.active_tasks = []
        if self.channels is not None:
            self.channels.shutdown()
            self.channels = None
        self.ctx.clear()

    def _trigger_controller_move(self):
        if self.active:
            version = self.ctx.epoch_zk_version
            self._resign()
            self.zk.delete_controller_fenced(version)

    # ---- failover ----------------------------------------------------------------------------------------
    def _on_controller_failover(self):
        ctx = self.ctx
        self.active = True
        self.channels = ControllerChannelManager(self.broker_id, ctx.inter_broker_listener,
                                                 self.config["controller.socket.timeout.ms"])
        self._write_feature_znode()
        # Notifications from before this controller are stale: the full context read below covers them.
        self.zk.delete_isr_change_notifications_fenced(self.zk.get_isr_change_notifications(watch=self._on_isr_changes),
                                                       ctx.epoch_zk_version)
        # Watch before reading, so a broker registering meanwhile still triggers a BrokerChange.
        self.zk.get_broker_ids(watch=self._on_brokers)
        for b in self.zk.get_all_brokers().values():
            self._add_live_broker(b)
        loaded = {}
        for topic in self.zk.get_all_topics(watch=self._on_topics):
            self._load_topic(topic, loaded)
        for tp, state in self.zk.get_partition_states(ctx.assignments).items():
            if state is not None:
                ctx.partition_states[tp] = state
        gc.freeze()   # the context just read lives as long as this controller: out of the collector's full passes
        batch = RequestBatch(ctx)
        batch.add_update_metadata(ctx.live_brokers, None)
        # Replica state machine startup: every live replica learns its partitions' leadership.
        for tp, replicas in ctx.assignments.items():
            if tp in ctx.partition_states:
                batch.add_leader_and_isr(replicas, tp)
        offline = [tp for tp in ctx.assignments if self._needs_leader(tp)]
        self._elect_partitions(batch, offline)
        self._remove_offline_replicas_from_isr(batch, set(offline))
        batch.send(self.channels, self._on_stop_replica_response)
        self._process_topic_deletion()
        self._resume_reassignments({t: a for t, a in sorted(loaded.items()) if t in ctx.topic_ids})
        self._process_preferred_election_znode()
        if self.config["auto.leader.rebalance.enable"]:
            self.active_tasks.append(gevent.spawn(self._auto_rebalance_loop))
        log.info("controller %d ready: %d live brokers, %d topics, %d partitions", self.broker_id,
                 len(ctx.live_brokers), len(ctx.topics()), len(ctx.assignments))

    def _write_feature_znode(self):
        if self.zk.exists(z.FeatureZNode.path) is None:
            try:
                self.zk.fenced(self.ctx.epoch_zk_version,
                               lambda t: self.zk._create_op(t, z.FeatureZNode.path, z.FeatureZNode.encode()))
            except ControllerMovedError:
                raise
            except Exception:
                pass  # created concurrently

    def _fenced_delete(self, path):
        try:
            self.zk.fenced(self.ctx.epoch_zk_version, lambda t: t.delete(path))
        except ControllerMovedError:
            raise
        except Exception:
            pass

    def _add_live_broker(self, info):
        self.ctx.live_brokers[info.id] = info
        self.channels.add_broker(info)

    def _load_topic(self, topic: str, loaded: dict | None = None) -> list[tuple[str, int]]:
        """Read a topic's assignment (and watch it); backfill its topic id. Returns partitions new to us; the
        assignment read goes into `loaded` if given."""
        ctx = self.ctx
        assignment = self.zk.get_topic_assignment(topic, watch=self._on_topic)
        if assignment is None:
            return []
        if loaded is not None:
            loaded[topic] = assignment
        if assignment.topic_id is None:
            assignment.topic_id = z.new_base64_uuid()
            self.zk.set_topic_assignment_fenced(topic, assignment, ctx.epoch_zk_version)
            state_change.info("assigned topic id %s to topic %s", assignment.topic_id, topic)
        ctx.topic_ids[topic] = assignment.topic_id
        new = []
        for p, replicas in assignment.partitions.items():
            tp = (topic, p)
            if tp not in ctx.assignments:
                new.append(tp)
            ctx.assignments[tp] = list(replicas)
        return sorted(new)

    # ---- partition state machine -------------------------------------------------------------------------
    def _needs_leader(self, tp) -> bool:
        state = self.ctx.partition_states.get(tp)
        return state is None or state.leader not in self.ctx.live_brokers

    def _elect_partitions(self, batch: RequestBatch, partitions) -> None:
        """New partitions get their first leader; offline ones a leader from the live ISR. All state znode
        writes of one call go to ZooKeeper pipelined."""
        ctx = self.ctx
        live = ctx.eligible_leaders()
        unclean: dict[str, bool] = {}
        created, computes, outcomes = {}, {}, {}
        for tp in partitions:
            if tp[0] in ctx.topics_to_delete:
                continue
            replicas = ctx.assignments[tp]
            if tp not in ctx.partition_states:
                chosen = election.new_partition_leader(replicas, live)
                if chosen is None:
                    state_change.warning("partition %s-%d: no live replica among %s; it stays new", *tp, replicas)
                    continue
                created[tp] = z.LeaderAndIsr(chosen[0], 0, chosen[1], ctx.epoch)
                continue
            if tp[0] not in unclean:
                unclean[tp[0]] = self._unclean_election_enabled(tp[0])
            outcome = outcomes[tp] = {}

            def elect(current, replicas=replicas, allow_unclean=unclean[tp[0]], outcome=outcome):
                if current.leader in live:
                    # A leader's ISR write raced us and that leader is alive: nothing to elect.
                    outcome["chosen"] = (current.leader, current.isr, False)
                    return None
                chosen = election.offline_partition_leader(replicas, current.isr, live, allow_unclean)
                outcome["chosen"] = chosen
                if chosen is None:
                    return None if current.leader == election.NO_LEADER else (election.NO_LEADER, current.isr)
                return chosen[0], chosen[1]
            computes[tp] = elect
        if created:
            self.zk.create_partition_states_fenced(created, ctx.epoch_zk_version)
            for tp, state in sorted(created.items()):
                ctx.partition_states[tp] = state
                state_change.info("partition %s-%d: online with leader %d, isr %s (new partition)", *tp,
                                  state.leader, state.isr)
                batch.add_leader_and_isr(ctx.assignments[tp], tp, is_new=True)
        self._write_states(computes)
        for tp, outcome in outcomes.items():
            chosen = outcome.get("chosen")
            if chosen is None:
                state_change.warning("partition %s-%d: no live in-sync replica among isr %s; it stays offline",
                                     *tp, ctx.partition_states[tp].isr)
                batch.add_update_metadata(ctx.live_brokers, [tp])
                continue
            leader, _, was_unclean = chosen
            new = ctx.partition_states[tp]
            if was_unclean:
                state_change.warning("partition %s-%d: UNCLEAN leader election: %d becomes leader although it was "
                                     "not in the ISR; records it did not have are lost", *tp, leader)
            state_change.info("partition %s-%d: new leader %d (epoch %d), isr %s%s", *tp, new.leader,
                              new.leader_epoch, new.isr, " (unclean election)" if was_unclean else "")
            batch.add_leader_and_isr(ctx.assignments[tp], tp)
        batch.add_update_metadata(ctx.live_brokers, [])

    def _unclean_election_enabled(self, topic: str) -> bool:
        value = self.zk.get_entity_config("topics", topic).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config["unclean.leader.election.enable"])
        return value.lower() == "true"

    def _write_states(self, computes: dict) -> dict:
        """For each partition, write compute(current state) -> (leader, isr) with the leader epoch bumped (fenced,
        expected version = partition epoch), all pipelined. On a version conflict (a leader changed its ISR
        meanwhile) re-read and recompute, as Kafka's partition state machine retries. Partitions whose compute
        declines (returns None) are left out of the result {tp: new state}."""
        ctx = self.ctx
        written = {}
        # Decide on what ZooKeeper holds now (leaders change ISRs behind the controller's back), as Kafka's
        # elections read the partition states first.
        for tp, fresh in self.zk.get_partition_states(computes).items():
            if fresh is not None:
                ctx.partition_states[tp] = fresh
        pending = {tp: c for tp, c in computes.items() if tp in ctx.partition_states}
        while pending:
            proposals = {}
            for tp, compute in pending.items():
                current = ctx.partition_states[tp]
                decided = compute(current)
                if decided is not None:
                    proposals[tp] = z.LeaderAndIsr(decided[0], current.leader_epoch + 1, list(decided[1]), ctx.epoch,
                                                   current.zk_version)
            versions = self.zk.update_partition_states_fenced(proposals, ctx.epoch_zk_version) if proposals else {}
            conflicts = []
            for tp, version in versions.items():
                if version is None:
                    conflicts.append(tp)
                    continue
                proposals[tp].zk_version = version
                ctx.partition_states[tp] = written[tp] = proposals[tp]
            pending = {}
            for tp, fresh in self.zk.get_partition_states(conflicts).items():
                if fresh is not None:
                    ctx.partition_states[tp] = fresh
                    pending[tp] = computes[tp]
        return written

    def _write_state(self, tp, compute) -> z.LeaderAndIsr | None:
        return self._write_states({tp: compute}).get(tp)

    def unclean_leader_election_enabled(self, topic: str | None = None) -> None:
        """unclean.leader.election.enable was turned on dynamically for a topic (or as the broker default, None):
        offline partitions get a leader now rather than at the next broker change (Kafka's
        enableTopicUncleanLeaderElection / enableDefaultUncleanLeaderElection)."""
        self.enqueue(self._process_unclean_enabled, topic)

    def _process_unclean_enabled(self, topic: str | None):
        if not self.active:
            return
        offline = [tp for tp in self.ctx.assignments if (topic is None or tp[0] == topic) and self._needs_leader(tp)]
        if offline:
            batch = RequestBatch(self.ctx)
            self._elect_partitions(batch, offline)
            batch.send(self.channels, self._on_stop_replica_response)

    # ---- brokers -----------------------------------------------------------------------------------------
    def _process_broker_change(self):
        if not self.active:
            return
        ctx = self.ctx
        ids = set(self.zk.get_broker_ids(watch=self._on_brokers))
        current = {}
        for bid in ids:
            info = self.zk.get_broker(bid)
            if info is not None:
                current[bid] = info
        dead = [b for b in ctx.live_brokers if b not in current]
        new = [b for b in current if b not in ctx.live_brokers]
        bounced = [b for b in current if b in ctx.live_brokers and current[b].epoch > ctx.live_brokers[b].epoch]
        if not (dead or new or bounced):
            return
        state_change.info("broker change: new %s, dead %s, bounced %s", sorted(new), sorted(dead), sorted(bounced))
        if dead or bounced:
            self._on_broker_failure(sorted(dead + bounced))
        if new or bounced:
            for b in sorted(new + bounced):
                self._add_live_broker(current[b])
            self._on_broker_startup(sorted(new + bounced))

    def _on_broker_failure(self, dead: list[int]) -> None:
        ctx = self.ctx
        for b in dead:
            ctx.live_brokers.pop(b, None)
            ctx.shutting_down.discard(b)
            self.channels.remove_broker(b)
        dead_set = set(dead)
        batch = RequestBatch(ctx)
        # 1. Partitions they led elect a new leader from the live ISR.
        led = [tp for tp, s in ctx.partition_states.items() if s.leader in dead_set]
        self._elect_partitions(batch, led)
        # 2. Their replicas leave the ISR of the partitions they followed.
        self._remove_offline_replicas_from_isr(batch, set(led))
        batch.add_update_metadata(ctx.live_brokers, [])
        batch.send(self.channels, self._on_stop_replica_response)

    def _remove_offline_replicas_from_isr(self, batch: RequestBatch, skip: set) -> None:
        """Replicas on brokers that are not live leave the ISR (OfflineReplica), except the last member."""
        ctx = self.ctx

        def shrink(current):
            leader, isr = current.leader, current.isr
            for r in [r for r in current.isr if r not in ctx.live_brokers]:
                leader, isr = election.remove_replica_from_isr(leader, isr, r)
            return None if (leader, isr) == (current.leader, current.isr) else (leader, isr)
        affected = [tp for tp, state in ctx.partition_states.items()
                    if tp not in skip and tp[0] not in ctx.topics_being_deleted
                    and any(r not in ctx.live_brokers for r in state.isr)]
        for tp, new in sorted(self._write_states({tp: shrink for tp in affected}).items()):
            state_change.info("partition %s-%d: isr %s after its offline replicas left it", *tp, new.isr)
            batch.add_leader_and_isr(ctx.assignments[tp], tp)

    def _on_broker_startup(self, new: list[int]) -> None:
        ctx = self.ctx
        batch = RequestBatch(ctx)
        new_set = set(new)
        batch.add_update_metadata([b for b in ctx.live_brokers if b not in new_set], [])
        batch.add_update_metadata(new, None)
        for tp, replicas in ctx.assignments.items():
            if tp in ctx.partition_states and new_set.intersection(replicas):
                batch.add_leader_and_isr([r for r in replicas if r in new_set], tp)
        self._elect_partitions(batch, [tp for tp in ctx.assignments if self._needs_leader(tp)])
        batch.send(self.channels, self._on_stop_replica_response)
        self._resume_topic_deletion()

    # ---- topics ------------------------------------------------------------------------------------------
    def _process_topic_change(self):
        if not self.active:
            return
        ctx = self.ctx
        topics = set(self.zk.get_all_topics(watch=self._on_topics))
        for gone in ctx.topics() - topics:
            self._forget_topic(gone)
        new_partitions = []
        for topic in sorted(topics - ctx.topics()):
            new_partitions += self._load_topic(topic)
        if new_partitions:
            self._on_new_partitions(new_partitions)

    def _process_partition_modifications(self, topic: str):
        if not self.active or topic in self.ctx.topics_to_delete:
            return
        new = self._load_topic(topic)
        if new:
            self._on_new_partitions(new)

    def _on_new_partitions(self, partitions):
        state_change.info("new partitions %s", ", ".join(f"{t}-{p}" for t, p in partitions))
        batch = RequestBatch(self.ctx)
        self._elect_partitions(batch, partitions)
        batch.send(self.channels, self._on_stop_replica_response)

    def _forget_topic(self, topic: str):
        ctx = self.ctx
        for tp in ctx.partitions_of(topic):
            ctx.assignments.pop(tp, None)
            ctx.partition_states.pop(tp, None)
        ctx.topic_ids.pop(topic, None)
        for tp in [tp for tp in ctx.reassignments if tp[0] == topic]:
            del ctx.reassignments[tp]
            ctx.znode_reassignments.discard(tp)
        ctx.topics_to_delete.discard(topic)
        ctx.topics_being_deleted.discard(topic)
        ctx.pending_deletion_replicas.pop(topic, None)

    # ---- ISR changes made by leaders ---------------------------------------------------------------------
    def _process_isr_change_notification(self):
        """Leaders changed ISRs in the state znodes: refresh those states, tell every broker, drop the
        notifications (Kafka's IsrChangeNotification handling)."""
        if not self.active:
            return
        ctx = self.ctx
        names = self.zk.get_isr_change_notifications(watch=self._on_isr_changes)
        changed = self.zk.read_isr_change_notifications(names)
        for tp, state in self.zk.get_partition_states([tp for tp in changed if tp in ctx.assignments]).items():
            if state is not None:
                ctx.partition_states[tp] = state
                state_change.info("partition %s-%d: leader %d changed the isr to %s (leader epoch %d)", *tp,
                                  state.leader, state.isr, state.leader_epoch)
        known = [tp for tp in changed if tp in ctx.partition_states]
        if known:
            batch = RequestBatch(ctx)
            batch.add_update_metadata(ctx.live_brokers, known)
            batch.send(self.channels, self._on_stop_replica_response)
            self._maybe_complete_reassignments(known)
        self.zk.delete_isr_change_notifications_fenced(names, ctx.epoch_zk_version)

    # ---- topic deletion ----------------------------------------------------------------------------------
    def _process_topic_deletion(self):
        if not self.active:
            return
        ctx = self.ctx
        marked = set(self.zk.get_topic_deletions(watch=self._on_deletions))
        unknown = marked - ctx.topics()
        if unknown:
            self.zk.delete_topic_deletion_markers_fenced(sorted(unknown), ctx.epoch_zk_version)
        marked -= unknown
        if not self.config["delete.topic.enable"]:
            if marked:
                log.info("delete.topic.enable is false: ignoring deletion of %s", sorted(marked))
                self.zk.delete_topic_deletion_markers_fenced(sorted(marked), ctx.epoch_zk_version)
            return
        ctx.topics_to_delete |= marked
        self._resume_topic_deletion()

    def _resume_topic_deletion(self):
        ctx = self.ctx
        for topic in sorted(ctx.topics_to_delete - ctx.topics_being_deleted):
            replicas = {(p, r) for (t, p) in ctx.partitions_of(topic) for r in ctx.assignments[(t, p)]}
            if any(r not in ctx.live_brokers for _, r in replicas):
                log.info("deletion of topic %s waits for its offline replicas", topic)
                continue
            state_change.info("deleting topic %s", topic)
            ctx.topics_being_deleted.add(topic)
            ctx.pending_deletion_replicas[topic] = set(replicas)
            batch = RequestBatch(ctx)
            # Brokers first learn the partitions are being deleted (leader -2), then replicas are stopped.
            batch.add_update_metadata(ctx.live_brokers, ctx.partitions_of(topic))
            for tp in ctx.partitions_of(topic):
                batch.add_stop_replica(ctx.assignments[tp], tp, delete=True)
            batch.send(self.channels, self._on_stop_replica_response)
            if not replicas:
                self._complete_topic_deletion(topic)

    def _on_stop_replica_response(self, broker_id, response):
        self.enqueue(self._process_stop_replica_response, broker_id, response)

    def _process_stop_replica_response(self, broker_id, response):
        ctx = self.ctx
        if not self.active or response.error_code:
            return
        for e in response.partition_errors:
            pending = ctx.pending_deletion_replicas.get(e.topic_name)
            if pending is not None and not e.error_code:
                pending.discard((e.partition_index, broker_id))
        for topic, pending in list(ctx.pending_deletion_replicas.items()):
            if not pending and topic in ctx.topics_being_deleted:
                self._complete_topic_deletion(topic)

    def _complete_topic_deletion(self, topic: str):
        ctx = self.ctx
        self.zk.delete_topic_fenced(topic, ctx.epoch_zk_version)
        self._forget_topic(topic)
        state_change.info("deletion of topic %s completed", topic)
