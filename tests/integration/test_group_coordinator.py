"""The group coordinator over the wire, against real broker processes: `__consumer_offsets` creation (and the
wait for enough brokers), every served version of the group and offset APIs, ZooKeeper-stored v0 offsets,
NOT_COORDINATOR routing, acks=-1 commits that time out while the ISR lags, and groups reloaded from the
offsets log after a restart (whose records are checked byte for byte against Kafka's formats)."""
from __future__ import annotations

import functools
import os
import signal
import struct
import uuid

import pytest

from kafka.protocol.admin.groups import (DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest)
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
                                     OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest)
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kbroker.coordinator.schemas import (GroupMetadataKey, OffsetKey, partition_for, read_group_value, read_key,
                                         read_offset_value)
from kbroker.protocol.client import KafkaError
from kbroker.protocol.errors import Errors
from tests.clients._util import create_topic, log_batches, raw_request
from tests.integration.conftest import Cluster, set_znode_acl, wait_until
from zk.launcher import zkcli_get

OFFSETS = "__consumer_offsets"
FAST = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}


# ---- raw protocol -----------------------------------------------------------------------------------------------

call = functools.partial(raw_request, client_id="group-test")


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def find_coordinator(bootstrap: str, group: str, version: int = 3, key_type: int = 0):
    kw = {"key_type": key_type} if version >= 1 else {}
    return call(bootstrap, FindCoordinatorRequest(version=version, key=group, **kw))


def coordinator_of(cluster: Cluster, group: str, timeout: float = 30.0):
    """The coordinator's BrokerProcess, once some live broker names it and it names itself (another broker's
    metadata can be ahead of it: it would answer NOT_COORDINATOR, which a client retries)."""
    def found():
        for b in cluster.brokers.values():
            if b.alive():
                try:
                    r = find_coordinator(b.bootstrap, group)
                    named = cluster.brokers[r.node_id] if r.error_code == 0 else None
                    if named is not None and find_coordinator(named.bootstrap, group).node_id == named.id:
                        return named
                except KafkaError:   # not listening (yet)
                    continue
        return None
    return wait_until(found, timeout, 0.1, f"a coordinator for {group}")


def join(bootstrap, group, version, member_id="", instance=None, session=10000, topics=("t",)):
    kw = {}
    if version >= 1:
        kw["rebalance_timeout_ms"] = 20000
    if version >= 5:
        kw["group_instance_id"] = instance
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return call(bootstrap, JoinGroupRequest(version=version, group_id=group, session_timeout_ms=session,
                                            member_id=member_id, protocol_type="consumer",
                                            protocols=[P(name="range", metadata=subscription(*topics))], **kw))


def join_until_member(bootstrap, group, version, **kw):
    r = join(bootstrap, group, version, **kw)
    if r.error_code == Errors.MEMBER_ID_REQUIRED:
        assert version >= 4 and r.member_id
        r = join(bootstrap, group, version, member_id=r.member_id, **kw)
    assert r.error_code == 0, Errors(r.error_code)
    return r


def sync(bootstrap, group, version, member_id, generation, assignments):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    kw = {"protocol_type": "consumer", "protocol_name": "range"} if version >= 5 else {}
    return call(bootstrap, SyncGroupRequest(version=version, group_id=group, generation_id=generation,
                                            member_id=member_id, group_instance_id=None,
                                            assignments=[A(member_id=m, assignment=a) for m, a in assignments.items()],
                                            **kw))


