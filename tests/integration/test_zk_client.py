"""KafkaZkClient against a real ZooKeeper: controller election and fencing as Kafka does them, and lost
connections waited out as Kafka's client does."""
import time
from concurrent.futures import ThreadPoolExecutor

import gevent
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import Cluster, wait_until
from tests.zk_relay import ZK_CREATE, ZK_MULTI, ZK_SET_DATA, Relay
from zk import znodes as z
from zk.client import (ControllerMovedError, KafkaZkClient, ZkBadVersion, ZkConnectionLoss, ZkError, ZkNodeExists,
                       ZkNoNode, ZkSessionExpired, split_chroot)


def test_election_is_one_multi_and_loser_changes_nothing(zk_client, zk_connect):
    zk_client.create_top_level_paths()
    other = KafkaZkClient(zk_connect, 6000).start()
    try:
        assert zk_client.register_controller_and_increment_epoch(1) == (1, 1)
        with pytest.raises(ControllerMovedError):
            other.register_controller_and_increment_epoch(2)
        assert zk_client.get_controller_epoch() == (1, 1)
        assert zk_client.get_controller_id() == 1
        # /controller is ephemeral: the winner's session going away frees it for the next election.
        zk_client.close()
        assert other.register_controller_and_increment_epoch(2) == (2, 2)
    finally:
        other.close()


def test_fenced_write_from_an_old_controller_is_rolled_back(zk_client, zk_connect):
    zk_client.create_top_level_paths()
    epoch, version = zk_client.register_controller_and_increment_epoch(1)
    state = z.LeaderAndIsr(1, 0, [1], epoch)
    zk_client.create_topic_assignment("t", z.TopicAssignment({0: [1]}))
    zk_client.create_partition_states_fenced({("t", 0): state}, version)
    # Another controller takes over (its multi bumps /controller_epoch).
    zk_client.zk.delete("/controller")
    other = KafkaZkClient(zk_connect, 6000).start()
    try:
        other.register_controller_and_increment_epoch(2)
    finally:
        other.close()
    stale = z.LeaderAndIsr(9, 1, [9], epoch, state.zk_version)
    with pytest.raises(ControllerMovedError):
        zk_client.update_partition_states_fenced({("t", 0): stale}, version)
    assert zk_client.get_partition_state("t", 0).leader == 1  # nothing was written
    # A partition-epoch conflict (someone else wrote the state) is reported, not applied.
    new_version = zk_client.get_controller_epoch()[1]
    old = z.LeaderAndIsr(2, 1, [2], 2, zk_version=5)
    assert zk_client.update_partition_states_fenced({("t", 0): old}, new_version) == {("t", 0): None}
    good = z.LeaderAndIsr(2, 1, [2], 2, zk_version=0)
    assert zk_client.update_partition_states_fenced({("t", 0): good}, new_version) == {("t", 0): 1}


def test_many_partition_states_are_created_pipelined_and_completed(zk_client):
    zk_client.create_top_level_paths()
    _, version = zk_client.register_controller_and_increment_epoch(1)
    zk_client.create_topic_assignment("t", z.TopicAssignment({p: [1] for p in range(50)}))
    # An earlier controller died after creating partition 7's znode but not its state.
    zk_client.create_recursive("/brokers/topics/t/partitions/7")
    states = {("t", p): z.LeaderAndIsr(1, 0, [1], 1) for p in range(50)}
    zk_client.create_partition_states_fenced(states, version)
    assert all(zk_client.get_partition_state("t", p).leader == 1 for p in range(50))
    assert all(s.zk_version == 0 for s in states.values())


def test_top_level_paths_are_null_and_cluster_id_is_kept(zk_client):
    zk_client.create_top_level_paths()
    for path in z.PERSISTENT_PATHS:
        data, stat = zk_client.zk.get(path)
        assert data is None and stat.dataLength == 0  # null, as Kafka writes (zkCli shows "null")
    assert zk_client.create_or_get_cluster_id("first") == "first"
    assert zk_client.create_or_get_cluster_id("second") == "first"


def test_broker_sequence_ids_increase(zk_client):
    zk_client.create_top_level_paths()
    assert [zk_client.generate_broker_sequence_id() for _ in range(3)] == [1, 2, 3]


def test_unreachable_zookeeper_fails_within_timeout():
    import time

    from kbroker.cluster import free_port
    port = free_port()
    start = time.monotonic()
    with pytest.raises(ZkConnectionLoss, match=f"127.0.0.1:{port}"):
        KafkaZkClient(f"127.0.0.1:{port}", 2000, 1000).start()
    assert time.monotonic() - start < 15


