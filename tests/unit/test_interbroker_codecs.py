"""Codec tests for the inter-broker APIs defined in kbroker.protocol.interbroker.

* every API x every Kafka 2.8 version: build a representative message,
  encode, decode, compare;
* byte-exact checks against wire bytes assembled by hand with ``struct``
  (independent of kafka-python), so a wrong field order / type / flexible
  encoding fails;
* request headers and framing, including ControlledShutdown v0's header v0;
* the adjustments interbroker.py makes on top of kafka-python's schema engine.
"""
import importlib.resources
import struct
import subprocess
import sys
import uuid

import pytest

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.metadata import MetadataResponse

from kbroker.protocol.interbroker import (
    AlterIsrRequest, AlterIsrResponse,
    ControlledShutdownRequest, ControlledShutdownResponse,
    LeaderAndIsrRequest, LeaderAndIsrResponse,
    StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
    INTER_BROKER_REQUESTS, INTER_BROKER_RESPONSES,
)
from kbroker.protocol.header import request_header

TOPIC_ID = uuid.UUID('6ba7b810-9dad-11d1-80b4-00c04fd430c8')
TOPIC_ID2 = uuid.UUID('00112233-4455-6677-8899-aabbccddeeff')


# ---------------------------------------------------------------------------
# Independent wire helpers (plain struct; no kafka-python involved)
# ---------------------------------------------------------------------------

def i8(v): return struct.pack('>b', v)
def i16(v): return struct.pack('>h', v)
def i32(v): return struct.pack('>i', v)
def i64(v): return struct.pack('>q', v)
def boolean(v): return b'\x01' if v else b'\x00'


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode('utf-8')
    return i16(len(b)) + b


def cstring(s):
    if s is None:
        return uvarint(0)
    b = s.encode('utf-8')
    return uvarint(len(b) + 1) + b


def array(items, enc):
    return i32(len(items)) + b''.join(enc(x) for x in items)


def carray(items, enc):
    return uvarint(len(items) + 1) + b''.join(enc(x) for x in items)


def int32s(xs): return array(xs, i32)
def cint32s(xs): return carray(xs, i32)


NO_TAGS = uvarint(0)


# ---------------------------------------------------------------------------
# Schema facts
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('cls, api_key, max_version, first_flexible', [
    (LeaderAndIsrRequest, 4, 5, 4), (LeaderAndIsrResponse, 4, 5, 4),
    (StopReplicaRequest, 5, 3, 2), (StopReplicaResponse, 5, 3, 2),
    (UpdateMetadataRequest, 6, 7, 6), (UpdateMetadataResponse, 6, 7, 6),
    (ControlledShutdownRequest, 7, 3, 3), (ControlledShutdownResponse, 7, 3, 3),
    (AlterIsrRequest, 56, 0, 0), (AlterIsrResponse, 56, 0, 0),
])
def test_schema_versions(cls, api_key, max_version, first_flexible):
    assert cls.API_KEY == api_key
    assert cls.max_version == max_version
    assert [v for v in range(max_version + 1) if cls.flexible_version_q(v)] == \
        list(range(first_flexible, max_version + 1))
    with pytest.raises(ValueError):
        cls[max_version + 1]
    assert cls.is_request() == cls.__name__.endswith('Request')


def test_schema_files_ship_as_package_resources():
    names = {p.name for p in importlib.resources.files('kbroker.protocol.schemas').iterdir()}
    for cls in (*INTER_BROKER_REQUESTS.values(), *INTER_BROKER_RESPONSES.values()):
        assert cls.__name__ + '.json' in names
        # the class really was built from our file
        assert cls.json['name'] == cls.__name__


# ---------------------------------------------------------------------------
# Representative messages for every version
# ---------------------------------------------------------------------------

def leader_and_isr_request(v):
    PS = LeaderAndIsrRequest.LeaderAndIsrPartitionState

    def ps(topic, partition, leader, isr, replicas):
        kw = dict(partition_index=partition, controller_epoch=7, leader=leader,
                  leader_epoch=3 + partition, isr=isr, zk_version=11, replicas=replicas)
        if v <= 1:
            kw['topic_name'] = topic
        if v >= 1:
            kw['is_new'] = partition == 1
        if v >= 3:
            kw['adding_replicas'] = [4] if partition == 1 else []
            kw['removing_replicas'] = [3] if partition == 1 else []
        return PS(version=v, **kw)

    states = [('orders', 0, 1, [1, 2], [1, 2, 3]), ('orders', 1, 2, [2, 3], [2, 3, 4]),
              ('payments', 0, 3, [3], [3, 1])]
    kw = dict(controller_id=1, controller_epoch=7,
              live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                                broker_id=b, host_name='broker-%d.local' % b, port=9090 + b)
                            for b in (1, 2, 3)])
    if v <= 1:
        kw['ungrouped_partition_states'] = [ps(*s) for s in states]
    else:
        kw['broker_epoch'] = 4242
        topics = []
        for name, tid in (('orders', TOPIC_ID), ('payments', TOPIC_ID2)):
            ts = dict(topic_name=name, partition_states=[ps(*s) for s in states if s[0] == name])
            if v >= 5:
                ts['topic_id'] = tid
            topics.append(LeaderAndIsrRequest.LeaderAndIsrTopicState(version=v, **ts))
        kw['topic_states'] = topics
    if v >= 5:
        kw['type'] = LeaderAndIsrRequest.TYPE_FULL
    return LeaderAndIsrRequest(version=v, **kw)


