"""Topic commands over ZooKeeper, as Kafka 2.8's `kafka-topics.sh --zookeeper` (TopicCommand and
AdminZkClient) performs them.

Plain functions taking a started KafkaZkClient, so tests can call them without the CLI. Creating a topic
writes /config/topics/<T> first and /brokers/topics/<T> second (as Kafka does: the controller reacts to the
topic znode, so its config must already be there); the topic znode is v3 without topic_id, which the
controller backfills. Deleting a topic only writes the /admin/delete_topics/<T> marker: the controller
does the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from zk import znodes as z
from zk.client import KafkaZkClient, TopicExistsError

from .assignment import assign_replicas, check_assignment
from .errors import AdminError
from .text import table
from .topic_config import validate_topic_config

MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: non-empty, not '.' or '..', at most 249 characters of [a-zA-Z0-9._-]."""
    if not name:
        raise AdminError("Topic name is illegal, it can't be empty.")
    if name in (".", ".."):
        raise AdminError("Topic name cannot be \".\" or \"..\".")
    if len(name) > MAX_NAME_LENGTH:
        raise AdminError(f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters "
                         f"(it has {len(name)}).")
    if not _LEGAL_NAME.fullmatch(name):
        raise AdminError(f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'.")


def has_collision_chars(name: str) -> bool:
    """Names with '.' or '_' may clash with another topic in metric names, where both become '_'."""
    return "." in name or "_" in name


def collides(a: str, b: str) -> bool:
    return a.replace(".", "_") == b.replace(".", "_")


def _check_topic_free(zk: KafkaZkClient, name: str) -> None:
    """Refuse an existing topic, or one whose name differs from an existing one only by '.' vs '_'."""
    if zk.topic_exists(name):
        raise TopicExistsError(f"Topic '{name}' already exists.")
    if has_collision_chars(name):
        existing = zk.get_all_topics()
        if name in existing:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        clashing = [t for t in existing if collides(t, name)]
        if clashing:
            raise AdminError(f"Topic '{name}' collides with existing topics: {', '.join(clashing)} "
                             "(metric names treat '.' and '_' alike).")


def create_topic(zk: KafkaZkClient, name: str, partitions: int, replication_factor: int,
                 config: dict[str, str] | None = None) -> dict[int, list[int]]:
    """Create a topic with replicas spread over the live brokers (AdminZkClient.createTopic, rack-unaware).
    Returns the assignment written."""
    config = dict(config or {})
    validate_topic_config(config)
    validate_topic_name(name)
    assignment = assign_replicas(zk.get_broker_ids(), partitions, replication_factor)
    return _create(zk, name, assignment, config)


def create_topic_with_assignment(zk: KafkaZkClient, name: str, assignment: dict[int, list[int]],
                                 config: dict[str, str] | None = None) -> dict[int, list[int]]:
    """Create a topic with the given partition -> replicas map (AdminZkClient.createTopicWithAssignment).
    As in Kafka, the brokers named need not be alive."""
    config = dict(config or {})
    validate_topic_config(config)
    validate_topic_name(name)
    check_assignment(assignment)
    return _create(zk, name, {p: list(r) for p, r in assignment.items()}, config)


def _create(zk: KafkaZkClient, name: str, assignment: dict[int, list[int]], config: dict[str, str]):
    _check_topic_free(zk, name)
    zk.set_or_create_entity_config("topics", name, config)
    zk.create_topic_assignment(name, z.TopicAssignment(assignment))
    return assignment


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
