"""Bad input on the wire, against one real broker over raw sockets.

For every case: the broker answers with Kafka's error code where the protocol has one, otherwise it closes
THAT connection (and only that one); afterwards a second connection, opened before the bad input, still gets
a correct ApiVersions answer and the broker process is still running.

One broker serves the whole module (started with socket.request.max.bytes=1024 so the size limit can be
probed with small frames, a 1-partition __consumer_offsets it can host, and no delay before a new group's
first rebalance); every test opens its own connections.
"""
from __future__ import annotations

import random
import socket
import struct
import uuid

import pytest

from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
                                  AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                                  DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import (JoinGroupRequest, JoinGroupResponse, OffsetCommitRequest,
                                     OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse, MetadataRequest,
                                     MetadataResponse)
from kafka.protocol.producer import ProduceResponse

from tests.integration.conftest import Cluster, wait_until

MAX_REQUEST_BYTES = 1024
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
UNSUPPORTED_VERSION = 35
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
TIMEOUT = 5.0


@pytest.fixture(scope="module")
def broker(zookeeper, tmp_path_factory):
    zk_connect = f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}"
    cluster = Cluster(zk_connect, str(tmp_path_factory.mktemp("bad-input")))
    try:
        b = cluster.add(1, **{"socket.request.max.bytes": MAX_REQUEST_BYTES, "offsets.topic.replication.factor": 1,
                              "offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0})
        cluster.wait_ready([1])
        host, port = b.bootstrap.rsplit(":", 1)
        wait_until(lambda: _can_connect(host, int(port)), 10, message="broker accepting connections")
        yield b
    finally:
        cluster.stop()


def _can_connect(host, port) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


# ---- raw protocol helpers ----------------------------------------------------------------------------------

def connect(b) -> socket.socket:
    host, port = b.bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    s.settimeout(TIMEOUT)
    return s


def frame(request, correlation_id: int, client_id: str | None = "bad-input-test") -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def recv_response(s: socket.socket) -> bytes:
    """One response frame, without its size prefix."""
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    assert 4 <= size < 10 * 1024 * 1024, size
    return recv_exact(s, size)


def split_header(payload: bytes, flexible_header: bool) -> tuple[int, bytes]:
    (correlation_id,) = struct.unpack_from(">i", payload, 0)
    if flexible_header:
        assert payload[4] == 0, "response header v1 must carry an empty tagged-field section"
        return correlation_id, payload[5:]
    return correlation_id, payload[4:]


def assert_closed(s: socket.socket) -> None:
    """The broker closed this connection without sending anything back."""
    try:
        data = s.recv(4096)
    except (ConnectionResetError, BrokenPipeError):
        return
    except socket.timeout:
        raise AssertionError(f"broker kept the connection open for {TIMEOUT}s after bad input") from None
    assert data == b"", f"expected the connection to be closed, got {data!r}"


def api_versions_ok(s: socket.socket, correlation_id: int = 4242) -> None:
    s.sendall(frame(ApiVersionsRequest(version=0), correlation_id))
    cid, body = split_header(recv_response(s), flexible_header=False)
    assert cid == correlation_id
    resp = ApiVersionsResponse.decode(body, version=0)
    assert resp.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[3] == (0, 11) and ranges[18] == (0, 3)


@pytest.fixture
def witness(broker):
    """A connection opened before the bad input; after the test it must still work, and the broker live."""
    s = connect(broker)
    api_versions_ok(s, correlation_id=1)  # fully established before the bad input is sent
    yield s
    try:
        api_versions_ok(s, correlation_id=2)
        assert broker.alive(), "broker process died"
        # bad input is refused by the framing and the header parser, not by a handler crashing
        assert "Traceback" not in broker.log()
    finally:
        s.close()


def send_and_expect_close(broker, data: bytes, *, shutdown_write: bool = False) -> None:
    s = connect(broker)
    try:
        s.sendall(data)
        if shutdown_write:
            s.shutdown(socket.SHUT_WR)
        assert_closed(s)
    finally:
        s.close()


def size_prefixed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


# ---- framing -----------------------------------------------------------------------------------------------

def test_random_garbage_closes_the_connection(broker, witness):
    garbage = random.Random(20240501).randbytes(64)
    (size,) = struct.unpack(">i", garbage[:4])
    assert not 0 <= size <= MAX_REQUEST_BYTES  # (the seed gives an out-of-range size prefix)
    send_and_expect_close(broker, garbage)


def test_garbage_inside_a_well_sized_frame_closes_the_connection(broker, witness):
    body = random.Random(7).randbytes(60)
    (api_key,) = struct.unpack(">h", body[:2])
    assert api_key > 1000  # (the seed gives an api key far beyond any Kafka API)
    send_and_expect_close(broker, size_prefixed(body))


def test_size_over_socket_request_max_bytes_closes_and_is_logged(broker, witness):
    s = connect(broker)
    try:
        client_port = s.getsockname()[1]
        s.sendall(struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\0" * 16)
        assert_closed(s)
    finally:
        s.close()
    wait_until(lambda: any(str(client_port) in line and "closing connection" in line
                           and str(MAX_REQUEST_BYTES + 1) in line and "socket.request.max.bytes" in line
                           for line in broker.log().splitlines()),
               5, message="a log line naming the closed connection and the oversized request")


def test_request_of_exactly_socket_request_max_bytes_is_served(broker, witness):
    """The limit is inclusive, as Kafka's (size > maxSize is refused)."""
    base = len(frame(MetadataRequest(version=1, topics=None), 9, client_id="")) - 4
    client_id = "x" * (MAX_REQUEST_BYTES - base)
    data = frame(MetadataRequest(version=1, topics=None), 9, client_id=client_id)
    assert struct.unpack(">i", data[:4])[0] == MAX_REQUEST_BYTES
    s = connect(broker)
    try:
        s.sendall(data)
        cid, body = split_header(recv_response(s), flexible_header=False)
        assert cid == 9
        resp = MetadataResponse.decode(body, version=1)
        assert [b.node_id for b in resp.brokers] == [1]
    finally:
        s.close()


@pytest.mark.parametrize("size", [-1, -2 ** 31])
def test_negative_size_closes_the_connection(broker, witness, size):
    send_and_expect_close(broker, struct.pack(">i", size) + b"\0" * 8)


def test_disconnect_mid_request(broker, witness):
    request = frame(MetadataRequest(version=1, topics=None), 5)
    s = connect(broker)
    s.sendall(request[: len(request) // 2])
    s.close()  # the broker is left waiting for the rest of a frame that never comes
    # and the broker still serves a new connection too
    s = connect(broker)
    try:
        api_versions_ok(s)
    finally:
        s.close()


def test_truncated_frame_then_half_close(broker, witness):
    """Size says 100, 10 bytes arrive, then the client's side ends: the broker closes its side."""
    send_and_expect_close(broker, struct.pack(">i", 100) + b"\0" * 10, shutdown_write=True)


@pytest.mark.parametrize("body", [b"", b"\x00\x12\x00\x00\x00\x00\x00", b"\x00\x03\x00\x01\x00\x00\x00\x07\xff"],
                         ids=["empty-frame", "7-bytes", "9-bytes-partial-client-id-length"])
def test_frame_shorter_than_a_request_header_closes(broker, witness, body):
    send_and_expect_close(broker, size_prefixed(body))


def test_client_id_running_past_the_frame_closes(broker, witness):
    body = struct.pack(">hhih", 18, 0, 3, 50) + b"short"
    send_and_expect_close(broker, size_prefixed(body))


# ---- API key / version -------------------------------------------------------------------------------------

@pytest.mark.parametrize("api_key", [999, 67, -1])
def test_unknown_api_key_closes(broker, witness, api_key):
    body = struct.pack(">hhih", api_key, 0, 11, 1) + b"t" + b"\0" * 8
    send_and_expect_close(broker, size_prefixed(body))


def test_metadata_v12_closes(broker, witness):
    send_and_expect_close(broker, frame(MetadataRequest(version=12, topics=None), 12))


def test_api_versions_v9_gets_v0_answer_with_unsupported_version_and_ranges(broker, witness):
    # No library encodes v9: a v2 (flexible) header and an empty flexible body, as a future client would send.
    body = struct.pack(">hhih", 18, 9, 77, 4) + b"test" + b"\x00" + b"\x01\x01\x00"
    s = connect(broker)
    try:
        s.sendall(size_prefixed(body))
        cid, payload = split_header(recv_response(s), flexible_header=False)
        assert cid == 77
        resp = ApiVersionsResponse.decode(payload, version=0)
        assert resp.error_code == UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert ranges[3] == (0, 11)
        assert ranges[18] == (0, 3)
        # the connection stays usable: the client retries with a version it found in the list
        api_versions_ok(s, correlation_id=78)
    finally:
        s.close()


def test_api_versions_v3_with_invalid_software_name_is_invalid_request(broker, witness):
    request = ApiVersionsRequest(version=3, client_software_name="bad name!", client_software_version="1.0")
    s = connect(broker)
    try:
        s.sendall(frame(request, 31))
        cid, payload = split_header(recv_response(s), flexible_header=False)  # header v0 even for v3
        assert cid == 31
        (error_code,) = struct.unpack_from(">h", payload, 0)
        assert error_code == INVALID_REQUEST
        # The body is a v3 body, as Kafka's. (kafka-python's ApiVersionsResponse.decode assumes a v0 body
        # whenever the error code is not 0, which only holds for UNSUPPORTED_VERSION, so decode as the base.)
        resp = ApiMessage.decode.__func__(ApiVersionsResponse, payload, version=3)
        assert resp.error_code == INVALID_REQUEST
        assert resp.throttle_time_ms == 0
    finally:
        s.close()


def test_api_versions_v3_with_valid_software_name_is_answered(broker, witness):
    request = ApiVersionsRequest(version=3, client_software_name="kafka-python", client_software_version="3.0.12")
    s = connect(broker)
    try:
        s.sendall(frame(request, 32))
        cid, payload = split_header(recv_response(s), flexible_header=False)
        assert cid == 32
        resp = ApiVersionsResponse.decode(payload, version=3)
        assert resp.error_code == 0
        assert {k.api_key for k in resp.api_keys} >= {3, 18}
    finally:
        s.close()


METADATA_V1_BODY_LEN = 4 + (2 + len("some-topic")) + (2 + len("other"))


@pytest.mark.parametrize("cut", [
    pytest.param(1, id="inside-last-string"),
    pytest.param(3, id="inside-last-string-3"),
    pytest.param(6, id="inside-a-string-length"),
    pytest.param(METADATA_V1_BODY_LEN - 2, id="inside-the-array-length"),
    pytest.param(METADATA_V1_BODY_LEN, id="no-body-at-all"),
])
def test_metadata_body_truncated_closes(broker, witness, cut):
    request = MetadataRequest(version=1, topics=["some-topic", "other"])
    data = frame(request, 13)
    assert len(request.encode(version=1)) == METADATA_V1_BODY_LEN
    body = data[4:-cut]  # valid header, body short by `cut` bytes, size prefix matching what is sent
    send_and_expect_close(broker, size_prefixed(body))


# ---- pipelining --------------------------------------------------------------------------------------------

def test_pipelined_requests_are_answered_in_order(broker, witness):
    plan = [  # (correlation id, request, response class, flexible response header)
        (500, ApiVersionsRequest(version=0), ApiVersionsResponse, False),
        (3, MetadataRequest(version=1, topics=None), MetadataResponse, False),
        (77, ApiVersionsRequest(version=3, client_software_name="pipe", client_software_version="1"),
         ApiVersionsResponse, False),
        (-5, MetadataRequest(version=9, topics=None), MetadataResponse, True),
        (2 ** 31 - 1, MetadataRequest(version=0, topics=[]), MetadataResponse, False),
    ]
    s = connect(broker)
    try:
        s.sendall(b"".join(frame(req, cid) for cid, req, _, _ in plan))
        for cid, req, response_class, flexible_header in plan:
            got_cid, payload = split_header(recv_response(s), flexible_header)
            assert got_cid == cid
            resp = response_class.decode(payload, version=req.API_VERSION)
            if response_class is MetadataResponse:
                assert [b.node_id for b in resp.brokers] == [1]
            else:
                assert resp.error_code == 0
    finally:
        s.close()



# ---- the transaction APIs: a valid header, then no body or a body cut short ------------------------------
# (api key, highest version, first flexible version) of InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
# EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions.
TXN_APIS = [(22, 4, 2), (24, 3, 3), (25, 3, 3), (26, 3, 3), (27, 1, 1), (28, 3, 3), (61, 0, 0), (65, 0, 0), (66, 0, 0)]


@pytest.mark.parametrize("body", [b"", b"\xff\xff\xff"], ids=["no-body", "cut-short"])
@pytest.mark.parametrize("api_key,version,flexible",
                         [(k, v, v >= f) for k, top, f in TXN_APIS for v in range(top + 1)],
                         ids=lambda x: str(x))
def test_transaction_api_bodies_cut_short_close(broker, witness, api_key, version, flexible, body):
    header = struct.pack(">hhih", api_key, version, 21, 4) + b"test" + (b"\x00" if flexible else b"")
    send_and_expect_close(broker, size_prefixed(header + body))


# ---- found by the fuzzer (tests/integration/test_fuzz_requests.py): each once crashed a request handler -------

def _s(text: str | None) -> bytes:
    """A non-compact (nullable) string."""
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text.encode())) + text.encode()


def raw_request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    return size_prefixed(struct.pack(">hhi", api_key, version, correlation_id) + _s("fuzz-regression") + body)


NULL = struct.pack(">i", -1)


@pytest.mark.parametrize("api_key,version,body", [
    # OffsetCommit v2: group, generation, member, retention, topics: null
    (8, 2, _s("g") + struct.pack(">i", -1) + _s("") + struct.pack(">q", -1) + NULL),
    # ListOffsets v1: replica id, topics: null
    (2, 1, struct.pack(">i", -1) + NULL),
    # Fetch v4: replica id, max wait, min bytes, max bytes, isolation level, topics: null
    (1, 4, struct.pack(">iiiib", -1, 0, 1, 1000, 0) + NULL),
    # JoinGroup v0: group, session timeout, member, protocol type, protocols: null
    (11, 0, _s("g") + struct.pack(">i", 10000) + _s("") + _s("consumer") + NULL),
    # SyncGroup v0: group, generation, member, assignments: null
    (14, 0, _s("g") + struct.pack(">i", 1) + _s("m") + NULL),
    # AddPartitionsToTxn v0: transactional id, producer id, epoch, topics: null
    (24, 0, _s("t") + struct.pack(">qh", 1, 0) + NULL),
    # DescribeTransactions v0 (flexible: header tags, then a compact array of one null compact string, tags)
    (65, 0, b"\x00" + b"\x02\x00" + b"\x00"),
], ids=["OffsetCommit-v2", "ListOffsets-v1", "Fetch-v4", "JoinGroup-v0", "SyncGroup-v0", "AddPartitionsToTxn-v0",
        "DescribeTransactions-v0-null-id"])
def test_null_in_a_non_nullable_array_closes(broker, witness, api_key, version, body):
    """A length of -1 where the schema allows no null: Kafka refuses the request ("non-nullable field ... was
    serialized as null") and closes the connection; these reached the handlers, which failed on None."""
    send_and_expect_close(broker, raw_request(api_key, version, 41, body))


def _auto_created_topic(s: socket.socket) -> str:
    """A topic created by a Metadata request (auto.create.topics.enable), once it has a leader."""
    topic = f"fuzz-found-{uuid.uuid4().hex[:6]}"

    def led():
        request = MetadataRequest(version=4, topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                  allow_auto_topic_creation=True)
        s.sendall(frame(request, 51))
        _, payload = split_header(recv_response(s), flexible_header=False)
        (t,) = MetadataResponse.decode(payload, version=4).topics
        return t.error_code == 0 and t.partitions and t.partitions[0].leader_id == 1
    wait_until(led, 10, message=f"{topic} created with a leader")
    return topic


def produce_empty_v7(broker, name: bytes, correlation_id: int):
    """The topic answer of a raw Produce v7 (acks=1) of empty records to partition 0 of the topic named by the
    raw bytes `name`."""
    body = (_s(None) + struct.pack(">hi", 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 0))
    s = connect(broker)
    try:
        s.sendall(raw_request(0, 7, correlation_id, body))
        cid, payload = split_header(recv_response(s), flexible_header=False)
        assert cid == correlation_id
        (topic,) = ProduceResponse.decode(payload, version=7).responses
        return topic
    finally:
        s.close()


def test_produce_to_a_topic_name_that_is_not_utf8_is_answered_unknown_topic(broker, witness):
    """Kafka decodes strings as Java does (bad bytes become U+FFFD), so the name is just an unknown topic."""
    topic = produce_empty_v7(broker, b"\xff\xfe-t", 61)
    assert topic.name == "\ufffd\ufffd-t"
    assert [p.error_code for p in topic.partition_responses] == [UNKNOWN_TOPIC_OR_PARTITION]


def test_offset_commit_v2_with_the_longest_retention_time_is_stored(broker, witness):
    """now + retention overflowed the int64 expire timestamp of the offset record; Kafka's Long arithmetic
    wraps, so the commit succeeds and the offset can be fetched."""
    s = connect(broker)
    try:
        topic = _auto_created_topic(s)
        group = f"g-{uuid.uuid4().hex[:6]}"
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        commit = OffsetCommitRequest(version=2, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                     retention_time_ms=2 ** 63 - 1, topics=[Topic(name=topic, partitions=[
                                         Topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                            committed_metadata="m")])])

        def committed():
            s.sendall(frame(FindCoordinatorRequest(version=0, key=group), 62))   # creates __consumer_offsets
            recv_response(s)
            s.sendall(frame(commit, 62))
            _, payload = split_header(recv_response(s), flexible_header=False)
            (t,) = OffsetCommitResponse.decode(payload, version=2).topics
            (p,) = t.partitions
            assert p.error_code in (0, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
            return p.error_code == 0
        wait_until(committed, 20, message="the offset committed once the coordinator is ready")
        fetch = OffsetFetchRequest(version=1, group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=topic, partition_indexes=[0])])
        s.sendall(frame(fetch, 63))
        _, payload = split_header(recv_response(s), flexible_header=False)
        (t,) = OffsetFetchResponse.decode(payload, version=1).topics
        assert [(p.committed_offset, p.error_code) for p in t.partitions] == [(5, 0)]
    finally:
        s.close()


@pytest.mark.parametrize("replicas", [[1, 1], [7]], ids=["duplicate", "not-a-broker"])
def test_reassignment_to_an_invalid_replica_list_is_invalid_replica_assignment(broker, witness, replicas):
    """The controller raised on an error code missing from errors.py; the partition gets Kafka's 39."""
    s = connect(broker)
    try:
        topic = _auto_created_topic(s)
        Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
        request = AlterPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=[Topic(
            name=topic, partitions=[Topic.ReassignablePartition(partition_index=0, replicas=replicas)])])
        s.sendall(frame(request, 64))
        _, payload = split_header(recv_response(s), flexible_header=True)
        response = AlterPartitionReassignmentsResponse.decode(payload, version=0)
        assert response.error_code == 0
        (t,) = response.responses
        assert [p.error_code for p in t.partitions] == [INVALID_REPLICA_ASSIGNMENT]
    finally:
        s.close()


