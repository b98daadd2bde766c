"""The group coordinator's state machine and offset store, on a MockClock with a fake replica manager whose
offsets partitions are in-memory logs (so what one coordinator writes, another can load)."""
import struct
from types import SimpleNamespace

import gevent
import pytest

from kbroker.clock import MockClock
from kbroker.config import BrokerConfig
from kbroker.coordinator.group import GroupState
from kbroker.coordinator.group_coordinator import GroupCoordinator
from kbroker.coordinator.schemas import (GroupMetadataKey, OffsetAndMetadata, OffsetKey, partition_for,
                                         read_group_value, read_key, read_offset_value)
from kbroker.protocol.errors import Errors
from kbroker.records.batches import v2_records
from kbroker.records.entries import V2_HEADER, iter_entries

TOPIC = "__consumer_offsets"
PARTITIONS = 4
SESSION, REBALANCE = 6000, 10000


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class FakeLog:
    def __init__(self):
        self.data = bytearray()
        self.log_start_offset = 0
        self.log_end_offset = 0

    def append(self, batch) -> int:
        b = bytearray(batch)
        base = self.log_end_offset
        struct.pack_into(">q", b, 0, base)                     # baseOffset is outside the CRC
        self.log_end_offset += struct.unpack_from(">i", b, 23)[0] + 1
        self.data += b
        return base

    def read(self, offset, max_bytes, max_offset=None, min_one_message=True):
        out = bytearray()
        for e in iter_entries(self.data):
            if e.last_offset >= offset:
                out += self.data[e.position:e.position + e.size]
        return SimpleNamespace(records=SimpleNamespace(read=lambda: bytes(out)))

    def records(self):
        """[(key, value)] decoded, in log order."""
        out = []
        for e in iter_entries(self.data):
            for r in v2_records(self.data, e.position, e.size, 1 << 20):
                out.append((read_key(r.key), r.value))
        return out


class FakePartition:
    def __init__(self, index, log):
        self.topic, self.index, self.log = TOPIC, index, log
        self.is_leader, self.leader_epoch = True, 0


class FakeReplicaManager:
    def __init__(self, logs=None):
        self.logs = logs if logs is not None else {p: FakeLog() for p in range(PARTITIONS)}
        self.partitions = {}
        self.leadership_listeners = []
        self.hold = False            # acks=-1 appends wait until release()
        self.held = []
        self.appends = []

    def append_records(self, acks, timeout_ms, entries, produce_version, internal=False, callback=None):
        assert internal and produce_version is None and callback is not None
        results = {}
        for tp, batch in entries.items():
            self.appends.append((tp, acks))
            base = self.partitions[tp].log.append(batch)
            results[tp] = (Errors.NONE, base, -1, 0, None, [])
        if self.hold and acks == -1:
            self.held.append((callback, results))
        else:
            callback(results)

    def release(self, error=Errors.NONE):
        held, self.held = self.held, []
        for callback, results in held:
            callback({tp: (error, r[1] if not error else -1, *r[2:]) for tp, r in results.items()})


class Harness:
    def __init__(self, rm=None, **cfg):
        props = {"zookeeper.connect": "127.0.0.1:1", "group.initial.rebalance.delay.ms": "0",
                 "group.min.session.timeout.ms": "1000", "offsets.topic.num.partitions": str(PARTITIONS),
                 "offsets.retention.minutes": "10", **{k: str(v) for k, v in cfg.items()}}
        self.clock = MockClock()
        self.rm = rm or FakeReplicaManager()
        self.coord = GroupCoordinator(1, BrokerConfig(props), self.rm, None, self.clock)
        self.coord.startup(enable_expiration=False)

    def own(self, *partitions, epoch=0):
        for p in partitions or range(PARTITIONS):
            part = self.rm.partitions.setdefault((TOPIC, p), FakePartition(p, self.rm.logs[p]))
            part.is_leader, part.leader_epoch = True, epoch
        self.coord.on_leadership_change([((TOPIC, p), epoch) for p in partitions or range(PARTITIONS)], [], [])
        settle()

    def advance(self, ms):
        self.clock.advance(ms)
        self.coord.heartbeat_purgatory.advance_clock(0)
        self.coord.rebalance_purgatory.advance_clock(0)

    def join(self, group, member_id="", instance=None, protocols=None, version=5, session=SESSION,
             rebalance=REBALANCE):
        out = []
        self.coord.handle_join_group(group, member_id, instance, version >= 4 and instance is None, "client",
                                     "/127.0.0.1", rebalance, session, "consumer",
                                     protocols or [("range", subscription("t"))], out.append)
        return out

    def join_new(self, group, **kw):
        """A dynamic v5 member: MEMBER_ID_REQUIRED, then the join with the id it got."""
        first = self.join(group, **kw)
        assert first[0].error == Errors.MEMBER_ID_REQUIRED
        return self.join(group, member_id=first[0].member_id, **kw)

    def sync(self, group, member_id, generation, assignment=None, instance=None):
        out = []
        self.coord.handle_sync_group(group, generation, member_id, "consumer", "range", instance, assignment or {},
                                     out.append)
        return out

    def heartbeat(self, group, member_id, generation, instance=None):
        return self.coord.handle_heartbeat(group, member_id, instance, generation)

    def commit(self, group, offsets, member_id="", generation=-1):
        out = []
        self.coord.handle_commit_offsets(group, member_id, None, generation,
                                         {tp: OffsetAndMetadata(o, -1, "", self.clock.now_ms())
                                          for tp, o in offsets.items()}, out.append)
        return out

    def group(self, group_id):
        return self.coord.manager.get_group(group_id)

    def log_of(self, group_id) -> FakeLog:
        return self.rm.logs[partition_for(group_id, PARTITIONS)]


