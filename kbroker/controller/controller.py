"""KafkaController: runs on every broker; the one elected through ZooKeeper manages partition leadership.

One event queue drained by one greenlet (Kafka's ControllerEventManager): ZooKeeper watches and broker
responses only enqueue events, all state changes happen here, in order, without locks. The class is the event
loop and the event handlers; what they change lives in the ControllerContext (context.py), and they change
it through the partition and replica state machines, the topic deletion manager and the reassignments, each
built once with its collaborators (context, ZooKeeper writer, the one RequestBatch).

Election: an exists watch on /controller; when it is absent, one multi creates the ephemeral /controller and
bumps /controller_epoch with a version check (zk.client.register_controller_and_increment_epoch). Every
later write is fenced by the /controller_epoch zkVersion; a failed fence makes the controller resign.

As active controller it watches /brokers/ids, /brokers/topics (and each topic), /admin/delete_topics, and
reacts as Kafka 2.8 does: new partitions get a leader and ISR written to their state znode and pushed with
LeaderAndIsr + UpdateMetadata; a dead broker's partitions get new leaders from the live ISR (leader_epoch + 1),
its replicas leave the ISR of the partitions it followed; topic deletion stops and deletes the replicas, then
removes the topic's znodes. It also moves leadership on purpose:
- controlled shutdown (ControlledShutdown request): partitions the broker leads get a new leader from the
  live ISR other than it; it leaves the ISR of partitions it follows (and stops fetching them); the answer
  lists the replicated partitions it still leads (a single replica cannot move, and does not count, as in
  Kafka). Until it is gone, the broker is never chosen as a leader;
- preferred election (/admin/preferred_replica_election, ElectLeaders type 0, auto.leader.rebalance.enable):
  the first assigned replica leads again if it is live and in the ISR;
- unclean election (ElectLeaders type 1): a partition without a leader takes the first live assigned
  replica, in sync or not.

Log dir failures (Kafka's LogDirEventNotification): a broker whose log dir failed writes
/log_dir_event_notification/log_dir_event_<seq>; the controller (watching its children) sends that broker
LeaderAndIsr for all its replicas and deletes the notifications. The broker answers KAFKA_STORAGE_ERROR for the
replicas in offline dirs; from that answer (as from any LeaderAndIsr response) the controller marks them offline
(ControllerContext.replicas_on_offline_dirs): the partitions they led elect a new leader among the other online
in-sync replicas, they leave the ISRs, and UpdateMetadata lists them as offline replicas.

Metrics (Kafka's ControllerEventManager and ControllerStats): each event has Kafka's ControllerState (EVENT_STATES),
the `state` while it runs; its time is observed in its state's timer (a broker change's is
LeaderElectionRateAndTimeMs), and its wait in the queue in event_queue_time.
"""
from __future__ import annotations

import logging
import time

import gevent
import gevent.event
from gevent.queue import Queue

from zk import znodes as z
from zk.client import ControllerMovedError, KafkaZkClient, ZkSessionExpired
from .. import collector
from ..metadata_cache import uuid_to_topic_id
from ..metrics import CONTROLLER_STATE_TIMERS, Histogram, remote_wait
from ..protocol.errors import Errors
from .channel import ControllerChannelManager, RequestBatch
from .context import ControllerContext, ReplicaState
from .partition_state_machine import (ControlledShutdownElection, OfflineElection, PartitionStateMachine,
                                      PreferredElection)
from .partition_state_writer import PartitionStateWriter
from .reassignment import Reassignments
from .replica_state_machine import ReplicaStateMachine
from .topic_deletion import TopicDeletionManager

log = logging.getLogger("kbroker.controller")
state_change = logging.getLogger("state-change")

