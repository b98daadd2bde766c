"""Bad input on the data path (Produce, Fetch, ListOffsets, idempotent producers), against real brokers.

Every bad Produce must be answered with the per-partition error code Kafka 2.8 gives, append NOTHING (the
latest offset from ListOffsets is unchanged, a Fetch from offset 0 returns exactly the records that were
there before, and the next good produce gets exactly the old end offset), and leave the broker serving.

One 1-broker cluster (auto.create.topics.enable=false) serves most of the module; a 3-broker cluster, started
only for the tests that need partitions led elsewhere or a bumped leader epoch, serves the rest. Requests are
kafka-python message classes sent with kbroker's protocol client (a Connection); record batches are built
with aiokafka's C builders and then patched with struct (v2 header layout below).
"""
from __future__ import annotations

import gzip
import random
import struct
import time
import uuid
import zlib
from dataclasses import dataclass

import crc32c
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from click.testing import CliRunner
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from admin_cli.main import cli as kadmin
from kbroker.protocol.client import Connection, ConnectionLost, KafkaError
from tests.integration.conftest import Cluster, wait_until

# Kafka error codes
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
INVALID_REQUEST = 42
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_PRODUCER_ID = 59
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

# compression codec ids (attributes & 7)
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

# v2 batch header: baseOffset q@0, batchLength i@8, partitionLeaderEpoch i@12, magic b@16, crc I@17 (CRC-32C of
# bytes 21..end), attributes h@21, lastOffsetDelta i@23, firstTimestamp q@27, maxTimestamp q@35, producerId q@43,
# producerEpoch h@51, baseSequence i@53, recordCount i@57; records from 61.
V2_HEADER_SIZE = 61
# v0/v1 message: offset q@0, size i@8, crc I@12 (CRC-32 of bytes 16..end), magic b@16, attributes b@17, ...

TIMEOUT = 10.0


# ---- record builders and byte patching ---------------------------------------------------------------------

def v2_batch(values, *, codec: int = 0, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             timestamp: int | None = None) -> bytearray:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=10 ** 7)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for i, v in enumerate(values):
        b.append(i, timestamp=ts, key=b"key-%d" % i, value=v, headers=[])
    return bytearray(b.build())


def legacy_set(values, magic: int, codec: int = 0) -> bytearray:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=10 ** 7)
    ts = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts if magic else None, key=b"key-%d" % i, value=v)
    return bytearray(b.build())


def v2_batch_timestamps(timestamps, keys=None) -> bytearray:
    """One uncompressed record per timestamp (keys default to b"key-i"; None entries are null keys)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=10 ** 7)
    for i, ts in enumerate(timestamps):
        key = b"key-%d" % i if keys is None else keys[i]
        b.append(i, timestamp=ts, key=key, value=b"value-%d" % i, headers=[])
    return bytearray(b.build())


def legacy_wrapper(inner: bytes, magic: int, last_offset: int) -> bytearray:
    """A gzip-compressed v0/v1 wrapper message around `inner` (a message set), with a correct CRC-32."""
    value = gzip.compress(bytes(inner))
    body = struct.pack(">bb", magic, GZIP)
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return bytearray(struct.pack(">qi", last_offset, len(message)) + message)


def fix_v2_crc(buf: bytearray, pos: int = 0) -> bytearray:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(bytes(buf[pos + 21:pos + 12 + length])))
    return buf


def fix_legacy_crc(buf: bytearray, pos: int = 0) -> bytearray:
    (size,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16:pos + 12 + size])))
    return buf


def v2_crc_ok(buf) -> bool:
    (length,) = struct.unpack_from(">i", buf, 8)
    return struct.unpack_from(">I", buf, 17)[0] == crc32c.crc32c(bytes(buf[21:12 + length]))


def decode_records(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in fetched bytes (any magic, any codec)."""
    out = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        for r in batch:
            out.append((r.offset, r.value))
    return out


# ---- requests ------------------------------------------------------------------------------------------------

def client_for(broker) -> Connection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return Connection(host, int(port), "bad-input-test", timeout=TIMEOUT)


def produce_request(topic: str, partition: int, records, version: int, acks: int = 1, partitions=None):
    R = ProduceRequest
    parts = partitions if partitions is not None else [(partition, records)]
    return R(version=version, transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[
            R.TopicProduceData.PartitionProduceData(index=p, records=None if r is None else bytes(r))
            for p, r in parts])])


def produce(broker, topic: str, records, version: int = 7, partition: int = 0, acks: int = 1):
    """The partition response of one Produce request (a fresh connection per request)."""
    c = client_for(broker)
    try:
        resp = c.send(produce_request(topic, partition, records, version, acks))
    finally:
        c.close()
    [t] = resp.responses
    assert t.name == topic
    [p] = t.partition_responses
    assert p.index == partition
    return p


def fetch_request(topic: str, partition: int, offset: int, version: int = 11, leader_epoch: int = -1,
                  max_bytes: int = 10 ** 7):
    F = FetchRequest
    return F(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                 F.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=leader_epoch,
                                             fetch_offset=offset, log_start_offset=-1,
                                             partition_max_bytes=max_bytes)])],
             forgotten_topics_data=[], rack_id="")


