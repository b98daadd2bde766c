"""kadmin's Admin API calls (`--bootstrap-server`): topics, configs, reassignments, leader elections, the cluster,
consumer groups, transactions and users' SCRAM credentials, built on the project's protocol client
(kbroker.protocol.client), which does the framing, version choice, routing, retries and errors.

kafka-python's message classes encode the requests and decode the responses; what is kadmin's here is which
requests a command sends and how their answers become results or one line for the user. Routing is Kafka's
AdminClient's: CreateTopics, DeleteTopics, ElectLeaders and Alter/ListPartitionReassignments go to the controller
(NOT_CONTROLLER or a lost connection looks it up again); a BROKER config resource named by id goes to that
broker, and AlterReplicaLogDirs / DescribeLogDirs to the brokers holding the replicas; group requests to the
group's coordinator, DescribeTransactions to the transactional id's coordinator, ListGroups and ListTransactions to
every broker, DescribeProducers and WriteTxnMarkers to partition leaders, AlterUserScramCredentials to the
controller; everything else (the client-quota APIs among them) to whichever broker answers first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kafka.protocol.admin import (AlterClientQuotasRequest, AlterPartitionReassignmentsRequest,
                                  AlterReplicaLogDirsRequest, AlterUserScramCredentialsRequest,
                                  CreatePartitionsRequest, CreateTopicsRequest,
                                  DeleteTopicsRequest, DescribeClientQuotasRequest, DescribeClusterRequest,
                                  DescribeConfigsRequest, DescribeLogDirsRequest, DescribeUserScramCredentialsRequest,
                                  ElectLeadersRequest, IncrementalAlterConfigsRequest,
                                  ListPartitionReassignmentsRequest)
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.transactions import (DescribeProducersRequest, DescribeTransactionsRequest,
                                               ListTransactionsRequest)
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from kbroker.protocol.client import (COORDINATOR_ERRORS, TRANSACTION, Broker, ClusterClient, Errors, KafkaError,
                                     Metadata, TimedOut, TopicPartition, error_name, error_text)
from kbroker.protocol.client.security import ClientSecurity
from kbroker.protocol.interbroker import WriteTxnMarkersRequest
from kbroker.protocol.sasl import scram

# Config resource types and the config sources of DescribeConfigs v1+.
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
SET, DELETE = 0, 1                 # IncrementalAlterConfigs operations
PREFERRED, UNCLEAN = 0, 1          # ElectLeaders election types
UNKNOWN_OFFSET = -1
UNKNOWN_TOPIC_OR_PARTITION = Errors.UNKNOWN_TOPIC_OR_PARTITION
NOT_CONTROLLER = Errors.NOT_CONTROLLER


def by_topic(items) -> dict[str, list]:
    """{topic: [value, ...]} of (topic, value) pairs, topics and values in the order given: a request's topic
    array from its partitions."""
    out: dict[str, list] = {}
    for topic, value in items:
        out.setdefault(topic, []).append(value)
    return out


def refused(message: str | None, code: int, fallback: str) -> KafkaError:
    """The error for a refusal: the broker's message (or fallback) and the error code's name, e.g. "Topic 't'
    already exists. (TOPIC_ALREADY_EXISTS)"; REQUEST_TIMED_OUT is a TimedOut."""
    text = f"{message or fallback} ({error_name(code)})"
    return TimedOut(text) if code == Errors.REQUEST_TIMED_OUT else KafkaError(code, text)


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass
class GroupDescription:
    group_id: str
    state: str                      # Empty, Stable, PreparingRebalance, CompletingRebalance, Dead
    protocol_type: str
    protocol: str                   # the assignment strategy (empty unless Stable)
    members: list[MemberDescription]
    coordinator: Broker


@dataclass
class ConfigEntry:
    """One config of a DescribeConfigs answer; source and the synonyms' sources are Kafka's names."""
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]]    # (name, value, source), most specific first


@dataclass
class TransactionDescription:
    """A transactional id as its coordinator describes it (DescribeTransactions)."""
    transactional_id: str
    coordinator: int                # broker id
    state: str                      # Kafka's names: Empty, Ongoing, PrepareCommit, CompleteCommit, ...
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int              # -1: no transaction started
    partitions: list[TopicPartition]


@dataclass
class ProducerState:
    """An active producer of a partition (DescribeProducers)."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int           # first offset of its open transaction, -1 when none


class ScramUpsertion(NamedTuple):
    """A SCRAM credential to set: the password is salted here (a Kafka-style random salt) and never sent."""
    user: str
    mechanism: str                  # SCRAM-SHA-256 or SCRAM-SHA-512
    password: str
    iterations: int = scram.MIN_ITERATIONS


class QuotaEntry(NamedTuple):
    """One entity of a DescribeClientQuotas answer: its (entity type, name; None for the default) parts, in the
    broker's order, and its quota values."""
    entity: tuple[tuple[str, str | None], ...]
    values: dict[str, float]


