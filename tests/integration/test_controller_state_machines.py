"""The controller's partition and replica state machines, its controlled shutdown and topic deletion, on a real
ZooKeeper (a fresh chroot of the session's server), without broker processes.

Each test writes the cluster as it would be found in ZooKeeper (live brokers in /brokers/ids, topics as an admin
wrote them, partition states as an earlier controller left them), elects broker 1 controller with the real client
(its fenced writes check its own /controller_epoch zkVersion) and loads its context from what it reads back; the
state machines, request batch and topic deletion are the ones KafkaController wires together. It asserts the
partition state znodes as read back (JSON and zkVersion, i.e. the partition epoch) and the requests the controller
hands to the network, with the fields brokers act on. The requests sent to ZooKeeper are recorded where they
leave the client, to show a whole event's partitions go in one read and one multi.
"""
from __future__ import annotations

import base64
import json
import logging
import uuid

import pytest
from gevent.event import AsyncResult

from kbroker.controller.context import PartitionState, ReplicaState
from kbroker.controller.controller import KafkaController
from kbroker.controller.partition_state_machine import ControlledShutdownElection, OfflineElection, PreferredElection
from kbroker.protocol.errors import Errors
from kbroker.protocol.interbroker import (LeaderAndIsrRequest, StopReplicaRequest, StopReplicaResponse,
                                          UpdateMetadataRequest)
from zk import znodes as z
from zk.client import KafkaZkClient

S = ReplicaState
EARLIER_CONTROLLER = 9
OLD_LEADER_EPOCH = 3


class FakeChannels:
    """Where the controller hands each request to the network (ControllerChannelManager.send): records each
    request as the broker would decode it from the bytes RequestBatch built."""

    def __init__(self):
        self.sent = []

    def send(self, broker_id, request, callback=None, body=None):
        raw = request.encode(version=request.version) if body is None else body
        self.sent.append((broker_id, type(request).decode(memoryview(raw), version=request.version)))



class PlaintextConfig(dict):
    """The settings the controller reads, on a PLAINTEXT inter-broker listener (no client security)."""
    inter_broker_security = None
    controller_listener = ("PLAINTEXT", None)   # no control.plane.listener.name

def record_zk_requests(zk: KafkaZkClient, before=None) -> list[str]:
    """The kinds of the requests the client sends to ZooKeeper from now on (kazoo's request classes:
    _MultiRead, Transaction, GetData, ...), recorded as each leaves for the server, which still gets it.
    before(kind), if given, runs first: another session's write can land between two of the controller's."""
    sent = []
    send = zk.zk._call

    def call(request, async_object):
        kind = type(request).__name__
        if before is not None:
            before(kind)
        sent.append(kind)
        return send(request, async_object)
    zk.zk._call = call
    return sent


def controller(zk: KafkaZkClient, live=(1, 2, 3), assignments=None, states=None) -> KafkaController:
    """KafkaController 1, active, with its own state machines, request batch and topic deletion, handing its
    requests to FakeChannels. First the cluster is written into ZooKeeper: brokers `live` registered, topics
    {(topic, partition): replicas}, states {(topic, partition): (leader, isr)} left by an earlier controller (its
    epoch 1, leader epoch 3); then broker 1 is elected (controller epoch 2) and loads its context from ZooKeeper."""
    zk.create_top_level_paths()
    for b in live:
        zk.register_broker(z.BrokerInfo(b, [z.EndPoint("PLAINTEXT", f"b{b}", 9092)]))
    assignments = dict(assignments or {})
    for topic in sorted({t for t, _ in assignments}):
        zk.create_topic_assignment(topic, z.TopicAssignment(
            {p: replicas for (t, p), replicas in assignments.items() if t == topic}, z.new_base64_uuid()))
    _, version = zk.register_controller_and_increment_epoch(EARLIER_CONTROLLER)
    if states:
        zk.create_partition_states_fenced({tp: z.LeaderAndIsr(leader, OLD_LEADER_EPOCH, list(isr), 1)
                                           for tp, (leader, isr) in states.items()}, version)
    zk.delete(z.ControllerZNode.path)     # the earlier controller is gone
    config = PlaintextConfig({"controller.socket.timeout.ms": 1000, "delete.topic.enable": True,
                              "unclean.leader.election.enable": False})
    c = KafkaController(1, zk, config, "PLAINTEXT")
    c.batch.channels = FakeChannels()
    ctx = c.ctx
    ctx.epoch, ctx.epoch_zk_version = zk.register_controller_and_increment_epoch(1)
    assert ctx.epoch == 2
    ctx.live_brokers = zk.get_all_brokers()
    for topic in zk.get_all_topics():
        assignment = zk.get_topic_assignment(topic)
        ctx.set_topic_id(topic, assignment.topic_id)
        ctx.assignments.update({(topic, p): replicas for p, replicas in assignment.partitions.items()})
    ctx.partition_states = {tp: s for tp, s in zk.get_partition_states(ctx.assignments).items() if s is not None}
    c.active = True
    return c


