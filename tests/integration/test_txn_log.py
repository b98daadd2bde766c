"""The partition side of transactions against real brokers: WriteTxnMarkers, the last stable offset,
read_committed Fetch and ListOffsets, `.txnindex`, producer state of open transactions across restarts.

With no transaction coordinator involved, the test plays it: an idempotent producer id from InitProducerId,
transactional batches (attribute bit 4) sent with Produce, and WriteTxnMarkers sent by hand through kbroker's
protocol client.
"""
from __future__ import annotations

import os
import struct
import threading
import time

import pytest
from admin_cli.main import cli as kadmin
from aiokafka.record.default_records import DefaultRecordBatch
from click.testing import CliRunner
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from tests.clients._util import raw_request
from tests.integration.conftest import wait_until
from tests.integration.test_produce_fetch_bad_input import (NONE, OUT_OF_ORDER_SEQUENCE_NUMBER, TIMEOUT, create_topic,
                                                            init_producer_id, v2_batch, wait_leader)
from tests.txn_helpers import produce_txn, txn_batch, write_markers

INVALID_RECORD = 87
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def fetch_partition(broker, topic: str, offset: int, isolation: int, version: int = 11, partition: int = 0,
                    max_wait_ms: int = 0, min_bytes: int = 0):
    F = FetchRequest
    req = F(version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=10 ** 7,
            isolation_level=isolation, session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                F.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                            log_start_offset=-1, partition_max_bytes=10 ** 7)])],
            forgotten_topics_data=[], rack_id="")
    [t] = raw_request(broker.bootstrap, req, TIMEOUT).responses
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
    assert produce_txn(b, "mk", txn_batch([b"a", b"b"], pid, epoch, 0)).error_code == NONE
    assert write_markers(b, [(pid, epoch, True, 3, "mk", [0])]) == [{("mk", 0): NONE}]
    assert produce_txn(b, "mk", txn_batch([b"c"], pid, epoch, 2)).error_code == NONE
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


def test_a_batch_repeating_one_of_an_aborted_transaction_is_refused_not_swallowed(env):
    """The sequence range of an aborted transaction's batch sent again in the next transaction (same epoch: what
    librdkafka did after a broker was killed under the batch) is OUT_OF_ORDER_SEQUENCE_NUMBER, so that transaction
    aborts; Kafka answers it as a duplicate and the records are acknowledged without being appended."""
    c, b = env
    new_topic(c, b, "reuse")
    pid, epoch = init_producer_id(b)
    first = txn_batch([b"a", b"b"], pid, epoch, 0)
    assert produce_txn(b, "reuse", first).error_code == NONE
    assert produce_txn(b, "reuse", first).base_offset == 0                     # a retry in the transaction
    assert write_markers(b, [(pid, epoch, False, 3, "reuse", [0])]) == [{("reuse", 0): NONE}]
    again = produce_txn(b, "reuse", txn_batch([b"a2", b"b2"], pid, epoch, 0))
    assert again.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_txn(b, "reuse", txn_batch([b"c"], pid, epoch, 2)).error_code == NONE
    assert [o for o, _, _ in batches(fetch_partition(b, "reuse", 0, READ_UNCOMMITTED).records)] == [0, 2, 3]


def test_non_transactional_batch_during_an_open_transaction_and_control_batches_from_clients(env):
    c, b = env
    new_topic(c, b, "its")
    pid, epoch = init_producer_id(b)
    assert produce_txn(b, "its", txn_batch([b"a"], pid, epoch, 0)).error_code == NONE
    plain = produce_txn(b, "its", v2_batch([b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=1))
    assert plain.error_code == INVALID_TXN_STATE
    control = bytearray(txn_batch([b"x"], pid, epoch, 1))
    struct.pack_into(">h", control, 21, 0x30)
    import crc32c
    struct.pack_into(">I", control, 17, crc32c.crc32c(bytes(control[21:])))
    assert produce_txn(b, "its", control).error_code == INVALID_RECORD
    # Transactional records need a transactional id (Kafka authorizes it; any id passes here).
    assert produce_txn(b, "its", txn_batch([b"c"], pid, epoch, 1), transactional_id=None).error_code == \
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce_txn(b, "its", txn_batch([b"c"], pid, epoch, 1)).error_code == NONE


def list_latest(broker, topic: str, isolation: int, partition: int = 0, version: int = 2) -> int:
    R = ListOffsetsRequest
    req = R(version=version, replica_id=-1, isolation_level=isolation, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, timestamp=-1, current_leader_epoch=-1, max_num_offsets=1)])])
    [t] = raw_request(broker.bootstrap, req, TIMEOUT).topics
    [p] = t.partitions
    assert p.error_code == NONE, p
    return p.offset