class LogDirReplica(NamedTuple):
    """One replica in a broker's log directory (DescribeLogDirs)."""
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


class LogDir(NamedTuple):
    path: str
    error_code: int                 # KAFKA_STORAGE_ERROR: the directory is offline
    replicas: list[LogDirReplica]


class UserResult(NamedTuple):
    """One user's answer to Describe/AlterUserScramCredentials; credentials: mechanism name -> iterations."""
    user: str
    error_code: int
    error_message: str | None
    credentials: dict[str, int] = {}



def _config_refused(resource_type: int, name: str, res, fallback: str) -> KafkaError:
    """A config resource's refusal; an unknown topic in kadmin's words (brokers word it differently)."""
    if resource_type == TOPIC_RESOURCE and res.error_code == UNKNOWN_TOPIC_OR_PARTITION:
        return refused(f"Topic '{name}' does not exist.", res.error_code, "")
    what = f"topic '{name}'" if resource_type == TOPIC_RESOURCE else \
        f"broker {name}" if name else "the brokers' cluster-wide defaults"
    return refused(res.error_message, res.error_code, fallback.format(what))


def _check_topic_result(results, name: str, fallback: str) -> None:
    """Raise for topic NAME's entry of a controller's DeleteTopics or CreatePartitions answer unless it succeeded
    (REQUEST_TIMED_OUT with timeout 0 only means the controller has not finished yet)."""
    (result,) = [t for t in results if t.name == name] or [None]
    if result is None:
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"The controller did not answer for topic '{name}'.")
    if result.error_code == UNKNOWN_TOPIC_OR_PARTITION:
        raise refused(f"Topic '{name}' does not exist.", result.error_code, "")
    if result.error_code not in (0, Errors.REQUEST_TIMED_OUT):
        raise refused(result.error_message, result.error_code, fallback)


