"""validate_and_assign: every magic x codec a producer may send, into every topic format and compression,
read back by real consumers; in-place patching; LogAppendTime; and every rejection with its Kafka code."""
import struct
import time

import pytest

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.records.batches import LOG_APPEND_TIME, set_legacy_crc, set_v2_crc
from kbroker.records.builder import build_legacy, build_v2, legacy_wrapper
from kbroker.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, codec_id, compress
from kbroker.records.entries import V2_HEADER, iter_entries
from kbroker.records.validator import (BatchInfo, RecordsConfig, RecordValidationError, magic_for_format_version,
                                       validate_and_assign)

from .test_records_support import NOW, consume, inner_offsets, produce, sample


def run(buf, *, produce_version=8, next_offset=100, now=NOW, epoch=7, **config):
    return validate_and_assign(buf, produce_version=produce_version, next_offset=next_offset, now_ms=now,
                               config=RecordsConfig(**config), partition_leader_epoch=epoch)


def rejected(buf, code, **kwargs):
    with pytest.raises(KafkaError) as e:
        run(buf, **kwargs)
    assert e.value.code == code, str(e.value)
    return e.value


def header(buf, pos=0):
    return dict(zip(("base_offset", "length", "epoch", "magic", "crc", "attributes", "last_delta", "first_ts",
                     "max_ts", "producer_id", "producer_epoch", "base_sequence", "count"),
                    V2_HEADER.unpack_from(buf, pos)))


def v2(rows=None, codec=NONE, **state):
    return produce(2, codec, sample() if rows is None else rows, **state)


def legacy_messages(magic, rows):
    """Uncompressed v0/v1 messages, one entry each, offsets 0..n-1 as producers write them."""
    return produce(magic, NONE, rows)


# round trips -------------------------------------------------------------------------------------------

SOURCES = [(0, c) for c in (NONE, GZIP, SNAPPY, LZ4)] + [(1, c) for c in (NONE, GZIP, SNAPPY, LZ4)] + \
          [(2, c) for c in (NONE, GZIP, SNAPPY, LZ4, ZSTD)]


@pytest.mark.parametrize("topic_codec", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("target_magic", [0, 1, 2])
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: f"v{s[0]}-codec{s[1]}")
def test_every_source_into_every_topic_format(source, target_magic, topic_codec):
    magic, codec = source
    rows = sample(magic=magic, headers=target_magic == 2)
    buf = produce(magic, codec, rows)
    target_codec = codec if topic_codec == "producer" else codec_id(topic_codec)
    kwargs = dict(produce_version=8 if magic == 2 else 2, magic=target_magic, compression_type=topic_codec)
    if target_codec == ZSTD and target_magic < 2:
        rejected(buf, Errors.UNSUPPORTED_COMPRESSION_TYPE, **kwargs)
        return
    info = run(buf, **kwargs)

    in_place = codec == target_codec and magic == target_magic and (target_magic > 0 or codec == NONE)
    assert info.rebuilt == (not in_place)
    assert (info.records is buf) == in_place
    assert (info.first_offset, info.last_offset, info.record_count) == (100, 104, 5)
    assert (info.source_magic, info.source_codec, info.target_codec) == (magic, codec, target_codec)
    entries = list(iter_entries(info.records, check_crc=True))
    assert {e.magic for e in entries} == {target_magic}
    assert {e.compression for e in entries} == {target_codec}
    assert [b.first_offset for b in info.batches] == ([100] if target_magic == 2 else [])
    if target_magic < 2 and target_codec != NONE:
        assert inner_offsets(info.records) == [[0, 1, 2, 3, 4] if target_magic == 1 else [100, 101, 102, 103, 104]]

    expected = []
    for i, (ts, key, value, hdrs) in enumerate(rows):
        timestamp = None if target_magic == 0 or magic == 0 else ts
        expected.append((100 + i, timestamp, None if timestamp is None else 0, key, value,
                         hdrs if magic == 2 else []))
    for lib in ("kafka", "aiokafka"):
        if lib == "aiokafka" and target_magic == 0 and target_codec == LZ4:
            continue   # aiokafka refuses magic 0 lz4 (KAFKA-3160)
        assert consume(info.records, lib) == expected
    if target_magic > 0:
        assert info.max_timestamp == (-1 if magic == 0 else rows[-1][0])


