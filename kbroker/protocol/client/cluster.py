"""The cluster client: a bootstrap list, one Connection per broker, a metadata cache, requests routed to
partition leaders (grouped by leader), to the controller or to a group's coordinator, and retries until a
deadline.

Versions: each connection starts with ApiVersions; a request goes at the highest version both the broker and
Kafka 2.8 serve (Connection.version_for). Every call finishes within `timeout` seconds of its start, retries
included, or raises KafkaError: Unreachable when no broker answers, TimedOut when retrying outlasted the
deadline. A retriable error (errors.RETRIABLE, or a lost connection) drops the metadata (and the connection)
and is tried again after RETRY_BACKOFF, as Kafka's clients do.

Follower fetching (KIP-392, the consumer's side): a client given `client_rack` sends it in its fetches (v11+);
when the leader answers with a preferred_read_replica, that partition's fetches go to that replica (at once, in
the same call) until `metadata_max_age` seconds have passed or the replica fails: an error code from it
(NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE from a lagging follower, FENCED/UNKNOWN_LEADER_EPOCH, ...) or a
lost connection, as Kafka's consumer keeps it. The fetch is then made again from the leader, never answered
with the replica's error, and, unlike Kafka's consumer (which asks the leader again, which may name the same
replica until it sees it gone), the partition is read from the leader without the rack for metadata_max_age.
Without client_rack nothing changes: fetches go to the leader with an empty rack.
"""
from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from ..errors import Errors, KafkaError, error_name
from ..hotpath import FetchPartitionData, decode_fetch_response
from .connection import Connection
from .security import ClientSecurity
from .requests import fetch_request, produce_request
from .errors import (COORDINATOR_ERRORS, COORDINATOR_MOVED, RETRIABLE, ConnectionLost, TimedOut, Unreachable,
                     error_text)

RETRY_BACKOFF = 0.1
METADATA_MAX_AGE = 300.0           # seconds a preferred read replica is kept (Kafka's metadata.max.age.ms)
LEADER_ONLY = -1                   # a partition read from the leader without the rack (its replica failed)
LATEST, EARLIEST = -1, -2          # ListOffsets timestamps


# FindCoordinator key types: a consumer group, a transactional id (v1+).
GROUP, TRANSACTION = 0, 1
_KEY_WORDS = {GROUP: "group", TRANSACTION: "transactional id"}


class TopicPartition(NamedTuple):
    """A tuple, so that hashing it (dict keys on per-record paths) stays in C."""
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class PartitionInfo:
    leader: int                     # -1: none
    error_code: int
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline: list[int] = field(default_factory=list)


@dataclass
class TopicInfo:
    topic_id: str | None            # as Kafka prints it (url-safe base64, no padding); None for none
    internal: bool
    partitions: dict[int, PartitionInfo]


@dataclass
class Metadata:
    brokers: dict[int, Broker]
    controller_id: int              # -1: none
    cluster_id: str | None = None
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)

    def leader(self, tp: TopicPartition) -> Broker | None:
        topic = self.topics.get(tp.topic)
        p = topic.partitions.get(tp.partition) if topic else None
        return self.brokers.get(p.leader) if p is not None and p.leader >= 0 else None


def topic_id_text(topic_id) -> str | None:
    if topic_id is None or getattr(topic_id, "int", 0) == 0:
        return None
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


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


def is_retriable(e: KafkaError) -> bool:
    """A lost connection or a RETRIABLE code; never a deadline that has passed."""
    return not isinstance(e, TimedOut) and (isinstance(e, Unreachable) or e.code in RETRIABLE)