def fetch(broker, topic: str, offset: int, version: int = 11, partition: int = 0, leader_epoch: int = -1):
    """(error code, high watermark, records bytes) of one partition."""
    c = client_for(broker)
    try:
        resp = c.send(fetch_request(topic, partition, offset, version, leader_epoch))
    finally:
        c.close()
    if version >= 7:
        assert resp.error_code == NONE
    [t] = resp.responses
    [p] = t.partitions
    return p.error_code, p.high_watermark, bytes(p.records or b"")


def list_offsets(broker, queries, version: int = 1):
    """queries: [(topic, partition, timestamp, current_leader_epoch)] -> list of partition responses in order."""
    R = ListOffsetsRequest
    by_topic: dict[str, list] = {}
    for topic, partition, ts, epoch in queries:
        by_topic.setdefault(topic, []).append(R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, timestamp=ts, current_leader_epoch=epoch, max_num_offsets=1))
    req = R(version=version, replica_id=-1, isolation_level=0,
            topics=[R.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    c = client_for(broker)
    try:
        resp = c.send(req)
    finally:
        c.close()
    return [(t.name, p) for t in resp.topics for p in t.partitions]


def latest_offset(broker, topic: str, partition: int = 0) -> int:
    [(_, p)] = list_offsets(broker, [(topic, partition, -1, -1)])
    assert p.error_code == NONE, p
    return p.offset


def init_producer_id(broker) -> tuple[int, int]:
    c = client_for(broker)
    try:
        resp = c.send(InitProducerIdRequest(version=1, transactional_id=None, transaction_timeout_ms=60000))
    finally:
        c.close()
    assert resp.error_code == NONE, resp
    return resp.producer_id, resp.producer_epoch


def create_topic(cluster, name: str, *args: str) -> None:
    if not args:
        args = ("--partitions", "1", "--replication-factor", "1")
    result = CliRunner().invoke(kadmin, ["--zookeeper", cluster.zk_connect, "create-topic", name, *args])
    assert result.exit_code == 0, result.output


def wait_leader(broker, topic: str, partitions=(0,)) -> None:
    def ready():
        try:
            answers = list_offsets(broker, [(topic, p, -1, -1) for p in partitions])
        except KafkaError:
            return False
        return all(p.error_code == NONE for _, p in answers)
    wait_until(ready, 20, message=f"broker {broker.id} to lead {topic} {list(partitions)}")


# ---- fixtures ------------------------------------------------------------------------------------------------

@dataclass
class Env:
    cluster: Cluster
    broker: object


MAIN = "main"            # the topic bad input is thrown at; seeded with three records
SMALL = "small"          # max.message.bytes=1000
IDEM = "idem"            # idempotent producers, each test with its own producer id
STRICT_TIME = "strict-time"   # message.timestamp.difference.max.ms=60000
COMPACT = "compacted"    # cleanup.policy=compact: every record needs a key
TINY_SEGMENT = "tiny-segment"  # segment.bytes=1024: a bigger batch can never fit in a segment
HEADER_ONLY_VARIANTS = ["count-above-records", "count-below-records", "garbage-records"]
INVALID_TIMESTAMP = 32
RECORD_LIST_TOO_LARGE = 18
SEED = [b"seed-0", b"seed-1", b"seed-2"]


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory):
    zk_connect = f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}"
    cluster = Cluster(zk_connect, str(tmp_path_factory.mktemp("produce-bad-input")))
    try:
        b = cluster.add(1, **{"auto.create.topics.enable": "false"})
        cluster.wait_ready([1])
        create_topic(cluster, MAIN)
        create_topic(cluster, SMALL, "--partitions", "1", "--replication-factor", "1",
                     "--config", "max.message.bytes=1000")
        create_topic(cluster, IDEM)
        create_topic(cluster, STRICT_TIME, "--partitions", "1", "--replication-factor", "1",
                     "--config", "message.timestamp.difference.max.ms=60000")
        create_topic(cluster, COMPACT, "--partitions", "1", "--replication-factor", "1",
                     "--config", "cleanup.policy=compact")
        create_topic(cluster, TINY_SEGMENT, "--partitions", "1", "--replication-factor", "1",
                     "--config", "segment.bytes=1024")
        for variant in HEADER_ONLY_VARIANTS:    # one topic each: a wrongly accepted batch poisons its topic
            create_topic(cluster, f"hdr-{variant}")
        for t in (MAIN, SMALL, IDEM, STRICT_TIME, COMPACT, TINY_SEGMENT, *(f"hdr-{v}" for v in HEADER_ONLY_VARIANTS)):
            wait_leader(b, t)
        p = produce(b, MAIN, v2_batch(SEED))
        assert (p.error_code, p.base_offset) == (NONE, 0)
        yield Env(cluster, b)
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def three(zookeeper, tmp_path_factory):
    """3 brokers: `away` lives only on broker 3, `follow` is led by 3 with broker 1 a follower, and `fence` is led
    by broker 2 with broker 1 next in line (a test stops broker 2 to bump its leader epoch)."""
    zk_connect = f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}"
    cluster = Cluster(zk_connect, str(tmp_path_factory.mktemp("produce-bad-input-3")))
    try:
        for i in (1, 2, 3):
            cluster.add(i, **{"auto.create.topics.enable": "false"})
        cluster.wait_ready([1, 2, 3])
        create_topic(cluster, "away", "--replica-assignment", "3")
        create_topic(cluster, "follow", "--replica-assignment", "3:1")
        create_topic(cluster, "fence", "--replica-assignment", "2:1")
        wait_leader(cluster.brokers[3], "away")
        wait_leader(cluster.brokers[3], "follow")
        wait_leader(cluster.brokers[2], "fence")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def no_tracebacks(request):
    """No request handler may crash on bad input: the broker logs of this test must hold no traceback."""
    fixture = "env" if "env" in request.fixturenames else "three" if "three" in request.fixturenames else None
    if fixture is None:
        yield
        return
    value = request.getfixturevalue(fixture)
    brokers = [value.broker] if fixture == "env" else list(value.brokers.values())
    sizes = {b.id: len(b.log()) for b in brokers}
    yield
    for b in brokers:
        new = b.log()[sizes[b.id]:]
        assert "Traceback" not in new, f"broker {b.id} logged a traceback:\n{new[-4000:]}"


