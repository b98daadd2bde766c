"""Creating topics in ZooKeeper exactly as Kafka 2.8's AdminZkClient does, for kadmin and for the broker.

Validation first (name, partitions, replication factor, assignment, topic configs), nothing written if any
fails. Then /config/topics/<T> (even when empty) and only then /brokers/topics/<T> (v3): the controller
reacts to the topic znode, so the config must already be there. The topic znode is written without a
topic_id, which the controller backfills (as 2.8's --zookeeper tools do).
"""
from __future__ import annotations

import re

from . import znodes as z
from .admin_errors import (InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidTopicError,
                           UnknownTopicError)
from .assignment import assign_replicas, check_assignment
from .client import KafkaZkClient, TopicExistsError
from .topic_config import validate_topic_config

MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: non-empty, not '.' or '..', at most 249 characters of [a-zA-Z0-9._-]."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty.")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\".")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters "
                         f"(it has {len(name)}).")
    if not _LEGAL_NAME.fullmatch(name):
        raise InvalidTopicError(f"Topic name \"{name}\" is illegal, it contains a character other than "
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
            raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(clashing)} "
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


def add_partitions(zk: KafkaZkClient, name: str, count: int, new_assignments: list[list[int]] | None = None,
                   validate_only: bool = False) -> dict[int, list[int]]:
    """Grow a topic to `count` partitions (AdminZkClient.addPartitions): new replicas spread like Kafka's,
    continuing from partition 0's first replica, or as given. Writes the topic znode; the controller reacts."""
    assignment = zk.get_topic_assignment(name)
    if assignment is None:
        raise UnknownTopicError(f"The topic '{name}' does not exist.")
    if name in zk.get_topic_deletions():
        raise InvalidTopicError(f"The topic '{name}' is queued for deletion.")
    existing = assignment.partitions
    if count <= len(existing):
        raise InvalidPartitionsError(f"Topic currently has {len(existing)} partitions, {count} would not be an "
                                     f"increase.")
    rf = len(existing[0])
    brokers = zk.get_broker_ids()
    adding = count - len(existing)
    if new_assignments is not None:
        if len(new_assignments) != adding:
            raise InvalidReplicaAssignmentError(f"Increasing the number of partitions by {adding} but "
                                                f"{len(new_assignments)} assignments provided.")
        new = {len(existing) + i: list(r) for i, r in enumerate(new_assignments)}
        for replicas in new.values():
            if len(replicas) != rf or len(set(replicas)) != rf or any(r not in brokers for r in replicas):
                raise InvalidReplicaAssignmentError(f"Invalid replica assignment {replicas}: {rf} distinct live "
                                                    f"brokers are needed.")
    else:
        ordered = sorted(brokers)
        start = next((i for i, b in enumerate(ordered) if b >= existing[0][0]), 0)
        new = assign_replicas(ordered, adding, rf, start_index=start, shift=start, start_partition=len(existing))
    if not validate_only:
        assignment.partitions.update(new)
        zk.set_topic_assignment(name, assignment)
    return new
