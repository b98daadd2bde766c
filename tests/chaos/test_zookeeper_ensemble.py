"""Faults of a ZooKeeper ensemble (issue 27, item 3): three members (QuorumPeerMain, zk.launcher's ensemble
support, as `kbroker cluster up --zookeepers 3` runs them) and three brokers on the full connect string, each in
a network namespace of its own (tests/chaos/netns.py), while an acks=all idempotent producer writes and a reader
tails one topic (3 partitions, RF 3, min.insync.replicas=2). One cluster, the faults in turn:
1. kill -9 of the ZooKeeper leader and, in the same window, of the controller broker: the other two members elect
   a leader, another broker becomes controller and moves the dead broker's partitions (their ISR shrinks); both
   come back (the member as a follower, the broker into every ISR);
2. a follower cut off from the other members and the brokers: it stops serving, the rest go on; healed, it
   rejoins as a follower;
3. the quorum lost for 20 s (two members stopped): the brokers keep serving the leaders they have; once the
   members are back their sessions are kept or registered again and the controller resumes;
4. a rolling restart of the ensemble, each member stopped and started in turn and serving again before the next.
After each: no broker exited, every partition is acknowledged again within the session timeout + 5 s of the
quorum being back (of the fault when the quorum holds), and a new topic gets leaders (the controller acts). At
the end the harness checks the single history (nothing acknowledged lost, the replicas' logs equal); the figures
give each fault's worst per-partition unavailability. Skipped where network namespaces cannot be made."""
from __future__ import annotations

import contextlib
import os
import re
import time

import pytest
from click.testing import CliRunner

from admin_cli.main import cli as kadmin
from kbroker.cluster import wait_ready, wait_until
from tests.chaos import netns
from tests.chaos.cluster import BROKERS, PARTITIONS, SESSION_TIMEOUT_MS, NamespacedCluster
from tests.chaos.harness import AckedProducer, ChaosRun, HistoryReader, read_all, verify
from zk.launcher import EnsembleMember, ZooKeeperServer, ensemble_connect, four_letter, mode

