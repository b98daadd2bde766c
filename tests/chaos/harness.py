"""What every fault test checks, from a real client's point of view.

- AckedProducer: confluent-kafka (acks=all, idempotent by default) writing unique values to every partition of
  a topic until stopped; it remembers where each record was acknowledged and when each partition last got an
  acknowledgement.
- HistoryReader: a kafka-python consumer tailing every partition during the faults; it notes every offset it
  reads and any offset read with two different values (two histories).
- verify(...): after the faults, a fresh consumer reads everything: each acknowledged record is there once, at
  its acknowledged offset; no offset ever read with two values; the replicas' log files agree entry for entry.
- ChaosRun: the figure the issue asks for — faults injected, records acknowledged, lost, and the worst
  per-partition unavailability after each kind of fault (the longest time a partition went without an
  acknowledgement, from the fault on). tests/chaos/conftest.py prints every run's rows at the end of the session.
"""
from __future__ import annotations

import struct
import threading
import time
from collections import defaultdict

from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from tests.clients._util import segment_entries

FIGURES: list[dict] = []     # one row per (run, fault kind), printed by the session's terminal summary


class AckedProducer:
    """Produces b"<prefix>-%08d" (unique; followed by `padding` dots) round-robin over the partitions until
    stopped. Other acks than "all" (`config`, e.g. acks=1) need idempotent=False; producers sharing a topic need
    distinct prefixes."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, security: dict | None = None,
                 idempotent: bool = True, padding: int = 0, prefix: bytes = b"value", **config):
        self.topic, self.partitions = topic, partitions
        self.padding = b"." * padding
        self.format = prefix + b"-%08d"
        self.producer = Producer({**(security or {}), "bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": idempotent, "linger.ms": 5, "message.timeout.ms": 120000,
                                  "retry.backoff.ms": 100, **config})
        self.acked: dict[tuple[int, int], bytes] = {}
        # Records acknowledged without an offset: librdkafka's idempotent producer acknowledges a batch whose
        # request timed out once a later batch of the partition succeeds ("implicitly acked"); (partition, value).
        self.acked_somewhere: list[tuple[int, bytes]] = []
        self.ack_times: dict[int, list[float]] = defaultdict(list)
        self.failed = 0
        self.sent = 0
        self.stopped_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg):
        if err is None:
            if msg.offset() is None:
                self.acked_somewhere.append((msg.partition(), msg.value()))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()
            self.ack_times[msg.partition()].append(time.monotonic())
        else:
            self.failed += 1

    def _run(self):
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, value=self.format % self.sent + self.padding,
                                      partition=self.sent % self.partitions, on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(120)

    def start(self) -> "AckedProducer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped_at = time.monotonic()
        self._stop.set()
        self._thread.join(150)

    def acked_count(self, partition: int | None = None) -> int:
        return sum(1 for (p, _) in [*list(self.acked), *list(self.acked_somewhere)]
                   if partition is None or p == partition)

    def worst_gap(self, since: float, until: float) -> float:
        """The longest time within [since, until] that some partition went without an acknowledgement."""
        worst = 0.0
        for p in range(self.partitions):
            times = [t for t in self.ack_times.get(p, []) if since < t <= until]
            previous = since
            for t in times + [until]:
                worst = max(worst, t - previous)
                previous = t
        return worst


def kafka_python_security(client_properties: dict, admin_password: str | None) -> dict:
    """A secured cluster's admin login as kafka-python options ({} for plaintext)."""
    if not client_properties:
        return {}
    return {"security_protocol": client_properties["security.protocol"],
            "sasl_mechanism": client_properties["sasl.mechanism"], "sasl_plain_username": "admin",
            "sasl_plain_password": admin_password, "ssl_cafile": client_properties["ssl.truststore.location"]}