def leader_and_isr_response(v):
    PE = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    if v <= 4:
        return LeaderAndIsrResponse(version=v, error_code=0, partition_errors=[
            PE(topic_name='orders', partition_index=0, error_code=0),
            PE(topic_name='orders', partition_index=1, error_code=56)])
    return LeaderAndIsrResponse(version=v, error_code=0, topics=[
        LeaderAndIsrResponse.LeaderAndIsrTopicError(topic_id=TOPIC_ID, partition_errors=[
            PE(partition_index=0, error_code=0), PE(partition_index=1, error_code=56)])])


def update_metadata_request(v):
    PS = UpdateMetadataRequest.UpdateMetadataPartitionState

    def ps(topic, partition):
        kw = dict(partition_index=partition, controller_epoch=5, leader=partition + 1,
                  leader_epoch=9, isr=[1, 2], zk_version=4, replicas=[1, 2, 3])
        if v <= 4:
            kw['topic_name'] = topic
        if v >= 4:
            kw['offline_replicas'] = [3] if partition else []
        return PS(version=v, **kw)

    def broker(bid, rack):
        B = UpdateMetadataRequest.UpdateMetadataBroker
        if v == 0:
            return B(version=v, id=bid, v0_host='h%d' % bid, v0_port=9092)
        eps = []
        for port, listener, proto in ((9092, 'PLAINTEXT', 0), (9093, 'SSL', 1)):
            ep = dict(port=port, host='h%d' % bid, security_protocol=proto)
            if v >= 3:
                ep['listener'] = listener
            eps.append(B.UpdateMetadataEndpoint(version=v, **ep))
        kw = dict(id=bid, endpoints=eps)
        if v >= 2:
            kw['rack'] = rack
        return B(version=v, **kw)

    kw = dict(controller_id=2, controller_epoch=5,
              live_brokers=[broker(1, 'rack-a'), broker(2, None)])
    if v <= 4:
        kw['ungrouped_partition_states'] = [ps('t1', 0), ps('t1', 1), ps('t2', 0)]
    else:
        kw['broker_epoch'] = 77
        topics = []
        for name, parts, tid in (('t1', (0, 1), TOPIC_ID), ('t2', (0,), TOPIC_ID2)):
            ts = dict(topic_name=name, partition_states=[ps(name, p) for p in parts])
            if v >= 7:
                ts['topic_id'] = tid
            topics.append(UpdateMetadataRequest.UpdateMetadataTopicState(version=v, **ts))
        kw['topic_states'] = topics
    return UpdateMetadataRequest(version=v, **kw)


def update_metadata_response(v):
    return UpdateMetadataResponse(version=v, error_code=43)


def stop_replica_request(v):
    kw = dict(controller_id=3, controller_epoch=8)
    if v >= 1:
        kw['broker_epoch'] = 1000
    if v <= 2:
        kw['delete_partitions'] = True
    if v == 0:
        kw['ungrouped_partitions'] = [
            StopReplicaRequest.StopReplicaPartitionV0(topic_name='a', partition_index=0),
            StopReplicaRequest.StopReplicaPartitionV0(topic_name='b', partition_index=2)]
    elif v <= 2:
        kw['topics'] = [StopReplicaRequest.StopReplicaTopicV1(name='a', partition_indexes=[0, 1]),
                        StopReplicaRequest.StopReplicaTopicV1(name='b', partition_indexes=[2])]
    else:
        TS = StopReplicaRequest.StopReplicaTopicState
        kw['topic_states'] = [TS(topic_name='a', partition_states=[
            TS.StopReplicaPartitionState(partition_index=0, leader_epoch=4, delete_partition=True),
            TS.StopReplicaPartitionState(partition_index=1, leader_epoch=-2, delete_partition=False)])]
    return StopReplicaRequest(version=v, **kw)


def stop_replica_response(v):
    PE = StopReplicaResponse.StopReplicaPartitionError
    return StopReplicaResponse(version=v, error_code=0, partition_errors=[
        PE(topic_name='a', partition_index=0, error_code=0),
        PE(topic_name='b', partition_index=2, error_code=3)])


def controlled_shutdown_request(v):
    kw = dict(broker_id=5)
    if v >= 2:
        kw['broker_epoch'] = 123456789012
    return ControlledShutdownRequest(version=v, **kw)


def controlled_shutdown_response(v):
    RP = ControlledShutdownResponse.RemainingPartition
    return ControlledShutdownResponse(version=v, error_code=0, remaining_partitions=[
        RP(topic_name='orders', partition_index=1), RP(topic_name='payments', partition_index=0)])


def alter_isr_request(v):
    TD = AlterIsrRequest.TopicData
    return AlterIsrRequest(version=v, broker_id=1, broker_epoch=99, topics=[
        TD(name='orders', partitions=[
            TD.PartitionData(partition_index=0, leader_epoch=5, new_isr=[1, 2], current_isr_version=12),
            TD.PartitionData(partition_index=3, leader_epoch=6, new_isr=[1], current_isr_version=0)])])


