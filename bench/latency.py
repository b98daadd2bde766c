"""End-to-end latency at a fixed rate (performance issue, item 7): produce → consumer receive, against three
brokers.

Runs its own ZooKeeper and three broker processes (kbroker.cluster's launcher, free ports, temp dir), creates
one topic (`--partitions`, default 3, RF 3, min.insync.replicas 2), then for each `--acks` value (default
`all` then `1`): a confluent-kafka producer sends `--rate` (10 000) records/s of `--size` (100) B for
`--seconds` (20), paced in 1 ms ticks, each value carrying its send time; a confluent-kafka consumer assigned
to every partition at the end receives them. The first `--warmup` seconds are left out. Printed per case:
p50, p99, p99.9 and max of the end-to-end latency (send → `poll()` returned it) and of the produce latency
(send → delivery report, librdkafka's `Message.latency()`), the rate reached, and the ratio of p50 and p99 to
the issue's targets (p50 ≤ 3 ms, p99 ≤ 15 ms); per case it also logs the cores each broker and this process
(the clients) used, and the brokers' side of the produce latency from their Prometheus metrics
(`kafka_network_requestmetrics_totaltime_seconds` of Produce: arrival → answer, the acks=all wait included;
mean and the bucket holding p50 and p99), and how long each broker's hub and this process's main thread waited for
a core while runnable (the run-queue wait of /proc/<pid>/schedstat: ms per s and the longest stall, the latter also
a column of the table) with the machine's CPU pressure: on a shared machine a broker not scheduled holds every
record of its partitions, and the acks=all tail follows these stalls (bench/README). Producer and consumer run in
this process, so their clocks agree; the producer uses `--linger-ms` (0; librdkafka's default is 5) and the
consumer `fetch.wait.max.ms` 100 (a long poll the broker answers as soon as the records are committed).

    .venv/bin/python -m bench.latency [--seconds 20] [--rate 10000] [--acks all --acks 1] [--partitions 3]
                                      [--linger-ms 0]
"""
from __future__ import annotations

import contextlib
import os
import struct
import sys
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench._common import (CpuMeter, PySpy, bench_parser, create_replicated_topic, fmt_rate, log, print_table,  # noqa: E402
                           three_brokers)
from kbroker.cluster import wait_until  # noqa: E402

