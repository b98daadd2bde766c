"""Round trips with kafka-python against real broker processes, for every client era and codec, and across eras.

Eras: api_version (0,8,2) → Produce v0 / Fetch v0 (magic 0); (0,10,0) → Produce v2 / Fetch v2 (magic 1);
(0,11,0) → Produce v3 / Fetch v4 (magic 2, idempotent); no configuration at all → the newest versions the broker
advertises (magic 2, idempotent, acks=all). Every codec the era supports: zstd only with Produce v7+ (default).
kafka-python writes and reads magic 0 lz4 with old Kafka's framing only with `xxhash`; the `old_lz4` fixture
gives it a pure-Python one.

Every record's offset, key, value, timestamp (v1+), headers (v2) must come back exactly; the .log file shows
what the broker stored (magic 2 on a default topic, the producer's codec, producer ids for idempotent ones).

One broker serves the whole module; each test has its own topics.
"""
from __future__ import annotations

import pytest

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest
from tests.clients._util import (build_batch, ck_consume, create_topic, kp_consume, kp_produce, log_entries,
                                 raw_request, sample_records, segment_path, unique)

ERAS = {"0.8.2": (0, 8, 2), "0.10.0": (0, 10, 0), "0.11.0": (0, 11, 0), "default": None}
MAGIC = {"0.8.2": 0, "0.10.0": 1, "0.11.0": 2, "default": 2}
CODECS = {"0.8.2": [None, "gzip", "snappy", "lz4"],
          "0.10.0": [None, "gzip", "snappy", "lz4"],
          "0.11.0": [None, "gzip", "snappy", "lz4"],
          "default": [None, "gzip", "snappy", "lz4", "zstd"]}
CODEC_ID = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
UNSUPPORTED_COMPRESSION_TYPE = 76

CASES = [(era, codec) for era, codecs in CODECS.items() for codec in codecs]


def _expect_same(got, recs, magic: int, first_offset: int = 0, v0_stored: bool = False):
    """got: kafka-python ConsumerRecords; recs: what was produced, in order. magic: what the consumer reads.
    v0_stored: the records were produced without timestamps (magic 0), so a v1+ reader sees -1."""
    assert [g.offset for g in got] == list(range(first_offset, first_offset + len(recs)))
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for r in recs]
    if magic == 0:
        assert [(g.timestamp, g.timestamp_type) for g in got] == [(None, None)] * len(recs)
    elif v0_stored:
        assert [(g.timestamp, g.timestamp_type) for g in got] == [(-1, 0)] * len(recs)
    else:
        assert [(g.timestamp, g.timestamp_type) for g in got] == [(r.ts, 0) for r in recs]
    if magic == 2:
        assert [list(g.headers) for g in got] == [list(r.headers) for r in recs]
    else:
        assert [list(g.headers or []) for g in got] == [[] for _ in recs]


@pytest.mark.parametrize("era,codec", CASES, ids=[f"{e}-{c or 'none'}" for e, c in CASES])
def test_kafka_python_roundtrip(cluster1m, old_lz4, era, codec):
    api, magic = ERAS[era], MAGIC[era]
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique(f"kp-{era}-{codec or 'none'}"))
    recs = sample_records(6, headers=magic == 2)

    md = kp_produce(bs, topic, recs, api_version=api, compression=codec, with_ts=magic >= 1,
                    with_headers=magic == 2)
    assert [(m.partition, m.offset) for m in md] == [(0, i) for i in range(6)]
    assert [m.timestamp for m in md] == ([r.ts for r in recs] if magic >= 1 else [-1] * 6)

    # the same era reads them back
    _expect_same(kp_consume(bs, topic, 6, api_version=api), recs, magic)
    # a v2 reader sees what the broker stored (up-converted to magic 2: v0 records have no timestamp)
    if api is not None:
        _expect_same(kp_consume(bs, topic, 6), recs, 2, v0_stored=magic == 0)

    # on disk: one magic 2 batch, the producer's codec kept; idempotent eras carry a producer id, sequence 0
    entries = log_entries(segment_path(cluster1m, 1, topic))
    assert [(e.offset, e.magic, e.codec, e.last_offset, e.record_count) for e in entries] == \
        [(0, 2, CODEC_ID[codec], 5, 6)]
    if era in ("0.11.0", "default"):
        assert entries[0].producer_id >= 0 and entries[0].base_sequence == 0
    else:
        assert (entries[0].producer_id, entries[0].base_sequence) == (-1, -1)
    assert entries[0].max_timestamp == (recs[-1].ts if magic >= 1 else -1)