def settle():
    for _ in range(5):
        gevent.sleep(0)


@pytest.fixture
def h():
    harness = Harness()
    harness.own()
    yield harness
    harness.coord.shutdown()


def stable_group(h, group="g", n=2, **kw):
    """n dynamic members, synced and Stable; returns ([member ids], generation), the leader first."""
    for _ in range(n):
        h.join_new(group, **kw)
        # Members already in the group rejoin the rebalance this member started.
        g = h.group(group)
        for mid, member in list(g.members.items()):
            if g.is_(GroupState.PREPARING_REBALANCE) and not member.is_awaiting_join:
                h.join(group, member_id=mid, **kw)
    g = h.group(group)
    assert g.is_(GroupState.COMPLETING_REBALANCE), g
    ids, leader = list(g.members), g.leader_id
    syncs = {mid: h.sync(group, mid, g.generation_id) for mid in ids if mid != leader}
    syncs[leader] = h.sync(group, leader, g.generation_id, {mid: mid.encode() for mid in ids})
    assert g.is_(GroupState.STABLE)
    assert all(s and s[0].error == Errors.NONE and s[0].assignment == mid.encode() for mid, s in syncs.items())
    return [leader] + [m for m in ids if m != leader], g.generation_id


# ---- membership -------------------------------------------------------------------------------------------------

def test_member_id_required_then_join_sync_stable(h):
    first = h.join("g")
    assert first[0].error == Errors.MEMBER_ID_REQUIRED and first[0].member_id.startswith("client-")
    assert h.group("g").is_(GroupState.EMPTY) and first[0].member_id in h.group("g").pending_members
    joined = h.join("g", member_id=first[0].member_id)
    r = joined[0]       # group.initial.rebalance.delay.ms=0: the join completes at once
    assert r.error == Errors.NONE and r.generation_id == 1 and r.leader_id == r.member_id
    assert r.protocol_name == "range" and [m[0] for m in r.members] == [r.member_id]
    assert h.group("g").is_(GroupState.COMPLETING_REBALANCE)
    s = h.sync("g", r.member_id, 1, {r.member_id: b"assignment"})
    assert s[0].error == Errors.NONE and s[0].assignment == b"assignment" and s[0].protocol_name == "range"
    assert h.group("g").is_(GroupState.STABLE)
    assert h.heartbeat("g", r.member_id, 1) == Errors.NONE
    # The assignment is in the offsets partition before anyone heard of it.
    (key, value), = h.log_of("g").records()
    assert key == GroupMetadataKey("g")
    record = read_group_value(value)
    assert record.generation == 1 and record.leader == r.member_id and record.protocol == "range"
    assert [(m.member_id, m.assignment, m.session_timeout, m.rebalance_timeout) for m in record.members] == \
        [(r.member_id, b"assignment", SESSION, REBALANCE)]


def test_join_v3_needs_no_member_id_round_trip(h):
    r = h.join("g", version=3)[0]
    assert r.error == Errors.NONE and r.generation_id == 1