# ---- the checks every bad produce gets -----------------------------------------------------------------------

@dataclass
class Snapshot:
    """A partition's end offset and the raw bytes a Fetch from 0 returns (raw, so that a bad batch a broker
    bug let in makes only the test that sent it fail, not every later one that reads the topic)."""
    topic: str
    latest: int
    data: bytes


def snapshot(broker, topic: str = MAIN) -> Snapshot:
    latest = latest_offset(broker, topic)
    error, hw, data = fetch(broker, topic, 0)
    assert error == NONE and hw == latest
    return Snapshot(topic, latest, data)


def assert_nothing_appended(broker, before: Snapshot) -> None:
    """Same end offset, same records, and the broker still appends a good batch at exactly the old end."""
    assert broker.alive(), "the broker process died"
    assert latest_offset(broker, before.topic) == before.latest, "the bad produce moved the end offset"
    error, hw, data = fetch(broker, before.topic, 0)
    assert error == NONE and hw == before.latest
    assert data == before.data, "a Fetch from 0 returns bytes the bad produce appended"
    value = b"good-after-%d" % before.latest
    p = produce(broker, before.topic, v2_batch([value]))
    assert (p.error_code, p.base_offset) == (NONE, before.latest), "the next good produce went elsewhere"
    error, _, data = fetch(broker, before.topic, before.latest)
    assert error == NONE and decode_records(data) == [(before.latest, value)]


def expect_produce_error(env, records, error: int, version: int = 7, topic: str = MAIN):
    b = env.broker
    before = snapshot(b, topic)
    p = produce(b, topic, records, version)
    assert p.error_code == error, f"expected error {error}, got {p.error_code} ({p})"
    assert p.base_offset == -1
    assert_nothing_appended(b, before)
    return p


# ---- good input first: the helpers and the broker agree on what works -------------------------------------------

@pytest.mark.parametrize("version,records", [
    (0, lambda: legacy_set([b"m0-a", b"m0-b"], magic=0)),
    (2, lambda: legacy_set([b"m1-a", b"m1-b"], magic=1)),
    (2, lambda: legacy_set([b"m1-gz-a", b"m1-gz-b"], magic=1, codec=GZIP)),
    (3, lambda: v2_batch([b"v2-a", b"v2-b"])),
    (7, lambda: v2_batch([b"v2-zstd-a", b"v2-zstd-b"], codec=ZSTD)),
], ids=["v0-message", "v1-message", "v1-gzip-wrapper", "v2-batch", "v2-zstd-produce-v7"])
def test_well_formed_produce_is_appended(env, version, records):
    """Baseline for the cases below: the same builders, unpatched, are accepted and read back."""
    b = env.broker
    before = snapshot(b)
    data = records()
    p = produce(b, MAIN, data, version)
    assert (p.error_code, p.base_offset) == (NONE, before.latest)
    assert latest_offset(b, MAIN) == before.latest + 2
    error, _, fetched = fetch(b, MAIN, before.latest)
    assert error == NONE
    assert decode_records(fetched) == [(before.latest + i, v) for i, (_, v) in enumerate(decode_records(data))]


# ---- corrupt records -------------------------------------------------------------------------------------------

def test_bad_crc_in_v0_message(env):
    data = legacy_set([b"a", b"b"], magic=0)
    data[-1] ^= 0xFF                         # last byte of the second message's value: its CRC-32 no longer matches
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=0)


def test_bad_crc_in_v1_message(env):
    data = legacy_set([b"a", b"b"], magic=1)
    data[12] ^= 0x01                         # first message's stored CRC-32
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=2)


def test_bad_crc_in_v1_compressed_wrapper(env):
    data = legacy_set([b"a" * 50, b"b" * 50], magic=1, codec=GZIP)
    data[-3] ^= 0x55                         # inside the gzip trailer, covered by the wrapper's CRC-32
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=2)


@pytest.mark.parametrize("version", [3, 7, 9])
def test_bad_crc_in_v2_batch(env, version):
    data = v2_batch([b"a", b"b", b"c"])
    data[-1] ^= 0x01                         # in the last record: CRC-32C mismatch
    assert not v2_crc_ok(data)
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=version)


def test_v2_crc_does_not_cover_base_offset_fields_but_covers_attributes(env):
    """The CRC-32C starts at the attributes: flipping a byte there (here: the maxTimestamp) is corruption."""
    data = v2_batch([b"a", b"b"])
    data[40] ^= 0x10                         # maxTimestamp
    expect_produce_error(env, data, CORRUPT_MESSAGE)


