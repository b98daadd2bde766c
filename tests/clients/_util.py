"""Helpers for the real-client tests: topics through kadmin, kafka-python produce/consume, readers of a
partition's .log files, and a pure-Python xxHash32 so kafka-python can write and read magic 0 lz4 (its old-Kafka
lz4 framing needs the optional `xxhash` package, which the venv does not have)."""
from __future__ import annotations

import glob
import os
import struct
import time
import uuid
from dataclasses import dataclass, field

from click.testing import CliRunner

from admin_cli.main import cli
from kafka.protocol.metadata import MetadataRequest

from kbroker.protocol.client import Connection, KafkaError
from kbroker.records.batches import v2_records
from kbroker.records.entries import V2_HEADER, iter_entries
from tests.integration.conftest import Cluster, wait_until


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return int(time.time() * 1000)


# ---- topics --------------------------------------------------------------------------------------------------

def raw_metadata(bootstrap: str, topics=None, version: int = 1):
    return raw_request(bootstrap, MetadataRequest(version=version, topics=topics), timeout=5)


def leaders_known(cluster: Cluster, topic: str, partitions: int) -> bool:
    """Every live broker's metadata names a leader for each partition of the topic."""
    for b in cluster.brokers.values():
        if not b.alive():
            continue
        try:
            md = raw_metadata(b.bootstrap, [topic])
        except KafkaError:
            return False
        t = {t.name: t for t in md.topics}.get(topic)
        if t is None or t.error_code != 0 or len(t.partitions) != partitions:
            return False
        if any(p.error_code != 0 or p.leader_id < 0 for p in t.partitions):
            return False
    return True


def create_topic(cluster: Cluster, name: str, partitions: int = 1, replication_factor: int = 1,
                 configs: dict | None = None) -> str:
    """kadmin create-topic through ZooKeeper, then wait until every live broker knows the leaders."""
    args = ["--zookeeper", cluster.zk_connect, "create-topic", name, "--partitions", str(partitions),
            "--replication-factor", str(replication_factor)]
    for k, v in (configs or {}).items():
        args += ["--config", f"{k}={v}"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    wait_until(lambda: leaders_known(cluster, name, partitions), 20, message=f"leaders of {name}")
    return name


# ---- records -------------------------------------------------------------------------------------------------

@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    ts: int | None = None
    headers: list = field(default_factory=list)


def sample_records(n: int = 6, ts_base: int | None = None, headers: bool = True, tag: str = "") -> list[Rec]:
    """Varied records: a null key, an empty value, a null value (tombstone), binary bytes, a large compressible
    value; distinct increasing CreateTime timestamps a little in the past (never old enough for retention)."""
    base = now_ms() - 60_000 if ts_base is None else ts_base
    out = []
    for i in range(n):
        key = None if i == 1 else f"{tag}k{i}".encode()
        if i == 2:
            value = b""
        elif i == 3:
            value = None
        elif i == 4:
            value = bytes(range(256)) * 4
        elif i == 5:
            value = (f"{tag}large-{i}-" * 700).encode()
        else:
            value = f"{tag}v{i}".encode()
        hs = [("h", f"{tag}{i}".encode()), ("empty", b"")] if headers and i % 2 == 0 else []
        out.append(Rec(key, value, base + 7 * i, hs))
    return out


def kp_produce(bootstrap: str, topic: str, records: list[Rec], api_version=None, compression=None,
               partition: int = 0, with_ts: bool = True, with_headers: bool = True, **cfg):
    """One kafka-python producer sends the records as one batch (a long linger, then flush) and closes.
    Returns the RecordMetadata list, in order."""
    from kafka import KafkaProducer
    kw = {} if api_version is None else {"api_version": api_version}
    kw.update(cfg)
    kw.setdefault("linger_ms", 5000)
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, request_timeout_ms=15000,
                      **kw)
    try:
        futures = [p.send(topic, partition=partition, key=r.key, value=r.value,
                          timestamp_ms=r.ts if with_ts else None,
                          headers=list(r.headers) if with_headers and r.headers else None)
                   for r in records]
        p.flush(30)
        return [f.get(10) for f in futures]
    finally:
        p.close(5)


def kp_consume(bootstrap: str, topic: str, n: int, api_version=None, partition: int = 0, offset: int = 0,
               timeout: float = 15.0, **cfg):
    """kafka-python consumer without a group: assign + seek, poll until n records (or the timeout)."""
    from kafka import KafkaConsumer, TopicPartition
    kw = {} if api_version is None else {"api_version": api_version}
    kw.update(cfg)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      request_timeout_ms=15000, **kw)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek(tp, offset)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got.extend(recs)
        return got
    finally:
        c.close()


def ck_consume(bootstrap: str, topic: str, n: int, partition: int = 0, offset: int = 0, timeout: float = 15.0,
               **conf):
    """confluent-kafka consumer that only assigns and never commits. (librdkafka insists on a group.id and then
    looks for the coordinator anyway: without ApiVersions (fallback 0.9.0) it sends FindCoordinator v0, which
    kbroker does not serve yet and answers by closing the connection, as Kafka does for an unknown API key; a
    short reconnect backoff keeps such fetches from stalling up to 10 s behind librdkafka's default backoff.)"""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + uuid.uuid4().hex[:6],
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "reconnect.backoff.max.ms": 300, **conf})
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        got, errors = [], []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
                continue
            got.append(m)
        assert not [e for e in errors if e.fatal()], errors
        return got
    finally:
        c.close()


