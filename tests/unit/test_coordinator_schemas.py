"""__consumer_offsets record formats and the group -> partition mapping, checked against hand-built bytes and
values computed by hand (and by a JVM: `"my-group".hashCode()` is -1906497762)."""
import struct

import pytest

from kbroker.common.encoding import java_abs, java_string_hash
from kbroker.coordinator.schemas import (GroupMetadataKey, GroupRecord, MemberRecord, OffsetAndMetadata, OffsetKey,
                                         group_metadata_key, group_metadata_value, offset_commit_key,
                                         offset_commit_value, partition_for, read_group_value, read_key,
                                         read_offset_value, subscription_topics)


def by_hand(s: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, reduced to a signed 32-bit int."""
    b = s.encode("utf-16-be")
    units = [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2)]
    n = len(units)
    total = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2 ** 32
    return total - 2 ** 32 if total >= 2 ** 31 else total


@pytest.mark.parametrize("s, expected", [
    ("", 0),
    ("a", 97),
    ("ab", 97 * 31 + 98),
    ("my-group", -1906497762),
    ("polygenelubricants", -2 ** 31),                      # Integer.MIN_VALUE
    ("\U0001F600", 0xD83D * 31 + 0xDE00),                  # a surrogate pair counts as two UTF-16 units
    ("héllo", by_hand("héllo")),
])
def test_java_string_hash(s, expected):
    assert java_string_hash(s) == expected
    assert java_string_hash(s) == by_hand(s)


def test_utils_abs_maps_min_value_to_zero():
    assert java_abs(-2 ** 31) == 0
    assert java_abs(-5) == 5 and java_abs(7) == 7


def test_partition_for_matches_kafka():
    # abs(-1906497762) = 1906497762; 1906497762 % 50 = 12, % 6 = 0 (checked with javac/java).
    assert partition_for("my-group", 50) == 12
    assert partition_for("my-group", 6) == 0
    assert partition_for("", 50) == 0
    assert partition_for("polygenelubricants", 50) == 0   # Utils.abs(MIN_VALUE) = 0, not MIN_VALUE % 50
    assert partition_for("a", 50) == 47
    assert partition_for("console-consumer-1234", 50) == 836395459 % 50 == 9


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def test_offset_commit_key_bytes():
    key = offset_commit_key("grp", "topic-x", 3)
    assert key == b"\x00\x01" + _s("grp") + _s("topic-x") + b"\x00\x00\x00\x03"
    assert read_key(key) == OffsetKey("grp", "topic-x", 3, 1)


def test_offset_commit_key_version_0_is_read():
    assert read_key(b"\x00\x00" + _s("g") + _s("t") + b"\x00\x00\x00\x07") == OffsetKey("g", "t", 7, 0)


def test_group_metadata_key_bytes():
    assert group_metadata_key("grp") == b"\x00\x02" + _s("grp")
    assert read_key(b"\x00\x02" + _s("grp")) == GroupMetadataKey("grp")


def test_unknown_key_version_is_refused():
    with pytest.raises(ValueError):
        read_key(b"\x00\x03" + _s("grp"))


def test_offset_value_v3_bytes():
    o = OffsetAndMetadata(offset=10, leader_epoch=2, metadata="meta", commit_timestamp=1000)
    value = offset_commit_value(o)
    assert value == (b"\x00\x03" + struct.pack(">q", 10) + struct.pack(">i", 2) + _s("meta") +
                     struct.pack(">q", 1000))
    assert read_offset_value(value) == o


def test_offset_value_v1_when_an_expire_timestamp_is_set():
    o = OffsetAndMetadata(offset=5, leader_epoch=9, metadata="", commit_timestamp=100, expire_timestamp=200)
    value = offset_commit_value(o)
    # v1 has no leader epoch: it is lost, as in Kafka.
    assert value == b"\x00\x01" + struct.pack(">q", 5) + _s("") + struct.pack(">qq", 100, 200)
    assert read_offset_value(value) == OffsetAndMetadata(5, -1, "", 100, 200)


def test_offset_values_v0_and_v2_are_read():
    v0 = b"\x00\x00" + struct.pack(">q", 42) + _s("m") + struct.pack(">q", 77)
    assert read_offset_value(v0) == OffsetAndMetadata(42, -1, "m", 77, None)
    v2 = b"\x00\x02" + struct.pack(">q", 43) + _s("") + struct.pack(">q", 78)
    assert read_offset_value(v2) == OffsetAndMetadata(43, -1, "", 78, None)
    assert read_offset_value(None) is None


def test_group_value_v3_bytes():
    g = GroupRecord(protocol_type="consumer", generation=4, protocol="range", leader="m1",
                    current_state_timestamp=1234,
                    members=[MemberRecord("m1", "inst-1", "client", "/127.0.0.1", 30000, 10000, b"\x01\x02",
                                          b"\x03"),
                             MemberRecord("m2", None, "c2", "/10.0.0.2", 300, 100, b"", b"")])
    expected = (b"\x00\x03" + _s("consumer") + struct.pack(">i", 4) + _s("range") + _s("m1") +
                struct.pack(">q", 1234) + struct.pack(">i", 2) +
                _s("m1") + _s("inst-1") + _s("client") + _s("/127.0.0.1") + struct.pack(">ii", 30000, 10000) +
                struct.pack(">i", 2) + b"\x01\x02" + struct.pack(">i", 1) + b"\x03" +
                _s("m2") + b"\xff\xff" + _s("c2") + _s("/10.0.0.2") + struct.pack(">ii", 300, 100) +
                struct.pack(">i", 0) + struct.pack(">i", 0))
    assert group_metadata_value(g) == expected
    assert read_group_value(expected) == g


def test_empty_group_value_has_null_protocol_and_leader():
    g = GroupRecord(protocol_type="consumer", generation=2, protocol=None, leader=None, current_state_timestamp=-1)
    value = group_metadata_value(g)
    assert value == (b"\x00\x03" + _s("consumer") + struct.pack(">i", 2) + b"\xff\xff" + b"\xff\xff" +
                     struct.pack(">q", -1) + struct.pack(">i", 0))
    assert read_group_value(value) == g


def test_group_values_v0_to_v2_are_read():
    member_v0 = _s("m") + _s("c") + _s("/h") + struct.pack(">i", 6000) + struct.pack(">i", 1) + b"s" + \
        struct.pack(">i", 1) + b"a"
    v0 = b"\x00\x00" + _s("consumer") + struct.pack(">i", 1) + _s("range") + _s("m") + struct.pack(">i", 1) + \
        member_v0
    g = read_group_value(v0)
    assert g.current_state_timestamp == -1
    assert g.members == [MemberRecord("m", None, "c", "/h", 6000, 6000, b"s", b"a")]   # rebalance = session
    member_v1 = _s("m") + _s("c") + _s("/h") + struct.pack(">ii", 9000, 6000) + struct.pack(">i", 0) + \
        struct.pack(">i", 0)
    v2 = b"\x00\x02" + _s("consumer") + struct.pack(">i", 1) + _s("range") + _s("m") + struct.pack(">q", 55) + \
        struct.pack(">i", 1) + member_v1
    g = read_group_value(v2)
    assert g.current_state_timestamp == 55
    assert g.members == [MemberRecord("m", None, "c", "/h", 9000, 6000, b"", b"")]
    assert read_group_value(None) is None


def test_truncated_values_are_refused():
    value = offset_commit_value(OffsetAndMetadata(1, -1, "x", 2))
    with pytest.raises(ValueError):
        read_offset_value(value[:-1])


def test_subscription_topics():
    sub = struct.pack(">hi", 0, 2) + _s("a") + _s("b") + struct.pack(">i", -1)
    assert subscription_topics(sub) == {"a", "b"}
    with pytest.raises(ValueError):
        subscription_topics(b"\x00")