_STAMP = struct.Struct(">q")
TARGET_P50_MS, TARGET_P99_MS = 3.0, 15.0


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class Receiver(threading.Thread):
    """A consumer assigned to every partition from its current end offset; keeps (send time, receive time) of
    each record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, TopicPartition
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        wait_until(lambda: len([m for m in self.consumer.list_topics(topic, timeout=5).topics[topic]
                                .partitions.values() if m.leader >= 0]) == partitions, 30)
        self.consumer.assign([TopicPartition(topic, p, self.consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=30)[1]) for p in range(partitions)])
        self.samples: list[tuple[int, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        poll, samples = self.consumer.poll, self.samples
        while not self.stopping.is_set():     # poll(), not consume(n): that waits until n records are in
            m = poll(0.1)
            if m is not None and m.error() is None:
                samples.append((_STAMP.unpack_from(m.value())[0], time.monotonic_ns()))
        self.consumer.close()


class RunQueueMeter(threading.Thread):
    """How long each process's main thread (a broker's gevent hub) waited for a core while runnable, over a case:
    the run-queue wait of /proc/<pid>/schedstat (second field), sampled every `interval` s. A stretch of samples
    whose wait grew by at least 80 % of the time between them is one stall (the hub ready but not run: no request,
    fetch or timer of that broker moves meanwhile); per process the total (ms per s) and the longest stall (ms),
    and the machine's CPU pressure (/proc/pressure/cpu "some": the share of time some runnable task waited).
    Linux only: elsewhere it reports nothing."""

    def __init__(self, pids: dict[str, int], interval: float = 0.02):
        super().__init__(daemon=True)
        self.pids, self.interval = pids, interval
        self.stopping = threading.Event()
        self.total = dict.fromkeys(pids, 0.0)
        self.longest = dict.fromkeys(pids, 0.0)
        self.available = os.path.exists(f"/proc/{os.getpid()}/schedstat")

    @staticmethod
    def _wait(path: str) -> float | None:
        """The run-queue wait so far (ns) of a schedstat file."""
        try:
            with open(path) as f:
                return float(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def _pressure(self) -> float | None:
        try:
            with open("/proc/pressure/cpu") as f:
                return float(f.readline().split("total=")[1]) / 1e6   # µs -> s
        except (OSError, IndexError, ValueError):
            return None

    def run(self) -> None:
        paths = {name: f"/proc/{pid}/schedstat" for name, pid in self.pids.items()}
        waits = {name: self._wait(path) for name, path in paths.items()}
        streak = dict.fromkeys(paths, 0.0)
        self.t0, self.p0 = time.monotonic(), self._pressure()
        last = self.t0
        while not self.stopping.wait(self.interval):
            now = time.monotonic()
            for name, path in paths.items():
                wait = self._wait(path)
                if wait is None or waits[name] is None:
                    continue
                grown = (wait - waits[name]) / 1e9
                waits[name] = wait
                self.total[name] += grown
                streak[name] = streak[name] + grown if grown >= 0.8 * (now - last) else 0.0
                self.longest[name] = max(self.longest[name], streak[name])
            last = now
        self.elapsed = time.monotonic() - self.t0
        p1 = self._pressure()
        self.pressure = None if p1 is None or self.p0 is None else (p1 - self.p0) / self.elapsed

    def stop(self) -> str:
        """Stop sampling; the figures as one log line."""
        self.stopping.set()
        self.join()
        if not self.available:
            return "no /proc/<pid>/schedstat here"
        figures = ", ".join(f"{name} {self.total[name] / self.elapsed * 1e3:.0f} ms/s (longest "
                            f"{self.longest[name] * 1e3:.0f} ms)" for name in self.pids)
        pressure = "" if self.pressure is None else f"; machine CPU pressure (some) {self.pressure:.0%}"
        return figures + pressure

    def longest_broker_stall_ms(self) -> float:
        return max((v for name, v in self.longest.items() if name.startswith("broker")), default=0.0) * 1e3


def produce_times(metrics_port: int) -> tuple[list[tuple[float, float]], float]:
    """A broker's Produce request times so far (kafka_network_requestmetrics_totaltime_seconds, every version):
    ([(bucket upper bound in seconds, cumulative count)], sum in seconds)."""
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    buckets: dict[float, float] = {}
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != "kafka_network_requestmetrics_totaltime_seconds":
            continue
        for sample in family.samples:
            if sample.labels.get("request") != "Produce":
                continue
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
    return sorted(buckets.items()), total


def broker_produce_summary(before: list, after: list) -> str:
    """Mean, and the bucket bounds holding p50 and p99, of the Produce requests between two readings of every
    broker's produce_times: arrival → answer ready, the acks=all wait for the followers included."""
    counts: dict[float, float] = {}
    total = 0.0
    for (b0, s0), (b1, s1) in zip(before, after):
        old = dict(b0)
        for bound, n in b1:
            counts[bound] = counts.get(bound, 0.0) + n - old.get(bound, 0.0)
        total += s1 - s0
    cumulative = sorted(counts.items())
    n = cumulative[-1][1] if cumulative else 0
    if not n:
        return "no Produce requests"

    def bound_of(q: float) -> str:
        bound = next(b for b, c in cumulative if c >= q * n)
        return f"≤ {bound * 1e3:g} ms" if bound != float("inf") else "> 30 s"
    return (f"{n:,.0f} Produce requests, mean {total / n * 1e3:.2f} ms, p50 {bound_of(0.5)}, "
            f"p99 {bound_of(0.99)}")


