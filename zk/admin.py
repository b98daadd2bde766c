"""Kafka 2.8's AdminZkClient: the ZooKeeper writes of topic creation, partition growth and config changes, shared
by the broker (kbroker.admin_manager) and kadmin's --zookeeper commands, so each write exists once.

Topic creation validates first (name, not queued for deletion, topic configs, assignment, no clash with an
existing topic), nothing written if any check fails. Then /config/topics/<T> (even when empty) and only then
/brokers/topics/<T> (v3): the controller reacts to the topic znode, so the config must already be there. The
topic znode is written without a topic_id, which the controller backfills (as 2.8's --zookeeper tools do).
A config change writes the entity's znode (/config/topics/<T>, /config/brokers/<id|<default>>,
/config/users/<sanitized user>) and then the /config/changes notification every broker acts on
(AdminZkClient.changeConfigs). A user's znode holds its SCRAM credentials by mechanism name beside any quotas;
as in 2.8 it stays (with an empty config) when its last key goes.
"""
from __future__ import annotations

import re

from kbroker.common.admin_errors import (InvalidConfigError, InvalidPartitionsError, InvalidReplicaAssignmentError,
                                        InvalidTopicError, UnknownTopicError)
from kbroker.common.broker_config import entity_name, validate_broker_config
from kbroker.common.sanitizer import desanitize, sanitize
from kbroker.common.topic_config import validate_topic_config

from . import znodes as z
from .assignment import assign_replicas, check_assignment
from .client import KafkaZkClient, TopicExistsError, ZkError

MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


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


def merge_config(current: dict[str, str], to_add: dict[str, str], to_delete: list[str]) -> dict[str, str]:
    """kafka-configs.sh --alter: current overrides with to_add set and to_delete removed. InvalidConfigError
    for a key both added and deleted, or a deleted key that is not set (ConfigCommand's checks)."""
    both = [k for k in to_delete if k in to_add]
    if both:
        raise InvalidConfigError(f"Config(s) both added and deleted: {','.join(both)}")
    missing = [k for k in to_delete if k not in current]
    if missing:
        raise InvalidConfigError(f"Invalid config(s): {','.join(missing)}")
    config = {k: v for k, v in current.items() if k not in to_delete}
    config.update(to_add)
    return config


