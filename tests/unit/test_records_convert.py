"""down_convert: v2 logs (and v1 logs) as v1/v0 consumers receive them, read back by real consumer libraries;
what is dropped, what is kept, and the byte budget. Every conversion is also served again from the conversion
cache and must come out byte for byte the same, converting nothing and reading nothing; then the cache itself:
file ids, the read's end and the memory bound."""
import os
import struct
import time
from typing import NamedTuple

import pytest

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.records.batches import LOG_APPEND_TIME, set_v2_crc
from kbroker.records.builder import build_v2, rebuild_v2
from kbroker.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kbroker.records.convert import (PAUSE_BYTES, READ_BYTES, CachedSlice, ConversionCache, down_convert,
                                     magic_for_fetch_version)
from kbroker.records.entries import iter_entries
from kbroker.records.validator import RecordsConfig, validate_and_assign

from .test_records_support import NOW, consume, inner_offsets, produce, sample


def log_of(*batches, magic=2, timestamp_type=0):
    """Producer entries appended one after another as a log holds them (offsets from 0)."""
    log = bytearray()
    next_offset = 0
    for buf in batches:
        version = None if buf[16] == 2 and struct.unpack_from(">h", buf, 21)[0] & 0x20 else 2
        info = validate_and_assign(buf, produce_version=version, next_offset=next_offset, now_ms=NOW,
                                   config=RecordsConfig(magic=magic, timestamp_type=timestamp_type),
                                   partition_leader_epoch=0)
        log += info.records
        next_offset = info.last_offset + 1
    return log


def joined(pieces) -> bytes:
    """The bytes a response sends for these pieces (cache slices are read from their in-memory files)."""
    return b"".join(os.pread(p.fd, p.length, p.position) if isinstance(p, CachedSlice) else bytes(p)
                    for p in pieces)


class File:
    """A log file in memory: read(position, length) as the broker's, counting the bytes read."""

    def __init__(self, data):
        self.data, self.bytes_read = bytes(data), 0

    def read(self, position, length):
        self.bytes_read += length
        return self.data[position:position + length]


def convert(source, to_magic, fetch_offset=0, max_bytes=1 << 30, start=0, end=None, cache=None, file_id=1):
    """(bytes, records converted) of one down_convert of the file's bytes [start, end)."""
    file = source if isinstance(source, File) else File(source)
    pieces, records, _ = down_convert(file.read, file_id, start, len(file.data) if end is None else end, to_magic,
                                   fetch_offset=fetch_offset, max_bytes=max_bytes,
                                   cache=ConversionCache(1 << 30) if cache is None else cache)
    return joined(pieces), records


def converted(source, to_magic, fetch_offset=0, max_bytes=1 << 30):
    """A fresh conversion, checked against the same read served from the cache it filled."""
    cache = ConversionCache(1 << 30)
    fresh, _ = convert(source, to_magic, fetch_offset, max_bytes, cache=cache)
    file = File(source)
    again, records = convert(file, to_magic, fetch_offset, max_bytes, cache=cache)
    assert again == fresh
    if records == 0 and cache:      # nothing converted again, and (but for entries passed through) nothing read
        entries = list(iter_entries(source))
        passed_through = {e.magic for e in entries} & set(range(to_magic + 1))
        tail = len(source) - (entries[-1].position + entries[-1].size)
        assert file.bytes_read <= tail or passed_through        # only a partial tail's size read, to see it is one
    return fresh


def expected_rows(rows, first_offset, to_magic, timestamp_type=0):
    return [(first_offset + i, None if to_magic == 0 else ts, None if to_magic == 0 else timestamp_type, key,
             value, []) for i, (ts, key, value, _) in enumerate(rows)]


def test_magic_for_fetch_version():
    assert [magic_for_fetch_version(v) for v in range(13)] == [0, 0, 1, 1] + [2] * 9