# ---- the partition's .log files ------------------------------------------------------------------------------

@dataclass
class LogEntry:
    offset: int          # v0/v1: the (wrapper's) offset; v2: the base offset
    magic: int
    codec: int           # attributes & 7
    size: int            # the whole entry, 12-byte log overhead included
    last_offset: int     # v2: base + lastOffsetDelta; else offset
    producer_id: int = -1
    base_sequence: int = -1
    record_count: int = 1
    timestamp_type: int = 0
    max_timestamp: int = -1


def log_entries(path: str) -> list[LogEntry]:
    """Parse every top-level entry of a segment file (Kafka's layout: offset(8) size(4) then the entry; the magic
    is byte 16 of each entry for all three formats)."""
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos + 17 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        end = pos + 12 + size
        assert end <= len(data), f"torn entry at position {pos} of {path}"
        if magic == 2:
            (attrs,) = struct.unpack_from(">h", data, pos + 21)
            last_delta, _first_ts, max_ts, pid, _epoch, base_seq, count = struct.unpack_from(
                ">iqqqhii", data, pos + 23)
            out.append(LogEntry(offset, 2, attrs & 7, 12 + size, offset + last_delta, pid, base_seq, count,
                                (attrs >> 3) & 1, max_ts))
        else:
            attrs = data[pos + 17]
            ts = struct.unpack_from(">q", data, pos + 18)[0] if magic == 1 else -1
            out.append(LogEntry(offset, magic, attrs & 7, 12 + size, offset, timestamp_type=(attrs >> 3) & 1,
                                max_timestamp=ts))
        pos = end
    assert pos == len(data), f"{len(data) - pos} trailing bytes in {path}"
    return out


def segment_entries(data_dir: str, topic: str, partition: int, check_crc: bool = True):
    """(the segment's bytes, entry) for every entry of a partition's segment files under a log dir, in offset order
    (kbroker.records.entries.iter_entries)."""
    for path in sorted(glob.glob(os.path.join(data_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        for e in iter_entries(data, check_crc=check_crc):
            yield data, e


def log_batches(cluster: Cluster, broker_id: int, topic: str, partition: int) -> list:
    """[(attributes, producer id, producer epoch, base sequence, [(key, value)])] of every batch (v2) of a partition
    on one broker, read from its segment files with their CRCs checked (keys and values as bytes, None when null)."""
    out = []
    for data, e in segment_entries(os.path.join(cluster.brokers[broker_id].dir, "data"), topic, partition):
        assert e.magic == 2
        (*_, attributes, _, _, _, pid, epoch, base_seq, _) = V2_HEADER.unpack_from(data, e.position)
        out.append((attributes, pid, epoch, base_seq, [(_bytes(r.key), _bytes(r.value))
                                                       for r in v2_records(data, e.position, e.size, 1 << 24)]))
    return out


def _bytes(view) -> bytes | None:
    return None if view is None else bytes(view)


def segment_path(cluster: Cluster, broker_id: int, topic: str, partition: int = 0, base: int = 0) -> str:
    return os.path.join(cluster.brokers[broker_id].dir, "data", f"{topic}-{partition}", f"{base:020d}.log")


# ---- xxHash32 for kafka-python's magic 0 lz4 -----------------------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes, seed: int = 0) -> int:
    data = bytes(data)
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while i + 16 <= n:
            lanes = struct.unpack_from("<4I", data, i)
            v = [(_rotl((v[j] + lanes[j] * _P2) & _M, 13) * _P1) & _M for j in range(4)]
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M, 17) * _P4) & _M
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M, 11) * _P1) & _M
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h


class _Digest:
    def __init__(self, data):
        self._h = xxh32(data)

    def digest(self) -> bytes:
        return self._h.to_bytes(4, "big")

    def intdigest(self) -> int:
        return self._h


class XXHashShim:
    """Stands in for the `xxhash` module in kafka.codec (only xxh32(...).digest() is used there)."""
    xxh32 = _Digest


# ---- raw requests --------------------------------------------------------------------------------------------

def raw_request(bootstrap: str, request, timeout: float = 15.0, client_id: str = "clients-test-raw"):
    """Send one request (its version set) on a fresh connection of the protocol client; its decoded answer."""
    host, port = bootstrap.rsplit(":", 1)
    conn = Connection(host, int(port), client_id, timeout)
    try:
        return conn.send(request)
    finally:
        conn.close()


def build_batch(magic: int, codec: int, records: list[Rec]) -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder
    b = MemoryRecordsBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for r in records:
        assert b.append(r.ts if magic else None, r.key, r.value, r.headers if magic == 2 else None) is not None
    b.close()
    data = bytes(b.buffer())
    codec_in = (struct.unpack_from(">h", data, 21)[0] if magic == 2 else data[17]) & 7
    assert codec_in == codec, "kafka-python left the batch uncompressed (no gain): use larger records"
    return data
