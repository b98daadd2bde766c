"""Test data for the log tests (record batches built by aiokafka, offsets patched in), and checks that the data
is what the log tests assume: whole entries, valid CRCs, the offsets and timestamps asked for."""
import struct
import zlib

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

from kbroker.records.entries import crc_valid, iter_entries

T0 = 1_700_000_000_000   # MockClock's default now


def v2_batch(base_offset: int, count: int = 1, timestamp: int = T0, value_size: int = 10, epoch: int = -1,
             timestamps=None) -> bytes:
    """A magic 2 batch of `count` records at base_offset; record i has timestamp timestamps[i] (default
    timestamp + i). The base offset and the partition leader epoch are outside the CRC."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=10 ** 7)
    for i in range(count):
        ts = timestamps[i] if timestamps is not None else timestamp + i
        builder.append(i, timestamp=ts, key=None, value=bytes([i % 251]) * value_size, headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, epoch)
    return bytes(data)


def legacy_messages(magic: int, first_offset: int, count: int, timestamp: int = T0) -> bytes:
    """Uncompressed v0/v1 messages with offsets first_offset.. (the builder writes the offsets given)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=10 ** 7)
    for i in range(count):
        builder.append(first_offset + i, timestamp=timestamp + i if magic else None, key=None, value=b"v%d" % i)
    return bytes(builder.build())


def legacy_compressed_v1(last_offset: int, count: int, timestamp: int = T0) -> bytes:
    """A gzip v1 wrapper of `count` messages (relative inner offsets), as the broker stores it: the wrapper's
    offset is the last inner offset and its timestamp the largest inner one (CRC recomputed)."""
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=10 ** 7)
    for i in range(count):
        builder.append(i, timestamp=timestamp + 10 * i, key=None, value=b"v%d" % i)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, last_offset)
    struct.pack_into(">q", data, 18, timestamp + 10 * (count - 1))
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    return bytes(data)


def append_batch(log, base_offset: int, count: int = 1, timestamp: int = T0, **kw) -> bytes:
    """Append one v2 batch to a Log, describing it as the validator would; returns its bytes."""
    data = v2_batch(base_offset, count, timestamp, **kw)
    stamps = kw.get("timestamps") or [timestamp + i for i in range(count)]
    max_ts = max(stamps)
    log.append(data, base_offset, base_offset + count - 1, max_ts, base_offset + stamps.index(max_ts), count)
    return data


def fill(log, batches: int, count: int = 3, timestamp: int = T0, **kw) -> list[bytes]:
    """Append batches at the log end offset; returns their bytes in order."""
    out = []
    for _ in range(batches):
        out.append(append_batch(log, log.log_end_offset, count, timestamp, **kw))
    return out


def test_v2_batch_is_one_valid_entry_with_patched_offset_and_epoch():
    data = v2_batch(1000, 5, epoch=7)
    [entry] = list(iter_entries(data, check_crc=True))
    assert (entry.magic, entry.base_offset, entry.last_offset, entry.record_count) == (2, 1000, 1004, 5)
    assert entry.max_timestamp == T0 + 4 and entry.size == len(data)
    assert struct.unpack_from(">i", data, 12)[0] == 7


def test_legacy_messages_are_valid_entries_with_their_offsets():
    for magic in (0, 1):
        data = legacy_messages(magic, 40, 3)
        entries = list(iter_entries(data))
        assert [e.last_offset for e in entries] == [40, 41, 42]
        assert all(e.magic == magic and crc_valid(data, e) for e in entries)
        assert entries[0].max_timestamp == (T0 if magic else -1)
    [wrapper] = list(iter_entries(legacy_compressed_v1(104, 5), check_crc=True))
    assert (wrapper.last_offset, wrapper.max_timestamp, wrapper.compression) == (104, T0 + 40, 1)
