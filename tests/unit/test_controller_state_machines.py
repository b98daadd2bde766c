"""The controller's partition and replica state machines over an explicit context, with a fake ZooKeeper that
keeps state znodes with versions (compare-and-set like the real one) and counts round trips."""
from __future__ import annotations

import dataclasses
import logging

from gevent.event import AsyncResult

from kbroker.controller.channel import RequestBatch
from kbroker.controller.context import ControllerContext, PartitionState, ReplicaState
from kbroker.controller.controller import KafkaController
from kbroker.controller.leader_and_isr import LeaderAndIsrWriter
from kbroker.controller.partition_state_machine import (ControlledShutdownElection, OfflineElection,
                                                        PartitionStateMachine, PreferredElection)
from kbroker.controller.replica_state_machine import ReplicaStateMachine
from kbroker.protocol.errors import Errors
from zk import znodes as z

S = ReplicaState


class FakeZk:
    def __init__(self):
        self.states: dict = {}
        self.calls: list[str] = []
        self.behind_our_back = None   # called once before the next update: a leader's own ISR write

    def get_partition_states(self, partitions):
        self.calls.append("get")
        return {tp: dataclasses.replace(self.states[tp]) if tp in self.states else None for tp in sorted(partitions)}

    def create_partition_states_fenced(self, states, epoch_zk_version):
        self.calls.append("create")
        for tp, state in states.items():
            state.zk_version = 0
            self.states[tp] = dataclasses.replace(state)

    def update_partition_states_fenced(self, states, epoch_zk_version):
        self.calls.append("update")
        if self.behind_our_back is not None:
            self.behind_our_back(self.states)
            self.behind_our_back = None
        out = {}
        for tp, state in states.items():
            current = self.states.get(tp)
            if current is None or current.zk_version != state.zk_version:
                out[tp] = None
                continue
            self.states[tp] = dataclasses.replace(state, zk_version=current.zk_version + 1)
            out[tp] = current.zk_version + 1
        return out

    def get_entity_config(self, entity_type, name):
        return {}


class FakeChannels:
    def __init__(self):
        self.sent = []

    def send(self, broker_id, request, callback=None):
        self.sent.append((broker_id, request.__class__.__name__, request))

    def add_broker(self, info):
        pass

    def remove_broker(self, broker_id):
        pass

    def shutdown(self):
        pass


def broker(i):
    return z.BrokerInfo(i, [z.EndPoint("PLAINTEXT", f"b{i}", 9092)], epoch=100 + i)


def setup(live=(1, 2, 3), assignments=None, states=None, unclean=False):
    ctx = ControllerContext(1, "PLAINTEXT", epoch=5, epoch_zk_version=4)
    ctx.live_brokers = {b: broker(b) for b in live}
    ctx.assignments = dict(assignments or {})
    zk = FakeZk()
    for tp, (leader, isr) in (states or {}).items():
        zk.states[tp] = z.LeaderAndIsr(leader, 3, list(isr), 4, zk_version=7)
        ctx.partition_states[tp] = dataclasses.replace(zk.states[tp])
    for t, _ in ctx.assignments:
        ctx.topic_ids[t] = z.new_base64_uuid()
    channels = FakeChannels()
    batch = RequestBatch(ctx, channels)
    writer = LeaderAndIsrWriter(ctx, zk)
    psm = PartitionStateMachine(ctx, writer, batch, lambda topic: unclean)
    rsm = ReplicaStateMachine(ctx, writer, batch)
    return ctx, zk, batch, psm, rsm


def test_states_are_derived_from_the_context():
    ctx, *_ = setup(live=(1, 2), assignments={("t", 0): [1, 2], ("t", 1): [3, 1], ("t", 2): [1]},
                    states={("t", 0): (1, [1, 2]), ("t", 1): (3, [3, 1])})
    assert ctx.partition_state(("t", 0)) is PartitionState.ONLINE
    assert ctx.partition_state(("t", 1)) is PartitionState.OFFLINE     # its leader 3 is not live
    assert ctx.partition_state(("t", 2)) is PartitionState.NEW
    assert ctx.partition_state(("u", 0)) is PartitionState.NON_EXISTENT
    assert ctx.replica_state(("t", 1, 3)) is S.OFFLINE
    assert ctx.replica_state(("t", 1, 1)) is S.ONLINE
    assert ctx.replica_state(("t", 2, 1)) is S.NEW
    assert ctx.replica_state(("t", 0, 3)) is S.NON_EXISTENT
    ctx.replica_deletion_states[("t", 0, 2)] = S.DELETION_STARTED
    assert ctx.replica_state(("t", 0, 2)) is S.DELETION_STARTED