def commit(bootstrap, group, version, offsets, member_id="", generation=-1):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    by_topic: dict = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=o, committed_leader_epoch=3,
                                            commit_timestamp=-1, committed_metadata=f"m{o}"))
    r = call(bootstrap, OffsetCommitRequest(version=version, group_id=group, generation_id_or_member_epoch=generation,
                                            member_id=member_id, retention_time_ms=-1, group_instance_id=None,
                                            topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return {(t.name, p.partition_index): Errors(p.error_code) for t in r.topics for p in t.partitions}


def fetch(bootstrap, group, version, partitions=None):
    """(top-level error or None, {tp: (offset, epoch, metadata, error)})."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = None
    if partitions is not None:
        by_topic: dict = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [T(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    r = call(bootstrap, OffsetFetchRequest(version=version, group_id=group, topics=topics, require_stable=False))
    out = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch if version >= 5 else None,
                                         p.metadata, Errors(p.error_code))
           for t in r.topics for p in t.partitions}
    return (Errors(r.error_code) if version >= 2 else None), out


@pytest.fixture(scope="module")
def two_brokers(zookeeper, tmp_path_factory):
    c = Cluster(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path_factory.mktemp("groups")))
    try:
        for i in (1, 2):
            c.add(i, **{"offsets.topic.num.partitions": 4, "offsets.topic.replication.factor": 2, **FAST})
        c.wait_ready([1, 2])
        create_topic(c, "t", 4, 2)
        yield c
    finally:
        c.stop()


# ---- tests ------------------------------------------------------------------------------------------------------

def test_offsets_topic_waits_for_enough_brokers_then_is_created_as_kafka(cluster_factory):
    extra = {"offsets.topic.num.partitions": 5, "offsets.topic.replication.factor": 2,
             "offsets.topic.segment.bytes": 1048576, **FAST}
    c = cluster_factory(1, **extra)
    b1 = c.brokers[1]
    for version in (0, 1, 3):
        r = find_coordinator(b1.bootstrap, "my-group", version)
        assert r.error_code == Errors.COORDINATOR_NOT_AVAILABLE and r.node_id == -1
    assert find_coordinator(b1.bootstrap, "my-group").error_message == "The coordinator is not available."
    assert not c.zk.topic_exists(OFFSETS)              # one broker cannot hold replication factor 2
    c.add(2, **extra)
    c.wait_ready([1, 2])
    coordinator = coordinator_of(c, "my-group")
    assignment = c.zk.get_topic_assignment(OFFSETS).partitions
    assert len(assignment) == 5 and all(sorted(r) == [1, 2] for r in assignment.values())
    assert c.zk.get_entity_config("topics", OFFSETS) == {"cleanup.policy": "compact", "compression.type": "producer",
                                                        "segment.bytes": "1048576"}
    # The coordinator is the leader of partition abs("my-group".hashCode) % 5 = 1906497762 % 5 = 2.
    p = partition_for("my-group", 5)
    assert p == 2

    def offsets_topic_at_b1():
        # Broker 1 may learn of the new topic's leaders a moment after the coordinator was named.
        md = call(b1.bootstrap, MetadataRequest(version=1, topics=[MetadataRequest.MetadataRequestTopic(name=OFFSETS)]))
        (topic,) = md.topics
        return topic if topic.partitions and all(q.leader_id >= 0 for q in topic.partitions) else None
    topic = wait_until(offsets_topic_at_b1, 20, message=f"the leaders of {OFFSETS} at broker 1")
    assert topic.is_internal and len(topic.partitions) == 5
    leader = {q.partition_index: q.leader_id for q in topic.partitions}[p]
    r = find_coordinator(c.brokers[2].bootstrap, "my-group", 3)
    assert (r.error_code, r.node_id, r.host, r.port) == (0, leader, "127.0.0.1", c.brokers[leader].port)
    assert r.error_message == "NONE" and coordinator.id == leader
    assert find_coordinator(b1.bootstrap, "my-group", 0).node_id == leader
    # Two brokers cannot hold __transaction_state (transaction.state.log.replication.factor 3): not created.
    assert find_coordinator(b1.bootstrap, "txn", 3, key_type=1).error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert not c.zk.topic_exists("__transaction_state")


def test_every_served_version_round_trips(two_brokers):
    c = two_brokers
    for jv in range(0, 8):
        group = f"versions-{jv}"
        bs = coordinator_of(c, group).bootstrap
        j = join_until_member(bs, group, jv)
        assert j.generation_id == 1 and j.leader == j.member_id and len(j.members) == 1
        assert j.protocol_name == "range" and (jv < 7 or j.protocol_type == "consumer")
        member = j.member_id
        s = sync(bs, group, min(jv, 5), member, 1, {member: b"assignment-" + bytes([jv])})
        assert s.error_code == 0 and s.assignment == b"assignment-" + bytes([jv])
        assert call(bs, HeartbeatRequest(version=min(jv, 4), group_id=group, generation_id=1, member_id=member,
                                         group_instance_id=None)).error_code == 0
        cv = jv + 1                                         # OffsetCommit v1-v8 (v0 is ZooKeeper's)
        assert commit(bs, group, cv, {("t", 0): 10 + jv, ("t", 1): 20 + jv}, member, 1) == {
            ("t", 0): Errors.NONE, ("t", 1): Errors.NONE}
        fv = min(jv + 1, 7)
        error, got = fetch(bs, group, fv, [("t", 0), ("t", 1), ("t", 3)])
        assert got[("t", 0)][0] == 10 + jv and got[("t", 1)][0] == 20 + jv and got[("t", 3)][0] == -1
        assert got[("t", 0)][2] == f"m{10 + jv}"
        if fv >= 5:   # the leader epoch is kept from OffsetCommit v6 on
            assert got[("t", 0)][1] == (3 if cv >= 6 else -1)
        if fv >= 2:
            assert error == Errors.NONE and set(fetch(bs, group, fv)[1]) == {("t", 0), ("t", 1)}
        dv = min(jv, 5)
        (g,) = call(bs, DescribeGroupsRequest(version=dv, groups=[group], include_authorized_operations=True)).groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
        (m,) = g.members
        assert (m.member_id, m.client_host, m.member_assignment) == (member, "/127.0.0.1",
                                                                     b"assignment-" + bytes([jv]))
        assert m.member_metadata == subscription("t") and m.client_id == "group-test"
        if dv >= 3:
            assert g.authorized_operations == {3, 6, 8}      # READ, DELETE, DESCRIBE: no authorizer
        listed = call(bs, ListGroupsRequest(version=min(jv, 4), states_filter=[]))
        assert (group, "consumer") in {(x.group_id, x.protocol_type) for x in listed.groups}
        lv = min(jv, 4)
        L = LeaveGroupRequest.MemberIdentity
        left = call(bs, LeaveGroupRequest(version=lv, group_id=group, member_id=member,
                                          members=[L(member_id=member, group_instance_id=None)]))
        assert left.error_code == 0 and (lv < 3 or [x.error_code for x in left.members] == [0])
        (g,) = call(bs, DescribeGroupsRequest(version=dv, groups=[group])).groups
        assert g.group_state == "Empty" and g.members == []
        if jv % 2:   # OffsetDelete on half of them, DeleteGroups on all
            T = OffsetDeleteRequest.OffsetDeleteRequestTopic
            r = call(bs, OffsetDeleteRequest(version=0, group_id=group, topics=[T(name="t", partitions=[
                T.OffsetDeleteRequestPartition(partition_index=0)])]))
            assert r.error_code == 0 and [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [(0, 0)]
            assert fetch(bs, group, 1, [("t", 0)])[1][("t", 0)][0] == -1
        (d,) = call(bs, DeleteGroupsRequest(version=min(jv, 2), groups_names=[group])).results
        assert (d.group_id, d.error_code) == (group, 0)
        (d,) = call(bs, DeleteGroupsRequest(version=min(jv, 2), groups_names=[group])).results
        assert d.error_code == Errors.GROUP_ID_NOT_FOUND
        assert fetch(bs, group, 1, [("t", 1)])[1][("t", 1)][0] == -1


def test_v0_offsets_live_in_zookeeper_and_any_broker_serves_them(two_brokers):
    c = two_brokers
    b1, b2 = c.brokers[1].bootstrap, c.brokers[2].bootstrap
    assert commit(b1, "zk-group", 0, {("t", 0): 42, ("t", 2): 7, ("nope", 0): 1}) == {
        ("t", 0): Errors.NONE, ("t", 2): Errors.NONE, ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert c.zk.get("/consumers/zk-group/offsets/t/0")[0] == b"42"
    assert zkcli_get(c.zk_connect, "/consumers/zk-group/offsets/t/0") == "42"
    _, got = fetch(b2, "zk-group", 0, [("t", 0), ("t", 1), ("t", 2)])
    assert got == {("t", 0): (42, None, "", Errors.NONE), ("t", 1): (-1, None, "", Errors.UNKNOWN_TOPIC_OR_PARTITION),
                   ("t", 2): (7, None, "", Errors.NONE)}
    assert commit(b2, "zk-group", 0, {("t", 0): 43}) == {("t", 0): Errors.NONE}   # overwritten
    assert c.zk.get("/consumers/zk-group/offsets/t/0")[0] == b"43"
    # The two stores are separate, as in Kafka: v1+ does not see ZooKeeper's offsets.
    bs = coordinator_of(c, "zk-group").bootstrap
    assert fetch(bs, "zk-group", 1, [("t", 0)])[1][("t", 0)][0] == -1


def test_v0_offsets_zookeeper_refuses_answer_unknown_server_error(two_brokers):
    """A v0 commit or fetch that ZooKeeper refuses (the offset's znode made unreadable and unwritable), or of a group
    whose path ZooKeeper cannot hold (".."), answers UNKNOWN_SERVER_ERROR for that partition, as Kafka's
    Errors.forException does; the request's other partitions are answered as usual."""
    c = two_brokers
    bs = c.brokers[1].bootstrap
    assert commit(bs, "zk-refused", 0, {("t", 0): 5, ("t", 1): 6}) == {("t", 0): Errors.NONE, ("t", 1): Errors.NONE}
    set_znode_acl(c.zk_connect, "/consumers/zk-refused/offsets/t/0", "world:anyone:c")
    assert commit(bs, "zk-refused", 0, {("t", 0): 7, ("t", 1): 8}) == {
        ("t", 0): Errors.UNKNOWN_SERVER_ERROR, ("t", 1): Errors.NONE}
    assert fetch(bs, "zk-refused", 0, [("t", 0), ("t", 1)])[1] == {
        ("t", 0): (-1, None, "", Errors.UNKNOWN_SERVER_ERROR), ("t", 1): (8, None, "", Errors.NONE)}
    assert commit(bs, "..", 0, {("t", 0): 1}) == {("t", 0): Errors.UNKNOWN_SERVER_ERROR}
    assert fetch(bs, "..", 0, [("t", 0)])[1] == {("t", 0): (-1, None, "", Errors.UNKNOWN_SERVER_ERROR)}


def test_requests_to_the_wrong_broker_get_not_coordinator(two_brokers):
    c = two_brokers
    group = "routed"
    right = coordinator_of(c, group)
    wrong = next(b for b in c.brokers.values() if b is not right).bootstrap
    assert join(wrong, group, 5).error_code == Errors.NOT_COORDINATOR
    assert call(wrong, HeartbeatRequest(version=4, group_id=group, generation_id=1, member_id="m",
                                        group_instance_id=None)).error_code == Errors.NOT_COORDINATOR
    assert commit(wrong, group, 8, {("t", 0): 1}) == {("t", 0): Errors.NOT_COORDINATOR}
    assert fetch(wrong, group, 7, [("t", 0)]) == (Errors.NOT_COORDINATOR, {})
    assert fetch(wrong, group, 1, [("t", 0)]) == (None, {("t", 0): (-1, None, "", Errors.NOT_COORDINATOR)})
    (g,) = call(wrong, DescribeGroupsRequest(version=5, groups=[group])).groups
    assert g.error_code == Errors.NOT_COORDINATOR
    # Empty group ids: invalid for membership (on any broker), allowed for offsets (as Kafka).
    assert join(wrong, "", 5).error_code == Errors.INVALID_GROUP_ID
    empty_home = coordinator_of(c, "").bootstrap
    assert join(empty_home, "", 5).error_code == Errors.INVALID_GROUP_ID
    assert commit(empty_home, "", 2, {("t", 0): 5}) == {("t", 0): Errors.NONE}


def test_commit_waits_for_the_isr_and_times_out(cluster_factory):
    c = cluster_factory(3, **{"offsets.topic.num.partitions": 3, "offsets.commit.timeout.ms": 1500, **FAST})
    create_topic(c, "t", 1, 1)
    group = "slow-isr"
    coord = coordinator_of(c, group)
    bs = coord.bootstrap
    wait_until(lambda: commit(bs, group, 8, {("t", 0): 1}) == {("t", 0): Errors.NONE}, message="a first commit")
    followers = [b for b in c.brokers.values() if b is not coord]
    for b in followers:
        os.kill(b.proc.pid, signal.SIGSTOP)      # still in the ISR (replica.lag.time.max.ms is 30 s)
    try:
        assert commit(bs, group, 8, {("t", 0): 2}) == {("t", 0): Errors.REQUEST_TIMED_OUT}
        assert fetch(bs, group, 7, [("t", 0)])[1][("t", 0)][0] == 1   # not acknowledged: not visible
    finally:
        for b in followers:
            os.kill(b.proc.pid, signal.SIGCONT)
    assert wait_until(lambda: commit(bs, group, 8, {("t", 0): 3}) == {("t", 0): Errors.NONE}, 20, 0.2,
                      "a commit once the followers are back")
    assert fetch(bs, group, 7, [("t", 0)])[1][("t", 0)][0] == 3


def test_restart_reloads_groups_and_offsets_written_in_kafkas_format(cluster_factory):
    c = cluster_factory(1, **{"offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 1, **FAST})
    create_topic(c, "t", 2, 1)
    b = c.brokers[1]
    group = "durable"
    coordinator_of(c, group)
    j = join_until_member(b.bootstrap, group, 7, session=30000)
    sync(b.bootstrap, group, 5, j.member_id, 1, {j.member_id: b"assigned"})
    assert commit(b.bootstrap, group, 8, {("t", 0): 5, ("t", 1): 6}, j.member_id, 1) == {
        ("t", 0): Errors.NONE, ("t", 1): Errors.NONE}
    assert commit(b.bootstrap, group, 8, {("t", 0): 9}, j.member_id, 1) == {("t", 0): Errors.NONE}
    assert commit(b.bootstrap, "simple", 2, {("t", 1): 77}) == {("t", 1): Errors.NONE}

    assert b.terminate() == 0
    b.start()
    coordinator_of(c, group)
    wait_until(lambda: fetch(b.bootstrap, group, 7)[0] == Errors.NONE, 20, 0.1, "the group loaded")
    # (partition_for: "durable" -> 0 and "simple" -> 2 of 3, so the partition read below holds one group)
    assert fetch(b.bootstrap, group, 7)[1] == {("t", 0): (9, 3, "m9", Errors.NONE), ("t", 1): (6, 3, "m6", Errors.NONE)}
    assert fetch(b.bootstrap, "simple", 7, [("t", 1)])[1][("t", 1)][0] == 77
    (g,) = call(b.bootstrap, DescribeGroupsRequest(version=5, groups=[group])).groups
    assert g.group_state == "Stable" and [(m.member_id, m.member_assignment) for m in g.members] == [
        (j.member_id, b"assigned")]
    assert call(b.bootstrap, HeartbeatRequest(version=4, group_id=group, generation_id=1, member_id=j.member_id,
                                              group_instance_id=None)).error_code == 0

    # What is on disk is what Kafka writes: offset keys v1 with values v3, group metadata key v2 / value v3.
    records = [kv for *_, kvs in log_batches(c, 1, OFFSETS, partition_for(group, 3)) for kv in kvs]
    keys = [read_key(k) for k, _ in records]
    assert keys[0] == GroupMetadataKey(group)
    assert records[0][1][:2] == b"\x00\x03"
    gv = read_group_value(records[0][1])
    assert (gv.protocol_type, gv.generation, gv.protocol, gv.leader) == ("consumer", 1, "range", j.member_id)
    assert [(m.member_id, m.client_id, m.client_host, m.session_timeout, m.rebalance_timeout, m.assignment)
            for m in gv.members] == [(j.member_id, "group-test", "/127.0.0.1", 30000, 20000, b"assigned")]
    offsets = [(k, v) for k, v in records if k[:2] == b"\x00\x01"]
    assert [read_key(k) for k, _ in offsets] == [OffsetKey(group, "t", 0), OffsetKey(group, "t", 1),
                                                 OffsetKey(group, "t", 0)]
    assert all(v[:2] == b"\x00\x03" for _, v in offsets)
    last = read_offset_value(offsets[-1][1])
    assert (last.offset, last.leader_epoch, last.metadata) == (9, 3, "m9")
    key = offsets[-1][0]
    assert key == b"\x00\x01" + struct.pack(">h", len(group)) + group.encode() + b"\x00\x01t\x00\x00\x00\x00"


def test_api_versions_advertises_kafka_2_8_group_ranges(two_brokers):
    from kafka.protocol.metadata import ApiVersionsRequest
    r = call(two_brokers.brokers[1].bootstrap, ApiVersionsRequest(version=0))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert {k: ranges.get(k) for k in (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47)} == {
        8: (0, 8), 9: (0, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5), 15: (0, 5), 16: (0, 4),
        42: (0, 2), 47: (0, 0)}


def test_offsets_of_a_deleted_topic_are_removed(cluster_factory):
    """Kafka's handleDeletedPartitions: once UpdateMetadata says a topic is deleted, the coordinator drops the
    groups' offsets for it and writes tombstones, so they do not come back when the coordinator reloads."""
    from confluent_kafka import Consumer, TopicPartition
    from zk import admin as zk_admin
    c = cluster_factory(1, **{"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 2})
    for name in ("gone", "kept"):
        zk_admin.AdminZkClient(c.zk).create_topic(name, partitions=1, replication_factor=1)
        wait_until(lambda: c.zk.get_partition_state(name, 0), message=f"{name} has a leader")

    def committed(topics):
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g-del", "enable.auto.commit": False})
        try:
            return {tp.topic: tp.offset for tp in consumer.committed([TopicPartition(t, 0) for t in topics],
                                                                     timeout=20)}
        finally:
            consumer.close()

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g-del", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("gone", 0, 5), TopicPartition("kept", 0, 7)], asynchronous=False)
    finally:
        consumer.close()
    assert committed(["gone", "kept"]) == {"gone": 5, "kept": 7}

    c.zk.create_delete_topic_marker("gone")
    wait_until(lambda: not c.zk.topic_exists("gone"), message="gone deleted")
    wait_until(lambda: committed(["gone", "kept"]) == {"gone": -1001, "kept": 7},
               message="the offsets of the deleted topic removed")
    assert "Removed 1 offsets associated with deleted partitions: gone-0" in c.brokers[1].log()
    c.brokers[1].terminate()
    c.brokers[1].start()
    c.wait_ready([1])
    assert committed(["gone", "kept"]) == {"gone": -1001, "kept": 7}   # the tombstone was written
