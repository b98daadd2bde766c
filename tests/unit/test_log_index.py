"""kbroker.log.index: Kafka's .index / .timeindex formats byte for byte, preallocation and trimming, the warm-section
search, truncation, and the sanity check."""
import os
import random
import struct

import pytest

from kbroker.log.errors import CorruptIndex, InvalidOffset
from kbroker.log.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset

BASE = 1000


def offset_index(tmp_path, max_size=4096, base=BASE):
    return OffsetIndex(str(tmp_path / ("%020d.index" % base)), base, max_size)


def time_index(tmp_path, max_size=4096, base=BASE):
    return TimeIndex(str(tmp_path / ("%020d.timeindex" % base)), base, max_size)


def test_offset_index_entries_are_relative_offset_and_position_big_endian(tmp_path):
    idx = offset_index(tmp_path, max_size=100)
    assert os.path.getsize(idx.path) == 96          # preallocated, rounded down to whole 8-byte entries
    assert idx.max_entries == 12 and idx.entries == 0
    idx.append(BASE + 5, 100)
    idx.append(BASE + 70000, 123456)
    idx.flush()
    raw = open(idx.path, "rb").read()
    assert raw[:8] == struct.pack(">ii", 5, 100) == b"\x00\x00\x00\x05\x00\x00\x00\x64"
    assert raw[8:16] == struct.pack(">ii", 70000, 123456)
    idx.close()                                     # trimmed to its entries, as Kafka on roll/close
    assert os.path.getsize(idx.path) == 16
    again = OffsetIndex(idx.path, BASE, 100)
    assert again.entries == 2 and again.last_offset == BASE + 70000
    assert again.lookup(BASE + 69999) == OffsetPosition(BASE + 5, 100)


def test_time_index_entries_are_timestamp_and_relative_offset(tmp_path):
    idx = time_index(tmp_path, max_size=100)
    assert os.path.getsize(idx.path) == 96 and idx.max_entries == 8
    idx.maybe_append(1_700_000_000_123, BASE + 3)
    idx.maybe_append(1_700_000_000_123, BASE + 9)   # not larger: no entry
    idx.maybe_append(1_700_000_000_200, BASE + 9)
    idx.close()
    raw = open(idx.path, "rb").read()
    assert raw == struct.pack(">qi", 1_700_000_000_123, 3) + struct.pack(">qi", 1_700_000_000_200, 9)
    again = TimeIndex(idx.path, BASE, 100)
    assert again.last_entry == TimestampOffset(1_700_000_000_200, BASE + 9)


def test_time_index_refuses_to_go_back(tmp_path):
    idx = time_index(tmp_path)
    idx.maybe_append(500, BASE + 5)
    with pytest.raises(InvalidOffset):
        idx.maybe_append(400, BASE + 6)
    with pytest.raises(InvalidOffset):
        idx.maybe_append(600, BASE + 4)


def test_offset_index_refuses_out_of_order_full_and_overflowing_offsets(tmp_path):
    idx = offset_index(tmp_path, max_size=16)
    idx.append(BASE + 1, 0)
    with pytest.raises(InvalidOffset):
        idx.append(BASE + 1, 10)
    idx.append(BASE + 2, 10)
    assert idx.is_full
    with pytest.raises(InvalidOffset):
        idx.append(BASE + 3, 20)
    big = offset_index(tmp_path, base=0)
    assert big.can_append_offset(2 ** 31 - 1) and not big.can_append_offset(2 ** 31)
    with pytest.raises(InvalidOffset):
        big.append(2 ** 31, 0)


def test_time_index_keeps_its_last_slot_for_the_roll_entry(tmp_path):
    idx = time_index(tmp_path, max_size=36)       # 3 slots
    idx.maybe_append(1, BASE)
    assert not idx.is_full
    idx.maybe_append(2, BASE + 1)
    assert idx.is_full                            # entries >= max_entries - 1
    idx.maybe_append(3, BASE + 2, skip_full_check=True)
    assert idx.entries == 3


def test_lookup_largest_lower_bound(tmp_path):
    idx = offset_index(tmp_path)
    assert idx.lookup(BASE + 50) == OffsetPosition(BASE, 0)      # empty
    for i in range(1, 11):
        idx.append(BASE + 10 * i, 100 * i)
    assert idx.lookup(BASE + 5) == OffsetPosition(BASE, 0)       # below the first entry
    assert idx.lookup(BASE + 10) == OffsetPosition(BASE + 10, 100)
    assert idx.lookup(BASE + 55) == OffsetPosition(BASE + 50, 500)
    assert idx.lookup(BASE + 10 ** 6) == OffsetPosition(BASE + 100, 1000)
    tidx = time_index(tmp_path)
    assert tidx.lookup(5) == TimestampOffset(-1, BASE)
    for i in range(1, 6):
        tidx.maybe_append(100 * i, BASE + i)
    assert tidx.lookup(99) == TimestampOffset(-1, BASE)
    assert tidx.lookup(250) == TimestampOffset(200, BASE + 2)
    assert tidx.lookup(500) == TimestampOffset(500, BASE + 5)


def _record_slots(idx, monkeypatch):
    """The slots idx's searches read (the index classes have __slots__: patched on the class, for this test)."""
    touched = []
    original = type(idx)._entry

    def entry(self, slot):
        if self is idx:
            touched.append(slot)
        return original(self, slot)
    monkeypatch.setattr(type(idx), "_entry", entry)
    return touched