TOPIC = "ensemble"
MEMBERS = (1, 2, 3)
ZK_PORT, PEER_PORT, ELECTION_PORT = 12181, 12888, 13888
QUORUM_LOST_S = 20
# Back within the session timeout + 5 s of the quorum (issue 27).
BOUND_S = SESSION_TIMEOUT_MS / 1000 + 5
# The producer learns of a new leader from its metadata refresh, here every second (as the partition tests).
PRODUCER_CONFIG = {"request.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000}


class EnsembleCluster(NamespacedCluster):
    """Members zk1-3 and brokers b1-3, each in its namespace."""

    def __init__(self, net: netns.Network, workdir: str):
        self.members = tuple(EnsembleMember(i, ZK_PORT, PEER_PORT, ELECTION_PORT, net.addresses[f"zk{i}"])
                             for i in MEMBERS)
        servers = [ZooKeeperServer(ZK_PORT, os.path.join(workdir, f"zk-{m.myid}"), host=m.host,
                                   netns=net.members[f"zk{m.myid}"], ensemble=self.members) for m in self.members]
        self.servers_by_id = {m.myid: server for m, server in zip(self.members, servers)}
        super().__init__(net, workdir, ensemble_connect(self.members), servers)

    def modes(self) -> dict[int, str | None]:
        """Each member's mode (leader, follower; None when it does not serve)."""
        return {m.myid: mode(m.host, m.client_port) for m in self.members}

    def brokers_on(self, myid: int) -> set[int]:
        """The brokers with a ZooKeeper connection to member myid (its `cons`)."""
        member = self.members[myid - 1]
        try:
            clients = set(re.findall(r"/([\d.]+):\d+\[", four_letter(member.host, member.client_port, b"cons")))
        except OSError:
            return set()
        return {i for i in BROKERS if self.net.addresses[f"b{i}"] in clients}

    def zk_leader(self) -> int | None:
        return next((i for i, role in self.modes().items() if role == "leader"), None)

    def create_topic(self, topic: str) -> None:
        """Through kadmin (ZooKeeper), then until every partition has a leader: the controller acts."""
        result = CliRunner().invoke(kadmin, ["--zookeeper", self.connect, "create-topic", topic, "--partitions",
                                             str(PARTITIONS), "--replication-factor", "3",
                                             "--config", "min.insync.replicas=2"])
        assert result.exit_code == 0, result.output
        wait_until(lambda: all((s := self.state(topic, p)) is not None and s.leader >= 0 for p in range(PARTITIONS)),
                   30, message=f"leaders of {topic}")

    def brokers_alive(self, *but: int) -> None:
        for b in self.brokers.values():
            assert b.id in but or b.alive(), f"broker {b.id} exited:\n{b.log(30)}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with contextlib.ExitStack() as stack:
        # every client of this thread (and of its threads) lives in "cl"
        members = [*(f"zk{i}" for i in MEMBERS), *(f"b{i}" for i in BROKERS), "cl"]
        net = stack.enter_context(netns.module_network(members, "cl"))
        c = EnsembleCluster(net, str(tmp_path_factory.mktemp("ensemble")))
        stack.callback(c.stop)
        c.start()
        yield c


def first_ack_after(producer: AckedProducer, since: float) -> float:
    """When the partition acknowledged last after `since` got its first acknowledgement after it."""
    firsts = [min((t for t in list(producer.ack_times.get(p, [])) if t > since), default=None)
              for p in range(PARTITIONS)]
    return max(firsts) if None not in firsts else 0.0


def served_again(producer: AckedProducer, since: float, what: str) -> None:
    """Every partition acknowledged again within the session timeout + 5 s of `since` (the quorum back)."""
    wait_until(lambda: first_ack_after(producer, since), BOUND_S + 30, 0.2, f"acknowledgements after {what}")
    took = first_ack_after(producer, since) - since
    assert took <= BOUND_S, f"a partition went {took:.1f} s without acknowledgement after {what}"


def test_acks_all_survives_ensemble_faults(cluster):
    c = cluster
    c.create_topic(TOPIC)
    wait_until(lambda: c.all_in_sync(TOPIC), 30, message=f"{TOPIC} in sync")
    producer = AckedProducer(c.bootstrap, TOPIC, PARTITIONS, **PRODUCER_CONFIG).start()
    reader = HistoryReader(c.bootstrap, TOPIC, PARTITIONS).start()
    run = ChaosRun("zookeeper ensemble")
    try:
        wait_until(lambda: all(producer.acked_count(p) for p in range(PARTITIONS)), 30, 0.2,
                   "first acknowledgements")

        # 1. kill -9 of the ZooKeeper leader and of the controller broker.
        zk_leader, controller = c.zk_leader(), c.zk.get_controller_id()
        run.fault("ZK leader + controller kill -9")
        c.servers_by_id[zk_leader].kill()
        c.brokers[controller].kill9()
        wait_until(lambda: c.zk_leader() not in (None, zk_leader), 30, 0.1, "a new ZooKeeper leader")
        back = time.monotonic()
        c.servers_by_id[zk_leader].start(wait=False)    # it rejoins while the controller fails over
        wait_until(lambda: c.zk.get_controller_id() not in (None, controller), 30, 0.2, "a new controller")
        wait_until(lambda: all(controller not in c.state(TOPIC, p).isr and c.state(TOPIC, p).leader >= 0
                               for p in range(PARTITIONS)), 30, 0.2, "the dead broker out of every ISR")
        served_again(producer, back, "the new ZooKeeper leader")
        c.brokers_alive(controller)
        c.servers_by_id[zk_leader].wait_serving()
        assert c.modes()[zk_leader] == "follower"
        c.brokers[controller].start()
        wait_ready(c.brokers.values(), 60)
        wait_until(lambda: c.all_in_sync(TOPIC), 40, 0.2, "the restarted broker back in every ISR")

        # 2. a follower cut off from the other members and the brokers, then healed.
        # The follower most brokers are connected to (kazoo picks a member at random: with none, only the
        # quorum's side of the fault is shown); they move to the other members.
        connected = {i: c.brokers_on(i) for i, role in c.modes().items() if role == "follower"}
        follower = max(connected, key=lambda i: len(connected[i]))
        run.fault("ZK follower partitioned")
        cut = time.monotonic()
        c.net.block(f"zk{follower}", *(f"zk{i}" for i in MEMBERS if i != follower), *(f"b{i}" for i in BROKERS))
        wait_until(lambda: c.modes()[follower] is None, 20, 0.2, "the cut-off follower to stop serving")
        wait_until(lambda: connected[follower] <= set().union(*(c.brokers_on(i) for i in MEMBERS if i != follower)),
                   20, 0.2, f"brokers {sorted(connected[follower])} connected to the other members")
        c.create_topic("during-partition")     # the quorum of two goes on
        c.net.heal()
        wait_until(lambda: c.modes()[follower] == "follower", 30, 0.2, "the follower to rejoin")
        served_again(producer, cut, "the follower's partition")
        c.brokers_alive()

        # 3. the quorum lost for 20 s: two members stopped.
        down_members = [c.zk_leader(), follower]
        ids_before = sorted(c.zk.get_broker_ids())
        c.zk.close()
        run.fault("ZK quorum lost 20 s")
        down = time.monotonic()
        for i in down_members:
            c.servers_by_id[i].stop()
        seen = len(reader.seen)
        time.sleep(QUORUM_LOST_S)
        late = down + BOUND_S
        assert all(any(late < t for t in list(producer.ack_times[p])) for p in range(PARTITIONS)), \
            "a partition acknowledged nothing late in the quorum loss"
        assert len(reader.seen) > seen, "the reader read nothing while the quorum was lost"
        for i in down_members:
            c.servers_by_id[i].start(wait=False)
        for i in down_members:
            c.servers_by_id[i].wait_serving()
        back = time.monotonic()
        c.observe()
        c.brokers_alive()
        wait_until(lambda: sorted(c.zk.get_broker_ids()) == ids_before, 30, 0.2, "the brokers registered")
        wait_until(lambda: c.zk.get_controller_id() is not None, 30, 0.2, "a controller")
        served_again(producer, back, "the quorum back")
        c.create_topic("after-quorum-loss")

        # 4. a rolling restart: each member stopped, started and serving again before the next.
        for i in MEMBERS:
            run.fault("ZK rolling restart")
            stopped = time.monotonic()
            c.servers_by_id[i].stop()
            c.servers_by_id[i].start()
            served_again(producer, stopped, f"zk{i} restarted")
        assert sorted(c.modes().values()) == ["follower", "follower", "leader"]
        c.create_topic("after-rolling-restart")
        c.brokers_alive()

        wait_until(lambda: c.all_in_sync(TOPIC), 30, 0.2, f"{TOPIC} in sync")
        producer.stop()
        reader.stop()
        assert producer.failed == 0
        final = read_all(c.bootstrap, TOPIC, PARTITIONS)
        lost = verify(producer, final, [reader], [os.path.join(b.dir, "data") for b in c.brokers.values()])
        run.finish(producer, lost)
    finally:
        producer.stop()
        reader.stop()