class HistoryReader:
    """Tails every partition from the start while faults happen; `conflicts` lists (partition, offset, first
    value, other value) for any offset read with two values."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **kafka_python_options):
        self.topic, self.partitions = topic, partitions
        self.options = kafka_python_options
        self.bootstrap = bootstrap
        self.seen: dict[tuple[int, int], bytes] = {}
        self.conflicts: list[tuple[int, int, bytes, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def note(self, partition: int, offset: int, value: bytes) -> None:
        first = self.seen.setdefault((partition, offset), value)
        if first != value:
            self.conflicts.append((partition, offset, first, value))

    def _run(self):
        consumer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                             group_id=None, request_timeout_ms=10000, **self.options)
                    parts = [TopicPartition(self.topic, p) for p in range(self.partitions)]
                    consumer.assign(parts)
                    for tp in parts:
                        # Resume after what was read (a new consumer after an error starts at the beginning).
                        done = [o for (p, o) in self.seen if p == tp.partition]
                        consumer.seek(tp, max(done) + 1 if done else 0)
                for tp, records in consumer.poll(timeout_ms=500).items():
                    for r in records:
                        self.note(tp.partition, r.offset, r.value)
            except Exception:   # a fault may break the consumer: start a new one, as an application would
                if consumer is not None:
                    consumer.close()
                consumer = None
                time.sleep(0.5)
        if consumer is not None:
            consumer.close()

    def start(self) -> "HistoryReader":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60, **kafka_python_options
             ) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every record up to the end offsets, by a fresh consumer."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=5000, max_partition_fetch_bytes=10 ** 6, **kafka_python_options)
    parts = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(parts)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(parts)
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in parts):
        for tp, records in consumer.poll(timeout_ms=1000).items():
            for r in records:
                seen[(tp.partition, r.offset)] = r.value
    consumer.close()
    return seen


def log_entries(data_dir: str, topic: str, partition: int) -> dict[int, tuple[int, int]]:
    """last offset -> (size, crc) of every entry in a replica's log files under data_dir."""
    return {e.last_offset: (e.size, struct.unpack_from(">I", data, e.position + 17)[0])
            for data, e in segment_entries(data_dir, topic, partition, check_crc=False)}


def verify(producer: AckedProducer, final: dict[tuple[int, int], bytes], readers=(),
           data_dirs=()) -> int:
    """Assert the single history: every acknowledged record present once at its acknowledged offset (once in its
    partition when acknowledged without an offset), no offset read with two values (by the readers during the
    faults or against the final read), and, given the replicas' data dirs (their brokers stopped, or idle and in
    sync), the replicas' logs agree entry for entry. Returns the number lost (0)."""
    lost = {k: v for k, v in producer.acked.items() if final.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {sorted(lost.items())[:5]}"
    partition_of = {v: p for (p, _), v in final.items()}
    missing = [(p, v) for p, v in producer.acked_somewhere if partition_of.get(v) != p]
    assert not missing, f"{len(missing)} records acknowledged without an offset are lost, e.g. {missing[:5]}"
    where: dict[bytes, tuple[int, int]] = {}
    acked_values = set(producer.acked.values()) | {v for _, v in producer.acked_somewhere}
    for key, value in final.items():
        if value in acked_values:
            assert where.setdefault(value, key) == key, f"{value!r} is at {where[value]} and at {key}"
    for reader in readers:
        assert not reader.conflicts, f"offsets read with two values: {reader.conflicts[:5]}"
        moved = [(k, v, final[k]) for k, v in reader.seen.items() if k in final and final[k] != v]
        assert not moved, f"records read during the faults differ from the final log: {moved[:5]}"
    for p in range(producer.partitions):
        logs = [log_entries(d, producer.topic, p) for d in data_dirs]
        if len(logs) < 2:
            continue
        common = set.intersection(*(set(entries) for entries in logs))
        acked_here = [o for (q, o) in producer.acked if q == p]
        if acked_here:
            assert common and max(common) >= max(acked_here), f"replicas of {producer.topic}-{p} lack records"
        for offset in common:
            assert len({entries[offset] for entries in logs}) == 1, \
                f"replicas differ at {producer.topic}-{p}@{offset}"
    return len(lost)


class ChaosRun:
    """The figures of one fault test: fault(kind) when a fault is injected; finish(...) after verify."""

    def __init__(self, name: str):
        self.name = name
        self.faults: list[tuple[str, float]] = []

    def fault(self, kind: str) -> None:
        self.faults.append((kind, time.monotonic()))

    def finish(self, producer: AckedProducer, lost: int, until: float | None = None) -> list[dict]:
        """Rows per fault kind: count and the worst per-partition unavailability after it (up to the next
        fault; for the last, up to `until`, else when the producer was stopped)."""
        end = until or producer.stopped_at or time.monotonic()
        worst: dict[str, float] = {}
        count: dict[str, int] = defaultdict(int)
        for i, (kind, t0) in enumerate(self.faults):
            t1 = self.faults[i + 1][1] if i + 1 < len(self.faults) else end
            worst[kind] = max(worst.get(kind, 0.0), producer.worst_gap(t0, t1))
            count[kind] += 1
        rows = [{"run": self.name, "fault": kind, "faults": count[kind], "acked": producer.acked_count(),
                 "lost": lost, "worst_unavailable_s": round(worst[kind], 2)} for kind in worst]
        FIGURES.extend(rows)
        return rows
