"""Client quotas: what their accounting costs on the Produce and Fetch paths, and how close librdkafka clients
under a quota keep to it while others in the same run are left alone.

(a) Cost. Three brokers run side by side, each with its own ZooKeeper: "off", started from the code before client
    quotas (`git archive` of --baseline-rev into a temp dir: the same broker without the feature), "no quota" (this
    code, no quota entity anywhere: nothing is recorded) and "never throttles" (this code with a clients/<default>
    entity of producer_byte_rate and consumer_byte_rate 10^12 and request_percentage 10^6: every request is timed,
    recorded and checked, and no one is ever throttled). Rounds go through the three in turn (drift on a shared
    machine hits them alike); each keeps its best. Produce: raw Produce v8, acks=1, small batches (10 x 100 B) on
    --connections connections x --depth in flight, so per-request costs show. Fetch: raw Fetch v11 of a filled
    partition, 64 KiB per request, one in flight. Figures: requests/s and the broker's CPU microseconds per request
    (from /proc: steadier than rates when other work shares the machine), as ratios to "off" (target: the cost
    of quota accounting <= 3 %, i.e. CPU per request ratio <= 1.03).
(b) Rates. On one broker (this code): a confluent-kafka producer with client.id "limited" under a producer_byte_rate
    of --rate (1 MiB/s) and one with no quota ("free"), each in a process of its own, produce 1 KiB records as fast
    as they can. Kafka's quota allows a fresh client a burst of 10 windows' worth first, so the limited one is
    measured after --settle (12) s, over --windows (3) windows of --seconds (11) s: its delivered bytes/s as a ratio
    to its quota, per window and over all (target within 0.75-1.25). The free one is measured over the same
    windows, and over as long alone before (on a topic of its own, deleted after), as a ratio (target ~1:
    unaffected, never throttled). The same with two confluent-kafka consumers reading a --fill-mib topic again
    and again (consumer_byte_rate --rate for "limited"). Why windows of 11 s: Kafka's sampled rate lets a client
    with a backlog through in bursts once its oldest sample expires (samples x window = 11 s; see bench/README.md),
    so a window of 10 s may hold one burst or none, a whole period holds one.

  .venv/bin/python -m bench.quotas                 # ~2.5 min
  .venv/bin/python -m bench.quotas --only cost --rounds 8
"""
from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

if __package__ in (None, ""):          # `python bench/quotas.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (REPO, BenchCluster, Connection, CpuMeter, MiB, RawProducer, bench_parser,  # noqa: E402
                           build_v2_batch, fetch_all, fmt_rate, high_watermark, log, print_table)
from kafka.protocol.metadata import MetadataRequest  # noqa: E402

from kbroker import cluster as launcher  # noqa: E402
from kbroker.cluster import free_port  # noqa: E402

NEVER = {"producer_byte_rate": str(10 ** 12), "consumer_byte_rate": str(10 ** 12), "request_percentage": "1000000"}
CONFIGS = ("off", "no quota", "never throttles")


def baseline_rev() -> str:
    """The commit before client quotas: the parent of the one that added kbroker/quota/client_quotas.py."""
    out = subprocess.run(["git", "-C", REPO, "log", "--diff-filter=A", "--format=%H", "--",
                          "kbroker/quota/client_quotas.py"], capture_output=True, text=True, check=True).stdout
    return out.split()[-1] + "^"