def state_znode(zk, tp) -> tuple[dict, int]:
    """A partition's state znode as read back: its JSON and its zkVersion (the partition epoch)."""
    data, stat = zk.get(z.TopicPartitionStateZNode.path(*tp))
    return json.loads(data), stat.version


def state_json(leader, leader_epoch, isr, controller_epoch=2) -> dict:
    return {"controller_epoch": controller_epoch, "leader": leader, "version": 1, "leader_epoch": leader_epoch,
            "isr": isr}


def received(c: KafkaController) -> dict:
    """What the brokers receive from controller c: {"LeaderAndIsr" | "UpdateMetadata" | "StopReplica": {broker:
    {(topic, partition): fields}}} with fields (leader, leader epoch, isr, zkVersion, is_new) for LeaderAndIsr,
    (leader, leader epoch, isr, zkVersion, offline replicas) for UpdateMetadata, (leader epoch, delete) for
    StopReplica, read from each request as the broker decodes it. Checks that each request carries controller
    1, its epoch, the broker's epoch, and the 2.8 version, and that a batch sends each broker one of each."""
    ctx = c.ctx
    out: dict = {"LeaderAndIsr": {}, "UpdateMetadata": {}, "StopReplica": {}}
    for broker, request in c.batch.channels.sent:
        assert (request.controller_id, request.controller_epoch) == (1, ctx.epoch)
        assert request.broker_epoch == ctx.live_brokers[broker].epoch
        if isinstance(request, LeaderAndIsrRequest):
            assert request.version == 5
            fields = {(t.topic_name, p.partition_index): (p.leader, p.leader_epoch, p.isr, p.zk_version, p.is_new)
                      for t in request.topic_states for p in t.partition_states}
        elif isinstance(request, UpdateMetadataRequest):
            assert request.version == 7
            assert [b.id for b in request.live_brokers] == sorted(ctx.live_brokers)
            fields = {(t.topic_name, p.partition_index): (p.leader, p.leader_epoch, p.isr, p.zk_version,
                                                          p.offline_replicas)
                      for t in request.topic_states for p in t.partition_states}
        else:
            assert isinstance(request, StopReplicaRequest) and request.version == 3
            fields = {(t.topic_name, p.partition_index): (p.leader_epoch, p.delete_partition)
                      for t in request.topic_states for p in t.partition_states}
        kind = type(request).__name__.removesuffix("Request")
        assert broker not in out[kind], f"two {kind} requests to broker {broker} in one batch"
        out[kind][broker] = fields
    return out


def send(c: KafkaController) -> dict:
    """Send what the event decided (c's batch) and return it as received(); forgets earlier requests."""
    c.batch.channels.sent.clear()
    c.batch.send()
    return received(c)