def test_a_host_that_drops_connection_attempts_is_given_up_for_the_next(zk_connect):
    """zookeeper.connect lists hosts that drop SYNs (a powered-off server; here a listener whose backlog is full)
    before a live one: as with ZooKeeper's Java client, each connect attempt waits the session timeout / the
    number of hosts, so the client reaches the live host within its connection timeout (the session timeout)
    whatever order it tries them in. Waiting the whole session timeout on the first dead host (kazoo's own
    choice) failed start() three times in four."""
    import socket

    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead.listen(0)
    filler = socket.create_connection(dead.getsockname(), timeout=5)   # fills the backlog: later SYNs dropped
    hosts, chroot = zk_connect.split("/", 1)
    dead_host = "127.0.0.1:%d" % dead.getsockname()[1]
    client = KafkaZkClient(f"{dead_host},{dead_host},{dead_host},{hosts}/{chroot}", session_timeout_ms=8000,
                           gevent=True)
    try:
        client.start()
        assert client.get_broker_ids() == []
    finally:
        client.close()
        filler.close()
        dead.close()


def test_leaders_isr_writes_pipelined_each_checked_against_its_own_zk_version(zk_client):
    zk_client.create_top_level_paths()
    _, version = zk_client.register_controller_and_increment_epoch(1)
    zk_client.create_topic_assignment("t", z.TopicAssignment({p: [1, 2] for p in range(4)}))
    zk_client.create_partition_states_fenced({("t", p): z.LeaderAndIsr(1, 0, [1], 1) for p in range(4)}, version)
    # The controller moved partition 2 on meanwhile: that leader's cached zkVersion 0 is stale.
    assert zk_client.update_leader_and_isr("t", 2, z.LeaderAndIsr(2, 1, [2], 1, 0)) == 1
    written = zk_client.update_leader_and_isrs([(("t", p), z.LeaderAndIsr(1, 0, [1, 2], 1, 0)) for p in (0, 1, 2, 3, 9)])
    assert written == {("t", 0): 1, ("t", 1): 1, ("t", 2): None, ("t", 3): 1, ("t", 9): None}   # 9: no znode
    states = zk_client.get_partition_states([("t", p) for p in range(4)])
    assert [states[("t", p)].isr for p in range(4)] == [[1, 2], [1, 2], [2], [1, 2]]


def test_state_writes_grouped_in_multis_report_only_the_conflicts(zk_client):
    zk_client.create_top_level_paths()
    _, version = zk_client.register_controller_and_increment_epoch(1)
    n = 250   # several multis of writes
    zk_client.create_topic_assignment("t", z.TopicAssignment({p: [1] for p in range(n)}))
    states = {("t", p): z.LeaderAndIsr(1, 0, [1], 1) for p in range(n)}
    zk_client.create_partition_states_fenced(states, version)
    # A leader rewrote partitions 3 and 7 (in one multi) and 120 behind the controller's back.
    for p in (3, 7, 120):
        assert zk_client.update_leader_and_isr("t", p, z.LeaderAndIsr(1, 0, [1], 1, 0)) == 1
    result = zk_client.update_partition_states_fenced({tp: z.LeaderAndIsr(1, 1, [1], 1, 0) for tp in states}, version)
    assert {tp for tp, v in result.items() if v is None} == {("t", 3), ("t", 7), ("t", 120)}
    assert all(v == 1 for v in result.values() if v is not None) and len(result) == n
    # Many states read at once (multiRead under the chroot); a missing one reads as None.
    read = zk_client.get_partition_states([("t", p) for p in range(n + 1)])
    assert read[("t", n)] is None
    assert (read[("t", 3)].leader_epoch, read[("t", 3)].zk_version) == (0, 1)
    assert (read[("t", 4)].leader_epoch, read[("t", 4)].zk_version) == (1, 1)


def test_errors_are_translated_at_the_zk_boundary(zk_client, zk_connect):
    """Callers see zk.client's errors, never the library's (no module outside zk/ imports kazoo)."""
    zk_client.create_recursive("/a/b", b"1")
    with pytest.raises(ZkNodeExists):
        zk_client.create_recursive("/a/b", b"2")
    with pytest.raises(ZkNoNode):
        zk_client.delete("/a/nope")
    with pytest.raises(ZkBadVersion):
        zk_client.set_data("/a/b", b"3", version=7)
    assert zk_client.set_data("/a/b", b"3", version=0).version == 1
    # A fenced write's op error too (a pipelined path): the znode to delete is gone.
    _, version = zk_client.register_controller_and_increment_epoch(1)
    with pytest.raises(ZkNoNode):
        zk_client.fenced(version, lambda t: t.delete("/a/nope"))
    closed = KafkaZkClient(zk_connect, 6000).start()
    closed.close()
    with pytest.raises(ZkSessionExpired) as e:
        closed.get_broker_ids()
    assert isinstance(e.value, ZkError) and e.value.__cause__ is not None


