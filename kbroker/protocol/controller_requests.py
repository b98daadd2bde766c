"""Hand-written encoders for the controller's bulk requests: LeaderAndIsr v5 and UpdateMetadata v7 bodies.

Why by hand: at 10 000 partitions the library builds one data object per partition state (≈25 µs each) and then
encodes it; a controller event that moves thousands of leaders spent a third of its time there. Here each
partition state is packed straight into its bytes, once per event, and shared by every broker's request: an
UpdateMetadata goes to every broker with the same partition states, and a partition's LeaderAndIsr state is the
same for each of its replicas. The small rest of a request (ids, epochs, live brokers or leaders) is encoded by
the library with no topic states, and the partition states are spliced in where its empty array is. Both are
checked byte for byte against the library's encoding in the tests.

Both versions are flexible: compact arrays and strings (unsigned varint length + 1) and an empty tagged-field
section (one 0 byte) after each struct.
"""
from __future__ import annotations

import functools
import struct

from .hotpath import uvarint
from .interbroker import LeaderAndIsrRequest, UpdateMetadataRequest

LEADER_AND_ISR_VERSION, UPDATE_METADATA_VERSION = 5, 7
_HEAD = struct.Struct(">iiii")   # partition index, controller epoch, leader, leader epoch
_I32 = struct.Struct(">i")
_NO_TAGS = b"\x00"
_EMPTY_ARRAY = b"\x01"
_NO_TOPIC_ID = bytes(16)
# Where the (compact, empty) topic states array starts in a body encoded without topic states: after
# controller id, controller epoch, broker epoch (and LeaderAndIsr's type).
_TOPIC_STATES_AT = {LeaderAndIsrRequest: 4 + 4 + 8 + 1, UpdateMetadataRequest: 4 + 4 + 8}


def _int32s(values) -> bytes:
    return uvarint(len(values) + 1) + struct.pack(f">{len(values)}i", *values)


@functools.lru_cache(maxsize=None)
def _layout(isr: int, replicas: int, offline: int) -> struct.Struct | None:
    """One struct for a whole partition state whose arrays are this long (each length below 127 is one varint
    byte); None beyond."""
    if max(isr, replicas, offline) >= 126:
        return None
    return struct.Struct(f">iiiiB{isr}iiB{replicas}iB{offline}iB")


def update_metadata_partition(index: int, controller_epoch: int, leader: int, leader_epoch: int, isr, zk_version: int,
                              replicas, offline_replicas) -> bytes:
    """One UpdateMetadataPartitionState (v7)."""
    layout = _layout(len(isr), len(replicas), len(offline_replicas))
    if layout is not None:
        return layout.pack(index, controller_epoch, leader, leader_epoch, len(isr) + 1, *isr, zk_version,
                           len(replicas) + 1, *replicas, len(offline_replicas) + 1, *offline_replicas, 0)
    return b"".join((_HEAD.pack(index, controller_epoch, leader, leader_epoch), _int32s(isr), _I32.pack(zk_version),
                     _int32s(replicas), _int32s(offline_replicas), _NO_TAGS))


def leader_and_isr_partition(index: int, controller_epoch: int, leader: int, leader_epoch: int, isr, zk_version: int,
                             replicas, is_new: bool) -> bytes:
    """One LeaderAndIsrPartitionState (v5), with no adding or removing replicas."""
    # The same layout as an UpdateMetadata state with no offline replicas, then the other empty array, is_new and
    # no tagged fields.
    layout = _layout(len(isr), len(replicas), 0)
    if layout is not None:
        head = layout.pack(index, controller_epoch, leader, leader_epoch, len(isr) + 1, *isr, zk_version,
                           len(replicas) + 1, *replicas, 1, 1)   # (the last byte: removing replicas, empty)
        return head + (b"\x01\x00" if is_new else b"\x00\x00")
    return b"".join((_HEAD.pack(index, controller_epoch, leader, leader_epoch), _int32s(isr), _I32.pack(zk_version),
                     _int32s(replicas), _EMPTY_ARRAY, _EMPTY_ARRAY, b"\x01" if is_new else b"\x00", _NO_TAGS))


def topic_states(topics) -> bytes:
    """The topic states array from [(topic name, topic id as uuid.UUID or None, [encoded partition states])]."""
    out = [uvarint(len(topics) + 1)]
    for name, topic_id, partitions in topics:
        raw = name.encode()
        out += [uvarint(len(raw) + 1), raw, topic_id.bytes if topic_id is not None else _NO_TOPIC_ID,
                uvarint(len(partitions) + 1), *partitions, _NO_TAGS]
    return b"".join(out)


def encode(request, states: bytes) -> bytes:
    """The body of `request` (a LeaderAndIsrRequest v5 or UpdateMetadataRequest v7 built with topic_states=[])
    with `states` (topic_states()) as its topic states."""
    body = request.encode(version=request.API_VERSION)
    at = _TOPIC_STATES_AT[type(request)]
    if body[at:at + 1] != _EMPTY_ARRAY:
        raise ValueError("the request must be built without topic states")
    return body[:at] + states + body[at + 1:]


def with_broker_epoch(body: bytes, broker_epoch: int) -> bytes:
    """The same body addressed to another broker: only the broker epoch (bytes 8-15 of both) differs."""
    return body[:8] + struct.pack(">q", broker_epoch) + body[16:]