def test_new_partitions_go_online_in_one_create(zk_client):
    c = controller(zk_client, live=(2, 3), assignments={("t", 0): [1, 2, 3], ("t", 1): [3, 2, 1]})
    requests = record_zk_requests(zk_client)
    c.partitions.trigger_online_state_change()
    assert requests == ["Transaction", "Transaction"]      # /partitions, then both partitions in one multi
    assert state_znode(zk_client, ("t", 0)) == (state_json(2, 0, [2, 3]), 0)
    assert state_znode(zk_client, ("t", 1)) == (state_json(3, 0, [3, 2]), 0)
    assert c.ctx.partition_state(("t", 0)) is PartitionState.ONLINE
    sent = send(c)
    new = {("t", 0): (2, 0, [2, 3], 0, True), ("t", 1): (3, 0, [3, 2], 0, True)}
    assert sent["LeaderAndIsr"] == {2: new, 3: new}                 # not to broker 1, which is down
    offline = {("t", 0): [1], ("t", 1): [1]}
    assert sent["UpdateMetadata"] == {b: {tp: (*new[tp][:4], offline[tp]) for tp in new} for b in (2, 3)}
    topic_id = {t.topic_id for _, r in c.batch.channels.sent if isinstance(r, LeaderAndIsrRequest)
                for t in r.topic_states}
    assert topic_id == {uuid.UUID(bytes=base64.urlsafe_b64decode(c.ctx.topic_ids["t"] + "=="))}  # /brokers/topics/t's


def test_offline_election_from_the_live_isr_pipelined_and_bumps_the_epoch(zk_client):
    assignments = {("t", p): [1, 2, 3] for p in range(50)}
    c = controller(zk_client, live=(2, 3), assignments=assignments, states={tp: (1, [1, 3, 2]) for tp in assignments})
    requests = record_zk_requests(zk_client)
    c.partitions.trigger_online_state_change()
    # One write for all 50 partitions, decided on the states the controller holds (conditional on each partition
    # epoch, so nothing is read first; the topic's unclean.leader.election.enable is read only for a partition
    # without a live in-sync replica, as Kafka).
    assert requests == ["Transaction"]
    assert state_znode(zk_client, ("t", 7)) == (state_json(2, 4, [3, 2]), 1)
    assert len({zk_client.get(z.TopicPartitionStateZNode.path(*tp))[1].mzxid for tp in assignments}) == 1
    assert c.ctx.partition_states[("t", 7)].zk_version == 1
    sent = send(c)
    expected = {tp: (2, 4, [3, 2], 1, False) for tp in assignments}
    assert sent["LeaderAndIsr"] == {2: expected, 3: expected}
    assert sent["UpdateMetadata"][2][("t", 7)] == (2, 4, [3, 2], 1, [1])


def test_offline_partition_without_live_isr_stays_offline(zk_client):
    tps = {("t", 0): [1, 2]}
    c = controller(zk_client, live=(2,), assignments=tps, states={("t", 0): (1, [1])})
    assert c.partitions.elect(tps, OfflineElection()) == {("t", 0): None}
    assert state_znode(zk_client, ("t", 0)) == (state_json(-1, 4, [1]), 1)      # leaderless, its ISR kept
    sent = send(c)
    assert sent["LeaderAndIsr"] == {} and sent["StopReplica"] == {}
    assert sent["UpdateMetadata"] == {2: {("t", 0): (-1, 4, [1], 1, [1])}}
    # Electing again finds nothing to write: still leaderless, same partition epoch.
    assert c.partitions.elect(tps, OfflineElection()) == {("t", 0): None}
    assert state_znode(zk_client, ("t", 0))[1] == 1


def test_offline_partition_without_live_isr_goes_unclean_when_its_topic_allows(zk_client):
    tps = {("t", 0): [1, 2]}
    c = controller(zk_client, live=(2,), assignments=tps, states={("t", 0): (1, [1])})
    zk_client.set_or_create_entity_config("topics", "t", {"unclean.leader.election.enable": "true"})
    assert c.partitions.elect(tps, OfflineElection()).get(("t", 0)).leader == 2
    assert state_znode(zk_client, ("t", 0)) == (state_json(2, 4, [2]), 1)
    assert send(c)["LeaderAndIsr"] == {2: {("t", 0): (2, 4, [2], 1, False)}}


