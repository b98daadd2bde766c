"""Network partitions (issue 14): ZooKeeper, three brokers and the clients each in a network namespace of their
own (tests/chaos/netns.py), links cut with iptables while an acks=all idempotent producer writes and a reader
tails. One cluster for the module; the cases run in order, each on its own topic (3 partitions, RF 3,
min.insync.replicas=2), each healed before the next, each ending with the shared checks (harness.verify):
every acknowledged record present once at its offset, one single history, the replicas' logs equal.

(a) a leader cut off from ZooKeeper and its followers, not from the producer: it acknowledges nothing more (an
    acks=all write sent to it times out), a new leader is elected, and after healing the old leader truncates
    its unreplicated tail;
(b) a follower cut off from the other brokers: its leaders drop it from the ISR (the partition state znode),
    writes go on, and it rejoins the ISR after healing;
(c) the controller cut off from ZooKeeper: another broker becomes controller with a higher epoch, a push
    stamped with the old epoch is refused, the old controller resigns once back, the brokers' state agrees
    with ZooKeeper's, and the old controller applies dynamic configs again in its new session;
(d) the producer's answers lost for longer than its request timeout (its requests still arrive): its retries
    are recognised as duplicates, nothing is written twice;
(e) the controller's ZooKeeper connection broken and back within the session: it still watches its topics.
The figures (tests/chaos/conftest.py) give each case's worst per-partition unavailability.
Skipped where network namespaces cannot be made (not root)."""
from __future__ import annotations

import contextlib
import os
import time

import pytest
from click.testing import CliRunner
from kafka.protocol.metadata import MetadataRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from admin_cli.main import cli as kadmin
from kbroker.cluster import BrokerProcess, metadata, wait_until
from kbroker.protocol.client import Connection
from kbroker.protocol.client.requests import produce_request
from kbroker.protocol.interbroker import LeaderAndIsrRequest
from tests.chaos import netns
from tests.chaos.cluster import BROKER_PORT, BROKERS, PARTITIONS, NamespacedCluster
from tests.chaos.harness import AckedProducer, ChaosRun, HistoryReader, read_all, verify
from zk.admin import AdminZkClient
from zk.launcher import ZooKeeperServer

