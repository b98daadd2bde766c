"""Replication as a user of a 3-broker cluster sees it: min.insync.replicas, ISR shrink and expand, unclean
election off and on, ElectLeaders, CreatePartitions, reassignment through the Admin API (and its cancellation),
topic deletion."""
from __future__ import annotations

import os
import signal
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewPartitions
from kafka.protocol.admin import AlterPartitionReassignmentsRequest, ElectionType

from admin_cli.main import cli as kadmin
from kbroker.protocol.client import Connection
from tests.integration.conftest import SESSION_TIMEOUT_MS, wait_until


def create_topic(c, name, *args):
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "create-topic", name, *map(str, args)])
    assert result.exit_code == 0, result.output


def state(c, topic, p=0):
    return c.zk.get_partition_state(topic, p)


def produce(bootstrap, topic, values, acks="all", partition=0, timeout=20):
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": timeout * 1000,
                  "retries": 0 if acks == "all" else 2147483647})
    results = []
    for v in values:
        p.produce(topic, value=v, partition=partition, on_delivery=lambda err, msg: results.append((err, msg)))
    p.flush(timeout + 5)
    return results


def consume_all(bootstrap, topic, partition=0):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = [(r.offset, r.value) for r in consumer]
    consumer.close()
    return out


@pytest.fixture
def c3(cluster_factory):
    return cluster_factory(3, **{"replica.lag.time.max.ms": 3000})


def test_min_insync_replicas_and_isr_shrink_and_expand(c3):
    c = c3
    create_topic(c, "m", "--replica-assignment", "1:2:3", "--config", "min.insync.replicas=2")
    wait_until(lambda: state(c, "m") and sorted(state(c, "m").isr) == [1, 2, 3], message="online")
    assert all(err is None for err, _ in produce(c.bootstrap, "m", [b"a", b"b"]))
    # Two followers paused: the leader drops them from the ISR after replica.lag.time.max.ms ...
    c.brokers[2].proc.send_signal(signal.SIGSTOP)
    c.brokers[3].proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: state(c, "m").isr == [1], timeout=15, message="ISR shrink to the leader")
        assert state(c, "m").leader == 1
        # ... and acks=all is refused before anything is appended (NOT_ENOUGH_REPLICAS), acks=1 still works.
        results = produce(c.brokers[1].bootstrap, "m", [b"refused"], timeout=5)
        assert results and results[0][0] is not None and results[0][0].str() in ("NOT_ENOUGH_REPLICAS",
                                                                                "Broker: Not enough in-sync replicas")
        assert all(err is None for err, _ in produce(c.brokers[1].bootstrap, "m", [b"c"], acks="1"))
    finally:
        c.brokers[2].proc.send_signal(signal.SIGCONT)
        c.brokers[3].proc.send_signal(signal.SIGCONT)
    # Back in sync: the leader expands the ISR again; the state znode and every broker's metadata show it.
    wait_until(lambda: sorted(state(c, "m").isr) == [1, 2, 3], timeout=20, message="ISR expand")
    assert [v for _, v in consume_all(c.bootstrap, "m")] == [b"a", b"b", b"c"]
    assert c.zk.get_isr_change_notifications() == []  # the controller consumed the notifications


@pytest.mark.parametrize("unclean", [False, True])
def test_whole_isr_dead(cluster_factory, unclean):
    c = cluster_factory(2, **{"replica.lag.time.max.ms": 2000})
    create_topic(c, "u", "--replica-assignment", "1:2", "--config",
                 f"unclean.leader.election.enable={str(unclean).lower()}")
    wait_until(lambda: state(c, "u") and sorted(state(c, "u").isr) == [1, 2], message="online")
    assert all(err is None for err, _ in produce(c.bootstrap, "u", [b"both-have-it"]))
    # Broker 2 falls out of the ISR, broker 1 takes more records alone, then broker 1 dies.
    c.brokers[2].proc.send_signal(signal.SIGSTOP)
    wait_until(lambda: state(c, "u").isr == [1], timeout=15, message="ISR shrink")
    assert all(err is None for err, _ in produce(c.brokers[1].bootstrap, "u", [b"only-1-has-it"], acks="1"))
    c.brokers[1].kill9()
    c.brokers[2].proc.send_signal(signal.SIGCONT)
    wait_until(lambda: 1 not in c.zk.get_broker_ids(), timeout=SESSION_TIMEOUT_MS / 1000 + 5, message="1 gone")
    if not unclean:
        # Nothing is invented: the partition stays offline with its last ISR, clients get errors.
        wait_until(lambda: state(c, "u").leader == -1, message="offline")
        time.sleep(1)
        assert state(c, "u").leader == -1 and state(c, "u").isr == [1]
        results = produce(c.brokers[2].bootstrap, "u", [b"x"], acks="1", timeout=3)
        assert results[0][0] is not None
    else:
        wait_until(lambda: state(c, "u").leader == 2, message="unclean election of 2")
        # The controller logs the election once ZooKeeper answered its write, which this test may read first.
        wait_until(lambda: "UNCLEAN leader election" in "".join(b.log() for b in c.brokers.values()), timeout=10,
                   message="the state-change log's line of the unclean election")
        assert [v for _, v in consume_all(c.brokers[2].bootstrap, "u")] == [b"both-have-it"]


