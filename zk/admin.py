"""Kafka 2.8's AdminZkClient: the ZooKeeper writes of topic creation, partition growth and config changes, shared
by the broker (kbroker.admin_manager) and kadmin's --zookeeper commands, so each write exists once.

Topic creation validates first (name, not queued for deletion, topic configs, assignment, no clash with an
existing topic), nothing written if any check fails. Then /config/topics/<T> (even when empty) and only then
/brokers/topics/<T> (v3): the controller reacts to the topic znode, so the config must already be there. The
topic znode is written without a topic_id, which the controller backfills (as 2.8's --zookeeper tools do).
A config change writes the entity's znode (/config/topics/<T>, /config/brokers/<id|<default>>,
/config/users/<sanitized user>, a client quota entity's: users/<u>/clients/<c>, clients/<c>, ips/<ip>) and then
the /config/changes notification every broker acts on (AdminZkClient.changeConfigs). A user's znode holds its
SCRAM credentials by mechanism name beside any quotas; as in 2.8 it stays (with an empty config) when its last
key goes. Client quotas are read as DescribeClientQuotas finds them (describe_quotas, Kafka 2.8's filter).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbroker.common.admin_errors import (InvalidConfigError, InvalidPartitionsError, InvalidReplicaAssignmentError,
                                        InvalidRequestError, InvalidTopicError, UnknownTopicError,
                                        UnsupportedVersionError)
from kbroker.common.broker_config import DEFAULT_ENTITY, entity_name, validate_broker_config
from kbroker.common.quota_config import (ANY, CLIENT_ID, CLIENT_QUOTA_CONFIGS, DEFAULT, ENTITY_TYPES, EXACT, IP,
                                         IP_QUOTA_CONFIGS, USER, QuotaEntity, quota_values, valid_ip_entity,
                                         validate_quota_config)
from kbroker.common.sanitizer import desanitize, sanitize
from kbroker.common.topic_config import validate_topic_config
from kbroker.protocol.sasl.scram import MECHANISMS as SCRAM_MECHANISMS

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
                             validate_only: bool = False, known=lambda name: True) -> dict:
        """Validate a broker's (None: the cluster defaults') whole set of dynamic configs, then write it and its
        change notification. Returns the typed values. known(name): whether name is a broker setting (the others
        are kept as custom configs, as Kafka does; by default every name is a setting)."""
        values = validate_broker_config(config, known, broker_id is not None)
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

    # ---- client quotas (kafka-configs.sh --entity-type users|clients|ips, the client-quota APIs) ---------------
    def quota_config(self, entity: QuotaEntity) -> dict[str, str]:
        """What the entity's znode holds (its quotas; a named user's SCRAM credentials too); {} when nothing.
        ValueError naming the znode when it holds something else (written by hand)."""
        entity_path = _quota_entity_path(entity, reading=True)
        if entity_path is None:
            return {}
        path = z.QuotaEntityZNode.path(entity_path)
        data, _ = self.zk.get(path)
        try:
            return z.ConfigEntityZNode.decode(data)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def change_quota_config(self, entity: QuotaEntity, config: dict[str, str], validate_only: bool = False) -> None:
        """Validate an entity's whole config, then (unless validate_only) write it and its change notification
        (AdminZkClient.changeClientIdConfig / changeUserOrUserClientIdConfig / changeIpConfig): an IP entity must
        be an address or a host that resolves (InvalidRequestError) and holds connection_creation_rate only; a
        named user may hold SCRAM credentials beside the client quota keys, every other entity the client quota
        keys only (InvalidConfigError, InvalidConfigValueError naming the key)."""
        parts = dict(entity)
        if IP in parts:
            if not valid_ip_entity(parts[IP]):
                raise InvalidRequestError(f"{parts[IP]} is not a valid IP or resolvable host.")
            validate_quota_config(config, IP_QUOTA_CONFIGS)
        else:
            named_user = parts.get(USER) is not None and CLIENT_ID not in parts
            validate_quota_config(config, CLIENT_QUOTA_CONFIGS, SCRAM_MECHANISMS if named_user else ())
        entity_path = _quota_entity_path(entity)
        if not validate_only:
            self._change_entity_config(*entity_path.split("/", 1), config)

    def alter_quota_config(self, entity: QuotaEntity, to_add: dict[str, str], to_delete: list[str]) -> dict[str, str]:
        """kafka-configs.sh --zookeeper --alter of a quota entity: to_add set and to_delete removed, the entity's
        other keys kept, values stored as typed; refused (nothing written) as merge_config and
        change_quota_config refuse. Returns the new config."""
        config = merge_config(self.quota_config(entity), to_add, to_delete)
        self.change_quota_config(entity, config)
        return config

    def describe_quotas(self, components, strict: bool) -> QuotaDescription:
        """The entities a DescribeClientQuotas filter matches, with their quotas, as Kafka 2.8's
        ZkAdminManager.describeClientQuotas finds them. components: (entity type, match type, name) with match
        types EXACT (that name), DEFAULT (the default entity) and ANY (any name, the default included); a type
        without a component matches entities without that type, and with strict=False any. Only entities with a
        quota value appear; a znode or value that does not parse is left out and told in `problems`. Raises
        InvalidRequestError (a type given twice or empty, an IP with a user or client id, an unknown match
        type) or UnsupportedVersionError (another entity type)."""
        by_type = _filter_components(components)
        out = QuotaDescription()
        if IP not in by_type:
            self._describe_users_and_clients(by_type.get(USER), by_type.get(CLIENT_ID), strict, out)
        if USER not in by_type and CLIENT_ID not in by_type:
            component = by_type.get(IP)
            if component is not None and component[0] != ANY:
                candidates = _named(((IP, component[1]),))
            elif component is not None or not strict:
                candidates = self._listed(IP)
            else:
                candidates = {}
            self._read_quotas(candidates, IP_QUOTA_CONFIGS, out)
        return out

    def _describe_users_and_clients(self, user, client, strict: bool, out: QuotaDescription) -> None:
        """The user, client-id and (user, client-id) entities of a filter: each of the three kinds read when the
        filter can match it, by name when it names the entity (ZkAdminManager.handleDescribeClientQuotas)."""
        exact_user, exact_client = (c is not None and c[0] != ANY for c in (user, client))
        exclude_user, exclude_client = (strict and c is None for c in (user, client))
        candidates: dict[QuotaEntity, str | None] = {}
        if exact_user and exclude_client:
            candidates |= _named(((USER, user[1]),))
        elif not exclude_user and not exact_client:
            candidates |= self._listed(USER)
        if exclude_user and exact_client:
            candidates |= _named(((CLIENT_ID, client[1]),))
        elif not exact_user and not exclude_client:
            candidates |= self._listed(CLIENT_ID)
        if exact_user and exact_client:
            candidates |= _named(((USER, user[1]), (CLIENT_ID, client[1])))
        elif not exclude_user and not exclude_client:
            candidates |= self._user_client_entities(_named(((USER, user[1]),)) if exact_user else self._listed(USER))

        def matches(component, entity: QuotaEntity, entity_type: str) -> bool:
            parts = dict(entity)
            if component is None:
                return entity_type not in parts or not strict
            return entity_type in parts and (component[0] == ANY or parts[entity_type] == component[1])
        self._read_quotas({e: p for e, p in candidates.items() if matches(user, e, USER)
                           and matches(client, e, CLIENT_ID)}, CLIENT_QUOTA_CONFIGS, out)

    def _listed(self, entity_type: str) -> dict[QuotaEntity, str]:
        """Every entity of one type with a znode (/config/users, clients or ips' children) -> its entity path."""
        root = z.QuotaEntityZNode.roots[entity_type]
        return {((entity_type, _entity_name(n)),): f"{root}/{n}"
                for n in self.zk.children(z.QuotaEntityZNode.path(root))}

    def _user_client_entities(self, users: dict[QuotaEntity, str | None]) -> dict[QuotaEntity, str]:
        """The (user, client-id) entities of these users (entity -> entity path) with a znode: the children of
        users/<u>/clients, listed for the users whose znode has children."""
        users = {e: p for e, p in users.items() if p is not None}
        stats = self.zk.get_many([z.QuotaEntityZNode.path(p) for p in users.values()])
        users = {e: p for (e, p), (_, stat) in zip(users.items(), stats) if stat is not None and stat.numChildren}
        clients = self.zk.children_many([z.QuotaEntityZNode.path(f"{p}/clients") for p in users.values()])
        return {(*user, (CLIENT_ID, _entity_name(c))): f"{p}/clients/{c}"
                for (user, p), names in zip(users.items(), clients) for c in names}

    def _read_quotas(self, candidates: dict[QuotaEntity, str | None], keys, out: QuotaDescription) -> None:
        """Read the candidates' znodes (entity -> entity path, None: no znode can be there; one multiRead per
        500) into out: those holding a value of `keys`."""
        wanted = [(e, z.QuotaEntityZNode.path(p)) for e, p in candidates.items() if p is not None]
        for (entity, path), (data, _) in zip(wanted, self.zk.get_many([p for _, p in wanted])):
            try:
                values, bad = quota_values(z.ConfigEntityZNode.decode(data), keys)
            except ValueError as e:
                out.problems.append(f"{path}: {e}")
                continue
            out.problems += [f"{path}: {reason}" for reason in bad]
            if values:
                out.entities[entity] = values


# DescribeClientQuotas' word for each type in its duplicate-component error
_COMPONENT_WORDS = {USER: "user", CLIENT_ID: "client", IP: "ip"}


@dataclass
class QuotaDescription:
    """What a DescribeClientQuotas filter found: entity -> its quota values, and one line for each znode or
    value left out because it does not parse (written by hand)."""
    entities: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _filter_components(components) -> dict[str, tuple[int, str | None]]:
    """entity type -> (match type, name: None unless EXACT), checked as Kafka 2.8 checks a filter; an unknown
    match type, or EXACT without a name, is INVALID_REQUEST (2.8 fails with UNKNOWN_SERVER_ERROR)."""
    found: dict[str, tuple[int, str | None]] = {}
    for entity_type, match_type, match in components:
        if match_type not in (EXACT, DEFAULT, ANY):
            raise InvalidRequestError(f"Unexpected match type: {match_type}")
        if match_type == EXACT and match is None:
            raise InvalidRequestError(f"An exact match of entity type '{entity_type}' needs a name")
        if entity_type == "":
            raise InvalidRequestError("Unexpected empty filter component entity type")
        if entity_type not in ENTITY_TYPES:
            raise UnsupportedVersionError(f"Custom entity type '{entity_type}' not supported")
        if entity_type in found:
            raise InvalidRequestError(f"Duplicate {_COMPONENT_WORDS[entity_type]} filter component entity type")
        found[entity_type] = (match_type, match if match_type == EXACT else None)
    if IP in found and len(found) > 1:
        raise InvalidRequestError("Invalid entity filter component combination, IP filter component should not be "
                                  "used with user or clientId filter component.")
    return found


def _entity_name(node: str) -> str | None:
    """A user's, client id's or IP's name from its znode name (None: the default entity)."""
    return None if node == DEFAULT_ENTITY else desanitize(node)


def _node_name(name: str | None, entity_type: str = USER) -> str | None:
    """The znode name of an entity part: <default> for None, a user or client id sanitized, an IP as given (2.8's
    AlterClientQuotas sanitizes IPs too, which makes an IPv6 address fail its own check); None when no znode can
    have it ("", ".", "..", an IP with a '/')."""
    if name is None:
        return DEFAULT_ENTITY
    node = name if entity_type == IP else sanitize(name)
    return None if node in ("", ".", "..") or "/" in node else node


def _named(entity: QuotaEntity) -> dict[QuotaEntity, str | None]:
    """A candidate entity the filter names -> its entity path (None when no znode can have its name)."""
    return {entity: _quota_entity_path(entity, reading=True)}


def _quota_entity_path(entity: QuotaEntity, reading: bool = False) -> str | None:
    """The entity path of a quota entity's znode (users/<u>/clients/<c>, ...). A name no znode can have: None
    when reading (nothing is there), ZkError when writing (ZooKeeper refuses such a path, as it does Kafka's)."""
    names = {}
    for entity_type, name in entity:
        names[entity_type] = _node_name(name, entity_type)
        if names[entity_type] is None:
            if reading:
                return None
            raise ZkError(f'Invalid path string: the {entity_type} name "{name}" cannot be a znode name')
    return z.QuotaEntityZNode.entity_path(names.get(USER), names.get(CLIENT_ID), names.get(IP))


def _user_node(user: str) -> str:
    """The user's znode name (sanitized, as Kafka's Sanitizer); ZkError for "." and "..", which the sanitizing
    keeps and ZooKeeper refuses as relative paths (Kafka fails such a user the same way)."""
    name = sanitize(user)
    if name in (".", ".."):
        raise ZkError(f'Invalid path string "/config/users/{name}" caused by relative paths not allowed')
    return name
