"""Shared pieces of the benchmarks: a throw-away ZooKeeper + one broker process, a minimal blocking Kafka
protocol client with hand-written Produce v8 / Fetch v1, v3, v11 codecs (the benchmark client must cost far
less than the broker), pre-built record batches, the physical limits measured in the same run, and tables.

Nothing here imports broker internals: the broker is a separate process started with
`python -m kbroker.cli start <props>`, exactly as a user would.
"""
from __future__ import annotations

import argparse
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

MiB = 1024 * 1024
_I32 = struct.Struct(">i")


# ---- small helpers --------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tmp-dir", default=None,
                        help="parent directory for ZooKeeper and broker data (default: system temp dir; "
                             "the disk limit is measured there too)")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (and broker.log) afterwards")
    parser.add_argument("--py-spy", metavar="FILE.svg", default=None,
                        help="attach `py-spy record` to the broker during the main kbroker measurement and "
                             "write a flame graph (needs py-spy in the venv; --py-spy-format speedscope/raw)")
    parser.add_argument("--py-spy-format", default="flamegraph", choices=("flamegraph", "speedscope", "raw"))
    parser.add_argument("--broker-prop", action="append", default=[], metavar="K=V",
                        help="extra server.properties line for the broker (repeatable)")


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
    """CPU seconds used by a process (utime+stime from /proc) over an interval, as % of one core."""

    def __init__(self, pid: int):
        self.pid = pid
        self.t0 = self.c0 = 0.0

    def _cpu(self) -> float:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def start(self) -> "CpuMeter":
        self.t0, self.c0 = time.monotonic(), self._cpu()
        return self

    def percent(self) -> float:
        dt = time.monotonic() - self.t0
        return 100.0 * (self._cpu() - self.c0) / dt if dt > 0 else 0.0


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


def sendfile_loopback_limit(path: str, length: int, chunk: int = 10 * MiB) -> float:
    """Streaming limit: a trivial server os.sendfile's `length` bytes of `path` (in `chunk`-sized calls) on a
    blocking socket to a loopback client that reads them into a `chunk`-sized buffer and drops them: bytes/s."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve():
        conn, _ = srv.accept()
        fd = os.open(path, os.O_RDONLY)
        try:
            conn.recv(1)                                  # go
            offset = 0
            while offset < length:
                sent = os.sendfile(conn.fileno(), fd, offset, min(chunk, length - offset))
                if sent == 0:
                    break
                offset += sent
        finally:
            os.close(fd)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client = socket.create_connection(("127.0.0.1", port))
    buf = memoryview(bytearray(chunk))
    t0 = time.perf_counter()
    client.sendall(b"g")
    recv_discard(client, length, buf)
    dt = time.perf_counter() - t0
    client.close()
    srv.close()
    t.join()
    return length / dt


def sendfile_request_response_limit(path: str, length: int, chunk: int = 10 * MiB) -> float:
    """Request/response limit: like a fetch loop with one request in flight, the client sends a 12-byte
    request (offset, size) and the trivial server answers with a 4-byte size and `chunk` bytes of `path` by
    os.sendfile (blocking socket); the client reads them into a reusable buffer and asks for the next: bytes/s."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve():
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fd = os.open(path, os.O_RDONLY)
        try:
            while True:
                req = b""
                while len(req) < 12:
                    more = conn.recv(12 - len(req))
                    if not more:
                        return
                    req += more
                offset, size = struct.unpack(">qi", req)
                conn.sendall(_I32.pack(size))
                end = offset + size
                while offset < end:
                    sent = os.sendfile(conn.fileno(), fd, offset, end - offset)
                    if sent == 0:
                        return
                    offset += sent
        finally:
            os.close(fd)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client = socket.create_connection(("127.0.0.1", port))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = memoryview(bytearray(chunk + 4))
    t0 = time.perf_counter()
    offset = 0
    while offset < length:
        size = min(chunk, length - offset)
        client.sendall(struct.pack(">qi", offset, size))
        recv_discard(client, 4 + size, buf)
        offset += size
    dt = time.perf_counter() - t0
    client.close()
    srv.close()
    t.join()
    return length / dt


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