ZK_PORT = 12181
# A leader cut off from its followers answers acks=all produces with REQUEST_TIMED_OUT (after request.timeout.ms)
# and its metadata still names itself, never NOT_LEADER (as Kafka's does): the producer learns of the new leader
# from its periodic metadata refresh, here every second instead of every 5 minutes.
PRODUCER_CONFIG = {"request.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000}


class PartitionedCluster(NamespacedCluster):
    """One ZooKeeper ("zk") and brokers b1-b3, each in its namespace."""

    def __init__(self, net: netns.Network, workdir: str):
        self.zk_server = ZooKeeperServer(ZK_PORT, os.path.join(workdir, "zookeeper"), host=net.addresses["zk"],
                                         netns=net.members["zk"])
        super().__init__(net, workdir, self.zk_server.connect, [self.zk_server])

    def kadmin(self, *args: str) -> None:
        result = CliRunner().invoke(kadmin, ["--zookeeper", self.zk_server.connect, *args])
        assert result.exit_code == 0, result.output

    def create_topic(self, topic: str, assignment: str | None = None) -> None:
        layout = ["--replica-assignment", assignment] if assignment else ["--partitions", str(PARTITIONS),
                                                                           "--replication-factor", "3"]
        self.kadmin("create-topic", topic, *layout, "--config", "min.insync.replicas=2")
        wait_until(lambda: self.all_in_sync(topic), 30, message=f"{topic} online")

    def leader(self, topic: str, partition: int) -> int:
        state = self.state(topic, partition)
        return state.leader if state else -1

    def controller(self) -> tuple[int | None, int]:
        """(the controller's id, /controller_epoch)."""
        epoch = self.zk.get_controller_epoch()
        return self.zk.get_controller_id(), epoch[0] if epoch else 0

    def others(self, broker_id: int) -> list[str]:
        return [f"b{i}" for i in BROKERS if i != broker_id]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with contextlib.ExitStack() as stack:
        # every client of this thread (and of its threads) lives in "cl"
        net = stack.enter_context(netns.module_network(["zk", "b1", "b2", "b3", "cl", "pr"], "cl"))
        c = PartitionedCluster(net, str(tmp_path_factory.mktemp("partitions")))
        stack.callback(c.stop)
        c.start()
        yield c


@pytest.fixture(autouse=True)
def healed(cluster):
    """Whatever a case left cut (it failed halfway) is healed before the next."""
    yield
    cluster.net.heal()


class Traffic:
    """The case's producer (in its own namespace, so that (d) can cut it alone) and history reader."""

    def __init__(self, c: PartitionedCluster, topic: str, run: str, **producer_config):
        self.c, self.topic = c, topic
        with c.net.entered("pr"):   # librdkafka's threads, made here, open their sockets in there
            self.producer = AckedProducer(c.bootstrap, topic, PARTITIONS,
                                          **{**PRODUCER_CONFIG, **producer_config}).start()
        self.reader = HistoryReader(c.bootstrap, topic, PARTITIONS).start()
        self.run = ChaosRun(run)
        wait_until(lambda: all(self.producer.acked_count(p) > 0 for p in range(PARTITIONS)), 30,
                   message="first acknowledgements")

    def progress(self, partitions=range(PARTITIONS), timeout: float = 30) -> None:
        """Until each of the partitions gets new acknowledgements."""
        before = {p: self.producer.acked_count(p) for p in partitions}
        wait_until(lambda: all(self.producer.acked_count(p) > before[p] for p in partitions), timeout,
                   message=f"acknowledgements on {self.topic} partitions {list(partitions)}")

    def finish(self) -> dict:
        """Stop, read everything back, run the shared checks and record the figures; the final log."""
        c = self.c
        wait_until(lambda: c.all_in_sync(self.topic), 60, message=f"{self.topic} fully in sync after healing")
        self.progress()
        self.producer.stop()
        self.reader.stop()
        assert self.producer.failed == 0
        final = read_all(c.bootstrap, self.topic, PARTITIONS)
        lost = verify(self.producer, final, [self.reader],
                      [os.path.join(b.dir, "data") for b in c.brokers.values()])
        self.run.finish(self.producer, lost)
        return final


def test_a_leader_cut_off_from_zookeeper_and_followers(cluster):
    c = cluster
    c.create_topic("part-a")
    controller, _ = c.controller()
    partition = next(p for p in range(PARTITIONS) if c.leader("part-a", p) != controller)
    old = c.state("part-a", partition)
    victim = c.brokers[old.leader]
    traffic = Traffic(c, "part-a", "partition: leader cut off")

    traffic.run.fault("leader cut from zk+followers")
    c.net.block(f"b{victim.id}", "zk", *c.others(victim.id))
    wait_until(lambda: c.leader("part-a", partition) not in (-1, victim.id), 30, message="a new leader")
    assert c.state("part-a", partition).leader_epoch > old.leader_epoch
    traffic.progress([partition])     # the new leader takes writes while the old one still believes it leads
    # The old leader, still reachable from clients, appends an acks=all write but never acknowledges it.
    assert produce(victim, "part-a", partition, b"zombie", acks=-1) == 7    # REQUEST_TIMED_OUT
    c.net.heal()

    final = traffic.finish()
    # After healing, the old leader truncated what it alone had (its replica now equals the others, see verify).
    assert f"partition part-a-{partition}: truncating from" in victim.log()
    assert b"zombie" not in final.values()


def produce(b: BrokerProcess, topic: str, partition: int, value: bytes, acks: int) -> int:
    """One Produce of one record straight to broker b (a 2 s timeout); the partition's error code."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
    builder.append(int(time.time() * 1000), None, value, [])
    builder.close()
    conn = Connection(b.host, b.port, "partitions-test", timeout=10)
    try:
        response = conn.send(produce_request(8, topic, partition, bytes(builder.buffer()), acks, 2000))
    finally:
        conn.close()
    return response.responses[0].partition_responses[0].error_code


def test_b_follower_cut_off_from_the_other_brokers(cluster):
    c = cluster
    controller, _ = c.controller()
    follower = next(i for i in BROKERS if i != controller)
    a, b = (i for i in BROKERS if i != follower)
    # The follower leads none of the partitions (the first replica leads): only its leaders notice the cut.
    c.create_topic("part-b", f"{a}:{b}:{follower},{b}:{a}:{follower},{a}:{follower}:{b}")
    traffic = Traffic(c, "part-b", "partition: follower cut off")

    traffic.run.fault("follower cut from brokers")
    c.net.block(f"b{follower}", *c.others(follower))
    # Its leaders drop it from the ISR (replica.lag.time.max.ms) in the partition state znode; writes go on.
    wait_until(lambda: all(sorted(c.state("part-b", p).isr) == sorted([a, b]) for p in range(PARTITIONS)), 30,
               message="the ISR without the cut-off follower")
    traffic.progress()
    c.net.heal()

    traffic.finish()    # waits for the ISR to take it back


def test_c_controller_cut_off_from_zookeeper(cluster):
    c = cluster
    c.create_topic("part-c")
    old_controller, old_epoch = c.controller()
    traffic = Traffic(c, "part-c", "partition: controller cut off")

    traffic.run.fault("controller cut from zk")
    c.net.block(f"b{old_controller}", "zk")
    # Its session expires: another broker becomes controller with a higher epoch and moves leadership off it.
    wait_until(lambda: c.controller()[0] not in (None, old_controller), 30, message="a new controller")
    new_controller, new_epoch = c.controller()
    assert new_epoch > old_epoch
    wait_until(lambda: all(c.leader("part-c", p) not in (-1, old_controller) for p in range(PARTITIONS)), 30,
               message="leaders other than the old controller")
    # A push of the old controller (stamped with its epoch) is refused by the brokers that know the new one.
    for i in BROKERS:
        if i != old_controller:
            b = c.brokers[i]
            wait_until(lambda: metadata(b.host, b.port)[1] == new_controller, 30,
                       message=f"broker {i} told of the new controller")
            assert stale_leader_and_isr(c, i, old_controller, old_epoch) == 11   # STALE_CONTROLLER_EPOCH
    traffic.progress()
    c.net.heal()

    traffic.finish()
    assert c.controller() == (new_controller, new_epoch)
    assert "resigns as controller" in c.brokers[old_controller].log()
    # Every broker, the old controller included, serves the leaders ZooKeeper holds (no stale state applied).
    expected = {p: c.leader("part-c", p) for p in range(PARTITIONS)}
    for b in c.brokers.values():
        wait_until(lambda: partition_leaders(b, "part-c") == expected, 30,
                   message=f"broker {b.id}'s metadata agreeing with ZooKeeper")

    # In its new session the old controller applies dynamic configs again: leading a partition once more, it
    # refuses acks=all writes after min.insync.replicas goes above the replication factor.
    back = c.brokers[old_controller]
    partition = next(p for p, replicas in c.zk.get_topic_assignment("part-c").partitions.items()
                     if replicas[0] == back.id)
    c.kadmin("elect-leaders", "--preferred", "--topic", "part-c", "--partition", str(partition))
    wait_until(lambda: partition_leaders(back, "part-c")[partition] == back.id, 30, message="the preferred leader")
    c.kadmin("alter-config", "--topic", "part-c", "--add-config", "min.insync.replicas=4")
    wait_until(lambda: produce(back, "part-c", partition, b"check", acks=-1) == 19, 30,   # NOT_ENOUGH_REPLICAS
               message="the config change applied by the old controller")


def stale_leader_and_isr(c: PartitionedCluster, broker_id: int, controller_id: int, controller_epoch: int) -> int:
    """Send broker broker_id what an old controller would: make controller_id the leader of part-c-0 (with a
    newer leader epoch, so only the controller epoch can refuse it); the response's error code."""
    state = c.state("part-c", 0)
    R = LeaderAndIsrRequest
    request = R(version=4, controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=-1,
                topic_states=[R.LeaderAndIsrTopicState(topic_name="part-c", partition_states=[
                    R.LeaderAndIsrPartitionState(partition_index=0, controller_epoch=controller_epoch,
                                                 leader=controller_id, leader_epoch=state.leader_epoch + 10,
                                                 isr=list(BROKERS), zk_version=state.zk_version,
                                                 replicas=list(BROKERS), adding_replicas=[], removing_replicas=[],
                                                 is_new=False)])],
                live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=controller_id,
                                                       host_name=c.net.addresses[f"b{controller_id}"],
                                                       port=BROKER_PORT)])
    b = c.brokers[broker_id]
    conn = Connection(b.host, b.port, "old-controller")
    try:
        return conn.send(request).error_code
    finally:
        conn.close()


