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
    has_state: bool = True  # False until the controller created the partition's state znode
    leader_registered: bool = True  # the leader is a broker registered in /brokers/ids

    @property
    def under_replicated(self) -> bool:
        """kafka-topics.sh's test: fewer in-sync replicas than the replication factor (the replicas not
        counting ones a reassignment is removing)."""
        return len(self.replicas) - len(self.removing) > len(self.isr)

    @property
    def unavailable(self) -> bool:
        """kafka-topics.sh's test: no leader, or a leader that is not a registered (live) broker."""
        return self.leader is None or not self.leader_registered

    @property
    def status(self) -> str:
        """The mark of the describe table: 'offline', 'under-replicated' or ''. Partitions the controller has
        not initialised yet (no state znode) show Leader none and no mark."""
        if not self.has_state:
            return ""
        if self.unavailable:
            return "offline"
        return "under-replicated" if self.under_replicated else ""


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


def describe_topic(zk: KafkaZkClient, name: str, registered: set[int] | None = None) -> TopicDescription:
    """Topic NAME from its znodes; registered = the broker ids in /brokers/ids (read if not given)."""
    assignment = zk.get_topic_assignment(name)
    if assignment is None:
        raise AdminError(f"Topic '{name}' does not exist.")
    if registered is None:
        registered = set(zk.get_broker_ids())
    partitions = []
    for p, replicas in sorted(assignment.partitions.items()):
        state = zk.get_partition_state(name, p)
        leader = state.leader if state is not None and state.leader >= 0 else None
        partitions.append(PartitionDescription(p, leader, replicas, state.isr if state else [],
                                               assignment.adding_replicas.get(p, []),
                                               assignment.removing_replicas.get(p, []),
                                               has_state=state is not None,
                                               leader_registered=leader in registered))
    return TopicDescription(name, assignment.topic_id, partitions, zk.get_entity_config("topics", name),
                            name in zk.get_topic_deletions())


def describe_topics(zk: KafkaZkClient, name: str | None = None) -> list[TopicDescription]:
    """Topic NAME, or every topic (sorted by name) when NAME is None; topics deleted meanwhile are skipped."""
    registered = set(zk.get_broker_ids())
    if name is not None:
        return [describe_topic(zk, name, registered)]
    out = []
    for topic in zk.get_all_topics():
        try:
            out.append(describe_topic(zk, topic, registered))
        except AdminError:
            pass
    return out


def format_topic_description(d: TopicDescription) -> list[str]:
    """kafka-topics.sh --describe's header line, then one aligned row per partition."""
    configs = ",".join(f"{k}={v}" for k, v in sorted(d.config.items()))
    header = (f"Topic: {d.name}\tTopicId: {d.topic_id or 'none'}\tPartitionCount: {len(d.partitions)}\t"
              f"ReplicationFactor: {d.replication_factor}\tConfigs: {configs}")
    if d.marked_for_deletion:
        header += "\tMarkedForDeletion: true"
    return [header.rstrip()] + _partition_table([(d.name, p) for p in d.partitions], with_topic=False,
                                                with_status=True, indent="  ")


def _ids(xs) -> str:
    return ",".join(map(str, xs))


def _partition_table(rows, with_topic: bool, with_status: bool, indent: str = "") -> list[str]:
    """Aligned rows of (topic, PartitionDescription): Partition, Leader, Replicas, Isr, then Adding and
    Removing when a partition is being reassigned, then Status when a partition is offline or
    under-replicated (so a healthy topic's table keeps its plain form)."""
    reassigning = any(p.adding or p.removing for _, p in rows)
    marked = with_status and any(p.status for _, p in rows)
    columns = (["Topic"] if with_topic else []) + ["Partition", "Leader", "Replicas", "Isr"] \
        + (["Adding", "Removing"] if reassigning else []) + (["Status"] if marked else [])
    out = []
    for topic, p in rows:
        row = ([topic] if with_topic else []) + [str(p.partition), "none" if p.leader is None else str(p.leader),
                                                 _ids(p.replicas), _ids(p.isr)]
        row += [_ids(p.adding), _ids(p.removing)] if reassigning else []
        row += [p.status] if marked else []
        out.append(row)
    return table(columns, out, indent=indent)


def format_filtered_partitions(descriptions: list[TopicDescription], predicate) -> list[str]:
    """kafka-topics.sh --describe --under-replicated-partitions / --unavailable-partitions: only the matching
    partitions, one aligned row each with its topic, no topic header; nothing at all when none matches."""
    rows = [(d.name, p) for d in descriptions for p in d.partitions if predicate(p)]
    if not rows:
        return []
    return _partition_table(rows, with_topic=True, with_status=False)


def delete_topic(zk: KafkaZkClient, name: str) -> None:
    """Write the /admin/delete_topics/<T> marker (AdminZkClient.deleteTopic); the controller deletes."""
    if not zk.topic_exists(name):
        raise AdminError(f"Topic '{name}' does not exist.")
    if name in INTERNAL_TOPICS:
        raise AdminError(f"Topic {name} is a Kafka internal topic and is not allowed to be marked for deletion.")
    zk.create_delete_topic_marker(name)