def test_join_group_naming_a_protocol_twice_completes_the_rebalance(broker, witness):
    """Counted twice for one member, the protocol was supported by "more than every member": the rebalance
    raised choosing a protocol and the group hung in PreparingRebalance, every later join waiting forever."""
    Protocol = JoinGroupRequest.JoinGroupRequestProtocol
    group = f"twice-{uuid.uuid4().hex[:6]}"
    request = JoinGroupRequest(version=0, group_id=group, session_timeout_ms=10000, member_id="",
                               protocol_type="consumer", protocols=[Protocol(name="range", metadata=b"a"),
                                                                    Protocol(name="range", metadata=b"b")])
    s = connect(broker)
    try:
        def joined():
            s.sendall(frame(FindCoordinatorRequest(version=0, key=group), 71))
            _, payload = split_header(recv_response(s), flexible_header=False)
            if FindCoordinatorResponse.decode(payload, version=0).error_code:
                return False
            s.sendall(frame(request, 72))
            _, payload = split_header(recv_response(s), flexible_header=False)
            response = JoinGroupResponse.decode(payload, version=0)
            assert response.error_code in (0, COORDINATOR_LOAD_IN_PROGRESS), response
            return response if response.error_code == 0 else None
        response = wait_until(joined, 20, message="the member joined")
        assert response.protocol_name == "range" and response.leader == response.member_id
        assert [(m.member_id, bytes(m.metadata)) for m in response.members] == [(response.member_id, b"a")]
    finally:
        s.close()