def alter_isr_response(v):
    TD = AlterIsrResponse.TopicData
    return AlterIsrResponse(version=v, throttle_time_ms=10, error_code=0, topics=[
        TD(name='orders', partitions=[
            TD.PartitionData(partition_index=0, error_code=0, leader_id=1, leader_epoch=5,
                             isr=[1, 2], current_isr_version=13),
            TD.PartitionData(partition_index=3, error_code=9, leader_id=-1, leader_epoch=-1,
                             isr=[], current_isr_version=-1)])])


BUILDERS = [
    (LeaderAndIsrRequest, leader_and_isr_request), (LeaderAndIsrResponse, leader_and_isr_response),
    (UpdateMetadataRequest, update_metadata_request), (UpdateMetadataResponse, update_metadata_response),
    (StopReplicaRequest, stop_replica_request), (StopReplicaResponse, stop_replica_response),
    (ControlledShutdownRequest, controlled_shutdown_request),
    (ControlledShutdownResponse, controlled_shutdown_response),
    (AlterIsrRequest, alter_isr_request), (AlterIsrResponse, alter_isr_response),
]
ALL_VERSIONS = [pytest.param(cls, build, v, id='%s-v%d' % (cls.__name__, v))
                for cls, build in BUILDERS for v in range(cls.max_version + 1)]


def wire_view(obj, struct, version):
    """The values that are on the wire for ``version``, as nested plain data."""
    out = {}
    for f in struct.untagged_fields(version):
        val = getattr(obj, f.name)
        if f.is_struct_array():
            val = [wire_view(x, f.array_of, version) for x in val]
        elif f.is_struct():
            val = wire_view(val, f, version)
        elif f.is_array():
            val = list(val)
        out[f.name] = val
    return out


@pytest.mark.parametrize('cls, build, version', ALL_VERSIONS)
def test_round_trip_every_version(cls, build, version):
    msg = build(version)
    raw = msg.encode()
    decoded = cls.decode(raw, version=version)
    assert decoded.version == version
    view = wire_view(msg, cls._struct, version)
    assert wire_view(decoded, cls._struct, version) == view
    assert decoded == msg
    # the versioned class decodes the same way, and re-encoding is stable
    assert cls[version].decode(raw) == msg
    assert decoded.encode() == raw
    # every byte is accounted for: a truncated body must not decode
    with pytest.raises(Exception):
        cls.decode(raw[:-1], version=version)
    # sanity: the representative message is not empty
    assert any(v not in (None, 0, '', [], False) for v in view.values())


@pytest.mark.parametrize('cls, build, version', ALL_VERSIONS)
def test_only_fields_of_the_version_are_present(cls, build, version):
    decoded = cls.decode(build(version).encode(), version=version)
    expected = {f.name for f in cls._struct._fields if f.for_version_q(version)}
    assert set(decoded.to_dict()) == expected


def test_round_trip_spot_checks_of_decoded_fields():
    d = LeaderAndIsrRequest.decode(leader_and_isr_request(5).encode(), version=5)
    assert (d.controller_id, d.controller_epoch, d.broker_epoch, d.type) == (1, 7, 4242, 1)
    assert [t.topic_name for t in d.topic_states] == ['orders', 'payments']
    assert [t.topic_id for t in d.topic_states] == [TOPIC_ID, TOPIC_ID2]
    p1 = d.topic_states[0].partition_states[1]
    assert (p1.partition_index, p1.leader, p1.isr, p1.replicas) == (1, 2, [2, 3], [2, 3, 4])
    assert (p1.adding_replicas, p1.removing_replicas, p1.is_new) == ([4], [3], True)
    assert d.live_leaders[2].host_name == 'broker-3.local' and d.live_leaders[2].port == 9093

    d0 = LeaderAndIsrRequest.decode(leader_and_isr_request(0).encode(), version=0)
    assert [(p.topic_name, p.partition_index) for p in d0.ungrouped_partition_states] == \
        [('orders', 0), ('orders', 1), ('payments', 0)]

    u = UpdateMetadataRequest.decode(update_metadata_request(7).encode(), version=7)
    assert u.live_brokers[0].rack == 'rack-a' and u.live_brokers[1].rack is None
    assert [(e.port, e.listener, e.security_protocol) for e in u.live_brokers[0].endpoints] == \
        [(9092, 'PLAINTEXT', 0), (9093, 'SSL', 1)]
    assert u.topic_states[0].partition_states[1].offline_replicas == [3]

    u0 = UpdateMetadataRequest.decode(update_metadata_request(0).encode(), version=0)
    assert [(b.id, b.v0_host, b.v0_port) for b in u0.live_brokers] == [(1, 'h1', 9092), (2, 'h2', 9092)]


def test_defaults_follow_kafka_schema():
    assert LeaderAndIsrRequest(version=5).broker_epoch == -1
    assert LeaderAndIsrRequest(version=5).type == 0
    assert StopReplicaRequest(version=3).broker_epoch == -1
    assert ControlledShutdownRequest(version=2).broker_epoch == -1
    assert AlterIsrRequest(version=0).broker_epoch == -1
    TS = StopReplicaRequest.StopReplicaTopicState
    assert TS.StopReplicaPartitionState(version=3).leader_epoch == -1
    assert LeaderAndIsrRequest.LeaderAndIsrPartitionState(version=1).is_new is False
    # fields outside a decoded version read as their defaults
    d = StopReplicaRequest.decode(stop_replica_request(0).encode(), version=0)
    assert d.broker_epoch == -1