class ClusterClient:
    """Blocking requests to a cluster reached through bootstrap servers ('h:p,...' or [(host, port)])."""

    def __init__(self, bootstrap, client_id: str, timeout: float = 30.0, security: ClientSecurity | None = None,
                 client_rack: str = "", metadata_max_age: float = METADATA_MAX_AGE):
        """security: how to reach the brokers' listener (TLS, SASL login); plaintext when None. client_rack: the
        rack fetches name (Kafka's client.rack), so a leader may send them to a replica in it for up to
        metadata_max_age seconds."""
        self.bootstrap = parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        self.client_id = client_id
        self.timeout = timeout
        self.security = security
        self.client_rack = client_rack
        self.metadata_max_age = metadata_max_age
        self._read_from: dict[TopicPartition, tuple[int, float]] = {}   # tp -> (replica or LEADER_ONLY, until)
        self.connections: dict[tuple[str, int], Connection] = {}
        self.cached: Metadata | None = None
        self._coordinators: dict[tuple[int, str], Broker] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        for c in self.connections.values():
            c.close()
        self.connections.clear()

    # ---- deadlines and retries ----------------------------------------------------------------------------
    def deadline(self) -> float:
        return time.monotonic() + self.timeout

    @staticmethod
    def remaining(deadline: float) -> float:
        """Seconds left before the deadline; TimedOut once it passed (nothing is sent then)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimedOut("Timed out waiting for the cluster.")
        return left

    def backoff(self, deadline: float, what: str) -> None:
        """Wait RETRY_BACKOFF, or raise TimedOut when that would pass the deadline."""
        if time.monotonic() + RETRY_BACKOFF >= deadline:
            raise TimedOut(f"Timed out after {self.timeout:g}s waiting for {what}.")
        time.sleep(RETRY_BACKOFF)

    def retrying(self, what: str, attempt, deadline: float | None = None):
        """attempt(deadline) until it returns; a retriable KafkaError drops the metadata and waits first."""
        deadline = deadline or self.deadline()
        while True:
            try:
                return attempt(deadline)
            except KafkaError as e:
                if not is_retriable(e):
                    raise
                self.cached = None
                self.backoff(deadline, f"{what} ({e})")

    # ---- connections --------------------------------------------------------------------------------------
    def connection(self, address: tuple[str, int], deadline: float) -> Connection:
        """The connection to address, opened (with ApiVersions) if need be."""
        c = self.connections.get(address)
        if c is None:
            c = Connection(*address, self.client_id, self.timeout, self.security)
            c.connect(self.remaining(deadline))
            try:
                r = c.send(ApiVersionsRequest(version=0), self.remaining(deadline))
            except KafkaError:
                c.close()
                raise
            if r.error_code:
                c.close()
                raise KafkaError(r.error_code, f"ApiVersions to {c.address} failed: {error_text(r.error_code)}")
            c.versions = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
            self.connections[address] = c
        return c

    def drop(self, address: tuple[str, int]) -> None:
        c = self.connections.pop(address, None)
        if c is not None:
            c.close()

    def send(self, to: tuple[str, int] | Broker, build, deadline: float, decode: bool = True):
        """build(connection) -> request, sent to a broker (at the version build picks with version_for); its
        response (see Connection.send). A connection that fails is dropped, so that a retry opens a new one."""
        address = to.address if isinstance(to, Broker) else to
        c = self.connection(address, deadline)
        if c.in_flight:                  # a pipelined request nobody read: its answer would come first
            self.drop(address)
            c = self.connection(address, deadline)
        try:
            return c.send(build(c), self.remaining(deadline), decode)
        except ConnectionLost:
            self.drop(address)
            raise

    def any_broker(self, deadline: float) -> tuple[str, int]:
        """A broker that answers: one already connected, else the bootstrap servers, then the known brokers."""
        candidates = list(self.bootstrap)
        if self.cached:
            candidates += [b.address for b in self.cached.brokers.values()]
        candidates = list(dict.fromkeys(candidates))
        for address in candidates:
            if address in self.connections:
                return address
        last = None
        for address in candidates:
            try:
                self.connection(address, deadline)
                return address
            except ConnectionLost as e:
                last = e
        servers = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        raise Unreachable(f"No broker of {servers} could be reached ({last}).")

    def send_any(self, build, deadline: float):
        """Send to any broker; one that stops answering is dropped and the next one tried, until the deadline."""
        while True:
            address = self.any_broker(deadline)
            try:
                return self.send(address, build, deadline)
            except ConnectionLost:
                if time.monotonic() >= deadline:
                    raise

    def send_controller(self, build, not_controller, deadline: float, what: str):
        """Send to the controller (Metadata's controller id); looked up again, after a short wait, while there
        is none, it does not answer, or it answers NOT_CONTROLLER (not_controller(response) is true)."""
        while True:
            md = self.metadata([], deadline)
            controller = md.brokers.get(md.controller_id)
            if controller is None:
                self.backoff(deadline, f"a controller to {what}")
                continue
            try:
                r = self.send(controller, build, deadline)
            except ConnectionLost:
                self.backoff(deadline, f"the controller to {what} (broker {controller.node_id} did not answer)")
                continue
            if not_controller(r):
                self.backoff(deadline, f"the controller to {what} (NOT_CONTROLLER)")
                continue
            return r

    # ---- metadata -----------------------------------------------------------------------------------------
    def metadata(self, topics: list[str] | None = None, deadline: float | None = None) -> Metadata:
        """Brokers, controller and (for the named topics, or every topic when None) partitions, from any broker.
        Never creates topics (allow_auto_topic_creation=False; versions below 4 are refused for that reason)."""
        deadline = deadline or self.deadline()

        def build(c):
            ts = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
            return MetadataRequest(version=c.version_for(MetadataRequest, 4), topics=ts,
                                   allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False)
        r = self.send_any(build, deadline)
        md = Metadata({b.node_id: Broker(b.node_id, b.host, b.port, b.rack) for b in r.brokers}, r.controller_id,
                      r.cluster_id)
        for t in r.topics:
            if t.error_code:
                md.topic_errors[t.name] = t.error_code
            else:
                parts = {p.partition_index: PartitionInfo(p.leader_id, p.error_code, list(p.replica_nodes),
                                                          list(p.isr_nodes), list(p.offline_replicas or []))
                         for p in t.partitions}
                md.topics[t.name] = TopicInfo(topic_id_text(getattr(t, "topic_id", None)), bool(t.is_internal),
                                              parts)
        self.cached = md
        return md

    def known_metadata(self, topics: list[str], deadline: float) -> Metadata:
        """The cached metadata when it knows every one of topics, else fresh metadata of them."""
        md = self.cached
        if md is not None and all(t in md.topics or t in md.topic_errors for t in topics):
            return md
        return self.metadata(topics, deadline)

    def leader(self, tp: TopicPartition, deadline: float) -> Broker:
        """tp's leader; a retriable KafkaError while it has none (or its topic is unknown)."""
        md = self.known_metadata([tp.topic], deadline)
        broker = md.leader(tp)
        if broker is None:
            code = md.topic_errors.get(tp.topic, Errors.LEADER_NOT_AVAILABLE)
            raise KafkaError(code, f"no leader for {tp} ({error_name(code)})")
        return broker

    def group_by_leader(self, tps, deadline: float) -> tuple[dict[Broker, list[TopicPartition]], dict]:
        """({leader: [tp]}, {tp: error code}) from fresh metadata: partitions of unknown topics, or not in
        their topic, get their error; partitions without a leader are in neither (ask again later)."""
        md = self.metadata(sorted({tp.topic for tp in tps}), deadline)
        by_leader: dict[Broker, list[TopicPartition]] = {}
        errors = {}
        for tp in sorted(tps):
            topic = md.topics.get(tp.topic)
            if topic is None:
                errors[tp] = md.topic_errors.get(tp.topic, Errors.UNKNOWN_TOPIC_OR_PARTITION)
            elif tp.partition not in topic.partitions:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif md.leader(tp) is not None:
                by_leader.setdefault(md.leader(tp), []).append(tp)
        return by_leader, errors

    # ---- coordinators -------------------------------------------------------------------------------------
    def coordinator(self, key: str, deadline: float, key_type: int = GROUP) -> Broker:
        """The coordinator of a group (key_type GROUP) or a transactional id (TRANSACTION): FindCoordinator,
        retried while it is not available."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        what = _KEY_WORDS[key_type]
        while True:
            r = self.send(self.any_broker(deadline), lambda c: FindCoordinatorRequest(
                version=c.version_for(FindCoordinatorRequest, key_type), key=key, key_type=key_type), deadline)
            if r.error_code == 0:
                broker = self._coordinators[(key_type, key)] = Broker(r.node_id, r.host, r.port)
                return broker
            if r.error_code not in COORDINATOR_ERRORS:
                raise KafkaError(r.error_code, f"Cannot find the coordinator of {what} '{key}': "
                                               f"{error_text(r.error_code)}")
            self.backoff(deadline, f"the coordinator of {what} '{key}' ({error_name(r.error_code)})")

    def known_coordinator(self, key: str, key_type: int = GROUP) -> Broker | None:
        return self._coordinators.get((key_type, key))

    def with_coordinator(self, key: str, call, what: str, key_type: int = GROUP):
        """call(coordinator, deadline) -> (error_code, result), retried while the coordinator moves or loads."""
        deadline = self.deadline()
        while True:
            coordinator = self.coordinator(key, deadline, key_type)
            try:
                code, result = call(coordinator, deadline)
            except ConnectionLost:
                if time.monotonic() >= deadline:
                    raise
                self._coordinators.pop((key_type, key), None)      # the coordinator may have gone: look again
                self.backoff(deadline, f"{what} (the coordinator at {coordinator} did not answer)")
                continue
            if code in COORDINATOR_MOVED:
                self._coordinators.pop((key_type, key), None)
            if code in COORDINATOR_ERRORS:
                self.backoff(deadline, f"{what} ({error_name(code)})")
                continue
            return code, result

    # ---- offsets of partitions ----------------------------------------------------------------------------
    def list_offsets(self, specs: dict[TopicPartition, int],
                     isolation_level: int = 0) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets on each partition's leader: LATEST (-1) the high watermark (the last stable offset with
        isolation_level 1, READ_COMMITTED), EARLIEST (-2) the log start offset, else the first offset with a
        timestamp at or after it (-1 when none). (error code, offset) per partition; retriable errors are
        retried until the deadline."""
        deadline = self.deadline()
        results: dict[TopicPartition, tuple[int, int]] = {}
        pending = dict(specs)
        Topic = ListOffsetsRequest.ListOffsetsTopic
        Part = Topic.ListOffsetsPartition
        while pending:
            by_leader, errors = self.group_by_leader(pending, deadline)
            for tp, code in errors.items():
                results[tp] = (code, -1)
                del pending[tp]
            for leader, tps in by_leader.items():
                by_topic: dict[str, list] = {}
                for tp in tps:
                    by_topic.setdefault(tp.topic, []).append(Part(partition_index=tp.partition,
                                                                  current_leader_epoch=-1,
                                                                  timestamp=pending[tp], max_num_offsets=1))
                try:
                    r = self.send(leader, lambda c: ListOffsetsRequest(
                        version=c.version_for(ListOffsetsRequest, 2 if isolation_level else 1), replica_id=-1,
                        isolation_level=isolation_level,
                        topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]), deadline)
                except ConnectionLost:
                    if time.monotonic() >= deadline:
                        raise
                    continue                      # the leader went away: metadata again
                for t in r.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp in pending and p.error_code not in RETRIABLE:
                            results[tp] = (p.error_code, p.offset)
                            del pending[tp]
            if pending:
                self.backoff(deadline, f"the leaders of {','.join(str(tp) for tp in sorted(pending))}")
        return results

    # ---- fetch and produce --------------------------------------------------------------------------------
    def _fetch_source(self, tp: TopicPartition, deadline: float) -> tuple[Broker, str, bool]:
        """Where tp's next Fetch goes: (broker, rack to name, whether it is a preferred read replica). The
        replica the leader named while it is kept and in the metadata (else the partition goes LEADER_ONLY);
        the leader, with client_rack unless the partition is LEADER_ONLY."""
        node_id, until = self._read_from.get(tp, (LEADER_ONLY, 0.0))
        if time.monotonic() >= until:
            self._read_from.pop(tp, None)
            return self.leader(tp, deadline), self.client_rack, False
        if node_id != LEADER_ONLY:
            replica = self.known_metadata([tp.topic], deadline).brokers.get(node_id)
            if replica is not None:
                return replica, self.client_rack, True
            self._read_from[tp] = (LEADER_ONLY, until)
        return self.leader(tp, deadline), "", False

    def _answer(self, tp: TopicPartition, fetched: FetchPartitionData | None,
                from_replica: bool) -> FetchPartitionData | None:
        """fetched (None: the connection was lost) when it answers the Fetch of tp; None when tp is to be fetched
        again at once: from the replica the leader named, or from the leader after the replica failed."""
        if from_replica and (fetched is None or fetched.error_code):
            self._read_from[tp] = (LEADER_ONLY, time.monotonic() + self.metadata_max_age)
            return None
        if fetched is not None and fetched.preferred_read_replica >= 0:
            self._read_from[tp] = (fetched.preferred_read_replica, time.monotonic() + self.metadata_max_age)
            return None
        return fetched

    def send_fetch(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int = 500,
                   isolation_level: int = 0) -> tuple | None:
        """Send a Fetch of tp at offset (to _fetch_source) without waiting for the answer, so that the broker sends
        it while the caller works; pass the result to the next fetch() as `sent`. None when it could not be sent
        for a retriable reason (fetch() then sends it again)."""
        deadline = self.deadline()
        try:
            broker, rack, from_replica = self._fetch_source(tp, deadline)
            c = self.connection(broker.address, deadline)
            version = c.version_for(FetchRequest, 4)
            c.submit(fetch_request(version, tp.topic, tp.partition, offset, max_bytes, max_wait_ms=max_wait_ms,
                                   isolation_level=isolation_level, rack_id=rack),
                     decode=False, timeout=self.remaining(deadline))
        except KafkaError as e:
            if not is_retriable(e):
                raise
            return None
        return broker.address, tp, offset, version, from_replica

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int = 500,
              sent: tuple | None = None, isolation_level: int = 0) -> FetchPartitionData:
        """One Fetch of tp at offset from its leader, or its preferred read replica (see the module's docstring),
        or the answer to `sent` when that asked for it, sent with the same isolation level; retriable errors are
        retried, others returned. The records are [one view into the received frame] or []; with isolation_level
        1 (READ_COMMITTED) they end at the last stable offset and aborted_transactions lists the aborted
        transactions among them."""
        if sent is not None:
            address, sent_tp, sent_offset, version, from_replica = sent
            c = self.connections.get(address)
            if c is None or not c.in_flight or (sent_tp, sent_offset) != (tp, offset):
                self.drop(address)                  # its answer would be read as the next one's
            else:
                try:
                    fetched = decode_fetch_response(c.receive(), version).partition(*tp)
                except ConnectionLost:
                    self.drop(address)
                    fetched = None
                answer = self._answer(tp, fetched, from_replica)
                if answer is not None and answer.error_code not in RETRIABLE:
                    return answer
                if answer is not None or (fetched is None and not from_replica):
                    self.cached = None

        def attempt(deadline):
            while True:                             # at most: leader, the replica it names, the leader again
                broker, rack, from_replica = self._fetch_source(tp, deadline)
                try:
                    version = self.connection(broker.address, deadline).version_for(FetchRequest, 4)
                    request = fetch_request(version, tp.topic, tp.partition, offset, max_bytes,
                                            max_wait_ms=max_wait_ms, isolation_level=isolation_level, rack_id=rack)
                    body = self.send(broker, lambda c, r=request: r, deadline, decode=False)
                    fetched = decode_fetch_response(body, version).partition(*tp)
                except ConnectionLost:
                    if not from_replica:
                        raise
                    fetched = None
                answer = self._answer(tp, fetched, from_replica)
                if answer is None:
                    continue
                if answer.error_code in RETRIABLE:
                    raise KafkaError(answer.error_code, f"Fetch {tp}: {error_name(answer.error_code)}")
                return answer
        return self.retrying(f"Fetch {tp} at offset {offset}", attempt)

    def init_producer_id(self) -> tuple[int, int]:
        """A producer id and epoch for an idempotent producer (InitProducerId, no transactional id)."""
        def attempt(deadline):
            r = self.send_any(lambda c: InitProducerIdRequest(version=c.version_for(InitProducerIdRequest),
                                                              transactional_id=None, transaction_timeout_ms=60000),
                              deadline)
            if r.error_code:
                raise KafkaError(r.error_code, f"InitProducerId: {error_name(r.error_code)}")
            return r.producer_id, r.producer_epoch
        return self.retrying("InitProducerId", attempt)

    def produce(self, tp: TopicPartition, records: bytes, acks: int, timeout_ms: int) -> int:
        """Send one record batch to tp's leader and wait for its acknowledgement; the base offset (-1 for
        acks=0). Retriable errors resend the same batch (an idempotent batch is then deduplicated)."""
        def attempt(deadline):
            r = self.send(self.leader(tp, deadline), lambda c: produce_request(
                c.version_for(ProduceRequest, 3), tp.topic, tp.partition, records, acks, timeout_ms), deadline)
            if r is None:
                return -1
            p = r.responses[0].partition_responses[0]
            if p.error_code in (Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER):
                return p.base_offset
            message = getattr(p, "error_message", None)
            raise KafkaError(p.error_code, f"Produce {tp}: {error_name(p.error_code)}"
                                           f"{f' ({message})' if message else ''}")
        return self.retrying(f"Produce {tp}", attempt)
