"""Bad input at scale: random requests for every API key and version the brokers advertise, built from Kafka's
message schemas (tests/fuzz_requests.py), sent well-formed or damaged over raw sockets, several connections
to each broker of a real 3-broker cluster at once.

What a user must see, whatever arrives: every request gets a well-formed answer with its correlation id, or
its connection is closed (never a hang, never an answer out of order: a pipelined ApiVersions follows each
request and must be answered after it); after every burst each broker process is alive and answers a fresh
connection; the brokers' memory stays bounded; the logs hold no traceback of a request handler that failed;
the records committed to a topic no request names are all there afterwards, and the cluster still takes and
serves new ones.

FUZZ_SEED=<n> replays a run (the worker sending to broker B in burst N draws from Fuzzer("<seed>-N-B-<worker>"));
the seed is printed.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time
import traceback
import uuid
from collections import Counter

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.api import REGISTRY, decode_body
from kbroker.cluster import metadata
from kbroker.protocol.header import parse_request_header_v1, skip_tagged_fields
from tests.fuzz_requests import Fuzzer, flexible, frame, parse_header

SEED = int(os.environ.get("FUZZ_SEED", "1402"))
BURSTS, BURST_SECONDS = 4, 4.0
WORKERS_PER_BROKER = 3
ANSWER_TIMEOUT = 10.0      # seconds a request may take to be answered (its waits are at most MAX_WAIT_MS)
MAX_WAIT_MS = 2000
MUTATED = 0.6              # share of requests damaged before sending
RSS_GROWTH_LIMIT_MB = 150
RECORDS = 1000
FUZZ_TOPIC = "fuzz-target"
# Join groups at once and accept the short session timeouts the fuzzer sends, so group requests are served
# rather than parked or refused.
BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 10}
SENTINEL = Fuzzer(0).header(18, 0, 0)   # ApiVersions v0 with correlation id patched per use
WAIT_FIELDS = ("timeout_ms", "max_wait_ms", "rebalance_timeout_ms", "session_timeout_ms")


def advertised(broker) -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} from the broker's ApiVersions v0 answer, read over a raw socket."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall(frame(SENTINEL))
        payload = read_frame(s)
    response = REGISTRY[18].RESPONSE.decode(payload[4:], version=0)
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def read_frame(s: socket.socket) -> bytes | None:
    """One response frame without its size prefix; None when the broker closed the connection first."""
    head = _read(s, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    assert 4 <= size <= 64 << 20, f"response size prefix {size}"
    return _read(s, size)


def _read(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def response_problem(api_key: int, version: int, payload: bytes) -> str | None:
    """Why an answer to (api_key, version) is not a well-formed Kafka response, or None."""
    module = REGISTRY.get(api_key)
    if module is None or not module.MIN_VERSION <= version <= module.MAX_VERSION:
        if api_key != 18:
            return f"answered api key {api_key} v{version}, which is not served (Kafka closes)"
        version = 0   # an ApiVersions of a version not served: a v0 body with UNSUPPORTED_VERSION
    body = payload[4:]
    if flexible(api_key, version) and api_key != 18:
        if body[:1] != b"\x00":
            return "response header v1 without an empty tagged-field section"
        body = body[1:]
    cls = module.RESPONSE
    flex = cls.flexible_version_q(version)
    try:
        _, end = cls._struct.compiled_decode_from(version, compact=flex, tagged=flex, data_class=cls[None])(
            memoryview(body), 0)
    except Exception as e:
        return f"response does not decode: {e!r}"
    return None if end == len(body) else f"response body has {len(body) - end} bytes past its fields"


def parks(data: bytes) -> bool:
    """Whether the broker may legitimately hold this request past MAX_WAIT_MS (a Fetch, Produce, JoinGroup or
    admin request whose wait a bit flip made long): decoded as the broker decodes it."""
    try:
        payload = memoryview(data)[4:]
        header = parse_request_header_v1(payload)
        module = REGISTRY[header.api_key]
        version = header.api_version
        pos = skip_tagged_fields(payload, header.size) if flexible(header.api_key, version) else header.size
        decode = getattr(module, "decode", None)
        request = decode(payload[pos:], version) if decode else decode_body(module.REQUEST, payload[pos:], version)
    except Exception:
        return False   # the broker cannot read it either: it closes the connection
    return any((getattr(request, f, None) or 0) > MAX_WAIT_MS for f in WAIT_FIELDS)


class Worker(threading.Thread):
    """One stream of random requests to one broker over one connection at a time (a new one after each close)."""

    def __init__(self, broker, seed: str, versions: dict, deadline: float):
        super().__init__(daemon=True)
        self.broker, self.seed, self.versions, self.deadline = broker, seed, versions, deadline
        self.fuzzer = Fuzzer(seed, topics=[FUZZ_TOPIC])
        self.keys = sorted(versions)
        self.sock: socket.socket | None = None
        self.stats: Counter = Counter()
        self.problems: list[str] = []

    def run(self) -> None:
        try:
            while time.monotonic() < self.deadline and len(self.problems) < 5:
                self.one()
        except Exception:   # a failure of the test itself must fail the test, not vanish with the thread
            self.problems.append(f"worker (seed {self.seed}) crashed: {traceback.format_exc()}")
        finally:
            self._close()

    def _close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def one(self) -> None:
        r = self.fuzzer.rng
        api_key = r.choice(self.keys)
        version = r.randint(*self.versions[api_key])
        data, lengths = self.fuzzer.request(api_key, version, r.randrange(1 << 31))
        how, lies = "well-formed", False
        if r.random() < MUTATED:
            data, how, lies = self.fuzzer.mutate(data, lengths, self.versions)
        if parks(data):
            self.stats["skipped (long wait)"] += 1
            return
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.broker.port), timeout=ANSWER_TIMEOUT)
        header = parse_header(data)
        problem = self._exchange(data, header, lies)
        outcome = "closed" if self.sock is None else "answered"
        self.stats[f"{how} {outcome}"] += 1
        if problem is None and how == "well-formed" and outcome == "closed" and api_key != 0:
            problem = "a well-formed request closed the connection"   # (Produce acks=0 closes on errors)
        if problem:
            self.problems.append(f"broker {self.broker.id} seed {self.seed} {how} api key {api_key} v{version} "
                                 f"(header {header}): {problem}; frame {data[:200].hex()}")
            self._close()

    def _exchange(self, data: bytes, header, lies: bool) -> str | None:
        """Send the frame (then an ApiVersions, unless the size prefix lies) and read the answers. None when
        all is as it must be; the connection is dropped (self.sock None) when the broker closed it."""
        s = self.sock
        sentinel_id = -7 if header is None or header.correlation_id != -7 else -8
        try:
            if lies:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
            else:
                s.sendall(data + frame(SENTINEL[:4] + struct.pack(">i", sentinel_id) + SENTINEL[8:]))
        except OSError:   # the broker closed the connection already
            pass
        answered = False
        while True:
            try:
                payload = read_frame(s)
            except socket.timeout:
                return f"no answer and no close within {ANSWER_TIMEOUT:g}s"
            if payload is None:
                self._close()
                return "closed after answering the request, before answering the ApiVersions behind it" \
                    if answered else None
            (cid,) = struct.unpack_from(">i", payload)
            if lies:
                return "answered a frame whose size prefix lies"
            if cid == sentinel_id:
                if not answered and header.api_key != 0:   # only Produce acks=0 goes unanswered
                    return "the request was not answered but the ApiVersions behind it was"
                return None
            if cid != header.correlation_id or answered:
                return f"answer with correlation id {cid}, expected {header.correlation_id}"
            answered = True
            problem = response_problem(header.api_key, header.api_version, payload)
            if problem:
                return problem


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        line = next(l for l in f if l.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def serving(broker) -> None:
    """The broker answers ApiVersions and a Metadata listing the three brokers on a fresh connection."""
    assert broker.alive(), f"broker {broker.id} exited; log tail:\n{broker.log(40)}"
    assert advertised(broker)[18] == (0, 3)
    ids, controller = metadata("127.0.0.1", broker.port, timeout=5)
    assert ids == {1, 2, 3} and controller in ids


def consume(bootstrap: str, topic: str, count: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of the first `count` records of the topic, read by a new consumer group."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return out


def produce(bootstrap: str, topic: str, values) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda err, msg: err and failed.append(err))
    assert p.flush(30) == 0 and failed == []


def test_fuzzed_requests_leave_every_broker_serving_and_committed_data_intact(cluster_factory):
    cluster = cluster_factory(3, **BROKER_SETTINGS)
    brokers = list(cluster.brokers.values())
    bootstrap = cluster.bootstrap
    untouched = f"untouched-{uuid.uuid4().hex[:8]}"   # no fuzzed request can name it: theirs start "fuzz-"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(untouched, 3, 3), NewTopic(FUZZ_TOPIC, 3, 3)]).values():
        future.result(20)
    committed = [b"committed-%d" % i for i in range(RECORDS)]
    produce(bootstrap, untouched, committed)
    versions = advertised(brokers[0])
    assert all(advertised(b) == versions for b in brokers[1:])
    rss_before = {b.id: rss_mb(b.pid) for b in brokers}
    print(f"fuzz seed {SEED} (FUZZ_SEED={SEED} replays it); {len(versions)} api keys, "
          f"{sum(hi - lo + 1 for lo, hi in versions.values())} versions")

    stats: Counter = Counter()
    for burst in range(BURSTS):
        deadline = time.monotonic() + BURST_SECONDS
        workers = [Worker(b, f"{SEED}-{burst}-{b.id}-{i}", versions, deadline)
                   for b in brokers for i in range(WORKERS_PER_BROKER)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(BURST_SECONDS + ANSWER_TIMEOUT + 5)
            assert not w.is_alive(), f"worker of broker {w.broker.id} (seed {w.seed}) still waiting"
            stats.update(w.stats)
        problems = [p for w in workers for p in w.problems]
        assert not problems, f"seed {SEED} burst {burst}:\n" + "\n".join(problems[:10])
        for b in brokers:
            serving(b)
    print(f"{sum(stats.values())} requests: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))

    growth = {b.id: round(rss_mb(b.pid) - rss_before[b.id], 1) for b in brokers}
    print(f"broker RSS growth MB: {growth}")
    assert max(growth.values()) < RSS_GROWTH_LIMIT_MB, growth
    for b in brokers:
        log = b.log()
        if "Traceback" in log:
            raise AssertionError(f"broker {b.id} logged a traceback:\n{log[log.index('Traceback') - 300:][:3000]}")

    got = consume(bootstrap, untouched, RECORDS)
    assert sorted(v for _, _, v in got) == sorted(committed)
    for partition in range(3):
        offsets = [o for p, o, _ in got if p == partition]
        assert offsets == list(range(len(offsets)))
    more = [b"after-%d" % i for i in range(20)]
    produce(bootstrap, untouched, more)
    assert sorted(v for _, _, v in consume(bootstrap, untouched, RECORDS + 20)) == sorted(committed + more)