# ---- a minimal Kafka client -----------------------------------------------------------------------------------
def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class KafkaConn:
    """One blocking connection; requests may be pipelined (send several, then read responses in order)."""

    def __init__(self, host: str, port: int, client_id: str = "kbroker-bench", timeout: float = 60.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = _str(client_id)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def frame(self, api_key: int, version: int, body: bytes) -> bytes:
        """A whole request frame (request header v1; all requests here are non-flexible versions)."""
        self.correlation += 1
        head = struct.pack(">hhi", api_key, version, self.correlation) + self.client_id
        return _I32.pack(len(head) + len(body)) + head + body

    def send(self, frame) -> None:
        self.sock.sendall(frame)

    def recv_size(self) -> int:
        head = self._recv_exact(4)
        return _I32.unpack(head)[0]

    def _recv_exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("broker closed the connection")
            got += k
        return buf

    def recv_frame(self) -> bytearray:
        return self._recv_exact(self.recv_size())

    def recv_frame_into(self, buf: bytearray) -> tuple[memoryview, int]:
        """Read one response into a reusable buffer (grown if needed); returns (view, size)."""
        size = self.recv_size()
        if size > len(buf):
            buf.extend(bytes(size - len(buf)))
        view = memoryview(buf)
        got = 0
        while got < size:
            k = self.sock.recv_into(view[got:size], size - got)
            if k == 0:
                raise ConnectionError("broker closed the connection")
            got += k
        return view, size

    def request(self, api_key: int, version: int, body: bytes) -> bytearray:
        self.send(self.frame(api_key, version, body))
        return self.recv_frame()


# Produce v8 ------------------------------------------------------------------------------------------------
def produce_body_v8(topic: str, partition: int, records: bytes, acks: int = 1, timeout_ms: int = 30000) -> bytes:
    return (_str(None) + struct.pack(">hi", acks, timeout_ms) + struct.pack(">i", 1) + _str(topic)
            + struct.pack(">iii", 1, partition, len(records)) + records)


def parse_produce_response_v8(frame) -> list[tuple[int, int, int]]:
    """[(partition, error_code, base_offset)] from a Produce v8 response frame (correlation id first)."""
    pos = 4
    out = []
    (n_topics,) = _I32.unpack_from(frame, pos)
    pos += 4
    for _ in range(n_topics):
        (ln,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + ln
        (n_parts,) = _I32.unpack_from(frame, pos)
        pos += 4
        for _ in range(n_parts):
            part, err, base, _append, _start = struct.unpack_from(">ihqqq", frame, pos)
            pos += 30
            (n_errs,) = _I32.unpack_from(frame, pos)
            pos += 4
            for _ in range(max(0, n_errs)):
                pos += 4
                (sl,) = struct.unpack_from(">h", frame, pos)
                pos += 2 + max(0, sl)
            (ml,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(0, ml)
            out.append((part, err, base))
    return out


# Fetch v1 / v3 / v11 -----------------------------------------------------------------------------------------
def fetch_body(version: int, topic: str, partition: int, offset: int, partition_max: int, max_bytes: int,
               max_wait_ms: int = 500, min_bytes: int = 1) -> bytes:
    body = struct.pack(">iii", -1, max_wait_ms, min_bytes)
    if version >= 3:
        body += _I32.pack(max_bytes)
    if version >= 4:
        body += b"\x00"                                   # isolation_level: read_uncommitted
    if version >= 7:
        body += struct.pack(">ii", 0, -1)                 # session id 0, epoch -1 (full fetch, no session)
    body += _I32.pack(1) + _str(topic) + _I32.pack(1) + _I32.pack(partition)
    if version >= 9:
        body += _I32.pack(-1)                             # current_leader_epoch: unknown
    body += struct.pack(">q", offset)
    if version >= 5:
        body += struct.pack(">q", -1)                     # log_start_offset (followers only)
    body += _I32.pack(partition_max)
    if version >= 7:
        body += _I32.pack(0)                              # forgotten topics
    if version >= 11:
        body += _str("")                                  # rack id
    return body


def parse_fetch_response(version: int, frame, size: int | None = None):
    """(error_code, high_watermark, records_start, records_len) of the single partition of a Fetch response
    frame (correlation id first). Record bytes are located, not copied."""
    pos = 4
    if version >= 1:
        pos += 4                                          # throttle
    if version >= 7:
        (top_err,) = struct.unpack_from(">h", frame, pos)
        pos += 6
        if top_err:
            return top_err, -1, pos, 0
    (n_topics,) = _I32.unpack_from(frame, pos)
    pos += 4
    for _ in range(n_topics):
        (ln,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + ln
        (n_parts,) = _I32.unpack_from(frame, pos)
        pos += 4
        for _ in range(n_parts):
            _part, err, hw = struct.unpack_from(">ihq", frame, pos)
            pos += 14
            if version >= 4:
                pos += 8                                  # last stable offset
                if version >= 5:
                    pos += 8                              # log start offset
                (n_aborted,) = _I32.unpack_from(frame, pos)
                pos += 4 + 16 * max(0, n_aborted)
            if version >= 11:
                pos += 4                                  # preferred read replica
            (rl,) = _I32.unpack_from(frame, pos)
            pos += 4
            return err, hw, pos, max(0, rl)
    return -1, -1, pos, 0


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


def fetch_all(conn: KafkaConn, version: int, topic: str, partition: int, end_offset: int,
              partition_max: int, max_bytes: int, start_offset: int = 0) -> FetchRun:
    """Fetch [start_offset, end_offset) sequentially, one request in flight, walking entry headers only."""
    buf = bytearray(max_bytes + MiB)
    offset, records, nbytes, latencies = start_offset, 0, 0, []
    t0 = time.perf_counter()
    while offset < end_offset:
        t = time.perf_counter()
        conn.send(conn.frame(1, version, fetch_body(version, topic, partition, offset, partition_max, max_bytes)))
        view, size = conn.recv_frame_into(buf)
        latencies.append(time.perf_counter() - t)
        err, _hw, start, length = parse_fetch_response(version, view, size)
        if err:
            raise RuntimeError(f"Fetch v{version} at offset {offset}: error code {err}")
        next_offset, n, whole = walk_entries(view, start, start + length)
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
    `depth` Produce v8 requests in flight with the same pre-built frame (the broker assigns the offsets)."""

    def __init__(self, port: int, topic: str, partitions: int, batch: bytes, records_per_batch: int,
                 connections: int, depth: int):
        self.port, self.topic, self.partitions = port, topic, partitions
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
            conn = KafkaConn("127.0.0.1", self.port, client_id=f"bench-producer-{i}")
            frame = conn.frame(0, 8, produce_body_v8(self.topic, i % self.partitions, self.batch, acks=1))
            inflight = 0
            while not self.stop.is_set():
                while inflight < self.depth and self._take():
                    conn.send(frame)
                    inflight += 1
                if not inflight:
                    break
                resp = conn.recv_frame()
                inflight -= 1
                for _part, err, _base in parse_produce_response_v8(resp):
                    if err:
                        raise RuntimeError(f"produce error code {err}")
                self.acked[i] += 1
            while inflight:
                conn.recv_frame()
                inflight -= 1
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


def high_watermark(port: int, topic: str, partition: int) -> int:
    conn = KafkaConn("127.0.0.1", port)
    try:
        frame = conn.request(1, 11, fetch_body(11, topic, partition, 0, 1, 1, max_wait_ms=0))
        return parse_fetch_response(11, frame)[1]
    finally:
        conn.close()


# ---- ZooKeeper + one broker -----------------------------------------------------------------------------------
class BenchCluster:
    """A temp dir with a standalone ZooKeeper and one broker process (broker.id 1)."""

    def __init__(self, tmp_parent: str | None = None, keep: bool = False, broker_props: list[str] | None = None):
        self.root = tempfile.mkdtemp(prefix="kbroker-bench-", dir=tmp_parent)
        self.keep = keep
        self.broker_props = broker_props or []
        self.zk = None
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log_dir = os.path.join(self.root, "broker-data")
        self.log_path = os.path.join(self.root, "broker.log")
        self._zk_client = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

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
        from zk.client import KafkaZkClient
        from zk.launcher import ZooKeeperServer
        t0 = time.monotonic()
        self.zk = ZooKeeperServer(free_port(), os.path.join(self.root, "zookeeper"))
        self.zk.start()
        self.port = free_port()
        props = {
            "broker.id": "1",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.log_dir,
            "zookeeper.connect": self.zk.connect,
            "zookeeper.session.timeout.ms": "18000",
            "offsets.topic.replication.factor": "1",
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "log.segment.delete.delay.ms": "0",
        }
        for kv in self.broker_props:
            k, _, v = kv.partition("=")
            props[k.strip()] = v.strip()
        config_path = os.path.join(self.root, "server.properties")
        with open(config_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "kbroker.cli", "start", config_path, "--log-level",
                                      os.environ.get("KBROKER_BENCH_LOG_LEVEL", "WARNING")], stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=REPO)
        logf.close()
        self._zk_client = KafkaZkClient(self.zk.connect, 10000).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with code {self.proc.returncode}:\n{self.broker_log_tail()}")
            if 1 in self._zk_client.get_broker_ids() and self._zk_client.get_controller_id() is not None:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"broker did not register within 30 s:\n{self.broker_log_tail()}")
        self._wait_metadata(deadline)
        log(f"ZooKeeper {self.zk.connect} and broker pid {self.proc.pid} on {self.bootstrap} up in "
            f"{time.monotonic() - t0:.1f} s (data in {self.root})")

    def _wait_metadata(self, deadline: float) -> None:
        """Until the broker lists itself in Metadata: it registers before the controller's first UpdateMetadata
        reaches it, and a Metadata answer listing no broker makes librdkafka's AdminClient wait for minutes."""
        from kafka.protocol.metadata import MetadataRequest, MetadataResponse
        from kbroker.network.client import BrokerClient
        client = BrokerClient("127.0.0.1", self.port, "bench")
        try:
            while time.monotonic() < deadline:
                answer = client.send(MetadataRequest(version=1, topics=[]), MetadataResponse, 1)
                if answer.brokers and answer.controller_id >= 0:
                    return
                time.sleep(0.02)
        finally:
            client.close()
        raise RuntimeError(f"Metadata still lists no broker after 30 s:\n{self.broker_log_tail()}")

    def broker_log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> None:
        from zk.admin import AdminZkClient
        AdminZkClient(self._zk_client).create_topic(name, config, partitions=partitions, replication_factor=1)
        conn = KafkaConn("127.0.0.1", self.port)
        try:
            for p in range(partitions):
                deadline = time.monotonic() + 30
                while True:
                    frame = conn.request(1, 11, fetch_body(11, name, p, 0, 1, 1, max_wait_ms=0))
                    err = parse_fetch_response(11, frame)[0]
                    if err == 0:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name}-{p} not led by the broker after 30 s (error {err}); broker log "
                                           f"tail:\n{self.broker_log_tail()}")
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
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.zk is not None:
            self.zk.stop()
        if self.keep:
            log(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


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