@pytest.mark.parametrize("to_magic", [0, 1])
@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4])
def test_v2_log_to_old_consumers(codec, to_magic):
    first, second = sample(5, repeat=5), sample(3, start_ts=NOW + 100, repeat=5)
    log = log_of(produce(2, codec, first), produce(2, codec, second))
    assert {e.compression for e in iter_entries(log)} == {codec}
    out = converted(log, to_magic)
    entries = list(iter_entries(out, check_crc=True))
    assert {e.magic for e in entries} == {to_magic} and {e.compression for e in entries} == {codec}
    assert len(entries) == (2 if codec != NONE else 8)
    expected = expected_rows(first, 0, to_magic) + expected_rows(second, 5, to_magic)
    for lib in ("kafka", "aiokafka"):
        if not (lib == "aiokafka" and to_magic == 0 and codec == LZ4):   # aiokafka refuses magic 0 lz4
            assert consume(out, lib) == expected
    if codec != NONE:
        assert [e.last_offset for e in entries] == [4, 7]     # wrapper offset = last offset
        assert inner_offsets(out) == ([[0, 1, 2, 3, 4], [0, 1, 2]] if to_magic == 1 else [[0, 1, 2, 3, 4], [5, 6, 7]])


@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_log_append_time_survives_into_v1(codec):
    log = log_of(produce(2, codec, sample(4, headers=False)), timestamp_type=LOG_APPEND_TIME)
    assert {(r[1], r[2]) for r in consume(converted(log, 1))} == {(NOW, 1)}
    assert {(r[1], r[2]) for r in consume(converted(log, 0))} == {(None, None)}


def test_v1_log_to_v0_and_through_to_v1():
    rows = sample(4, 1)
    log = log_of(produce(1, GZIP, rows), produce(1, NONE, rows), produce(1, LZ4, rows), magic=1)
    assert converted(log, 1) == bytes(log) == converted(log, 2)      # nothing to convert
    out = converted(log, 0)
    assert {e.magic for e in iter_entries(out, check_crc=True)} == {0}
    assert consume(out) == expected_rows(rows, 0, 0) + expected_rows(rows, 4, 0) + expected_rows(rows, 8, 0)


def test_control_batches_are_dropped():
    log = log_of(produce(2, NONE, sample(2)), _control_batch(), produce(2, GZIP, sample(2)))
    assert [r[0] for r in consume(converted(log, 1))] == [0, 1, 3, 4]
    assert converted(log, 2) == bytes(log)


def test_zstd_cannot_be_converted():
    zstd_log = log_of(produce(2, ZSTD, sample(2)))
    with pytest.raises(KafkaError) as e:
        converted(zstd_log, 1)
    assert e.value.code == Errors.UNSUPPORTED_COMPRESSION_TYPE
    log = log_of(produce(2, GZIP, sample(2)), produce(2, ZSTD, sample(2)), produce(2, GZIP, sample(2)))
    assert [r[0] for r in consume(converted(log, 1))] == [0, 1]    # stops where the client will get the error


def test_records_before_the_fetch_offset():
    log = log_of(produce(2, NONE, sample(5)), produce(2, GZIP, sample(5)))
    assert [r[0] for r in consume(converted(log, 1, fetch_offset=3))] == [3, 4, 5, 6, 7, 8, 9]
    assert [r[0] for r in consume(converted(log, 1, fetch_offset=7))] == [3, 4, 5, 6, 7, 8, 9][2:]