@pytest.mark.parametrize("magic_at", ["v2-batch", "v1-message"])
def test_wrong_magic(env, magic_at):
    if magic_at == "v2-batch":
        data = v2_batch([b"a"])
        data[16] = 3
        fix_v2_crc(data)                     # the CRC would still match; only the magic is wrong
        version = 7
    else:
        data = legacy_set([b"a"], magic=1)
        data[16] = 3
        fix_legacy_crc(data)
        version = 2
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=version)


def test_batch_length_smaller_than_the_bytes(env):
    """batchLength 10 short: the batch as framed fails its CRC (Kafka: CorruptRecordException)."""
    data = v2_batch([b"a", b"b", b"c"])
    (length,) = struct.unpack_from(">i", data, 8)
    struct.pack_into(">i", data, 8, length - 10)
    expect_produce_error(env, data, CORRUPT_MESSAGE)


def test_legacy_message_size_smaller_than_the_bytes(env):
    data = legacy_set([b"abcdefgh"], magic=1)
    (size,) = struct.unpack_from(">i", data, 8)
    struct.pack_into(">i", data, 8, size - 4)
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=2)


def test_legacy_message_size_below_minimum(env):
    data = legacy_set([b"abcdefgh"], magic=0)
    struct.pack_into(">i", data, 8, 5)       # shorter than any v0 message (RECORD_OVERHEAD_V0 = 14)
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=0)


@pytest.mark.parametrize("version", [0, 2])
def test_legacy_message_set_truncated(env, version):
    """The only message is cut short (its size field claims more bytes than were sent). Kafka would read no
    message at all and answer success with offset -1; kbroker answers CORRUPT_MESSAGE. Either way: nothing
    is appended."""
    data = legacy_set([b"x" * 40], magic=1 if version == 2 else 0)
    data = data[:-15]
    b = env.broker
    before = snapshot(b)
    p = produce(b, MAIN, data, version)
    assert p.error_code in (CORRUPT_MESSAGE, NONE) and p.base_offset == -1, p
    assert_nothing_appended(b, before)


def test_batch_length_larger_than_the_bytes(env):
    """A v2 batch whose batchLength claims 100 bytes more than were sent: Kafka 2.8 reads no whole batch, and
    ProduceRequest.validateRecords answers INVALID_RECORD ("must have at least one record batch")."""
    data = v2_batch([b"a", b"b", b"c"])
    (length,) = struct.unpack_from(">i", data, 8)
    struct.pack_into(">i", data, 8, length + 100)
    expect_produce_error(env, data, INVALID_RECORD)


def test_truncated_v2_batch(env):
    """The bytes stop in the middle of the records (the header is intact): no whole batch, INVALID_RECORD as
    above for Produce v3+."""
    data = v2_batch([b"value-%d" % i for i in range(10)])
    expect_produce_error(env, data[:len(data) - 30], INVALID_RECORD)


def test_truncated_inside_the_v2_header(env):
    data = v2_batch([b"a"])
    expect_produce_error(env, data[:40], INVALID_RECORD)


@pytest.mark.parametrize("version", [3, 7])
def test_empty_records_for_produce_v3(env, version):
    """Zero bytes of records in Produce v3+: "must have at least one record batch" (INVALID_RECORD)."""
    expect_produce_error(env, b"", INVALID_RECORD, version=version)


def test_non_zero_base_offset_in_v2_batch(env):
    data = v2_batch([b"a", b"b"])
    struct.pack_into(">q", data, 0, 5)       # baseOffset is outside the CRC
    expect_produce_error(env, data, INVALID_RECORD)


def test_last_offset_delta_disagrees_with_record_count(env):
    data = v2_batch([b"a", b"b", b"c"])
    struct.pack_into(">i", data, 23, 7)      # lastOffsetDelta 7 with 3 records
    fix_v2_crc(data)
    expect_produce_error(env, data, INVALID_RECORD)


def test_record_count_bomb(env):
    """The header says 1,000,000 records (lastOffsetDelta agrees) over ~100 bytes of records, CRC valid."""
    data = v2_batch([b"v" * 10 for _ in range(4)])
    assert 60 < len(data) - V2_HEADER_SIZE < 140
    struct.pack_into(">i", data, 23, 999_999)
    struct.pack_into(">i", data, 57, 1_000_000)
    fix_v2_crc(data)
    expect_produce_error(env, data, INVALID_RECORD)


def test_record_count_bomb_in_compressed_batch(env):
    data = v2_batch([b"v" * 10 for _ in range(4)], codec=GZIP)
    struct.pack_into(">i", data, 23, 999_999)
    struct.pack_into(">i", data, 57, 1_000_000)
    fix_v2_crc(data)
    expect_produce_error(env, data, INVALID_RECORD)