def test_second_member_rebalances_and_followers_wait_for_the_leader(h):
    (m1,), gen = stable_group(h, n=1)
    first = h.join("g")
    m2_join = h.join("g", member_id=first[0].member_id)
    assert not m2_join and h.group("g").is_(GroupState.PREPARING_REBALANCE)
    assert h.heartbeat("g", m1, gen) == Errors.REBALANCE_IN_PROGRESS
    m1_join = h.join("g", member_id=m1)
    assert m1_join[0].generation_id == m2_join[0].generation_id == gen + 1
    assert m1_join[0].leader_id == m1 and len(m1_join[0].members) == 2 and m2_join[0].members == []
    m2 = m2_join[0].member_id
    follower_sync = h.sync("g", m2, gen + 1)
    assert follower_sync == []                        # waits for the leader's assignment
    h.sync("g", m1, gen + 1, {m1: b"a1", m2: b"a2"})
    assert follower_sync[0].assignment == b"a2"
    assert h.heartbeat("g", m2, gen) == Errors.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", gen + 1) == Errors.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_the_member_and_rebalances(h):
    (m1, m2), gen = stable_group(h)
    h.advance(SESSION - 1000)
    assert h.heartbeat("g", m1, gen) == Errors.NONE
    h.advance(2000)                                   # m2 silent for SESSION + 1000
    g = h.group("g")
    assert not g.has(m2) and g.is_(GroupState.PREPARING_REBALANCE)
    assert h.heartbeat("g", m1, gen) == Errors.REBALANCE_IN_PROGRESS
    r = h.join("g", member_id=m1)[0]
    assert r.generation_id == gen + 1 and [m[0] for m in r.members] == [m1]


def test_leader_leaving_makes_another_member_leader(h):
    (m1, m2), gen = stable_group(h)
    error, results = h.coord.handle_leave_group("g", [(m1, None), ("unknown", None)])
    assert error == Errors.NONE and results == [(m1, None, Errors.NONE), ("unknown", None, Errors.UNKNOWN_MEMBER_ID)]
    g = h.group("g")
    assert g.is_(GroupState.PREPARING_REBALANCE) and g.leader_id == m2
    r = h.join("g", member_id=m2)[0]
    assert r.error == Errors.NONE and r.leader_id == m2 and r.generation_id == gen + 1


def test_last_member_leaving_empties_the_group_and_writes_it(h):
    (m1,), gen = stable_group(h, n=1)
    h.coord.handle_leave_group("g", [(m1, None)])
    g = h.group("g")
    assert g.is_(GroupState.EMPTY) and g.generation_id == gen + 1
    key, value = h.log_of("g").records()[-1]
    record = read_group_value(value)
    assert key == GroupMetadataKey("g") and record.members == [] and record.protocol is None


def test_rebalance_timeout_drops_members_that_did_not_rejoin(h):
    (m1, m2), gen = stable_group(h)
    assert h.join("g", member_id=m1) == []            # the leader rejoining starts a rebalance
    h.advance(SESSION - 1000)
    assert h.heartbeat("g", m2, gen) == Errors.REBALANCE_IN_PROGRESS   # alive, but never rejoins
    h.advance(REBALANCE - SESSION + 1001)
    g = h.group("g")
    assert not g.has(m2) and g.is_(GroupState.COMPLETING_REBALANCE) and g.generation_id == gen + 1


def test_members_that_never_sync_are_removed(h):
    long_session = REBALANCE + 2000                       # so only the sync timeout can remove m2
    (m1, m2), gen = stable_group(h, session=long_session)
    h.join("g", member_id=m1, session=long_session)
    h.join("g", member_id=m2, session=long_session)
    g = h.group("g")
    assert g.is_(GroupState.COMPLETING_REBALANCE)
    h.sync("g", m1, g.generation_id, {m1: b"x", m2: b"y"})   # m2 never syncs (nor heartbeats: it would pass)
    assert g.is_(GroupState.STABLE)
    h.advance(REBALANCE + 1)
    assert not g.has(m2) and g.is_(GroupState.PREPARING_REBALANCE)


def test_static_member_rejoin_keeps_generation_and_fences_the_old_id(h):
    r = h.join("g", instance="inst-1")[0]                 # static members get an id at once
    assert r.error == Errors.NONE and r.member_id.startswith("inst-1-")
    old = r.member_id
    h.sync("g", old, 1, {old: b"mine"}, instance="inst-1")
    assert h.group("g").is_(GroupState.STABLE)
    again = h.join("g", instance="inst-1")[0]              # restarted: unknown member id, same instance id
    assert again.error == Errors.NONE and again.member_id != old and again.generation_id == 1
    assert again.leader_id == old                           # the old leader id: no assignment is redone
    g = h.group("g")
    assert g.is_(GroupState.STABLE) and list(g.members) == [again.member_id]
    assert g.get(again.member_id).assignment == b"mine"
    assert h.heartbeat("g", old, 1, instance="inst-1") == Errors.FENCED_INSTANCE_ID
    assert h.heartbeat("g", again.member_id, 1, instance="inst-1") == Errors.NONE
    record = read_group_value(h.log_of("g").records()[-1][1])
    assert [(m.member_id, m.group_instance_id) for m in record.members] == [(again.member_id, "inst-1")]


