"""Topic commands over ZooKeeper, as Kafka 2.8's `kafka-topics.sh --zookeeper` (TopicCommand) performs them.

Plain functions taking a started KafkaZkClient, so tests can call them without the CLI. Creation is
zk.admin's (shared with the broker's auto-creation); this module lists, describes and marks for deletion.
Deleting a topic only writes the /admin/delete_topics/<T> marker: the controller does the rest.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from zk.admin import INTERNAL_TOPICS
from zk.admin_errors import AdminError
from zk.client import KafkaZkClient

from .text import table


def list_topics(zk: KafkaZkClient) -> list[tuple[str, bool]]:
    """(name, marked for deletion) of every topic, sorted by name."""
    marked = set(zk.get_topic_deletions())
    return [(t, t in marked) for t in zk.get_all_topics()]


@dataclass
class PartitionDescription:
    partition: int
    leader: int | None  # None: no state znode yet, or no leader
    replicas: list[int]
    isr: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


@dataclass
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: list[PartitionDescription]
    config: dict[str, str]
    marked_for_deletion: bool

    @property
    def replication_factor(self) -> int:
        """As Kafka reports it: the replicas of the first partition, not counting ones being removed."""
        if not self.partitions:
            return 0
        first = self.partitions[0]
        return len(first.replicas) - len(first.removing)


def describe_topic(zk: KafkaZkClient, name: str) -> TopicDescription:
    assignment = zk.get_topic_assignment(name)
    if assignment is None:
        raise AdminError(f"Topic '{name}' does not exist.")
    partitions = []
    for p, replicas in sorted(assignment.partitions.items()):
        state = zk.get_partition_state(name, p)
        leader = state.leader if state is not None and state.leader >= 0 else None
        partitions.append(PartitionDescription(p, leader, replicas, state.isr if state else [],
                                               assignment.adding_replicas.get(p, []),
                                               assignment.removing_replicas.get(p, [])))
    return TopicDescription(name, assignment.topic_id, partitions, zk.get_entity_config("topics", name),
                            name in zk.get_topic_deletions())


def format_topic_description(d: TopicDescription) -> list[str]:
    """kafka-topics.sh --describe's header line, then one aligned row per partition."""
    configs = ",".join(f"{k}={v}" for k, v in sorted(d.config.items()))
    header = (f"Topic: {d.name}\tTopicId: {d.topic_id or 'none'}\tPartitionCount: {len(d.partitions)}\t"
              f"ReplicationFactor: {d.replication_factor}\tConfigs: {configs}")
    if d.marked_for_deletion:
        header += "\tMarkedForDeletion: true"

    def ids(xs):
        return ",".join(map(str, xs))
    reassigning = any(p.adding or p.removing for p in d.partitions)
    columns = ["Partition", "Leader", "Replicas", "Isr"] + (["Adding", "Removing"] if reassigning else [])
    rows = []
    for p in d.partitions:
        row = [str(p.partition), "none" if p.leader is None else str(p.leader), ids(p.replicas), ids(p.isr)]
        rows.append(row + ([ids(p.adding), ids(p.removing)] if reassigning else []))
    return [header.rstrip()] + table(columns, rows, indent="  ")


def delete_topic(zk: KafkaZkClient, name: str) -> None:
    """Write the /admin/delete_topics/<T> marker (AdminZkClient.deleteTopic); the controller deletes."""
    if not zk.topic_exists(name):
        raise AdminError(f"Topic '{name}' does not exist.")
    if name in INTERNAL_TOPICS:
        raise AdminError(f"Topic {name} is a Kafka internal topic and is not allowed to be marked for deletion.")
    zk.create_delete_topic_marker(name)