def test_default_kafka_python_producer_is_idempotent_with_acks_all(cluster1m):
    """kafka-python 3.x with no configuration: idempotent (InitProducerId answered), acks=all, Produce v7+."""
    from kafka import KafkaProducer
    topic = create_topic(cluster1m, unique("kp-defaults"))
    p = KafkaProducer(bootstrap_servers=cluster1m.bootstrap)
    try:
        assert p.config["acks"] == -1 and p.config["enable_idempotence"] is True
        assert p._transaction_manager is not None
        futures = [p.send(topic, b"value-%d" % i) for i in range(3)]
        p.flush(15)
        assert sorted(f.get(5).offset for f in futures) == [0, 1, 2]
        pid = p._transaction_manager.producer_id_and_epoch
        assert pid.producer_id >= 0 and pid.epoch >= 0
    finally:
        p.close(5)
    entries = log_entries(segment_path(cluster1m, 1, topic))
    assert {e.producer_id for e in entries} == {pid.producer_id}
    assert entries[0].base_sequence == 0
    assert sum(e.record_count for e in entries) == 3


# ---- cross-era on one topic ----------------------------------------------------------------------------------

def test_v0_v1_v2_producers_to_v2_consumers(cluster1m, old_lz4):
    """v0 and v1 producers (plain, gzip, lz4) then v2 ones on one topic: a v2 reader (kafka-python, librdkafka)
    sees every record in order with contiguous offsets; v0 records up-converted without timestamps."""
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("cross-up"))
    plan = [("0.8.2", None), ("0.8.2", "gzip"), ("0.8.2", "lz4"), ("0.10.0", None), ("0.10.0", "gzip"),
            ("0.10.0", "lz4"), ("default", "lz4"), ("default", "gzip"), ("default", None)]
    produced = []  # (era, Rec)
    for i, (era, codec) in enumerate(plan):
        magic = MAGIC[era]
        recs = sample_records(4, headers=magic == 2, tag=f"{i}{era}{codec}-")
        md = kp_produce(bs, topic, recs, api_version=ERAS[era], compression=codec, with_ts=magic >= 1,
                        with_headers=magic == 2)
        assert [m.offset for m in md] == list(range(len(produced), len(produced) + 4))
        produced += [(era, r) for r in recs]

    entries = log_entries(segment_path(cluster1m, 1, topic))
    assert [(e.offset, e.magic, e.codec, e.last_offset) for e in entries] == \
        [(4 * i, 2, CODEC_ID[c], 4 * i + 3) for i, (_, c) in enumerate(plan)]

    got = kp_consume(bs, topic, len(produced))
    assert [g.offset for g in got] == list(range(len(produced)))
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for _, r in produced]
    assert [g.timestamp for g in got] == [r.ts if MAGIC[e] >= 1 else -1 for e, r in produced]
    assert [list(g.headers) for g in got] == [list(r.headers) if MAGIC[e] == 2 else [] for e, r in produced]

    from confluent_kafka import TIMESTAMP_CREATE_TIME
    msgs = ck_consume(bs, topic, len(produced))
    assert [m.offset() for m in msgs] == list(range(len(produced)))
    assert [(m.key(), m.value()) for m in msgs] == [(r.key, r.value) for _, r in produced]
    assert [m.timestamp() for m in msgs] == \
        [(TIMESTAMP_CREATE_TIME, r.ts if MAGIC[e] >= 1 else -1) for e, r in produced]
    assert [m.headers() or [] for m in msgs] == \
        [list(r.headers) if MAGIC[e] == 2 else [] for e, r in produced]


@pytest.fixture(scope="module")
def v2_topic(cluster1m):
    """A topic written only by v2 producers (with headers): plain, gzip, lz4, snappy batches of 4 records."""
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("cross-down"))
    produced = []
    for i, codec in enumerate([None, "gzip", "lz4", "snappy"]):
        recs = sample_records(4, headers=True, tag=f"{i}{codec}-")
        md = kp_produce(bs, topic, recs, compression=codec)
        assert [m.offset for m in md] == list(range(4 * i, 4 * i + 4))
        produced += recs
    return topic, produced