def test_max_timestamp_and_its_offset():
    rows = [(NOW + 50, b"a", b"1", []), (NOW + 90, b"b", b"2", []), (NOW + 10, b"c", b"3", [])]
    info = run(legacy_messages(1, rows), produce_version=2, magic=1)       # in place, per message
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW + 90, 101)
    info = run(legacy_messages(1, rows), produce_version=2, magic=2)       # into one batch: its last offset
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW + 90, 102)
    info = run(v2(rows), magic=1)                                          # into messages: the exact one
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW + 90, 101)
    info = run(legacy_messages(0, rows), produce_version=2, magic=0)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (-1, -1)


# in place ----------------------------------------------------------------------------------------------

def test_v2_in_place_touches_only_base_offset_and_epoch():
    buf = v2(sample(50))
    before = bytes(buf)
    info = run(buf, next_offset=1000, epoch=9)
    assert info.records is buf and not info.rebuilt
    assert buf[12 + 4:] != b"" and buf[16:] == before[16:]     # magic, CRC, attributes ... records: untouched
    assert buf[8:12] == before[8:12]                             # batchLength
    h = header(buf)
    assert (h["base_offset"], h["epoch"]) == (1000, 9)
    assert list(iter_entries(buf, check_crc=True))
    assert (info.first_offset, info.last_offset, info.record_count) == (1000, 1049, 50)
    assert info.batches == [BatchInfo(-1, -1, -1, -1, False, False, 1000, 1049)]
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (NOW + 49 * 7, 1049, -1)


def test_v2_compressed_in_place_keeps_the_payload():
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        buf = v2(codec=codec)
        before = bytes(buf)
        info = run(buf)
        assert info.records is buf and not info.rebuilt
        assert buf[61:] == before[61:] and buf[8:12] == before[8:12]
        assert header(buf)["base_offset"] == 100 and list(iter_entries(buf, check_crc=True))


def test_in_place_patches_a_writable_memoryview_and_copies_bytes():
    target = v2()
    view = memoryview(target)
    info = run(view)
    assert info.records is view and header(target)["base_offset"] == 100
    original = bytes(v2())
    info = run(original)
    assert isinstance(info.records, bytearray) and header(info.records)["base_offset"] == 100
    assert header(original)["base_offset"] == 0


def test_legacy_in_place_rewrites_each_offset():
    for magic in (0, 1):
        buf = legacy_messages(magic, sample(4, magic))
        before = bytes(buf)
        info = run(buf, produce_version=2, magic=magic)
        assert info.records is buf
        entries = list(iter_entries(buf, check_crc=True))
        assert [e.last_offset for e in entries] == [100, 101, 102, 103]
        for e in entries:   # only the offsets changed
            assert buf[e.position + 8:e.position + e.size] == before[e.position + 8:e.position + e.size]


def test_v1_compressed_in_place_sets_the_wrapper_only():
    buf = produce(1, GZIP, sample(5, 1))              # kafka-python writes wrapper offset 0, timestamp 0
    value_before = bytes(buf[34:])
    info = run(buf, produce_version=2, magic=1)
    assert info.records is buf and bytes(buf[34:]) == value_before
    (entry,) = iter_entries(buf, check_crc=True)
    assert entry.last_offset == 104 and entry.max_timestamp == NOW + 4 * 7


def test_v1_compressed_with_wrong_inner_offsets_is_rebuilt():
    inner = build_legacy(_records([(5 + i, NOW, b"k%d" % i, b"v", []) for i in range(3)]), magic=1, codec=NONE,
                         timestamp_type=0, log_append_time=0)
    buf = legacy_wrapper(7, 1, GZIP, NOW, compress(GZIP, inner))   # inner 5..7: absolute 5..7, not 0..2
    info = run(buf, produce_version=2, magic=1)
    assert info.rebuilt
    assert [r[0] for r in consume(info.records)] == [100, 101, 102]


# LogAppendTime -----------------------------------------------------------------------------------------

