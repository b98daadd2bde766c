"""The Spark data source's Kafka client: metadata, offsets by position or by time, fetch and produce, each sent
to the partition's leader, over plain blocking sockets (Spark's Python workers are ordinary threads).

Fetch responses are decoded by hand so that the records stay one memoryview into the received frame (they are
the bulk of what is read, and kafka-python's decoder would copy them); every other message is encoded and
decoded with kafka-python's classes. Versions are fixed to ones Kafka 2.8 serves: Metadata 8, ListOffsets 4,
Fetch 11, Produce 8, InitProducerId 1.

Retriable errors (leader moved or not yet elected, broker gone, replicas short) drop the cached metadata and
the connection and are retried, with a short backoff, until `timeout` seconds have passed without success.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from ..protocol.errors import Errors
from ..protocol.header import request_header

FETCH_KEY, FETCH_VERSION = 1, 11
METADATA_VERSION, LIST_OFFSETS_VERSION, PRODUCE_VERSION, INIT_PRODUCER_ID_VERSION = 8, 4, 8, 1
EARLIEST, LATEST = -2, -1            # ListOffsets' special timestamps (and Spark's JSON offsets)
RETRY_BACKOFF = 0.1

RETRIABLE = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE, Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.REQUEST_TIMED_OUT, Errors.BROKER_NOT_AVAILABLE, Errors.REPLICA_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION,
    Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.KAFKA_STORAGE_ERROR,
    Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH, Errors.OFFSET_NOT_AVAILABLE,
})

_SIZE = struct.Struct(">i")
_FETCH_HEAD = struct.Struct(">iiiibii")          # replica, max_wait, min_bytes, max_bytes, isolation, session, epoch
_FETCH_PART = struct.Struct(">iiqqi")            # partition, leader epoch, fetch offset, log start, max bytes
_RESP_PART = struct.Struct(">ihqqq")             # partition, error, high watermark, last stable, log start


def error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"error {code}"


class KafkaClientError(Exception):
    """A request the cluster refused or could not answer in time; `code` is Kafka's error code, if any."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class _Retry(Exception):
    """A retriable failure inside one attempt."""


class TopicPartition(NamedTuple):
    """A tuple, so that hashing it (dict keys on the per-record write path) stays in C."""
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass
class Metadata:
    brokers: dict[int, tuple[str, int]]
    partitions: dict[str, dict[int, int]] = field(default_factory=dict)   # topic -> partition -> leader (-1: none)
    topic_errors: dict[str, int] = field(default_factory=dict)
    internal: set[str] = field(default_factory=set)


@dataclass
class FetchedPartition:
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"'{item}' in kafka.bootstrap.servers is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("kafka.bootstrap.servers names no HOST:PORT")
    return out