def test_new_partitions_go_online_in_one_create():
    ctx, zk, batch, psm, _ = setup(live=(2, 3), assignments={("t", 0): [1, 2, 3], ("t", 1): [3, 2, 1]})
    psm.trigger_online_state_change()
    assert zk.calls == ["create"]
    assert zk.states[("t", 0)].leader == 2 and zk.states[("t", 0)].isr == [2, 3]
    assert ctx.partition_states[("t", 1)].leader == 3
    assert batch.leader_and_isr == {2: {("t", 0): True, ("t", 1): True}, 3: {("t", 0): True, ("t", 1): True}}
    assert ctx.partition_state(("t", 0)) is PartitionState.ONLINE


def test_offline_election_from_the_live_isr_pipelined_and_bumps_the_epoch():
    assignments = {("t", p): [1, 2, 3] for p in range(50)}
    ctx, zk, batch, psm, _ = setup(live=(2, 3), assignments=assignments,
                                   states={tp: (1, [1, 3, 2]) for tp in assignments})
    psm.trigger_online_state_change()
    assert zk.calls == ["get", "update"]      # one read and one write for all 50 partitions
    new = zk.states[("t", 7)]
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (2, [3, 2], 4, 5)
    assert ctx.partition_states[("t", 7)].zk_version == 8
    assert set(batch.leader_and_isr) == {2, 3}


def test_offline_partition_without_live_isr_stays_offline_or_goes_unclean():
    tps = {("t", 0): [1, 2]}
    ctx, zk, batch, psm, _ = setup(live=(2,), assignments=tps, states={("t", 0): (1, [1])})
    assert psm.elect(tps, OfflineElection()) == {("t", 0): None}
    assert zk.states[("t", 0)].leader == -1 and zk.states[("t", 0)].isr == [1]
    assert ("t", 0) in batch.update_metadata_partitions
    ctx, zk, batch, psm, _ = setup(live=(2,), assignments=tps, states={("t", 0): (1, [1])}, unclean=True)
    assert psm.elect(tps, OfflineElection()).get(("t", 0)).leader == 2
    assert zk.states[("t", 0)].isr == [2]


def test_a_leaders_isr_write_in_between_is_reread_and_decided_again():
    tps = {("t", 0): [1, 2, 3]}
    ctx, zk, batch, psm, _ = setup(live=(2, 3), assignments=tps, states={("t", 0): (1, [1, 2, 3])})

    def leader_shrinks_isr(states):
        states[("t", 0)] = dataclasses.replace(states[("t", 0)], isr=[1, 3], zk_version=8)
    zk.behind_our_back = leader_shrinks_isr
    new = psm.elect(tps, OfflineElection())[("t", 0)]
    assert (new.leader, new.isr, new.zk_version) == (3, [3], 9)
    assert zk.calls == ["get", "update", "get", "update"]


def test_preferred_and_controlled_shutdown_elections():
    tps = {("t", 0): [1, 2, 3], ("t", 1): [1, 2, 3]}
    ctx, zk, batch, psm, _ = setup(assignments=tps, states={("t", 0): (2, [1, 2, 3]), ("t", 1): (2, [2, 3])})
    out = psm.elect(tps, PreferredElection())
    assert out[("t", 0)].leader == 1 and out[("t", 1)] is None     # 1 is not in sync for partition 1
    ctx.shutting_down.add(1)
    batch.clear()
    out = psm.elect([("t", 0)], ControlledShutdownElection())
    assert (out[("t", 0)].leader, out[("t", 0)].isr) == (2, [2, 3])
    assert set(batch.leader_and_isr) == {2, 3}           # not to the broker shutting down


def test_invalid_partition_transition_is_logged_and_skipped(caplog):
    ctx, zk, batch, psm, _ = setup(assignments={("t", 0): [1]})
    with caplog.at_level(logging.ERROR, logger="state-change"):
        assert psm.elect([("u", 0)], OfflineElection()) == {}
    assert "invalid transition from NonExistentPartition to OnlinePartition" in caplog.text
    assert zk.calls == []


def test_offline_replicas_leave_the_isr_but_never_the_last_member_nor_a_live_leader():
    tps = {("t", 0): [1, 2, 3], ("t", 1): [2, 3], ("t", 2): [3, 1]}
    ctx, zk, batch, _, rsm = setup(live=(1, 2, 3), assignments=tps,
                                   states={("t", 0): (1, [1, 2, 3]), ("t", 1): (2, [3]), ("t", 2): (3, [3, 1])})
    rsm.handle_state_changes([("t", 0, 3), ("t", 1, 3), ("t", 2, 3)], S.OFFLINE)
    assert zk.states[("t", 0)].isr == [1, 2]
    assert zk.states[("t", 1)].isr == [3]                # the last member stays
    assert zk.states[("t", 2)].leader == 3               # a live leader needs an election, not an ISR shrink
    assert batch.stop_replica == {3: {("t", 0): False, ("t", 1): False, ("t", 2): False}}
    assert batch.leader_and_isr == {1: {("t", 0): False}, 2: {("t", 0): False}}