def test_static_member_leaves_by_instance_id(h):
    r = h.join("g", instance="inst-1")[0]
    h.sync("g", r.member_id, 1, {r.member_id: b""}, instance="inst-1")
    error, results = h.coord.handle_leave_group("g", [("", "inst-1")])
    assert results == [("", "inst-1", Errors.NONE)] and h.group("g").is_(GroupState.EMPTY)


def test_initial_rebalance_delay_waits_for_more_members(h):
    h2 = Harness(**{"group.initial.rebalance.delay.ms": 3000})
    h2.own()
    a = h2.join_new("g")
    assert a == [] and h2.group("g").is_(GroupState.PREPARING_REBALANCE)
    h2.advance(1000)
    b = h2.join_new("g")
    h2.advance(2000)                                    # first delay over, but a member arrived: wait again
    assert a == [] and b == []
    h2.advance(3000)
    assert a[0].generation_id == b[0].generation_id == 1 and len(a[0].members) + len(b[0].members) == 2
    h2.coord.shutdown()


def test_inconsistent_protocols_and_session_timeout_checks(h):
    stable_group(h, n=1)
    r = h.join("g", protocols=[("other", b"")])[0]
    assert r.error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g2", session=500)[0].error == Errors.INVALID_SESSION_TIMEOUT
    assert h.join("", version=5)[0].error == Errors.INVALID_GROUP_ID


def test_protocol_selection_by_votes(h):
    first = h.join_new("g", protocols=[("roundrobin", b"a"), ("range", b"b")])
    gen = first[0].generation_id
    m1 = first[0].member_id
    h.sync("g", m1, gen, {m1: b""})
    second = h.join("g", protocols=[("range", b"c"), ("roundrobin", b"d")])
    m2_join = h.join("g", member_id=second[0].member_id, protocols=[("range", b"c"), ("roundrobin", b"d")])
    third = h.join("g", protocols=[("range", b"e")])
    m3_join = h.join("g", member_id=third[0].member_id, protocols=[("range", b"e")])
    m1_join = h.join("g", member_id=m1, protocols=[("roundrobin", b"a"), ("range", b"b")])
    # Only "range" is supported by all three members; its metadata per member goes to the leader.
    assert m1_join[0].protocol_name == "range" and dict((m, md) for m, _, md in m1_join[0].members)[m1] == b"b"
    assert m2_join[0].protocol_name == m3_join[0].protocol_name == "range"


def test_max_group_size():
    h = Harness(**{"group.max.size": 1})
    h.own()
    stable_group(h, n=1)
    assert h.join("g")[0].error == Errors.GROUP_MAX_SIZE_REACHED
    h.coord.shutdown()


# ---- offsets ----------------------------------------------------------------------------------------------------

def test_simple_commit_and_fetch(h):
    assert h.commit("simple", {("t", 0): 5, ("t", 1): 7}) == [{("t", 0): Errors.NONE, ("t", 1): Errors.NONE}]
    error, offsets = h.coord.handle_fetch_offsets("simple", [("t", 0), ("t", 9)])
    assert error == Errors.NONE and offsets == {("t", 0): (5, -1, "", Errors.NONE), ("t", 9): (-1, -1, "", Errors.NONE)}
    assert h.coord.handle_fetch_offsets("simple", None)[1].keys() == {("t", 0), ("t", 1)}
    records = h.log_of("simple").records()
    assert [k for k, _ in records] == [OffsetKey("simple", "t", 0), OffsetKey("simple", "t", 1)]
    assert read_offset_value(records[0][1]).offset == 5
    assert h.rm.appends[-1][1] == -1                          # commits need the whole ISR


def test_member_commits_are_checked(h):
    (m1, m2), gen = stable_group(h)
    assert h.commit("g", {("t", 0): 1}, m1, gen) == [{("t", 0): Errors.NONE}]
    assert h.commit("g", {("t", 0): 2}, m1, gen + 5) == [{("t", 0): Errors.ILLEGAL_GENERATION}]
    assert h.commit("g", {("t", 0): 2}, "stranger", gen) == [{("t", 0): Errors.UNKNOWN_MEMBER_ID}]
    assert h.commit("g", {("t", 0): 2}, "", -1) == [{("t", 0): Errors.UNKNOWN_MEMBER_ID}]
    h.join("g", member_id=m1)
    assert h.commit("g", {("t", 0): 3}, m2, gen) == [{("t", 0): Errors.NONE}]   # PreparingRebalance: allowed
    h.join("g", member_id=m2)
    assert h.commit("g", {("t", 0): 4}, m2, gen + 1) == [{("t", 0): Errors.REBALANCE_IN_PROGRESS}]
    assert h.commit("unknown-group", {("t", 0): 1}, "m", 3) == [{("t", 0): Errors.ILLEGAL_GENERATION}]
    assert h.coord.handle_fetch_offsets("g", [("t", 0)])[1][("t", 0)][0] == 3