PREFERRED, UNCLEAN = 0, 1
# Kafka's ControllerState of each event, by the qualified name of the function the event runs (_process_ask's: of
# the function it runs; _process_unclean_enabled's: the topic one when it names a topic)
EVENT_STATES = {
    "KafkaController._process_startup": "ControllerChange", "KafkaController._process_controller_change":
    "ControllerChange", "KafkaController._process_reelect": "ControllerChange", "KafkaController._resign":
    "ControllerChange", "KafkaController._process_broker_change": "BrokerChange",
    "KafkaController._process_topic_change": "TopicChange", "KafkaController._process_rewatch_topics": "TopicChange",
    "KafkaController._process_partition_modifications": "TopicChange",
    "KafkaController._process_topic_deletion": "TopicDeletion",
    "KafkaController._process_stop_replica_response": "TopicDeletion",
    "KafkaController._process_isr_change_notification": "IsrChange",
    "KafkaController._process_reassign_znode": "AlterPartitionReassignment",
    "Reassignments.start": "AlterPartitionReassignment", "Reassignments.list": "ListPartitionReassignment",
    "KafkaController._process_preferred_election_znode": "ManualLeaderBalance",
    "KafkaController._elect_leaders_now": "ManualLeaderBalance",
    "KafkaController._process_leader_and_isr_response": "LeaderAndIsrResponseReceived",
    "KafkaController._process_log_dir_event_notification": "LogDirChange",
    "KafkaController._process_controlled_shutdown": "ControlledShutdown",
    "KafkaController._check_leader_imbalance": "AutoLeaderBalance",
    "KafkaController._process_unclean_enabled": "UncleanLeaderElectionEnable",
}


def event_state(fn, args) -> str:
    """Kafka's ControllerState of an event (fn(*args) on the controller's queue)."""
    if fn.__name__ == "_process_ask":
        fn = args[0]
    elif fn.__name__ == "_process_unclean_enabled" and args[0] is not None:
        return "TopicUncleanLeaderElectionEnable"
    return EVENT_STATES[fn.__qualname__]