class AdminClient(ClusterClient):
    """Blocking Admin API calls against a cluster reached through bootstrap servers.

    Every call finishes within `timeout` seconds of its start (retries included) or raises KafkaError.
    """

    def __init__(self, bootstrap: list[tuple[str, int]], timeout: float = 30.0, client_id: str = "kadmin",
                 security: ClientSecurity | None = None):
        """security: how to reach a secured listener (--command-config); plaintext when None."""
        super().__init__(bootstrap, client_id, timeout, security)

    # ---- metadata -----------------------------------------------------------------------------------------

    def brokers(self, deadline: float | None = None) -> dict[int, Broker]:
        return self.metadata([], deadline).brokers

    def topics(self, topics: list[str] | None = None) -> Metadata:
        """Metadata of the named topics (every topic when None); KafkaError naming an unknown topic."""
        md = self.metadata(None if topics is None else list(topics))
        for t in topics or []:
            if t in md.topic_errors or t not in md.topics:
                code = md.topic_errors.get(t, UNKNOWN_TOPIC_OR_PARTITION)
                if code == UNKNOWN_TOPIC_OR_PARTITION:
                    raise KafkaError(code, f"Topic '{t}' does not exist. ({error_name(code)})")
                raise KafkaError(code, f"Cannot describe topic '{t}': {error_text(code)}")
        return md

    def topic_partitions(self, topics: list[str]) -> dict[str, list[int]]:
        """Every partition of each topic; KafkaError naming an unknown topic."""
        md = self.topics(topics)
        return {t: sorted(md.topics[t].partitions) for t in topics}

    def describe_cluster(self) -> Metadata:
        """Cluster id, controller and live brokers: DescribeCluster when the broker serves it (Kafka 2.8+), else
        Metadata."""
        deadline = self.deadline()
        address = self.any_broker(deadline)
        if DescribeClusterRequest.API_KEY not in self.connection(address, deadline).versions:
            return self.metadata([], deadline)

        def build(c):
            return DescribeClusterRequest(version=c.version_for(DescribeClusterRequest),
                                          include_cluster_authorized_operations=False)
        r = self.send_any(build, deadline)
        if r.error_code:
            raise refused(r.error_message, r.error_code, "DescribeCluster was refused.")
        return Metadata({b.broker_id: Broker(b.broker_id, b.host, b.port, b.rack) for b in r.brokers},
                        r.controller_id, r.cluster_id)

    # ---- topics -------------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                     assignment: dict[int, list[int]] | None, config: dict[str, str]) -> tuple[int, int]:
        """CreateTopics to the controller with timeout 0 (None partitions or replication factor: the brokers'
        defaults, sent as -1): the broker writes the topic and answers at once
        (REQUEST_TIMED_OUT then only means "leaders not elected yet", as Kafka's ZkAdminManager answers a zero
        timeout). Returns (partitions, replication factor); KafkaError with the broker's message."""
        if not assignment and (partitions is None or replication_factor is None):
            # Learn the defaults the controller would apply (a validate-only v5 answer carries them), so the
            # result can say what was created: a real creation with timeout 0 answers before it knows.
            partitions, replication_factor = self._create_topic(name, partitions, replication_factor, None, config,
                                                                validate_only=True) or (partitions, replication_factor)
        created = self._create_topic(name, partitions, replication_factor, assignment, config, validate_only=False)
        if assignment:
            return len(assignment), len(next(iter(assignment.values())))
        return created or (partitions, replication_factor)

    def _create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                      assignment: dict[int, list[int]] | None, config: dict[str, str],
                      validate_only: bool) -> tuple[int, int] | None:
        """One topic's CreateTopics (timeout 0) at the controller: the (partitions, replication factor) it
        answers (v5+), else None. KafkaError when refused (a real creation's REQUEST_TIMED_OUT is no refusal)."""
        Topic = CreateTopicsRequest.CreatableTopic
        topic = Topic(name=name, num_partitions=-1 if assignment or partitions is None else partitions,
                      replication_factor=-1 if assignment or replication_factor is None else replication_factor,
                      assignments=[Topic.CreatableReplicaAssignment(partition_index=p, broker_ids=list(r))
                                   for p, r in sorted((assignment or {}).items())],
                      configs=[Topic.CreatableTopicConfig(name=k, value=v) for k, v in config.items()])

        def build(c):
            return CreateTopicsRequest(version=c.version_for(CreateTopicsRequest, 1), topics=[topic], timeout_ms=0,
                                       validate_only=validate_only)
        r = self.send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.topics),
                                  self.deadline(), f"create topic '{name}'")
        (result,) = [t for t in r.topics if t.name == name] or [None]
        if result is None:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"The controller did not answer for topic '{name}'.")
        if result.error_code and (validate_only or result.error_code != Errors.REQUEST_TIMED_OUT):
            raise refused(result.error_message, result.error_code, f"Topic '{name}' could not be created.")
        if getattr(result, "num_partitions", -1) > 0:   # v5+
            return result.num_partitions, result.replication_factor
        return None

    def name_taken(self, name: str) -> bool:
        """Whether the controller would refuse to create topic NAME as existing (TOPIC_ALREADY_EXISTS, which it
        also answers while a deleted topic's znodes remain): a validate-only CreateTopics of one replica."""
        Topic = CreateTopicsRequest.CreatableTopic

        def build(c):
            return CreateTopicsRequest(version=c.version_for(CreateTopicsRequest, 1), timeout_ms=0,
                                       validate_only=True, topics=[Topic(name=name, num_partitions=1,
                                                                         replication_factor=1, assignments=[],
                                                                         configs=[])])
        r = self.send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.topics),
                                  self.deadline(), f"check topic '{name}'")
        return any(t.error_code == Errors.TOPIC_ALREADY_EXISTS for t in r.topics)

    def delete_topic(self, name: str) -> None:
        """DeleteTopics to the controller with timeout 0 (the topic is marked for deletion; REQUEST_TIMED_OUT
        only means the controller has not finished yet)."""
        def build(c):
            v = c.version_for(DeleteTopicsRequest)
            if v >= 6:
                return DeleteTopicsRequest(version=v, topics=[DeleteTopicsRequest.DeleteTopicState(name=name)],
                                           timeout_ms=0)
            return DeleteTopicsRequest(version=v, topic_names=[name], timeout_ms=0)
        r = self.send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.responses),
                                  self.deadline(), f"delete topic '{name}'")
        _check_topic_result(r.responses, name, f"Topic '{name}' could not be deleted.")

    def create_partitions(self, name: str, count: int) -> None:
        """CreatePartitions to the controller: topic NAME grows to COUNT partitions (the controller assigns the
        new replicas; timeout 0: REQUEST_TIMED_OUT only means their leaders are not elected yet)."""
        Topic = CreatePartitionsRequest.CreatePartitionsTopic

        def build(c):
            return CreatePartitionsRequest(version=c.version_for(CreatePartitionsRequest), timeout_ms=0,
                                           validate_only=False, topics=[Topic(name=name, count=count,
                                                                              assignments=None)])
        r = self.send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.results),
                                  self.deadline(), f"add partitions to topic '{name}'")
        _check_topic_result(r.results, name, f"Topic '{name}' could not get {count} partitions.")

    # ---- configs ------------------------------------------------------------------------------------------

    def _config_destination(self, resource_type: int, name: str, deadline: float):
        """A BROKER resource named by id goes to that broker; anything else to any broker."""
        if resource_type != BROKER_RESOURCE or name == "":
            return None
        md = self.metadata([], deadline)
        broker = md.brokers.get(int(name))
        if broker is None:
            live = ",".join(map(str, sorted(md.brokers))) or "none"
            raise KafkaError(Errors.BROKER_NOT_AVAILABLE,
                             f"Broker {name} is not a live broker of the cluster (live brokers: {live}).")
        return broker

    def describe_configs(self, resources: list[tuple[int, str]], include_synonyms: bool = True,
                         missing_ok: bool = False) -> dict[tuple[int, str], list[ConfigEntry]]:
        """DescribeConfigs for (resource type, name) pairs, each sent where it belongs; KafkaError for the
        first resource refused (UNKNOWN_TOPIC_OR_PARTITION: "Topic 't' does not exist."), except that unknown
        topics are left out with missing_ok."""
        deadline = self.deadline()
        by_destination: dict = {}
        for resource in resources:
            dest = self._config_destination(*resource, deadline)
            by_destination.setdefault(None if dest is None else dest.node_id, (dest, []))[1].append(resource)
        out: dict[tuple[int, str], list[ConfigEntry]] = {}
        Resource = DescribeConfigsRequest.DescribeConfigsResource
        for dest, group in by_destination.values():
            def build(c, group=group):
                return DescribeConfigsRequest(version=c.version_for(DescribeConfigsRequest, 1), resources=[
                    Resource(resource_type=t, resource_name=n, configuration_keys=None) for t, n in group],
                    include_synonyms=include_synonyms, include_documentation=False)
            r = self.send_any(build, deadline) if dest is None else self.send(dest, build, deadline)
            for res in r.results:
                key = (res.resource_type, res.resource_name)
                if res.error_code == UNKNOWN_TOPIC_OR_PARTITION and missing_ok:
                    continue
                if res.error_code:
                    raise _config_refused(key[0], key[1], res, "Cannot describe the configs of {}.")
                out[key] = [ConfigEntry(e.name, e.value, CONFIG_SOURCES.get(e.config_source, str(e.config_source)),
                                        bool(e.read_only), bool(e.is_sensitive),
                                        [(y.name, y.value, CONFIG_SOURCES.get(y.source, str(y.source)))
                                         for y in (e.synonyms or [])])
                            for e in res.configs]
        return out

    def incremental_alter_configs(self, resource_type: int, name: str, to_set: dict[str, str],
                                  to_delete: list[str]) -> None:
        """IncrementalAlterConfigs SET / DELETE on one resource, sent where it belongs."""
        deadline = self.deadline()
        dest = self._config_destination(resource_type, name, deadline)
        Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
        ops = [Resource.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in to_set.items()] + \
              [Resource.AlterableConfig(name=k, config_operation=DELETE, value=None) for k in to_delete]

        def build(c):
            return IncrementalAlterConfigsRequest(version=c.version_for(IncrementalAlterConfigsRequest), resources=[
                Resource(resource_type=resource_type, resource_name=name, configs=ops)], validate_only=False)
        r = self.send_any(build, deadline) if dest is None else self.send(dest, build, deadline)
        for res in r.responses:
            if res.error_code:
                raise _config_refused(resource_type, name, res, "The configs of {} could not be changed.")

    # ---- reassignments and elections ----------------------------------------------------------------------

    def alter_reassignments(self, plan: dict[tuple[str, int], list[int] | None]
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """AlterPartitionReassignments to the controller (None replicas cancel); (error code, message) per
        partition."""
        Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
        grouped = by_topic((t, Topic.ReassignablePartition(partition_index=p, replicas=replicas))
                           for (t, p), replicas in sorted(plan.items()))

        def build(c):
            return AlterPartitionReassignmentsRequest(
                version=c.version_for(AlterPartitionReassignmentsRequest), timeout_ms=int(self.timeout * 1000),
                allow_replication_factor_change=True,
                topics=[Topic(name=t, partitions=ps) for t, ps in grouped.items()])
        r = self.send_controller(build, lambda r: r.error_code == NOT_CONTROLLER, self.deadline(),
                                  "reassign partitions")
        if r.error_code:
            raise refused(r.error_message, r.error_code, "The reassignment was refused.")
        return {(t.name, p.partition_index): (p.error_code, p.error_message) for t in r.responses for p in t.partitions}

    def list_reassignments(self, partitions: list[tuple[str, int]] | None = None
                           ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments from the controller: (replicas, adding, removing) of each partition being
        reassigned (of those given, or all)."""
        Topic = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
        topics = None
        if partitions is not None:
            topics = [Topic(name=t, partition_indexes=ps) for t, ps in sorted(by_topic(partitions).items())]

        def build(c):
            return ListPartitionReassignmentsRequest(version=c.version_for(ListPartitionReassignmentsRequest),
                                                     timeout_ms=int(self.timeout * 1000), topics=topics)
        r = self.send_controller(build, lambda r: r.error_code == NOT_CONTROLLER, self.deadline(),
                                  "list reassignments")
        if r.error_code:
            raise refused(r.error_message, r.error_code, "Listing the reassignments was refused.")
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in r.topics for p in t.partitions}

    # ---- log dirs (JBOD) -----------------------------------------------------------------------------------

    def alter_replica_log_dirs(self, moves: dict[tuple[str, int, int], str]) -> dict[tuple[str, int, int], int]:
        """AlterReplicaLogDirs to each replica's broker: {(topic, partition, broker id): log dir} -> error code
        per replica (BROKER_NOT_AVAILABLE for a broker that is not live)."""
        deadline = self.deadline()
        brokers = self.brokers(deadline)
        Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
        out = {}
        for broker_id in sorted({b for _, _, b in moves}):
            mine = {(t, p): d for (t, p, b), d in moves.items() if b == broker_id}
            if broker_id not in brokers:
                out.update({(t, p, broker_id): Errors.BROKER_NOT_AVAILABLE for t, p in mine})
                continue
            dirs = by_topic((d, tp) for tp, d in sorted(mine.items()))
            r = self.send(brokers[broker_id], lambda c, dirs=dirs: AlterReplicaLogDirsRequest(
                version=c.version_for(AlterReplicaLogDirsRequest), dirs=[
                    Dir(path=d, topics=[Dir.AlterReplicaLogDirTopic(name=t, partitions=ps)
                                        for t, ps in by_topic(tps).items()])
                    for d, tps in dirs.items()]), deadline)
            out.update({(t.topic_name, p.partition_index, broker_id): p.error_code
                        for t in r.results for p in t.partitions})
        return out

    def replica_log_dirs(self, replicas: list[tuple[str, int, int]]
                         ) -> dict[tuple[str, int, int], tuple[str | None, str | None]]:
        """(current log dir, future log dir or None) of each replica its broker holds (DescribeLogDirs; Kafka's
        describeReplicaLogDirs); replicas not found, or on brokers that are not live, are left out."""
        deadline = self.deadline()
        brokers = self.brokers(deadline)
        Topic = DescribeLogDirsRequest.DescribableLogDirTopic
        out: dict = {}
        for broker_id in sorted({b for _, _, b in replicas} & set(brokers)):
            wanted = by_topic((t, p) for t, p, b in replicas if b == broker_id)
            r = self.send(brokers[broker_id], lambda c, wanted=wanted: DescribeLogDirsRequest(
                version=c.version_for(DescribeLogDirsRequest),
                topics=[Topic(topic=t, partitions=ps) for t, ps in wanted.items()]), deadline)
            for result in r.results:
                for t in result.topics:
                    for p in t.partitions:
                        current, future = out.get((t.name, p.partition_index, broker_id), (None, None))
                        if p.is_future_key:
                            future = result.log_dir
                        else:
                            current = result.log_dir
                        out[(t.name, p.partition_index, broker_id)] = (current, future)
        wanted_replicas = set(replicas)
        return {r: dirs for r, dirs in out.items() if r in wanted_replicas}

    def describe_log_dirs(self, broker: Broker, deadline: float | None = None) -> list[LogDir]:
        """Every log directory of one broker with the replicas in it (DescribeLogDirs for all topics)."""
        r = self.send(broker, lambda c: DescribeLogDirsRequest(version=c.version_for(DescribeLogDirsRequest),
                                                               topics=None), deadline or self.deadline())
        return [LogDir(d.log_dir, d.error_code, [LogDirReplica(t.name, p.partition_index, p.partition_size,
                                                               p.offset_lag, bool(p.is_future_key))
                                                 for t in d.topics for p in t.partitions])
                for d in r.results]

    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                      ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """ElectLeaders (PREFERRED or UNCLEAN) to the controller, for the partitions given or every partition
        (None); (error code, message) per partition (ELECTION_NOT_NEEDED: it already has the leader wanted)."""
        Topic = ElectLeadersRequest.TopicPartitions
        topics = None
        if partitions is not None:
            topics = [Topic(topic=t, partitions=ps) for t, ps in by_topic(partitions).items()]

        def build(c):
            return ElectLeadersRequest(version=c.version_for(ElectLeadersRequest, 1 if election_type else 0),
                                       election_type=election_type, topic_partitions=topics,
                                       timeout_ms=int(self.timeout * 1000))

        def not_controller(r):
            return getattr(r, "error_code", 0) == NOT_CONTROLLER or any(
                p.error_code == NOT_CONTROLLER for t in r.replica_election_results for p in t.partition_result)
        r = self.send_controller(build, not_controller, self.deadline(), "elect leaders")
        if getattr(r, "error_code", 0):
            raise refused(None, r.error_code, "The leader election was refused.")
        return {(t.topic, p.partition_id): (p.error_code, p.error_message)
                for t in r.replica_election_results for p in t.partition_result}

    # ---- groups -------------------------------------------------------------------------------------------

    def _every_broker(self, request, what: str, **fields):
        """(broker, response) of one `request` (a message class, with its fields) to every live broker, in id order:
        a broker answering a coordinator error (loading, not available) is asked again until the deadline, any other
        error is a KafkaError naming the broker. `what` says what it lists, for the wait."""
        deadline = self.deadline()
        api = request.__name__.removesuffix("Request")
        for broker in sorted(self.brokers(deadline).values(), key=lambda b: b.node_id):
            while True:
                r = self.send(broker, lambda c: request(version=c.version_for(request), **fields), deadline)
                if r.error_code not in COORDINATOR_ERRORS:
                    break
                self.backoff(deadline, f"broker {broker.node_id} to list its {what} ({error_name(r.error_code)})")
            if r.error_code:
                raise KafkaError(r.error_code, f"{api} to broker {broker.node_id} ({broker}) failed: "
                                               f"{error_text(r.error_code)}")
            yield broker, r

    def list_groups(self) -> list[tuple[str, str, str | None]]:
        """(group id, protocol type, state or None before ListGroups v4) of every group, from every broker."""
        groups: dict[str, tuple[str, str, str | None]] = {}
        for _, r in self._every_broker(ListGroupsRequest, "groups", states_filter=[]):
            for g in r.groups:
                groups[g.group_id] = (g.group_id, g.protocol_type, g.group_state if r.API_VERSION >= 4 else None)
        return [groups[g] for g in sorted(groups)]

    def describe_group(self, group: str) -> GroupDescription:
        def call(coordinator, deadline):
            r = self.send(coordinator, lambda c: DescribeGroupsRequest(
                version=c.version_for(DescribeGroupsRequest), groups=[group], include_authorized_operations=False),
                deadline)
            (g,) = [g for g in r.groups if g.group_id == group] or [None]
            if g is None:
                raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"The coordinator did not describe group '{group}'.")
            return g.error_code, g
        code, g = self.with_coordinator(group, call, f"group '{group}' to be described")
        if code:
            raise KafkaError(code, f"Cannot describe group '{group}': {error_text(code)}")
        members = []
        for m in g.members:
            assignment = []
            if g.protocol_type == "consumer" and m.member_assignment:
                try:
                    decoded = ConsumerProtocolAssignment.decode(bytes(m.member_assignment))
                    assignment = sorted(TopicPartition(t, p) for t, ps in decoded.assigned_partitions for p in ps)
                except Exception:        # not the consumer protocol's layout: show no assignment
                    assignment = []
            members.append(MemberDescription(m.member_id, getattr(m, "group_instance_id", None), m.client_id,
                                             m.client_host, assignment))
        return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members,
                                self.known_coordinator(group) or Broker(-1, "", -1))

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every partition the group has committed an offset for (OffsetFetch v2+, all topics)."""
        def call(coordinator, deadline):
            r = self.send(coordinator, lambda c: OffsetFetchRequest(
                version=c.version_for(OffsetFetchRequest, 2), group_id=group, topics=None, require_stable=False),
                deadline, 2)
            if r.error_code:
                return r.error_code, None
            offsets = {}
            for t in r.topics:
                for p in t.partitions:
                    if p.error_code:
                        return p.error_code, None
                    if p.committed_offset >= 0:
                        offsets[TopicPartition(t.name, p.partition_index)] = p.committed_offset
            return 0, offsets
        code, offsets = self.with_coordinator(group, call, f"the committed offsets of group '{group}'")
        if code:
            raise KafkaError(code, f"Cannot fetch the committed offsets of group '{group}': {error_text(code)}")
        return offsets

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """A simple commit (generation -1, no member id), as Kafka's AdminClient.alterConsumerGroupOffsets
        sends; the error code per partition (0: committed)."""
        if not offsets:
            return {}
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        Part = Topic.OffsetCommitRequestPartition
        grouped = by_topic((tp.topic, Part(partition_index=tp.partition, committed_offset=offset,
                                           committed_leader_epoch=-1, commit_timestamp=-1, committed_metadata=""))
                           for tp, offset in sorted(offsets.items()))

        def call(coordinator, deadline):
            r = self.send(coordinator, lambda c: OffsetCommitRequest(
                version=c.version_for(OffsetCommitRequest, 1), group_id=group, generation_id_or_member_epoch=-1,
                member_id="", group_instance_id=None, retention_time_ms=-1,
                topics=[Topic(name=t, partitions=ps) for t, ps in grouped.items()]), deadline, 1)
            errors = {TopicPartition(t.name, p.partition_index): p.error_code
                      for t in r.topics for p in t.partitions}
            retry = next((e for e in errors.values() if e in COORDINATOR_ERRORS), 0)
            return retry, errors
        _, errors = self.with_coordinator(group, call, f"group '{group}' to commit offsets")
        return errors

    def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """DeleteGroups to each group's coordinator; the error code per group (0: deleted)."""
        out = {}
        for group in groups:
            def call(coordinator, deadline, group=group):
                r = self.send(coordinator, lambda c: DeleteGroupsRequest(
                    version=c.version_for(DeleteGroupsRequest), groups_names=[group]), deadline)
                (code,) = [x.error_code for x in r.results if x.group_id == group] or [None]
                if code is None:
                    raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                                     f"The coordinator did not answer for group '{group}'.")
                return code, code
            out[group], _ = self.with_coordinator(group, call, f"group '{group}' to be deleted")
        return out

    # ---- transactions (KIP-664 APIs, and WriteTxnMarkers for aborts) ----------------------------------------

    def list_transactions(self, states: list[str], producer_ids: list[int]) -> tuple[dict[str, int], list[str]]:
        """({transactional id: coordinator broker id}, unknown state filters) from ListTransactions to every
        broker (each answers for the ids it coordinates)."""
        found: dict[str, int] = {}
        unknown: set[str] = set()
        for broker, r in self._every_broker(ListTransactionsRequest, "transactions", state_filters=states,
                                            producer_id_filters=producer_ids):
            unknown.update(r.unknown_state_filters)
            for t in r.transaction_states:
                found[t.transactional_id] = broker.node_id
        return found, sorted(unknown)

    def describe_transactions_at(self, broker_id: int, transactional_ids: list[str]
                                 ) -> dict[str, TransactionDescription | int]:
        """One DescribeTransactions to a broker that listed these ids: each id's description, or its error
        code (an id whose coordinator moved meanwhile answers NOT_COORDINATOR: ask describe_transaction)."""
        deadline = self.deadline()
        broker = self.brokers(deadline).get(broker_id)
        if broker is None:                        # gone since it listed them
            return {tid: Errors.NOT_COORDINATOR for tid in transactional_ids}
        r = self.send(broker, lambda c: DescribeTransactionsRequest(
            version=c.version_for(DescribeTransactionsRequest), transactional_ids=transactional_ids), deadline)
        return {t.transactional_id: t.error_code or self._transaction(broker_id, t) for t in r.transaction_states}

    @staticmethod
    def _transaction(coordinator: int, t) -> TransactionDescription:
        return TransactionDescription(t.transactional_id, coordinator, t.transaction_state, t.producer_id,
                                      t.producer_epoch, t.transaction_timeout_ms, t.transaction_start_time_ms,
                                      sorted(TopicPartition(x.topic, p) for x in t.topics for p in x.partitions))

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """DescribeTransactions to the id's coordinator; KafkaError (TRANSACTIONAL_ID_NOT_FOUND, ...) if refused."""
        def call(coordinator, deadline):
            r = self.send(coordinator, lambda c: DescribeTransactionsRequest(
                version=c.version_for(DescribeTransactionsRequest), transactional_ids=[transactional_id]), deadline)
            (t,) = [t for t in r.transaction_states if t.transactional_id == transactional_id] or [None]
            if t is None:
                raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                                 f"The coordinator did not describe transactional id '{transactional_id}'.")
            return t.error_code, (coordinator, t)
        code, (coordinator, t) = self.with_coordinator(
            transactional_id, call, f"transactional id '{transactional_id}' to be described", TRANSACTION)
        if code:
            raise KafkaError(code, f"Cannot describe transactional id '{transactional_id}': {error_text(code)}")
        return self._transaction(coordinator.node_id, t)

    def describe_producers(self, tps) -> dict[TopicPartition, tuple[int, list[ProducerState]]]:
        """(error code, active producers) of each partition, from DescribeProducers to its leader; a partition
        without a leader, or whose leader moved, is asked again until the deadline."""
        deadline = self.deadline()
        out: dict[TopicPartition, tuple[int, list[ProducerState]]] = {}
        todo = set(tps)
        while todo:
            by_leader, errors = self.group_by_leader(todo, deadline)
            for tp, code in errors.items():
                out[tp] = (code, [])
            todo -= set(errors)
            for leader, group in by_leader.items():
                r = self.send(leader, lambda c, group=group: DescribeProducersRequest(
                    version=c.version_for(DescribeProducersRequest), topics=[
                        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                        for t, ps in by_topic((tp.topic, tp.partition) for tp in group).items()]), deadline)
                for t in r.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if p.error_code == Errors.NOT_LEADER_OR_FOLLOWER:
                            continue
                        out[tp] = (p.error_code, [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence,
                                                                s.last_timestamp, s.coordinator_epoch,
                                                                s.current_txn_start_offset)
                                                  for s in p.active_producers])
                        todo.discard(tp)
            if todo:
                self.backoff(deadline, f"the leaders of {', '.join(str(tp) for tp in sorted(todo))}")
        return out

    def abort_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int) -> int:
        """An ABORT marker for the producer's open transaction, written by tp's leader (WriteTxnMarkers, as
        Kafka's Admin.abortTransaction); the partition's error code (0: written)."""
        deadline = self.deadline()
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        while True:
            leader = self.leader(tp, deadline)
            r = self.send(leader, lambda c: WriteTxnMarkersRequest(
                version=c.version_for(WriteTxnMarkersRequest), markers=[Marker(
                    producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
                    coordinator_epoch=coordinator_epoch,
                    topics=[Marker.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])])]),
                deadline)
            code = next((p.error_code for m in r.markers for t in m.topics for p in t.partitions
                         if t.name == tp.topic and p.partition_index == tp.partition), Errors.UNKNOWN_SERVER_ERROR)
            if code in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.LEADER_NOT_AVAILABLE):
                self.metadata([tp.topic], deadline)
                self.backoff(deadline, f"the leader of {tp} ({error_name(code)})")
                continue
            return code

    # ---- users' SCRAM credentials (KIP-554) -----------------------------------------------------------------

    def describe_user_scram_credentials(self, users: list[str] | None = None) -> list[UserResult]:
        """DescribeUserScramCredentials at any broker: every user with credentials (None), or the named ones,
        each with its own error; KafkaError for an error of the whole request."""
        def build(c):
            Name = DescribeUserScramCredentialsRequest.UserName
            return DescribeUserScramCredentialsRequest(
                version=c.version_for(DescribeUserScramCredentialsRequest),
                users=None if users is None else [Name(name=u) for u in users])
        r = self.send_any(build, self.deadline())
        if r.error_code:
            raise KafkaError(r.error_code, f"{r.error_message} ({error_name(r.error_code)})" if r.error_message
                             else error_text(r.error_code))
        return [UserResult(u.user, u.error_code, u.error_message,
                           {scram.MECHANISM_BY_ID.get(i.mechanism, str(i.mechanism)): i.iterations
                            for i in u.credential_infos}) for u in r.results]

    def alter_user_scram_credentials(self, upsertions: list[ScramUpsertion],
                                     deletions: list[tuple[str, str]]) -> list[UserResult]:
        """AlterUserScramCredentials at the controller: set credentials, remove (user, mechanism) ones. One
        result per user named, with its own error. A mechanism name kbroker does not know is sent as id 0
        (UNKNOWN), and iterations outside 4096..16384 with an empty salted password (no hashing for nothing):
        the broker refuses both, per user."""
        def mechanism_id(name: str) -> int:
            return scram.MECHANISMS[name][1] if name in scram.MECHANISMS else 0
        Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
        salted = []
        for u in upsertions:
            salt = scram.random_salt()
            password = (scram.salted_password(u.mechanism, u.password, salt, u.iterations)
                        if u.mechanism in scram.MECHANISMS
                        and scram.MIN_ITERATIONS <= u.iterations <= scram.MAX_ITERATIONS else b"")
            salted.append(Upsertion(name=u.user, mechanism=mechanism_id(u.mechanism), iterations=u.iterations,
                                    salt=salt, salted_password=password))

        def build(c):
            return AlterUserScramCredentialsRequest(
                version=c.version_for(AlterUserScramCredentialsRequest), upsertions=salted,
                deletions=[Deletion(name=user, mechanism=mechanism_id(m)) for user, m in deletions])
        r = self.send_controller(build, lambda r: any(u.error_code == Errors.NOT_CONTROLLER for u in r.results),
                                 self.deadline(), "alter SCRAM credentials")
        return [UserResult(u.user, u.error_code, u.error_message) for u in r.results]

    # ---- client quotas (KIP-546) ------------------------------------------------------------------------------

    def describe_client_quotas(self, components: list[tuple[str, int, str | None]], strict: bool) -> list[QuotaEntry]:
        """DescribeClientQuotas at any broker: the entities the filter ((entity type, match type, name)
        components) matches, with their values; KafkaError when the filter is refused."""
        Component = DescribeClientQuotasRequest.ComponentData

        def build(c):
            return DescribeClientQuotasRequest(
                version=c.version_for(DescribeClientQuotasRequest), strict=strict,
                components=[Component(entity_type=t, match_type=m, match=n) for t, m, n in components])
        r = self.send_any(build, self.deadline())
        if r.error_code:
            raise refused(r.error_message, r.error_code, "DescribeClientQuotas was refused.")
        return [QuotaEntry(tuple((e.entity_type, e.entity_name) for e in x.entity),
                           {v.key: v.value for v in x.values}) for x in r.entries or []]

    def alter_client_quotas(self, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]],
                            validate_only: bool = False) -> None:
        """AlterClientQuotas of one entity at any broker: each key set to its value, or removed (None);
        KafkaError with the broker's message when refused."""
        Entry = AlterClientQuotasRequest.EntryData

        def build(c):
            return AlterClientQuotasRequest(
                version=c.version_for(AlterClientQuotasRequest), validate_only=validate_only, entries=[Entry(
                    entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[Entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops])])
        r = self.send_any(build, self.deadline())
        for e in r.entries:
            if e.error_code:
                raise refused(e.error_message, e.error_code, "AlterClientQuotas was refused.")
