"""A small blocking Kafka protocol client for kadmin's Admin API path (`--bootstrap-server`): topics, configs,
reassignments, leader elections, the cluster, and consumer groups.

kafka-python's message classes (`kafka.protocol`) encode the requests and decode the responses; the sockets,
version choice, routing and retries are ours, so that every failure becomes one line for the user and the
retriable ones (a coordinator still loading, moving, or `__consumer_offsets` just being created; a leader or the
controller moving) are retried until the deadline, as Kafka's AdminClient does.

Routing is Kafka's AdminClient's: CreateTopics, DeleteTopics, ElectLeaders and
Alter/ListPartitionReassignments go to the controller (found with Metadata; NOT_CONTROLLER or a lost connection
looks it up again); a BROKER config resource named by id goes to that broker; everything else to whichever
bootstrap or known broker answers first.

Versions: for each API, the highest version both Kafka 2.8 and the broker (its ApiVersions answer) serve.
Errors: KafkaAdminError (refused; `code` is the Kafka error code when the cluster gave one), with the subclasses
Unreachable (no broker answers) and TimedOut (the deadline passed while retrying).
"""
from __future__ import annotations

import base64
import socket
import struct
import time
from dataclasses import dataclass, field

import kafka.errors as kerrors
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, CreateTopicsRequest, DeleteTopicsRequest,
                                  DescribeClusterRequest, DescribeConfigsRequest, ElectLeadersRequest,
                                  IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest)
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest

# The highest version Kafka 2.8 serves, per API key: a kadmin talking to a newer broker stays on 2.8's wire.
KAFKA_28_MAX = {
    ListOffsetsRequest.API_KEY: 6, MetadataRequest.API_KEY: 11, OffsetCommitRequest.API_KEY: 8,
    OffsetFetchRequest.API_KEY: 7, FindCoordinatorRequest.API_KEY: 3, DescribeGroupsRequest.API_KEY: 5,
    ListGroupsRequest.API_KEY: 4, DeleteGroupsRequest.API_KEY: 2, ApiVersionsRequest.API_KEY: 3,
    CreateTopicsRequest.API_KEY: 7, DeleteTopicsRequest.API_KEY: 6,
    DescribeConfigsRequest.API_KEY: 4, IncrementalAlterConfigsRequest.API_KEY: 1, ElectLeadersRequest.API_KEY: 2,
    AlterPartitionReassignmentsRequest.API_KEY: 0, ListPartitionReassignmentsRequest.API_KEY: 0,
    DescribeClusterRequest.API_KEY: 0,
}
# Config resource types and the config sources of DescribeConfigs v1+.
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
SET, DELETE = 0, 1                 # IncrementalAlterConfigs operations
PREFERRED, UNCLEAN = 0, 1          # ElectLeaders election types

LATEST, EARLIEST = -1, -2          # ListOffsets timestamps
UNKNOWN_OFFSET = -1

# Errors after which the group's coordinator must be looked up again.
_FIND_AGAIN = {kerrors.NotCoordinatorError.errno, kerrors.CoordinatorNotAvailableError.errno}
# Errors that only need a moment.
_WAIT = {kerrors.CoordinatorLoadInProgressError.errno}
# Partition errors of ListOffsets after which the leader must be looked up again.
_LEADER_MOVED = {kerrors.NotLeaderForPartitionError.errno, kerrors.LeaderNotAvailableError.errno,
                 kerrors.UnknownLeaderEpochError.errno, kerrors.FencedLeaderEpochError.errno,
                 kerrors.ReplicaNotAvailableError.errno, 78}   # 78: OFFSET_NOT_AVAILABLE (election in progress)

RETRY_BACKOFF = 0.1
UNKNOWN_TOPIC_OR_PARTITION = kerrors.UnknownTopicOrPartitionError.errno
NOT_CONTROLLER = kerrors.NotControllerError.errno