@pytest.mark.parametrize("variant", HEADER_ONLY_VARIANTS)
def test_records_disagree_with_a_plausible_header(env, variant):
    data = v2_batch([b"v" * 10 for _ in range(4)])        # 4 records, ~100 bytes of them
    if variant == "count-above-records":
        struct.pack_into(">i", data, 23, 10)             # lastOffsetDelta and recordCount agree: 11 records
        struct.pack_into(">i", data, 57, 11)
    elif variant == "count-below-records":
        struct.pack_into(">i", data, 23, 1)
        struct.pack_into(">i", data, 57, 2)
    else:
        data[V2_HEADER_SIZE:] = bytes([0x7F]) * (len(data) - V2_HEADER_SIZE)   # each "record" claims 63 bytes
    fix_v2_crc(data)
    topic = f"hdr-{variant}"
    p = produce(env.broker, topic, data)
    try:
        assert (p.error_code, p.base_offset) == (INVALID_RECORD, -1), p
    finally:
        error, _, fetched = fetch(env.broker, topic, 0)
        assert error == NONE
        if fetched:
            decode_records(fetched)      # what a consumer of the accepted batch gets
    assert latest_offset(env.broker, topic) == 0


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_corrupt_compressed_payload_in_v2_batch(env, codec):
    """Valid CRC-32C over garbage where the compressed records should be."""
    data = v2_batch([b"value-%d" % i * 5 for i in range(5)], codec=codec)
    garbage = bytes((i * 37 + 11) & 0xFF for i in range(len(data) - V2_HEADER_SIZE))
    data[V2_HEADER_SIZE:] = garbage
    fix_v2_crc(data)
    expect_produce_error(env, data, CORRUPT_MESSAGE)


def test_corrupt_compressed_payload_in_v1_wrapper(env):
    data = legacy_set([b"a" * 30, b"b" * 30], magic=1, codec=GZIP)
    # the wrapper's value starts after offset(8) size(4) crc(4) magic(1) attributes(1) timestamp(8) key(4) len(4)
    value_start = 34
    data[value_start:] = b"\x1f\x8b" + bytes((i * 13 + 5) & 0xFF for i in range(len(data) - value_start - 2))
    fix_legacy_crc(data)
    expect_produce_error(env, data, CORRUPT_MESSAGE, version=2)


@pytest.mark.parametrize("magic", [0, 1])
def test_bad_crc_of_a_message_inside_a_compressed_wrapper(env, magic):
    """The wrapper's CRC-32 is right, but an inner message's is not (Kafka checks every inner message)."""
    inner = legacy_set([b"inner-a", b"inner-b"], magic=magic)
    p = produce(env.broker, MAIN, legacy_wrapper(inner, magic, 1), 2)       # the hand-built wrapper is good ...
    assert p.error_code == NONE, p
    inner[-1] ^= 0xFF                                                        # ... until an inner CRC is wrong
    expect_produce_error(env, legacy_wrapper(inner, magic, 1), CORRUPT_MESSAGE, version=2)


def test_inner_magic_differs_from_wrapper_magic(env):
    inner = legacy_set([b"inner-v0"], magic=0)
    expect_produce_error(env, legacy_wrapper(inner, 1, 0), INVALID_RECORD, version=2)


def test_mixed_magic_in_one_message_set(env):
    data = legacy_set([b"m0"], magic=0) + legacy_set([b"m1"], magic=1)
    expect_produce_error(env, data, INVALID_RECORD, version=2)


# ---- limits and protocol rules ---------------------------------------------------------------------------------

def v2_batch_of_size(size: int) -> bytearray:
    """One uncompressed record whose whole batch (with the 12-byte log overhead) is exactly `size` bytes."""
    for n in range(size, 0, -1):
        data = v2_batch([b"x" * n])
        if len(data) == size:
            return data
    raise AssertionError(f"cannot build a batch of {size} bytes")


def test_oversized_batch(env):
    """max.message.bytes=1000 counts the whole batch, log overhead included: 1000 bytes pass, 1001 do not."""
    expect_produce_error(env, v2_batch_of_size(1001), MESSAGE_TOO_LARGE, topic=SMALL)
    b = env.broker
    before = latest_offset(b, SMALL)
    p = produce(b, SMALL, v2_batch_of_size(1000))
    assert (p.error_code, p.base_offset) == (NONE, before)


def test_oversized_compressed_batch(env):
    """The limit applies to the compressed size (here ~1.2 KB of incompressible-ish gzip)."""
    rnd = random.Random(1000)
    values = [rnd.randbytes(300) for _ in range(4)]
    data = v2_batch(values, codec=GZIP)
    assert len(data) > 1000
    expect_produce_error(env, data, MESSAGE_TOO_LARGE, topic=SMALL)


def test_batch_larger_than_a_segment(env):
    """segment.bytes=1024 and a 2000-byte batch (under max.message.bytes): RECORD_LIST_TOO_LARGE."""
    expect_produce_error(env, v2_batch_of_size(2000), RECORD_LIST_TOO_LARGE, topic=TINY_SEGMENT)


def test_timestamp_out_of_range(env):
    """message.timestamp.difference.max.ms=60000: a record a day old, or a day ahead, is INVALID_TIMESTAMP."""
    now = int(time.time() * 1000)
    for timestamps in ([now - 86_400_000, now, now], [now, now, now + 86_400_000]):
        before = snapshot(env.broker, STRICT_TIME)
        p = produce(env.broker, STRICT_TIME, v2_batch_timestamps(timestamps), version=8)
        assert (p.error_code, p.base_offset) == (INVALID_TIMESTAMP, -1), p
        assert p.error_message, "Produce v8+ answers an error message"
        assert_nothing_appended(env.broker, before)


def test_timestamp_out_of_range_in_a_middle_record(env):
    now = int(time.time() * 1000)
    before = snapshot(env.broker, STRICT_TIME)
    p = produce(env.broker, STRICT_TIME, v2_batch_timestamps([now, now - 86_400_000, now]), version=8)
    assert (p.error_code, p.base_offset) == (INVALID_TIMESTAMP, -1), p
    assert_nothing_appended(env.broker, before)