def test_log_append_time_v2_in_place():
    buf = v2(sample(20))
    before = bytes(buf)
    info = run(buf, now=NOW + 5, timestamp_type=LOG_APPEND_TIME)
    h = header(buf)
    assert h["attributes"] & 0x08 and h["max_ts"] == NOW + 5 and h["first_ts"] == NOW
    assert buf[61:] == before[61:]                     # records untouched, CRC recomputed
    assert list(iter_entries(buf, check_crc=True))
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (NOW + 5, 119, NOW + 5)
    assert {(r[1], r[2]) for r in consume(buf)} == {(NOW + 5, 1)}


@pytest.mark.parametrize("source", [(1, NONE), (1, GZIP), (0, NONE), (2, LZ4), (2, NONE)])
@pytest.mark.parametrize("target_magic", [1, 2])
def test_log_append_time_everywhere(source, target_magic):
    magic, codec = source
    buf = produce(magic, codec, sample(4, magic, headers=False))
    info = run(buf, produce_version=2, now=NOW + 99, magic=target_magic, timestamp_type=LOG_APPEND_TIME,
               max_timestamp_difference_ms=1)     # create times are not checked under LogAppendTime
    assert info.max_timestamp == info.log_append_time == NOW + 99
    for lib in ("kafka", "aiokafka"):
        assert {(r[1], r[2]) for r in consume(info.records, lib)} == {(NOW + 99, 1)}
    assert list(iter_entries(info.records, check_crc=True))


# producer state ----------------------------------------------------------------------------------------

def test_batch_info_for_idempotent_and_transactional_batches():
    info = run(v2(producer_id=42, producer_epoch=3, base_sequence=10))
    assert info.batches == [BatchInfo(42, 3, 10, 14, False, False, 100, 104)]
    info = run(v2(codec=GZIP, producer_id=42, producer_epoch=3, base_sequence=10, transactional=True),
               compression_type="lz4")
    assert info.rebuilt and info.batches == [BatchInfo(42, 3, 10, 14, True, False, 100, 104)]
    assert header(info.records)["attributes"] & 0x17 == 0x10 | LZ4
    info = run(v2(producer_id=1, producer_epoch=0, base_sequence=2 ** 31 - 2))
    assert info.batches[0].last_sequence == 2            # sequences wrap past Integer.MAX_VALUE


def test_coordinator_appends_control_batches_and_any_base_offset():
    buf = _control_batch(base_offset=50)
    rejected(bytearray(buf), Errors.INVALID_RECORD)      # a client may not
    info = run(buf, produce_version=None)
    assert info.records is buf and header(buf)["base_offset"] == 100
    assert info.batches == [BatchInfo(9, 1, -1, -1, True, True, 100, 100)]
    buf = _control_batch(base_offset=0)
    info = run(buf, produce_version=None, compression_type="gzip")   # not compressed when written plain
    assert info.records is buf and header(buf)["attributes"] == 0x30


# rejections ----------------------------------------------------------------------------------------------

def test_bad_crc_in_every_magic():
    for buf, version in ((v2(), 8), (produce(1, NONE, sample(1, 1)), 2), (produce(0, GZIP, sample(2, 0)), 2)):
        buf[-1] ^= 0x01
        rejected(buf, Errors.CORRUPT_MESSAGE, produce_version=version)


def test_wrong_magic():
    buf = v2()
    buf[16] = 3
    rejected(buf, Errors.CORRUPT_MESSAGE)


def test_length_fields_that_disagree():
    buf = v2()
    struct.pack_into(">i", buf, 8, 40)                   # shorter than a v2 header
    rejected(buf, Errors.CORRUPT_MESSAGE)
    buf = v2()
    struct.pack_into(">i", buf, 8, len(buf))              # longer than the data: no whole batch at all
    rejected(bytearray(buf), Errors.INVALID_RECORD)        # Produce v3+ (Kafka's validateRecords)
    rejected(bytearray(buf), Errors.CORRUPT_MESSAGE, produce_version=2)
    buf = legacy_messages(1, sample(1, 1))
    struct.pack_into(">i", buf, 26, 1000)                 # key length past the end of the message
    set_legacy_crc(buf, 0, len(buf))
    rejected(buf, Errors.CORRUPT_MESSAGE, produce_version=2, magic=1)


