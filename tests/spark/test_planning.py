"""Pure functions of the Spark data source: option checks, range splitting, the streaming rate limit, the arrow
schema Spark expects, record bytes to arrow (v2 with headers and compression, v0/v1 messages), and the
batches a read_committed reader drops."""
from __future__ import annotations

import struct

import crc32c
import pytest
from aiokafka.record._crecords import DefaultRecordBatchBuilder, LegacyRecordBatchBuilder
from pyspark.sql.pandas.types import to_arrow_schema

from kbroker.spark.arrow import (ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS, SCHEMA, SCHEMA_WITH_HEADERS, Columns,
                                 CorruptRecords, aborted_batches)
from kbroker.spark.client import TopicPartition
from kbroker.spark.options import OptionError, sink_options, source_options
from kbroker.spark.reader import OffsetRange, split_ranges
from kbroker.spark.stream import rate_limit

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}


def test_arrow_schemas_are_what_spark_derives_from_the_spark_schemas():
    assert to_arrow_schema(SCHEMA, timezone="UTC") == ARROW_SCHEMA
    assert to_arrow_schema(SCHEMA_WITH_HEADERS, timezone="UTC") == ARROW_SCHEMA_WITH_HEADERS


@pytest.mark.parametrize("options, streaming, message", [
    ({"subscribe": "t"}, False, "Option 'kafka.bootstrap.servers' must be specified"),
    ({**BOOT}, False, "One of the following options must be specified"),
    ({**BOOT, "subscribe": "t", "assign": '{"t":[0]}'}, False, "Only one of the following options"),
    ({**BOOT, "subscribe": " , "}, False, "No topics to subscribe to"),
    ({**BOOT, "assign": "{}"}, False, "No topicpartitions to assign"),
    ({**BOOT, "subscribe": "t", "startingOffsets": "latest"}, False, "starting offset can't be latest"),
    ({**BOOT, "subscribe": "t", "endingOffsets": "earliest"}, False, "ending offset can't be earliest"),
    ({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "startingOffsets for t-0 can't be latest"),
    ({**BOOT, "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, "endingOffsets for t-0 can't be earliest"),
    ({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, True, "Ending offset not valid in streaming queries"),
    ({**BOOT, "subscribe": "t", "minPartitions": "0"}, False, "must be a positive integer"),
    ({**BOOT, "subscribe": "t", "kafka.metadata.max.age.ms": "soon"}, True, "must be a positive integer"),
    ({**BOOT, "subscribe": "t", "startingOffsets": "{bad"}, False, "is not valid JSON"),
    ({**BOOT, "subscribe": "t", "kafka.group.id": "g", "kafka.enable.auto.commit": "true"}, False,
     "'enable.auto.commit' is not supported"),
])
def test_bad_source_options_are_refused_with_sparks_reason(options, streaming, message):
    with pytest.raises(OptionError, match=message):
        source_options(options, streaming)


def test_source_options_defaults_and_precedence():
    o = source_options({**BOOT, "SUBSCRIBE": "a, b", "startingOffsets": '{"a":{"0":5}}', "startingTimestamp": "1000"},
                       streaming=False)
    assert o.subscription.topics == ("a", "b")
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 1000)        # the timestamp wins
    assert (o.ending.kind, o.fail_on_data_loss, o.include_headers) == ("latest", True, False)
    assert source_options({**BOOT, "subscribe": "a"}, streaming=True).starting.kind == "latest"
    o = source_options({**BOOT, "subscribe": "a"}, streaming=False)
    assert (o.client_rack, o.metadata_max_age) == ("", 300.0)                   # Kafka's defaults: no rack, 5 min
    o = source_options({**BOOT, "subscribe": "a", "kafka.client.rack": "r2", "kafka.metadata.max.age.ms": "1500"},
                       streaming=True)
    assert (o.client_rack, o.metadata_max_age) == ("r2", 1.5)
    o = source_options({**BOOT, "assign": '{"a":[1,0]}', "endingOffsetsByTimestamp": '{"a":{"0":7,"1":8}}'}, False)
    assert o.subscription.partitions == (TopicPartition("a", 0), TopicPartition("a", 1))
    assert o.ending.offsets == ((TopicPartition("a", 0), 7), (TopicPartition("a", 1), 8))
    assert sink_options({**BOOT}).acks == -1 and sink_options({**BOOT}).idempotent
    with pytest.raises(OptionError, match="needs acks=all"):
        sink_options({**BOOT, "kafka.acks": "1", "kafka.enable.idempotence": "true"})


def test_min_partitions_splits_in_proportion_to_size():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 50, 60), OffsetRange("t", 2, 7, 7)]
    assert split_ranges(ranges, None) == ranges[:2]                     # empty ranges are dropped
    split = split_ranges(ranges, 5)
    assert [r for r in split if r.partition == 1] == [ranges[1]]        # small ranges stay whole
    big = [r for r in split if r.partition == 0]
    assert len(big) == 4 and big[0].start == 0 and big[-1].end == 1000
    assert all(a.end == b.start for a, b in zip(big, big[1:])) and {r.size for r in big} == {250}


def test_rate_limit_shares_the_cap_by_backlog():
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    start = {a: 0, b: 100, c: 5}
    latest = {a: 300, b: 200, c: 5}
    assert rate_limit(start, latest, 1000) == latest
    assert rate_limit(start, latest, 40) == {a: 30, b: 110, c: 5}
    assert rate_limit(start, latest, 1) == {a: 1, b: 101, c: 5}        # every backlog moves by at least one


def test_columns_from_v2_batches_with_headers_and_compression():
    batches = b""
    for base, codec in ((0, 0), (3, 4)):                                 # none, zstd
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(3):
            b.append(i, timestamp=1000 + base + i, key=None if i == 1 else b"k%d" % (base + i),
                     value=b"v%d" % (base + i), headers=[("h", b"x"), ("n", None)] if i == 2 else [])
        raw = bytearray(b.build())
        raw[0:8] = base.to_bytes(8, "big")                                # the broker's base offset
        batches += bytes(raw)
    cols = Columns(include_headers=True)
    assert cols.add(batches + batches[:20]) == 6                         # a trailing partial batch is left
    rb = cols.to_arrow("topic", 4, 1, 5)
    assert rb.schema == ARROW_SCHEMA_WITH_HEADERS
    got = rb.to_pydict()
    assert got.pop("timestamp") == rb.column("timestamp").to_pylist()
    assert got == {
        "key": [None, b"k2", b"k3", None], "value": [b"v1", b"v2", b"v3", b"v4"], "topic": ["topic"] * 4,
        "partition": [4] * 4, "offset": [1, 2, 3, 4], "timestampType": [0] * 4,
        "headers": [[], [{"key": "h", "value": b"x"}, {"key": "n", "value": None}], [], []]}
    assert rb.column("timestamp").cast("int64").to_pylist() == [1001_000, 1002_000, 1003_000, 1004_000]
    corrupt = bytearray(batches)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecords, match="offset 3 is corrupt"):
        Columns(include_headers=False).add(bytes(corrupt))


