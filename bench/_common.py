"""Shared pieces of the benchmarks: a throw-away ZooKeeper + one broker process, raw Produce and Fetch through
the project's protocol client (kbroker.protocol.client: pipelined connections, a Produce frame encoded once,
Fetch responses decoded without copying records, so the benchmark client costs far less than the broker),
pre-built record batches, the physical limits measured in the same run, and tables.

Nothing here imports broker internals (the protocol client and codecs are not): the broker is a separate process
started with `python -m kbroker.cli start <props>`, exactly as a user would, by kbroker.cluster's launcher (the
one `make up` and the tests use).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from kbroker.cluster import BrokerProcess, free_port, wait_ready, wait_until  # noqa: E402
from kbroker.protocol.client import Connection  # noqa: E402
from kbroker.protocol.client.requests import fetch_request, produce_request  # noqa: E402
from kbroker.protocol.hotpath import FetchPartitionData, decode_fetch_response  # noqa: E402

from kafka.protocol.metadata import MetadataRequest  # noqa: E402

MiB = 1024 * 1024
_I32 = struct.Struct(">i")


# ---- small helpers --------------------------------------------------------------------------------------------
def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def bench_parser(module: str, doc: str) -> argparse.ArgumentParser:
    """The parser of `python -m bench.<module>`: its docstring as the description, and the options every
    benchmark takes (where the data goes, py-spy, extra broker properties)."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{module}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common = parser.add_argument_group("options of every benchmark")
    common.add_argument("--tmp-dir", default=None,
                        help="parent directory for ZooKeeper and broker data (default: system temp dir; "
                             "the disk limit is measured there too)")
    common.add_argument("--keep", action="store_true", help="keep the temp directory (and broker.log) afterwards")
    common.add_argument("--py-spy", metavar="FILE.svg", default=None,
                        help="attach `py-spy record` to the broker during the main kbroker measurement and "
                             "write a flame graph (needs py-spy in the venv; --py-spy-format speedscope/raw)")
    common.add_argument("--py-spy-format", default="flamegraph", choices=("flamegraph", "speedscope", "raw"))
    common.add_argument("--broker-prop", action="append", default=[], metavar="K=V",
                        help="extra server.properties line for the broker (repeatable)")
    return parser


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} K"
    return f"{x:.0f}"


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = "+".join("-" * (w + 2) for w in widths)
    print(f"\n{title}")
    print(line)
    for n, r in enumerate(cells):
        print(" " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            print(line)
    print(line, flush=True)


class CpuMeter:
    """CPU seconds used by processes over an interval, as % of one core: the nanoseconds on a CPU of each of their
    threads from /proc/<pid>/task/*/schedstat (utime+stime from /proc/<pid>/stat count 10 ms ticks: too coarse for
    the per-request costs of a few seconds' run)."""

    def __init__(self, *pids: int):
        self.pids = pids
        self.t0 = self.c0 = 0.0

    def _cpu(self) -> float:
        total = 0.0
        for pid in self.pids:
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                        total += int(f.read().split()[0]) / 1e9
                except (OSError, IndexError, ValueError):
                    pass        # a thread that ended meanwhile
        return total

    def start(self) -> "CpuMeter":
        self.t0, self.c0 = time.monotonic(), self._cpu()
        return self

    def percent(self) -> float:
        dt = time.monotonic() - self.t0
        return 100.0 * (self._cpu() - self.c0) / dt if dt > 0 else 0.0

    def seconds(self) -> float:
        """CPU seconds used since start()."""
        return self._cpu() - self.c0


# ---- physical limits ------------------------------------------------------------------------------------------
def disk_write_limit(directory: str, mib: int) -> float:
    """Sequential write of `mib` MiB in 1 MiB blocks then fdatasync (like `dd bs=1M conv=fdatasync`): bytes/s."""
    path = os.path.join(directory, "disk-limit.tmp")
    block = os.urandom(MiB)
    os.sync()                       # start with no other dirty pages in flight
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(mib):
            os.write(fd, block)
        os.fdatasync(fd)
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return mib * MiB / dt


def pagecache_write_limit(directory: str, total_bytes: int, block_size: int, files: int = 1) -> float:
    """Appends of `block_size` bytes with os.pwrite, round-robin over `files` new files, no sync, `total_bytes`
    in all: bytes/s. This is all a broker that leaves flushing to the OS (Kafka's default) can do for the same
    appends. Run it from the same state as the broker's run (os.sync() first) and for the same bytes: the rate
    falls once ~1 GB is dirty (the kernel's writeback starts and throttles writers towards disk speed), and on a
    VM the first touch of never-used guest memory is slow too."""
    paths = [os.path.join(directory, f"pagecache-limit-{i}.tmp") for i in range(files)]
    block = os.urandom(block_size)
    n = max(1, total_bytes // block_size)
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) for p in paths]
    pos = [0] * files
    try:
        t0 = time.perf_counter()
        for i in range(n):
            k = i % files
            pos[k] += os.pwrite(fds[k], block, pos[k])
        dt = time.perf_counter() - t0
    finally:
        for fd in fds:
            os.close(fd)
        for p in paths:
            os.unlink(p)
    return sum(pos) / dt