def test_commit_is_answered_only_after_the_isr_has_it(h):
    h.commit("g", {("t", 0): 1})
    h.rm.hold = True
    pending = h.commit("g", {("t", 0): 2})
    assert pending == []                                   # not acknowledged yet
    assert h.coord.handle_fetch_offsets("g", [("t", 0)])[1][("t", 0)][0] == 1
    assert h.coord.handle_fetch_offsets("g", [("t", 0)], require_stable=True)[1][("t", 0)][3] == \
        Errors.UNSTABLE_OFFSET_COMMIT
    h.rm.release(Errors.REQUEST_TIMED_OUT)
    assert pending == [{("t", 0): Errors.REQUEST_TIMED_OUT}]
    assert h.coord.handle_fetch_offsets("g", [("t", 0)], require_stable=True)[1][("t", 0)] == (1, -1, "",
                                                                                            Errors.NONE)
    ok = h.commit("g", {("t", 0): 3})
    h.rm.release(Errors.NOT_LEADER_OR_FOLLOWER)
    assert ok == [{("t", 0): Errors.NOT_COORDINATOR}]


def test_metadata_too_large():
    h = Harness(**{"offset.metadata.max.bytes": 3})
    h.own()
    out = []
    h.coord.handle_commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(1, -1, "long", 0),
                                                      ("t", 1): OffsetAndMetadata(1, -1, "ok", 0)}, out.append)
    assert out == [{("t", 0): Errors.OFFSET_METADATA_TOO_LARGE, ("t", 1): Errors.NONE}]
    h.coord.shutdown()