class AdminZkClient:
    """Topic and config administration over a KafkaZkClient. The brokers new replicas may go to, id -> rack
    (None without one), are given by the caller (the broker: its metadata cache's live brokers); kadmin's
    default is the registered brokers."""

    def __init__(self, zk: KafkaZkClient):
        self.zk = zk

    # ---- topics --------------------------------------------------------------------------------------------
    def create_topic(self, name: str, config: dict[str, str] | None = None, *,
                     assignment: dict[int, list[int]] | None = None, partitions: int | None = None,
                     replication_factor: int | None = None, brokers: dict[int, str | None] | None = None,
                     validate_only: bool = False, before_write=None) -> dict[int, list[int]]:
        """Validate, then (unless validate_only) write a topic: with the given partition -> replicas map
        (createTopicWithAssignment; the brokers named need not be alive), else `partitions` partitions of
        `replication_factor` replicas spread over the brokers (createTopic). Returns the
        assignment. Raises AdminError, or TopicExistsError for a topic that exists or is queued for deletion.
        before_write(assignment) runs once it is valid, before the write (a broker's controller mutation quota,
        which may refuse it by raising)."""
        config = dict(config or {})
        validate_topic_name(name)
        if name in self.zk.get_topic_deletions():
            raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
        validate_topic_config(config)
        if assignment is not None:
            check_assignment(assignment)
            assignment = {p: list(r) for p, r in assignment.items()}
        else:
            assignment = assign_replicas(self._brokers(brokers), partitions, replication_factor)
        self._check_topic_free(name)
        if not validate_only:
            if before_write is not None:
                before_write(assignment)
            self.zk.set_or_create_entity_config("topics", name, config)
            self.zk.create_topic_assignment(name, z.TopicAssignment(assignment))
        return assignment

    def _check_topic_free(self, name: str) -> None:
        """Refuse an existing topic, or one whose name differs from an existing one only by '.' vs '_'."""
        if self.zk.topic_exists(name):
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if has_collision_chars(name):
            existing = self.zk.get_all_topics()
            if name in existing:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            clashing = [t for t in existing if collides(t, name)]
            if clashing:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(clashing)} "
                                        "(metric names treat '.' and '_' alike).")

    def delete_topic(self, name: str) -> None:
        """Queue a topic for deletion: the /admin/delete_topics/<T> marker the controller acts on
        (AdminZkClient.deleteTopic). UnknownTopicError when there is no such topic,
        TopicAlreadyMarkedForDeletionError when it is queued already."""
        if not self.zk.topic_exists(name):
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        self.zk.create_delete_topic_marker(name)

    def _brokers(self, brokers: dict[int, str | None] | None) -> dict[int, str | None]:
        """The given brokers, else the registered ones with their racks."""
        if brokers is not None:
            return brokers
        return {broker_id: info.rack for broker_id, info in self.zk.get_all_brokers().items()}

    def add_partitions(self, name: str, count: int, new_assignments: list[list[int]] | None = None,
                       brokers: dict[int, str | None] | None = None, validate_only: bool = False,
                       before_write=None) -> dict[int, list[int]]:
        """Grow a topic to `count` partitions (AdminZkClient.addPartitions): new replicas spread like Kafka's
        over the brokers (default: the registered ones), continuing from partition 0's first replica, or as
        given. Writes the topic znode; the controller reacts. Returns the new partitions' assignment.
        before_write(new assignment) runs once it is valid, before the write (as in create_topic)."""
        assignment = self.zk.get_topic_assignment(name)
        if assignment is None:
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        if name in self.zk.get_topic_deletions():
            raise InvalidTopicError(f"The topic '{name}' is queued for deletion.")
        existing = assignment.partitions
        if count <= len(existing):
            raise InvalidPartitionsError(f"Topic currently has {len(existing)} partitions, {count} would not be "
                                         f"an increase.")
        rf = len(existing[0])
        brokers = self._brokers(brokers)
        adding = count - len(existing)
        if new_assignments is not None:
            if len(new_assignments) != adding:
                raise InvalidReplicaAssignmentError(f"Increasing the number of partitions by {adding} but "
                                                    f"{len(new_assignments)} assignments provided.")
            new = {len(existing) + i: list(r) for i, r in enumerate(new_assignments)}
            for replicas in new.values():
                if len(replicas) != rf or len(set(replicas)) != rf or any(r not in brokers for r in replicas):
                    raise InvalidReplicaAssignmentError(f"Invalid replica assignment {replicas}: {rf} distinct "
                                                        f"live brokers are needed.")
        else:
            start = next((i for i, b in enumerate(sorted(brokers)) if b >= existing[0][0]), 0)
            new = assign_replicas(brokers, adding, rf, start_index=start, shift=start,
                                  start_partition=len(existing))
        if not validate_only:
            if before_write is not None:
                before_write(new)
            assignment.partitions.update(new)
            self.zk.set_topic_assignment(name, assignment)
        return new

    # ---- configs -------------------------------------------------------------------------------------------
    def fetch_entity_config(self, kind: str, name: str) -> dict[str, str]:
        """The overrides stored for a topic ("topics", T) or a broker ("brokers", id or <default>)."""
        return self.zk.get_entity_config(kind, name)

    def topic_config(self, topic: str) -> dict[str, str]:
        """A topic's overrides; InvalidTopicError or UnknownTopicError when there is no such topic."""
        validate_topic_name(topic)
        if not self.zk.topic_exists(topic):
            raise UnknownTopicError(f"The topic '{topic}' does not exist.")
        return self.fetch_entity_config("topics", topic)

    def change_topic_config(self, topic: str, config: dict[str, str], validate_only: bool = False) -> None:
        """Validate a topic's whole set of overrides, then write it and its change notification."""
        validate_topic_config(config)
        if not validate_only:
            self._change_entity_config("topics", topic, config)

    def change_broker_config(self, broker_id: int | None, config: dict[str, str],
                             validate_only: bool = False) -> dict:
        """Validate a broker's (None: the cluster defaults') whole set of dynamic configs, then write it and its
        change notification. Returns the typed values."""
        values = validate_broker_config(config)
        if not validate_only:
            self._change_entity_config("brokers", entity_name(broker_id), config)
        return values

    def _change_entity_config(self, kind: str, name: str, config: dict[str, str]) -> None:
        """The entity's znode, then the /config/changes notification naming it."""
        self.zk.set_or_create_entity_config(kind, name, config)
        self.zk.create_config_change_notification(f"{kind}/{name}")

    # ---- users (SCRAM credentials, kafka-configs.sh --entity-type users) ---------------------------------------
    def user_config(self, user: str) -> dict[str, str]:
        """What /config/users/<sanitized user> holds (credentials by mechanism name, quotas); {} when nothing."""
        return self.zk.get_entity_config("users", _user_node(user))

    def all_user_configs(self) -> dict[str, dict[str, str]]:
        """Every user with a znode under /config/users (names desanitized) -> its config
        (AdminZkClient.fetchAllEntityConfigs)."""
        names = self.zk.children("/config/users")
        configs = self.zk.get_many([z.ConfigEntityZNode.path("users", n) for n in names])
        return {desanitize(n): z.ConfigEntityZNode.decode(data[0] if data else None)
                for n, data in zip(names, configs)}

    def change_user_config(self, user: str, config: dict[str, str]) -> None:
        """Write a user's whole config, then the users/<sanitized user> notification
        (AdminZkClient.changeUserOrUserClientIdConfig)."""
        self._change_entity_config("users", _user_node(user), config)

    def alter_user_credentials(self, user: str, upsert: dict[str, str], delete: list[str]) -> dict[str, str]:
        """kafka-configs.sh --zookeeper --alter --entity-type users: set credentials (mechanism name -> credential
        text) and remove mechanisms, other keys kept. InvalidConfigError, nothing written, for a mechanism both
        set and removed or removed but not set. Returns the new config."""
        config = merge_config(self.user_config(user), upsert, delete)
        self.change_user_config(user, config)
        return config


def _user_node(user: str) -> str:
    """The user's znode name (sanitized, as Kafka's Sanitizer); ZkError for "." and "..", which the sanitizing
    keeps and ZooKeeper refuses as relative paths (Kafka fails such a user the same way)."""
    name = sanitize(user)
    if name in (".", ".."):
        raise ZkError(f'Invalid path string "/config/users/{name}" caused by relative paths not allowed')
    return name