def descendants(*pids: int) -> list[int]:
    """pids and every process below them now (from /proc/*/stat's parent ids): e.g. a Spark worker, its executor
    JVMs and their Python workers."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue                                   # a process that ended meanwhile
        children.setdefault(parent, []).append(int(entry))
    out, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


class MachineCpu(CpuMeter):
    """CPU busy on the whole machine over an interval (every process, from /proc/stat: all but idle and iowait),
    as % of one core: the bound when all the parts of a run share the machine's cores."""

    def _cpu(self) -> float:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class ProcessCpu:
    """CPU used by this (the client) process, all threads, as % of one core."""

    def start(self) -> "ProcessCpu":
        t = os.times()
        self.t0, self.c0 = time.monotonic(), t.user + t.system
        return self

    def percent(self) -> float:
        t = os.times()
        dt = time.monotonic() - self.t0
        return 100.0 * (t.user + t.system - self.c0) / dt if dt > 0 else 0.0


def recv_discard(sock: socket.socket, n: int, buf: memoryview) -> None:
    """Read and drop n bytes through a reusable buffer."""
    while n > 0:
        k = sock.recv_into(buf, min(n, len(buf)))
        if k == 0:
            raise ConnectionError("peer closed")
        n -= k


@contextlib.contextmanager
def _file_server(path: str, serve):
    """A loopback client connected to a one-connection server thread running serve(conn, fd) over `path`."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def run():
        conn, _ = srv.accept()
        fd = os.open(path, os.O_RDONLY)
        try:
            serve(conn, fd)
        finally:
            os.close(fd)
            conn.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    client = socket.create_connection(srv.getsockname())
    try:
        yield client
    finally:
        client.close()
        srv.close()
        t.join()


def _sendfile_range(conn: socket.socket, fd: int, offset: int, end: int, chunk: int) -> bool:
    """os.sendfile bytes [offset, end) of fd in calls of at most `chunk`; False when the peer stopped reading."""
    while offset < end:
        sent = os.sendfile(conn.fileno(), fd, offset, min(chunk, end - offset))
        if sent == 0:
            return False
        offset += sent
    return True


def sendfile_loopback_limit(path: str, length: int, chunk: int = 10 * MiB) -> float:
    """Streaming limit: a trivial server os.sendfile's `length` bytes of `path` (in `chunk`-sized calls) on a
    blocking socket to a loopback client that reads them into a `chunk`-sized buffer and drops them: bytes/s."""
    def serve(conn, fd):
        conn.recv(1)                                      # go
        _sendfile_range(conn, fd, 0, length, chunk)

    with _file_server(path, serve) as client:
        buf = memoryview(bytearray(chunk))
        t0 = time.perf_counter()
        client.sendall(b"g")
        recv_discard(client, length, buf)
        return length / (time.perf_counter() - t0)


def sendfile_request_response_limit(path: str, length: int, chunk: int = 10 * MiB) -> float:
    """Request/response limit: like a fetch loop with one request in flight, the client sends a 12-byte
    request (offset, size) and the trivial server answers with a 4-byte size and `chunk` bytes of `path` by
    os.sendfile (blocking socket); the client reads them into a reusable buffer and asks for the next: bytes/s."""
    def serve(conn, fd):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            req = b""
            while len(req) < 12:
                more = conn.recv(12 - len(req))
                if not more:
                    return
                req += more
            offset, size = struct.unpack(">qi", req)
            conn.sendall(_I32.pack(size))
            if not _sendfile_range(conn, fd, offset, offset + size, size):
                return

    with _file_server(path, serve) as client:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = memoryview(bytearray(chunk + 4))
        t0 = time.perf_counter()
        offset = 0
        while offset < length:
            size = min(chunk, length - offset)
            client.sendall(struct.pack(">qi", offset, size))
            recv_discard(client, 4 + size, buf)
            offset += size
        return length / (time.perf_counter() - t0)


# ---- librdkafka ----------------------------------------------------------------------------------------------
def consume_count(consumer, records: int, deadline: float) -> int:
    """The timed loop of the librdkafka consumer figures: messages a confluent-kafka consumer delivers (10000
    per consume() call, only counted) until `records` are in or time.perf_counter() passes `deadline`.
    RuntimeError on a consumer error."""
    n = 0
    while n < records and time.perf_counter() < deadline:
        msgs = consumer.consume(num_messages=10000, timeout=1.0)
        for m in msgs:
            if m.error() is not None:
                raise RuntimeError(f"consumer error: {m.error()}")
        n += len(msgs)
    return n


# ---- record batches -------------------------------------------------------------------------------------------
def build_v2_batch(records: int, value_size: int, key: bytes | None = None) -> bytes:
    """One uncompressed, non-idempotent v2 batch (baseOffset 0) built by aiokafka's C builder."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2 ** 30)
    value = (b"0123456789abcdef" * (value_size // 16 + 1))[:value_size]
    ts = int(time.time() * 1000)
    for i in range(records):
        b.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(b.build())


def walk_entries(buf, pos: int, end: int) -> tuple[int, int, int]:
    """Walk whole log entries (v2 batches or v0/v1 messages) in buf[pos:end] by their headers only.
    Returns (last offset + 1 or -1 if none, records seen, bytes of whole entries)."""
    next_offset, count, start = -1, 0, pos
    while end - pos >= 17:
        offset, size = struct.unpack_from(">qi", buf, pos)
        total = 12 + size
        if end - pos < total:
            break
        if buf[pos + 16] == 2:
            last_delta = _I32.unpack_from(buf, pos + 23)[0]
            n = _I32.unpack_from(buf, pos + 57)[0]
            next_offset = offset + last_delta + 1
            count += n
        else:           # uncompressed v0/v1 message (compressed wrappers carry their last inner offset)
            next_offset = offset + 1
            count += 1
        pos += total
    return next_offset, count, pos - start


# ---- the protocol client, as the benchmarks use it -------------------------------------------------------------
def fetch_partition(conn: Connection, version: int, topic: str, partition: int, offset: int, partition_max: int,
                    max_bytes: int, max_wait_ms: int = 500) -> FetchPartitionData:
    """One Fetch of one partition; its records are a view into the response frame (decoded by the broker's own
    zero-copy decoder, so the client costs far less than the broker)."""
    body = conn.send(fetch_request(version, topic, partition, offset, partition_max, max_bytes, max_wait_ms),
                     decode=False)
    return decode_fetch_response(body, version).partition(topic, partition)


@dataclass
class FetchRun:
    records: int
    nbytes: int
    seconds: float
    requests: int
    latencies: list          # seconds from sending each request to the end of its response

    @property
    def median_ms(self) -> float:
        return sorted(self.latencies)[len(self.latencies) // 2] * 1e3 if self.latencies else 0.0

    @property
    def max_ms(self) -> float:
        return max(self.latencies) * 1e3 if self.latencies else 0.0

    def slow(self, threshold_ms: float = 30.0) -> int:
        return sum(1 for t in self.latencies if t * 1e3 > threshold_ms)


def fetch_all(conn: Connection, version: int, topic: str, partition: int, end_offset: int,
              partition_max: int, max_bytes: int, start_offset: int = 0) -> FetchRun:
    """Fetch [start_offset, end_offset) sequentially, one request in flight, walking entry headers only."""
    offset, records, nbytes, latencies = start_offset, 0, 0, []
    t0 = time.perf_counter()
    while offset < end_offset:
        t = time.perf_counter()
        p = fetch_partition(conn, version, topic, partition, offset, partition_max, max_bytes)
        latencies.append(time.perf_counter() - t)
        if p.error_code:
            raise RuntimeError(f"Fetch v{version} at offset {offset}: error code {p.error_code}")
        view = p.records[0] if p.records else b""
        length = len(view)
        next_offset, n, whole = walk_entries(view, 0, length)
        if next_offset <= offset:
            if length:
                raise RuntimeError(f"Fetch v{version} at offset {offset}: no whole entry in {length} bytes "
                                   f"(partition max {partition_max})")
            continue                                      # empty (long poll expired)
        records += next_offset - offset
        nbytes += whole
        offset = next_offset
    return FetchRun(records, nbytes, time.perf_counter() - t0, len(latencies), latencies)


class RawProducer:
    """`connections` threads, each with its own connection and partition (i % partitions), each keeping
    `depth` Produce v8 requests in flight with the same body, encoded once (the broker assigns the offsets)."""

    def __init__(self, port: int, topic: str, partitions: int, batch: bytes, records_per_batch: int,
                 connections: int, depth: int, security=None):
        self.port, self.topic, self.partitions = port, topic, partitions
        self.security = security                 # a ClientSecurity for a TLS / SASL listener
        self.batch, self.records_per_batch = batch, records_per_batch
        self.connections, self.depth = connections, depth
        self.acked = [0] * connections           # acknowledged batches per connection
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.max_batches: int | None = None      # fill(): stop after this many batches in all
        self._sent = 0
        self._lock = threading.Lock()

    def _take(self) -> bool:
        """May one more request be sent? (always, unless fill() set a total)"""
        if self.max_batches is None:
            return True
        with self._lock:
            if self._sent >= self.max_batches:
                return False
            self._sent += 1
            return True

    def _run(self, i: int) -> None:
        try:
            conn = Connection("127.0.0.1", self.port, f"bench-producer-{i}", 60.0, security=self.security)
            request = produce_request(8, self.topic, i % self.partitions, self.batch, 1, 30000)
            body = request.encode(version=8)          # encoded once, sent with a new header each time
            while not self.stop.is_set():
                while conn.in_flight < self.depth and self._take():
                    conn.submit(request, body)
                if not conn.in_flight:
                    break
                check_produced(conn.receive())
                self.acked[i] += 1
            while conn.in_flight:
                conn.receive()
                self.acked[i] += 1
            conn.close()
        except Exception as e:  # reported by run()
            self.errors.append(f"connection {i}: {e!r}")
            self.stop.set()

    def run(self, warmup: float, seconds: float) -> tuple[int, float]:
        """(batches acknowledged during the measured window, window seconds)."""
        threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(self.connections)]
        for t in threads:
            t.start()
        time.sleep(warmup)
        a0, t0 = sum(self.acked), time.perf_counter()
        self.stop.wait(seconds)
        a1, t1 = sum(self.acked), time.perf_counter()
        self.stop.set()
        for t in threads:
            t.join(60)
        if self.errors:
            raise RuntimeError("; ".join(self.errors))
        return a1 - a0, t1 - t0

    def fill(self, batches: int) -> float:
        """Append exactly `batches` batches; returns seconds."""
        self.max_batches = batches
        t0 = time.perf_counter()
        threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(self.connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.errors:
            raise RuntimeError("; ".join(self.errors))
        return time.perf_counter() - t0


def check_produced(response) -> None:
    """RuntimeError naming the first error code of a Produce response."""
    for t in response.responses:
        for p in t.partition_responses:
            if p.error_code:
                raise RuntimeError(f"produce error code {p.error_code}")


def high_watermark(port: int, topic: str, partition: int) -> int:
    conn = Connection("127.0.0.1", port, "kbroker-bench", 60.0)
    try:
        return fetch_partition(conn, 11, topic, partition, 0, 1, 1, max_wait_ms=0).high_watermark
    finally:
        conn.close()


# ---- ZooKeeper + one broker -----------------------------------------------------------------------------------
class BenchCluster:
    """A temp dir with a standalone ZooKeeper and one broker process (broker.id 1), PLAINTEXT on `port`.
    settings: more broker settings (before --broker-prop), e.g. more listeners; security: a
    kbroker.security.preset.SecurityPreset whose admin SCRAM credentials are written before the broker starts."""

    def __init__(self, tmp_parent: str | None = None, keep: bool = False, broker_props: list[str] | None = None,
                 settings: dict | None = None, port: int | None = None, security=None):
        self.root = tempfile.mkdtemp(prefix="kbroker-bench-", dir=tmp_parent)
        self.keep = keep
        self.broker_props = broker_props or []
        self.settings = settings or {}
        self.requested_port = port
        self.security = security
        self.zk = None
        self.broker: BrokerProcess | None = None
        self.log_dir = os.path.join(self.root, "data")
        self._zk_client = None

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def pid(self) -> int:
        return self.broker.pid

    def __enter__(self) -> "BenchCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Returns once the broker lists itself in Metadata (kbroker.cluster.wait_ready)."""
        from zk.client import KafkaZkClient
        from zk.launcher import ZooKeeperServer
        t0 = time.monotonic()
        self.zk = ZooKeeperServer(free_port(), os.path.join(self.root, "zookeeper"))
        self.zk.start()
        settings = {
            "zookeeper.session.timeout.ms": "18000",
            "offsets.topic.replication.factor": "1",
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "log.segment.delete.delay.ms": "0",
            **self.settings,
        }
        for kv in self.broker_props:
            k, _, v = kv.partition("=")
            settings[k.strip()] = v.strip()
        self._zk_client = KafkaZkClient(self.zk.connect, 10000).start()
        if self.security is not None:
            self.security.write_admin_credentials(self._zk_client)
        self.broker = BrokerProcess.create(1, self.root, self.zk.connect, settings, port=self.requested_port)
        self.broker.start("--log-level", os.environ.get("KBROKER_BENCH_LOG_LEVEL", "WARNING"))
        wait_ready([self.broker], 30)
        log(f"ZooKeeper {self.zk.connect} and broker pid {self.pid} on {self.bootstrap} up in "
            f"{time.monotonic() - t0:.1f} s (data in {self.root})")

    def log_tail(self, n: int = 30) -> str:
        return self.broker.log(n) if self.broker is not None else ""

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> None:
        from zk.admin import AdminZkClient
        AdminZkClient(self._zk_client).create_topic(name, config, partitions=partitions, replication_factor=1)
        conn = Connection("127.0.0.1", self.port, "kbroker-bench", 60.0)
        try:
            for p in range(partitions):
                deadline = time.monotonic() + 30
                while True:
                    err = fetch_partition(conn, 11, name, p, 0, 1, 1, max_wait_ms=0).error_code
                    if err == 0:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name}-{p} not led by the broker after 30 s (error {err}); broker log "
                                           f"tail:\n{self.log_tail()}")
                    time.sleep(0.05)
        finally:
            conn.close()

    def delete_topic(self, name: str, timeout: float = 30.0) -> bool:
        """Delete the topic (marker in ZooKeeper; the controller does the rest) and wait until its partition
        directories are gone, so its dirty pages are dropped instead of competing with the next measurement.
        Best effort: False (and a warning) if they are still there after timeout."""
        from admin_cli.topics import delete_topic_zk
        delete_topic_zk(self._zk_client, name)
        deadline = time.monotonic() + timeout
        prefix = name + "-"
        while time.monotonic() < deadline:
            left = [d for d in os.listdir(self.log_dir) if d.startswith(prefix)]
            if not left and not self._zk_client.topic_exists(name):
                return True
            time.sleep(0.1)
        log(f"WARNING: topic {name} still not deleted after {timeout:g} s")
        return False

    def partition_dir(self, topic: str, partition: int) -> str:
        return os.path.join(self.log_dir, f"{topic}-{partition}")

    def segment_files(self, topic: str, partition: int) -> list[str]:
        d = self.partition_dir(topic, partition)
        return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log"))

    def stop(self) -> None:
        if self._zk_client is not None:
            try:
                self._zk_client.close()
            except Exception:
                pass
            self._zk_client = None
        if self.broker is not None:
            self.broker.stop()
        if self.zk is not None:
            self.zk.stop()
        if self.keep:
            log(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


# ---- ZooKeeper + three brokers -------------------------------------------------------------------------------
@contextlib.contextmanager
def three_brokers(tmp_parent: str | None = None, keep: bool = False, overrides=(), prefix: str = "kbroker-bench-",
                  metrics: bool = False):
    """`make up`'s cluster (kbroker.cluster.up: ZooKeeper and three brokers) in a temp dir, stopped and the dir
    removed (unless keep) on exit. Yields kbroker.cluster's state, with "bootstrap" and "data_dir" (for
    kbroker.cluster.stop_broker / start_broker) added; metrics: each broker serves Prometheus metrics on free
    ports (its state's "metrics_port")."""
    from kbroker import cluster as dev_cluster
    data = tempfile.mkdtemp(prefix=prefix, dir=tmp_parent)
    try:
        log(f"starting ZooKeeper and 3 brokers in {data}")
        ports = dev_cluster.free_port_range(6 if metrics else 3)   # listeners, then the metrics endpoints
        state = dev_cluster.up(data, 3, free_port(), ports, timeout=120, overrides=tuple(overrides),
                               metrics_port=ports + 3 if metrics else None, console=False)
        state["bootstrap"] = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])
        state["data_dir"] = data
        yield state
    finally:
        dev_cluster.down(data)
        if keep:
            log(f"kept {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)


def create_replicated_topic(state: dict, name: str, partitions: int, config: dict | None = None,
                            timeout: float = 60.0, interval: float = 0.1) -> None:
    """A topic with RF 3 on a three_brokers cluster (through ZooKeeper, as kadmin --zookeeper), once every
    partition has its three replicas in sync."""
    from kbroker.cluster import wait_until
    from zk.admin import AdminZkClient
    from zk.client import KafkaZkClient
    zk = KafkaZkClient(state["zookeeper"]["connect"], 30000).start()
    try:
        AdminZkClient(zk).create_topic(name, config or {}, partitions=partitions, replication_factor=3)
        tps = [(name, p) for p in range(partitions)]
        wait_until(lambda: all(s and len(s.isr) == 3 for s in zk.get_partition_states(tps).values()), timeout,
                   interval)
    finally:
        zk.close()


# ---- what the brokers serve (cluster and scale) ----------------------------------------------------------------
def states(zk, topic, partitions):
    return zk.get_partition_states([(topic, p) for p in range(partitions)])


def served(port: int, topic: str) -> dict[int, tuple[int, list[int]]]:
    """{partition: (leader, isr)} as one broker's metadata cache serves them (Metadata v1)."""
    conn = Connection("127.0.0.1", port, "bench-cluster", 30)
    try:
        response = conn.send(MetadataRequest(version=1, topics=[MetadataRequest.MetadataRequestTopic(name=topic)]))
    finally:
        conn.close()
    return {p.partition_index: (p.leader_id, sorted(p.isr_nodes)) for t in response.topics for p in t.partitions}


def settle(zk, brokers, topic: str, partitions: int, timeout: float = 900) -> float:
    """Wait until every broker serves the leaders and ISRs ZooKeeper holds; returns (time.monotonic) when the
    brokers were asked the last time, so the check's own ZooKeeper read does not count."""
    zk_state: dict = {"want": None, "read": 0.0}

    def want(refresh: bool):
        if refresh:
            zk_state["want"] = {tp[1]: (s.leader, sorted(s.isr)) for tp, s in states(zk, topic, partitions).items()
                                if s}
            zk_state["read"] = time.monotonic()
        return zk_state["want"]

    def agree():
        # A Metadata answer for 10K partitions costs a broker ~0.1 s: ask one at a time, every 0.2 s. Reading
        # ZooKeeper costs more: while the brokers agree on a state ZooKeeper no longer holds (the old leaders),
        # compare with the last read and read again at most every 2 s; a match is confirmed by a fresh read.
        asked = time.monotonic()
        first = served(brokers[0]["port"], topic)
        if any(served(b["port"], topic) != first for b in brokers[1:]):
            return False
        if first != want(False) and time.monotonic() - zk_state["read"] < 2:
            return False
        return len(first) == partitions and first == want(True) and asked
    return wait_until(agree, timeout, 0.2)


def wait_partitions(zk, tps, done, timeout: float) -> float:
    """Until done(state) holds for every one of tps in ZooKeeper (a missing state is None): poll the last partition
    (the controller writes its states in partition order), then check all. Returns (time.monotonic) when the last
    partition was seen done, so the check of all the others (a read of thousands of znodes) does not count."""
    remaining = sorted(tps)
    if not remaining:
        return time.monotonic()
    deadline = time.monotonic() + timeout
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(remaining)} partitions still not done after {timeout:g} s")
        seen = time.monotonic()
        if done(zk.get_partition_state(*remaining[-1])):
            remaining = [tp for tp, s in zk.get_partition_states(remaining).items() if not done(s)]
            if not remaining:
                return seen
        else:
            time.sleep(0.02)


def wait_new_leaders(zk, tps, gone: set[int], timeout: float) -> float:
    """Until none of tps is led by a broker in `gone` (or has no leader); see wait_partitions."""
    return wait_partitions(zk, tps, lambda s: s is not None and s.leader not in gone and s.leader >= 0, timeout)


class PySpy:
    """`py-spy record --pid` around a measured phase (optional)."""

    def __init__(self, pid: int, out: str | None, fmt: str = "flamegraph", rate: int = 200):
        self.pid, self.out, self.fmt, self.rate = pid, out, fmt, rate
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "PySpy":
        if not self.out:
            return self
        exe = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
        if exe is None:
            log("py-spy not found: `.venv/bin/pip install py-spy`; profiling skipped")
            return self
        self.proc = subprocess.Popen([exe, "record", "--pid", str(self.pid), "--rate", str(self.rate), "--format",
                                      self.fmt, "--output", self.out, "--nonblocking"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)     # let it attach
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        log(f"py-spy profile of broker pid {self.pid} written to {self.out}"
            if os.path.exists(self.out) else f"py-spy failed: {err.decode(errors='replace')[-500:]}")
