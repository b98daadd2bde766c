"""TxnOffsetCommit and transactional offsets in the group coordinator, over the wire against real brokers:
offsets written in a producer's transaction are pending (OffsetFetch shows the last stable offset, v7
require_stable answers UNSTABLE_OFFSET_COMMIT), written as Kafka's coordinator writes them (a transactional
batch of the producer on the group's `__consumer_offsets` partition), made visible by a COMMIT marker and
dropped by an ABORT marker (WriteTxnMarkers sent by the test, playing the transaction coordinator), replayed
as such after a restart or a kill -9 of the coordinator, and checked as Kafka checks them (member, generation,
producer epoch, unknown partitions)."""
from __future__ import annotations

import functools

from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import TxnOffsetCommitRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kbroker.coordinator.schemas import OffsetKey, partition_for, read_key, read_offset_value
from kbroker.protocol.errors import Errors
from kbroker.protocol.interbroker import WriteTxnMarkersRequest
from tests.clients._util import create_topic, log_batches, raw_request
from tests.integration.test_group_coordinator import (FAST, OFFSETS, commit, coordinator_of, join_until_member,
                                                      sync)
from tests.integration.conftest import wait_until

call = functools.partial(raw_request, client_id="txn-offsets-test")


def txn_commit(bootstrap, group, version, offsets, producer_id=4000, epoch=0, member_id="", generation=-1,
               instance=None):
    """{tp: error} of one TxnOffsetCommit."""
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    by_topic: dict = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=o, committed_leader_epoch=2,
                                            committed_metadata=f"tx{o}"))
    r = call(bootstrap, TxnOffsetCommitRequest(
        version=version, transactional_id="txn-1", group_id=group, producer_id=producer_id, producer_epoch=epoch,
        generation_id=generation, member_id=member_id, group_instance_id=instance,
        topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return {(t.name, p.partition_index): Errors(p.error_code) for t in r.topics for p in t.partitions}


def fetch(bootstrap, group, partitions, version=7, require_stable=False):
    """{tp: (offset, error)}."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    by_topic: dict = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    r = call(bootstrap, OffsetFetchRequest(version=version, group_id=group, require_stable=require_stable,
                                           topics=[T(name=t, partition_indexes=ps) for t, ps in by_topic.items()]))
    assert r.error_code == 0, Errors(r.error_code)
    return {(t.name, p.partition_index): (p.committed_offset, Errors(p.error_code)) for t in r.topics
            for p in t.partitions}


def write_marker(bootstrap, group, partitions_count, producer_id, committed, epoch=0):
    """WriteTxnMarkers for the group's offsets partition, to its leader (the coordinator); its error."""
    M = WriteTxnMarkersRequest.WritableTxnMarker
    r = call(bootstrap, WriteTxnMarkersRequest(version=1, markers=[
        M(producer_id=producer_id, producer_epoch=epoch, transaction_result=committed, coordinator_epoch=0,
          topics=[M.WritableTxnMarkerTopic(name=OFFSETS,
                                           partition_indexes=[partition_for(group, partitions_count)])])]))
    (marker,) = r.markers
    return Errors(marker.topics[0].partitions[0].error_code)


def test_txn_offsets_are_pending_unstable_and_survive_a_restart(cluster_factory):
    c = cluster_factory(1, **{"offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 1, **FAST})
    create_topic(c, "t", 2, 1)
    b = c.brokers[1]
    group = "txn-group"
    coordinator_of(c, group)
    bs = b.bootstrap
    ranges = {k.api_key: (k.min_version, k.max_version) for k in call(bs, ApiVersionsRequest(version=0)).api_keys}
    assert (ranges[28], ranges[9]) == ((0, 3), (0, 7))

    assert commit(bs, group, 8, {("t", 0): 5}) == {("t", 0): Errors.NONE}
    tps = [("t", 0), ("t", 1)]
    for version in (0, 1, 2, 3):
        assert txn_commit(bs, group, version, {("t", 0): 10 + version, ("t", 1): 20 + version}, epoch=1) == {
            ("t", 0): Errors.NONE, ("t", 1): Errors.NONE}, version
    # Pending: the last stable offsets, or UNSTABLE_OFFSET_COMMIT when asked for stable offsets.
    assert fetch(bs, group, tps) == {("t", 0): (5, Errors.NONE), ("t", 1): (-1, Errors.NONE)}
    assert fetch(bs, group, tps, 6) == {("t", 0): (5, Errors.NONE), ("t", 1): (-1, Errors.NONE)}
    assert fetch(bs, group, tps, require_stable=True) == {("t", 0): (-1, Errors.UNSTABLE_OFFSET_COMMIT),
                                                         ("t", 1): (-1, Errors.UNSTABLE_OFFSET_COMMIT)}
    # Another producer's newer epoch is not this one's; an older epoch of the same producer is fenced.
    assert txn_commit(bs, group, 3, {("t", 0): 1}, epoch=0) == {("t", 0): Errors.INVALID_PRODUCER_EPOCH}
    assert txn_commit(bs, group, 3, {("t", 0): 1, ("nope", 0): 1}, producer_id=4001) == {
        ("t", 0): Errors.NONE, ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert txn_commit(bs, "", 3, {("t", 0): 1}) == {("t", 0): Errors.INVALID_GROUP_ID}

    # On the log as Kafka's coordinator writes it: transactional (not control) batches of the producer's id
    # and epoch, base sequence 0, holding ordinary offset commit records.
    batches = log_batches(c, 1, OFFSETS, partition_for(group, 3))
    txn = [bt for bt in batches if bt[1] == 4000]
    assert [(a & 0x30, pid, epoch, seq) for a, pid, epoch, seq, _ in txn] == [(0x10, 4000, 1, 0)] * 4
    key, value = txn[-1][4][1]
    assert read_key(key) == OffsetKey(group, "t", 1)
    assert (read_offset_value(value).offset, read_offset_value(value).metadata) == (23, "tx23")

    # Reloaded from the log (no marker yet): still pending.
    assert b.terminate() == 0
    b.start()
    coordinator_of(c, group)
    wait_until(lambda: call(bs, OffsetFetchRequest(version=7, group_id=group, topics=None,
                                                    require_stable=False)).error_code == 0, 20, 0.1, "loaded")
    assert fetch(bs, group, tps) == {("t", 0): (5, Errors.NONE), ("t", 1): (-1, Errors.NONE)}
    assert fetch(bs, group, tps, require_stable=True)[("t", 1)] == (-1, Errors.UNSTABLE_OFFSET_COMMIT)
    # The producer state of the offsets partition came back too: the old epoch is still fenced.
    assert txn_commit(bs, group, 3, {("t", 0): 1}, epoch=0) == {("t", 0): Errors.INVALID_PRODUCER_EPOCH}


def test_txn_offset_commit_checks_the_member_only_when_given(cluster_factory):
    c = cluster_factory(1, **{"offsets.topic.num.partitions": 2, "offsets.topic.replication.factor": 1, **FAST})
    create_topic(c, "t", 1, 1)
    group = "eos-group"
    bs = coordinator_of(c, group).bootstrap
    j = join_until_member(bs, group, 7, session=30000)
    sync(bs, group, 5, j.member_id, j.generation_id, {j.member_id: b""})
    tp = ("t", 0)
    assert txn_commit(bs, group, 3, {tp: 1}, member_id="stranger", generation=j.generation_id) == {
        tp: Errors.UNKNOWN_MEMBER_ID}
    assert txn_commit(bs, group, 3, {tp: 1}, member_id=j.member_id, generation=j.generation_id + 1) == {
        tp: Errors.ILLEGAL_GENERATION}
    assert txn_commit(bs, group, 3, {tp: 1}, member_id=j.member_id, generation=j.generation_id) == {
        tp: Errors.NONE}
    assert txn_commit(bs, group, 3, {tp: 2}) == {tp: Errors.NONE}            # generation -1, no member id
    assert txn_commit(bs, group, 2, {tp: 3}) == {tp: Errors.NONE}            # v2 carries no member at all
    assert fetch(bs, group, [tp], require_stable=True) == {tp: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}


def test_commit_marker_shows_and_abort_marker_drops_txn_offsets_also_after_a_restart(cluster_factory):
    c = cluster_factory(1, **{"offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 1, **FAST})
    create_topic(c, "t", 3, 1)
    b = c.brokers[1]
    group = "marked"
    bs = coordinator_of(c, group).bootstrap
    tps = [("t", 0), ("t", 1), ("t", 2)]
    assert commit(bs, group, 8, {("t", 0): 5, ("t", 1): 6}) == {("t", 0): Errors.NONE, ("t", 1): Errors.NONE}
    assert txn_commit(bs, group, 3, {("t", 0): 10, ("t", 2): 12}, producer_id=5000) == {
        ("t", 0): Errors.NONE, ("t", 2): Errors.NONE}
    assert txn_commit(bs, group, 0, {("t", 1): 99}, producer_id=5001) == {("t", 1): Errors.NONE}
    assert write_marker(bs, group, 3, 5000, True) == Errors.NONE
    assert fetch(bs, group, tps, require_stable=True) == {
        ("t", 0): (10, Errors.NONE), ("t", 1): (-1, Errors.UNSTABLE_OFFSET_COMMIT), ("t", 2): (12, Errors.NONE)}
    assert write_marker(bs, group, 3, 5001, False) == Errors.NONE
    expected = {("t", 0): (10, Errors.NONE), ("t", 1): (6, Errors.NONE), ("t", 2): (12, Errors.NONE)}
    assert fetch(bs, group, tps, require_stable=True) == expected
    # A transactional commit, then a plain one of the same partition, then the COMMIT: the plain one is later
    # in the offsets log and stays (Kafka's completePendingTxnOffsetCommit).
    assert txn_commit(bs, group, 3, {("t", 2): 50}, producer_id=5002) == {("t", 2): Errors.NONE}
    assert commit(bs, group, 8, {("t", 2): 60}) == {("t", 2): Errors.NONE}
    assert write_marker(bs, group, 3, 5002, True) == Errors.NONE
    expected[("t", 2)] = (60, Errors.NONE)
    assert fetch(bs, group, tps, require_stable=True) == expected

    # The markers are in the offsets log: a reload applies them the same way.
    assert b.terminate() == 0
    b.start()
    coordinator_of(c, group)
    wait_until(lambda: call(bs, OffsetFetchRequest(version=7, group_id=group, topics=None,
                                                    require_stable=False)).error_code == 0, 20, 0.1, "loaded")
    assert fetch(bs, group, tps, require_stable=True) == expected


def test_coordinator_kill9_replays_committed_and_pending_txn_offsets(cluster_factory):
    c = cluster_factory(3, **{"offsets.topic.num.partitions": 2, "offsets.topic.replication.factor": 3, **FAST})
    create_topic(c, "t", 3, 3)
    group = "failover"
    coord = coordinator_of(c, group)
    bs = coord.bootstrap
    tps = [("t", 0), ("t", 1), ("t", 2)]
    assert txn_commit(bs, group, 3, {("t", 0): 10}, producer_id=6000) == {("t", 0): Errors.NONE}
    assert write_marker(bs, group, 2, 6000, True) == Errors.NONE
    assert txn_commit(bs, group, 3, {("t", 1): 20}, producer_id=6001) == {("t", 1): Errors.NONE}   # no marker yet
    assert txn_commit(bs, group, 3, {("t", 2): 30}, producer_id=6002) == {("t", 2): Errors.NONE}
    assert write_marker(bs, group, 2, 6002, False) == Errors.NONE

    coord.kill9()
    new = wait_until(lambda: (lambda b: b if b is not coord else None)(coordinator_of(c, group)), 40, 0.5,
                     "a new coordinator")
    nbs = new.bootstrap
    wait_until(lambda: call(nbs, OffsetFetchRequest(version=7, group_id=group, topics=None,
                                                     require_stable=False)).error_code == 0, 30, 0.2, "loaded")
    assert fetch(nbs, group, tps) == {("t", 0): (10, Errors.NONE), ("t", 1): (-1, Errors.NONE),
                                      ("t", 2): (-1, Errors.NONE)}
    assert fetch(nbs, group, tps, require_stable=True)[("t", 1)] == (-1, Errors.UNSTABLE_OFFSET_COMMIT)
    # The transaction coordinator (played here) re-sends the marker to the new leader: now it is visible.
    assert write_marker(nbs, group, 2, 6001, True) == Errors.NONE
    assert fetch(nbs, group, tps, require_stable=True) == {("t", 0): (10, Errors.NONE), ("t", 1): (20, Errors.NONE),
                                                           ("t", 2): (-1, Errors.NONE)}