def test_requests_made_while_a_topic_deletion_pipelines_are_all_answered(zk_connect):
    """The broker's (gevent) client: while the controller deletes a topic with many partitions (one pipelined
    request per znode, more than the client's wake-up socket holds), another greenlet's reads are answered and
    the deletion completes. They used to collide on that socket: the reader got ConnectionClosedError, a request
    was left queued unsent, and the controller waited forever on its last one (the fuzz test's hang)."""
    client = KafkaZkClient(zk_connect, 6000, gevent=True).start()
    try:
        client.create_top_level_paths()
        _, version = client.register_controller_and_increment_epoch(1)
        n = 300
        client.create_topic_assignment("t", z.TopicAssignment({p: [1] for p in range(n)}))
        client.create_partition_states_fenced({("t", p): z.LeaderAndIsr(1, 0, [1], 1) for p in range(n)}, version)
        deletion = gevent.spawn(client.delete_topic_fenced, "t", version)

        def read_while_deleting() -> int:
            reads = 0
            while not deletion.ready():
                assert client.get_controller_id() == 1
                reads += 1
            return reads
        reader = gevent.spawn(read_while_deleting)
        gevent.joinall([deletion, reader], timeout=30)
        assert deletion.ready(), "the deletion waits for a request that was never sent"
        deletion.get()
        assert reader.get(block=False) > 0
        assert client.get_topic_assignment("t") is None
    finally:
        client.close()


@pytest.fixture
def relay(zookeeper):
    r = Relay(zookeeper.port)
    yield r
    r.close()


def through(relay: Relay, zk_connect: str) -> tuple[str, str]:
    """(the connect string reaching zk_connect's chroot through the relay, the chroot)."""
    chroot = split_chroot(zk_connect)[1]
    return f"127.0.0.1:{relay.port}{chroot}", chroot


def in_background(use_gevent: bool, fn, *args):
    """fn(*args) run as the client's users run it, in a greenlet (brokers) or a thread (command-line tools):
    (done(), result()) of it."""
    if use_gevent:
        g = gevent.spawn(fn, *args)
        return g.ready, lambda: g.get(timeout=30)
    pool = ThreadPoolExecutor(1)
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)   # its thread ends with fn
    return future.done, lambda: future.result(30)


def wait_yielding(predicate, message: str) -> None:
    """wait_until for a test driving a gevent client: sleeps let its greenlets run."""
    deadline = time.monotonic() + 20
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {message}")
        gevent.sleep(0.05)


@pytest.mark.parametrize("use_gevent", [True, False], ids=["gevent", "threads"])
def test_a_lost_connection_is_waited_out_and_the_request_made_again(zk_client, zk_connect, relay, use_gevent):
    """Kafka's retryRequestsUntilConnected: a request whose connection breaks with the session alive is made again
    once reconnected. A topic created by ZooKeeper whose answer was lost (the connection then cut a while) is
    reported created, not "connection lost" (CreateTopics answered UNKNOWN_SERVER_ERROR) nor "exists". When the
    session expires meanwhile the request fails with ZkSessionExpired and nothing of it is written."""
    connect, chroot = through(relay, zk_connect)
    client = KafkaZkClient(connect, 2000, gevent=use_gevent).start()
    try:
        client.create_top_level_paths()
        client.create_recursive("/alive", ephemeral=True)
        assignment = z.TopicAssignment({0: [1], 1: [1]})
        relay.drop_next(1, ZK_CREATE, chroot + z.TopicZNode.path("t"), answered=True, cut=True)
        done, result = in_background(use_gevent, client.create_topic_assignment, "t", assignment)
        wait_yielding(lambda: relay.cut_off, "the create answered and its connection cut")
        gevent.sleep(0.5)
        assert zk_client.get_topic_assignment("t") == assignment   # ZooKeeper made it
        assert not done(), "the request did not wait for the connection"
        relay.heal()
        result()
        assert client.get_topic_assignment("t") == assignment
        assert zk_client.exists("/alive") is not None   # the same session

        relay.drop_next(1, ZK_CREATE, chroot + z.TopicZNode.path("u"), cut=True)
        done, result = in_background(use_gevent, client.create_topic_assignment, "u", assignment)
        wait_until(lambda: zk_client.exists("/alive") is None, 10, 0.1, "ZooKeeper expiring the session")
        relay.heal()
        with pytest.raises(ZkSessionExpired):
            result()
        assert zk_client.get_topic_assignment("u") is None
    finally:
        client.close()