def test_replica_deletion_states_and_invalid_transitions(caplog):
    tps = {("t", 0): [1, 2]}
    ctx, zk, batch, _, rsm = setup(assignments=tps, states={("t", 0): (1, [1, 2])})
    replicas = [("t", 0, 1), ("t", 0, 2)]
    with caplog.at_level(logging.ERROR, logger="state-change"):
        assert rsm.handle_state_changes(replicas, S.DELETION_SUCCESSFUL) == []
    assert "invalid transition from OnlineReplica to ReplicaDeletionSuccessful" in caplog.text
    rsm.handle_state_changes(replicas, S.DELETION_STARTED)
    assert batch.stop_replica == {1: {("t", 0): True}, 2: {("t", 0): True}}
    rsm.handle_state_changes(replicas[:1], S.DELETION_SUCCESSFUL)
    assert [ctx.replica_state(r) for r in replicas] == [S.DELETION_SUCCESSFUL, S.DELETION_STARTED]
    rsm.handle_state_changes(replicas[:1], S.NON_EXISTENT)
    assert ("t", 0, 1) not in ctx.replica_deletion_states


def controller_with(ctx_setup):
    ctx, zk, batch, psm, rsm = ctx_setup
    config = {"controller.socket.timeout.ms": 1000, "delete.topic.enable": True,
              "unclean.leader.election.enable": False}
    controller = KafkaController(1, zk, config, "PLAINTEXT")
    controller.ctx.__dict__.update(ctx.__dict__)
    controller.batch.channels = FakeChannels()
    controller.active = True
    return controller, zk


def test_controlled_shutdown_moves_replicated_leaders_and_does_not_count_single_replicas():
    tps = {("t", 0): [3, 1, 2], ("t", 1): [1, 3], ("solo", 0): [3]}
    controller, zk = controller_with(setup(assignments=tps, states={
        ("t", 0): (3, [3, 1, 2]), ("t", 1): (1, [1, 3]), ("solo", 0): (3, [3])}))
    result = AsyncResult()
    controller._process_controlled_shutdown(3, 103, result)
    error, remaining = result.get(timeout=1)
    assert error is Errors.NONE and remaining == []             # ("solo", 0) cannot move and is not reported
    assert (zk.states[("t", 0)].leader, zk.states[("t", 0)].isr) == (1, [1, 2])
    assert zk.states[("t", 1)].isr == [1]
    assert zk.states[("solo", 0)].leader == 3                   # left alone
    assert {(b, kind) for b, kind, _ in controller.batch.channels.sent} >= {
        (1, "LeaderAndIsrRequest"), (2, "LeaderAndIsrRequest"), (3, "StopReplicaRequest")}
    # A replicated partition it could not move is still reported.
    controller, zk = controller_with(setup(live=(1, 3), assignments={("t", 0): [3, 2]},
                                           states={("t", 0): (3, [3])}))
    result = AsyncResult()
    controller._process_controlled_shutdown(3, 103, result)
    assert result.get(timeout=1) == (Errors.NONE, [("t", 0)])


def test_topic_deletion_waits_for_offline_replicas_then_completes_when_all_answered():
    from kbroker.controller.topic_deletion import TopicDeletionManager

    class DeletingZk(FakeZk):
        deleted = []

        def delete_topic_fenced(self, topic, epoch_zk_version):
            self.deleted.append(topic)

    class Response:
        error_code = 0

        def __init__(self, *partitions):
            self.partition_errors = [type("E", (), {"topic_name": "t", "partition_index": p, "error_code": 0})()
                                     for p in partitions]
    tps = {("t", 0): [1, 2], ("t", 1): [2, 3]}
    ctx, _, batch, _, rsm = setup(live=(1, 2), assignments=tps, states={("t", 0): (1, [1, 2]), ("t", 1): (2, [2])})
    zk = DeletingZk()
    deletion = TopicDeletionManager(ctx, zk, rsm, batch, enabled=True)
    ctx.topics_to_delete.add("t")
    deletion.resume()
    assert ctx.replica_state(("t", 1, 3)) is S.DELETION_INELIGIBLE and not ctx.topics_being_deleted
    ctx.live_brokers[3] = broker(3)
    rsm.handle_state_changes([("t", 1, 3)], S.ONLINE)             # broker 3 came back
    deletion.resume({3})
    assert ctx.topics_being_deleted == {"t"}
    assert batch.channels.sent and {b for b, kind, _ in batch.channels.sent if kind == "StopReplicaRequest"} == {1, 2, 3}
    deletion.on_stop_replica_response(2, Response(0, 1))
    deletion.on_stop_replica_response(1, Response(0))
    assert zk.deleted == [] and ctx.replica_state(("t", 1, 3)) is S.DELETION_STARTED
    batch.channels.sent.clear()
    deletion.resume({3})                                           # 3 restarted again before answering
    assert [(b, kind) for b, kind, _ in batch.channels.sent] == [(3, "StopReplicaRequest")]
    deletion.on_stop_replica_response(3, Response(1))
    assert zk.deleted == ["t"] and "t" not in ctx.topics() and not ctx.replica_deletion_states
