"""Shared by the records tests (no tests here): client libraries as the producer that writes entries and the
consumer that reads them back, so our bytes are judged by code that is not ours.

kafka-python reads and writes magic 0 lz4 only with the `xxhash` package (for KAFKA-3160's broken frame
checksum); `old_lz4_clients` lends it a stand-in whose XXH32 is checked against lz4's own frames.
"""
from contextlib import contextmanager

import kafka.codec
from aiokafka.record._crecords import MemoryRecords as AioMemoryRecords
from kafka.record.memory_records import MemoryRecords as KafkaMemoryRecords
from kafka.record.memory_records import MemoryRecordsBuilder

from kbroker.records.compression import _xxh32_short, decompress
from kbroker.records.entries import iter_entries

NOW = 1_700_000_000_000


class _Digest:
    def __init__(self, data):
        self._h = _xxh32_short(bytes(data))

    def digest(self):
        return self._h.to_bytes(4, "big")


class _XXHashStandIn:
    xxh32 = _Digest


@contextmanager
def old_lz4_clients():
    saved = kafka.codec.xxhash
    kafka.codec.xxhash = _XXHashStandIn
    try:
        yield
    finally:
        kafka.codec.xxhash = saved


def sample(n=5, magic=2, headers=True, keys=True, start_ts=NOW, repeat=1):
    """(timestamp, key, value, headers) rows, as a producer would send them."""
    rows = []
    for i in range(n):
        key = b"key-%d" % i if keys else None
        value = None if i == 3 else b"value-%d " % i * (i + 1) * repeat
        hdrs = [("h%d" % i, b"x" * i), ("n", None)] if headers and magic == 2 and i % 2 else []
        rows.append((start_ts + i * 7, key, value, hdrs))
    return rows


def produce(magic, codec, rows, **producer_state):
    """kafka-python's producer-side builder: one entry (v2 batch or v0/v1 wrapper), or n messages."""
    builder = MemoryRecordsBuilder(magic, codec, batch_size=1 << 30, **producer_state)
    for ts, key, value, hdrs in rows:
        assert builder.append(ts, key, value, hdrs if magic == 2 else None) is not None
    with old_lz4_clients():
        builder.close()
    return bytearray(builder.buffer())


def consume(buf, lib="kafka"):
    """What a consumer library sees: (offset, timestamp, timestamp_type, key, value, headers) per record,
    after checking every entry's CRC. No timestamp (v0, or -1) reads as (None, None) from either library."""
    data = bytes(buf)
    out = []
    if lib == "kafka":
        records = KafkaMemoryRecords(data)
        with old_lz4_clients():
            while (batch := records.next_batch()) is not None:
                assert batch.validate_crc()
                out.extend(_row(r) for r in batch)
    else:
        records = AioMemoryRecords(data)
        while (batch := records.next_batch()) is not None:
            assert batch.validate_crc()
            out.extend(_row(r) for r in batch)
    return out


def _row(r):
    timestamp = None if r.timestamp in (None, -1) else r.timestamp
    return (r.offset, timestamp, None if timestamp is None else r.timestamp_type, r.key, r.value, list(r.headers))


def inner_offsets(buf):
    """The offsets stored inside each compressed v0/v1 wrapper of buf (v1: relative, v0: absolute)."""
    out = []
    for wrapper in iter_entries(buf):
        start = wrapper.position + (26 if wrapper.magic == 1 else 18)
        key_len = int.from_bytes(buf[start:start + 4], "big", signed=True)
        value_at = start + 4 + max(key_len, 0) + 4
        inner = decompress(wrapper.compression, buf[value_at:wrapper.position + wrapper.size], 1 << 30,
                           wrapper.magic)
        out.append([e.last_offset for e in iter_entries(inner, check_crc=True)])
    return out