def test_a_leaders_isr_write_in_between_is_reread_and_decided_again(zk_client, zk_connect):
    tps = {("t", 0): [1, 2, 3]}
    c = controller(zk_client, live=(2, 3), assignments=tps, states={("t", 0): (1, [1, 2, 3])})
    leader = KafkaZkClient(zk_connect, 6000).start()      # the leader's own session
    shrunk = []

    def leader_shrinks_isr(kind):
        if kind == "Transaction" and not shrunk:
            shrunk.append(leader.update_leader_and_isr("t", 0, z.LeaderAndIsr(1, OLD_LEADER_EPOCH, [1, 3], 1, 0)))
    try:
        requests = record_zk_requests(zk_client, before=leader_shrinks_isr)
        new = c.partitions.elect(tps, OfflineElection())[("t", 0)]
    finally:
        leader.close()
    assert shrunk == [1]
    assert (new.leader, new.isr, new.zk_version) == (3, [3], 2)
    assert requests == ["Transaction", "_MultiRead", "Transaction"]   # refused, re-read, decided again
    assert state_znode(zk_client, ("t", 0)) == (state_json(3, 4, [3]), 2)
    assert send(c)["LeaderAndIsr"] == {b: {("t", 0): (3, 4, [3], 2, False)} for b in (2, 3)}


def test_a_partition_left_alone_on_an_outdated_isr_is_read_and_decided_again(zk_client, zk_connect):
    # The leader (2) took 1 back into the ISR, and its ISR change notification has not reached the controller:
    # on its own copy a preferred election finds 1 out of sync, so it reads the state and elects 1 (as Kafka,
    # which reads every state first).
    tps = {("t", 0): [1, 2]}
    c = controller(zk_client, assignments=tps, states={("t", 0): (2, [2])})
    leader = KafkaZkClient(zk_connect, 6000).start()
    try:
        assert leader.update_leader_and_isr("t", 0, z.LeaderAndIsr(2, OLD_LEADER_EPOCH, [2, 1], 1, 0)) == 1
    finally:
        leader.close()
    assert c.ctx.partition_states[("t", 0)].isr == [2]
    new = c.partitions.elect(tps, PreferredElection())[("t", 0)]
    assert (new.leader, new.isr, new.zk_version) == (1, [2, 1], 2)
    assert state_znode(zk_client, ("t", 0)) == (state_json(1, 4, [2, 1]), 2)


def test_preferred_and_controlled_shutdown_elections(zk_client):
    tps = {("t", 0): [1, 2, 3], ("t", 1): [1, 2, 3]}
    c = controller(zk_client, assignments=tps, states={("t", 0): (2, [1, 2, 3]), ("t", 1): (2, [2, 3])})
    out = c.partitions.elect(tps, PreferredElection())
    assert out[("t", 0)].leader == 1 and out[("t", 1)] is None     # 1 is not in sync for partition 1
    assert state_znode(zk_client, ("t", 0)) == (state_json(1, 4, [1, 2, 3]), 1)
    assert state_znode(zk_client, ("t", 1)) == (state_json(2, OLD_LEADER_EPOCH, [2, 3], 1), 0)   # untouched
    assert send(c)["LeaderAndIsr"] == {b: {("t", 0): (1, 4, [1, 2, 3], 1, False)} for b in (1, 2, 3)}
    c.ctx.shutting_down.add(1)
    out = c.partitions.elect([("t", 0)], ControlledShutdownElection())
    assert (out[("t", 0)].leader, out[("t", 0)].isr) == (2, [2, 3])
    assert state_znode(zk_client, ("t", 0)) == (state_json(2, 5, [2, 3]), 2)
    # Not to the broker shutting down.
    assert send(c)["LeaderAndIsr"] == {b: {("t", 0): (2, 5, [2, 3], 2, False)} for b in (2, 3)}


def test_invalid_partition_transition_is_logged_and_skipped(zk_client, caplog):
    c = controller(zk_client, assignments={("t", 0): [1]})
    requests = record_zk_requests(zk_client)
    with caplog.at_level(logging.ERROR, logger="state-change"):
        assert c.partitions.elect([("u", 0)], OfflineElection()) == {}
    assert "invalid transition from NonExistentPartition to OnlinePartition" in caplog.text
    assert requests == []
    assert zk_client.children("/brokers/topics") == ["t"]