def test_malformed_records_are_found_where_records_are_read():
    buf = v2(sample(3, keys=True))
    buf[61] += 2                                          # first record's length varint no longer matches
    set_v2_crc(buf, 0, len(buf))
    rejected(bytearray(buf), Errors.INVALID_RECORD, compacted=True)
    rejected(bytearray(buf), Errors.INVALID_RECORD, compression_type="gzip")
    rejected(bytearray(buf), Errors.INVALID_RECORD)       # the plain in-place path walks the records too


def test_truncated_batch():
    rejected(v2()[:-3], Errors.INVALID_RECORD)            # Produce v3+: no whole batch (Kafka's validateRecords)
    rejected(v2()[:-3], Errors.CORRUPT_MESSAGE, produce_version=2)
    rejected(v2() + v2()[:20], Errors.CORRUPT_MESSAGE, produce_version=2)


def test_corrupt_compressed_payload():
    buf = v2(sample(20), codec=GZIP)
    buf[70:90] = bytes(20)
    set_v2_crc(buf, 0, len(buf))
    rejected(buf, Errors.CORRUPT_MESSAGE)
    buf = produce(1, SNAPPY, sample(5, 1))
    buf[-10:] = b"\xff" * 10
    set_legacy_crc(buf, 0, len(buf))
    rejected(buf, Errors.CORRUPT_MESSAGE, produce_version=2, magic=1)


def test_decompression_bomb():
    buf = v2([(NOW, b"k", bytes(20 * 1024 * 1024), [])], codec=GZIP)
    assert len(buf) < 100_000
    e = rejected(buf, Errors.CORRUPT_MESSAGE, decompression_limit=1024 * 1024)
    assert "limit" in str(e)


def test_record_count_bomb():
    for codec in (NONE, GZIP):
        buf = v2(sample(3), codec=codec)
        struct.pack_into(">i", buf, 23, 10 ** 9 - 1)      # lastOffsetDelta consistent with ...
        struct.pack_into(">i", buf, 57, 10 ** 9)          # ... a billion records in a few bytes
        set_v2_crc(buf, 0, len(buf))
        rejected(buf, Errors.INVALID_RECORD)


def test_last_offset_delta_inconsistent_with_count():
    buf = v2()
    struct.pack_into(">i", buf, 23, 10)
    set_v2_crc(buf, 0, len(buf))
    rejected(buf, Errors.INVALID_RECORD)
    buf = v2()
    struct.pack_into(">i", buf, 57, 0)
    struct.pack_into(">i", buf, 23, -1)
    set_v2_crc(buf, 0, len(buf))
    rejected(buf, Errors.INVALID_RECORD)


def test_base_offset_must_be_zero_from_clients():
    buf = v2()
    struct.pack_into(">q", buf, 0, 5)
    rejected(buf, Errors.INVALID_RECORD)


def test_oversized_entry():
    buf = v2(sample(20))
    rejected(bytearray(buf), Errors.MESSAGE_TOO_LARGE, max_message_bytes=len(buf) - 1)
    assert run(buf, max_message_bytes=len(buf)).record_count == 20
    messages = legacy_messages(1, [(NOW, b"k%d" % i, b"v" * 20, []) for i in range(20)])
    assert max(e.size for e in iter_entries(messages)) < 100   # each fits, the v2 batch they become does not
    e = rejected(messages, Errors.MESSAGE_TOO_LARGE, produce_version=2, max_message_bytes=100)
    assert "Message batch size is" in str(e)


def test_zstd_needs_produce_v7():
    for version in (3, 4, 5, 6):
        rejected(v2(codec=ZSTD), Errors.UNSUPPORTED_COMPRESSION_TYPE, produce_version=version)
    assert run(v2(codec=ZSTD), produce_version=7).record_count == 5


def test_zstd_is_no_codec_for_v0_v1():
    inner = produce(1, NONE, sample(2, 1))
    buf = legacy_wrapper(1, 1, ZSTD, NOW, compress(ZSTD, inner))
    rejected(buf, Errors.INVALID_RECORD, produce_version=2, magic=2)
    rejected(v2(sample(2, headers=False)), Errors.UNSUPPORTED_COMPRESSION_TYPE, magic=1, compression_type="zstd")