def test_compacted_topic_record_without_key(env):
    now = int(time.time() * 1000)
    before = snapshot(env.broker, COMPACT)
    p = produce(env.broker, COMPACT, v2_batch_timestamps([now, now], keys=[b"k", None]), version=8)
    assert (p.error_code, p.base_offset) == (INVALID_RECORD, -1), p
    assert latest_offset(env.broker, COMPACT) == before.latest
    p = produce(env.broker, COMPACT, v2_batch_timestamps([now, now]), version=8)
    assert (p.error_code, p.base_offset) == (NONE, before.latest)


def test_produce_v8_names_the_rejected_records(env):
    now = int(time.time() * 1000)
    p = produce(env.broker, COMPACT, v2_batch_timestamps([now, now, now], keys=[b"k", None, b"k"]), version=8)
    assert p.error_code == INVALID_RECORD
    assert [e.batch_index for e in p.record_errors] == [1]
    p = produce(env.broker, STRICT_TIME, v2_batch_timestamps([now - 86_400_000, now]), version=9)
    assert p.error_code == INVALID_TIMESTAMP
    assert [e.batch_index for e in p.record_errors] == [0]


def test_zstd_with_produce_v6(env):
    expect_produce_error(env, v2_batch([b"z" * 20], codec=ZSTD), UNSUPPORTED_COMPRESSION_TYPE, version=6)


def test_two_batches_in_one_produce_v3_partition(env):
    data = v2_batch([b"first"]) + v2_batch([b"second"])
    expect_produce_error(env, data, INVALID_RECORD)


def test_v1_message_in_produce_v3(env):
    """Produce v3+ may carry only magic 2 batches."""
    expect_produce_error(env, legacy_set([b"a"], magic=1), INVALID_RECORD, version=3)


def test_control_batch_from_a_client(env):
    data = v2_batch([b"a"])
    (attributes,) = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, attributes | 0x20)
    fix_v2_crc(data)
    expect_produce_error(env, data, INVALID_RECORD)


def test_invalid_required_acks(env):
    b = env.broker
    before = snapshot(b)
    c = client_for(b)
    try:
        req = produce_request(MAIN, 0, None, 7, acks=2, partitions=[(0, v2_batch([b"acks-2"]))])
        resp = c.send(req)
    finally:
        c.close()
    [p] = resp.responses[0].partition_responses
    assert (p.error_code, p.base_offset) == (INVALID_REQUIRED_ACKS, -1)
    assert_nothing_appended(b, before)


def test_acks_0_with_a_bad_batch_closes_the_connection(env):
    """No response for acks=0, so Kafka closes the connection on an error for the producer to notice; a good
    acks=0 produce keeps it open (the next request on it is answered, with its own correlation id)."""
    b = env.broker
    before = snapshot(b)
    c = client_for(b)
    try:
        assert not c.submit(produce_request(MAIN, 0, v2_batch([b"acks0-good"]), 7, acks=0))
        assert c.send(ApiVersionsRequest(version=0)).error_code == NONE
        bad = v2_batch([b"acks0-bad"])
        bad[-1] ^= 0xFF
        assert not c.submit(produce_request(MAIN, 0, bad, 7, acks=0))
        with pytest.raises(ConnectionLost) as closed:
            c.send(ApiVersionsRequest(version=0))
        assert "Timed out" not in str(closed.value), "the broker kept the connection open after a failed acks=0 produce"
    finally:
        c.close()
    assert latest_offset(b, MAIN) == before.latest + 1, "only the good acks=0 batch may be appended"
    error, _, data = fetch(b, MAIN, before.latest)
    assert error == NONE and decode_records(data) == [(before.latest, b"acks0-good")]
    assert_nothing_appended(b, snapshot(b))


def test_produce_to_unknown_topic_with_auto_create_off(env):
    b = env.broker
    name = "nowhere-" + uuid.uuid4().hex[:6]
    for version in (0, 3, 7, 9):
        p = produce(b, name, v2_batch([b"lost"]) if version >= 3 else legacy_set([b"lost"], magic=0), version)
        assert (p.error_code, p.base_offset) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
    error, _, data = fetch(b, name, 0)
    assert error == UNKNOWN_TOPIC_OR_PARTITION and data == b""
    time.sleep(0.3)
    assert not env.cluster.zk.topic_exists(name), "a Produce/Fetch created the topic"


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state"])
def test_produce_to_an_internal_topic_is_refused(env, topic):
    """Clients may not write to the coordinators' topics: INVALID_TOPIC_EXCEPTION (17), as Kafka (it was an
    AttributeError in the handler)."""
    assert produce(env.broker, topic, v2_batch([b"x"])).error_code == 17


def test_produce_to_unknown_partition_of_a_known_topic(env):
    b = env.broker
    before = snapshot(b)
    p = produce(b, MAIN, v2_batch([b"p7"]), partition=7)
    assert (p.error_code, p.base_offset) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert_nothing_appended(b, before)


