"""Topic deletion (Kafka's TopicDeletionManager), driven by /admin/delete_topics.

A marked topic is deleted once every replica's broker is live (until then its offline replicas are
ReplicaDeletionIneligible): brokers first learn its partitions are being deleted (UpdateMetadata with leader
-2), then every replica gets StopReplica with deletion (ReplicaDeletionStarted; sent again to a broker that
restarts before answering). When all replicas have answered (ReplicaDeletionSuccessful), the topic's znodes
and its marker are deleted (fenced) and it is forgotten. With delete.topic.enable=false, markers are removed and nothing is deleted.
"""
from __future__ import annotations

import logging

from zk.client import KafkaZkClient
from .channel import RequestBatch
from .context import ControllerContext, ReplicaState
from .replica_state_machine import ReplicaStateMachine

log = logging.getLogger("kbroker.controller")
state_change = logging.getLogger("state-change")


class TopicDeletionManager:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient, replicas: ReplicaStateMachine, batch: RequestBatch,
                 enabled: bool):
        self.ctx = ctx
        self.zk = zk
        self.replicas = replicas
        self.batch = batch
        self.enabled = enabled

    def mark(self, marked: set[str]) -> None:
        """The topics listed in /admin/delete_topics: queue them (markers of unknown topics are removed)."""
        ctx = self.ctx
        unknown = marked - ctx.topics()
        if unknown:
            self.zk.delete_topic_deletion_markers_fenced(sorted(unknown), ctx.epoch_zk_version)
        marked -= unknown
        if not self.enabled:
            if marked:
                log.info("delete.topic.enable is false: ignoring deletion of %s", sorted(marked))
                self.zk.delete_topic_deletion_markers_fenced(sorted(marked), ctx.epoch_zk_version)
            return
        ctx.topics_to_delete |= marked
        self.resume()

    def resume(self, restarted=()) -> None:
        """Start deleting the queued topics whose replicas are all on live brokers. Brokers that restarted
        lost the StopReplica requests their replicas were waiting on (their channels went): sent again."""
        ctx = self.ctx
        retry = sorted(r for r, s in ctx.replica_deletion_states.items()
                       if s is ReplicaState.DELETION_STARTED and r[2] in restarted)
        for t, p, b in retry:
            self.batch.add_stop_replica([b], (t, p), delete=True)
        if retry:
            state_change.info("retrying the deletion of %d replicas on restarted brokers %s", len(retry),
                              sorted(restarted))
            self.batch.send()
        for topic in sorted(ctx.topics_to_delete - ctx.topics_being_deleted):
            replicas = ctx.replicas_of(topic)
            offline = [r for r in replicas if not ctx.is_replica_online(r[2], r[:2])]   # dead or in a failed dir
            if offline:
                self.replicas.handle_state_changes(
                    [r for r in offline if ctx.replica_state(r) is not ReplicaState.DELETION_INELIGIBLE],
                    ReplicaState.DELETION_INELIGIBLE)
                log.info("deletion of topic %s waits for its offline replicas", topic)
                continue
            state_change.info("deleting topic %s", topic)
            ctx.topics_being_deleted.add(topic)
            self.batch.add_update_metadata(ctx.live_brokers, ctx.partitions_of(topic))
            self.replicas.handle_state_changes(replicas, ReplicaState.DELETION_STARTED)
            self.batch.send()
            if not replicas:
                self._complete(topic)

    def on_stop_replica_response(self, broker_id: int, response) -> None:
        ctx = self.ctx
        if response.error_code:
            return
        done = [(e.topic_name, e.partition_index, broker_id) for e in response.partition_errors if not e.error_code]
        self.replicas.handle_state_changes(
            [r for r in done if ctx.replica_deletion_states.get(r) is ReplicaState.DELETION_STARTED],
            ReplicaState.DELETION_SUCCESSFUL)
        # Every replica of a topic being deleted was started at once: it is done when none is left started.
        waiting = {r[0] for r, s in ctx.replica_deletion_states.items() if s is ReplicaState.DELETION_STARTED}
        for topic in sorted(ctx.topics_being_deleted - waiting):
            self._complete(topic)

    def _complete(self, topic: str) -> None:
        ctx = self.ctx
        self.zk.delete_topic_fenced(topic, ctx.epoch_zk_version)
        self.replicas.handle_state_changes(ctx.replicas_of(topic), ReplicaState.NON_EXISTENT)
        ctx.forget_topic(topic)
        state_change.info("deletion of topic %s completed", topic)