# ---------------------------------------------------------------------------
# Byte-exact checks against hand-built wire bytes
# ---------------------------------------------------------------------------

def _assert_bytes(msg, expected):
    raw = msg.encode()
    assert raw == expected, '\n got %s\nwant %s' % (raw.hex(), expected.hex())
    assert type(msg).decode(expected, version=msg.version) == msg


def test_leader_and_isr_request_v0_bytes():
    PS = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    msg = LeaderAndIsrRequest(version=0, controller_id=1, controller_epoch=2, ungrouped_partition_states=[
        PS(topic_name='t', partition_index=3, controller_epoch=2, leader=1, leader_epoch=4,
           isr=[1, 2], zk_version=5, replicas=[1, 2, 3])],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name='h', port=9092)])
    expected = (i32(1) + i32(2)
                + i32(1) + string('t') + i32(3) + i32(2) + i32(1) + i32(4)
                + int32s([1, 2]) + i32(5) + int32s([1, 2, 3])
                + i32(1) + i32(1) + string('h') + i32(9092))
    _assert_bytes(msg, expected)


def test_leader_and_isr_request_v1_bytes_adds_is_new():
    PS = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    msg = LeaderAndIsrRequest(version=1, controller_id=1, controller_epoch=2, ungrouped_partition_states=[
        PS(topic_name='t', partition_index=0, controller_epoch=2, leader=1, leader_epoch=0,
           isr=[1], zk_version=0, replicas=[1], is_new=True)], live_leaders=[])
    expected = (i32(1) + i32(2)
                + i32(1) + string('t') + i32(0) + i32(2) + i32(1) + i32(0)
                + int32s([1]) + i32(0) + int32s([1]) + boolean(True)
                + i32(0))
    _assert_bytes(msg, expected)


def test_leader_and_isr_request_v5_bytes():
    TS = LeaderAndIsrRequest.LeaderAndIsrTopicState
    PS = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    msg = LeaderAndIsrRequest(version=5, controller_id=1, controller_epoch=2, broker_epoch=300, type=1,
        topic_states=[TS(topic_name='topic', topic_id=TOPIC_ID, partition_states=[
            PS(partition_index=0, controller_epoch=2, leader=1, leader_epoch=6, isr=[1, 2],
               zk_version=7, replicas=[1, 2], adding_replicas=[3], removing_replicas=[], is_new=True)])],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name='host', port=9092)])
    partition = (i32(0) + i32(2) + i32(1) + i32(6) + cint32s([1, 2]) + i32(7) + cint32s([1, 2])
                 + cint32s([3]) + cint32s([]) + boolean(True) + NO_TAGS)
    topic = cstring('topic') + TOPIC_ID.bytes + carray([partition], bytes) + NO_TAGS
    leader = i32(1) + cstring('host') + i32(9092) + NO_TAGS
    expected = (i32(1) + i32(2) + i64(300) + i8(1)
                + carray([topic], bytes) + carray([leader], bytes) + NO_TAGS)
    _assert_bytes(msg, expected)


def test_leader_and_isr_response_v0_and_v5_bytes():
    PE = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    v0 = LeaderAndIsrResponse(version=0, error_code=0,
                              partition_errors=[PE(topic_name='t', partition_index=1, error_code=5)])
    _assert_bytes(v0, i16(0) + i32(1) + string('t') + i32(1) + i16(5))
    v5 = LeaderAndIsrResponse(version=5, error_code=0, topics=[
        LeaderAndIsrResponse.LeaderAndIsrTopicError(topic_id=TOPIC_ID, partition_errors=[
            PE(partition_index=1, error_code=5)])])
    _assert_bytes(v5, i16(0) + carray([TOPIC_ID.bytes + carray([i32(1) + i16(5) + NO_TAGS], bytes)
                                       + NO_TAGS], bytes) + NO_TAGS)


def test_update_metadata_request_v0_bytes():
    PS = UpdateMetadataRequest.UpdateMetadataPartitionState
    B = UpdateMetadataRequest.UpdateMetadataBroker
    msg = UpdateMetadataRequest(version=0, controller_id=2, controller_epoch=3, ungrouped_partition_states=[
        PS(topic_name='t', partition_index=1, controller_epoch=3, leader=2, leader_epoch=4,
           isr=[2], zk_version=6, replicas=[2, 1])],
        live_brokers=[B(id=2, v0_host='b2', v0_port=9092), B(id=1, v0_host='b1', v0_port=9093)])
    expected = (i32(2) + i32(3)
                + i32(1) + string('t') + i32(1) + i32(3) + i32(2) + i32(4) + int32s([2]) + i32(6)
                + int32s([2, 1])
                + i32(2) + i32(2) + string('b2') + i32(9092) + i32(1) + string('b1') + i32(9093))
    _assert_bytes(msg, expected)