def test_offline_replicas_leave_the_isr_but_never_the_last_member_nor_a_live_leader(zk_client):
    tps = {("t", 0): [1, 2, 3], ("t", 1): [2, 3], ("t", 2): [3, 1]}
    c = controller(zk_client, live=(1, 2, 3), assignments=tps, states={
        ("t", 0): (1, [1, 2, 3]), ("t", 1): (2, [3]), ("t", 2): (3, [3, 1])})
    c.replicas.handle_state_changes([("t", 0, 3), ("t", 1, 3), ("t", 2, 3)], S.OFFLINE)
    assert state_znode(zk_client, ("t", 0)) == (state_json(1, 4, [1, 2]), 1)
    # The last member stays; a live leader needs an election, not an ISR shrink: neither is written.
    assert state_znode(zk_client, ("t", 1)) == (state_json(2, OLD_LEADER_EPOCH, [3], 1), 0)
    assert state_znode(zk_client, ("t", 2)) == (state_json(3, OLD_LEADER_EPOCH, [3, 1], 1), 0)
    sent = send(c)
    assert sent["StopReplica"] == {3: {("t", 0): (4, False), ("t", 1): (OLD_LEADER_EPOCH, False),
                                       ("t", 2): (OLD_LEADER_EPOCH, False)}}
    assert sent["LeaderAndIsr"] == {b: {("t", 0): (1, 4, [1, 2], 1, False)} for b in (1, 2)}


def test_replica_deletion_states_and_invalid_transitions(zk_client, caplog):
    c = controller(zk_client, assignments={("t", 0): [1, 2]}, states={("t", 0): (1, [1, 2])})
    requests = record_zk_requests(zk_client)
    replicas = [("t", 0, 1), ("t", 0, 2)]
    with caplog.at_level(logging.ERROR, logger="state-change"):
        assert c.replicas.handle_state_changes(replicas, S.DELETION_SUCCESSFUL) == []
    assert "invalid transition from OnlineReplica to ReplicaDeletionSuccessful" in caplog.text
    c.replicas.handle_state_changes(replicas, S.DELETION_STARTED)
    assert send(c)["StopReplica"] == {b: {("t", 0): (OLD_LEADER_EPOCH, True)} for b in (1, 2)}
    c.replicas.handle_state_changes(replicas[:1], S.DELETION_SUCCESSFUL)
    assert [c.ctx.replica_state(r) for r in replicas] == [S.DELETION_SUCCESSFUL, S.DELETION_STARTED]
    c.replicas.handle_state_changes(replicas[:1], S.NON_EXISTENT)
    assert ("t", 0, 1) not in c.ctx.replica_deletion_states
    assert requests == []       # the deletion states are the controller's own: nothing is written to ZooKeeper


def test_controlled_shutdown_moves_replicated_leaders_and_does_not_count_single_replicas(zk_client):
    c = controller(zk_client, assignments={("t", 0): [3, 1, 2], ("t", 1): [1, 3], ("solo", 0): [3]},
                   states={("t", 0): (3, [3, 1, 2]), ("t", 1): (1, [1, 3]), ("solo", 0): (3, [3])})
    result = AsyncResult()
    requests = record_zk_requests(zk_client)
    c._process_controlled_shutdown(3, c.ctx.live_brokers[3].epoch, result)
    assert result.get(timeout=1) == (Errors.NONE, [])          # ("solo", 0) cannot move and is not reported
    assert requests == ["Transaction"]   # the leader moved and the ISR left: one round of writes (one multi here)
    assert state_znode(zk_client, ("t", 0)) == (state_json(1, 4, [1, 2]), 1)
    assert state_znode(zk_client, ("t", 1)) == (state_json(1, 4, [1]), 1)
    assert state_znode(zk_client, ("solo", 0)) == (state_json(3, OLD_LEADER_EPOCH, [3], 1), 0)   # left alone
    sent = received(c)
    assert sent["LeaderAndIsr"] == {1: {("t", 0): (1, 4, [1, 2], 1, False), ("t", 1): (1, 4, [1], 1, False)},
                                    2: {("t", 0): (1, 4, [1, 2], 1, False)}}
    # It stops, without deleting, only what it followed before the shutdown (Kafka 2.8's doControlledShutdown
    # splits before electing): ("t", 0), led until now, is not stopped.
    assert sent["StopReplica"] == {3: {("t", 1): (4, False)}}
    assert set(sent["UpdateMetadata"]) == {1, 2, 3}


