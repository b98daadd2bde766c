"""The admin manager, as Kafka 2.8's ZkAdminManager: topic creation, deletion and partition growth, the config
APIs, topic auto-creation (Metadata) and internal-topic creation (__consumer_offsets) all go through here; the
API modules only decode the request, call one method and encode the answer.

- Writes to ZooKeeper go through zk.admin.AdminZkClient (shared with kadmin's --zookeeper commands), never
  straight to the client: the topic znodes, the config znodes and their change notifications.
- New replicas are spread over the live brokers of the metadata cache (what the controller last sent) and their
  racks, as Kafka's ZkAdminManager uses metadataCache.getAliveBrokers (zk.assignment: rack-aware when every
  broker has a rack).
- CreateTopics and CreatePartitions with timeout_ms > 0 wait until the new partitions have leaders, DeleteTopics
  until the topics are gone from the metadata cache: delayed operations in the "topic" purgatory
  (admin_delayed.py), checked whenever UpdateMetadata names a topic; topics not done at the timeout get
  REQUEST_TIMED_OUT. timeout_ms <= 0 answers at once, REQUEST_TIMED_OUT for the topics written (CreateTopics,
  DeleteTopics), as Kafka.
- Configs: DescribeConfigs shows each config's effective value, source and synonyms (Kafka's precedence:
  DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
  DEFAULT_CONFIG, each layer over all of a config's synonyms in turn; the source is the first synonym's).
  AlterConfigs (whole set) and IncrementalAlterConfigs (per key) share one path per resource: the new set is
  validated (common.topic_config / common.broker_config, one table each) and written with its change
  notification.
- Controller mutations (KIP-599): CreateTopics, DeleteTopics and CreatePartitions take the request's
  ControllerMutationQuota (kbroker.quota.client_quotas) and record each topic's partitions created, added or
  deleted in it once the topic passed its checks, just before its write, as ZkAdminManager does; a strict quota
  refuses the topic with THROTTLING_QUOTA_EXCEEDED instead when the client's token bucket is already below zero.
  validate_only records nothing.
- SCRAM credentials (KIP-554): DescribeUserScramCredentials and AlterUserScramCredentials read and write
  /config/users/<sanitized user> with ZkAdminManager's checks, per-user errors and messages.
- Client quotas (KIP-546): DescribeClientQuotas finds the entities a filter matches (zk.admin's describe_quotas),
  AlterClientQuotas applies each entry's operations to its entity's znode (common.quota_config's table and
  value conversion), with ZkAdminManager's checks and INVALID_REQUEST messages, per entity.
"""
from __future__ import annotations

import logging
from collections import Counter
from itertools import dropwhile
from dataclasses import dataclass, field
from typing import Callable

from zk.admin import AdminZkClient
from zk.client import TopicAlreadyMarkedForDeletionError, TopicExistsError, ZkError
from .admin_delayed import DelayedCreatePartitions, DelayedDeleteTopics
from .common.admin_errors import (AdminError, InvalidConfigError, InvalidConfigValueError, InvalidRequestError,
                                  UnknownTopicError)
from .common.broker_config import (DYNAMIC_BROKER_CONFIGS, THREAD_COUNTS, dynamic_broker_key, entity_name,
                                   is_password, update_mode, validate_broker_config)
from .common.config_def import format_value
from .common.internal_topics import INTERNAL_TOPICS
from .common.password_encoder import PasswordEncoderError
from .common.quota_config import QuotaEntity, entity_order, quota_entity, quota_keys, stored_value
from .common.topic_config import TOPIC_CONFIGS
from .config import KRAFT_SETTINGS, SETTINGS, setting_of
from .log.config import LogConfig
from .log.errors import InvalidConfig
from .protocol.errors import Errors
from .protocol.sasl import scram
from .purgatory.delayed import DelayedOperationPurgatory
from .quota.client_quotas import ControllerMutationQuota, ThrottlingQuotaExceeded

log = logging.getLogger(__name__)

INTERNAL_CREATE_RETRY_MS = 500   # internal-topic creation attempts are spaced so retrying clients do not flood ZK
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
_UNKNOWN_TOPIC = (Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")

TOPIC, BROKER = 2, 4
RESOURCE_TYPE_NAMES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER"}
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3   # IncrementalAlterConfigs operations
# Broker settings with more than one name (DynamicBrokerConfig.brokerConfigSynonyms), highest precedence first
_BROKER_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                          ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                          ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))