def test_offsets_of_an_empty_group_expire_with_tombstones(h):
    (m1,), gen = stable_group(h, n=1)
    h.commit("g", {("t", 0): 10}, m1, gen)
    for _ in range(5 * 60 // 5):                           # the member stays 5 more minutes
        h.advance(5000)
        assert h.heartbeat("g", m1, gen) == Errors.NONE
    h.coord.handle_leave_group("g", [(m1, None)])          # Empty from now: retention counts from here,
    h.advance(9 * 60_000)                                  # not from the commit (14 minutes ago)
    assert h.coord.manager.expire_offsets() == 0
    h.advance(60_000)
    assert h.coord.manager.expire_offsets() == 1
    assert h.group("g") is None                            # Empty without offsets: Dead and gone
    tail = h.log_of("g").records()[-2:]
    assert tail == [(OffsetKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]
    assert h.coord.handle_fetch_offsets("g", [("t", 0)])[1][("t", 0)][0] == -1


def test_offsets_of_simple_commits_expire_by_commit_time(h):
    h.commit("s", {("t", 0): 1})
    h.advance(5 * 60_000)
    h.commit("s", {("t", 1): 2})
    h.advance(5 * 60_000)
    assert h.coord.manager.expire_offsets() == 1
    assert set(h.coord.handle_fetch_offsets("s", None)[1]) == {("t", 1)}
    h.advance(5 * 60_000)
    assert h.coord.manager.expire_offsets() == 1 and h.group("s") is None
    # generation 0: no group metadata record was ever written, so no group tombstone either
    assert [k for k, v in h.log_of("s").records() if v is None] == [OffsetKey("s", "t", 0), OffsetKey("s", "t", 1)]


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics(h):
    (m1,), gen = stable_group(h, n=1)                      # subscribed to "t"
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, m1, gen)
    for _ in range(11 * 60 // 5):                          # 11 minutes of a live member
        h.advance(5000)
        assert h.heartbeat("g", m1, gen) == Errors.NONE
    assert h.coord.manager.expire_offsets() == 1
    assert set(h.coord.handle_fetch_offsets("g", None)[1]) == {("t", 0)}


def test_explicit_expire_timestamp_wins(h):
    out = []
    now = h.clock.now_ms()
    h.coord.handle_commit_offsets("x", "", None, -1, {("t", 0): OffsetAndMetadata(1, -1, "", now, now + 1000)},
                                  out.append)
    (key, value), = h.log_of("x").records()
    assert value[:2] == b"\x00\x01"                         # written as value v1, with the expire timestamp
    h.advance(1000)
    assert h.coord.manager.expire_offsets() == 1


def test_delete_groups_and_offsets(h):
    (m1,), gen = stable_group(h, n=1)
    h.commit("empty", {("t", 0): 1, ("t", 1): 2})
    h2 = Harness(rm=FakeReplicaManager())                  # a coordinator that owns no offsets partition
    errors = h.coord.handle_delete_groups(["g", "empty", "missing", ""])
    assert errors == {"g": Errors.NON_EMPTY_GROUP, "empty": Errors.NONE, "missing": Errors.GROUP_ID_NOT_FOUND,
                      "": Errors.GROUP_ID_NOT_FOUND}
    assert [k for k, v in h.log_of("empty").records() if v is None] == [OffsetKey("empty", "t", 0),
                                                                         OffsetKey("empty", "t", 1)]
    assert h2.coord.handle_delete_groups(["empty"]) == {"empty": Errors.NOT_COORDINATOR}
    # OffsetDelete: a Stable consumer group keeps offsets of topics it subscribes to.
    h.commit("g", {("t", 0): 5, ("u", 0): 6}, m1, gen)
    error, per_partition = h.coord.handle_delete_offsets("g", [("t", 0), ("u", 0)])
    assert error == Errors.NONE and per_partition == {("t", 0): Errors.GROUP_SUBSCRIBED_TO_TOPIC,
                                                      ("u", 0): Errors.NONE}
    assert h.coord.handle_delete_offsets("missing", [("t", 0)]) == (Errors.GROUP_ID_NOT_FOUND, {})
    h2.coord.shutdown()


def test_list_and_describe(h):
    (m1, m2), gen = stable_group(h)
    h.commit("simple", {("t", 0): 1})
    assert sorted(h.coord.handle_list_groups(set())[1]) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
    assert h.coord.handle_list_groups({"Empty"})[1] == [("simple", "", "Empty")]
    error, (state, ptype, protocol, members) = h.coord.handle_describe_group("g")
    assert (error, state, ptype, protocol) == (Errors.NONE, "Stable", "consumer", "range")
    assert [(m[0], m[2], m[3], m[4], m[5]) for m in members] == [
        (m1, "client", "/127.0.0.1", subscription("t"), m1.encode()),
        (m2, "client", "/127.0.0.1", subscription("t"), m2.encode())]
    assert h.coord.handle_describe_group("nope") == (Errors.NONE, ("Dead", "", "", []))


# ---- load / unload ----------------------------------------------------------------------------------------------

def test_a_new_coordinator_loads_groups_and_offsets_from_the_log(h):
    (m1, m2), gen = stable_group(h)
    h.commit("g", {("t", 0): 11, ("t", 1): 12}, m1, gen)
    h.commit("g", {("t", 0): 13}, m1, gen)                 # the later value wins
    h.commit("gone", {("t", 0): 1})
    h.coord.handle_delete_groups(["gone"])                 # tombstones delete
    h.commit("simple", {("t", 3): 4})

    new = Harness(rm=FakeReplicaManager(logs=h.rm.logs))    # another broker, same log contents
    p = partition_for("g", PARTITIONS)
    new.rm.partitions[(TOPIC, p)] = FakePartition(p, new.rm.logs[p])
    new.coord.manager.schedule_load(p, 0, new.coord._on_group_loaded)
    assert new.coord.handle_heartbeat("g", m1, gen, None) == Errors.NONE          # answered blindly while loading
    assert new.coord.handle_fetch_offsets("g", None)[0] == Errors.COORDINATOR_LOAD_IN_PROGRESS
    settle()
    new.own()
    g = new.group("g")
    assert g.is_(GroupState.STABLE) and g.generation_id == gen and set(g.members) == {m1, m2}
    assert g.leader_id == m1 and g.get(m2).assignment == m2.encode() and g.protocol_name == "range"
    assert new.coord.handle_fetch_offsets("g", None)[1] == {("t", 0): (13, -1, "", Errors.NONE),
                                                           ("t", 1): (12, -1, "", Errors.NONE)}
    assert new.group("gone") is None
    assert new.coord.handle_fetch_offsets("simple", [("t", 3)])[1][("t", 3)][0] == 4
    # Loaded members have sessions: the one that keeps heartbeating stays, the other expires.
    assert new.heartbeat("g", m1, gen) == Errors.NONE
    new.advance(SESSION - 1000)
    assert new.heartbeat("g", m1, gen) == Errors.NONE
    new.advance(2000)
    assert not g.has(m2) and g.is_(GroupState.PREPARING_REBALANCE)
    new.coord.shutdown()


def test_unload_answers_waiting_members_and_then_not_coordinator(h):
    (m1, m2), gen = stable_group(h)
    waiting = h.join("g", member_id=m1)                    # rebalance in progress, m1 waits for m2
    p = partition_for("g", PARTITIONS)
    h.rm.partitions[(TOPIC, p)].is_leader = False
    h.coord.on_leadership_change([], [((TOPIC, p), 1)], [])
    settle()
    assert waiting[0].error == Errors.NOT_COORDINATOR
    assert h.heartbeat("g", m1, gen) == Errors.NOT_COORDINATOR
    assert h.commit("g", {("t", 0): 1}) == [{("t", 0): Errors.NOT_COORDINATOR}]
    assert h.group("g") is None


def test_stale_load_is_skipped(h):
    p = partition_for("late", PARTITIONS)
    h.coord.on_leadership_change([], [], [((TOPIC, p), None)])
    h.rm.partitions[(TOPIC, p)].leader_epoch = 5          # the partition moved on to a newer epoch
    h.coord.on_leadership_change([((TOPIC, p), 3)], [], [])
    settle()
    assert h.coord.handle_fetch_offsets("late", None)[0] == Errors.NOT_COORDINATOR


# ---- transactional offset commits ---------------------------------------------------------------------------

def txn_commit(h, group, producer_id, offsets, epoch=0, member_id="", generation=-1, instance=None):
    out = []
    h.coord.handle_txn_commit_offsets(group, producer_id, epoch, member_id, instance, generation,
                                      {tp: OffsetAndMetadata(o, -1, "", h.clock.now_ms())
                                       for tp, o in offsets.items()}, out.append)
    return out


def marker(h, group, producer_id, committed, epoch=0):
    """What WriteTxnMarkers leaves behind on the group's offsets partition: the control batch, then the hook."""
    from kbroker.records.batches import set_v2_crc
    from kbroker.records.builder import build_v2
    from kbroker.records.entries import CONTROL_MASK, TRANSACTIONAL_MASK, V2_ATTRIBUTES_OFFSET
    record = SimpleNamespace(offset=0, timestamp=0, key=struct.pack(">hh", 0, int(committed)),
                             value=struct.pack(">hi", 0, 0), headers=())
    batch = build_v2([record], first_offset=0, codec=0, timestamp_type=0, log_append_time=-1,
                     producer_id=producer_id, producer_epoch=epoch, transactional=True)
    struct.pack_into(">h", batch, V2_ATTRIBUTES_OFFSET, TRANSACTIONAL_MASK | CONTROL_MASK)
    set_v2_crc(batch, 0, len(batch))
    p = partition_for(group, PARTITIONS)
    h.rm.logs[p].append(batch)
    h.coord.complete_txn_offsets(producer_id, p, committed)


def fetch_offsets(h, group, tps, require_stable=False):
    return {tp: (o, e) for tp, (o, _, _, e) in h.coord.handle_fetch_offsets(group, tps, require_stable)[1].items()}


def test_txn_offsets_pend_until_the_commit_marker(h):
    assert h.commit("tx", {("t", 0): 5}) == [{("t", 0): Errors.NONE}]
    assert txn_commit(h, "tx", 1000, {("t", 0): 10, ("t", 1): 20}, epoch=3) == [
        {("t", 0): Errors.NONE, ("t", 1): Errors.NONE}]
    tps = [("t", 0), ("t", 1)]
    assert fetch_offsets(h, "tx", tps) == {("t", 0): (5, Errors.NONE), ("t", 1): (-1, Errors.NONE)}
    assert fetch_offsets(h, "tx", tps, True) == {("t", 0): (-1, Errors.UNSTABLE_OFFSET_COMMIT),
                                                ("t", 1): (-1, Errors.UNSTABLE_OFFSET_COMMIT)}
    # Written as Kafka's coordinator writes it: a transactional batch of the producer, base sequence 0.
    log = h.log_of("tx")
    last = list(iter_entries(log.data))[-1]
    _, _, _, _, _, attributes, _, _, _, pid, epoch, base_seq, _ = V2_HEADER.unpack_from(log.data, last.position)
    assert (attributes & 0x30, pid, epoch, base_seq) == (0x10, 1000, 3, 0)
    marker(h, "tx", 999, True)                                 # another producer's marker changes nothing
    assert fetch_offsets(h, "tx", tps, True)[("t", 0)][1] == Errors.UNSTABLE_OFFSET_COMMIT
    marker(h, "tx", 1000, True, epoch=3)
    assert fetch_offsets(h, "tx", tps, True) == {("t", 0): (10, Errors.NONE), ("t", 1): (20, Errors.NONE)}


def test_aborted_txn_offsets_are_dropped_and_newer_plain_commits_win(h):
    h.commit("tx", {("t", 0): 5})
    txn_commit(h, "tx", 1000, {("t", 0): 10})
    marker(h, "tx", 1000, False)
    assert fetch_offsets(h, "tx", [("t", 0)], True) == {("t", 0): (5, Errors.NONE)}
    # A plain commit written after the transactional one is newer in the log: the COMMIT does not undo it.
    txn_commit(h, "tx", 1000, {("t", 0): 30, ("t", 1): 31})
    h.commit("tx", {("t", 0): 40})
    marker(h, "tx", 1000, True)
    assert fetch_offsets(h, "tx", [("t", 0), ("t", 1)]) == {("t", 0): (40, Errors.NONE), ("t", 1): (31, Errors.NONE)}


def test_txn_commit_group_checks(h):
    (m1, _), gen = stable_group(h)
    tp = ("t", 0)
    assert txn_commit(h, "g", 7, {tp: 1}, member_id="nobody", generation=gen) == [{tp: Errors.UNKNOWN_MEMBER_ID}]
    assert txn_commit(h, "g", 7, {tp: 1}, member_id=m1, generation=gen + 1) == [{tp: Errors.ILLEGAL_GENERATION}]
    assert txn_commit(h, "g", 7, {tp: 1}, member_id=m1, generation=gen) == [{tp: Errors.NONE}]
    assert txn_commit(h, "g", 7, {tp: 1}) == [{tp: Errors.NONE}]          # no member: no checks (pre-KIP-447)
    assert txn_commit(h, "", 7, {tp: 1}) == [{tp: Errors.INVALID_GROUP_ID}]
    p = partition_for("elsewhere", PARTITIONS)
    h.rm.partitions[(TOPIC, p)].is_leader = False
    h.coord.on_leadership_change([], [((TOPIC, p), 1)], [])
    settle()
    assert txn_commit(h, "elsewhere", 7, {tp: 1}) == [{tp: Errors.NOT_COORDINATOR}]


def test_a_group_with_pending_txn_offsets_does_not_expire(h):
    txn_commit(h, "tx", 1000, {("t", 0): 10})
    h.advance(11 * 60_000)
    h.coord.manager.expire_offsets()
    assert h.group("tx") is not None and h.group("tx").is_(GroupState.EMPTY)
    marker(h, "tx", 1000, True)
    assert fetch_offsets(h, "tx", [("t", 0)]) == {("t", 0): (10, Errors.NONE)}


def test_load_keeps_txn_offsets_pending_until_their_marker(h):
    h.commit("tx", {("t", 0): 5})
    txn_commit(h, "tx", 1000, {("t", 0): 10})
    txn_commit(h, "tx", 2000, {("t", 1): 20})
    txn_commit(h, "tx", 3000, {("t", 2): 30})
    marker(h, "tx", 2000, True)
    marker(h, "tx", 3000, False)

    new = Harness(rm=FakeReplicaManager(logs=h.rm.logs))
    new.own()
    tps = [("t", 0), ("t", 1), ("t", 2)]
    assert fetch_offsets(new, "tx", tps) == {("t", 0): (5, Errors.NONE), ("t", 1): (20, Errors.NONE),
                                            ("t", 2): (-1, Errors.NONE)}
    assert fetch_offsets(new, "tx", tps, True)[("t", 0)] == (-1, Errors.UNSTABLE_OFFSET_COMMIT)
    marker(new, "tx", 1000, True)                              # the marker the loaded state waited for
    assert fetch_offsets(new, "tx", tps, True) == {("t", 0): (10, Errors.NONE), ("t", 1): (20, Errors.NONE),
                                                  ("t", 2): (-1, Errors.NONE)}
    new.coord.shutdown()


def test_offset_delete_and_delete_groups_with_pending_txn_offsets(h):
    """As Kafka: OffsetDelete drops the partitions' pending transactional offsets too, so the COMMIT no longer
    brings them back; an Empty group is deleted even while a transaction of it is open (DeleteGroups looks at
    the state only), and the marker then finds no group."""
    h.commit("tx", {("t", 0): 5})
    txn_commit(h, "tx", 1000, {("t", 0): 10, ("t", 1): 11})
    assert h.coord.handle_delete_offsets("tx", [("t", 0)]) == (Errors.NONE, {("t", 0): Errors.NONE})
    assert fetch_offsets(h, "tx", [("t", 0)], True) == {("t", 0): (-1, Errors.NONE)}
    marker(h, "tx", 1000, True)
    assert fetch_offsets(h, "tx", [("t", 0), ("t", 1)]) == {("t", 0): (-1, Errors.NONE), ("t", 1): (11, Errors.NONE)}

    txn_commit(h, "tx2", 2000, {("t", 0): 7})
    assert h.coord.handle_delete_groups(["tx2"]) == {"tx2": Errors.NONE}
    assert h.group("tx2") is None
    marker(h, "tx2", 2000, True)
    assert h.group("tx2") is None
