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


def list_latest(broker, topic: str, isolation: int, partition: int = 0, version: int = 2) -> int:
    R = ListOffsetsRequest
    req = R(version=version, replica_id=-1, isolation_level=isolation, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, timestamp=-1, current_leader_epoch=-1, max_num_offsets=1)])])
    c = client_for(broker)
    try:
        resp = c.send(req)
    finally:
        c.close()
    [t] = resp.topics
    [p] = t.partitions
    assert p.error_code == NONE, p
    return p.offset


def txnindex_entries(path: str):
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) % 34 == 0, len(data)
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]


def partition_dir(broker, topic: str, partition: int = 0) -> str:
    import os
    return os.path.join(broker.dir, "data", f"{topic}-{partition}")


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(env):
    c, b = env
    new_topic(c, b, "lso")
    p1, e1 = init_producer_id(b)
    p2, e2 = init_producer_id(b)
    assert produce(b, "lso", v2_batch([b"plain"])).error_code == NONE                      # 0
    assert produce(b, "lso", txn_batch([b"t1-a", b"t1-b"], p1, e1, 0)).error_code == NONE  # 1-2
    assert produce(b, "lso", txn_batch([b"t2-a"], p2, e2, 0)).error_code == NONE           # 3
    # Both transactions open: read_committed sees only offset 0; read_uncommitted everything.
    p = fetch_partition(b, "lso", 0, READ_COMMITTED)
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (4, 1, [])
    assert [o for o, _, _ in batches(p.records)] == [0]
    p = fetch_partition(b, "lso", 0, READ_UNCOMMITTED)
    assert (p.last_stable_offset, p.aborted_transactions) == (1, None)
    assert [o for o, _, _ in batches(p.records)] == [0, 1, 3]
    assert (list_latest(b, "lso", READ_COMMITTED), list_latest(b, "lso", READ_UNCOMMITTED)) == (1, 4)
    # p1 aborts (marker at 4): the LSO moves to p2's first offset; the abort is listed.
    assert write_markers(b, [(p1, e1, False, 0, "lso", [0])]) == [{("lso", 0): NONE}]
    p = fetch_partition(b, "lso", 0, READ_COMMITTED)
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (5, 3, [(p1, 1)])
    assert [o for o, _, _ in batches(p.records)] == [0, 1]
    # p2 commits (marker at 5): everything is stable.
    assert write_markers(b, [(p2, e2, True, 0, "lso", [0])]) == [{("lso", 0): NONE}]
    p = fetch_partition(b, "lso", 0, READ_COMMITTED)
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (6, 6, [(p1, 1)])
    assert [o for o, _, _ in batches(p.records)] == [0, 1, 3, 4, 5]
    assert fetch_partition(b, "lso", 3, READ_COMMITTED).aborted_transactions == [(p1, 1)]   # marker at 4 >= 3
    assert fetch_partition(b, "lso", 5, READ_COMMITTED).aborted_transactions == []
    assert list_latest(b, "lso", READ_COMMITTED) == 6
    assert fetch_partition(b, "lso", 0, READ_COMMITTED, version=4).last_stable_offset == 6
    # The abort is in the segment's .txnindex: version 0, pid, first 1, last (marker) 4, LSO then 3 (p2 open).
    assert txnindex_entries(partition_dir(b, "lso") + "/00000000000000000000.txnindex") == [(0, p1, 1, 4, 3)]
    # An empty transaction's abort (no data) is not indexed.
    assert write_markers(b, [(p1, e1, False, 0, "lso", [0])]) == [{("lso", 0): NONE}]
    assert txnindex_entries(partition_dir(b, "lso") + "/00000000000000000000.txnindex") == [(0, p1, 1, 4, 3)]


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_open_and_aborted_transactions_survive_a_restart(cluster_factory, how):
    from tests.integration.test_crash_recovery import BROKER_PROPS, restart, wait_gone
    c = cluster_factory(1, **BROKER_PROPS)
    b = c.brokers[1]
    new_topic(c, b, "rs")
    p1, e1 = init_producer_id(b)
    p2, e2 = init_producer_id(b)
    assert produce(b, "rs", txn_batch([b"x"], p1, e1, 0)).error_code == NONE     # 0
    assert write_markers(b, [(p1, e1, False, 7, "rs", [0])]) == [{("rs", 0): NONE}]  # 1
    assert produce(b, "rs", txn_batch([b"y"], p2, e2, 0)).error_code == NONE     # 2, stays open
    assert produce(b, "rs", v2_batch([b"z"])).error_code == NONE                  # 3
    if how == "sigterm":
        assert b.terminate() == 0
    else:
        b.kill9()
        wait_gone(c, 1)
    restart(c, b, "rs")
    p = fetch_partition(b, "rs", 0, READ_COMMITTED)
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (4, 2, [(p1, 0)])
    assert list_latest(b, "rs", READ_COMMITTED) == 2
    # The restored open transaction still refuses p2's non-transactional writes, and p1's coordinator epoch
    # is remembered.
    assert produce(b, "rs", v2_batch([b"w"], producer_id=p2, producer_epoch=e2,
                                     base_sequence=1)).error_code == INVALID_TXN_STATE
    assert write_markers(b, [(p1, e1, True, 6, "rs", [0])]) == [{("rs", 0): TRANSACTION_COORDINATOR_FENCED}]
    assert write_markers(b, [(p2, e2, True, 7, "rs", [0])]) == [{("rs", 0): NONE}]
    assert list_latest(b, "rs", READ_COMMITTED) == 5
    assert txnindex_entries(partition_dir(b, "rs") + "/00000000000000000000.txnindex") == [(0, p1, 0, 1, 2)]