def test_produce_to_an_internal_topic_is_invalid_topic(broker, witness):
    """The refusal named an error code errors.py lacks, so the handler failed; Kafka answers
    INVALID_TOPIC_EXCEPTION (17) whether or not the internal topic exists yet."""
    topic = produce_empty_v7(broker, b"__transaction_state", 81)
    assert [p.error_code for p in topic.partition_responses] == [INVALID_TOPIC_EXCEPTION]


def test_scram_credentials_of_a_user_named_dot_dot_fail_for_that_user(broker, witness):
    """".." stays ".." when sanitized and ZooKeeper refuses it as a relative path: the handler failed on the
    client library's ValueError. Kafka answers that user UNKNOWN_SERVER_ERROR, and so does kbroker."""
    s = connect(broker)
    try:
        s.sendall(frame(DescribeUserScramCredentialsRequest(version=0, users=[
            DescribeUserScramCredentialsRequest.UserName(name="..")]), 91))
        _, payload = split_header(recv_response(s), flexible_header=True)
        response = DescribeUserScramCredentialsResponse.decode(payload, version=0)
        assert response.error_code == 0
        assert [(r.user, r.error_code) for r in response.results] == [("..", UNKNOWN_SERVER_ERROR)]
        Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        s.sendall(frame(AlterUserScramCredentialsRequest(version=0, deletions=[], upsertions=[Upsertion(
            name="..", mechanism=1, iterations=4096, salt=b"salt", salted_password=b"x" * 32)]), 92))
        _, payload = split_header(recv_response(s), flexible_header=True)
        response = AlterUserScramCredentialsResponse.decode(payload, version=0)
        assert [(r.user, r.error_code) for r in response.results] == [("..", UNKNOWN_SERVER_ERROR)]
    finally:
        s.close()