@pytest.mark.parametrize("era", ["0.8.2", "0.10.0"])
@pytest.mark.parametrize("start", [0, 5], ids=["from-0", "mid-batch"])
def test_v2_producer_to_old_kafka_python_consumers(cluster1m, old_lz4, v2_topic, era, start):
    """v2 batches (headers, plain/gzip/lz4/snappy) down-converted for Fetch v0 (magic 0) and v2 (magic 1): every
    record, offsets exact also when starting inside a batch; headers dropped; v1 keeps timestamps. A second
    consumer starting two records later (inside the plain batch, or the gzip one) is served from the broker's
    conversion cache and reads the same records."""
    topic, produced = v2_topic
    for first in (start, start + 2):
        got = kp_consume(cluster1m.bootstrap, topic, len(produced) - first, api_version=ERAS[era], offset=first)
        _expect_same(got, produced[first:], MAGIC[era], first_offset=first)


@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
def test_v2_producer_to_librdkafka_with_version_fallback(cluster1m, v2_topic, fallback):
    """api.version.request=false: with fallback 0.9.0 librdkafka sends Fetch v1 (magic 0, down-converted). With
    0.10.0 librdkafka 2.x still asks ApiVersions ("any value >= 0.10 enables ApiVersionRequests") and so reads
    magic 2 with headers."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE
    topic, produced = v2_topic
    msgs = ck_consume(cluster1m.bootstrap, topic, len(produced), **{"api.version.request": False,
                                                                    "broker.version.fallback": fallback})
    assert [m.offset() for m in msgs] == list(range(len(produced)))
    assert [(m.key(), m.value()) for m in msgs] == [(r.key, r.value) for r in produced]
    if fallback == "0.9.0":
        assert [m.headers() for m in msgs] == [None] * len(produced)
        assert {m.timestamp()[0] for m in msgs} == {TIMESTAMP_NOT_AVAILABLE}
    else:
        assert [m.headers() or [] for m in msgs] == [list(r.headers) for r in produced]
        assert [m.timestamp() for m in msgs] == [(TIMESTAMP_CREATE_TIME, r.ts) for r in produced]


# ---- message.format.version=0.10.0: magic 1 on disk ----------------------------------------------------------

@pytest.fixture(scope="module")
def v1_topic(cluster1m):
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("fmt-0100"), configs={"message.format.version": "0.10.0"})
    produced = []
    for i, codec in enumerate([None, "gzip", "lz4", "snappy"]):
        recs = sample_records(6, headers=False, tag=f"{i}{codec}-")
        # a v2 producer, not idempotent (Kafka refuses producer ids in a v0/v1 topic), no headers (v1 has none)
        md = kp_produce(bs, topic, recs, compression=codec, enable_idempotence=False, acks=1)
        assert [(m.offset, m.timestamp) for m in md] == [(6 * i + j, r.ts) for j, r in enumerate(recs)]
        produced += recs
    return topic, produced


def test_format_0_10_0_topic_stores_magic_1(cluster1m, v1_topic):
    """Every entry of the .log file has magic 1 (byte 16). Plain records are one entry each; a compressed batch
    is one wrapper whose offset is its last inner offset (v1 inner offsets are relative), codec kept."""
    topic, produced = v1_topic
    path = segment_path(cluster1m, 1, topic)
    with open(path, "rb") as f:
        data = f.read()
    assert data[16] == 1
    entries = log_entries(path)
    assert {e.magic for e in entries} == {1}
    assert [(e.offset, e.codec) for e in entries] == [(i, 0) for i in range(6)] + [(11, 1), (17, 3), (23, 2)]
    # CreateTime: plain entries carry their own timestamp; a wrapper carries its largest inner timestamp
    assert [e.timestamp_type for e in entries] == [0] * 9
    assert [e.max_timestamp for e in entries] == [produced[i].ts for i in (0, 1, 2, 3, 4, 5, 11, 17, 23)]


@pytest.mark.parametrize("era", ["0.8.2", "0.10.0", "0.11.0", "default"])
def test_format_0_10_0_topic_read_by_every_era(cluster1m, old_lz4, v1_topic, era):
    topic, produced = v1_topic
    got = kp_consume(cluster1m.bootstrap, topic, len(produced), api_version=ERAS[era])
    _expect_same(got, produced, MAGIC[era])


def test_idempotent_producer_refused_by_format_0_10_0_topic(cluster1m):
    """Kafka's LogValidator: "Idempotent records cannot be used with magic version 1" (UNSUPPORTED_FOR_MESSAGE_FORMAT);
    nothing is appended, and a non-idempotent v2 producer then writes at offset 0."""
    from kafka.errors import UnsupportedForMessageFormatError
    topic = create_topic(cluster1m, unique("fmt-0100-idem"), configs={"message.format.version": "0.10.0"})
    with pytest.raises(UnsupportedForMessageFormatError):
        kp_produce(cluster1m.bootstrap, topic, sample_records(2, headers=False))
    md = kp_produce(cluster1m.bootstrap, topic, sample_records(2, headers=False), enable_idempotence=False)
    assert [m.offset for m in md] == [0, 1]


def test_format_0_10_0_topic_read_by_librdkafka(cluster1m, v1_topic):
    from confluent_kafka import TIMESTAMP_CREATE_TIME
    topic, produced = v1_topic
    msgs = ck_consume(cluster1m.bootstrap, topic, len(produced))
    assert [(m.offset(), m.key(), m.value(), m.timestamp()) for m in msgs] == \
        [(i, r.key, r.value, (TIMESTAMP_CREATE_TIME, r.ts)) for i, r in enumerate(produced)]


# ---- zstd: only magic 2 with Produce v7+, and only Fetch v10+ reads it ------------------------------------------

def _produce_raw(bs, topic, version, records_bytes):
    TopicData = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=version, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        TopicData(name=topic, partition_data=[TopicData.PartitionProduceData(index=0, records=records_bytes)])])
    resp = raw_request(bs, req)
    (t,) = resp.responses
    (p,) = t.partition_responses
    return p


def _fetch_raw(bs, topic, version, offset=0):
    FT = FetchRequest.FetchTopic
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                           FT(topic=topic, partitions=[FT.FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                               partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    resp = raw_request(bs, req)
    (t,) = resp.responses
    (p,) = t.partitions
    return p


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_needs_produce_v7(cluster1m, version):
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("zstd-old"))
    p = _produce_raw(bs, topic, version, build_batch(2, 4, sample_records(6)))
    assert p.error_code == UNSUPPORTED_COMPRESSION_TYPE
    # nothing appended; the same batch with Produce v7 goes in at offset 0
    p = _produce_raw(bs, topic, 7, build_batch(2, 4, sample_records(6)))
    assert (p.error_code, p.base_offset) == (0, 0)


@pytest.fixture(scope="module")
def zstd_topic(cluster1m):
    """compression.type=zstd: the broker recompresses an uncompressed v2 batch to zstd."""
    topic = create_topic(cluster1m, unique("zstd-topic"), configs={"compression.type": "zstd"})
    recs = sample_records(6)
    kp_produce(cluster1m.bootstrap, topic, recs)  # uncompressed, idempotent
    assert [(e.magic, e.codec, e.record_count) for e in log_entries(segment_path(cluster1m, 1, topic))] == \
        [(2, 4, 6)]
    return topic, recs


def test_zstd_topic_read_by_fetch_v10_and_refused_to_down_conversion(cluster1m, zstd_topic):
    bs = cluster1m.bootstrap
    topic, recs = zstd_topic
    for version in (0, 1, 2, 3):
        assert _fetch_raw(bs, topic, version).error_code == UNSUPPORTED_COMPRESSION_TYPE, version
    p = _fetch_raw(bs, topic, 10)
    assert (p.error_code, p.high_watermark) == (0, 6)
    _expect_same(kp_consume(bs, topic, 6), recs, 2)


@pytest.mark.parametrize("version", [4, 9])
def test_zstd_topic_refuses_fetch_below_v10(cluster1m, zstd_topic, version):
    topic, _ = zstd_topic
    assert _fetch_raw(cluster1m.bootstrap, topic, version).error_code == UNSUPPORTED_COMPRESSION_TYPE


# ---- sizes: many records down-converted in chunks; a batch larger than the fetch limits -----------------------

@pytest.fixture(scope="module")
def many_topic(cluster1m):
    """3000 small records in v2 batches of at most 4 KiB (plain and gzip, with headers). (Old fetches, v0-v2,
    have a hard size limit: in Kafka a v2 batch larger than the partition limit cannot be down-converted at all
    and such a consumer is stuck with RecordTooLargeError, so the batches stay well below the 16 KiB used.)"""
    from kafka import KafkaProducer
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("many"))
    expected = []
    for codec in (None, "gzip", None):
        p = KafkaProducer(bootstrap_servers=bs, compression_type=codec, batch_size=4096, linger_ms=50)
        try:
            for i in range(1000):
                n = len(expected)
                p.send(topic, key=b"key-%d" % n, value=b"value-%d-" % n + b"x" * (n % 50), partition=0,
                       headers=[("n", b"%d" % n)])
                expected.append((b"key-%d" % n, b"value-%d-" % n + b"x" * (n % 50)))
            p.flush(30)
        finally:
            p.close(5)
    assert sum(e.record_count for e in log_entries(segment_path(cluster1m, 1, topic))) == 3000
    return topic, expected


@pytest.mark.parametrize("era", ["0.8.2", "0.10.0", "default"])
def test_many_records_in_small_fetches(cluster1m, many_topic, era):
    """max_partition_fetch_bytes 16 KiB: many fetches, each down-converted (v0/v1) within the limit; every
    record arrives once, in order."""
    topic, expected = many_topic
    got = kp_consume(cluster1m.bootstrap, topic, len(expected), api_version=ERAS[era],
                     max_partition_fetch_bytes=16384, fetch_max_bytes=16384, timeout=30)
    assert [g.offset for g in got] == list(range(len(expected)))
    assert [(g.key, g.value) for g in got] == expected


@pytest.mark.parametrize("era", ["0.11.0", "default"])
def test_batch_larger_than_fetch_limits_still_returned(cluster1m, era):
    """Fetch v3+: the first batch comes whole even when larger than max_bytes and the partition limit (KIP-74),
    so a consumer with 4 KiB limits still reads a 100 KB record, then the next ones."""
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("bigbatch"))
    recs = sample_records(1, headers=False)
    recs[0].value = bytes(range(256)) * 400
    small = sample_records(3, headers=False, tag="after-")
    kp_produce(bs, topic, recs)
    kp_produce(bs, topic, small)
    got = kp_consume(bs, topic, 4, api_version=ERAS[era], max_partition_fetch_bytes=4096, fetch_max_bytes=4096)
    assert [(g.offset, g.value) for g in got] == [(i, r.value) for i, r in enumerate(recs + small)]


# ---- topic configs the clients see: LogAppendTime, max.message.bytes ------------------------------------------

@pytest.fixture(scope="module")
def append_time_topic(cluster1m):
    """message.timestamp.type=LogAppendTime: a v2 batch (gzip) and a v1 message set (0.10.0 producer), the
    broker's clock replacing the producers' timestamps."""
    from tests.clients._util import now_ms
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("append-time"), configs={"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 3_600_000
    recs = sample_records(6, ts_base=old)
    before = now_ms()
    md2 = kp_produce(bs, topic, recs, compression="gzip")
    recs1 = sample_records(6, ts_base=old, headers=False, tag="v1-")
    md1 = kp_produce(bs, topic, recs1, api_version=(0, 10, 0))
    after = now_ms()
    return topic, recs + recs1, md2 + md1, before, after


def test_log_append_time_answered_to_producers(cluster1m, append_time_topic):
    topic, recs, md, before, after = append_time_topic
    assert [m.offset for m in md] == list(range(12))
    # one append time per batch, in the produce response (Produce v2+), within the produce calls
    first, second = {m.timestamp for m in md[:6]}, {m.timestamp for m in md[6:]}
    assert len(first) == 1 and len(second) == 1
    (t1,), (t2,) = first, second
    assert before - 1000 <= t1 <= t2 <= after + 1000
    entries = log_entries(segment_path(cluster1m, 1, topic))
    assert [(e.magic, e.timestamp_type, e.max_timestamp) for e in entries] == [(2, 1, t1), (2, 1, t2)]


@pytest.mark.parametrize("era", ["0.10.0", "0.11.0", "default"])
def test_log_append_time_seen_by_consumers(cluster1m, append_time_topic, era):
    topic, recs, md, _, _ = append_time_topic
    got = kp_consume(cluster1m.bootstrap, topic, 12, api_version=ERAS[era])
    assert [(g.offset, g.key, g.value) for g in got] == [(i, r.key, r.value) for i, r in enumerate(recs)]
    assert [(g.timestamp, g.timestamp_type) for g in got] == [(m.timestamp, 1) for m in md]


def test_log_append_time_seen_by_librdkafka(cluster1m, append_time_topic):
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    topic, recs, md, _, _ = append_time_topic
    msgs = ck_consume(cluster1m.bootstrap, topic, 12)
    assert [(m.offset(), m.timestamp()) for m in msgs] == \
        [(i, (TIMESTAMP_LOG_APPEND_TIME, m.timestamp)) for i, m in enumerate(md)]


@pytest.mark.parametrize("era", ["0.8.2", "default"])
def test_record_over_max_message_bytes_refused(cluster1m, era):
    """max.message.bytes=2000: a 5000-byte record is refused (MESSAGE_TOO_LARGE), nothing appended, a small
    record afterwards goes in at offset 0."""
    from kafka.errors import KafkaError
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("too-large"), configs={"max.message.bytes": "2000"})
    big = sample_records(1, headers=False)
    big[0].value = bytes(range(256)) * 20
    with pytest.raises(KafkaError) as e:
        kp_produce(bs, topic, big, api_version=ERAS[era], with_ts=era != "0.8.2", retries=0,
                   enable_idempotence=False)
    assert "TooLarge" in type(e.value).__name__, repr(e.value)
    md = kp_produce(bs, topic, sample_records(1, headers=False), api_version=ERAS[era], with_ts=era != "0.8.2")
    assert md[0].offset == 0


# ---- lz4 framing of down-converted wrappers: old Kafka's wrong header checksum for magic 0 only -------------

def _legacy_wrappers(data: bytes):
    """(offset, magic, codec, value) of each top-level v0/v1 message (partial trailing message ignored)."""
    import struct
    out, pos = [], 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        if pos + 12 + size > len(data):
            break
        magic, attrs = data[pos + 16], data[pos + 17]
        p = pos + 18 + (8 if magic == 1 else 0)
        (klen,) = struct.unpack_from(">i", data, p)
        p += 4 + max(klen, 0)
        (vlen,) = struct.unpack_from(">i", data, p)
        value = data[p + 4:p + 4 + vlen] if vlen >= 0 else None
        out.append((offset, magic, attrs & 7, value))
        pos += 12 + size
    return out


@pytest.mark.parametrize("fetch_version,magic", [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_lz4_down_conversion_header_checksum(cluster1m, fetch_version, magic):
    """A v2 lz4 batch fetched as magic 0 carries old Kafka's frame header checksum (xxh32 over magic + FLG + BD,
    what 0.8/0.9 clients expect); as magic 1 the standard one (over FLG + BD)."""
    from tests.clients._util import xxh32
    bs = cluster1m.bootstrap
    topic = create_topic(cluster1m, unique("lz4-hc"))
    recs = sample_records(6, headers=False)
    kp_produce(bs, topic, recs, compression="lz4")
    p = _fetch_raw(bs, topic, fetch_version)
    assert p.error_code == 0
    wrappers = _legacy_wrappers(bytes(p.records))
    # one wrapper for the batch; its offset is that of its last inner message (v0 and v1 alike)
    assert [(o, m, c) for o, m, c, _ in wrappers] == [(5, magic, 3)]
    frame = wrappers[0][3]
    assert frame[:4] == b"\x04\x22\x4d\x18"
    header_end = 7 + (8 if frame[4] & 0x08 else 0)
    correct = (xxh32(frame[4:header_end - 1]) >> 8) & 0xFF
    broken = (xxh32(frame[0:header_end - 1]) >> 8) & 0xFF
    assert frame[header_end - 1] == (broken if magic == 0 else correct)