def test_produce_v3_and_later_take_exactly_one_v2_batch():
    e = rejected(v2() + v2(), Errors.INVALID_RECORD, produce_version=3)
    assert "exactly one record batch" in str(e)
    rejected(legacy_messages(1, sample(1, 1)), Errors.INVALID_RECORD, produce_version=3)
    rejected(bytearray(), Errors.INVALID_RECORD, produce_version=3)
    rejected(v2() + v2(), Errors.INVALID_RECORD, produce_version=2)   # one v2 batch per append, any version
    info = run(bytearray(), produce_version=2)
    assert (info.record_count, info.first_offset, len(info.records)) == (0, -1, 0)


def test_magics_cannot_be_mixed():
    buf = legacy_messages(1, sample(1, 1)) + legacy_messages(0, sample(1, 0))
    rejected(buf, Errors.INVALID_RECORD, produce_version=2, magic=1)


def test_missing_key_on_compacted_topic():
    rows = sample(5)
    rows[2] = (rows[2][0], None, rows[2][2], rows[2][3])
    for codec in (NONE, GZIP):
        e = rejected(v2(rows, codec), Errors.INVALID_RECORD, compacted=True)
        assert isinstance(e, RecordValidationError) and [i for i, _ in e.record_errors] == [2]
    e = rejected(produce(1, GZIP, [r[:3] + ([],) for r in rows]), Errors.INVALID_RECORD, produce_version=2,
                 magic=1, compacted=True)
    assert [i for i, _ in e.record_errors] == [2]
    e = rejected(legacy_messages(1, [r[:3] + ([],) for r in rows]), Errors.INVALID_RECORD, produce_version=2,
                 magic=1, compacted=True)
    assert [i for i, _ in e.record_errors] == [0]         # v0/v1 messages are batches of one
    assert run(v2(), compacted=True).record_count == 5
    assert run(v2(sample(5, keys=False))).record_count == 5   # keys are optional elsewhere


def test_timestamp_out_of_range():
    late = [(NOW, b"a", b"1", []), (NOW + 500, b"b", b"2", []), (NOW + 5000, b"c", b"3", [])]
    for codec in (NONE, GZIP):
        e = rejected(v2(late, codec), Errors.INVALID_TIMESTAMP, max_timestamp_difference_ms=1000)
        assert [i for i, _ in e.record_errors] == [2]     # named exactly, though only the header was checked
        early = [(NOW, b"a", b"1", []), (NOW + 1500, b"b", b"2", []), (NOW + 1800, b"c", b"3", [])]
        e = rejected(v2(early, codec), Errors.INVALID_TIMESTAMP, now=NOW + 2500, max_timestamp_difference_ms=1000)
        assert [i for i, _ in e.record_errors] == [0]
    rejected(legacy_messages(1, late), Errors.INVALID_TIMESTAMP, produce_version=2, magic=1,
             max_timestamp_difference_ms=1000)
    rejected(legacy_messages(1, late), Errors.INVALID_TIMESTAMP, produce_version=2, magic=2,
             max_timestamp_difference_ms=1000)
    assert run(v2(late), max_timestamp_difference_ms=5000).record_count == 3
    no_timestamps = [(-1, b"a", b"1", [])]
    assert run(v2(no_timestamps), now=NOW, max_timestamp_difference_ms=0).record_count == 1


def test_producer_may_not_set_log_append_time():
    buf = v2()
    struct.pack_into(">h", buf, 21, 0x08)
    set_v2_crc(buf, 0, len(buf))
    rejected(bytearray(buf), Errors.INVALID_TIMESTAMP)
    rejected(bytearray(buf), Errors.INVALID_TIMESTAMP, timestamp_type=LOG_APPEND_TIME)
    msg = legacy_messages(1, sample(1, 1))
    msg[17] |= 0x08
    set_legacy_crc(msg, 0, len(msg))
    rejected(msg, Errors.INVALID_TIMESTAMP, produce_version=2, magic=1)


def test_negative_timestamp_cannot_be_rebuilt():
    rejected(v2([(-5, b"k", b"v", [])]), Errors.INVALID_TIMESTAMP, compression_type="gzip")