def export(rev: str, parent: str | None) -> str:
    """The tree of `rev` in a new temp dir (git archive: the repository is only read)."""
    target = tempfile.mkdtemp(prefix="kbroker-bench-baseline-", dir=parent)
    archive = subprocess.run(["git", "-C", REPO, "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
    return target


@contextlib.contextmanager
def code_root(path: str | None):
    """Brokers started meanwhile run the code under `path` (the launcher runs `python -m kbroker.cli` there)."""
    saved = launcher._CODE_ROOT
    if path is not None:
        launcher._CODE_ROOT = path
    try:
        yield
    finally:
        launcher._CODE_ROOT = saved


def set_quota(cluster: BenchCluster, entity: str, config: dict[str, str]) -> None:
    """What kafka-configs --zookeeper writes: the entity, then its change notification."""
    kind, _, name = entity.partition("/")
    cluster._zk_client.set_or_create_entity_config(kind, name, config)
    cluster._zk_client.create_config_change_notification(entity)


def scrape(port: int, name: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {s.labels.get("client_id"): s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == name}


def await_quota(cluster: BenchCluster, metrics_port: int, client_id: str) -> None:
    """Until the broker records this client's requests (its request quota is on)."""
    conn = Connection("127.0.0.1", cluster.port, client_id, 10.0)
    deadline = time.monotonic() + 20
    try:
        while client_id not in scrape(metrics_port, "kafka_server_request_request_time"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the quota of {client_id} was not applied within 20 s")
            conn.send(MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False))
            time.sleep(0.2)
    finally:
        conn.close()


# ---- (a) cost -------------------------------------------------------------------------------------------------
def produce_cost(cluster: BenchCluster, args, topic: str) -> tuple[float, float]:
    """(requests/s, broker CPU µs per request) of raw small-batch produces."""
    batch = build_v2_batch(10, 100)
    producer = RawProducer(cluster.port, topic, args.connections, batch, 10, args.connections, args.depth)
    cpu = CpuMeter(cluster.pid)
    threading.Timer(args.warmup, cpu.start).start()
    batches, dt = producer.run(args.warmup, args.cost_seconds)
    return batches / dt, cpu.seconds() / batches * 1e6


def fetch_cost(cluster: BenchCluster, records: int, seconds: float) -> tuple[float, float]:
    """(requests/s, broker CPU µs per request) of reading the filled partition 64 KiB at a time, from the start
    again until `seconds` have passed (one pass is too short for the broker's own background work to even out)."""
    conn = Connection("127.0.0.1", cluster.port, "bench-quota-reader", 60.0)
    requests, elapsed = 0, 0.0
    cpu = CpuMeter(cluster.pid).start()
    while elapsed < seconds:
        run = fetch_all(conn, 11, "bench-quota-fetch", 0, records, 64 * 1024, 64 * 1024)
        requests, elapsed = requests + run.requests, elapsed + run.seconds
    cpu_seconds = cpu.seconds()
    conn.close()
    return requests / elapsed, cpu_seconds / requests * 1e6


def cost(args) -> list[list]:
    rev = args.baseline_rev or baseline_rev()
    base = export(rev, args.tmp_dir)
    log(f"'off' runs the broker of {rev} (exported to {base})")
    clusters, metrics_ports = {}, {}
    try:
        for name in CONFIGS:
            metrics_ports[name] = free_port()
            with code_root(base if name == "off" else None):
                clusters[name] = BenchCluster(args.tmp_dir, args.keep, args.broker_prop, settings={
                    "metrics.port": metrics_ports[name]})
                clusters[name].start()
        batch = build_v2_batch(64, 1024)     # 64 KiB: one batch per fetch
        for name, c in clusters.items():
            c.create_topic("bench-quota-fetch", 1)
            RawProducer(c.port, "bench-quota-fetch", 1, batch, 64, 2, 8).fill(
                max(1, args.fetch_mib * MiB // len(batch)))
        records = high_watermark(clusters["off"].port, "bench-quota-fetch", 0)
        set_quota(clusters["never throttles"], "clients/<default>", NEVER)
        await_quota(clusters["never throttles"], metrics_ports["never throttles"], "bench-quota-check")
        best = {name: [0.0, float("inf"), 0.0, float("inf")] for name in CONFIGS}
        per_round: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGS}   # CPU/req: produce, fetch
        for r in range(args.rounds):
            order = CONFIGS[r % 3:] + CONFIGS[:r % 3]
            for name in order:
                c = clusters[name]
                topic = f"bench-quota-produce-{r}"
                c.create_topic(topic, args.connections)
                produce = produce_cost(c, args, topic)
                fetch = fetch_cost(c, records, args.cost_seconds)
                c.delete_topic(topic)
                log(f"round {r + 1}, {name}: produce {fmt_rate(produce[0])} req/s, {produce[1]:.1f} µs CPU/req; "
                    f"fetch {fmt_rate(fetch[0])} req/s, {fetch[1]:.1f} µs CPU/req (load {os.getloadavg()[0]:.1f})")
                b = best[name]
                b[0], b[1] = max(b[0], produce[0]), min(b[1], produce[1])
                b[2], b[3] = max(b[2], fetch[0]), min(b[3], fetch[1])
                per_round[name].append((produce[1], fetch[1]))
        never = scrape(metrics_ports["never throttles"], "kafka_server_produce_byte_rate")
        if not never:
            raise RuntimeError("the 'never throttles' broker recorded no produce bytes")
    finally:
        for c in clusters.values():
            c.stop()
        if not args.keep:
            subprocess.run(["rm", "-rf", base], check=False)
    off = best["off"]

    def median_ratio(name: str, i: int) -> float:
        """The median over rounds of the CPU/req ratio to 'off' in the same round (drift between rounds cancels)."""
        return statistics.median(mine[i] / base[i] for mine, base in zip(per_round[name], per_round["off"]))
    rows = [[name, fmt_rate(b[0]), f"{b[0] / off[0]:.3f}", f"{b[1]:.1f}", f"{b[1] / off[1]:.3f}",
             f"{median_ratio(name, 0):.3f}", fmt_rate(b[2]), f"{b[2] / off[2]:.3f}", f"{b[3]:.1f}",
             f"{b[3] / off[3]:.3f}", f"{median_ratio(name, 1):.3f}"]
            for name, b in best.items()]
    return rows, off[1], off[3]


def accounting_us(config: dict[str, str] | None, n: int = 200_000) -> tuple[float, float]:
    """µs of quota accounting per Produce and per Fetch request (64 KiB of one partition), timed in this process
    with the broker's own code on a stand-in broker: what the dispatcher and the two handlers add for quotas (the
    request timer and request quota, the byte quota; Fetch's cap and response size), less making the request
    context, which exists without quotas too. config: the clients/<default> entity, None for no quota."""
    import timeit
    from types import SimpleNamespace

    from kbroker.api import fetch as fetch_api
    from kbroker.api import produce as produce_api
    from kbroker.api.context import RequestContext
    from kbroker.clock import Clock
    from kbroker.config import SETTINGS
    from kbroker.protocol.hotpath import FetchPartitionData
    from kbroker.quota.client_quotas import ClientQuotaManagers
    from kbroker.replica.fetch_session import FetchContext
    quotas = ClientQuotaManagers({name: key.default for name, key in SETTINGS.items()}, Clock())
    if config:
        quotas.update(None, "<default>", config)
    broker = SimpleNamespace(client_quotas=quotas)
    session = SimpleNamespace(principal="User:ANONYMOUS", sasl=None)
    context = FetchContext([(("t", 0), 0, 65536, -1)])
    results = {("t", 0): FetchPartitionData(0, 0, 10, 10, 0, None, -1, [b"x" * 65536])}

    def bare():
        return RequestContext(broker, session, "bench", 8, 1, 1200)

    def produce():
        ctx = RequestContext(broker, session, "bench", 8, 1, 1200)
        ctx.request_timer = quotas.request.start_timer()
        produce_api._record_bytes(ctx)
        ctx.record_request_time()

    def fetch():
        ctx = RequestContext(broker, session, "bench", 11, 1, 100)
        ctx.request_timer = quotas.request.start_timer()
        if quotas.fetch.enabled:
            quotas.fetch.max_value_in_window(ctx.quota_user, ctx.client_id)
        fetch_api._throttled(ctx, 11, context, results)

    def us(fn) -> float:
        return min(timeit.repeat(fn, "gc.enable()", number=n, repeat=3, globals={"gc": __import__("gc")})) / n * 1e6
    base = us(bare)
    return us(produce) - base, us(fetch) - base


# ---- (b) rates ------------------------------------------------------------------------------------------------
def windows_of(start: float, seconds: float, count: int) -> list[tuple[float, float]]:
    return [(start + i * seconds, start + (i + 1) * seconds) for i in range(count)]


class Meter:
    """Bytes delivered (or consumed) in each of some time windows, counted as they come; throttles reported."""

    def __init__(self, windows: list[tuple[float, float]]):
        self.windows = windows
        self.counts = [0] * len(windows)
        self.throttles = 0

    def add(self, nbytes: int) -> None:
        now = time.monotonic()
        for i, (start, end) in enumerate(self.windows):
            if start <= now < end:
                self.counts[i] += nbytes

    def throttled(self, _event) -> None:
        self.throttles += 1


def run_producer(bootstrap: str, client_id: str, topic: str, windows, start_at: float | None, results) -> None:
    """A confluent-kafka producer sending 1 KiB records as fast as it can from start_at (None: at once) until the
    last window ends (in a process of its own, so two do not share a GIL); puts (bytes per window, throttles seen)
    on `results`."""
    from confluent_kafka import Producer
    meter = Meter(windows)
    time.sleep(max(0.0, (start_at or 0.0) - time.monotonic()))
    value = os.urandom(1024)

    def delivered(err, msg):
        if err is None:
            meter.add(len(msg.value()))
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "enable.idempotence": False,
                  "throttle_cb": meter.throttled, "queue.buffering.max.kbytes": 64 * 1024})
    until = windows[-1][1]
    while time.monotonic() < until:
        try:
            p.produce(topic, value=value, partition=0, on_delivery=delivered)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    p.purge()
    p.flush(5)
    results.put((client_id, meter.counts, meter.throttles))


def run_consumer(bootstrap: str, client_id: str, topic: str, windows, start_at: float | None, records: int,
                 results) -> None:
    """A confluent-kafka consumer (librdkafka's fetch sizes: 1 MiB per partition) reading the partition's
    `records` from offset 0, again and again, from start_at (None: at once) until the last window ends; puts
    (bytes per window, throttles seen) on `results`."""
    from confluent_kafka import Consumer, TopicPartition
    meter = Meter(windows)
    time.sleep(max(0.0, (start_at or 0.0) - time.monotonic()))
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"bench-{client_id}",
                  "enable.auto.commit": False, "queued.min.messages": 1000000,
                  "queued.max.messages.kbytes": 1024 * 1024, "fetch.queue.backoff.ms": 10,
                  "throttle_cb": meter.throttled})
    c.assign([TopicPartition(topic, 0, 0)])
    n, until = 0, windows[-1][1]
    while time.monotonic() < until:
        for m in c.consume(num_messages=10000, timeout=0.2):
            if m.error() is None:
                meter.add(len(m.value()))
                n += 1
        if n >= records:        # at the end: from the start again
            c.assign([TopicPartition(topic, 0, 0)])
            n = 0
    c.close()
    results.put((client_id, meter.counts, meter.throttles))