def test_columns_of_a_compacted_batch_keep_its_offsets():
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for offset in (0, 2, 5):                                             # records 1, 3, 4 cleaned away
        b.append(offset, timestamp=1000, key=b"k", value=b"v%d" % offset, headers=[])
    cols = Columns(include_headers=False)
    assert cols.add(bytes(b.build())) == 6
    rb = cols.to_arrow("t", 0, 1, 6)
    assert rb.column("offset").to_pylist() == [2, 5] and rb.column("value").to_pylist() == [b"v2", b"v5"]


def test_columns_from_legacy_messages():
    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(2):
        b.append(i, timestamp=5000 + i, key=None, value=b"m%d" % i)
    v1 = bytes(b.build())
    b = LegacyRecordBatchBuilder(magic=0, compression_type=0, batch_size=1 << 20)
    b.append(2, timestamp=None, key=b"k", value=b"old")
    cols = Columns(include_headers=False)
    assert cols.add(v1 + bytes(b.build())) == 3
    rb = cols.to_arrow("t", 0, 0, 10)
    assert rb.schema == ARROW_SCHEMA
    assert rb.column("value").to_pylist() == [b"m0", b"m1", b"old"]
    assert rb.column("timestampType").to_pylist() == [0, 0, -1]
    assert rb.column("timestamp").cast("int64").to_pylist() == [5_000_000, 5_001_000, -1000]


def _batch(base: int, pid: int, values=(b"v",), transactional: bool = True, marker: int | None = None) -> bytes:
    """A v2 batch at `base`; with `marker` (0 ABORT, 1 COMMIT) a control batch holding that marker."""
    b = DefaultRecordBatchBuilder(2, 0, int(transactional), pid, 0, 0, 10 ** 6)
    if marker is None:
        for i, v in enumerate(values):
            b.append(i, timestamp=1, key=None, value=v, headers=[])
    else:
        b.append(0, timestamp=1, key=struct.pack(">hh", 0, marker), value=struct.pack(">hi", 0, 0), headers=[])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base)
    if marker is not None:
        struct.pack_into(">h", data, 21, 0x30)
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_aborted_batches_follow_kafkas_consumer():
    """Producer 1 aborts [2, 5] while producer 2 commits around it; producer 1's idempotent (non-transactional)
    batch is never dropped; after its ABORT marker, producer 1's next transaction is visible again."""
    records = b"".join([
        _batch(0, 1, (b"c1", b"c2")),           # 0-1 before producer 1's aborted transaction starts
        _batch(2, 1),                           # 2 aborted
        _batch(3, 2),                           # 3 producer 2
        _batch(4, 1, transactional=False),      # 4 not transactional: kept
        _batch(5, 2, marker=1),                 # 5 COMMIT of producer 2
        _batch(6, 1, marker=0),                 # 6 ABORT of producer 1: ends it
        _batch(7, 1),                           # 7 producer 1's next transaction
    ])
    assert aborted_batches(records, [(1, 2)]) == {2}
    assert aborted_batches(records, [(1, 2), (2, 3)]) == {2, 3}
    assert aborted_batches(records[len(_batch(0, 1, (b"c1", b"c2"))):], [(1, 2)]) == {2}  # a fetch from offset 2
    columns = Columns(False)
    columns.add(records, skip=aborted_batches(records, [(1, 2)]))
    assert columns.offsets == [0, 1, 3, 4, 7]           # markers and the aborted batch dropped
