"""What the active controller knows of the cluster (Kafka's ControllerContext), and the states it derives.

One ControllerContext per controller, read from ZooKeeper at failover, changed only by the controller's event
greenlet (so without locks), and cleared when it resigns. The state machines and the request batch read and
change it; nothing else keeps controller state.

Partition and replica states (Kafka's PartitionState and ReplicaState) are derived from the context rather
than stored beside it, so they can never disagree with the leadership and broker liveness they stand for:
- a partition is NonExistent until it has an assignment, New until it has a leader and ISR (its state znode),
  then Online while its leader's replica is online and Offline otherwise;
- a replica is NonExistent when not assigned, New while its partition is New, Online on a live broker and
  Offline on a dead one or in a failed log dir of its broker (`replicas_on_offline_dirs`, learnt from the
  KAFKA_STORAGE_ERROR of LeaderAndIsr responses, forgotten when the broker goes away), unless topic deletion
  has put it into ReplicaDeletionStarted, -Successful or -Ineligible: those are the only replica states stored
  (`replica_deletion_states`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class PartitionState(Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


@dataclass
class ControllerContext:
    """The controller's view of the cluster. Partitions are (topic, partition) tuples; replicas are
    (topic, partition, broker id) tuples."""
    broker_id: int                                          # this controller's broker
    inter_broker_listener: str
    epoch: int = 0                                          # /controller_epoch as this controller wrote it
    epoch_zk_version: int = 0                               # its zkVersion: every controller write is fenced by it
    live_brokers: dict = field(default_factory=dict)        # id -> BrokerInfo (epoch = czxid of its znode)
    shutting_down: set = field(default_factory=set)         # brokers in controlled shutdown: never leaders
    assignments: dict = field(default_factory=dict)         # (topic, partition) -> assigned replicas
    partition_states: dict = field(default_factory=dict)    # (topic, partition) -> LeaderAndIsr (its state znode)
    topic_ids: dict = field(default_factory=dict)           # topic -> base64 topic id (set_topic_id)
    topic_names: dict = field(default_factory=dict)         # base64 topic id -> topic, its inverse
    topics_to_delete: set = field(default_factory=set)      # marked in /admin/delete_topics
    topics_being_deleted: set = field(default_factory=set)  # those whose replicas are being stopped and deleted
    replica_deletion_states: dict = field(default_factory=dict)  # (topic, partition, broker) -> ReplicaState
    reassignments: dict = field(default_factory=dict)       # (topic, partition) -> (target, original replicas)
    znode_reassignments: set = field(default_factory=set)   # those listed in /admin/reassign_partitions
    replicas_on_offline_dirs: dict = field(default_factory=dict)  # broker -> {(topic, partition)} in failed dirs

    def is_replica_online(self, broker: int, tp) -> bool:
        """Kafka's isReplicaOnline: the broker is live and the replica is not in one of its failed log dirs."""
        return broker in self.live_brokers and tp not in self.replicas_on_offline_dirs.get(broker, ())

    def eligible_leaders_of(self, tp, eligible: set[int]) -> set[int]:
        """Of the eligible brokers, those whose replica of tp is not in a failed log dir."""
        if not self.replicas_on_offline_dirs:
            return eligible
        return {b for b in eligible if tp not in self.replicas_on_offline_dirs.get(b, ())}

    def eligible_leaders(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down

    def set_topic_id(self, topic: str, topic_id: str) -> None:
        self.topic_ids[topic] = topic_id
        self.topic_names[topic_id] = topic

    def topics(self) -> set[str]:
        """The topics loaded (each has its id from the load on): not a walk of every partition."""
        return set(self.topic_ids)

    def partitions_of(self, topic: str) -> list[tuple[str, int]]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def replicas_of(self, topic: str) -> list[tuple[str, int, int]]:
        return [(t, p, r) for t, p in self.partitions_of(topic) for r in self.assignments[(t, p)]]

    def partition_state(self, tp) -> PartitionState:
        if tp not in self.assignments:
            return PartitionState.NON_EXISTENT
        state = self.partition_states.get(tp)
        if state is None:
            return PartitionState.NEW
        return PartitionState.ONLINE if self.is_replica_online(state.leader, tp) else PartitionState.OFFLINE

    def replica_state(self, replica) -> ReplicaState:
        stored = self.replica_deletion_states.get(replica)
        if stored is not None:
            return stored
        topic, partition, broker = replica
        if broker not in self.assignments.get((topic, partition), ()):
            return ReplicaState.NON_EXISTENT
        if (topic, partition) not in self.partition_states:
            return ReplicaState.NEW
        return ReplicaState.ONLINE if self.is_replica_online(broker, (topic, partition)) else ReplicaState.OFFLINE

    def forget_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            del self.assignments[tp]
            self.partition_states.pop(tp, None)
        for replica in [r for r in self.replica_deletion_states if r[0] == topic]:
            del self.replica_deletion_states[replica]
        self.topic_names.pop(self.topic_ids.pop(topic, None), None)
        for tp in [tp for tp in self.reassignments if tp[0] == topic]:
            del self.reassignments[tp]
            self.znode_reassignments.discard(tp)
        self.topics_to_delete.discard(topic)
        self.topics_being_deleted.discard(topic)

    def clear(self) -> None:
        keep = (self.broker_id, self.inter_broker_listener)
        self.__init__(*keep)