class KafkaController:
    def __init__(self, broker_id: int, zk: KafkaZkClient, config, inter_broker_listener: str):
        self.broker_id = broker_id
        self.zk = zk
        self.config = config
        self.ctx = ControllerContext(broker_id, inter_broker_listener)
        # KIP-291: LeaderAndIsr, UpdateMetadata and StopReplica go to each broker's control-plane endpoint when
        # control.plane.listener.name is set
        self.channels = ControllerChannelManager(broker_id, *config.controller_listener,
                                                 timeout_ms=config["controller.socket.timeout.ms"])
        self.batch = RequestBatch(self.ctx, self.channels, self._on_stop_replica_response,
                                  self._on_leader_and_isr_response)
        self.writer = writer = PartitionStateWriter(self.ctx, zk)
        self.partitions = PartitionStateMachine(self.ctx, writer, self.batch, self._unclean_election_enabled)
        self.replicas = ReplicaStateMachine(self.ctx, writer, self.batch)
        self.topic_deletion = TopicDeletionManager(self.ctx, zk, self.replicas, self.batch,
                                                   bool(config["delete.topic.enable"]))
        self.reassignments = Reassignments(self.ctx, zk, self.partitions, self.replicas, self.batch)
        self.active = False
        self.queue: Queue = Queue()
        self.worker = None
        self._rewatch_topics_queued = False
        self.active_tasks: list = []   # greenlets that run only while this broker is controller
        self.state = "Idle"            # Kafka's ControllerState of the event running
        self.event_times = {state: Histogram() for state in CONTROLLER_STATE_TIMERS}
        self.event_queue_time = Histogram()

    # ---- event loop --------------------------------------------------------------------------------------
    def startup(self) -> None:
        self.worker = gevent.spawn(self._run)
        self.enqueue(self._process_startup)

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.kill()
        self._resign()

    def enqueue(self, fn, *args) -> None:
        self.queue.put((fn, args, time.perf_counter()))

    def _run(self) -> None:
        while True:
            fn, args, enqueued = self.queue.get()
            started = time.perf_counter()
            self.event_queue_time.observe(started - enqueued)
            self.state = state = event_state(fn, args)
            try:
                self._process(fn, args)
            except gevent.GreenletExit:
                raise
            except Exception:
                log.exception("controller event %s failed", fn.__name__)
            finally:
                self.state = "Idle"
                self.event_times[state].observe(time.perf_counter() - started)

    def _process(self, fn, args) -> None:
        """Run one event. A lost connection is waited out inside the ZooKeeper client (Kafka's
        retryRequestsUntilConnected); a lost session resigns (the broker re-registers and re-elects). Requests a
        failed event left in the batch are dropped."""
        self.batch.clear()
        try:
            with collector.bulk():
                fn(*args)
        except ZkSessionExpired:
            self._resign()
        except ControllerMovedError:
            log.info("controller moved away from broker %d: resigning", self.broker_id)
            self._resign()
        except Exception:
            log.exception("controller event %s failed; moving the controller", fn.__name__)
            try:
                self._trigger_controller_move()
            except Exception:
                log.exception("could not delete /controller; resigning only")
                self._resign()

    # ---- watches and responses (they only enqueue) -------------------------------------------------------
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
        if event.path is None:
            # kazoo drops every watch when its connection drops, even if the session lives on, and calls each
            # with a pathless event (the Java client, Kafka's, keeps them): watch every topic again, once.
            if not self._rewatch_topics_queued:
                self._rewatch_topics_queued = True
                self.enqueue(self._process_rewatch_topics)
            return
        topic = event.path.rsplit("/", 1)[-1]
        self.enqueue(self._process_partition_modifications, topic)

    def _on_deletions(self, _event):
        self.enqueue(self._process_topic_deletion)

    def _on_isr_changes(self, _event):
        self.enqueue(self._process_isr_change_notification)

    def _on_reassign_znode(self, _event) -> None:
        self.enqueue(self._process_reassign_znode)

    def _on_preferred_election_znode(self, _event) -> None:
        self.enqueue(self._process_preferred_election_znode)

    def _on_stop_replica_response(self, broker_id, response):
        self.enqueue(self._process_stop_replica_response, broker_id, response)

    def _on_leader_and_isr_response(self, broker_id, response):
        self.enqueue(self._process_leader_and_isr_response, broker_id, response)

    def _on_log_dir_events(self, _event):
        self.enqueue(self._process_log_dir_event_notification)

    # ---- requests from the broker's API handlers (answered by an event on the controller's thread) ----------
    def controlled_shutdown(self, broker_id: int, broker_epoch: int, result) -> None:
        """Handle a ControlledShutdown request; sets result to (error, remaining partitions)."""
        self.enqueue(self._process_controlled_shutdown, broker_id, broker_epoch, result)

    def elect_leaders(self, election_type: int, partitions) -> dict | None:
        """ElectLeaders: partitions None means all; {tp: (error, message)}, None when not the active controller."""
        return self._ask(self._elect_leaders_now, election_type, partitions)

    def alter_reassignments(self, plan: dict) -> dict | None:
        """AlterPartitionReassignments: plan {tp: replicas or None (cancel)}; {tp: (error, message)}, None when
        not the active controller."""
        return self._ask(self.reassignments.start, plan, False)

    def list_reassignments(self, partitions) -> dict | None:
        """ListPartitionReassignments: partitions None means all; {tp: (replicas, adding, removing)}, None when
        not the active controller."""
        return self._ask(self.reassignments.list, partitions)

    def _ask(self, fn, *args):
        """What fn(*args) returns, run as an event on the controller's thread while the calling handler waits;
        None when this broker is not the active controller (when asked, or when the event runs)."""
        if not self.active:
            return None
        result = gevent.event.AsyncResult()
        self.enqueue(self._process_ask, fn, args, result)
        remote_wait(result)
        return result.get()

    def _process_ask(self, fn, args, result) -> None:
        try:
            result.set(fn(*args) if self.active else None)
        except Exception as e:
            result.set_exception(e)   # the waiting handler fails (UNKNOWN_SERVER_ERROR) instead of hanging
            raise

    def unclean_leader_election_enabled(self, topic: str | None = None) -> None:
        """unclean.leader.election.enable was turned on dynamically for a topic (or as the broker default, None):
        offline partitions get a leader now rather than at the next broker change (Kafka's
        enableTopicUncleanLeaderElection / enableDefaultUncleanLeaderElection)."""
        self.enqueue(self._process_unclean_enabled, topic)

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
        An event waiting for the connection gets ZkSessionExpired from the client, since what it read belongs to
        the old session."""
        while not self.queue.empty():
            self.queue.get_nowait()
        self._rewatch_topics_queued = False   # dropped with the queue (a new election reads every topic anyway)
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
        self.channels.shutdown()
        self.batch.clear()
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
        self._write_feature_znode()
        # Notifications from before this controller are stale: the full context read below covers them.
        self.zk.delete_isr_change_notifications_fenced(self.zk.get_isr_change_notifications(watch=self._on_isr_changes),
                                                       ctx.epoch_zk_version)
        self.zk.delete_log_dir_event_notifications_fenced(
            self.zk.get_log_dir_event_notifications(watch=self._on_log_dir_events), ctx.epoch_zk_version)
        # Watch before reading, so a broker registering meanwhile still triggers a BrokerChange.
        self.zk.get_broker_ids(watch=self._on_brokers)
        for b in self.zk.get_all_brokers().values():
            self._add_live_broker(b)
        loaded = {}
        for topic, assignment in self.zk.get_topic_assignments(self.zk.get_all_topics(watch=self._on_topics),
                                                               self._on_topic).items():
            self._load_topic(topic, assignment, loaded)
        for tp, state in self.zk.get_partition_states(ctx.assignments).items():
            if state is not None:
                ctx.partition_states[tp] = state
        self.batch.add_update_metadata(ctx.live_brokers, None)
        # Replica state machine startup: every live replica learns its partitions' leadership; then the
        # partition state machine's: new and offline partitions get leaders; then offline replicas leave ISRs.
        self.replicas.handle_state_changes(
            [(*tp, r) for tp, replicas in ctx.assignments.items() if tp in ctx.partition_states
             for r in replicas if r in ctx.live_brokers], ReplicaState.ONLINE)
        offline = {tp for tp in ctx.assignments if self._needs_leader(tp)}
        self._elect_and_take_offline(self.partitions.needing_election(offline), OfflineElection(),
                                     self._offline_replicas(skip=offline))
        self.batch.send()
        self._process_topic_deletion()
        self.reassignments.resume({t: a for t, a in sorted(loaded.items()) if t in ctx.topic_ids},
                                  self._on_reassign_znode)
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

    def _load_topic(self, topic: str, assignment, loaded: dict | None = None) -> list[tuple[str, int]]:
        """Take in a topic's assignment as read (and watched); backfill its topic id. Returns partitions new to
        us; the assignment goes into `loaded` if given."""
        ctx = self.ctx
        if assignment is None:
            return []
        if loaded is not None:
            loaded[topic] = assignment
        if assignment.topic_id is None:
            assignment.topic_id = z.new_base64_uuid()
            self.zk.set_topic_assignment_fenced(topic, assignment, ctx.epoch_zk_version)
            state_change.info("assigned topic id %s to topic %s", assignment.topic_id, topic)
        ctx.set_topic_id(topic, assignment.topic_id)
        new = []
        for p, replicas in assignment.partitions.items():
            tp = (topic, p)
            if tp not in ctx.assignments:
                new.append(tp)
            ctx.assignments[tp] = list(replicas)
        return sorted(new)

    def _needs_leader(self, tp) -> bool:
        state = self.ctx.partition_states.get(tp)
        return state is None or not self.ctx.is_replica_online(state.leader, tp)

    def _unclean_election_enabled(self, topic: str) -> bool:
        value = self.zk.get_entity_config("topics", topic).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config["unclean.leader.election.enable"])
        return value.lower() == "true"

    def _offline_replicas(self, skip: set) -> list:
        """Replicas on brokers that are not live and still in an ISR, except in the partitions in skip and those
        of topics being deleted: they go Offline (leave the ISR)."""
        ctx = self.ctx
        live = ctx.live_brokers
        return [(*tp, r) for tp, state in ctx.partition_states.items()
                if tp not in skip and tp[0] not in ctx.topics_being_deleted for r in state.isr if r not in live]

    def _elect_and_take_offline(self, partitions, strategy, offline_replicas) -> dict:
        """Elect leaders for the partitions and take the replicas (of other partitions) offline, the state znode
        writes of both in one pipelined round (as Kafka, elections first: the writes go in that order); the
        elections' results."""
        decisions, finish = self.partitions.prepare(partitions, strategy)
        leaving, finish_leaving = self.replicas.prepare_offline(offline_replicas)
        written = self.writer.update({**decisions, **leaving}) if decisions or leaving else {}
        results = finish(written)
        finish_leaving(written)
        return results

    def _process_unclean_enabled(self, topic: str | None):
        if not self.active:
            return
        offline = [tp for tp in self.ctx.assignments if (topic is None or tp[0] == topic) and self._needs_leader(tp)]
        if offline:
            self.partitions.trigger_online_state_change(offline)
            self.batch.send()

    # ---- brokers -----------------------------------------------------------------------------------------
    def _process_broker_change(self):
        if not self.active:
            return
        ctx = self.ctx
        current = self.zk.get_brokers(self.zk.get_broker_ids(watch=self._on_brokers))
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
        """The partitions they led go Offline and elect a new leader from the live ISR; their replicas go
        Offline (they leave the ISR of the partitions they followed)."""
        ctx = self.ctx
        for b in dead:
            ctx.live_brokers.pop(b, None)
            ctx.shutting_down.discard(b)
            ctx.replicas_on_offline_dirs.pop(b, None)
            self.channels.remove_broker(b)
        dead_set = set(dead)
        led = {tp for tp, s in ctx.partition_states.items() if s.leader in dead_set}
        self._elect_and_take_offline(self.partitions.needing_election(led), OfflineElection(),
                                     self._offline_replicas(skip=led))
        self.batch.add_update_metadata(ctx.live_brokers, [])
        self.batch.send()

    def _on_broker_startup(self, new: list[int]) -> None:
        """Every broker learns of the new ones, which get every partition's metadata; their replicas go
        Online (except those of topics being deleted, which the deletion handles), then new and offline
        partitions elect leaders."""
        ctx = self.ctx
        new_set = set(new)
        self.batch.add_update_metadata([b for b in ctx.live_brokers if b not in new_set], [])
        self.batch.add_update_metadata(new, None)
        self.replicas.handle_state_changes(
            [(*tp, r) for tp, replicas in ctx.assignments.items()
             if tp in ctx.partition_states and tp[0] not in ctx.topics_being_deleted
             for r in replicas if r in new_set], ReplicaState.ONLINE)
        self.partitions.trigger_online_state_change()
        self.batch.send()
        self.topic_deletion.resume(new_set)

    # ---- topics ------------------------------------------------------------------------------------------
    def _process_topic_change(self):
        if not self.active:
            return
        ctx = self.ctx
        topics = set(self.zk.get_all_topics(watch=self._on_topics))
        for gone in ctx.topics() - topics:
            ctx.forget_topic(gone)
        new_partitions = []
        for topic, assignment in sorted(self.zk.get_topic_assignments(topics - ctx.topics(), self._on_topic).items()):
            new_partitions += self._load_topic(topic, assignment)
        if new_partitions:
            self._on_new_partitions(new_partitions)

    def _process_partition_modifications(self, topic: str):
        if not self.active or topic in self.ctx.topics_to_delete:
            return
        new = self._load_topic(topic, self.zk.get_topic_assignment(topic, watch=self._on_topic))
        if new:
            self._on_new_partitions(new)

    def _process_rewatch_topics(self):
        """Read (and watch) every topic's assignment again, handling partitions added meanwhile."""
        self._rewatch_topics_queued = False
        for topic in sorted(self.ctx.topics()):
            self._process_partition_modifications(topic)

    def _on_new_partitions(self, partitions):
        state_change.info("new partitions %s", ", ".join(f"{t}-{p}" for t, p in partitions))
        self.partitions.trigger_online_state_change(partitions)
        self.batch.send()

    # ---- ISR changes made by leaders ---------------------------------------------------------------------
    def _process_isr_change_notification(self):
        """Leaders changed ISRs in the state znodes: refresh those states, tell every broker, drop the
        notifications (Kafka's IsrChangeNotification handling)."""
        if not self.active:
            return
        ctx = self.ctx
        names = self.zk.get_isr_change_notifications(watch=self._on_isr_changes)
        changed = self.zk.read_isr_change_notifications(names)
        refreshed = {tp: state for tp, state in self.zk.get_partition_states(
            [tp for tp in changed if tp in ctx.assignments]).items() if state is not None}
        ctx.partition_states.update(refreshed)
        if refreshed:
            state_change.info("%d partitions: their leaders changed the isr (leader, leader epoch, isr): %s",
                              len(refreshed), ", ".join(f"{t}-{p} {s.leader} {s.leader_epoch} {s.isr}"
                                                        for (t, p), s in sorted(refreshed.items())))
        known = [tp for tp in changed if tp in ctx.partition_states]
        if known:
            self.batch.add_update_metadata(ctx.live_brokers, known)
            self.batch.send()
            self.reassignments.maybe_complete(known)
        self.zk.delete_isr_change_notifications_fenced(names, ctx.epoch_zk_version)

    # ---- log dir failures --------------------------------------------------------------------------------
    def _process_log_dir_event_notification(self):
        """Brokers had log dirs fail: ask them about all their replicas (LeaderAndIsr; the answers say which are
        offline), then delete the notifications (Kafka's processLogDirEventNotification)."""
        if not self.active:
            return
        ctx = self.ctx
        names = self.zk.get_log_dir_event_notifications(watch=self._on_log_dir_events)
        if not names:
            return
        try:
            brokers = set(self.zk.read_log_dir_event_brokers(names))
            state_change.info("handling log directory failure for brokers %s", sorted(brokers))
            self.replicas.handle_state_changes(
                [(*tp, b) for tp, replicas in ctx.assignments.items() if tp in ctx.partition_states
                 for b in replicas if b in brokers and b in ctx.live_brokers], ReplicaState.ONLINE)
            self.batch.send()
        finally:
            self.zk.delete_log_dir_event_notifications_fenced(names, ctx.epoch_zk_version)

    def _process_leader_and_isr_response(self, broker_id: int, response):
        """KAFKA_STORAGE_ERROR marks the broker's replica offline, NONE online again (Kafka's
        processLeaderAndIsrResponseReceived); replicas newly offline are handled as such."""
        if not self.active or broker_id not in self.ctx.live_brokers:
            return
        ctx = self.ctx
        if response.error_code:
            state_change.error("LeaderAndIsr response from broker %d: %s", broker_id, Errors(response.error_code).name)
            return
        if response.version >= 5:
            errors = [((ctx.topic_names.get(uuid_to_topic_id(t.topic_id)), p.partition_index), p.error_code)
                      for t in response.topics for p in t.partition_errors]
        else:
            errors = [((p.topic_name, p.partition_index), p.error_code) for p in response.partition_errors]
        offline = {tp for tp, e in errors if e == Errors.KAFKA_STORAGE_ERROR and tp[0] is not None}
        online = {tp for tp, e in errors if e == Errors.NONE}
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        new = sorted(current - previous)
        if new:
            state_change.info("marking replicas %s on broker %d offline", ", ".join(f"{t}-{p}" for t, p in new),
                              broker_id)
            self._on_replicas_become_offline([(*tp, broker_id) for tp in new])

    def _on_replicas_become_offline(self, replicas) -> None:
        """Kafka's onReplicasBecomeOffline: partitions whose leader is no longer online elect another, then the
        replicas go Offline (leaving the ISRs); replicas of topics queued for deletion are left to it."""
        ctx = self.ctx
        self.partitions.trigger_online_state_change()
        self.replicas.handle_state_changes([r for r in replicas if r[0] not in ctx.topics_to_delete],
                                           ReplicaState.OFFLINE)
        self.batch.add_update_metadata(ctx.live_brokers, sorted({r[:2] for r in replicas}))
        self.batch.send()

    # ---- topic deletion ----------------------------------------------------------------------------------
    def _process_topic_deletion(self):
        if not self.active:
            return
        self.topic_deletion.mark(set(self.zk.get_topic_deletions(watch=self._on_deletions)))

    def _process_stop_replica_response(self, broker_id, response):
        if self.active:
            self.topic_deletion.on_stop_replica_response(broker_id, response)

    # ---- reassignments -----------------------------------------------------------------------------------
    def _process_reassign_znode(self) -> None:
        if self.active:
            self.reassignments.process_znode(self._on_reassign_znode)

    # ---- controlled shutdown -----------------------------------------------------------------------------
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
        # A partition with a single replica has nowhere to move: it is left alone and not reported.
        to_act_on = [tp for tp, replicas in ctx.assignments.items()
                     if broker_id in replicas and len(replicas) > 1 and tp in ctx.partition_states
                     and tp[0] not in ctx.topics_being_deleted]
        # Split before electing (Kafka's doControlledShutdown): a partition it led moves its leader and keeps
        # the broker as a follower; only the partitions it followed take its replica offline.
        led = [tp for tp in to_act_on if ctx.partition_states[tp].leader == broker_id]
        followed = [tp for tp in to_act_on if ctx.partition_states[tp].leader != broker_id]
        self._elect_and_take_offline(led, ControlledShutdownElection(), [(*tp, broker_id) for tp in followed])
        self.batch.add_update_metadata(ctx.live_brokers, [])
        self.batch.send()
        result.set((Errors.NONE, sorted(self._replicated_partitions_led_by(broker_id))))

    def _replicated_partitions_led_by(self, broker_id: int) -> list:
        """What a broker in controlled shutdown still leads (Kafka's replicatedPartitionsBrokerLeads)."""
        ctx = self.ctx
        return [tp for tp, s in ctx.partition_states.items() if s.leader == broker_id and len(ctx.assignments[tp]) > 1]

    # ---- preferred and unclean elections -----------------------------------------------------------------
    def _elect_leaders_now(self, election_type: int, partitions) -> dict:
        ctx = self.ctx
        wanted = sorted(ctx.assignments) if partitions is None else list(partitions)
        eligible = ctx.eligible_leaders()
        outcome, to_elect = {}, []
        for tp in wanted:
            replicas = ctx.assignments.get(tp)
            state = ctx.partition_states.get(tp)
            if tp[0] in ctx.topics_to_delete and replicas is not None:
                outcome[tp] = (Errors.INVALID_TOPIC, "The topic is being deleted")
            elif replicas is None or state is None:
                outcome[tp] = (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif state.leader == replicas[0] if election_type == PREFERRED else state.leader in eligible:
                outcome[tp] = (Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            else:
                to_elect.append(tp)
                outcome[tp] = None   # decided below, with every other write of this election
        strategy = PreferredElection() if election_type == PREFERRED else OfflineElection(allow_unclean=True)
        for tp, new in self.partitions.elect(to_elect, strategy).items():
            if new is None:
                error = Errors.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED \
                    else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
                outcome[tp] = (error, f"Failed to elect leader for partition {tp[0]}-{tp[1]}")
            else:
                outcome[tp] = (Errors.NONE, None)
        self.batch.send()
        return outcome

    def _process_preferred_election_znode(self) -> None:
        if not self.active:
            return
        data, stat = self.zk.get(z.PreferredReplicaElectionZNode.path, watch=self._on_preferred_election_znode)
        if stat is None:
            return
        partitions = z.PreferredReplicaElectionZNode.decode(data) if data else None
        self._elect_leaders_now(PREFERRED, partitions)
        self._fenced_delete(z.PreferredReplicaElectionZNode.path)

    # ---- auto rebalance ----------------------------------------------------------------------------------
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