def mixed_transactions(c, b, topic: str, partitions: int = 2):
    """On each partition: plain records, a committed transaction, an aborted one, interleaved with a second
    producer's committed one; returns the committed values per partition in offset order."""
    new_topic(c, b, topic, partitions)
    expected = {}
    for part in range(partitions):
        p1, e1 = init_producer_id(b)
        p2, e2 = init_producer_id(b)

        def send(records):
            assert produce(b, topic, records, partition=part).error_code == NONE

        def mark(pid, epoch, committed):
            assert write_markers(b, [(pid, epoch, committed, 0, topic, [part])]) == [{(topic, part): NONE}]
        send(v2_batch([b"plain-%d" % part]))
        send(txn_batch([b"c1-%d" % part, b"c2-%d" % part], p1, e1, 0))
        send(txn_batch([b"other-%d" % part], p2, e2, 0))
        mark(p1, e1, True)
        send(txn_batch([b"ab1-%d" % part, b"ab2-%d" % part], p1, e1, 2))
        send(txn_batch([b"ab3-%d" % part], p1, e1, 4))
        mark(p2, e2, True)
        mark(p1, e1, False)
        send(v2_batch([b"tail-%d" % part]))
        expected[part] = [b"plain-%d" % part, b"c1-%d" % part, b"c2-%d" % part, b"other-%d" % part,
                          b"tail-%d" % part]
    return expected


def test_read_committed_clients_see_exactly_the_committed_records(env):
    """librdkafka and kafka-python drop the aborted records from aborted_transactions and the control batches:
    what proves the wire format. read_uncommitted sees the aborted ones too."""
    import confluent_kafka
    from kafka import KafkaConsumer, TopicPartition
    c, b = env
    expected = mixed_transactions(c, b, "rc")
    want = sorted(v for vs in expected.values() for v in vs)

    def confluent(isolation, count):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{isolation}",
                                             "auto.offset.reset": "earliest", "isolation.level": isolation,
                                             "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition("rc", p, 0) for p in expected])
        got, deadline = [], time.time() + 8
        while time.time() < deadline and len(got) < count:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append((m.partition(), m.value()))
        consumer.close()
        return got

    got = confluent("read_committed", len(want) + 1)   # waits for one too many: nothing more may come
    assert sorted(v for _, v in got) == want
    for part, values in expected.items():
        assert [v for p, v in got if p == part] == values
    assert len(confluent("read_uncommitted", len(want) + 6)) == len(want) + 6   # 3 aborted records per partition

    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=3000)
    consumer.assign([TopicPartition("rc", p) for p in expected])
    got = [(m.partition, m.value) for m in consumer]
    consumer.close()
    assert sorted(v for _, v in got) == want
    for part, values in expected.items():
        assert [v for p, v in got if p == part] == values