def test_controlled_shutdown_reports_a_replicated_partition_it_cannot_move(zk_client):
    c = controller(zk_client, live=(1, 3), assignments={("t", 0): [3, 2]}, states={("t", 0): (3, [3])})
    result = AsyncResult()
    c._process_controlled_shutdown(3, c.ctx.live_brokers[3].epoch, result)
    assert result.get(timeout=1) == (Errors.NONE, [("t", 0)])
    assert state_znode(zk_client, ("t", 0)) == (state_json(3, OLD_LEADER_EPOCH, [3], 1), 0)
    assert received(c)["LeaderAndIsr"] == {}
    # A broker epoch older than the registered one is refused.
    result = AsyncResult()
    c._process_controlled_shutdown(3, c.ctx.live_brokers[3].epoch - 1, result)
    assert result.get(timeout=1) == (Errors.STALE_BROKER_EPOCH, [])


def stop_replica_response(*partitions):
    E = StopReplicaResponse.StopReplicaPartitionError
    return StopReplicaResponse(version=3, error_code=0, partition_errors=[
        E(topic_name="t", partition_index=p, error_code=0) for p in partitions])


def test_topic_deletion_waits_for_offline_replicas_then_completes_when_all_answered(zk_client):
    c = controller(zk_client, live=(1, 2), assignments={("t", 0): [1, 2], ("t", 1): [2, 3]},
                   states={("t", 0): (1, [1, 2]), ("t", 1): (2, [2])})
    ctx, deletion = c.ctx, c.topic_deletion
    zk_client.set_or_create_entity_config("topics", "t", {"retention.ms": "1000"})
    zk_client.create_delete_topic_marker("t")
    ctx.topics_to_delete.add("t")
    deletion.resume()
    assert ctx.replica_state(("t", 1, 3)) is S.DELETION_INELIGIBLE and not ctx.topics_being_deleted
    assert c.batch.channels.sent == []
    zk_client.register_broker(z.BrokerInfo(3, [z.EndPoint("PLAINTEXT", "b3", 9092)]))     # broker 3 came back
    ctx.live_brokers[3] = zk_client.get_broker(3)
    c.replicas.handle_state_changes([("t", 1, 3)], S.ONLINE)
    deletion.resume({3})
    assert ctx.topics_being_deleted == {"t"}
    sent = received(c)
    # Brokers learn the partitions are being deleted (leader -2), then every replica is stopped and deleted.
    assert {tp: fields[0] for b in (1, 2, 3) for tp, fields in sent["UpdateMetadata"][b].items()} == \
        {("t", 0): -2, ("t", 1): -2}
    assert sent["StopReplica"] == {1: {("t", 0): (-2, True)}, 2: {("t", 0): (-2, True), ("t", 1): (-2, True)},
                                   3: {("t", 1): (-2, True)}}
    deletion.on_stop_replica_response(2, stop_replica_response(0, 1))
    deletion.on_stop_replica_response(1, stop_replica_response(0))
    assert ctx.replica_state(("t", 1, 3)) is S.DELETION_STARTED
    assert zk_client.children("/brokers/topics") == ["t"] and zk_client.children("/admin/delete_topics") == ["t"]
    c.batch.channels.sent.clear()
    deletion.resume({3})                                           # 3 restarted again before answering
    assert received(c) == {"LeaderAndIsr": {}, "UpdateMetadata": {}, "StopReplica": {3: {("t", 1): (-2, True)}}}
    deletion.on_stop_replica_response(3, stop_replica_response(1))
    # Every znode of the topic is gone: assignment, partition states, config and the deletion marker.
    assert zk_client.children("/brokers/topics") == [] and zk_client.children("/config/topics") == []
    assert zk_client.children("/admin/delete_topics") == []
    assert "t" not in ctx.topics() and not ctx.replica_deletion_states


def test_a_request_waiting_on_a_controller_event_that_fails_gets_the_error(zk_client):
    c = controller(zk_client, assignments={("t", 0): [1]}, states={("t", 0): (1, [1])})
    result = AsyncResult()

    def broken():
        raise KeyError("boom")
    with pytest.raises(KeyError):
        c._process_ask(broken, (), result)     # the event loop logs it and goes on
    with pytest.raises(KeyError):
        result.get(timeout=1)                   # the handler waiting in _ask fails instead of hanging