def test_update_metadata_request_v1_v2_v3_broker_bytes():
    B = UpdateMetadataRequest.UpdateMetadataBroker
    E = B.UpdateMetadataEndpoint
    for v, broker_bytes in (
            (1, i32(7) + array([i32(9092) + string('h') + i16(0)], bytes)),
            (2, i32(7) + array([i32(9092) + string('h') + i16(0)], bytes) + string('r')),
            (3, i32(7) + array([i32(9092) + string('h') + string('PLAINTEXT') + i16(0)], bytes) + string('r'))):
        ep = dict(port=9092, host='h', security_protocol=0)
        if v >= 3:
            ep['listener'] = 'PLAINTEXT'
        kw = dict(id=7, endpoints=[E(**ep)])
        if v >= 2:
            kw['rack'] = 'r'
        msg = UpdateMetadataRequest(version=v, controller_id=2, controller_epoch=3,
                                    ungrouped_partition_states=[], live_brokers=[B(**kw)])
        _assert_bytes(msg, i32(2) + i32(3) + i32(0) + i32(1) + broker_bytes)


def test_update_metadata_request_v5_bytes():
    TS = UpdateMetadataRequest.UpdateMetadataTopicState
    PS = UpdateMetadataRequest.UpdateMetadataPartitionState
    B = UpdateMetadataRequest.UpdateMetadataBroker
    msg = UpdateMetadataRequest(version=5, controller_id=2, controller_epoch=3, broker_epoch=-7,
        topic_states=[TS(topic_name='t', partition_states=[
            PS(partition_index=0, controller_epoch=3, leader=2, leader_epoch=4, isr=[2], zk_version=6,
               replicas=[2, 1], offline_replicas=[1])])],
        live_brokers=[B(id=2, endpoints=[B.UpdateMetadataEndpoint(port=9092, host='h', listener='L',
                                                                   security_protocol=2)], rack=None)])
    partition = (i32(0) + i32(3) + i32(2) + i32(4) + int32s([2]) + i32(6) + int32s([2, 1])
                 + int32s([1]))
    expected = (i32(2) + i32(3) + i64(-7)
                + array([string('t') + array([partition], bytes)], bytes)
                + array([i32(2) + array([i32(9092) + string('h') + string('L') + i16(2)], bytes)
                         + string(None)], bytes))
    _assert_bytes(msg, expected)


def test_update_metadata_request_v7_bytes():
    TS = UpdateMetadataRequest.UpdateMetadataTopicState
    PS = UpdateMetadataRequest.UpdateMetadataPartitionState
    B = UpdateMetadataRequest.UpdateMetadataBroker
    msg = UpdateMetadataRequest(version=7, controller_id=2, controller_epoch=3, broker_epoch=9,
        topic_states=[TS(topic_name='t', topic_id=TOPIC_ID, partition_states=[
            PS(partition_index=0, controller_epoch=3, leader=2, leader_epoch=4, isr=[2], zk_version=6,
               replicas=[2, 1], offline_replicas=[])])],
        live_brokers=[B(id=2, endpoints=[B.UpdateMetadataEndpoint(port=9092, host='h', listener='L',
                                                                   security_protocol=0)], rack='r'),
                      B(id=3, endpoints=[], rack=None)])
    partition = (i32(0) + i32(3) + i32(2) + i32(4) + cint32s([2]) + i32(6) + cint32s([2, 1])
                 + cint32s([]) + NO_TAGS)
    topic = cstring('t') + TOPIC_ID.bytes + carray([partition], bytes) + NO_TAGS
    broker2 = (i32(2) + carray([i32(9092) + cstring('h') + cstring('L') + i16(0) + NO_TAGS], bytes)
               + cstring('r') + NO_TAGS)
    broker3 = i32(3) + carray([], bytes) + cstring(None) + NO_TAGS
    expected = (i32(2) + i32(3) + i64(9) + carray([topic], bytes) + carray([broker2, broker3], bytes)
                + NO_TAGS)
    _assert_bytes(msg, expected)


def test_stop_replica_request_v0_bytes():
    P = StopReplicaRequest.StopReplicaPartitionV0
    msg = StopReplicaRequest(version=0, controller_id=1, controller_epoch=2, delete_partitions=True,
                             ungrouped_partitions=[P(topic_name='t', partition_index=3),
                                                   P(topic_name='u', partition_index=0)])
    expected = (i32(1) + i32(2) + boolean(True)
                + i32(2) + string('t') + i32(3) + string('u') + i32(0))
    _assert_bytes(msg, expected)


def test_stop_replica_request_v1_and_v2_bytes():
    T = StopReplicaRequest.StopReplicaTopicV1
    v1 = StopReplicaRequest(version=1, controller_id=1, controller_epoch=2, broker_epoch=5,
                            delete_partitions=False, topics=[T(name='t', partition_indexes=[0, 2])])
    _assert_bytes(v1, i32(1) + i32(2) + i64(5) + boolean(False)
                  + array([string('t') + int32s([0, 2])], bytes))
    v2 = StopReplicaRequest(version=2, controller_id=1, controller_epoch=2, broker_epoch=5,
                            delete_partitions=False, topics=[T(name='t', partition_indexes=[0, 2])])
    _assert_bytes(v2, i32(1) + i32(2) + i64(5) + boolean(False)
                  + carray([cstring('t') + cint32s([0, 2]) + NO_TAGS], bytes) + NO_TAGS)