class KafkaAdminError(Exception):
    """A failure to show the user as one line; code: the Kafka error code the cluster answered, if any."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class Unreachable(KafkaAdminError):
    """No broker could be reached."""


class TimedOut(KafkaAdminError):
    """The deadline passed (waiting for an answer, or retrying)."""


class ConnectionLost(Unreachable):
    """A broker could not be reached or stopped answering: worth another try (elsewhere) until the deadline."""


def error_name(code: int) -> str:
    """'NON_EMPTY_GROUP' for 68; 'error 1234' for a code kafka-python does not know."""
    if code == -1:
        return "UNKNOWN_SERVER_ERROR"
    name = getattr(kerrors.for_code(code), "message", None)
    return name if name and name != "UNKNOWN" else f"error {code}"


def refused(message: str | None, code: int, fallback: str) -> KafkaAdminError:
    """The error for a refusal: the broker's message (or fallback) and the error code's name, e.g. "Topic 't'
    already exists. (TOPIC_ALREADY_EXISTS)"; REQUEST_TIMED_OUT is a TimedOut."""
    text = f"{message or fallback} ({error_name(code)})"
    cls = TimedOut if code == kerrors.RequestTimedOutError.errno else KafkaAdminError
    return cls(text, code)


def topic_id_text(topic_id) -> str | None:
    """A topic id as Kafka prints it (url-safe base64 of the 16 bytes, no padding); None for none or zero."""
    if topic_id is None or getattr(topic_id, "int", 0) == 0:
        return None
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def error_text(code: int) -> str:
    """'NON_EMPTY_GROUP (The group is not empty.)'."""
    desc = getattr(kerrors.for_code(code), "description", "") if code != -1 else \
        "The server experienced an unexpected error when processing the request."
    return f"{error_name(code)} ({desc.rstrip('.')}.)" if desc else error_name(code)


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' -> [('h1', 9092), ('h2', 9093)]; ValueError for a malformed item."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"'{item}' is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no HOST:PORT given")
    return out


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


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
class PartitionInfo:
    leader: int                     # -1: none
    error_code: int
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline: list[int] = field(default_factory=list)


@dataclass
class TopicInfo:
    topic_id: str | None
    internal: bool
    partitions: dict[int, PartitionInfo]


@dataclass
class Metadata:
    brokers: dict[int, Broker]
    controller_id: int              # -1: none
    cluster_id: str | None = None
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)


@dataclass
class ConfigEntry:
    """One config of a DescribeConfigs answer; source and the synonyms' sources are Kafka's names."""
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]]    # (name, value, source), most specific first