def test_old_topic_format_refuses_what_it_cannot_hold():
    e = rejected(v2(sample(3)), Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, magic=1)
    assert "headers" in str(e)
    rows = sample(3, headers=False)
    rejected(v2(rows, producer_id=5, producer_epoch=0, base_sequence=0), Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
             magic=1)
    rejected(v2(rows, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True),
             Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, magic=0)


def test_idempotent_batch_needs_a_sequence():
    buf = v2()
    struct.pack_into(">qhi", buf, 43, 5, 0, -1)
    set_v2_crc(buf, 0, len(buf))
    rejected(buf, Errors.INVALID_RECORD)


def test_inner_messages_must_be_plain_and_of_the_wrapper_magic():
    nested = produce(1, GZIP, sample(2, 1))
    e = rejected(legacy_wrapper(0, 1, GZIP, NOW, compress(GZIP, nested)), Errors.INVALID_RECORD,
                 produce_version=2, magic=1)
    assert e.record_errors == [(0, "Compressed outer record should not have an inner record with a compression "
                                   "attribute set")]
    v0_inside_v1 = produce(0, NONE, sample(2, 0))
    e = rejected(legacy_wrapper(0, 1, GZIP, NOW, compress(GZIP, v0_inside_v1)), Errors.INVALID_RECORD,
                 produce_version=2, magic=1)
    assert [i for i, _ in e.record_errors] == [0, 1] and "magic 0" in e.record_errors[0][1]
    null_value = legacy_wrapper(0, 1, GZIP, NOW, b"")
    struct.pack_into(">i", null_value, 30, -1)
    set_legacy_crc(null_value, 0, len(null_value))
    rejected(null_value, Errors.INVALID_RECORD, produce_version=2, magic=1)


def test_format_versions_and_topic_config():
    versions = {"0.8.2": 0, "0.9.0": 0, "0.10.0-IV1": 1, "0.10.2": 1, "0.11.0": 2, "1.0": 2, "2.8-IV1": 2,
                "2.8.1": 2}
    assert {v: magic_for_format_version(v) for v in versions} == versions
    with pytest.raises(ValueError):
        magic_for_format_version("banana")
    config = RecordsConfig.from_topic_config({
        "message.format.version": "0.10.2", "message.timestamp.type": "LogAppendTime",
        "message.timestamp.difference.max.ms": "1000", "compression.type": "lz4", "max.message.bytes": "2000",
        "cleanup.policy": "compact,delete"})
    assert config == RecordsConfig(magic=1, timestamp_type=LOG_APPEND_TIME, max_timestamp_difference_ms=1000,
                                   compression_type="lz4", max_message_bytes=2000, compacted=True)
    assert RecordsConfig.from_topic_config({"cleanup.policy": ["delete"]}) == RecordsConfig()
    assert RecordsConfig(compression_type="uncompressed").target_codec(GZIP) == NONE
    assert RecordsConfig().target_codec(SNAPPY) == SNAPPY


def test_hot_path_cost(capsys):
    buf = v2([(NOW + i, b"key-%d" % i, b"value-%d" % i * 8, []) for i in range(1000)])
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        struct.pack_into(">q", buf, 0, 0)
        run(buf)
    per_call = (time.perf_counter() - start) / n
    with capsys.disabled():
        print(f"\nvalidate_and_assign, uncompressed v2 batch of 1000 records ({len(buf)} bytes): "
              f"{per_call * 1e6:.1f} µs")
    assert per_call < 0.002   # a regression to per-record work would cost milliseconds


# helpers ---------------------------------------------------------------------------------------------

class _Rec:
    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(self, offset, timestamp, key, value, headers):
        self.offset, self.timestamp, self.key, self.value, self.headers = offset, timestamp, key, value, headers


def _records(rows):
    return [_Rec(*row) for row in rows]


def _control_batch(base_offset):
    buf = build_v2(_records([(0, NOW, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])]), codec=NONE,
                   timestamp_type=0, log_append_time=0, producer_id=9, producer_epoch=1, transactional=True)
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">h", buf, 21, 0x30)
    set_v2_crc(buf, 0, len(buf))
    return buf