def test_one_bad_partition_does_not_fail_the_other(env):
    """Errors are per partition: in one request, a corrupt batch for `small` and a good one for `main`."""
    b = env.broker
    before = snapshot(b)
    small_before = latest_offset(b, SMALL)
    bad = v2_batch([b"bad"])
    bad[-1] ^= 1
    R = ProduceRequest
    req = R(version=7, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        R.TopicProduceData(name=MAIN, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(v2_batch([b"mixed-good"])))]),
        R.TopicProduceData(name=SMALL, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(bad))])])
    c = client_for(b)
    try:
        resp = c.send(req)
    finally:
        c.close()
    got = {t.name: t.partition_responses[0] for t in resp.responses}
    assert (got[MAIN].error_code, got[MAIN].base_offset) == (NONE, before.latest)
    assert (got[SMALL].error_code, got[SMALL].base_offset) == (CORRUPT_MESSAGE, -1)
    assert latest_offset(b, SMALL) == small_before


# ---- Fetch and ListOffsets ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 4, 11])
def test_fetch_negative_offset(env, version):
    error, _, data = fetch(env.broker, MAIN, -5, version)
    assert error == OFFSET_OUT_OF_RANGE and data == b""


@pytest.mark.parametrize("version", [0, 4, 11])
def test_fetch_beyond_the_end(env, version):
    b = env.broker
    end = latest_offset(b, MAIN)
    error, hw, data = fetch(b, MAIN, end + 1, version)
    assert error == OFFSET_OUT_OF_RANGE and data == b""
    error, hw, data = fetch(b, MAIN, end, version)      # at the end: no error, nothing to read
    assert (error, hw, data) == (NONE, end, b"")
    error, _, _ = fetch(b, MAIN, 2 ** 62, version)
    assert error == OFFSET_OUT_OF_RANGE


def test_fetch_unknown_partition(env):
    error, _, data = fetch(env.broker, MAIN, 0, partition=9)
    assert error == UNKNOWN_TOPIC_OR_PARTITION and data == b""


def test_fetch_current_leader_epoch_in_the_future(env):
    """Leader epoch 0 (a new topic on one broker): a client claiming epoch 1 is ahead of this broker."""
    b = env.broker
    error, _, _ = fetch(b, MAIN, 0, leader_epoch=0)
    assert error == NONE
    error, _, data = fetch(b, MAIN, 0, leader_epoch=1)
    assert error == UNKNOWN_LEADER_EPOCH and data == b""
    [(_, p)] = list_offsets(b, [(MAIN, 0, -1, 5)], version=4)
    assert p.error_code == UNKNOWN_LEADER_EPOCH


@pytest.mark.parametrize("version", [1, 5])
def test_list_offsets_same_partition_twice(env, version):
    b = env.broker
    answers = list_offsets(b, [(MAIN, 0, -1, -1), (MAIN, 0, -2, -1), (SMALL, 0, -1, -1), (SMALL, 4, -1, -1)],
                           version)
    by = [(t, p.partition_index, p.error_code) for t, p in answers]
    assert by == [(MAIN, 0, INVALID_REQUEST), (MAIN, 0, INVALID_REQUEST), (SMALL, 0, NONE),
                  (SMALL, 4, UNKNOWN_TOPIC_OR_PARTITION)]
    assert answers[2][1].offset == latest_offset(b, SMALL)


def test_fetch_with_an_unknown_session_id(env):
    """A session id we never gave is FETCH_SESSION_ID_NOT_FOUND at the top level, as Kafka 2.8 answers."""
    req = fetch_request(MAIN, 0, 0, version=11)
    req.session_id, req.session_epoch = 123456, 1
    c = client_for(env.broker)
    try:
        resp = c.send(req)
    finally:
        c.close()
    assert resp.error_code == 70 and resp.session_id == 0
    assert all(not p.records for t in resp.responses for p in t.partitions)


# ---- partitions led elsewhere, leader epochs ---------------------------------------------------------------------

@pytest.mark.parametrize("topic", ["away", "follow"], ids=["not-hosted", "follower"])
def test_produce_and_fetch_to_a_partition_led_elsewhere(three, topic):
    b1, b3 = three.brokers[1], three.brokers[3]
    before = latest_offset(b3, topic)
    for version, records in ((2, legacy_set([b"x"], magic=1)), (7, v2_batch([b"x"])), (9, v2_batch([b"x"]))):
        p = produce(b1, topic, records, version)
        assert (p.error_code, p.base_offset) == (NOT_LEADER_OR_FOLLOWER, -1)
    for version in (0, 10):
        error, _, data = fetch(b1, topic, 0, version)
        assert error == NOT_LEADER_OR_FOLLOWER and data == b""
    error, _, _ = fetch(b1, topic, 0, 11)   # from v11 a follower serves consumers too (KIP-392)
    assert error == (NONE if topic == "follow" else NOT_LEADER_OR_FOLLOWER)
    [(_, p)] = list_offsets(b1, [(topic, 0, -1, -1)])
    assert p.error_code == NOT_LEADER_OR_FOLLOWER
    assert latest_offset(b3, topic) == before
    p = produce(b3, topic, v2_batch([b"at-the-leader"]))
    assert (p.error_code, p.base_offset) == (NONE, before)


