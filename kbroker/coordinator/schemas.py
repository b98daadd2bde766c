"""The records of `__consumer_offsets`, byte for byte as Kafka 2.8 writes and reads them, and the group → partition
mapping (so a real Kafka could read our offsets topic and coordinators land where Kafka would put them).

Every key and value starts with an int16 schema version; the fields follow in Kafka's non-flexible encoding
(int16-length strings, -1 for null; int32-length bytes; int32-count arrays):

- offset commit key, version 1 (0 is read too):  group, topic, partition:int32
- offset commit value, version 1:  offset:int64, metadata, commit_timestamp:int64, expire_timestamp:int64
                       version 3:  offset:int64, leader_epoch:int32, metadata, commit_timestamp:int64
  (version 0 has no expire timestamp, version 2 neither; all four are read)
- group metadata key, version 2:   group
- group metadata value, version 3: protocol_type, generation:int32, protocol (nullable), leader (nullable),
  current_state_timestamp:int64, members: [member_id, group_instance_id (nullable), client_id, client_host,
  rebalance_timeout:int32, session_timeout:int32, subscription:bytes, assignment:bytes]
  (versions 0-2 are read: v0 has no rebalance timeout, v0-1 no state timestamp, v0-2 no instance id)

A tombstone (null value) deletes its key. Kafka writes offset values v3 unless the commit carries an explicit
expire timestamp (OffsetCommit v2-v4 retention time), then v1; group values always v3 (IBP 2.8).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..common.encoding import I16, I32, I64, Reader, java_abs, java_string_hash, write_bytes, write_string

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1
NO_TIMESTAMP = -1


# ---- group id -> offsets partition ---------------------------------------------------------------------------

def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % partitions."""
    return java_abs(java_string_hash(group_id)) % partitions


# ---- keys -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA_KEY_VERSION


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(I16.pack(OFFSET_COMMIT_KEY_VERSION))
    write_string(out, group)
    write_string(out, topic)
    out += I32.pack(partition)
    return bytes(out)


def group_metadata_key(group: str) -> bytes:
    out = bytearray(I16.pack(GROUP_METADATA_KEY_VERSION))
    write_string(out, group)
    return bytes(out)


def read_key(buf) -> OffsetKey | GroupMetadataKey:
    """Kafka's readMessageKey: versions 0-1 are offset commits, 2 group metadata; anything else is an error."""
    r = Reader(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32(), version)
    if version == 2:
        return GroupMetadataKey(r.string(), version)
    raise ValueError(f"Unknown group metadata message version: {version}")


# ---- offset commit values -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH     # -1: none
    metadata: str = ""
    commit_timestamp: int = NO_TIMESTAMP
    expire_timestamp: int | None = None     # None: none (value versions other than 1 never carry one)


def offset_commit_value(o: OffsetAndMetadata) -> bytes:
    """Version 1 when the commit has an expire timestamp, else version 3 (Kafka at IBP >= 2.1-IV1)."""
    metadata = o.metadata if o.metadata is not None else ""
    if o.expire_timestamp is not None:
        out = bytearray(I16.pack(1))
        out += I64.pack(o.offset)
        write_string(out, metadata)
        out += I64.pack(o.commit_timestamp)
        out += I64.pack(o.expire_timestamp)
    else:
        out = bytearray(I16.pack(3))
        out += I64.pack(o.offset)
        out += I32.pack(o.leader_epoch)
        write_string(out, metadata)
        out += I64.pack(o.commit_timestamp)
    return bytes(out)


def read_offset_value(buf) -> OffsetAndMetadata | None:
    """Kafka's readOffsetMessageValue; None for a tombstone."""
    if buf is None:
        return None
    r = Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"Unknown offset message version: {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else NO_LEADER_EPOCH
    metadata = r.string()
    commit_ts = r.i64()
    expire = r.i64() if version == 1 else NO_TIMESTAMP
    return OffsetAndMetadata(offset, epoch, metadata, commit_ts, None if expire == NO_TIMESTAMP else expire)


# ---- group metadata values ------------------------------------------------------------------------------------

@dataclass
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = NO_TIMESTAMP
    members: list[MemberRecord] = field(default_factory=list)


def group_metadata_value(g: GroupRecord) -> bytes:
    out = bytearray(I16.pack(GROUP_METADATA_VALUE_VERSION))
    write_string(out, g.protocol_type if g.protocol_type is not None else "")
    out += I32.pack(g.generation)
    write_string(out, g.protocol)
    write_string(out, g.leader)
    out += I64.pack(g.current_state_timestamp)
    out += I32.pack(len(g.members))
    for m in g.members:
        write_string(out, m.member_id)
        write_string(out, m.group_instance_id)
        write_string(out, m.client_id)
        write_string(out, m.client_host)
        out += I32.pack(m.rebalance_timeout)
        out += I32.pack(m.session_timeout)
        write_bytes(out, m.subscription)
        write_bytes(out, m.assignment)
    return bytes(out)


def read_group_value(buf) -> GroupRecord | None:
    """Kafka's readGroupMessageValue (versions 0-3); None for a tombstone. A v0 member's rebalance timeout is its
    session timeout, as Kafka reads it."""
    if buf is None:
        return None
    r = Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"Unknown group metadata message version: {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else NO_TIMESTAMP
    count = r.i32()
    if count < 0:
        raise ValueError("null members array")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance = r.i32() if version >= 1 else None
        session = r.i32()
        members.append(MemberRecord(member_id, instance, client_id, client_host,
                                    session if rebalance is None else rebalance, session, r.bytes_(), r.bytes_()))
    return GroupRecord(protocol_type, generation, protocol, leader, state_ts, members)


# ---- the consumer protocol (only what the coordinator reads) --------------------------------------------------

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocol subscription (version, [topic], user data, ...); ValueError if it
    does not parse (Kafka's coordinator then treats the group as subscribed to everything)."""
    r = Reader(metadata)
    version = r.i16()
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    count = r.i32()
    if count < 0:
        raise ValueError("null topic array")
    return {r.string() for _ in range(count)}