def test_writes_whose_answer_was_lost_count_as_done(zk_client, zk_connect, relay):
    """Each write below reaches ZooKeeper, its answer is lost and it is made again once reconnected, meeting itself:
    the controller election (its /controller, of this session: Kafka's checkControllerAndEpoch), the creation
    of partition states (not written a second time), partition state writes conditional on their zkVersion (two pipelined multis; Kafka's checkLeaderAndIsrZkData), a leader's ISR
    write, and an ACL change (whose re-run finds the change made: the change notification is still written).
    Pipelined fenced deletes whose connection breaks are made again too."""
    connect, chroot = through(relay, zk_connect)
    client = KafkaZkClient(connect, 4000).start()
    try:
        client.create_top_level_paths()
        client.create_acl_paths()
        relay.drop_next(1, ZK_MULTI, answered=True)
        assert client.register_controller_and_increment_epoch(1) == (1, 1)
        _, version = client.get_controller_epoch()
        states = {("t", p): z.LeaderAndIsr(1, 0, [1], 1) for p in range(150)}
        client.create_topic_assignment("t", z.TopicAssignment({p: [1] for _, p in states}))
        relay.drop_next(1, ZK_MULTI, chroot + z.TopicPartitionZNode.path("t", 0), answered=True)
        client.create_partition_states_fenced(states, version)
        assert {s.zk_version for s in states.values()} == {0}   # made once, not made and then written again
        relay.drop_next(1, ZK_MULTI, answered=True)
        assert client.update_partition_states_fenced({tp: z.LeaderAndIsr(1, 1, [1], 1, 0) for tp in states},
                                                     version) == {tp: 1 for tp in states}
        relay.drop_next(1, ZK_SET_DATA, chroot + z.TopicPartitionStateZNode.path("t", 0), answered=True)
        assert client.update_leader_and_isr("t", 0, z.LeaderAndIsr(1, 1, [1, 2], 1, 1)) == 2
        client.create_isr_change_notification({("t", 0)})
        relay.drop_next(1, ZK_MULTI)   # the connection breaks before ZooKeeper gets the (pipelined) deletes
        client.delete_isr_change_notifications_fenced(client.get_isr_change_notifications(), version)
        assert zk_client.get_isr_change_notifications() == []
        relay.drop_next(1, ZK_CREATE, chroot + z.AclZNode.path("LITERAL", "Topic", "t"), answered=True)
        acl = ("User:ANONYMOUS", "Allow", "Read", "*")
        assert client.update_acls("Topic", "t", "LITERAL", lambda acls: acls | {acl})[1] == {acl}
        assert relay.left_to_drop == 0
        assert zk_client.get_acls("Topic", "t", "LITERAL") == ({acl}, 0)
        assert len(zk_client.get_acl_change_notifications(z.LiteralAclChangeZNode)) == 1
        assert zk_client.get_partition_state("t", 0) == z.LeaderAndIsr(1, 1, [1, 2], 1, 2)
    finally:
        client.close()


def test_create_topics_on_a_broker_whose_zookeeper_connection_breaks(zk_connect, relay, tmp_path):
    """The CI flake of the ZooKeeper outage test: a broker's ZooKeeper connection breaks just as it creates a
    topic (ZooKeeper created it, the answer is lost) and stays cut a while: CreateTopics succeeds once it is back."""
    connect, chroot = through(relay, zk_connect)
    c = Cluster(connect, str(tmp_path))
    try:
        c.start_brokers(1)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        relay.drop_next(1, ZK_CREATE, chroot + z.TopicZNode.path("t"), answered=True, cut=True)
        created = admin.create_topics([NewTopic("t", 2, 1)], operation_timeout=20)["t"]
        wait_until(lambda: relay.cut_off, 10, 0.05, "the broker's topic creation")
        time.sleep(0.5)
        assert not created.done(), "CreateTopics did not wait for ZooKeeper"
        relay.heal()
        created.result(30)   # raises the KafkaException of an error
        meta = admin.list_topics("t", timeout=10).topics["t"]
        assert meta.error is None and sorted(meta.partitions) == [0, 1]
    finally:
        c.stop()