def test_fetch_with_stale_and_future_leader_epoch(three):
    """`fence` moves from broker 2 to broker 1 (leader epoch 0 -> 1) when broker 2 stops."""
    b1, b2 = three.brokers[1], three.brokers[2]
    p = produce(b2, "fence", v2_batch([b"epoch-0"]))
    assert p.error_code == NONE
    assert b2.terminate() == 0

    def led_by_1():
        try:
            [(_, p)] = list_offsets(b1, [("fence", 0, -1, -1)], version=4)
        except KafkaError:
            return None
        return p if p.error_code == NONE else None
    p = wait_until(led_by_1, 20, message="broker 1 to take over `fence`")
    epoch = p.leader_epoch
    assert epoch >= 1, p
    error, _, data = fetch(b1, "fence", 0, version=11, leader_epoch=epoch)
    assert error == NONE
    error, _, data = fetch(b1, "fence", 0, version=11, leader_epoch=epoch - 1)
    assert error == FENCED_LEADER_EPOCH and data == b""
    error, _, data = fetch(b1, "fence", 0, version=9, leader_epoch=epoch + 1)
    assert error == UNKNOWN_LEADER_EPOCH and data == b""
    [(_, p)] = list_offsets(b1, [("fence", 0, -1, epoch - 1)], version=4)
    assert p.error_code == FENCED_LEADER_EPOCH
    # Fetch v0-v8 carry no leader epoch: served whatever the epoch
    error, _, _ = fetch(b1, "fence", 0, version=8)
    assert error == NONE


# ---- idempotent producers -----------------------------------------------------------------------------------------

def idem_produce(broker, pid, epoch, seq, values):
    return produce(broker, IDEM, v2_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def test_idempotent_duplicates_are_answered_with_the_original_offsets(env):
    b = env.broker
    pid, epoch = init_producer_id(b)
    start = latest_offset(b, IDEM)
    p0 = idem_produce(b, pid, epoch, 0, [b"i0"])
    p1 = idem_produce(b, pid, epoch, 1, [b"i1", b"i2"])
    p3 = idem_produce(b, pid, epoch, 3, [b"i3"])
    assert [(p.error_code, p.base_offset) for p in (p0, p1, p3)] == [(NONE, start), (NONE, start + 1),
                                                                      (NONE, start + 3)]
    before = snapshot(b, IDEM)
    for seq, values, offset in ((3, [b"i3"], start + 3), (1, [b"i1", b"i2"], start + 1), (0, [b"i0"], start)):
        dup = idem_produce(b, pid, epoch, seq, values)
        assert (dup.error_code, dup.base_offset) == (NONE, offset), f"retry of sequence {seq}: {dup}"
    assert snapshot(b, IDEM) == before, "a duplicate was appended"
    nxt = idem_produce(b, pid, epoch, 4, [b"i4"])
    assert (nxt.error_code, nxt.base_offset) == (NONE, before.latest)
    # only the last 5 batches are remembered: after 5 more, a retry of sequence 0 is out of order
    for seq in range(5, 9):
        assert idem_produce(b, pid, epoch, seq, [b"i%d" % seq]).error_code == NONE
    before = snapshot(b, IDEM)
    old = idem_produce(b, pid, epoch, 0, [b"i0"])
    assert (old.error_code, old.base_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    dup = idem_produce(b, pid, epoch, 4, [b"i4"])        # the oldest of the 5 kept
    assert (dup.error_code, dup.base_offset) == (NONE, before.latest - 5)
    assert snapshot(b, IDEM) == before


def test_idempotent_sequence_gap(env):
    b = env.broker
    pid, epoch = init_producer_id(b)
    assert idem_produce(b, pid, epoch, 0, [b"g0"]).error_code == NONE
    before = snapshot(b, IDEM)
    p = idem_produce(b, pid, epoch, 5, [b"g5"])
    assert (p.error_code, p.base_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert snapshot(b, IDEM) == before
    p = idem_produce(b, pid, epoch, 1, [b"g1"])       # the producer state was not disturbed
    assert (p.error_code, p.base_offset) == (NONE, before.latest)


def test_idempotent_older_epoch_is_fenced(env):
    b = env.broker
    pid, _ = init_producer_id(b)
    assert idem_produce(b, pid, 0, 0, [b"e0"]).error_code == NONE
    assert idem_produce(b, pid, 1, 0, [b"e1"]).error_code == NONE     # a newer epoch starts at sequence 0
    before = snapshot(b, IDEM)
    p = idem_produce(b, pid, 0, 1, [b"stale"])
    assert (p.error_code, p.base_offset) == (INVALID_PRODUCER_EPOCH, -1)
    p = idem_produce(b, pid, 2, 3, [b"new-epoch-not-at-0"])
    assert (p.error_code, p.base_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert snapshot(b, IDEM) == before


def test_idempotent_unknown_producer_id(env):
    b = env.broker
    before = snapshot(b, IDEM)
    p = idem_produce(b, 987_654_321, 0, 3, [b"who"])
    assert (p.error_code, p.base_offset) == (UNKNOWN_PRODUCER_ID, -1)
    assert snapshot(b, IDEM) == before
    p = idem_produce(b, 987_654_321, 0, 0, [b"from-zero"])   # starting at 0 is how a producer is first seen
    assert (p.error_code, p.base_offset) == (NONE, before.latest)


def test_idempotent_batch_with_negative_sequence(env):
    b = env.broker
    pid, epoch = init_producer_id(b)
    before = snapshot(b, IDEM)
    p = idem_produce(b, pid, epoch, -1, [b"noseq"])
    assert (p.error_code, p.base_offset) == (INVALID_RECORD, -1)
    assert snapshot(b, IDEM) == before
