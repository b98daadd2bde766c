"""`kadmin perf produce|consume`: kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh, printing their
figures in their formats, through kbroker's one protocol client (ClusterClient.produce / fetch).

The producer builds v2 batches of up to batch.size bytes (kbroker.records.builder) and sends them one at a time
to the partitions in turn, waiting for each acknowledgement (the client's blocking produce: one request in flight,
so figures are lower than a pipelining Java producer's); a record's latency is from its batch being built to its
acknowledgement. --throughput R paces the records to R/s (-1: as fast as possible). The consumer reads every
partition from its log start, partition by partition, until --messages records (or --timeout ms without any).
"""
from __future__ import annotations

import random
import string
import time
from datetime import datetime

import click

from kbroker.protocol.client import EARLIEST, Errors, KafkaError, error_name
from kbroker.protocol.client.cluster import TopicPartition
from kbroker.records.batches import CREATE_TIME
from kbroker.records.builder import build_v2
from kbroker.records.compression import CODEC_NAMES, codec_id

from .console_tools import Record, fetched_records
from .context import admin_client, settings

PRODUCER_PROPS = {"acks": "1", "batch.size": "16384", "compression.type": "none"}
REPORT_INTERVAL = 5.0     # seconds between the producer's window lines, as the Java tool
MAX_FETCH_BYTES = 1 << 20


class _Stats:
    """The Java tool's Stats: totals, a window printed every REPORT_INTERVAL, latency percentiles at the end."""

    def __init__(self):
        self.start = self.window_start = time.monotonic()
        self.count = self.bytes = self.window_count = self.window_bytes = 0
        self.latency_total = self.window_latency = 0.0
        self.max_latency = self.window_max = 0.0
        self.latencies: list[float] = []

    def record(self, n: int, size: int, latency_ms: float) -> None:
        self.count += n
        self.bytes += n * size
        self.window_count += n
        self.window_bytes += n * size
        self.latency_total += n * latency_ms
        self.window_latency += n * latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_max = max(self.window_max, latency_ms)
        self.latencies.extend([latency_ms] * n)
        now = time.monotonic()
        if now - self.window_start >= REPORT_INTERVAL:
            elapsed = now - self.window_start
            click.echo(f"{self.window_count} records sent, {self.window_count / elapsed:.1f} records/sec "
                       f"({self.window_bytes / elapsed / 1024 / 1024:.2f} MB/sec), "
                       f"{self.window_latency / max(self.window_count, 1):.1f} ms avg latency, "
                       f"{self.window_max:.1f} ms max latency.")
            self.window_start, self.window_count, self.window_bytes = now, 0, 0
            self.window_latency = self.window_max = 0.0

    def final(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        lat = sorted(self.latencies) or [0.0]

        def pct(p: float) -> int:
            return int(lat[min(int(p * len(lat)), len(lat) - 1)])
        return (f"{self.count} records sent, {self.count / elapsed:f} records/sec "
                f"({self.bytes / elapsed / 1024 / 1024:.2f} MB/sec), "
                f"{self.latency_total / max(self.count, 1):.2f} ms avg latency, {self.max_latency:.2f} ms max latency, "
                f"{pct(0.5)} ms 50th, {pct(0.95)} ms 95th, {pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.")


def _partitions(client, topic: str) -> list[TopicPartition]:
    info = client.metadata([topic]).topics.get(topic)
    if info is None or not info.partitions:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic}: UNKNOWN_TOPIC_OR_PARTITION")
    return [TopicPartition(topic, p) for p in sorted(info.partitions)]


def _props(pairs: tuple[str, ...]) -> dict[str, str]:
    props = dict(PRODUCER_PROPS)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--producer-props")
        if key not in PRODUCER_PROPS:
            raise click.BadParameter(f"{key} is not supported (only {', '.join(PRODUCER_PROPS)})",
                                     param_hint="--producer-props")
        props[key] = value
    if props["acks"] not in ("0", "1", "-1", "all"):
        raise click.BadParameter(f"acks={props['acks']} (0, 1, -1 or all)", param_hint="--producer-props")
    if props["compression.type"] not in CODEC_NAMES:
        raise click.BadParameter(f"compression.type={props['compression.type']}", param_hint="--producer-props")
    if not props["batch.size"].isdigit():
        raise click.BadParameter(f"batch.size={props['batch.size']}", param_hint="--producer-props")
    return props