def cancelled_reassignment_deletes_the_replicas_it_was_adding(c):
    """A reassignment [1] -> [1, other, frozen] stays ongoing while `frozen` is stopped; cancelling it must delete
    the replica `other` had already created (found by the fuzz test: the replica was left behind, so a topic of
    that name created later could not be led or followed there: INCONSISTENT_TOPIC_ID)."""
    create_topic(c, "cancel", "--replica-assignment", "1")
    wait_until(lambda: state(c, "cancel") is not None, message="online")
    controller = c.zk.get_controller_id()
    frozen = 3 if controller == 2 else 2
    other = 5 - frozen
    leader = Connection("127.0.0.1", c.brokers[controller].port, "test")
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic

    def reassign(replicas):
        response = leader.send(AlterPartitionReassignmentsRequest(version=0, timeout_ms=5000, topics=[Topic(
            name="cancel", partitions=[Topic.ReassignablePartition(partition_index=0, replicas=replicas)])]))
        assert [p.error_code for t in response.responses for p in t.partitions] == [0]
    other_log = os.path.join(c.brokers[other].dir, "data", "cancel-0")
    os.kill(c.brokers[frozen].pid, signal.SIGSTOP)
    try:
        reassign([1, other, frozen])
        wait_until(lambda: os.path.exists(other_log), message=f"broker {other} hosting the adding replica")
        reassign(None)
    finally:
        os.kill(c.brokers[frozen].pid, signal.SIGCONT)
        leader.close()
    wait_until(lambda: not os.path.exists(other_log), message="the cancelled adding replica deleted")
    assert c.zk.get_topic_assignment("cancel").partitions[0] == [1]


def test_admin_api_elections_partitions_reassignment_and_deletion(c3):
    c = c3
    create_topic(c, "adm", "--replica-assignment", "1:2,2:3")
    wait_until(lambda: all(state(c, "adm", p) and len(state(c, "adm", p).isr) == 2 for p in (0, 1)),
               message="online")
    # Broker 1 restarts: partition 0 moves to 2, and a preferred election gives it back to 1.
    c.brokers[1].terminate()
    wait_until(lambda: state(c, "adm", 0).leader == 2, message="leader moved off 1")
    c.brokers[1].start()
    wait_until(lambda: sorted(state(c, "adm", 0).isr) == [1, 2], timeout=30, message="1 back in sync")
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)   # it learns the current controller
    try:
        admin.elect_leaders(ElectionType.PREFERRED, {"adm": [0]})
        wait_until(lambda: state(c, "adm", 0).leader == 1, message="preferred leader back")
        # CreatePartitions: 2 -> 4 partitions, leaders elected, spread over the brokers.
        admin.create_partitions({"adm": NewPartitions(4)})
        wait_until(lambda: all(state(c, "adm", p) is not None for p in range(4)), message="new partitions")
        assert sorted(c.zk.get_topic_assignment("adm").partitions) == [0, 1, 2, 3]
        # Reassignment through the Admin API: partition 1 from [2,3] to [3,1].
        assert all(err is None for err, _ in produce(c.bootstrap, "adm", [b"r1", b"r2"], partition=1))
        admin.alter_partition_reassignments({TopicPartition("adm", 1): [3, 1]})
        wait_until(lambda: c.zk.get_topic_assignment("adm").partitions[1] == [3, 1]
                   and not c.zk.get_topic_assignment("adm").adding_replicas, timeout=30, message="reassigned")
        wait_until(lambda: state(c, "adm", 1).leader == 3, message="leader of the new replicas")
        assert [v for _, v in consume_all(c.bootstrap, "adm", 1)] == [b"r1", b"r2"]
        wait_until(lambda: not os.path.exists(os.path.join(c.brokers[2].dir, "data", "adm-1")),
                   message="the removed replica's log dir renamed for deletion")
    finally:
        admin.close()
    cancelled_reassignment_deletes_the_replicas_it_was_adding(c)
    # Deletion removes files and znodes.
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "delete-topic", "adm"])
    assert result.exit_code == 0
    wait_until(lambda: not c.zk.topic_exists("adm"), message="topic znodes removed")
    for b in c.brokers.values():
        wait_until(lambda: not [d for d in os.listdir(os.path.join(b.dir, "data"))
                                if d.startswith("adm-") and not d.endswith("-delete")],
                   message=f"logs of adm gone from broker {b.id}")