def test_stop_replica_request_v3_bytes():
    TS = StopReplicaRequest.StopReplicaTopicState
    PS = TS.StopReplicaPartitionState
    msg = StopReplicaRequest(version=3, controller_id=1, controller_epoch=2, broker_epoch=5, topic_states=[
        TS(topic_name='t', partition_states=[PS(partition_index=0, leader_epoch=8, delete_partition=True),
                                             PS(partition_index=1, leader_epoch=-2, delete_partition=False)])])
    parts = [i32(0) + i32(8) + boolean(True) + NO_TAGS, i32(1) + i32(-2) + boolean(False) + NO_TAGS]
    expected = (i32(1) + i32(2) + i64(5)
                + carray([cstring('t') + carray(parts, bytes) + NO_TAGS], bytes) + NO_TAGS)
    _assert_bytes(msg, expected)


def test_stop_replica_response_v0_and_v2_bytes():
    PE = StopReplicaResponse.StopReplicaPartitionError
    for v in (0, 2):
        msg = StopReplicaResponse(version=v, error_code=0,
                                  partition_errors=[PE(topic_name='t', partition_index=1, error_code=3)])
        if v == 0:
            expected = i16(0) + array([string('t') + i32(1) + i16(3)], bytes)
        else:
            expected = i16(0) + carray([cstring('t') + i32(1) + i16(3) + NO_TAGS], bytes) + NO_TAGS
        _assert_bytes(msg, expected)


def test_controlled_shutdown_bytes():
    _assert_bytes(ControlledShutdownRequest(version=0, broker_id=4), i32(4))
    _assert_bytes(ControlledShutdownRequest(version=1, broker_id=4), i32(4))
    _assert_bytes(ControlledShutdownRequest(version=2, broker_id=4, broker_epoch=10), i32(4) + i64(10))
    _assert_bytes(ControlledShutdownRequest(version=3, broker_id=4, broker_epoch=10),
                  i32(4) + i64(10) + NO_TAGS)
    RP = ControlledShutdownResponse.RemainingPartition
    _assert_bytes(ControlledShutdownResponse(version=1, error_code=0,
                                             remaining_partitions=[RP(topic_name='t', partition_index=2)]),
                  i16(0) + array([string('t') + i32(2)], bytes))
    _assert_bytes(ControlledShutdownResponse(version=3, error_code=0,
                                             remaining_partitions=[RP(topic_name='t', partition_index=2)]),
                  i16(0) + carray([cstring('t') + i32(2) + NO_TAGS], bytes) + NO_TAGS)


def test_alter_isr_request_v0_bytes():
    TD = AlterIsrRequest.TopicData
    msg = AlterIsrRequest(version=0, broker_id=1, broker_epoch=42, topics=[
        TD(name='t', partitions=[TD.PartitionData(partition_index=2, leader_epoch=3, new_isr=[1, 3],
                                                  current_isr_version=17)])])
    partition = i32(2) + i32(3) + cint32s([1, 3]) + i32(17) + NO_TAGS
    expected = i32(1) + i64(42) + carray([cstring('t') + carray([partition], bytes) + NO_TAGS], bytes) + NO_TAGS
    _assert_bytes(msg, expected)


def test_alter_isr_response_v0_bytes():
    TD = AlterIsrResponse.TopicData
    msg = AlterIsrResponse(version=0, throttle_time_ms=5, error_code=0, topics=[
        TD(name='t', partitions=[TD.PartitionData(partition_index=2, error_code=0, leader_id=1,
                                                  leader_epoch=3, isr=[1, 3], current_isr_version=18)])])
    partition = i32(2) + i16(0) + i32(1) + i32(3) + cint32s([1, 3]) + i32(18) + NO_TAGS
    expected = i32(5) + i16(0) + carray([cstring('t') + carray([partition], bytes) + NO_TAGS], bytes) + NO_TAGS
    _assert_bytes(msg, expected)


def test_update_metadata_response_bytes():
    _assert_bytes(UpdateMetadataResponse(version=5, error_code=7), i16(7))
    _assert_bytes(UpdateMetadataResponse(version=6, error_code=7), i16(7) + NO_TAGS)


def test_unknown_tagged_fields_are_skipped_and_kept():
    # Kafka may add tagged fields in later versions; a flexible-version decoder must skip them.
    raw = i32(1) + i64(42) + carray([], bytes) + uvarint(1) + uvarint(9) + uvarint(2) + b'\xab\xcd'
    d = AlterIsrRequest.decode(raw, version=0)
    assert (d.broker_id, d.broker_epoch, d.topics) == (1, 42, [])
    assert d.unknown_tags == {'_9': b'\xab\xcd'}


# ---------------------------------------------------------------------------
# Headers and framing (as the protocol client frames requests: protocol.header's request header + the body)
# ---------------------------------------------------------------------------

def encode_framed_request(request, correlation_id=0, client_id='kbroker', version=None):
    if version is not None:
        request.API_VERSION = version
    if request.API_VERSION is None:
        raise ValueError('Request version is required')
    v = request.API_VERSION
    out = request_header(request.API_KEY, v, correlation_id, client_id, request.flexible_version_q(v)) + \
        bytes(request.encode(version=v))
    return i32(len(out)) + out