def test_warm_section_lookups_touch_only_the_last_8_kib(tmp_path, monkeypatch):
    n = 5000                                      # 40 KB of entries; the warm section is the last 1024
    idx = offset_index(tmp_path, max_size=n * 8)
    for i in range(n):
        idx.append(BASE + 3 * i + 1, 7 * i)
    touched = _record_slots(idx, monkeypatch)
    warm_start = n - 1 - 8192 // 8
    for target in (BASE + 3 * (n - 1) + 1, BASE + 3 * (n - 500), BASE + 3 * warm_start + 2, BASE + 10 ** 6):
        touched.clear()
        found = idx.lookup(target)
        i = min((target - BASE - 1) // 3, n - 1)
        assert found == OffsetPosition(BASE + 3 * i + 1, 7 * i)
        assert touched and min(touched) >= warm_start, (target, sorted(touched)[:3])
    touched.clear()
    assert idx.lookup(BASE + 3 * 100 + 2) == OffsetPosition(BASE + 301, 700)   # cold: searches the head
    assert min(touched) == 0 and any(s < warm_start for s in touched)


def test_lookups_agree_with_a_linear_scan(tmp_path):
    rng = random.Random(7)
    offsets = sorted(rng.sample(range(1, 200000), 3000))
    idx = offset_index(tmp_path, max_size=3000 * 8)
    for i, o in enumerate(offsets):
        idx.append(BASE + o, i)
    tidx = time_index(tmp_path, max_size=3001 * 12)
    for i, o in enumerate(offsets):
        tidx.maybe_append(10 * o, BASE + o)
    for target in rng.sample(range(0, 200010), 500) + offsets[:20] + offsets[-20:]:
        below = [i for i, o in enumerate(offsets) if o <= target]
        expected = OffsetPosition(BASE + offsets[below[-1]], below[-1]) if below else OffsetPosition(BASE, 0)
        assert idx.lookup(BASE + target) == expected
        expected_t = TimestampOffset(10 * offsets[below[-1]], BASE + offsets[below[-1]]) if below \
            else TimestampOffset(-1, BASE)
        assert tidx.lookup(10 * target) == expected_t


def test_truncate_to(tmp_path):
    idx = offset_index(tmp_path)
    for i in range(1, 6):
        idx.append(BASE + 10 * i, 100 * i)
    idx.truncate_to(BASE + 35)          # no entry for it: keep those below
    assert idx.entries == 3 and idx.last_offset == BASE + 30
    idx.truncate_to(BASE + 30)          # an entry for it: drop it
    assert idx.entries == 2 and idx.last_offset == BASE + 20
    idx.truncate_to(BASE + 5)           # nothing below
    assert idx.entries == 0 and idx.last_offset == BASE
    idx.append(BASE + 1, 1)             # appendable again
    tidx = time_index(tmp_path)
    for i in range(1, 6):
        tidx.maybe_append(100 * i, BASE + 10 * i)
    tidx.truncate_to(BASE + 30)         # by offset
    assert tidx.entries == 2 and tidx.last_entry == TimestampOffset(200, BASE + 20)


def test_reopened_preallocated_index_counts_every_slot_and_fails_the_sanity_check(tmp_path):
    """An active segment's index after a crash is still preallocated: Kafka reads every slot as an entry; the
    zero tail makes the last offset not above the first, so the index is rebuilt."""
    idx = offset_index(tmp_path, max_size=80)
    idx.append(BASE + 5, 100)
    idx.append(BASE + 9, 200)
    idx.flush()
    crashed = OffsetIndex(idx.path, BASE, 80)
    assert crashed.entries == 10
    with pytest.raises(CorruptIndex):
        crashed.sanity_check()
    idx.close()
    OffsetIndex(idx.path, BASE, 80).sanity_check()


def test_sanity_check_kafka_rules(tmp_path):
    path = str(tmp_path / "x.index")
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")        # not whole entries
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, BASE, 4096).sanity_check()
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", -5, 0))                        # last offset below the base offset
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, BASE, 4096).sanity_check()
    tpath = str(tmp_path / "x.timeindex")
    with open(tpath, "wb") as f:
        f.write(struct.pack(">qi", 500, 1) + struct.pack(">qi", 400, 2))   # timestamps going back
    with pytest.raises(CorruptIndex):
        TimeIndex(tpath, BASE, 4096).sanity_check()
    with open(tpath, "wb") as f:
        f.write(struct.pack(">qi", 500, 1) + struct.pack(">qi", 600, 2))
    TimeIndex(tpath, BASE, 4096).sanity_check()


def test_resize_keeps_entries_and_reset_makes_room(tmp_path):
    idx = offset_index(tmp_path, max_size=800)
    idx.append(BASE + 1, 10)
    idx.trim_to_valid_size()
    assert idx.is_full and os.path.getsize(idx.path) == 8
    idx.resize(800)
    assert not idx.is_full and idx.max_entries == 100
    idx.append(BASE + 2, 20)
    assert idx.lookup(BASE + 1) == OffsetPosition(BASE + 1, 10)
    idx.reset()
    assert idx.entries == 0 and os.path.getsize(idx.path) == 800