class _Connection:
    """One socket to one broker: ApiVersions once, then requests answered in order."""

    def __init__(self, host: str, port: int, deadline: float, client_id: str):
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.correlation_id = 0
        try:
            self.sock = socket.create_connection((host, port), timeout=_remaining(deadline))
        except OSError as e:
            raise ConnectionLost(f"Cannot connect to {self.address}: {_os_error(e)}") from None
        self.versions: dict[int, tuple[int, int]] = {}
        response = self.send(ApiVersionsRequest(version=0), deadline)
        if response.error_code:
            self.close()
            raise KafkaAdminError(f"ApiVersions to {self.address} failed: {error_text(response.error_code)}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version_for(self, request_cls, min_needed: int = 0) -> int:
        key = request_cls.API_KEY
        served = self.versions.get(key)
        top = min(KAFKA_28_MAX.get(key, request_cls.max_version), request_cls.max_version)
        if served is not None:
            top = min(top, served[1])
        if served is None or top < max(served[0], min_needed):
            raise KafkaAdminError(f"The broker at {self.address} does not serve {request_cls.name[:-7]} "
                                  f"version {min_needed} or later.")
        return top

    def send(self, request, deadline: float):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        response_cls = request.header.get_response_class()
        try:
            self.sock.settimeout(_remaining(deadline))
            self.sock.sendall(bytes(request.encode(header=True, framed=True)))
            size = struct.unpack(">i", self._read(4))[0]
            body = self._read(size)
        except socket.timeout:
            self.close()
            raise ConnectionLost(f"Timed out waiting for {self.address} to answer {request.name[:-7]}.") from None
        except OSError as e:
            self.close()
            raise ConnectionLost(f"{request.name[:-7]} to {self.address} failed: {_os_error(e)}") from None
        try:
            response = response_cls.decode(body, header=True)
        except Exception as e:
            self.close()
            raise KafkaAdminError(f"Cannot decode the {request.name[:-7]} response of {self.address}: "
                                  f"{type(e).__name__} {e}".rstrip()) from None
        if response.header.correlation_id != self.correlation_id:
            self.close()
            raise KafkaAdminError(f"{self.address} answered correlation id {response.header.correlation_id}, "
                                  f"expected {self.correlation_id}.")
        return response

    def _read(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _config_refused(resource_type: int, name: str, res, fallback: str) -> KafkaAdminError:
    """A config resource's refusal; an unknown topic in kadmin's words (brokers word it differently)."""
    if resource_type == TOPIC_RESOURCE and res.error_code == UNKNOWN_TOPIC_OR_PARTITION:
        return refused(f"Topic '{name}' does not exist.", res.error_code, "")
    what = f"topic '{name}'" if resource_type == TOPIC_RESOURCE else \
        f"broker {name}" if name else "the brokers' cluster-wide defaults"
    return refused(res.error_message, res.error_code, fallback.format(what))


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ConnectionLost("Timed out waiting for the cluster.")
    return left


def _os_error(e: OSError) -> str:
    return e.strerror or str(e) or type(e).__name__


class AdminClient:
    """Blocking Admin API calls against a cluster reached through bootstrap servers.

    Every call finishes within `timeout` seconds of its start (retries included) or raises KafkaAdminError.
    """

    def __init__(self, bootstrap: list[tuple[str, int]], timeout: float = 30.0, client_id: str = "kadmin"):
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.client_id = client_id
        self._by_address: dict[tuple[str, int], _Connection] = {}
        self._metadata: Metadata | None = None
        self._coordinators: dict[str, Broker] = {}

    # ---- connections --------------------------------------------------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        for c in self._by_address.values():
            c.close()
        self._by_address.clear()

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout

    def _connection(self, host: str, port: int, deadline: float) -> _Connection:
        c = self._by_address.get((host, port))
        if c is None:
            c = _Connection(host, port, deadline, self.client_id)
            self._by_address[(host, port)] = c
        return c

    def _send(self, broker: tuple[str, int] | Broker, build, deadline: float, min_version: int = 0):
        """build(version) -> request, sent to the broker at the highest version it and Kafka 2.8 share. A
        broken connection is dropped (and the error raised), so that a retry opens a new one."""
        host, port = (broker.host, broker.port) if isinstance(broker, Broker) else broker
        c = self._connection(host, port, deadline)
        request = build(c)
        try:
            return c.send(request, deadline)
        except ConnectionLost:
            self._by_address.pop((host, port), None)
            c.close()
            raise

    def _any_broker(self, deadline: float):
        """Send through the bootstrap servers, then the known brokers, whichever answers first."""
        candidates = list(self.bootstrap)
        if self._metadata:
            candidates += [(b.host, b.port) for b in self._metadata.brokers.values()]
        last = None
        for address in dict.fromkeys(candidates):
            if address in self._by_address:
                return address
        for address in dict.fromkeys(candidates):
            try:
                self._connection(*address, deadline)
                return address
            except ConnectionLost as e:
                last = e
        servers = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        raise Unreachable(f"No broker of {servers} could be reached ({last}).")

    def _send_any(self, build, deadline: float, min_version: int = 0):
        """Send to any broker; one that stops answering is dropped and the next one tried, until the deadline."""
        while True:
            address = self._any_broker(deadline)
            try:
                return self._send(address, build, deadline, min_version)
            except ConnectionLost:
                if time.monotonic() >= deadline:
                    raise

    def _send_controller(self, build, not_controller, deadline: float, what: str):
        """Send to the controller (Metadata's controller id); looked up again, after a short wait, while there
        is none, it does not answer, or it answers NOT_CONTROLLER (not_controller(response) is true)."""
        while True:
            md = self.metadata([], deadline)
            controller = md.brokers.get(md.controller_id)
            if controller is None:
                self._backoff(deadline, f"a controller to {what}")
                continue
            try:
                r = self._send(controller, build, deadline)
            except ConnectionLost:
                self._backoff(deadline, f"the controller to {what} (broker {controller.node_id} did not answer)")
                continue
            if not_controller(r):
                self._backoff(deadline, f"the controller to {what} (NOT_CONTROLLER)")
                continue
            return r

    # ---- metadata -----------------------------------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None, deadline: float | None = None) -> Metadata:
        """Brokers, controller and (for the named topics, or every topic when None) partition leaders.
        Never creates topics (allow_auto_topic_creation=False; versions below 4 are refused for that reason)."""
        deadline = deadline or self._deadline()

        def build(c):
            v = c.version_for(MetadataRequest, 4)
            ts = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
            return MetadataRequest(version=v, topics=ts, allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False)
        r = self._send_any(build, deadline, 4)
        md = Metadata({b.node_id: Broker(b.node_id, b.host, b.port, b.rack) for b in r.brokers}, r.controller_id,
                      r.cluster_id)
        for t in r.topics:
            if t.error_code:
                md.topic_errors[t.name] = t.error_code
            else:
                parts = {p.partition_index: PartitionInfo(p.leader_id, p.error_code, list(p.replica_nodes),
                                                          list(p.isr_nodes), list(getattr(p, "offline_replicas", None)
                                                                                  or []))
                         for p in t.partitions}
                md.topics[t.name] = TopicInfo(topic_id_text(getattr(t, "topic_id", None)), bool(t.is_internal),
                                              parts)
        self._metadata = md
        return md

    def brokers(self, deadline: float | None = None) -> dict[int, Broker]:
        return self.metadata([], deadline).brokers

    def topics(self, topics: list[str] | None = None) -> Metadata:
        """Metadata of the named topics (every topic when None); KafkaAdminError naming an unknown topic."""
        md = self.metadata(None if topics is None else list(topics))
        for t in topics or []:
            if t in md.topic_errors or t not in md.topics:
                code = md.topic_errors.get(t, UNKNOWN_TOPIC_OR_PARTITION)
                if code == UNKNOWN_TOPIC_OR_PARTITION:
                    raise KafkaAdminError(f"Topic '{t}' does not exist. ({error_name(code)})", code)
                raise KafkaAdminError(f"Cannot describe topic '{t}': {error_text(code)}", code)
        return md

    def topic_partitions(self, topics: list[str]) -> dict[str, list[int]]:
        """Every partition of each topic; KafkaAdminError naming an unknown topic."""
        md = self.topics(topics)
        return {t: sorted(md.topics[t].partitions) for t in topics}

    def describe_cluster(self) -> Metadata:
        """Cluster id, controller and live brokers: DescribeCluster when the broker serves it (Kafka 2.8+), else
        Metadata."""
        deadline = self._deadline()
        address = self._any_broker(deadline)
        if DescribeClusterRequest.API_KEY not in self._connection(*address, deadline).versions:
            return self.metadata([], deadline)

        def build(c):
            return DescribeClusterRequest(version=c.version_for(DescribeClusterRequest),
                                          include_cluster_authorized_operations=False)
        r = self._send_any(build, deadline)
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
        timeout). Returns (partitions, replication factor); KafkaAdminError with the broker's message."""
        Topic = CreateTopicsRequest.CreatableTopic
        if not assignment and (partitions is None or replication_factor is None):
            # Learn the defaults the controller would apply (a validate-only v5 answer carries them), so the
            # result can say what was created: a real creation with timeout 0 answers before it knows.
            partitions, replication_factor = self._validate_create(name, partitions, replication_factor, config)
        topic = Topic(name=name, num_partitions=-1 if assignment or partitions is None else partitions,
                      replication_factor=-1 if assignment or replication_factor is None else replication_factor,
                      assignments=[Topic.CreatableReplicaAssignment(partition_index=p, broker_ids=list(r))
                                   for p, r in sorted((assignment or {}).items())],
                      configs=[Topic.CreatableTopicConfig(name=k, value=v) for k, v in config.items()])

        def build(c):
            return CreateTopicsRequest(version=c.version_for(CreateTopicsRequest, 1), topics=[topic], timeout_ms=0,
                                       validate_only=False)
        r = self._send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.topics),
                                  self._deadline(), f"create topic '{name}'")
        (result,) = [t for t in r.topics if t.name == name] or [None]
        if result is None:
            raise KafkaAdminError(f"The controller did not answer for topic '{name}'.")
        if result.error_code not in (0, kerrors.RequestTimedOutError.errno):
            raise refused(result.error_message, result.error_code, f"Topic '{name}' could not be created.")
        if assignment:
            return len(assignment), len(next(iter(assignment.values())))
        if getattr(result, "num_partitions", -1) > 0:
            return result.num_partitions, result.replication_factor
        return partitions, replication_factor

    def _validate_create(self, name: str, partitions: int | None, replication_factor: int | None,
                         config: dict[str, str]) -> tuple[int | None, int | None]:
        Topic = CreateTopicsRequest.CreatableTopic
        topic = Topic(name=name, num_partitions=-1 if partitions is None else partitions,
                      replication_factor=-1 if replication_factor is None else replication_factor, assignments=[],
                      configs=[Topic.CreatableTopicConfig(name=k, value=v) for k, v in config.items()])

        def build(c):
            return CreateTopicsRequest(version=c.version_for(CreateTopicsRequest, 1), topics=[topic], timeout_ms=0,
                                       validate_only=True)
        r = self._send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.topics),
                                  self._deadline(), f"create topic '{name}'")
        (result,) = [t for t in r.topics if t.name == name] or [None]
        if result is None:
            raise KafkaAdminError(f"The controller did not answer for topic '{name}'.")
        if result.error_code != 0:
            raise refused(result.error_message, result.error_code, f"Topic '{name}' could not be created.")
        if getattr(result, "num_partitions", -1) > 0:   # v5+
            return result.num_partitions, result.replication_factor
        return partitions, replication_factor

    def name_taken(self, name: str) -> bool:
        """Whether the controller would refuse to create topic NAME as existing (TOPIC_ALREADY_EXISTS, which it
        also answers while a deleted topic's znodes remain): a validate-only CreateTopics of one replica."""
        Topic = CreateTopicsRequest.CreatableTopic

        def build(c):
            return CreateTopicsRequest(version=c.version_for(CreateTopicsRequest, 1), timeout_ms=0,
                                       validate_only=True, topics=[Topic(name=name, num_partitions=1,
                                                                         replication_factor=1, assignments=[],
                                                                         configs=[])])
        r = self._send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.topics),
                                  self._deadline(), f"check topic '{name}'")
        return any(t.error_code == kerrors.TopicAlreadyExistsError.errno for t in r.topics)

    def delete_topic(self, name: str) -> None:
        """DeleteTopics to the controller with timeout 0 (the topic is marked for deletion; REQUEST_TIMED_OUT
        only means the controller has not finished yet)."""
        def build(c):
            v = c.version_for(DeleteTopicsRequest)
            if v >= 6:
                return DeleteTopicsRequest(version=v, topics=[DeleteTopicsRequest.DeleteTopicState(name=name)],
                                           timeout_ms=0)
            return DeleteTopicsRequest(version=v, topic_names=[name], timeout_ms=0)
        r = self._send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.responses),
                                  self._deadline(), f"delete topic '{name}'")
        (result,) = [t for t in r.responses if t.name == name] or [None]
        if result is None:
            raise KafkaAdminError(f"The controller did not answer for topic '{name}'.")
        if result.error_code == UNKNOWN_TOPIC_OR_PARTITION:
            raise refused(f"Topic '{name}' does not exist.", result.error_code, "")
        if result.error_code not in (0, kerrors.RequestTimedOutError.errno):
            raise refused(result.error_message, result.error_code, f"Topic '{name}' could not be deleted.")

    # ---- configs ------------------------------------------------------------------------------------------

    def _config_destination(self, resource_type: int, name: str, deadline: float):
        """A BROKER resource named by id goes to that broker; anything else to any broker."""
        if resource_type != BROKER_RESOURCE or name == "":
            return None
        md = self.metadata([], deadline)
        broker = md.brokers.get(int(name))
        if broker is None:
            raise KafkaAdminError(f"Broker {name} is not a live broker of the cluster (live brokers: "
                                  f"{','.join(map(str, sorted(md.brokers))) or 'none'}).")
        return broker

    def describe_configs(self, resources: list[tuple[int, str]], include_synonyms: bool = True,
                         missing_ok: bool = False) -> dict[tuple[int, str], list[ConfigEntry]]:
        """DescribeConfigs for (resource type, name) pairs, each sent where it belongs; KafkaAdminError for the
        first resource refused (UNKNOWN_TOPIC_OR_PARTITION: "Topic 't' does not exist."), except that unknown
        topics are left out with missing_ok."""
        deadline = self._deadline()
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
            r = self._send_any(build, deadline, 1) if dest is None else self._send(dest, build, deadline, 1)
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
        deadline = self._deadline()
        dest = self._config_destination(resource_type, name, deadline)
        Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
        ops = [Resource.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in to_set.items()] + \
              [Resource.AlterableConfig(name=k, config_operation=DELETE, value=None) for k in to_delete]

        def build(c):
            return IncrementalAlterConfigsRequest(version=c.version_for(IncrementalAlterConfigsRequest), resources=[
                Resource(resource_type=resource_type, resource_name=name, configs=ops)], validate_only=False)
        r = self._send_any(build, deadline) if dest is None else self._send(dest, build, deadline)
        for res in r.responses:
            if res.error_code:
                raise _config_refused(resource_type, name, res, "The configs of {} could not be changed.")

    # ---- reassignments and elections ----------------------------------------------------------------------

    def alter_reassignments(self, plan: dict[tuple[str, int], list[int] | None]
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """AlterPartitionReassignments to the controller (None replicas cancel); (error code, message) per
        partition."""
        Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
        by_topic: dict[str, list] = {}
        for (t, p), replicas in sorted(plan.items()):
            by_topic.setdefault(t, []).append(Topic.ReassignablePartition(partition_index=p, replicas=replicas))

        def build(c):
            return AlterPartitionReassignmentsRequest(
                version=c.version_for(AlterPartitionReassignmentsRequest), timeout_ms=int(self.timeout * 1000),
                allow_replication_factor_change=True,
                topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])
        r = self._send_controller(build, lambda r: r.error_code == NOT_CONTROLLER, self._deadline(),
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
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [Topic(name=t, partition_indexes=ps) for t, ps in sorted(by_topic.items())]

        def build(c):
            return ListPartitionReassignmentsRequest(version=c.version_for(ListPartitionReassignmentsRequest),
                                                     timeout_ms=int(self.timeout * 1000), topics=topics)
        r = self._send_controller(build, lambda r: r.error_code == NOT_CONTROLLER, self._deadline(),
                                  "list reassignments")
        if r.error_code:
            raise refused(r.error_message, r.error_code, "Listing the reassignments was refused.")
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in r.topics for p in t.partitions}

    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                      ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """ElectLeaders (PREFERRED or UNCLEAN) to the controller, for the partitions given or every partition
        (None); (error code, message) per partition (ELECTION_NOT_NEEDED: it already has the leader wanted)."""
        Topic = ElectLeadersRequest.TopicPartitions
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [Topic(topic=t, partitions=ps) for t, ps in by_topic.items()]

        def build(c):
            return ElectLeadersRequest(version=c.version_for(ElectLeadersRequest, 1 if election_type else 0),
                                       election_type=election_type, topic_partitions=topics,
                                       timeout_ms=int(self.timeout * 1000))

        def not_controller(r):
            return getattr(r, "error_code", 0) == NOT_CONTROLLER or any(
                p.error_code == NOT_CONTROLLER for t in r.replica_election_results for p in t.partition_result)
        r = self._send_controller(build, not_controller, self._deadline(), "elect leaders")
        if getattr(r, "error_code", 0):
            raise refused(None, r.error_code, "The leader election was refused.")
        return {(t.topic, p.partition_id): (p.error_code, p.error_message)
                for t in r.replica_election_results for p in t.partition_result}

    # ---- coordinators -------------------------------------------------------------------------------------

    def _coordinator(self, group: str, deadline: float) -> Broker:
        """The group's coordinator (FindCoordinator, retried while it is not available)."""
        cached = self._coordinators.get(group)
        if cached is not None:
            return cached
        while True:
            address = self._any_broker(deadline)

            def build(c):
                return FindCoordinatorRequest(version=c.version_for(FindCoordinatorRequest), key=group, key_type=0)
            r = self._send(address, build, deadline)
            if r.error_code == 0:
                broker = Broker(r.node_id, r.host, r.port)
                self._coordinators[group] = broker
                return broker
            if r.error_code not in _FIND_AGAIN | _WAIT:
                raise KafkaAdminError(f"Cannot find the coordinator of group '{group}': {error_text(r.error_code)}")
            self._backoff(deadline, f"the coordinator of group '{group}' ({error_name(r.error_code)})")

    def _backoff(self, deadline: float, what: str) -> None:
        if time.monotonic() + RETRY_BACKOFF >= deadline:
            raise TimedOut(f"Timed out after {self.timeout:g}s waiting for {what}.")
        time.sleep(RETRY_BACKOFF)

    def _with_coordinator(self, group: str, call, what: str):
        """call(coordinator, deadline) -> (error_code, result); retried on coordinator errors."""
        deadline = self._deadline()
        while True:
            coordinator = self._coordinator(group, deadline)
            try:
                code, result = call(coordinator, deadline)
            except ConnectionLost:
                if time.monotonic() >= deadline:
                    raise
                self._coordinators.pop(group, None)      # the coordinator may have gone: look again
                self._backoff(deadline, f"{what} (the coordinator at {coordinator} did not answer)")
                continue
            if code in _FIND_AGAIN:
                self._coordinators.pop(group, None)
            if code in _FIND_AGAIN | _WAIT:
                self._backoff(deadline, f"{what} ({error_name(code)})")
                continue
            return code, result

    # ---- groups -------------------------------------------------------------------------------------------

    def list_groups(self) -> list[tuple[str, str, str | None]]:
        """(group id, protocol type, state or None before ListGroups v4) of every group, from every broker."""
        deadline = self._deadline()
        groups: dict[str, tuple[str, str, str | None]] = {}
        for broker in sorted(self.brokers(deadline).values(), key=lambda b: b.node_id):
            while True:
                r = self._send(broker, lambda c: ListGroupsRequest(version=c.version_for(ListGroupsRequest),
                                                                   states_filter=[]), deadline)
                if r.error_code in _FIND_AGAIN | _WAIT:
                    self._backoff(deadline, f"broker {broker.node_id} to list its groups "
                                            f"({error_name(r.error_code)})")
                    continue
                if r.error_code:
                    raise KafkaAdminError(f"ListGroups to broker {broker.node_id} ({broker}) failed: "
                                          f"{error_text(r.error_code)}")
                for g in r.groups:
                    groups[g.group_id] = (g.group_id, g.protocol_type,
                                          g.group_state if r.API_VERSION >= 4 else None)
                break
        return [groups[g] for g in sorted(groups)]

    def describe_group(self, group: str) -> GroupDescription:
        def call(coordinator, deadline):
            r = self._send(coordinator, lambda c: DescribeGroupsRequest(
                version=c.version_for(DescribeGroupsRequest), groups=[group], include_authorized_operations=False),
                deadline)
            (g,) = [g for g in r.groups if g.group_id == group] or [None]
            if g is None:
                raise KafkaAdminError(f"The coordinator did not describe group '{group}'.")
            return g.error_code, g
        code, g = self._with_coordinator(group, call, f"group '{group}' to be described")
        if code:
            raise KafkaAdminError(f"Cannot describe group '{group}': {error_text(code)}")
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
                                self._coordinators.get(group) or Broker(-1, "", -1))

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every partition the group has committed an offset for (OffsetFetch v2+, all topics)."""
        def call(coordinator, deadline):
            r = self._send(coordinator, lambda c: OffsetFetchRequest(
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
        code, offsets = self._with_coordinator(group, call, f"the committed offsets of group '{group}'")
        if code:
            raise KafkaAdminError(f"Cannot fetch the committed offsets of group '{group}': {error_text(code)}")
        return offsets

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """A simple commit (generation -1, no member id), as Kafka's AdminClient.alterConsumerGroupOffsets
        sends; the error code per partition (0: committed)."""
        if not offsets:
            return {}
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        Part = Topic.OffsetCommitRequestPartition
        by_topic: dict[str, list] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(Part(partition_index=tp.partition, committed_offset=offset,
                                                          committed_leader_epoch=-1, commit_timestamp=-1,
                                                          committed_metadata=""))

        def call(coordinator, deadline):
            r = self._send(coordinator, lambda c: OffsetCommitRequest(
                version=c.version_for(OffsetCommitRequest, 1), group_id=group, generation_id_or_member_epoch=-1,
                member_id="", group_instance_id=None, retention_time_ms=-1,
                topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]), deadline, 1)
            errors = {TopicPartition(t.name, p.partition_index): p.error_code
                      for t in r.topics for p in t.partitions}
            retry = next((e for e in errors.values() if e in _FIND_AGAIN | _WAIT), 0)
            return retry, errors
        _, errors = self._with_coordinator(group, call, f"group '{group}' to commit offsets")
        return errors

    def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """DeleteGroups to each group's coordinator; the error code per group (0: deleted)."""
        out = {}
        for group in groups:
            def call(coordinator, deadline, group=group):
                r = self._send(coordinator, lambda c: DeleteGroupsRequest(
                    version=c.version_for(DeleteGroupsRequest), groups_names=[group]), deadline)
                (code,) = [x.error_code for x in r.results if x.group_id == group] or [None]
                if code is None:
                    raise KafkaAdminError(f"The coordinator did not answer for group '{group}'.")
                return code, code
            out[group], _ = self._with_coordinator(group, call, f"group '{group}' to be deleted")
        return out

    # ---- offsets of partitions ----------------------------------------------------------------------------

    def list_offsets(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets on each partition's leader: timestamp -1 latest (the high watermark), -2 earliest (the
        log start offset), else the first offset with a timestamp at or after it (-1 when none).
        Returns (error code, offset) per partition; leader changes are retried."""
        deadline = self._deadline()
        results: dict[TopicPartition, tuple[int, int]] = {}
        pending = dict(specs)
        while pending:
            md = self.metadata(sorted({tp.topic for tp in pending}), deadline)
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(pending):
                parts = md.topics[tp.topic].partitions if tp.topic in md.topics else None
                if parts is None:
                    results[tp] = (md.topic_errors.get(tp.topic, UNKNOWN_TOPIC_OR_PARTITION), -1)
                    del pending[tp]
                elif tp.partition not in parts:
                    results[tp] = (UNKNOWN_TOPIC_OR_PARTITION, -1)
                    del pending[tp]
                elif parts[tp.partition].leader >= 0 and parts[tp.partition].leader in md.brokers:
                    by_leader.setdefault(parts[tp.partition].leader, []).append(tp)
            for leader, tps in by_leader.items():
                Topic = ListOffsetsRequest.ListOffsetsTopic
                Part = Topic.ListOffsetsPartition
                by_topic: dict[str, list] = {}
                for tp in tps:
                    by_topic.setdefault(tp.topic, []).append(Part(partition_index=tp.partition,
                                                                  current_leader_epoch=-1,
                                                                  timestamp=pending[tp], max_num_offsets=1))
                try:
                    r = self._send(md.brokers[leader], lambda c: ListOffsetsRequest(
                        version=c.version_for(ListOffsetsRequest, 1), replica_id=-1, isolation_level=0,
                        topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]), deadline, 1)
                except ConnectionLost:
                    if time.monotonic() >= deadline:
                        raise
                    continue                      # the leader went away: metadata again
                for t in r.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in pending or p.error_code in _LEADER_MOVED:
                            continue
                        results[tp] = (p.error_code, p.offset)
                        del pending[tp]
            if pending:
                names = ",".join(str(tp) for tp in sorted(pending))
                self._backoff(deadline, f"the leaders of {names}")
        return results