def partition_leaders(b: BrokerProcess, topic: str) -> dict[int, int]:
    conn = Connection(b.host, b.port, "partitions-test")
    try:
        response = conn.send(MetadataRequest(version=1, topics=[topic]))
    finally:
        conn.close()
    return {p.partition_index: p.leader_id for t in response.topics for p in t.partitions}


def test_d_producer_answers_lost(cluster):
    c = cluster
    c.create_topic("part-d")
    # Its produce requests time out after 3 s on its side (socket.timeout.ms): it drops the connection and sends
    # them again, with the same sequence numbers, once it reconnects.
    traffic = Traffic(c, "part-d", "partition: producer cut off", **{"socket.timeout.ms": 3000})

    traffic.run.fault("producer's answers lost")
    # Its requests still reach the brokers (and are appended), their answers do not come back.
    c.net.block("pr", *[f"b{i}" for i in BROKERS], inbound_only=True)
    time.sleep(5)
    c.net.heal()

    final = traffic.finish()
    # Its retries of requests the brokers had appended were recognised: no value is in the log twice.
    assert len(set(final.values())) == len(final)


def test_e_controller_reconnecting_within_its_session_still_watches_topics(cluster):
    """The controller's ZooKeeper connection breaks and comes back within the session: it is still controller,
    and partitions added to an existing topic afterwards get leaders (kazoo drops every watch when a connection
    drops, calling each with a pathless event; the controller must set its topic watches again)."""
    c = cluster
    c.create_topic("part-e")
    controller, epoch = c.controller()
    broker = c.brokers[controller]
    drops = broker.log().count("Connection dropped")
    c.net.block(f"b{controller}", "zk", reset=True)
    wait_until(lambda: broker.log().count("Connection dropped") > drops, 10, message="the connection dropped")
    c.net.heal()

    AdminZkClient(c.zk).add_partitions("part-e", PARTITIONS + 2)
    wait_until(lambda: all(c.leader("part-e", p) >= 0 for p in range(PARTITIONS + 2)), 20,
               message="leaders for the added partitions")
    assert c.controller() == (controller, epoch), "the session expired: this case needs it to survive"