def test_byte_budget_keeps_whole_entries_and_always_the_first():
    batches = [produce(2, codec, sample(5, start_ts=NOW + i)) for i, codec in enumerate([GZIP, NONE, GZIP, NONE])]
    log = log_of(*batches)
    everything = converted(log, 1)
    first_size = next(iter_entries(everything)).size
    assert converted(log, 1, max_bytes=10) == everything[:first_size]       # first entry whole, over budget
    for budget in (first_size + 1, len(everything) // 2, len(everything) - 1):
        out = converted(log, 1, max_bytes=budget)
        assert len(out) <= budget and everything.startswith(out)
        assert sum(e.size for e in iter_entries(out)) == len(out)           # no partial entry
        offsets = [r[0] for r in consume(out)]
        assert offsets == list(range(len(offsets)))
    uncompressed = converted(log_of(produce(2, NONE, sample(5))), 1, max_bytes=10)
    assert [r[0] for r in consume(uncompressed)] == [0, 1, 2, 3, 4]          # a converted batch counts as one


def test_compacted_batch_tail_does_not_hold_old_consumers():
    """A compressed v2 batch whose last records the cleaner removed (offsets 0-9, records 0-5 kept) and the next:
    from offset 6 an old consumer gets the next batch (a wrapper ending at 5 would be fetched forever)."""
    class R(NamedTuple):
        offset: int
        timestamp: int
        key: bytes
        value: bytes
        headers: list

    kept = [R(i, NOW + i, b"k%d" % i, b"v%d" % i, []) for i in range(6)]
    cleaned = rebuild_v2(kept, 0, 9, 0, GZIP, NOW + 9, -1, -1, -1)
    after = build_v2([R(i, NOW + i, b"k%d" % i, b"v%d" % i, []) for i in range(10, 15)], codec=GZIP,
                     timestamp_type=0, log_append_time=-1)
    log = bytes(cleaned) + bytes(after)
    for to_magic in (0, 1):
        assert [r[0] for r in consume(converted(log, to_magic, fetch_offset=3))] == [0, 1, 2, 3, 4, 5, 10, 11, 12,
                                                                                     13, 14]
        assert [r[0] for r in consume(converted(log, to_magic, fetch_offset=6))] == [10, 11, 12, 13, 14]


def test_partial_tail_and_start_inside_the_file():
    log = log_of(*[produce(2, codec, sample(5)) for codec in (NONE, GZIP, SNAPPY, NONE)])
    whole = converted(log, 1)
    assert converted(log + log[:30], 1) == whole                             # a partial tail is ignored
    second = next(e for e in iter_entries(log) if e.position > 0).position
    out, _ = convert(log, 1, fetch_offset=5, start=second)
    assert [r[0] for r in consume(out)] == list(range(5, 20))


def test_lazy_conversion_stops_at_the_budget():
    log = log_of(*[produce(2, NONE, sample(20, headers=False)) for _ in range(20)])
    size = len(converted(log_of(produce(2, NONE, sample(20, headers=False))), 1))
    out, records = convert(log, 1, max_bytes=2 * size + 10)
    assert len(out) == 2 * size and records == 60        # the third batch converted, none of it fits


def test_cache_keys_on_file_id_position_and_magic():
    """A file whose bytes changed gets a new id (log.segment does it on truncation): its old entries are never
    served; another magic or a read ending before a cached entry does not use it either."""
    first = log_of(produce(2, NONE, sample(5)), produce(2, NONE, sample(5)))
    cache = ConversionCache(1 << 30)
    assert convert(first, 1, cache=cache, file_id=7)[1] == 10
    assert convert(first, 1, cache=cache, file_id=7)[1] == 0
    assert convert(first, 0, cache=cache, file_id=7)[1] == 10
    rewritten = log_of(produce(2, NONE, sample(5, start_ts=NOW + 999)), produce(2, GZIP, sample(5)))
    assert convert(rewritten, 1, cache=cache, file_id=8) == convert(rewritten, 1)
    boundary = next(iter_entries(first)).size
    out, records = convert(first, 1, end=boundary + 20, cache=cache, file_id=7)   # the second is beyond the end
    assert records == 0 and [r[0] for r in consume(out)] == [0, 1, 2, 3, 4]


def test_cache_memory_bound():
    log = log_of(*[produce(2, NONE, sample(20, headers=False)) for _ in range(10)])
    per_entry = len(converted(log_of(produce(2, NONE, sample(20, headers=False))), 1))
    cache = ConversionCache(3 * per_entry + 700)
    out, records = convert(log, 1, cache=cache)
    assert records == 200 and len(out) == 10 * per_entry
    assert len(cache) == 3 and cache.bytes <= cache.max_bytes
    assert convert(log, 1, cache=cache)[1] == 200            # LRU: the oldest went first, the read starts there
    tiny = ConversionCache(per_entry)                         # an entry larger than the bound is never kept
    convert(log, 1, cache=tiny)
    assert len(tiny) == 0 and tiny.bytes == 0
    off = ConversionCache(0)
    assert convert(log, 1, cache=off)[0] == out and len(off) == 0


def test_evicted_arena_stays_readable_while_a_response_holds_it():
    """Cached bytes are slices of in-memory files (arenas) sent with sendfile: an arena evicted while a response
    still holds a slice of it keeps its file open (never a closed or reused fd) until the slice is dropped."""
    log = log_of(*[produce(2, NONE, sample(20, headers=False)) for _ in range(4)])
    per_entry = len(converted(log_of(produce(2, NONE, sample(20, headers=False))), 1))
    cache = ConversionCache(2 * per_entry + 500)
    file = File(log)
    pieces, _, _ = down_convert(file.read, 1, 0, len(log), 1, fetch_offset=0, max_bytes=1 << 30, cache=cache)
    held = pieces[0]
    assert isinstance(held, CachedSlice) and len(cache) == 2          # the first entries were evicted
    expected = converted(log, 1)[:held.length]
    assert os.pread(held.fd, held.length, held.position) == expected
    fd = held.fd
    del pieces, held
    with pytest.raises(OSError):
        os.fstat(fd)


def test_cached_slices_go_out_as_file_slices():
    """A response's cached pieces are sent like log file slices: sendfile on plaintext sockets, read and sent on
    TLS ones (send_pieces), the same bytes either way."""
    import socket

    from kbroker.network.server import send_pieces
    log = log_of(*[produce(2, NONE, sample(20, headers=False)) for _ in range(3)])
    cache = ConversionCache(1 << 20)
    convert(log, 1, cache=cache)
    pieces, _, _ = down_convert(File(log).read, 1, 0, len(log), 1, fetch_offset=5, max_bytes=1 << 30, cache=cache)
    assert all(isinstance(p, CachedSlice) for p in pieces)
    expected = converted(log, 1, fetch_offset=5)
    for zero_copy in (True, False):
        a, b = socket.socketpair()
        with a, b:
            send_pieces(a, [b"head", *pieces], zero_copy)
            a.shutdown(socket.SHUT_WR)
            got = bytearray()
            while chunk := b.recv(1 << 20):
                got += chunk
        assert bytes(got) == b"head" + expected


def test_cached_entries_stored_together_go_out_as_one_slice():
    """Entries converted one after the other lie one after the other in an arena: a response from the cache
    sends them as one slice (one sendfile), not one per source batch; entries from two arenas stay two."""
    log = log_of(*[produce(2, NONE, sample(20, headers=False)) for _ in range(6)])
    per_entry = len(converted(log_of(produce(2, NONE, sample(20, headers=False))), 1))
    for cache, slices in ((ConversionCache(1 << 20), 1), (ConversionCache(8 * (3 * per_entry + 200)), 2)):
        convert(log, 1, cache=cache)
        pieces, _, _ = down_convert(File(log).read, 1, 0, len(log), 1, fetch_offset=7, max_bytes=1 << 30,
                                    cache=cache)
        assert len(pieces) == slices and all(isinstance(p, CachedSlice) for p in pieces)
        assert joined(pieces) == converted(log, 1, fetch_offset=7)


def test_pauses_between_stretches_of_conversion():
    """pause() (the broker yields to other connections there) comes after each PAUSE_BYTES of source converted,
    and never on a read served from the cache."""
    rows = [(NOW, None, b"v" * 1000, [])] * 100
    log = log_of(*[produce(2, NONE, rows) for _ in range(3 * PAUSE_BYTES // 100_000 + 2)])
    file, cache, pauses = File(log), ConversionCache(1 << 30), []
    for expected in (3, 0):
        down_convert(file.read, 1, 0, len(log), 1, fetch_offset=0, max_bytes=1 << 30, cache=cache,
                     pause=lambda: pauses.append(1))
        assert len(pauses) == expected
        pauses.clear()


def test_reads_only_what_it_converts():
    """Entries larger than READ_BYTES are read one at a time (their size first), not the whole slice."""
    rows = [(NOW, None, b"v" * 1000, [])] * 100
    log = log_of(*[produce(2, NONE, rows) for _ in range(3 * READ_BYTES // 100_000 + 2)])
    size = next(iter_entries(log)).size
    assert size > READ_BYTES
    file = File(log)
    out, records = convert(file, 1, max_bytes=1)
    assert records == 200 and [r[0] for r in consume(out)] == list(range(100))   # the second one cut away
    assert file.bytes_read == 2 * (12 + size)


def test_conversion_cost(capsys):
    rows = [(NOW + i, b"key-%d" % i, b"value-%d" % i * 8, []) for i in range(1000)]
    log = log_of(produce(2, NONE, rows))
    n = 50
    start = time.perf_counter()
    for _ in range(n):
        out, _ = convert(log, 1)
    per_call = (time.perf_counter() - start) / n
    with capsys.disabled():
        print(f"\ndown_convert v2 -> v1, 1000 uncompressed records ({len(log)} -> {len(out)} bytes): "
              f"{per_call * 1e3:.2f} ms")
    assert len(consume(out)) == 1000


def _control_batch():
    class Marker:
        offset, timestamp, key, value, headers = 0, NOW, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", []

    buf = build_v2([Marker()], codec=NONE, timestamp_type=0, log_append_time=0, producer_id=9, producer_epoch=1,
                   transactional=True)
    struct.pack_into(">h", buf, 21, 0x30)
    set_v2_crc(buf, 0, len(buf))
    return buf