@click.group("perf")
def perf():
    """Throughput and latency figures, as kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh print them."""


@perf.command("produce")
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--num-records", type=click.IntRange(min=1), required=True, help="How many records to send.")
@click.option("--record-size", type=click.IntRange(min=1), required=True, help="Each record's size in bytes.")
@click.option("--throughput", type=int, required=True, metavar="R",
              help="Records per second at most; -1 for no limit.")
@click.option("--producer-props", multiple=True, metavar="KEY=VALUE",
              help="acks (default 1), batch.size (16384), compression.type (none); repeatable.")
@click.pass_context
def perf_produce(ctx, topic, num_records, record_size, throughput, producer_props):
    """Send records of --record-size random bytes and print kafka-producer-perf-test's figures: a line every 5 s,
    then totals with latency percentiles."""
    props = _props(producer_props)
    acks = -1 if props["acks"] == "all" else int(props["acks"])
    codec = codec_id(props["compression.type"])
    per_batch = max(1, min(int(props["batch.size"]) // record_size, num_records))
    payload = "".join(random.choice(string.ascii_uppercase) for _ in range(record_size)).encode()
    timeout_ms = int(settings(ctx).request_timeout * 1000)
    with admin_client(ctx, settings(ctx).request_timeout) as client:
        tps = _partitions(client, topic)
        stats = _Stats()
        sent = 0
        while sent < num_records:
            n = min(per_batch, num_records - sent)
            if throughput > 0:
                due = stats.start + (sent + n) / throughput
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            built = time.monotonic()
            now_ms = int(time.time() * 1000)
            batch = build_v2([Record(now_ms, None, payload, [])] * n, first_offset=0, codec=codec,
                             timestamp_type=CREATE_TIME, log_append_time=-1)
            client.produce(tps[(sent // per_batch) % len(tps)], bytes(batch), acks, timeout_ms)
            stats.record(n, record_size, (time.monotonic() - built) * 1000)
            sent += n
        click.echo(stats.final())


CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _java_time(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S:") + f"{int(t * 1000) % 1000:03d}"


@perf.command("consume")
@click.option("--topic", required=True, help="The topic to consume from.")
@click.option("--messages", type=click.IntRange(min=1), required=True, help="How many records to read.")
@click.option("--timeout", "timeout_ms", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Stop after this many ms without a record.")
@click.pass_context
def perf_consume(ctx, topic, messages, timeout_ms):
    """Read --messages records from the topic's start and print kafka-consumer-perf-test's header and CSV line."""
    with admin_client(ctx, settings(ctx).request_timeout) as client:
        tps = _partitions(client, topic)
        starts = client.list_offsets({tp: EARLIEST for tp in tps})
        positions = {}
        for tp, (code, offset) in starts.items():
            if code:
                raise KafkaError(code, f"ListOffsets {tp}: {error_name(code)}")
            positions[tp] = offset
        click.echo(CONSUMER_HEADER)
        start = time.time()
        count = size = 0
        last_progress = time.monotonic()
        while count < messages and time.monotonic() - last_progress < timeout_ms / 1000:
            progressed = False
            for tp in tps:
                if count >= messages:
                    break
                fetched = client.fetch(tp, positions[tp], MAX_FETCH_BYTES, max_wait_ms=100)
                if fetched.error_code:
                    raise KafkaError(fetched.error_code, f"Fetch {tp}: {error_name(fetched.error_code)}")
                data = b"".join(bytes(piece) for piece in fetched.records)
                records, positions[tp] = fetched_records(data, [], 0, positions[tp])
                for r, _ in records[:messages - count]:
                    size += len(r.key or b"") + len(r.value or b"")
                count += min(len(records), messages - count)
                progressed = progressed or bool(records)
            if progressed:
                last_progress = time.monotonic()
        end = time.time()
    if count < messages:   # on stdout, between the header and the figures, as the Java tool prints it
        click.echo(f"WARNING: Exiting before consuming the expected number of messages: timeout ({timeout_ms} ms) "
                   "exceeded. You can use the --timeout option to increase the timeout.")
    elapsed = max(end - start, 1e-9)
    mb = size / 1024 / 1024
    click.echo(f"{_java_time(start)}, {_java_time(end)}, {mb:.4f}, {mb / elapsed:.4f}, {count}, "
               f"{count / elapsed:.4f}, 0, {int(elapsed * 1000)}, {mb / elapsed:.4f}, {count / elapsed:.4f}")
