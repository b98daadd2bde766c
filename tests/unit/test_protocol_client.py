"""The protocol client against scripted brokers (threads on loopback sockets): framing, correlation checks,
pipelining, acks=0, timeouts, the one error type, version choice, leader routing and deadline retries."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest

from kbroker.protocol.client import (KAFKA_28_MAX, RETRIABLE, ClusterClient, Connection, ConnectionLost, Errors,
                                     KafkaError, TimedOut, TopicPartition, Unreachable, is_retriable)
from kbroker.protocol.client import cluster as cluster_module
from kbroker.protocol.client.requests import fetch_request, produce_request
from kbroker.protocol.header import parse_request_header_v1, response_header
from kbroker.protocol.hotpath import FetchPartitionData, decode_fetch_response, encode_fetch_response

REQUESTS = {0: ProduceRequest, 1: FetchRequest, 2: ListOffsetsRequest, 3: MetadataRequest}
SERVED = {0: (0, 9), 1: (0, 12), 2: (0, 6), 3: (0, 12), 10: (0, 3), 18: (0, 3)}   # Metadata beyond 2.8's 11


class FakeBroker:
    """Answers each request with handler(api_key, version, body) -> response body bytes, None (no answer),
    or "close"; `cid_shift` corrupts the correlation ids it answers with."""

    def __init__(self, handler):
        self.handler = handler
        self.cid_shift = 0
        self.requests: list[tuple[int, int]] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            while True:
                head = _read(conn, 4)
                if head is None:
                    return
                frame = memoryview(_read(conn, struct.unpack(">i", head)[0]))
                h = parse_request_header_v1(frame)
                self.requests.append((h.api_key, h.api_version))
                body = api_versions(SERVED) if h.api_key == 18 else self.handler(h.api_key, h.api_version, frame)
                if body == "close":
                    return
                if body is not None:
                    flexible = h.api_key != 18 and REQUESTS[h.api_key].flexible_version_q(h.api_version)
                    out = response_header(h.correlation_id + self.cid_shift, flexible) + bytes(body)
                    conn.sendall(struct.pack(">i", len(out)) + out)

    def close(self):
        try:
            self.server.shutdown(socket.SHUT_RDWR)      # wakes the accepting thread, so the port is free
        except OSError:
            pass
        self.server.close()


def _read(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def api_versions(served):
    R = ApiVersionsResponse
    return R(version=0, error_code=0, api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                                for k, (lo, hi) in served.items()]).encode(version=0)


def metadata_body(version, brokers, leaders, controller=1):
    """brokers: {id: port}; leaders: {(topic, partition): leader id}."""
    M = MetadataResponse
    P = M.MetadataResponseTopic.MetadataResponsePartition
    topics = {}
    for (t, p), leader in sorted(leaders.items()):
        topics.setdefault(t, []).append(P(error_code=0, partition_index=p, leader_id=leader, leader_epoch=0,
                                          replica_nodes=[leader], isr_nodes=[leader], offline_replicas=[]))
    return M(version=version, throttle_time_ms=0, cluster_id="c", controller_id=controller, brokers=[
        M.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=port, rack=None) for i, port in brokers.items()],
        topics=[M.MetadataResponseTopic(error_code=0, name=t, is_internal=False, partitions=ps)
                for t, ps in topics.items()]).encode(version=version)


def list_offsets_body(version, topic, partition, error, offset):
    R = ListOffsetsResponse
    T = R.ListOffsetsTopicResponse
    return R(version=version, throttle_time_ms=0, topics=[T(name=topic, partitions=[T.ListOffsetsPartitionResponse(
        partition_index=partition, error_code=error, timestamp=-1, offset=offset, leader_epoch=0)])]
             ).encode(version=version)


@pytest.fixture
def brokers():
    made = []

    def make(handler):
        made.append(FakeBroker(handler))
        return made[-1]
    yield make
    for b in made:
        b.close()


def metadata_v1(request):
    return MetadataRequest(version=1, topics=None)


# ---- Connection -----------------------------------------------------------------------------------------------

def test_pipelined_requests_are_answered_in_order(brokers):
    b = brokers(lambda key, version, frame: metadata_body(version, {7: 1}, {}, controller=7))
    c = Connection("127.0.0.1", b.port, "t", timeout=5)
    try:
        for _ in range(3):
            assert c.submit(MetadataRequest(version=1, topics=None))
        assert c.in_flight == 3
        answers = [c.receive() for _ in range(3)]
        assert [a.controller_id for a in answers] == [7, 7, 7] and c.in_flight == 0
        assert c.send(ApiVersionsRequest(version=0)).error_code == 0
    finally:
        c.close()


def test_acks_0_expects_no_response(brokers):
    b = brokers(lambda key, version, frame: None if key == 0 else metadata_body(version, {1: 1}, {}))
    c = Connection("127.0.0.1", b.port, "t", timeout=5)
    try:
        request = produce_request(8, "t", 0, b"records", 0, 1000)
        assert c.send(request) is None and not c.submit(request, request.encode(version=8))
        assert c.in_flight == 0
        assert c.send(MetadataRequest(version=1, topics=None)).controller_id == 1
        assert b.requests[-3:] == [(0, 8), (0, 8), (3, 1)]
    finally:
        c.close()


def test_a_wrong_correlation_id_closes_the_connection(brokers):
    b = brokers(lambda key, version, frame: metadata_body(version, {1: 1}, {}))
    b.cid_shift = 1
    c = Connection("127.0.0.1", b.port, "t", timeout=5)
    with pytest.raises(KafkaError) as e:
        c.send(MetadataRequest(version=1, topics=None))
    assert e.value.code == Errors.NETWORK_EXCEPTION and "correlation id" in str(e.value)
    assert c.sock is None


def test_no_answer_times_out_and_a_closed_connection_is_lost(brokers):
    silent = brokers(lambda key, version, frame: None)
    c = Connection("127.0.0.1", silent.port, "t", timeout=0.3)
    with pytest.raises(ConnectionLost, match="Timed out waiting for .* to answer Metadata"):
        c.send(MetadataRequest(version=1, topics=None))
    assert c.sock is None
    closing = brokers(lambda key, version, frame: "close")
    c = Connection("127.0.0.1", closing.port, "t", timeout=5)
    with pytest.raises(ConnectionLost, match="connection closed by the broker"):
        c.send(MetadataRequest(version=1, topics=None))
    port = closing.port
    closing.close()
    time.sleep(0.05)
    with pytest.raises(Unreachable, match="Cannot connect to"):
        Connection("127.0.0.1", port, "t", timeout=1).connect()


def test_fetch_responses_are_returned_as_views_for_the_zero_copy_decoder(brokers):
    records = b"\x00" * 61 + b"batch"

    def handler(key, version, frame):
        part = FetchPartitionData(0, 0, 10, 10, 0, None, -1, [records])
        return b"".join(encode_fetch_response(version, 0, 0, 0, [("t", [part])]))
    b = brokers(handler)
    c = Connection("127.0.0.1", b.port, "t", timeout=5)
    try:
        for version in (4, 11, 12):
            body = c.send(fetch_request(version, "t", 0, 0, 1 << 20), decode=False)
            assert isinstance(body, memoryview)
            ((name, (p,)),) = decode_fetch_response(body, version).topics
            assert (name, p.high_watermark, bytes(p.records[0])) == ("t", 10, records)
            assert p.records[0].obj is body.obj
    finally:
        c.close()


# ---- ClusterClient ----------------------------------------------------------------------------------------------

def test_versions_are_the_highest_both_the_broker_and_kafka_2_8_serve(brokers):
    b = brokers(lambda key, version, frame: metadata_body(version, {1: 1}, {}))
    with ClusterClient(f"127.0.0.1:{b.port}", "t", timeout=5) as client:
        md = client.metadata([])
        c = client.connections[("127.0.0.1", b.port)]
        assert b.requests[-1] == (3, KAFKA_28_MAX[3]) == (3, 11)     # served up to 12, 2.8 stops at 11
        assert c.version_for(ProduceRequest) == 9 and c.version_for(FetchRequest) == 12
        with pytest.raises(KafkaError, match="does not serve ListOffsets version 7") as e:
            c.version_for(ListOffsetsRequest, 7)
        assert e.value.code == Errors.UNSUPPORTED_VERSION
        assert md.brokers[1].address == ("127.0.0.1", 1) and md.controller_id == 1


def test_list_offsets_goes_to_the_leader_and_retries_until_it_answers(brokers, monkeypatch):
    monkeypatch.setattr(cluster_module, "RETRY_BACKOFF", 0.01)
    answers = [Errors.NOT_LEADER_OR_FOLLOWER, Errors.NONE]
    leader = brokers(lambda key, version, frame: list_offsets_body(version, "t", 0, answers.pop(0), 42))
    boot = brokers(lambda key, version, frame: metadata_body(version, {1: boot.port, 2: leader.port},
                                                             {("t", 0): 2, ("u", 0): -1}))
    with ClusterClient([("127.0.0.1", boot.port)], "t", timeout=5) as client:
        assert client.list_offsets({TopicPartition("t", 0): -1}) == {TopicPartition("t", 0): (0, 42)}
        assert [k for k, _ in leader.requests if k == 2] == [2, 2]          # ListOffsets only to the leader
        assert client.list_offsets({TopicPartition("nope", 0): -1}) == \
            {TopicPartition("nope", 0): (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)}
        client.timeout = 1.5     # long enough for a loaded machine's metadata round trips, short for a test
        # (on a loaded machine the deadline can pass during a metadata round trip: the cluster's TimedOut)
        with pytest.raises(TimedOut, match=r"Timed out (after 1.5s waiting for the leaders of u-0|waiting for the "
                                           r"cluster)\."):
            client.list_offsets({TopicPartition("u", 0): -1})                 # no leader, ever


def test_no_broker_reachable_is_unreachable_and_retrying_stops_at_the_deadline(brokers, monkeypatch):
    monkeypatch.setattr(cluster_module, "RETRY_BACKOFF", 0.01)
    gone = brokers(lambda key, version, frame: None)
    port = gone.port
    gone.close()
    with ClusterClient(f"127.0.0.1:{port}", "t", timeout=0.3) as client:
        with pytest.raises(Unreachable, match=f"No broker of 127.0.0.1:{port} could be reached"):
            client.metadata([])
        attempts = []

        def attempt(deadline):
            attempts.append(1)
            raise KafkaError(Errors.LEADER_NOT_AVAILABLE, "not yet")
        with pytest.raises(TimedOut, match="waiting for Produce t-0 .*not yet"):
            client.retrying("Produce t-0", attempt)
        assert len(attempts) > 2
        with pytest.raises(KafkaError, match="INVALID_TOPIC"):
            client.retrying("x", lambda deadline: (_ for _ in ()).throw(KafkaError(Errors.INVALID_TOPIC)))


def test_one_retriable_set():
    assert {Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR,
            Errors.COORDINATOR_LOAD_IN_PROGRESS} <= RETRIABLE
    assert Errors.TOPIC_ALREADY_EXISTS not in RETRIABLE
    assert is_retriable(ConnectionLost("gone")) and is_retriable(Unreachable("none"))
    assert not is_retriable(TimedOut("late")) and TimedOut("late").code == Errors.REQUEST_TIMED_OUT
    assert KafkaError(1234).name == "error 1234" and str(KafkaError(Errors.NON_EMPTY_GROUP)) == "NON_EMPTY_GROUP"


COOPERATIVE = r"""
from gevent import monkey
monkey.patch_all()      # as `kbroker start` does before anything opens sockets
import socket, struct, time
import gevent
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kbroker.protocol.client import Connection
from kbroker.protocol.header import parse_request_header_v1, response_header

def serve(conn):
    head = conn.recv(4)
    frame = conn.recv(struct.unpack(">i", head)[0])
    gevent.sleep(0.5)                                   # a slow broker
    body = ApiVersionsResponse(version=0, error_code=0, api_keys=[]).encode(version=0)
    out = response_header(parse_request_header_v1(memoryview(frame)).correlation_id, False) + bytes(body)
    conn.sendall(struct.pack(">i", len(out)) + out)

server = socket.create_server(("127.0.0.1", 0))
gevent.spawn(lambda: [gevent.spawn(serve, server.accept()[0]) for _ in range(4)])
port = server.getsockname()[1]
t0 = time.monotonic()
jobs = [gevent.spawn(Connection("127.0.0.1", port, "t", 5).send, ApiVersionsRequest(version=0)) for _ in range(4)]
gevent.joinall(jobs, raise_error=True)
print(round(time.monotonic() - t0, 2))
"""


def test_connections_are_cooperative_under_gevent_monkey_patching():
    """In the broker (monkey-patched, as `kbroker start` sets up gevent) four requests to a broker that takes
    0.5 s each wait side by side: the controller's channels and the replica fetchers never block the hub."""
    import os
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", COOPERATIVE], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 1.5, out.stdout