def txnindex_entries(path: str):
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) % 34 == 0, len(data)
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]


def partition_dir(broker, topic: str, partition: int = 0) -> str:
    return os.path.join(broker.dir, "data", f"{topic}-{partition}")


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(env):
    c, b = env
    new_topic(c, b, "lso")
    p1, e1 = init_producer_id(b)
    p2, e2 = init_producer_id(b)
    assert produce_txn(b, "lso", v2_batch([b"plain"])).error_code == NONE                      # 0
    assert produce_txn(b, "lso", txn_batch([b"t1-a", b"t1-b"], p1, e1, 0)).error_code == NONE  # 1-2
    assert produce_txn(b, "lso", txn_batch([b"t2-a"], p2, e2, 0)).error_code == NONE           # 3
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
    assert produce_txn(b, "rs", txn_batch([b"x"], p1, e1, 0)).error_code == NONE     # 0
    assert write_markers(b, [(p1, e1, False, 7, "rs", [0])]) == [{("rs", 0): NONE}]  # 1
    assert produce_txn(b, "rs", txn_batch([b"y"], p2, e2, 0)).error_code == NONE     # 2, stays open
    assert produce_txn(b, "rs", v2_batch([b"z"])).error_code == NONE                  # 3
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
    assert produce_txn(b, "rs", v2_batch([b"w"], producer_id=p2, producer_epoch=e2,
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
            assert produce_txn(b, topic, records, partition=part).error_code == NONE

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


def magic1_offsets(data: bytes) -> list[int]:
    """The offsets of a magic 1 message set."""
    offsets, pos = [], 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        assert data[pos + 16] == 1                                   # magic 1
        offsets.append(offset)
        pos += 12 + size
    return offsets


def test_old_fetchers_get_no_control_batches(env):
    """Fetch v2-3 reads magic 1: the markers are dropped by the down-conversion, the data is converted."""
    c, b = env
    new_topic(c, b, "old")
    pid, epoch = init_producer_id(b)
    assert produce_txn(b, "old", txn_batch([b"a", b"b"], pid, epoch, 0)).error_code == NONE   # 0-1
    assert write_markers(b, [(pid, epoch, True, 0, "old", [0])]) == [{("old", 0): NONE}]   # 2
    assert produce_txn(b, "old", v2_batch([b"c"])).error_code == NONE                          # 3
    assert magic1_offsets(bytes(fetch_partition(b, "old", 0, READ_UNCOMMITTED, version=3).records)) == [0, 1, 3]


def test_an_old_fetcher_at_a_trailing_marker_waits_for_records(env):
    """A marker at the end of the log converts to nothing for Fetch v3 (magic 1): the fetch waits there as at the
    log end, up to max_wait_ms, and answers as soon as a record comes (answered at once, the consumer would ask
    again at once, again and again)."""
    c, b = env
    new_topic(c, b, "old-wait")
    pid, epoch = init_producer_id(b)
    assert produce_txn(b, "old-wait", txn_batch([b"a"], pid, epoch, 0)).error_code == NONE          # 0
    assert write_markers(b, [(pid, epoch, True, 0, "old-wait", [0])]) == [{("old-wait", 0): NONE}]   # 1
    start = time.monotonic()
    p = fetch_partition(b, "old-wait", 1, READ_UNCOMMITTED, version=3, max_wait_ms=1000, min_bytes=1)
    assert p.error_code == NONE and magic1_offsets(bytes(p.records)) == []
    assert time.monotonic() - start >= 0.9
    later = threading.Timer(0.5, produce_txn, (b, "old-wait", v2_batch([b"b"])))                     # 2
    later.start()
    start = time.monotonic()
    p = fetch_partition(b, "old-wait", 1, READ_UNCOMMITTED, version=3, max_wait_ms=8000, min_bytes=1)
    later.join()
    assert p.error_code == NONE and magic1_offsets(bytes(p.records)) == [2]
    assert time.monotonic() - start < 5


def leader_of(cluster, topic: str) -> int:
    return cluster.zk.get_partition_state(topic, 0).leader


def test_followers_apply_markers_and_a_new_leader_keeps_the_lso_and_the_aborts(cluster_factory):
    c = cluster_factory(3)
    create_topic(c, "rep", "--partitions", "1", "--replication-factor", "3", "--config", "min.insync.replicas=2")
    wait_until(lambda: (s := c.zk.get_partition_state("rep", 0)) is not None and len(s.isr) == 3, 20,
               message="ISR of 3")
    leader = c.brokers[leader_of(c, "rep")]
    wait_leader(leader, "rep")
    p1, e1 = init_producer_id(leader)
    p2, e2 = init_producer_id(leader)

    def send(records):
        assert produce_txn(leader, "rep", records, acks=-1).error_code == NONE
    send(txn_batch([b"x1", b"x2"], p1, e1, 0))                                                  # 0-1
    assert write_markers(leader, [(p1, e1, False, 2, "rep", [0])]) == [{("rep", 0): NONE}]    # 2
    send(v2_batch([b"plain"]))                                                                  # 3
    send(txn_batch([b"open"], p2, e2, 0))                                                       # 4, stays open
    send(v2_batch([b"after"]))                                                                  # 5
    # every replica has the abort in its .txnindex (followers index what they copy)
    for broker in c.brokers.values():
        path = partition_dir(broker, "rep") + "/00000000000000000000.txnindex"
        wait_until(lambda: os.path.exists(path), 10, message=f"{path}")
        assert txnindex_entries(path) == [(0, p1, 0, 2, 3)]
    follower = next(x for x in c.brokers.values() if x.id != leader.id)
    assert write_markers(follower, [(p2, e2, True, 2, "rep", [0])]) == [{("rep", 0): NOT_LEADER_OR_FOLLOWER}]
    old = leader.id
    leader.kill9()
    wait_until(lambda: leader_of(c, "rep") not in (old, -1), 30, message="a new leader")
    new = c.brokers[leader_of(c, "rep")]
    wait_leader(new, "rep")
    wait_until(lambda: fetch_partition(new, "rep", 0, READ_UNCOMMITTED).high_watermark == 6, 20,
               message="the high watermark on the new leader")
    p = fetch_partition(new, "rep", 0, READ_COMMITTED)
    assert (p.last_stable_offset, p.aborted_transactions) == (4, [(p1, 0)])
    assert [o for o, _, _ in batches(p.records)] == [0, 2, 3]
    # the new leader checks markers against the replicated producer state, then completes p2's transaction
    assert write_markers(new, [(p1, e1, True, 1, "rep", [0])]) == [{("rep", 0): TRANSACTION_COORDINATOR_FENCED}]
    assert write_markers(new, [(p2, e2, True, 2, "rep", [0])]) == [{("rep", 0): NONE}]
    assert list_latest(new, "rep", READ_COMMITTED) == 7


# ---- producer snapshots across several segments ------------------------------------------------------------------

SMALL_SEGMENTS = ("--partitions", "1", "--replication-factor", "1", "--config", "segment.bytes=400",
                  "--config", "file.delete.delay.ms=0")


def snapshot_offsets(pdir: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(pdir) if n.endswith(".snapshot"))


def checkpointed_recovery_point(broker, topic: str) -> int | None:
    path = os.path.join(broker.dir, "data", "recovery-point-offset-checkpoint")
    try:
        with open(path) as f:
            lines = f.read().splitlines()[2:]
    except FileNotFoundError:
        return None
    found = [int(o) for t, p, o in (line.split() for line in lines) if (t, p) == (topic, "0")]
    return found[0] if found else None


def test_producer_state_after_kill9_of_a_log_that_rolled(cluster_factory):
    """Kafka's snapshots: one per roll; after each recovery-point checkpoint only those of the last two segments
    stay. After kill -9 the broker loads the snapshot of the segment holding the recovery point and replays
    that segment only: the idempotent producer's retry is still a duplicate, the transaction opened segments
    earlier still holds the LSO, the earlier abort is still listed for read_committed."""
    from tests.integration.test_crash_recovery import (BROKER_PROPS, log_since, restart, segment_bases,
                                                       wait_gone)
    from tests.integration.test_produce_fetch_bad_input import OUT_OF_ORDER_SEQUENCE_NUMBER
    c = cluster_factory(1, **BROKER_PROPS, **{"log.flush.offset.checkpoint.interval.ms": 200})
    b, topic = c.brokers[1], "rolled"
    create_topic(c, topic, *SMALL_SEGMENTS)
    wait_leader(b, topic)
    idem, e1 = init_producer_id(b)
    opened, e2 = init_producer_id(b)
    aborted, e3 = init_producer_id(b)
    assert produce_txn(b, topic, txn_batch([b"gone"], aborted, e3, 0)).error_code == NONE          # 0
    assert write_markers(b, [(aborted, e3, False, 0, topic, [0])]) == [{(topic, 0): NONE}]         # 1
    assert produce_txn(b, topic, txn_batch([b"open"], opened, e2, 0)).error_code == NONE           # 2

    def send(seq):
        return produce_txn(b, topic, v2_batch([b"v%03d" % seq + b"." * 100], producer_id=idem, producer_epoch=e1,
                                              base_sequence=seq), transactional_id=None)
    for seq in range(12):
        assert send(seq).base_offset == 3 + seq
    pdir = partition_dir(b, topic)
    bases = segment_bases(pdir)
    assert len(bases) >= 5, bases
    # the snapshots of the rolls, then only those of the last two segments once the recovery point is checkpointed
    wait_until(lambda: checkpointed_recovery_point(b, topic) == bases[-1], 20, message="recovery point checkpoint")
    wait_until(lambda: snapshot_offsets(pdir) == bases[-2:], 20, message=f"snapshots {bases[-2:]}")

    b.kill9()
    wait_gone(c, 1)
    mark = restart(c, b, topic)
    assert f"{topic}-0: loaded producer state from snapshot {bases[-1]}" in log_since(b, mark)
    assert snapshot_offsets(pdir) == bases[-2:] + [15]            # and one at the log end

    dup = send(11)
    assert (dup.error_code, dup.base_offset) == (NONE, 14), f"the retry is not recognised as a duplicate: {dup}"
    assert send(13).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(12).base_offset == 15
    p = fetch_partition(b, topic, 0, READ_COMMITTED)
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (16, 2, [(aborted, 0)])
    assert list_latest(b, topic, READ_COMMITTED) == 2
    assert produce_txn(b, topic, v2_batch([b"w"], producer_id=opened, producer_epoch=e2,
                                          base_sequence=1)).error_code == INVALID_TXN_STATE
    assert write_markers(b, [(opened, e2, True, 0, topic, [0])]) == [{(topic, 0): NONE}]
    assert list_latest(b, topic, READ_COMMITTED) == 17


def test_retention_deletes_the_snapshots_of_the_segments_it_deletes(cluster_factory):
    from tests.integration.test_crash_recovery import BROKER_PROPS, segment_bases
    c = cluster_factory(1, **BROKER_PROPS, **{"log.retention.check.interval.ms": 200,
                                              "log.flush.offset.checkpoint.interval.ms": 3600000})
    b, topic = c.brokers[1], "retained"
    # retention is switched on only once every segment is written: on while producing, it could delete the old
    # active segment mid-way (as Kafka does) and the segment layout asserted below would be a race
    create_topic(c, topic, *SMALL_SEGMENTS, "--config", "retention.ms=-1")
    wait_leader(b, topic)
    pid, epoch = init_producer_id(b)
    old = int(time.time() * 1000) - 2 * 3600000
    for seq in range(10):
        batch = v2_batch([b"v%03d" % seq + b"." * 100], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         timestamp=old if seq < 6 else None)
        assert produce_txn(b, topic, batch, transactional_id=None).base_offset == seq
    pdir = partition_dir(b, topic)
    bases = segment_bases(pdir)
    assert bases == [0, 2, 4, 6, 8], bases
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "alter-config", "--topic", topic,
                                         "--add-config", "retention.ms=3600000"])
    assert result.exit_code == 0, result.output
    # the segments are renamed `.deleted` first and their files removed file.delete.delay.ms later
    wait_until(lambda: segment_bases(pdir) == [6, 8] and not [n for n in os.listdir(pdir) if n.endswith(".deleted")],
               20, message="retention of the old segments")
    assert snapshot_offsets(pdir) == [6, 8]
    dup = produce_txn(b, topic, v2_batch([b"v009" + b"." * 100], producer_id=pid, producer_epoch=epoch,
                                         base_sequence=9), transactional_id=None)
    assert (dup.error_code, dup.base_offset) == (NONE, 9)