def test_framed_request_flexible_header_v2():
    msg = controlled_shutdown_request(3)
    framed = encode_framed_request(msg, correlation_id=77, client_id='ctl')
    header = i16(7) + i16(3) + i32(77) + string('ctl') + NO_TAGS  # client id keeps an int16 length
    body = msg.encode()
    assert framed == i32(len(header) + len(body)) + header + body
    d = ControlledShutdownRequest.decode(framed, version=3, header=True, framed=True)
    assert d == msg
    assert (d.header.request_api_key, d.header.request_api_version, d.header.correlation_id,
            d.header.client_id) == (7, 3, 77, 'ctl')


def test_framed_request_header_v1_and_version_override():
    msg = leader_and_isr_request(1)
    framed = encode_framed_request(msg, correlation_id=5, client_id='controller')
    header = i16(4) + i16(1) + i32(5) + string('controller')
    assert framed == i32(len(header) + len(msg.encode())) + header + msg.encode()

    am = AlterIsrRequest(broker_id=1, broker_epoch=2, topics=[])
    framed = encode_framed_request(am, correlation_id=1, client_id=None, version=0)
    header = i16(56) + i16(0) + i32(1) + string(None) + NO_TAGS
    assert framed == i32(len(header) + len(am.encode())) + header + am.encode()
    with pytest.raises(ValueError):
        encode_framed_request(ControlledShutdownRequest(broker_id=1))


def test_controlled_shutdown_v0_uses_request_header_v0():
    msg = ControlledShutdownRequest(version=0, broker_id=9)
    framed = encode_framed_request(msg, correlation_id=3, client_id='ignored')
    assert framed == i32(12) + i16(7) + i16(0) + i32(3) + i32(9)
    d = ControlledShutdownRequest.decode(framed, version=0, header=True, framed=True)
    assert d.broker_id == 9
    assert (d.header.request_api_key, d.header.request_api_version, d.header.correlation_id,
            d.header.client_id) == (7, 0, 3, None)
    # v1 is the same body but with the standard header (client id present)
    framed1 = encode_framed_request(ControlledShutdownRequest(version=1, broker_id=9), 3, 'c')
    assert framed1 == i32(15) + i16(7) + i16(1) + i32(3) + string('c') + i32(9)


def test_response_with_header_round_trip():
    msg = alter_isr_response(0)
    msg.with_header(correlation_id=31)
    raw = msg.encode(header=True, framed=True)
    assert raw[4:8] == i32(31) and raw[8:9] == NO_TAGS   # flexible response header v1
    d = AlterIsrResponse.decode(raw, version=0, header=True, framed=True)
    assert d == msg and d.header.correlation_id == 31

    old = update_metadata_response(0)
    old.with_header(correlation_id=32)
    assert old.encode(header=True, framed=True) == i32(6) + i32(32) + i16(43)


# ---------------------------------------------------------------------------
# kafka-python integration details
# ---------------------------------------------------------------------------

def test_response_registry_resolves_our_keys():
    for key, resp in INTER_BROKER_RESPONSES.items():
        for v in range(resp.max_version + 1):
            hdr = RequestHeader(request_api_key=key, request_api_version=v, correlation_id=1, client_id='x')
            assert hdr.get_response_class() is resp[v]
    hdr = RequestHeader(request_api_key=3, request_api_version=9, correlation_id=1, client_id='x')
    assert hdr.get_response_class() is MetadataResponse[9]


def test_import_touches_only_our_registry_keys():
    code = (
        'from kafka.protocol.api_header import ResponseClassRegistry as R\n'
        'import kafka.protocol.metadata, kafka.protocol.admin, kafka.protocol.consumer, kafka.protocol.producer\n'
        'before = dict(R._response_class_registry)\n'
        'import kbroker.protocol.interbroker\n'
        'after = R._response_class_registry\n'
        'assert all(after[k] is before[k] for k in before if k != 27), "changed existing keys"\n'
        'assert after[27].__module__ == "kbroker.protocol.interbroker"\n'
        'print(sorted(set(after) - set(before)))\n')
    # 27: our WriteTxnMarkers (Kafka 2.8's v0-1) replaces kafka-python's (1-2)
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[4, 5, 6, 7, 56]'


def test_leader_and_isr_type_field_does_not_hide_message_type():
    assert LeaderAndIsrRequest.type == 'request'
    assert LeaderAndIsrRequest[5].type == 'request'
    assert LeaderAndIsrRequest.is_request()
    assert LeaderAndIsrRequest.header_class is RequestHeader
    msg = LeaderAndIsrRequest(version=5, controller_id=1, controller_epoch=1, type=1)
    assert msg.type == 1
    msg.type = 0
    assert msg.type == 0
    assert LeaderAndIsrRequest.type == 'request'
    assert LeaderAndIsrRequest.decode(msg.encode(), version=5).type == 0