class ApiError(Exception):
    """A request refused with an error code and message (Kafka's ApiError)."""

    def __init__(self, code: Errors, message: str | None):
        super().__init__(message)
        self.code = code


def _error_of(e: Exception) -> tuple[Errors, str | None]:
    """The (code, message) of an admin failure."""
    if isinstance(e, ApiError):
        return e.code, str(e)
    if isinstance(e, (AdminError, TopicExistsError)):
        return Errors(e.code), str(e)
    if isinstance(e, ThrottlingQuotaExceeded):
        return Errors.THROTTLING_QUOTA_EXCEEDED, str(e)
    return Errors.UNKNOWN_SERVER_ERROR, str(e)


@dataclass
class ScramUserResult:
    """One user's answer to Describe/AlterUserScramCredentials; credentials: (KIP-554 mechanism id, iterations)."""
    user: str
    error: Errors = Errors.NONE
    message: str | None = None
    credentials: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class NewTopic:
    """One CreateTopics entry: -1 partitions / replication factor take the broker's defaults; configs may hold
    None values (refused)."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass
class TopicResult:
    """The outcome for one topic of CreateTopics, DeleteTopics or CreatePartitions."""
    name: str | None
    error: Errors = Errors.NONE
    message: str | None = None
    topic_id: object = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)

    def fail(self, error: Errors, message: str | None) -> None:
        """Kafka resets metadata and configs of failed topics."""
        self.error, self.message = error, message
        self.num_partitions = self.replication_factor = -1
        self.configs = {}


@dataclass
class ConfigEntry:
    """One DescribeConfigs entry; synonyms are (name, value, source), most specific first."""
    name: str
    value: str | None
    source: int
    type: str | None   # None: a name kbroker does not know (Kafka's UNKNOWN, shown as sensitive)
    read_only: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)


def broker_synonym_names(name: str) -> list[str]:
    """A broker setting's names, in Kafka's order of precedence (DynamicBrokerConfig.brokerConfigSynonyms): a
    group's, or a listener's override followed by the setting it overrides."""
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return list(group) if name != "log.flush.scheduler.interval.ms" else [name]
    base = setting_of(name)
    return [name, base] if base and base != name else [name]


class AdminManager:
    def __init__(self, broker_id: int, config, zk, metadata_cache, clock,
                 is_active_controller: Callable[[], bool]):
        self.broker_id = broker_id
        self.config = config
        self.admin_zk = AdminZkClient(zk)
        self.cache = metadata_cache
        self.clock = clock
        self.is_active_controller = is_active_controller
        self.topic_purgatory = DelayedOperationPurgatory("topic", clock)
        self._last_internal_attempt: dict[str, int] = {}

    def startup(self) -> None:
        self.topic_purgatory.start()

    def shutdown(self) -> None:
        self.topic_purgatory.shutdown()

    def try_complete_delayed_topic_operations(self, topics) -> None:
        """New metadata arrived for these topics (Kafka's tryCompleteDelayedTopicOperations)."""
        self.topic_purgatory.check_and_complete_all(topics)

    def _alive_brokers(self) -> dict[int, str | None]:
        return self.cache.alive_broker_racks()

    # ---- topics --------------------------------------------------------------------------------------------
    def create_topics(self, topics: list[NewTopic], timeout_ms: int, validate_only: bool,
                      quota: ControllerMutationQuota) -> list[TopicResult]:
        """CreateTopics, checked topic by topic; nothing is written for a topic that fails a check (or that the
        quota refuses)."""
        results = [TopicResult(t.name) for t in topics]
        if not self.is_active_controller():
            for r in results:
                r.fail(Errors.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
            return results
        named = Counter(t.name for t in topics)
        brokers = self._alive_brokers()
        created: dict[str, int] = {}
        for t, r in zip(topics, results):
            if named[t.name] > 1:
                r.fail(Errors.INVALID_REQUEST, "Found multiple entries for this topic.")
                continue
            try:
                assignment = self._create_topic(t, brokers, validate_only, quota)
            except (ApiError, AdminError, ZkError, ThrottlingQuotaExceeded) as e:
                r.fail(*_error_of(e))
                continue
            r.num_partitions, r.replication_factor = len(assignment), len(assignment[0])
            r.configs = dict(t.configs)
            if not validate_only:
                created[t.name] = len(assignment)
        pending = self._await(DelayedCreatePartitions, created, timeout_ms)
        for r in results:
            if r.name in created:
                r.topic_id = self.cache.topic_ids.get(r.name)
                if r.name in pending:
                    r.fail(Errors.REQUEST_TIMED_OUT, None)
        return results

    def _create_topic(self, t: NewTopic, brokers: dict[int, str | None], validate_only: bool,
                      quota: ControllerMutationQuota) -> dict[int, list[int]]:
        """Kafka's ZkAdminManager.createTopics checks of one topic, then AdminZkClient's; the assignment."""
        if self.cache.topic_partitions(t.name) is not None:
            raise ApiError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        nulls = [k for k, v in t.configs.items() if v is None]
        if nulls:
            raise ApiError(Errors.INVALID_REQUEST, f"Null value not supported for topic configs : {','.join(nulls)}")
        if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            raise ApiError(Errors.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments "
                                                   "were set. Both cannot be used at the same time.")
        cfg = self.config
        return self.admin_zk.create_topic(
            t.name, t.configs, assignment=t.assignments or None, brokers=brokers, validate_only=validate_only,
            before_write=lambda assignment: quota.record(len(assignment)),
            partitions=cfg["num.partitions"] if t.num_partitions == -1 else t.num_partitions,
            replication_factor=(cfg["default.replication.factor"] if t.replication_factor == -1
                                else t.replication_factor))

    def _await(self, kind, topics: dict, timeout_ms: int) -> dict:
        """Wait in the purgatory (kind: DelayedCreatePartitions or DelayedDeleteTopics) for these topics, up to
        timeout_ms; the ones still pending then (all of them when timeout_ms <= 0)."""
        if not topics or timeout_ms <= 0:
            return topics
        op = kind(timeout_ms, self.cache, topics)
        if not self.topic_purgatory.try_complete_else_watch(op, list(topics)):
            op.done.wait()
        return op.pending

    def delete_topics(self, topics: list[tuple[str | None, object]], timeout_ms: int,
                      quota: ControllerMutationQuota) -> list[TopicResult]:
        """DeleteTopics of (name, topic id) pairs, one of them given: mark each topic for deletion, wait until
        the controller has deleted it. With delete.topic.enable=false: TOPIC_DELETION_DISABLED for all."""
        results = [TopicResult(name, topic_id=topic_id) for name, topic_id in topics]
        if not self.is_active_controller():
            for r in results:
                r.fail(Errors.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
            return results
        if not self.config["delete.topic.enable"]:
            for r in results:
                r.fail(Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            return results
        names_by_id = {i: n for n, i in self.cache.topic_ids.items()}
        marked: dict[str, None] = {}
        for r in results:
            if r.topic_id is not None and getattr(r.topic_id, "int", 0) != 0:
                if r.name is not None:
                    r.fail(Errors.INVALID_REQUEST, "Topic name and topic ID can not both be specified.")
                    continue
                r.name = names_by_id.get(r.topic_id)
                if r.name is None:
                    r.fail(Errors.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                    continue
            partitions = None if r.name is None else self.cache.topic_partitions(r.name)
            if partitions is None:
                r.fail(*_UNKNOWN_TOPIC)
                continue
            try:
                quota.record(len(partitions))
                self.admin_zk.delete_topic(r.name)
            except UnknownTopicError:
                r.fail(*_UNKNOWN_TOPIC)
                continue
            except TopicAlreadyMarkedForDeletionError:
                pass    # still tracked until the controller has deleted it, as Kafka
            except (ZkError, ThrottlingQuotaExceeded) as e:
                r.fail(*_error_of(e))
                continue
            marked[r.name] = None
        pending = self._await(DelayedDeleteTopics, marked, timeout_ms)
        for r in results:
            if r.error == Errors.NONE and r.name in pending:
                r.fail(Errors.REQUEST_TIMED_OUT, None)
        return results

    def create_partitions(self, topics: list[tuple[str, int, list[list[int]] | None]], timeout_ms: int,
                          validate_only: bool, quota: ControllerMutationQuota) -> list[TopicResult]:
        """CreatePartitions of (topic, new count, new partitions' replicas or None), then wait until the new
        partitions have leaders."""
        named = Counter(name for name, _, _ in topics)
        brokers = self._alive_brokers()
        results, grown = [], {}
        for name, count, assignments in topics:
            r = TopicResult(name)
            results.append(r)
            if named[name] > 1:
                r.fail(Errors.INVALID_REQUEST, "Duplicate topic in request.")
                continue
            try:
                self.admin_zk.add_partitions(name, count, assignments, brokers, validate_only,
                                             before_write=lambda new: quota.record(len(new)))
            except (AdminError, ZkError, ThrottlingQuotaExceeded) as e:
                r.fail(*_error_of(e))
                continue
            if not validate_only:
                grown[name] = count
        pending = self._await(DelayedCreatePartitions, grown, timeout_ms) if timeout_ms > 0 else {}
        for r in results:
            if r.error == Errors.NONE and r.name in pending:
                r.fail(Errors.REQUEST_TIMED_OUT, None)
        return results

    def auto_create_topic(self, name: str) -> Errors:
        """Create a topic a Metadata request named (num.partitions, default.replication.factor), when
        auto.create.topics.enable allows; the error to answer with meanwhile."""
        cfg = self.config
        if not cfg["auto.create.topics.enable"] or name in INTERNAL_TOPICS:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        try:
            self.admin_zk.create_topic(name, partitions=cfg["num.partitions"],
                                       replication_factor=cfg["default.replication.factor"],
                                       brokers=self._alive_brokers())
        except TopicExistsError:
            pass  # created meanwhile: its leaders are on their way
        except AdminError as e:
            return Errors(e.code)
        except ZkError:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        return Errors.LEADER_NOT_AVAILABLE

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              config: dict[str, str]) -> None:
        """Create an internal topic (Kafka's KafkaApis.createInternalTopic). With fewer live brokers than the
        replication factor nothing is created (callers answer COORDINATOR_NOT_AVAILABLE and clients retry).
        Attempts are spaced by INTERNAL_CREATE_RETRY_MS."""
        now = self.clock.monotonic_ms()
        if now - self._last_internal_attempt.get(name, now - INTERNAL_CREATE_RETRY_MS) < INTERNAL_CREATE_RETRY_MS:
            return
        self._last_internal_attempt[name] = now
        try:
            self.admin_zk.create_topic(name, config, partitions=partitions, replication_factor=replication_factor,
                                       brokers=self._alive_brokers())
            log.info("created topic %s with %d partitions and replication factor %d", name, partitions,
                     replication_factor)
        except TopicExistsError:
            pass    # being created: its leaders are on their way
        except AdminError as e:
            log.info("cannot create %s yet: %s", name, e)
        except ZkError as e:   # e.g. another broker creating it at the same moment
            log.info("creating %s failed: %r", name, e)

    # ---- configs: describe ---------------------------------------------------------------------------------
    def describe_configs(self, resources: list[tuple[int, str, set[str] | None]]
                         ) -> list[tuple[Errors, str | None, list[ConfigEntry]]]:
        """(error, message, entries) per (resource type, name, keys or None for all)."""
        out = []
        for kind, name, keys in resources:
            try:
                out.append((Errors.NONE, None, self._describe(kind, name, keys)))
            except (ApiError, AdminError, ZkError) as e:
                out.append((*_error_of(e), []))
            except InvalidConfig as e:
                out.append((Errors.INVALID_CONFIG, str(e), []))
        return out

    def _describe(self, kind: int, name: str, keys: set[str] | None) -> list[ConfigEntry]:
        if kind == TOPIC:
            return [e for e in self._topic_entries(self.admin_zk.topic_config(name))
                    if keys is None or e.name in keys]
        if kind == BROKER:
            if name == "":
                entries = self._default_broker_entries()
            else:
                self._own_broker_id(name, f"{self.broker_id} or empty string")
                entries = self._broker_entries()
            return [e for e in entries if keys is None or e.name in keys]
        raise ApiError(Errors.INVALID_REQUEST, f"Unsupported resource type: {kind}")

    def _own_broker_id(self, name: str, expected: str) -> int:
        """The id a BROKER resource names, which must be this broker's (clients send it to that broker)."""
        try:
            broker_id = int(name)
        except ValueError:
            raise ApiError(Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
        if broker_id != self.broker_id:
            raise ApiError(Errors.INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but received {name}")
        return broker_id

    def _broker_synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        """Kafka's configSynonyms of a broker setting's name: per layer (dynamic per-broker, dynamic default, static,
        default), each of its synonyms that has a value there; those before the first entry of name itself
        dropped (log.retention.ms's when describing log.retention.hours, a listener's override when describing the
        setting it overrides)."""
        cfg = self.config

        def static(n: str) -> str | None:
            if n in cfg.static_listener_overrides:
                return cfg.static_listener_overrides[n]
            if n not in cfg.originals:
                return None
            return format_value(cfg.static_values[n]) if n in SETTINGS else cfg.originals[n]
        layers = ((cfg.dynamic_broker.get, DYNAMIC_BROKER_CONFIG),
                  (cfg.dynamic_default.get, DYNAMIC_DEFAULT_BROKER_CONFIG), (static, STATIC_BROKER_CONFIG),
                  (lambda n: format_value(SETTINGS[n].default) if n in SETTINGS else None, DEFAULT_CONFIG))
        synonyms = [(n, value, source) for value_of, source in layers for n in broker_synonym_names(name)
                    if (value := value_of(n)) is not None]
        return list(dropwhile(lambda synonym: synonym[0] != name, synonyms))

    def _topic_entries(self, overrides: dict[str, str]) -> list[ConfigEntry]:
        """Every topic config: the topic's override, else the broker setting it falls back to, else LogConfig's
        default, formatted as Kafka formats it."""
        effective = LogConfig.from_props(self.config.values, overrides).as_props()
        out = []
        for name, key in TOPIC_CONFIGS.items():
            synonyms = [(name, overrides[name], DYNAMIC_TOPIC_CONFIG)] if name in overrides else []
            if key.synonyms:
                synonyms += self._broker_synonyms(key.synonyms[0][0])
            value = effective.get(name, synonyms[0][1] if synonyms else format_value(key.default))
            out.append(ConfigEntry(name, value, synonyms[0][2] if synonyms else DEFAULT_CONFIG, key.type,
                                   synonyms=synonyms))
        return out

    def _broker_entries(self) -> list[ConfigEntry]:
        """Every broker setting (the internal KRaft ones only when given) and every other name given (a listener's
        override: typed as the setting it overrides; a key kbroker does not know: no type, its value hidden), as
        Kafka describes its originals and values; read-only unless Kafka can update it dynamically."""
        cfg = self.config
        given = [n for n in {**cfg.originals, **cfg.listener_overrides} if n not in SETTINGS or n in KRAFT_SETTINGS]
        out = []
        for name in [n for n in SETTINGS if n not in KRAFT_SETTINGS] + given:
            base = setting_of(name)
            value = cfg.values.get(name) if name in SETTINGS else cfg.listener_overrides.get(name) if base else None
            synonyms = self._broker_synonyms(name)
            out.append(ConfigEntry(name, format_value(value), synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                                   SETTINGS[base].type if base else None, read_only=update_mode(name) == "read-only",
                                   synonyms=synonyms))
        return out

    def _default_broker_entries(self) -> list[ConfigEntry]:
        """The cluster-wide dynamic defaults this broker applies, each with only its DYNAMIC_DEFAULT synonyms."""
        return [ConfigEntry(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_broker_key(name).type,
                            synonyms=[s for s in self._broker_synonyms(name) if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG])
                for name, value in sorted(self.config.dynamic_default.items())]

    # ---- configs: alter ------------------------------------------------------------------------------------
    def alter_configs(self, resources: list[tuple[int, str, list[tuple[str, str | None]]]],
                      validate_only: bool) -> list[tuple[Errors, str | None]]:
        """AlterConfigs: each resource's entries replace its whole set of dynamic configs."""
        def replace(_current: dict[str, str], entries, _kind) -> dict[str, str]:
            nulls = [name for name, value in entries if value is None]
            if nulls:
                raise ApiError(Errors.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
            return dict(entries)
        return [self._alter(kind, name, replace, entries, validate_only) for kind, name, entries in resources]

    def incremental_alter_configs(self, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
                                  validate_only: bool) -> list[tuple[Errors, str | None]]:
        """IncrementalAlterConfigs: each entry's operation (SET, DELETE, APPEND, SUBTRACT) applied to the
        resource's current dynamic configs; APPEND/SUBTRACT only for list configs, starting from the current
        value, else the config's default."""
        return [self._alter(kind, name, _apply_operations, entries, validate_only)
                for kind, name, entries in resources]

    def _alter(self, kind: int, name: str, change, entries, validate_only: bool) -> tuple[Errors, str | None]:
        """The one path of both alter APIs for one resource: change(current, entries, kind) -> the new set,
        validated, then written with its change notification unless validate_only."""
        try:
            if kind == TOPIC:
                config = change(self.admin_zk.topic_config(name), entries, kind)
                self.admin_zk.change_topic_config(name, config, validate_only)
            elif kind == BROKER:
                broker_id = self._own_broker_id(name, str(self.broker_id)) if name else None
                current = self.admin_zk.fetch_entity_config("brokers", entity_name(broker_id))
                config = change(self._decoded(current), entries, kind)
                self._check_thread_counts(validate_broker_config(config, SETTINGS.__contains__, broker_id is not None),
                                          broker_id is not None)
                error = self.config.tls_update_error(config) if broker_id is not None else None
                if error:   # Kafka's message, then what its SslFactory found
                    raise InvalidConfigValueError(f"Invalid dynamic configuration ({error})")
                if not validate_only:
                    config = self._encoded(config)
                self.admin_zk.change_broker_config(broker_id, config, validate_only, SETTINGS.__contains__)
            else:
                raise ApiError(Errors.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, but "
                                                       f"resource type is {RESOURCE_TYPE_NAMES.get(kind, kind)}")
            return Errors.NONE, None
        except InvalidConfigValueError as e:
            return Errors.INVALID_REQUEST, (f"Invalid config value for resource ConfigResource(type="
                                            f"{RESOURCE_TYPE_NAMES.get(kind, kind)}, name='{name}'): {e}")
        except (ApiError, AdminError, ZkError) as e:
            return _error_of(e)

    def _decoded(self, stored: dict[str, str]) -> dict[str, str]:
        """A broker entity's configs with their passwords decoded; one that does not decode is left out (Kafka's
        DynamicBrokerConfig.fromPersistentProps)."""
        out = {}
        for key, value in stored.items():
            try:
                out[key] = self.config.decode_password(value) if is_password(key) else value
            except PasswordEncoderError as e:
                log.error("Dynamic password config %s could not be decoded, ignoring: %s", key, e)
        return out

    def _encoded(self, config: dict[str, str]) -> dict[str, str]:
        """A broker's configs as written to ZooKeeper: passwords encoded with password.encoder.secret (Kafka's
        toPersistentProps, refusing them without one)."""
        try:
            return {k: self.config.encode_password(v) if is_password(k) else v for k, v in config.items()}
        except PasswordEncoderError as e:
            raise InvalidConfigValueError(str(e)) from None

    def _check_thread_counts(self, new: dict, per_broker: bool) -> None:
        """Kafka refuses to resize a thread pool (or the cleaner) below half or above double its current size."""
        config = self.config
        for name in THREAD_COUNTS:
            if name not in new or (not per_broker and name in config.dynamic_broker):
                continue  # a broker's own value wins over a new default
            value, current = new[name], config[name]
            if value == current:
                continue
            if name == "log.cleaner.threads":
                what = "Log cleaner threads"
                if value < 1:
                    raise InvalidConfigValueError(f"{what} should be at least 1")
                if value < current // 2:
                    raise InvalidConfigValueError(f"{what} cannot be reduced to less than half the current value "
                                                  f"{current}")
                if value > current * 2:
                    raise InvalidConfigValueError(f"{what} cannot be increased to more than double the current "
                                                  f"value {current}")
                continue
            what = f"Dynamic thread count update validation failed for {name}={value}"
            if value < current // 2:
                raise InvalidConfigValueError(f"{what}, value should be at least half the current value {current}")
            if value > current * 2:
                raise InvalidConfigValueError(f"{what}, value should not be greater than double the current value "
                                              f"{current}")

    # ---- SCRAM credentials (ZkAdminManager.describeUserScramCredentials / alterUserScramCredentials) ----------
    def describe_user_scram_credentials(self, users: list[str] | None
                                        ) -> tuple[Errors, str | None, list[ScramUserResult]]:
        """(error, message, results). None or [] describes every user with a credential (sorted by name);
        otherwise each distinct name in request order: an empty name or one without credentials
        RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE. Failing to list the users is the top-level
        error."""
        results: dict[str, ScramUserResult] = {}

        def add(user: str, config: dict[str, str], explicit: bool) -> None:
            mechanisms = [m for m in scram.MECHANISMS if m in config]
            if mechanisms:
                try:
                    infos = [(scram.MECHANISMS[m][1], scram.ScramCredential.from_config(config[m]).iterations)
                             for m in mechanisms]
                    results[user] = ScramUserResult(user, credentials=infos)
                except ValueError as e:
                    results[user] = ScramUserResult(user, Errors.UNKNOWN_SERVER_ERROR, str(e))
            elif explicit:
                results[user] = ScramUserResult(user, Errors.RESOURCE_NOT_FOUND,
                                                f"Attempt to describe a user credential that does not exist: {user}")
        try:
            if not users:
                for user, config in self.admin_zk.all_user_configs().items():
                    add(user, config, False)
                return Errors.NONE, None, [results[u] for u in sorted(results)]
            counts = Counter(users)
            for user in counts:
                if user == "":
                    results[user] = ScramUserResult(user, Errors.RESOURCE_NOT_FOUND, "Username must not be empty")
                elif counts[user] > 1:
                    results[user] = ScramUserResult(
                        user, Errors.DUPLICATE_RESOURCE,
                        f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}")
                else:
                    try:
                        add(user, self.admin_zk.user_config(user), True)
                    except ZkError as e:
                        results[user] = ScramUserResult(user, Errors.UNKNOWN_SERVER_ERROR, str(e))
            return Errors.NONE, None, [results[u] for u in counts]
        except ZkError as e:
            return Errors.UNKNOWN_SERVER_ERROR, str(e), []

    def alter_user_scram_credentials(self, upsertions: list[tuple[str, int, int, bytes, bytes]],
                                     deletions: list[tuple[str, int]]) -> list[ScramUserResult]:
        """Upsertions (user, mechanism id, iterations, salt, salted password) and deletions (user, mechanism id),
        checked per user as Kafka does, in this order: an empty name (UNACCEPTABLE_CREDENTIAL "Username must not
        be empty"), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), iterations outside 4096..16384
        (UNACCEPTABLE_CREDENTIAL); then the same user and mechanism twice (DUPLICATE_RESOURCE); then deleting a
        credential that is not there (RESOURCE_NOT_FOUND). A user with any failure is left untouched; each other
        user's znode is rewritten once, with its notification."""
        def status(user: str, mech_id: int, iterations: int | None) -> str | None:
            if user == "":
                return "Username must not be empty"
            if mech_id not in scram.MECHANISM_BY_ID:
                return "Unknown SCRAM mechanism"
            if iterations is not None and iterations < scram.MIN_ITERATIONS:
                return "Too few iterations"
            if iterations is not None and iterations > scram.MAX_ITERATIONS:
                return "Too many iterations"
            return None
        illegal: dict[str, str] = {}
        for user, mech_id in deletions:
            if (message := status(user, mech_id, None)) is not None:
                illegal[user] = message
        for user, mech_id, iterations, _, _ in upsertions:
            if (message := status(user, mech_id, iterations)) is not None:
                illegal[user] = message
        results = [ScramUserResult(user, Errors.UNSUPPORTED_SASL_MECHANISM if message == "Unknown SCRAM mechanism"
                                   else Errors.UNACCEPTABLE_CREDENTIAL, message) for user, message in illegal.items()]
        pairs = Counter([(u[0], u[1]) for u in upsertions if u[0] not in illegal]
                        + [d for d in deletions if d[0] not in illegal])
        duplicated = list(dict.fromkeys(user for (user, _), n in pairs.items() if n > 1))
        results += [ScramUserResult(user, Errors.DUPLICATE_RESOURCE,
                                    "A user credential cannot be altered twice in the same request")
                    for user in duplicated]
        candidates = [u for u in dict.fromkeys(user for user, _ in pairs) if u not in duplicated]
        configs: dict[str, dict[str, str]] = {}
        for user in candidates:
            try:
                configs[user] = self.admin_zk.user_config(user)
            except ZkError as e:
                results.append(ScramUserResult(user, Errors.UNKNOWN_SERVER_ERROR, str(e)))
        missing = list(dict.fromkeys(user for user, mech_id in deletions
                                     if user in configs and scram.MECHANISM_BY_ID[mech_id] not in configs[user]))
        results += [ScramUserResult(user, Errors.RESOURCE_NOT_FOUND,
                                    "Attempt to delete a user credential that does not exist") for user in missing]
        for user in (u for u in configs if u not in missing):
            config = configs[user]
            for name, mech_id in deletions:
                if name == user:
                    config.pop(scram.MECHANISM_BY_ID[mech_id], None)
            for name, mech_id, iterations, salt, salted in upsertions:
                if name == user:
                    mechanism = scram.MECHANISM_BY_ID[mech_id]
                    config[mechanism] = scram.credential_from_salted(mechanism, salt, salted, iterations).to_config()
            try:
                self.admin_zk.change_user_config(user, config)
            except ZkError as e:
                log.info("Error encountered while altering user SCRAM credentials of %s: %s", user, e)
                results.append(ScramUserResult(user, Errors.UNKNOWN_SERVER_ERROR, str(e)))
                continue
            results.append(ScramUserResult(user))
        return results

    # ---- client quotas (ZkAdminManager.describeClientQuotas / alterClientQuotas) -----------------------------------
    def describe_client_quotas(self, components: list[tuple[str, int, str | None]], strict: bool
                               ) -> tuple[Errors, str | None, list[tuple[QuotaEntity, dict[str, float]]] | None]:
        """(error, message, entries): every entity the filter matches with its quota values, sorted (zk.admin's
        describe_quotas). A filter refused is the error (INVALID_REQUEST, UNSUPPORTED_VERSION), entries None.
        Znodes or values that do not parse are left out and logged, as nothing a client asked for is wrong."""
        try:
            found = self.admin_zk.describe_quotas(components, strict)
        except (AdminError, ZkError) as e:
            return *_error_of(e), None
        for problem in found.problems:
            log.warning("Left out of DescribeClientQuotas: %s", problem)
        return Errors.NONE, None, sorted(found.entities.items(), key=lambda item: entity_order(item[0]))

    def alter_client_quotas(self, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
                            validate_only: bool) -> list[tuple[list[tuple[str, str | None]], Errors, str | None]]:
        """AlterClientQuotas of (entity parts as given, ops (key, value, remove)): (parts, error, message) per
        distinct entity, the last entry of an entity named twice winning (2.8 answers from a map by entity)."""
        results = {}
        for parts, ops in entries:
            key = tuple(sorted(parts, key=lambda p: (p[0], p[1] is not None, p[1] or "")))
            results[key] = (parts, *self._alter_client_quota(parts, ops, validate_only))
        return list(results.values())

    def _alter_client_quota(self, parts, ops, validate_only: bool) -> tuple[Errors, str | None]:
        """One entity's ops applied in order to its stored config, then the whole config validated and (unless
        validate_only) written with its notification. An unknown key is INVALID_REQUEST whether set or removed
        (2.8 removes any key named, a user's SCRAM credentials included); removing a key not set is no error."""
        try:
            entity = quota_entity(parts)
            keys = quota_keys(entity)
            config = self.admin_zk.quota_config(entity)
            for key, value, remove in ops:
                if key not in keys:
                    raise InvalidRequestError(f"Invalid configuration key {key}")
                if remove:
                    config.pop(key, None)
                else:
                    config[key] = stored_value(key, keys[key], value)
            self.admin_zk.change_quota_config(entity, config, validate_only)
            return Errors.NONE, None
        except InvalidConfigError as e:     # a value already stored that does not parse, an unknown key stored
            return Errors.INVALID_REQUEST, str(e)
        except (AdminError, ZkError) as e:
            log.info("Error encountered while updating client quotas of %s: %s", parts, e)
            return _error_of(e)
        except ValueError as e:             # the znode holds data that is not a config's JSON
            return Errors.UNKNOWN_SERVER_ERROR, str(e)


def _items(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v != ""]


def _apply_operations(current: dict[str, str], entries: list[tuple[str, int, str | None]], kind: int
                      ) -> dict[str, str]:
    """IncrementalAlterConfigs' operations applied to a copy of current."""
    keys = DYNAMIC_BROKER_CONFIGS if kind == BROKER else TOPIC_CONFIGS
    dup = sorted(n for n, k in Counter(name for name, _, _ in entries).items() if k > 1)
    if dup:
        raise ApiError(Errors.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(dup)}")
    config = dict(current)
    for name, op, value in entries:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise ApiError(Errors.INVALID_REQUEST, f"Unknown config operation {op} for config key: {name}")
        if op != DELETE and value is None:
            raise ApiError(Errors.INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == SET:
            config[name] = value
        elif op == DELETE:
            config.pop(name, None)
        else:
            if name not in keys or keys[name].type != "list":
                verb = "append" if op == APPEND else "subtract"
                raise ApiError(Errors.INVALID_REQUEST, f"Config value {verb} is not allowed for config key: {name}")
            old = _items(config.get(name, format_value(keys[name].default)))
            given = _items(value)
            config[name] = ",".join(old + [v for v in given if v not in old] if op == APPEND
                                    else [v for v in old if v not in given])
    return config
