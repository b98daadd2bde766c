"""The partition side of transactions against real brokers: WriteTxnMarkers, the last stable offset,
read_committed Fetch and ListOffsets, `.txnindex`, producer state of open transactions across restarts.

With no transaction coordinator involved, the test plays it: an idempotent producer id from InitProducerId,
transactional batches (attribute bit 4) sent with Produce, and WriteTxnMarkers sent by hand through kbroker's
protocol client.
"""
from __future__ import annotations

import struct
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from kbroker.protocol.interbroker import WriteTxnMarkersRequest
from tests.integration.test_produce_fetch_bad_input import (NONE, client_for, create_topic, init_producer_id,
                                                            produce, v2_batch, wait_leader)

INVALID_RECORD = 87
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
UNKNOWN_TOPIC_OR_PARTITION = 3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def txn_batch(values, pid: int, epoch: int, seq: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=10 ** 7)
    ts = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts, key=None, value=v, headers=[])
    return bytes(b.build())


def write_markers(broker, markers, version: int = 0):
    """markers: [(pid, epoch, committed, coordinator epoch, topic, [partitions])] -> [{(topic, p): error}]."""
    M = WriteTxnMarkersRequest.WritableTxnMarker
    req = WriteTxnMarkersRequest(version=version, markers=[
        M(producer_id=pid, producer_epoch=epoch, transaction_result=committed, coordinator_epoch=coord,
          topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=parts)])
        for pid, epoch, committed, coord, topic, parts in markers])
    c = client_for(broker)
    try:
        resp = c.send(req)
    finally:
        c.close()
    return [{(t.name, p.partition_index): p.error_code for t in m.topics for p in t.partitions}
            for m in resp.markers]


def fetch_partition(broker, topic: str, offset: int, isolation: int, version: int = 11, partition: int = 0):
    F = FetchRequest
    req = F(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=10 ** 7,
            isolation_level=isolation, session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                F.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                            log_start_offset=-1, partition_max_bytes=10 ** 7)])],
            forgotten_topics_data=[], rack_id="")
    c = client_for(broker)
    try:
        resp = c.send(req)
    finally:
        c.close()
    [t] = resp.responses
    [p] = t.partitions
    return p


def batches(data: bytes):
    """[(base offset, is control, [(key, value)])] of v2 record data."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        if pos + 12 + size > len(data):
            break
        b = DefaultRecordBatch(data[pos:pos + 12 + size])
        out.append((b.base_offset, b.is_control_batch, [(r.key, r.value) for r in b]))
        pos += 12 + size
    return out


@pytest.fixture
def env(cluster1):
    b = cluster1.brokers[1]
    return cluster1, b


def new_topic(cluster, broker, name: str, partitions: int = 1) -> None:
    create_topic(cluster, name, "--partitions", str(partitions), "--replication-factor", "1")
    wait_leader(broker, name, range(partitions))


def test_markers_are_control_batches_with_kafkas_checks(env):
    c, b = env
    new_topic(c, b, "mk")
    pid, epoch = init_producer_id(b)
    assert produce(b, "mk", txn_batch([b"a", b"b"], pid, epoch, 0)).error_code == NONE
    assert write_markers(b, [(pid, epoch, True, 3, "mk", [0])]) == [{("mk", 0): NONE}]
    assert produce(b, "mk", txn_batch([b"c"], pid, epoch, 2)).error_code == NONE
    assert write_markers(b, [(pid, epoch, False, 3, "mk", [0])], version=1) == [{("mk", 0): NONE}]
    got = batches(fetch_partition(b, "mk", 0, READ_UNCOMMITTED).records)
    assert got == [(0, False, [(None, b"a"), (None, b"b")]),
                   (2, True, [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x03")]),   # COMMIT, coordinator epoch 3
                   (3, False, [(None, b"c")]),
                   (4, True, [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x03")])]   # ABORT
    # A newer producer epoch, then the old one and an older coordinator epoch are fenced.
    assert write_markers(b, [(pid, epoch + 1, False, 4, "mk", [0])]) == [{("mk", 0): NONE}]
    assert write_markers(b, [(pid, epoch, False, 4, "mk", [0]), (pid, epoch + 1, True, 3, "mk", [0]),
                             (pid, epoch + 1, True, 4, "nope", [0])]) == [
        {("mk", 0): INVALID_PRODUCER_EPOCH}, {("mk", 0): TRANSACTION_COORDINATOR_FENCED},
        {("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}]
    assert len(batches(fetch_partition(b, "mk", 0, READ_UNCOMMITTED).records)) == 5


def test_non_transactional_batch_during_an_open_transaction_and_control_batches_from_clients(env):
    c, b = env
    new_topic(c, b, "its")
    pid, epoch = init_producer_id(b)
    assert produce(b, "its", txn_batch([b"a"], pid, epoch, 0)).error_code == NONE
    plain = produce(b, "its", v2_batch([b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=1))
    assert plain.error_code == INVALID_TXN_STATE
    control = bytearray(txn_batch([b"x"], pid, epoch, 1))
    struct.pack_into(">h", control, 21, 0x30)
    import crc32c
    struct.pack_into(">I", control, 17, crc32c.crc32c(bytes(control[21:])))
    assert produce(b, "its", control).error_code == INVALID_RECORD
