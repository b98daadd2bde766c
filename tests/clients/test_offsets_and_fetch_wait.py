"""ListOffsets, DeleteRecords and Fetch waiting, through real clients against a real broker process.

- kafka-python's beginning_offsets / end_offsets at every era (ListOffsets v0 for 0.8.2 and 0.10.0, v1+ after),
  offsets_for_times through the time index (within batches, within compressed batches, across segments);
- KafkaAdminClient.delete_records moves the log start offset: beginning_offsets follow, a fetch below it is out
  of range (the consumer resets to the new start);
- a consumer waiting in Fetch (max wait 10 s) on an empty partition is answered as soon as a producer appends;
  min_bytes holds the answer back until enough bytes (or the max wait) — loose timing only.

One broker serves the whole module; each test has its own topics.
"""
from __future__ import annotations

import threading
import time

import pytest

from kafka.protocol.consumer import FetchRequest

from kbroker.protocol.client import Connection
from tests.clients._util import (ck_consume, create_topic, kp_consume, kp_produce, log_entries, now_ms,
                                 raw_request, sample_records, segment_path, unique)

UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OFFSET_OUT_OF_RANGE = 1
ERAS = {"0.8.2": (0, 8, 2), "0.10.0": (0, 10, 0), "0.11.0": (0, 11, 0), "default": None}


def kp_consumer(bs, api_version=None, **cfg):
    from kafka import KafkaConsumer
    kw = {} if api_version is None else {"api_version": api_version}
    return KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False, request_timeout_ms=15000,
                         **kw, **cfg)


@pytest.fixture(scope="module")
def timed_topic(cluster1m):
    """Seven records with known timestamps: three single-record batches, a gzip batch of three (timestamps out
    of order inside it), and one more batch."""
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("timed"))
    base = now_ms() - 50_000
    stamps = [base, base + 1000, base + 2000, base + 3020, base + 3000, base + 3010, base + 5000]
    recs = sample_records(len(stamps), headers=False)
    for r, ts in zip(recs, stamps):
        r.ts = ts
    for chunk, codec in ((recs[0:1], None), (recs[1:2], None), (recs[2:3], None), (recs[3:6], "gzip"),
                         (recs[6:7], None)):
        kp_produce(bs, topic, chunk, compression=codec)
    return topic, base, stamps


@pytest.mark.parametrize("era", list(ERAS))
def test_beginning_and_end_offsets_every_era(cluster1m, timed_topic, era):
    from kafka import TopicPartition
    topic, _, stamps = timed_topic
    tp = TopicPartition(topic, 0)
    c = kp_consumer(cluster1m.bootstrap, ERAS[era])
    try:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: len(stamps)}
    finally:
        c.close()


@pytest.mark.parametrize("era", ["0.11.0", "default"])
def test_offsets_for_times(cluster1m, timed_topic, era):
    """The first offset whose timestamp is at or after the target, and that record's timestamp (Kafka scans
    the first batch whose max timestamp reaches the target: inside the gzip batch, offset order wins)."""
    from kafka import TopicPartition
    topic, base, stamps = timed_topic
    tp = TopicPartition(topic, 0)
    expected = {
        base - 10_000: (0, base),
        base: (0, base),
        base + 1: (1, base + 1000),
        base + 1000: (1, base + 1000),
        base + 2001: (3, base + 3020),   # the gzip batch's first record is the first at/after it
        base + 3000: (3, base + 3020),
        base + 3015: (3, base + 3020),
        base + 3020: (3, base + 3020),
        base + 3021: (6, base + 5000),
        base + 5000: (6, base + 5000),
        base + 5001: None,
    }
    c = kp_consumer(cluster1m.bootstrap, ERAS[era])
    try:
        got = {ts: c.offsets_for_times({tp: ts})[tp] for ts in expected}
    finally:
        c.close()
    assert {ts: None if g is None else (g.offset, g.timestamp) for ts, g in got.items()} == expected


def test_offsets_for_times_across_segments(cluster1m):
    """segment.bytes=2000: twenty batches roll several segments (files named by base offset); every record's
    timestamp finds exactly its offset, and a time between two records finds the next one."""
    from kafka import TopicPartition
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("timed-segments"), configs={"segment.bytes": "2000"})
    base = now_ms() - 100_000
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bs, linger_ms=0)
    try:
        for i in range(20):
            p.send(topic, key=b"k%d" % i, value=b"v" * 300, partition=0, timestamp_ms=base + 100 * i)
            p.flush(10)
    finally:
        p.close(5)
    import glob
    import os
    logs = sorted(glob.glob(os.path.join(cluster1m.brokers[1].dir, "data", f"{topic}-0", "*.log")))
    assert len(logs) >= 3, logs
    bases = [int(os.path.basename(x)[:-4]) for x in logs]
    assert bases[0] == 0 and bases == sorted(bases)
    for path, b in zip(logs, bases):
        entries = log_entries(path)
        assert entries and entries[0].offset == b
    tp = TopicPartition(topic, 0)
    c = kp_consumer(bs)
    try:
        exact = {i: c.offsets_for_times({tp: base + 100 * i})[tp] for i in range(20)}
        between = {i: c.offsets_for_times({tp: base + 100 * i - 50})[tp] for i in range(1, 20)}
        assert c.end_offsets([tp]) == {tp: 20}
    finally:
        c.close()
    assert {i: (o.offset, o.timestamp) for i, o in exact.items()} == {i: (i, base + 100 * i) for i in range(20)}
    assert {i: (o.offset, o.timestamp) for i, o in between.items()} == \
        {i: (i, base + 100 * i) for i in range(1, 20)}


