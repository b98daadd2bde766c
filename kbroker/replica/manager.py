"""ReplicaManager: which partitions this broker hosts, as leader or follower, as the controller ordered.

It applies LeaderAndIsr and StopReplica, and fences them as Kafka's ReplicaManager does: a request from an
older controller epoch is refused whole (STALE_CONTROLLER_EPOCH), a partition state with a leader epoch not
newer than the one already applied is refused for that partition, and a request stamped with an older
broker epoch (sent before this broker re-registered) is STALE_BROKER_EPOCH.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from ..protocol.errors import Errors

state_change = logging.getLogger("state-change")


@dataclass
class Partition:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    zk_version: int
    topic_id: uuid.UUID | None = None

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id


class ReplicaManager:
    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.broker_epoch = -1
        self.controller_epoch = 0
        self.partitions: dict[tuple[str, int], Partition] = {}

    def is_broker_epoch_stale(self, epoch_in_request: int) -> bool:
        # -1: a controller that does not know the epoch (old request versions); Kafka accepts it.
        return epoch_in_request != -1 and epoch_in_request < self.broker_epoch

    def check_controller_epoch(self, controller_id: int, epoch: int, what: str) -> Errors:
        if epoch < self.controller_epoch:
            state_change.warning("ignoring %s from controller %d with epoch %d: the latest controller epoch is %d",
                                 what, controller_id, epoch, self.controller_epoch)
            return Errors.STALE_CONTROLLER_EPOCH
        self.controller_epoch = epoch
        return Errors.NONE

    def become_leader_or_follower(self, controller_id: int, states, topic_ids: dict[str, uuid.UUID | None]):
        """Apply partition states; returns {(topic, partition): error}."""
        errors = {}
        for s in states:
            tp = (s.topic_name, s.partition_index)
            current = self.partitions.get(tp)
            topic_id = topic_ids.get(s.topic_name)
            if self.broker_id not in s.replicas:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if current is not None and topic_id and current.topic_id and topic_id != current.topic_id:
                errors[tp] = Errors.INCONSISTENT_TOPIC_ID
                continue
            if current is not None and s.leader_epoch <= current.leader_epoch:
                state_change.info("ignoring LeaderAndIsr for %s-%d from controller %d: leader epoch %d is not "
                                  "newer than %d", tp[0], tp[1], controller_id, s.leader_epoch, current.leader_epoch)
                errors[tp] = Errors.STALE_CONTROLLER_EPOCH
                continue
            self.partitions[tp] = Partition(tp[0], tp[1], s.leader, s.leader_epoch, list(s.isr), list(s.replicas),
                                            s.zk_version, topic_id or (current.topic_id if current else None))
            role = "leader" if s.leader == self.broker_id else "follower"
            state_change.info("partition %s-%d: %s (leader %d, leader epoch %d, isr %s) from controller %d",
                              tp[0], tp[1], role, s.leader, s.leader_epoch, list(s.isr), controller_id)
            errors[tp] = Errors.NONE
        return errors

    def stop_replica(self, topic: str, partition: int, delete: bool, leader_epoch: int) -> Errors:
        current = self.partitions.get((topic, partition))
        # -2 (EpochDuringDelete) and -1 (no epoch) always apply; otherwise the epoch must not go backwards.
        if current is not None and leader_epoch >= 0 and leader_epoch < current.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        self.partitions.pop((topic, partition), None)
        state_change.info("stopped replica %s-%d%s", topic, partition, " and deleted it" if delete else "")
        return Errors.NONE