class Connection:
    """One socket to one broker, one request at a time."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float):
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.correlation_id = 0
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise _Retry(f"cannot connect to {self.address}: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _send(self, frame: bytes) -> None:
        try:
            self.sock.sendall(frame)
        except OSError as e:
            self.close()
            raise _Retry(f"request to {self.address} failed: {e}") from None

    def _receive(self) -> bytearray:
        try:
            size = _SIZE.unpack(self._read(4))[0]
            return self._read(size)
        except OSError as e:
            self.close()
            raise _Retry(f"no answer from {self.address}: {e}") from None

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("connection closed by the broker")
            got += k
        return buf

    def _next_id(self) -> int:
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        return self.correlation_id

    def _check_id(self, frame) -> None:
        if _SIZE.unpack_from(frame, 0)[0] != self.correlation_id:
            self.close()
            raise _Retry(f"{self.address} answered out of order")

    def send(self, request):
        """A kafka-python request message; its decoded response."""
        request.with_header(correlation_id=self._next_id(), client_id=self.client_id)
        response_cls = request.header.get_response_class()
        self._send(bytes(request.encode(header=True, framed=True)))
        frame = self._receive()
        self._check_id(frame)
        return response_cls.decode(frame, header=True)

    def send_fetch(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int = 500,
                   min_bytes: int = 1) -> None:
        """Fetch v11 of one partition (read_uncommitted: up to the high watermark); receive_fetch() answers."""
        topic = tp.topic.encode()
        body = (request_header(FETCH_KEY, FETCH_VERSION, self._next_id(), self.client_id, False)
                + _FETCH_HEAD.pack(-1, max_wait_ms, min_bytes, max_bytes, 0, 0, -1)
                + _SIZE.pack(1) + struct.pack(">h", len(topic)) + topic
                + _SIZE.pack(1) + _FETCH_PART.pack(tp.partition, -1, offset, -1, max_bytes)
                + _SIZE.pack(0) + b"\xff\xff")        # no forgotten topics, null rack id
        self._send(_SIZE.pack(len(body)) + body)

    def receive_fetch(self, tp: TopicPartition) -> FetchedPartition:
        frame = self._receive()
        self._check_id(frame)
        return _decode_fetch_v11(memoryview(frame), tp)


def _decode_fetch_v11(view: memoryview, tp: TopicPartition) -> FetchedPartition:
    pos = 4 + 4                                               # correlation id, throttle
    error, _session = struct.unpack_from(">hi", view, pos)
    pos += 6
    if error:
        return FetchedPartition(error, -1, -1, view[0:0])
    (n_topics,) = _SIZE.unpack_from(view, pos)
    pos += 4
    for _ in range(n_topics):
        (name_len,) = struct.unpack_from(">h", view, pos)
        name = bytes(view[pos + 2:pos + 2 + name_len]).decode()
        pos += 2 + name_len
        (n_parts,) = _SIZE.unpack_from(view, pos)
        pos += 4
        for _ in range(n_parts):
            partition, error, hw, _lso, log_start = _RESP_PART.unpack_from(view, pos)
            pos += _RESP_PART.size
            (n_aborted,) = _SIZE.unpack_from(view, pos)
            pos += 4 + max(n_aborted, 0) * 16 + 4              # aborted transactions, preferred read replica
            (size,) = _SIZE.unpack_from(view, pos)
            pos += 4
            records = view[pos:pos + max(size, 0)]
            pos += max(size, 0)
            if name == tp.topic and partition == tp.partition:
                return FetchedPartition(error, hw, log_start, records)
    return FetchedPartition(Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, view[0:0])


class KafkaClient:
    """Requests routed to leaders through a metadata cache, retried on retriable errors within `timeout`."""

    def __init__(self, bootstrap: str, client_id: str = "kbroker-spark", timeout: float = 30.0):
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.timeout = timeout
        self._connections: dict[tuple[str, int], Connection] = {}
        self._metadata: Metadata | None = None

    def close(self) -> None:
        for c in self._connections.values():
            c.close()
        self._connections.clear()

    def __enter__(self) -> "KafkaClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- connections and retries ------------------------------------------------------------------------
    def _connection(self, address: tuple[str, int]) -> Connection:
        c = self._connections.get(address)
        if c is None:
            c = self._connections[address] = Connection(*address, self.client_id, self.timeout)
        return c

    def _drop(self, address: tuple[str, int]) -> None:
        c = self._connections.pop(address, None)
        if c is not None:
            c.close()

    def _call(self, address: tuple[str, int], fn):
        """fn(connection) on the broker at address; a failed connection is dropped and _Retry raised."""
        try:
            return fn(self._connection(address))
        except _Retry:
            self._drop(address)
            raise

    def retrying(self, what: str, attempt):
        """attempt() until it returns without _Retry; metadata is refreshed between attempts."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return attempt()
            except _Retry as e:
                if time.monotonic() + RETRY_BACKOFF > deadline:
                    raise KafkaClientError(f"{what}: gave up after {self.timeout:g} s ({e})") from None
                self._metadata = None
                time.sleep(RETRY_BACKOFF)

    # ---- metadata ---------------------------------------------------------------------------------------
    def metadata(self, topics: list[str] | None = None, refresh: bool = False) -> Metadata:
        """Brokers and partition leaders of the named topics (None: all topics); never creates topics."""
        if self._metadata is not None and not refresh and topics is not None and \
                all(t in self._metadata.partitions or t in self._metadata.topic_errors for t in topics):
            return self._metadata
        return self.retrying("Metadata", lambda: self._fetch_metadata(topics))

    def _fetch_metadata(self, topics: list[str] | None) -> Metadata:
        request_topics = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]

        def build():
            return MetadataRequest(version=METADATA_VERSION, topics=request_topics, allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False)
        known = list(self._metadata.brokers.values()) if self._metadata else []
        last = None
        for address in dict.fromkeys([*self._connections, *self.bootstrap, *known]):
            try:
                r = self._call(address, lambda c: c.send(build()))
                break
            except _Retry as e:
                last = e
        else:
            raise _Retry(f"no broker of {','.join(f'{h}:{p}' for h, p in self.bootstrap)} answers ({last})")
        md = Metadata({b.node_id: (b.host, b.port) for b in r.brokers})
        for t in r.topics:
            if t.error_code and t.error_code != Errors.LEADER_NOT_AVAILABLE:
                md.topic_errors[t.name] = t.error_code
            else:
                md.partitions[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
            if t.is_internal:
                md.internal.add(t.name)
        self._metadata = md
        return md

    def partitions_of(self, topics: list[str]) -> dict[str, list[int]]:
        """Partition ids of each existing topic of `topics` (missing topics are left out)."""
        md = self.metadata(topics, refresh=True)
        return {t: sorted(md.partitions[t]) for t in topics if t in md.partitions}

    def all_topics(self) -> list[str]:
        """Every topic but the internal ones (as a consumer's exclude.internal.topics)."""
        md = self.metadata(None, refresh=True)
        return sorted(t for t in md.partitions if t not in md.internal)

    def leader_address(self, tp: TopicPartition) -> tuple[str, int]:
        md = self.metadata([tp.topic])
        leader = md.partitions.get(tp.topic, {}).get(tp.partition, -1)
        if leader < 0 or leader not in md.brokers:
            code = md.topic_errors.get(tp.topic, Errors.LEADER_NOT_AVAILABLE)
            raise _Retry(f"no leader for {tp} ({error_name(code)})")
        return md.brokers[leader]

    # ---- offsets ----------------------------------------------------------------------------------------
    def list_offsets(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """For each partition, the offset for its timestamp: EARLIEST (-2) the log start offset, LATEST (-1)
        the high watermark, otherwise the first offset whose timestamp is >= it (-1 when there is none)."""
        results: dict[TopicPartition, int] = {}
        pending = dict(specs)

        def attempt():
            by_leader: dict[tuple[str, int], list[TopicPartition]] = {}
            for tp in sorted(pending):
                by_leader.setdefault(self.leader_address(tp), []).append(tp)
            for address, tps in by_leader.items():
                Topic = ListOffsetsRequest.ListOffsetsTopic
                Part = Topic.ListOffsetsPartition
                by_topic: dict[str, list] = {}
                for tp in tps:
                    by_topic.setdefault(tp.topic, []).append(
                        Part(partition_index=tp.partition, current_leader_epoch=-1, timestamp=pending[tp]))
                request = ListOffsetsRequest(version=LIST_OFFSETS_VERSION, replica_id=-1, isolation_level=0,
                                             topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])
                r = self._call(address, lambda c: c.send(request))
                retry = None
                for t in r.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in pending:
                            continue
                        if p.error_code in RETRIABLE:
                            retry = f"ListOffsets {tp}: {error_name(p.error_code)}"
                        elif p.error_code:
                            raise KafkaClientError(f"ListOffsets {tp}: {error_name(p.error_code)}", p.error_code)
                        else:
                            results[tp] = p.offset
                            del pending[tp]
                if retry:
                    raise _Retry(retry)
            if pending:
                raise _Retry(f"no ListOffsets answer for {', '.join(map(str, sorted(pending)))}")
        if pending:
            self.retrying("ListOffsets", attempt)
        return results

    # ---- fetch ------------------------------------------------------------------------------------------
    def send_fetch(self, tp: TopicPartition, offset: int, max_bytes: int) -> tuple | None:
        """Send a Fetch of tp at offset to its leader without waiting for the answer, so that the broker sends it
        while the caller parses the previous one; pass the result to the next fetch() as `sent`. None when it
        could not be sent (fetch() then sends it again)."""
        try:
            address = self.leader_address(tp)
            self._call(address, lambda c: c.send_fetch(tp, offset, max_bytes))
        except _Retry:
            return None
        return address, tp, offset

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int = 500,
              sent: tuple | None = None) -> FetchedPartition:
        """One Fetch of tp from its leader at offset (the answer to `sent` when that asked for it); retriable
        errors are retried, others returned."""
        if sent is not None:
            address, sent_tp, sent_offset = sent
            if (sent_tp, sent_offset) != (tp, offset):
                self._drop(address)                      # its answer would be read as the next one's
            else:
                try:
                    fetched = self._call(address, lambda c: c.receive_fetch(tp))
                    if fetched.error_code not in RETRIABLE:
                        return fetched
                except _Retry:
                    pass
                self._metadata = None

        def attempt():
            address = self.leader_address(tp)

            def exchange(c):
                c.send_fetch(tp, offset, max_bytes, max_wait_ms)
                return c.receive_fetch(tp)
            fetched = self._call(address, exchange)
            if fetched.error_code in RETRIABLE:
                raise _Retry(f"Fetch {tp}: {error_name(fetched.error_code)}")
            return fetched
        return self.retrying(f"Fetch {tp} at offset {offset}", attempt)

    # ---- produce ----------------------------------------------------------------------------------------
    def init_producer_id(self) -> tuple[int, int]:
        """A producer id and epoch for an idempotent producer (InitProducerId, no transactional id)."""
        def attempt():
            address = self.bootstrap[0] if not self._connections else next(iter(self._connections))
            r = self._call(address, lambda c: c.send(InitProducerIdRequest(
                version=INIT_PRODUCER_ID_VERSION, transactional_id=None, transaction_timeout_ms=60000)))
            if r.error_code in RETRIABLE or r.error_code == Errors.COORDINATOR_NOT_AVAILABLE:
                raise _Retry(f"InitProducerId: {error_name(r.error_code)}")
            if r.error_code:
                raise KafkaClientError(f"InitProducerId: {error_name(r.error_code)}", r.error_code)
            return r.producer_id, r.producer_epoch
        return self.retrying("InitProducerId", attempt)

    def produce(self, tp: TopicPartition, records: bytes, acks: int, timeout_ms: int) -> int:
        """Send one record batch to tp's leader and wait for its acknowledgement; the base offset (-1 for
        acks=0). Retriable errors resend the same batch (an idempotent batch is then deduplicated)."""
        Topic = ProduceRequest.TopicProduceData
        request_body = dict(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            Topic(name=tp.topic, partition_data=[Topic.PartitionProduceData(index=tp.partition, records=records)])])

        def attempt():
            address = self.leader_address(tp)
            request = ProduceRequest(version=PRODUCE_VERSION, **request_body)
            if acks == 0:
                def send_only(c):
                    request.with_header(correlation_id=c._next_id(), client_id=c.client_id)
                    try:
                        c.sock.sendall(bytes(request.encode(header=True, framed=True)))
                    except OSError as e:
                        raise _Retry(f"Produce to {c.address}: {e}") from None
                self._call(address, send_only)
                return -1
            r = self._call(address, lambda c: c.send(request))
            p = r.responses[0].partition_responses[0]
            if p.error_code in RETRIABLE:
                raise _Retry(f"Produce {tp}: {error_name(p.error_code)}")
            if p.error_code == Errors.DUPLICATE_SEQUENCE_NUMBER:
                return p.base_offset
            if p.error_code:
                message = getattr(p, "error_message", None)
                detail = f" ({message})" if message else ""
                raise KafkaClientError(f"Produce {tp}: {error_name(p.error_code)}{detail}", p.error_code)
            return p.base_offset
        return self.retrying(f"Produce {tp}", attempt)