def test_offsets_for_times_on_magic_0_topic_is_unsupported(cluster1m):
    """Kafka: ListOffsets v1+ by timestamp on a message format v0 topic → UNSUPPORTED_FOR_MESSAGE_FORMAT (43;
    kafka-python then leaves the partition out: None); earliest/latest still work."""
    from kafka import TopicPartition
    from kafka.protocol.consumer import ListOffsetsRequest
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("fmt-082"), configs={"message.format.version": "0.8.2"})
    kp_produce(bs, topic, sample_records(3, headers=False), enable_idempotence=False)
    assert [e.magic for e in log_entries(segment_path(cluster1m, 1, topic))] == [0, 0, 0]
    tp = TopicPartition(topic, 0)
    c = kp_consumer(bs)
    try:
        assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 3}
        assert c.offsets_for_times({tp: now_ms() - 100_000}) == {tp: None}
    finally:
        c.close()
    LT = ListOffsetsRequest.ListOffsetsTopic
    for version in (1, 5):
        req = ListOffsetsRequest(version=version, replica_id=-1, isolation_level=0, topics=[
            LT(name=topic, partitions=[LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                               timestamp=now_ms() - 100_000)])])
        (t,) = raw_request(bs, req).topics
        (p,) = t.partitions
        assert p.error_code == UNSUPPORTED_FOR_MESSAGE_FORMAT, version


# ---- DeleteRecords -------------------------------------------------------------------------------------------

def test_delete_records_moves_log_start(cluster1m):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import OffsetOutOfRangeError
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("delrec"))
    recs = sample_records(6, headers=False)
    kp_produce(bs, topic, recs[:3])
    kp_produce(bs, topic, recs[3:], compression="gzip")
    tp = TopicPartition(topic, 0)

    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
    try:
        result = admin.delete_records({tp: 4})
        assert result[tp]["low_watermark"] == 4
        # below the current start: nothing moves back
        assert admin.delete_records({tp: 2})[tp]["low_watermark"] == 4
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tp: 7})
    finally:
        admin.close()

    for api in ERAS.values():
        c = kp_consumer(bs, api)
        try:
            assert c.beginning_offsets([tp]) == {tp: 4}, api
            assert c.end_offsets([tp]) == {tp: 6}, api
        finally:
            c.close()
    # reading from the start: offsets 4 and 5 only (4 is inside the gzip batch 3..5)
    got = kp_consume(bs, topic, 2, offset=4)
    assert [(g.offset, g.key, g.value) for g in got] == [(4, recs[4].key, recs[4].value),
                                                        (5, recs[5].key, recs[5].value)]
    # a fetch below the log start is out of range: the consumer resets to the earliest offset (4)
    got = kp_consume(bs, topic, 2, offset=1, auto_offset_reset="earliest")
    assert [g.offset for g in got] == [4, 5]
    msgs = ck_consume(bs, topic, 2, offset=0, **{"auto.offset.reset": "earliest"})
    assert [m.offset() for m in msgs] == [4, 5]


def test_delete_records_to_high_watermark(cluster1m):
    """Offset -1 means the high watermark: everything goes, begin == end."""
    from kafka import KafkaAdminClient, TopicPartition
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("delrec-all"))
    kp_produce(bs, topic, sample_records(5, headers=False))
    tp = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
    try:
        assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 5
    finally:
        admin.close()
    c = kp_consumer(bs)
    try:
        assert c.beginning_offsets([tp]) == {tp: 5} and c.end_offsets([tp]) == {tp: 5}
    finally:
        c.close()
    md = kp_produce(bs, topic, sample_records(1, headers=False))
    assert md[0].offset == 5