def run_case(bootstrap: str, topic: str, partitions: int, acks: str, rate: int, size: int, seconds: float,
             warmup: float, linger_ms: float) -> dict:
    """Send at `rate` for `seconds`; the latencies of the records sent after `warmup` seconds."""
    from confluent_kafka import Producer
    receiver = Receiver(bootstrap, topic, partitions)
    receiver.start()
    time.sleep(2)   # the consumer's assignment resolved to the end offsets before anything is sent
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms,
                         "enable.idempotence": acks == "all", "queue.buffering.max.messages": 1_000_000})
    acked: list[tuple[int, float]] = []
    failed = []

    def delivered(err, msg):
        if err is not None:
            failed.append(err)
        else:
            acked.append((_STAMP.unpack_from(msg.value())[0], msg.latency()))

    padding = b"x" * max(0, size - _STAMP.size)
    per_tick = max(1, rate // 1000)
    start = time.monotonic_ns()
    end, sent, tick = start + int(seconds * 1e9), 0, start
    while tick < end:
        for i in range(per_tick):
            producer.produce(topic, _STAMP.pack(time.monotonic_ns()) + padding, partition=(sent + i) % partitions,
                             on_delivery=delivered)
        sent += per_tick
        producer.poll(0)
        tick += 1_000_000
        pause = (tick - time.monotonic_ns()) / 1e9
        if pause > 0:
            time.sleep(pause)
    producer.flush(30)
    elapsed = (time.monotonic_ns() - start) / 1e9
    try:
        wait_until(lambda: len(receiver.samples) >= sent - len(failed), 30)
    except TimeoutError:
        log(f"acks={acks}: the consumer stopped short of what was sent")
    receiver.stopping.set()
    receiver.join(10)
    cut = start + int(warmup * 1e9)
    e2e = sorted((recv - sent_ns) / 1e6 for sent_ns, recv in receiver.samples if sent_ns >= cut)
    produce = sorted(latency * 1e3 for sent_ns, latency in acked if sent_ns >= cut and latency is not None)
    return {"sent": sent, "received": len(receiver.samples), "failed": len(failed), "rate": sent / elapsed,
            "e2e": e2e, "produce": produce}


def main() -> None:
    parser = bench_parser("latency", __doc__)
    parser.add_argument("--seconds", type=float, default=20.0, help="sending time of each case")
    parser.add_argument("--warmup", type=float, default=3.0, help="first seconds left out of the figures")
    parser.add_argument("--rate", type=int, default=10_000, help="records per second")
    parser.add_argument("--size", type=int, default=100, help="value bytes (≥ 8: the send time)")
    parser.add_argument("--acks", action="append", choices=("all", "1"), help="cases (default: all, then 1)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (RF 3, min ISR 2)")
    parser.add_argument("--linger-ms", type=float, default=0.0, help="the producer's linger.ms")
    args = parser.parse_args()
    cases = args.acks or ["all", "1"]

    rows = []
    with three_brokers(args.tmp_dir, args.keep, args.broker_prop, "kbroker-bench-latency-", metrics=True) as state:
        bootstrap = state["bootstrap"]
        create_replicated_topic(state, "latency", args.partitions, {"min.insync.replicas": "2"})
        load = os.getloadavg()[0]
        for acks in cases:
            log(f"acks={acks}: {args.rate:,} records/s of {args.size} B for {args.seconds:g} s")
            with contextlib.ExitStack() as profiles:
                if args.py_spy:      # every broker: FILE-acks<acks>-broker-N.svg
                    root = os.path.splitext(args.py_spy)[0]
                    for b in state["brokers"]:
                        profiles.enter_context(PySpy(b["pid"], f"{root}-acks{acks}-broker-{b['id']}.svg",
                                                     args.py_spy_format))
                pids = {f"broker {b['id']}": b["pid"] for b in state["brokers"]}
                pids["client (this process)"] = os.getpid()
                cpu = {name: CpuMeter(pid).start() for name, pid in pids.items()}
                waits = RunQueueMeter(pids)
                waits.start()
                produced = [produce_times(b["metrics_port"]) for b in state["brokers"]]
                r = run_case(bootstrap, "latency", args.partitions, acks, args.rate, args.size, args.seconds,
                             args.warmup, args.linger_ms)
                cpu = {name: meter.percent() / 100 for name, meter in cpu.items()}
                waited = waits.stop()
                brokers_side = broker_produce_summary(produced, [produce_times(b["metrics_port"])
                                                                 for b in state["brokers"]])
            for name, values in (("end to end", r["e2e"]), ("produce (ack)", r["produce"])):
                p50, p99 = percentile(values, 0.50), percentile(values, 0.99)
                ratios = (f"{p50 / TARGET_P50_MS:.2f} / {p99 / TARGET_P99_MS:.2f}" if name == "end to end" else "")
                rows.append([f"acks={acks}, {name}", fmt_rate(r["rate"]), f"{len(values):,}", f"{p50:.2f}",
                             f"{p99:.2f}", f"{percentile(values, 0.999):.2f}",
                             f"{values[-1] if values else float('nan'):.2f}", ratios,
                             f"{waits.longest_broker_stall_ms():.0f}" if waits.available else "-"])
            log(f"acks={acks}: cores used during the case: " + ", ".join(f"{n} {c:.2f}" for n, c in cpu.items()))
            log(f"acks={acks}: run-queue wait (runnable, waiting for a core): {waited}")
            log(f"acks={acks}: the brokers' side (TotalTime, warm-up included): {brokers_side}")
            if r["failed"] or r["received"] < r["sent"]:
                log(f"acks={acks}: {r['failed']} failed, {r['received']:,} of {r['sent']:,} received")
    print_table(f"Latency at a fixed rate, 3 brokers, RF 3, min ISR 2, {args.partitions} partitions, {args.size} B "
                f"values, linger.ms {args.linger_ms:g} (load average {load:.2f} at start; ms)",
                ["case", "records/s", "samples", "p50", "p99", "p99.9", "max",
                 f"p50 / p99 to target ({TARGET_P50_MS:g} / {TARGET_P99_MS:g} ms)", "longest broker stall"], rows)


if __name__ == "__main__":
    main()