def run_apart(*jobs) -> dict:
    """Run (function, args) jobs each in a process of its own; {client id: what it put}."""
    import multiprocessing
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=fn, args=(*args, results)) for fn, args in jobs]
    for p in processes:
        p.start()
    out = {}
    for _ in processes:
        item = results.get(timeout=600)
        out[item[0]] = item[1:]
    for p in processes:
        p.join()
    return out


def limited_rows(kind: str, counts: list[int], throttles: int, seconds: float, quota: int) -> list:
    ratios = [n / seconds / quota for n in counts]
    mean = sum(counts) / (seconds * len(counts))
    return [f"{kind}, limited", f"{mean / 1e6:.2f}", f"{quota / 1e6:.2f}", f"{mean / quota:.2f}",
            " ".join(f"{r:.2f}" for r in ratios), throttles]


def rates(args) -> list[list]:
    quota, seconds, n = args.rate, args.seconds, args.windows
    metrics_port = free_port()
    rows = []
    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop, settings={"metrics.port": metrics_port}) as c:
        set_quota(c, "clients/limited", {"producer_byte_rate": str(quota), "consumer_byte_rate": str(quota)})
        await_quota(c, metrics_port, "limited")

        def free_row(kind: str, alone, together) -> list:
            alone_rate, together_rate = sum(alone[0]) / (seconds * n), sum(together[0]) / (seconds * n)
            return [f"{kind}, free (with the limited one / alone)", f"{together_rate / 1e6:.1f}",
                    f"{alone_rate / 1e6:.1f}", f"{together_rate / alone_rate:.2f}", "", alone[1] + together[1]]

        # producers: the free one alone, then beside the limited one (measured past its burst), each time on a topic
        # of its own deleted afterwards (so the second does not write behind the first's dirty pages), for as long
        for topic in ("bench-free-alone", "bench-free", "bench-limited"):
            c.create_topic(topic, 1)
        now = time.monotonic()
        alone = run_apart((run_producer, (c.bootstrap, "free", "bench-free-alone", windows_of(now + 3, seconds, n),
                                          now + 2)))
        c.delete_topic("bench-free-alone")
        now = time.monotonic()
        windows = windows_of(now + 2 + args.settle, seconds, n)
        both = run_apart((run_producer, (c.bootstrap, "limited", "bench-limited", windows, None)),
                         (run_producer, (c.bootstrap, "free", "bench-free", windows, windows[0][0] - 1)))
        rows += [limited_rows("producer", *both["limited"], seconds, quota),
                 free_row("producer", alone["free"], both["free"])]
        log(f"producers: {rows[-2]}, {rows[-1]}")
        for topic in ("bench-free", "bench-limited"):
            c.delete_topic(topic)

        # consumers: a topic they read again and again, the free one alone, then beside the limited one. Batches of
        # 16 KiB, as producers make them: a fetch's partial last batch counts in the quota but is dropped by the
        # client (with 512 KiB batches half of each 1 MiB fetch would be).
        batch = build_v2_batch(16, 1024)
        c.create_topic("bench-consume", 1)
        RawProducer(c.port, "bench-consume", 1, batch, 16, 2, 8).fill(max(1, args.fill_mib * MiB // len(batch)))
        records = high_watermark(c.port, "bench-consume", 0)
        now = time.monotonic()
        alone = run_apart((run_consumer, (c.bootstrap, "free", "bench-consume", windows_of(now + 3, seconds, n),
                                          now + 2, records)))
        now = time.monotonic()
        windows = windows_of(now + 2 + args.settle, seconds, n)
        both = run_apart((run_consumer, (c.bootstrap, "limited", "bench-consume", windows, None, records)),
                         (run_consumer, (c.bootstrap, "free", "bench-consume", windows, windows[0][0] - 1, records)))
        rows += [limited_rows("consumer", *both["limited"], seconds, quota),
                 free_row("consumer", alone["free"], both["free"])]
        log(f"consumers: {rows[-2]}, {rows[-1]}")
    return rows


def main(argv=None) -> None:
    parser = bench_parser("quotas", __doc__)
    parser.add_argument("--only", choices=("cost", "rates"), help="run one part only")
    parser.add_argument("--rounds", type=int, default=5, help="cost rounds through the three brokers (default 5)")
    parser.add_argument("--seconds", type=float, default=11.0,
                        help="rates: one measured window (default 11: the quota window's period, samples x window)")
    parser.add_argument("--windows", type=int, default=3, help="rates: consecutive windows measured (default 3)")
    parser.add_argument("--cost-seconds", type=float, default=4.0, help="cost: produce and fetch windows (default 4)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before each produce window (default 1)")
    parser.add_argument("--connections", type=int, default=4, help="produce connections (default 4)")
    parser.add_argument("--depth", type=int, default=16,
                        help="produce requests in flight each (default 16: the broker always has work)")
    parser.add_argument("--fetch-mib", type=int, default=128, help="MiB fetched per cost round (default 128)")
    parser.add_argument("--baseline-rev", help="the code 'off' runs (default: the commit before client quotas)")
    parser.add_argument("--rate", type=int, default=MiB, help="the limited clients' byte rate (default 1 MiB/s)")
    parser.add_argument("--settle", type=float, default=12.0,
                        help="seconds before the limited clients are measured (default 12: past their burst)")
    parser.add_argument("--fill-mib", type=int, default=256, help="MiB the consumers read, again and again "
                                                                   "(default 256)")
    args = parser.parse_args(argv)
    if args.only != "rates":
        rows, produce_us, fetch_us = cost(args)
        print_table(f"quota accounting cost: best of {args.rounds} rounds, broker CPU per request as ratios to 'off' "
                    f"(and the median of each round's ratio; load average {os.getloadavg()[0]:.1f})",
                    ["broker", "produce req/s", "ratio", "µs CPU/req", "ratio", "median", "fetch req/s", "ratio",
                     "µs CPU/req", "ratio", "median"], rows)
        rows = []
        for name, config in (("no quota", None), ("never throttles", NEVER)):
            produce, fetch = accounting_us(config)
            rows.append([name, f"{produce:.2f}", f"{produce / produce_us:.3f}", f"{fetch:.2f}",
                         f"{fetch / fetch_us:.3f}"])
        print_table(f"the accounting itself, timed in process, as a ratio to 'off''s broker CPU per request above "
                    f"(load average {os.getloadavg()[0]:.1f})",
                    ["quota", "produce µs/req", "ratio", "fetch µs/req", "ratio"], rows)
        print("target: quota accounting costs <= 3 % on the Produce and Fetch paths (ratios <= 0.03, CPU/req ratios "
              "<= 1.03)")
    if args.only != "cost":
        rows = rates(args)
        print_table(f"client quotas with confluent-kafka: {args.windows} windows of {args.seconds:g} s after "
                    f"{args.settle:g} s (load average {os.getloadavg()[0]:.1f})",
                    ["client", "MB/s", "quota or alone MB/s", "ratio", f"ratio per {args.seconds:g} s",
                     "throttles seen"], rows)
        print("targets: a limited client within 0.75-1.25 of its quota; a free one unaffected (ratio ~1)")


if __name__ == "__main__":
    main()