@pytest.mark.parametrize("era", ["0.8.2", "default"])
def test_fetch_beyond_end_is_out_of_range(cluster1m, timed_topic, era):
    """Fetching past the high watermark is OFFSET_OUT_OF_RANGE: the consumer resets (earliest → offset 0); a
    fetch exactly at the end just waits for data."""
    topic, _, stamps = timed_topic
    got = kp_consume(cluster1m.bootstrap, topic, len(stamps), api_version=ERAS[era], offset=100,
                     auto_offset_reset="earliest")
    assert [g.offset for g in got] == list(range(len(stamps)))
    assert kp_consume(cluster1m.bootstrap, topic, 1, api_version=ERAS[era], offset=len(stamps), timeout=1) == []
    elapsed, part = _timed_fetch(cluster1m.bootstrap, _fetch_request(topic, 0, 1, offset=len(stamps) + 1))
    assert part.error_code == OFFSET_OUT_OF_RANGE


# ---- Fetch waiting in the purgatory --------------------------------------------------------------------------

def _ready_producer(bs, topic):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bs, linger_ms=0)
    p.partitions_for(topic)  # metadata fetched before the timed part
    return p


def test_kafka_python_fetch_wakes_on_produce(cluster1m):
    from kafka import TopicPartition
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("wait-kp"))
    p = _ready_producer(bs, topic)
    c = kp_consumer(bs, fetch_max_wait_ms=10_000, fetch_min_bytes=1)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        assert c.poll(timeout_ms=1000) == {}  # a fetch is now parked at the broker
        sent = {}

        def produce():
            sent["t"] = time.monotonic()
            p.send(topic, b"wake", partition=0)
            p.flush(10)

        timer = threading.Timer(0.5, produce)
        timer.start()
        got = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got.extend(recs)
        received = time.monotonic()
        timer.join()
        assert [r.value for r in got] == [b"wake"]
        assert received - sent["t"] < 2.0, f"fetch answered {received - sent['t']:.2f}s after the produce"
    finally:
        c.close()
        p.close(5)


def test_confluent_fetch_wakes_on_produce(cluster1m):
    from confluent_kafka import Consumer, TopicPartition
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("wait-ck"))
    p = _ready_producer(bs, topic)
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10_000, "fetch.min.bytes": 1})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        assert c.poll(1.0) is None
        t0 = time.monotonic()
        p.send(topic, b"wake", partition=0)
        p.flush(10)
        m = None
        while m is None and time.monotonic() - t0 < 15:
            m = c.poll(0.1)
            if m is not None and m.error():
                m = None
        assert m is not None and (m.offset(), m.value()) == (0, b"wake")
        assert time.monotonic() - t0 < 2.0
    finally:
        c.close()
        p.close(5)


def _fetch_request(topic, max_wait_ms, min_bytes, offset=0):
    FT = FetchRequest.FetchTopic
    return FetchRequest(version=4, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                        isolation_level=0, topics=[FT(topic=topic, partitions=[FT.FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def _timed_fetch(bs, request, during=None):
    """Send a fetch, run `during` (in a thread) while it waits; (elapsed seconds, partition response)."""
    host, port = bs.rsplit(":", 1)
    conn = Connection(host, int(port), "wait-test", 20)
    try:
        t0 = time.monotonic()
        conn.submit(request)
        th = threading.Thread(target=during) if during else None
        if th:
            th.start()
        resp = conn.receive()
        elapsed = time.monotonic() - t0
        if th:
            th.join()
    finally:
        conn.close()
    (t,) = resp.responses
    (part,) = t.partitions
    return elapsed, part


def test_fetch_waits_max_wait_on_empty_partition(cluster1m):
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("wait-empty"))
    elapsed, part = _timed_fetch(bs, _fetch_request(topic, 1000, 1))
    assert (part.error_code, part.high_watermark, bytes(part.records or b"")) == (0, 0, b"")
    assert 0.8 <= elapsed < 5.0, elapsed
    elapsed, part = _timed_fetch(bs, _fetch_request(topic, 0, 1))
    assert part.error_code == 0 and elapsed < 1.0, elapsed


def test_fetch_min_bytes_holds_answer_until_max_wait(cluster1m):
    """min_bytes 100000: a small append during the wait does not complete the fetch; the max wait (1.5 s) does,
    and the answer carries the record."""
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("wait-minbytes"))
    p = _ready_producer(bs, topic)
    try:
        def produce():
            time.sleep(0.2)
            p.send(topic, b"small", partition=0)
            p.flush(10)

        elapsed, part = _timed_fetch(bs, _fetch_request(topic, 1500, 100_000), during=produce)
        assert part.error_code == 0 and part.high_watermark == 1
        assert b"small" in bytes(part.records)
        assert 1.2 <= elapsed < 6.0, elapsed

        # enough bytes arriving during the wait completes it early
        def produce_big():
            time.sleep(0.2)
            p.send(topic, b"B" * 120_000, partition=0)
            p.flush(10)

        elapsed, part = _timed_fetch(bs, _fetch_request(topic, 10_000, 100_000, offset=1), during=produce_big)
        assert part.error_code == 0 and part.high_watermark == 2
        assert elapsed < 3.0, elapsed
    finally:
        p.close(5)