def test_common_structs_share_one_class():
    PS = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    assert LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState is PS
    assert UpdateMetadataRequest.UpdateMetadataTopicState.UpdateMetadataPartitionState is \
        UpdateMetadataRequest.UpdateMetadataPartitionState
    assert LeaderAndIsrResponse.LeaderAndIsrTopicError.LeaderAndIsrPartitionError is \
        LeaderAndIsrResponse.LeaderAndIsrPartitionError
    # constructible with any message version (the ungrouped use site alone is v0-1)
    assert PS(version=5, partition_index=1).partition_index == 1
    d0 = LeaderAndIsrRequest.decode(leader_and_isr_request(0).encode(), version=0)
    d5 = LeaderAndIsrRequest.decode(leader_and_isr_request(5).encode(), version=5)
    assert type(d0.ungrouped_partition_states[0]) is PS
    assert type(d5.topic_states[0].partition_states[0]) is PS


@pytest.mark.parametrize('cls', [*INTER_BROKER_REQUESTS.values(), *INTER_BROKER_RESPONSES.values()],
                         ids=lambda c: c.__name__)
def test_schema_field_versions_within_valid_versions(cls):
    """Every field is on the wire in at least one valid version, and closed version
    ranges end inside the valid range (catches typos such as "versions": "8+")."""
    hi = cls.max_version

    def check(fields):
        for f in fields:
            fl, fh = cls._struct.parse_versions(f['versions'])
            assert 0 <= fl <= hi, (cls.__name__, f['name'])
            assert fh == 32767 or fl <= fh <= hi, (cls.__name__, f['name'])
            check(f.get('fields', ()))
    check(cls.json['fields'])


def test_controller_request_encoders_match_the_library_byte_for_byte():
    """kbroker.protocol.controller_requests packs the controller's LeaderAndIsr v5 and UpdateMetadata v7 partition
    states by hand and splices them into the library's envelope: the bytes must be the library's own, for several
    topics (a non-ASCII name, a null topic id), empty and longer arrays, is_new both ways, any broker epoch."""
    from kbroker.protocol import controller_requests as cr
    tid = uuid.uuid4()
    U, L = UpdateMetadataRequest, LeaderAndIsrRequest
    ums = [U.UpdateMetadataPartitionState(partition_index=p, controller_epoch=3, leader=p % 3 - 1, leader_epoch=p,
                                          isr=[1, 2, 3][:p % 4], zk_version=p * 7, replicas=[3, 1, 2],
                                          offline_replicas=[2] if p % 2 else []) for p in range(150)]
    many = list(range(130))   # arrays of 126+ entries: their length takes two varint bytes
    ums.append(U.UpdateMetadataPartitionState(partition_index=150, controller_epoch=3, leader=0, leader_epoch=1,
                                              isr=many, zk_version=1, replicas=many, offline_replicas=many))
    endpoint = U.UpdateMetadataBroker.UpdateMetadataEndpoint(port=9092, host="b1", listener="PLAINTEXT",
                                                             security_protocol=0)
    brokers = [U.UpdateMetadataBroker(id=1, rack=None, endpoints=[endpoint]),
               U.UpdateMetadataBroker(id=2, rack="r2", endpoints=[])]
    full = U(version=7, controller_id=1, controller_epoch=3, broker_epoch=2 ** 40, live_brokers=brokers, topic_states=[
        U.UpdateMetadataTopicState(topic_name="ordres-é", topic_id=tid, partition_states=ums),
        U.UpdateMetadataTopicState(topic_name="x", topic_id=None, partition_states=ums[:1])])
    pieces = [cr.update_metadata_partition(s.partition_index, s.controller_epoch, s.leader, s.leader_epoch, s.isr,
                                           s.zk_version, s.replicas, s.offline_replicas) for s in ums]
    body = cr.encode(U(version=7, controller_id=1, controller_epoch=3, broker_epoch=5, topic_states=[],
                       live_brokers=brokers), cr.topic_states([("ordres-é", tid, pieces), ("x", None, pieces[:1])]))
    assert cr.with_broker_epoch(body, 2 ** 40) == bytes(full.encode(version=7))

    lais = [L.LeaderAndIsrPartitionState(partition_index=p, controller_epoch=3, leader=p % 3, leader_epoch=p,
                                         isr=[1, 2],
                                         zk_version=p, replicas=[1, 2], adding_replicas=[], removing_replicas=[],
                                         is_new=bool(p % 2)) for p in range(150)]
    lais.append(L.LeaderAndIsrPartitionState(partition_index=150, controller_epoch=3, leader=0, leader_epoch=1,
                                             isr=many,
                                             zk_version=1, replicas=many, adding_replicas=[], removing_replicas=[],
                                             is_new=True))
    leaders = [L.LeaderAndIsrLiveLeader(broker_id=1, host_name="b1", port=9092)]
    full = L(version=5, controller_id=1, controller_epoch=3, broker_epoch=9, type=0, live_leaders=leaders,
             topic_states=[L.LeaderAndIsrTopicState(topic_name="t", topic_id=tid, partition_states=lais)])
    pieces = [cr.leader_and_isr_partition(s.partition_index, s.controller_epoch, s.leader, s.leader_epoch, s.isr,
                                          s.zk_version, s.replicas, s.is_new) for s in lais]
    body = cr.encode(L(version=5, controller_id=1, controller_epoch=3, broker_epoch=9, type=0, topic_states=[],
                       live_leaders=leaders), cr.topic_states([("t", tid, pieces)]))
    assert body == bytes(full.encode(version=5))
