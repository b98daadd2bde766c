"""A ZooKeeper outage (issue 14, item 3): brokers keep serving reads and writes (acks=1 and acks=all) of the
leaders they have while ZooKeeper is gone and the ISR does not change, as Kafka does; no broker exits; each
broker's session comes back, or after expiry is re-established with a new broker epoch; the controller resumes.

The test runs its own ZooKeeper server (it is stopped and started again; the other tests share theirs) and
reaches it through a TCP relay that can be cut. Two outages:
1. ZooKeeper stopped 30 s, then started again on the same port and data dir. A restarted ZooKeeper reloads the
   sessions from its data dir and gives each a fresh timeout, so the brokers, reconnecting within a second of
   its serving, keep their sessions: same /brokers/ids znodes (same czxid, the broker epoch), same controller.
2. ZooKeeper stopped, started again, but the brokers kept away from it (the relay cut) until it expired their
   sessions (a restarted ZooKeeper expires only sessions that stay away for their timeout): on reconnecting they
   learn the session expired, register again (a new czxid: a new broker epoch) and a controller is elected
   again. Brokers register one after the other, so it may move some leaders, as Kafka's does.
After each: a new topic gets leaders, a partition added to a topic from before the fault gets one, and a topic
config change reaches the leaders (the controller's and the config watches are set again). At the end a kill -9
of a leader moves leadership, and the harness checks the single history. Figures: worst per-partition
unavailability of the acks=all producer after each fault.
The relay also breaks the brokers' connections just as they first read /config/changes after the 30 s outage,
and just as they first register after the expiry: they must do it again once reconnected (Kafka's client
retries its requests until connected)."""
from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)

from kbroker.cluster import free_port
from tests.chaos.harness import AckedProducer, ChaosRun, HistoryReader, read_all, verify
from tests.integration.conftest import SESSION_TIMEOUT_MS, Cluster, wait_until
from tests.zk_relay import ZK_GET_CHILDREN, ZK_MULTI, Relay
from zk import znodes as z
from zk.client import KafkaZkClient
from zk.launcher import ZooKeeperServer

TOPIC = "zk-outage"
PARTITIONS = 3
OUTAGE_S = 30


@pytest.fixture
def zookeeper_of_our_own(tmp_path):
    server = ZooKeeperServer(free_port(), str(tmp_path / "zookeeper"))
    server.start()
    yield server
    server.stop()


def observer(zk_server: ZooKeeperServer) -> KafkaZkClient:
    """The test's own ZooKeeper client, straight to ZooKeeper, opened once it serves and closed before it stops:
    a client connecting while ZooKeeper (3.8.0) starts may be accepted and never answered (closing a connection
    made before the data is loaded fails with a NullPointerException), and waits its whole session timeout."""
    return KafkaZkClient(zk_server.connect, 6000).start()


def broker_epochs(zk: KafkaZkClient) -> dict[int, int]:
    """{broker id: czxid of its /brokers/ids znode (its broker epoch)} of the registered brokers."""
    out = {}
    for bid in zk.get_broker_ids():
        stat = zk.exists(z.BrokerIdZNode.path(bid))
        if stat is not None:
            out[bid] = stat.czxid
    return out


def partition_states(zk: KafkaZkClient, topic: str, partitions: int) -> dict:
    return {p: zk.get_partition_state(topic, p) for p in range(partitions)}


def all_in_sync(zk: KafkaZkClient) -> bool:
    return all(s is not None and s.leader >= 0 and sorted(s.isr) == [1, 2, 3]
               for s in partition_states(zk, TOPIC, PARTITIONS).values())


def acked_between(producer: AckedProducer, since: float, until: float) -> dict[int, int]:
    """Acknowledgements per partition with since < time <= until."""
    return {p: sum(1 for t in list(producer.ack_times.get(p, [])) if since < t <= until)
            for p in range(producer.partitions)}


def committed_up_to(bootstrap: str, producer: AckedProducer) -> bool:
    """Every record the producer got acknowledged is below its partition's high watermark."""
    last: dict[int, int] = {}
    for p, offset in producer.acked:
        last[p] = max(offset, last.get(p, -1))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return all(consumer.get_watermark_offsets(TopicPartition(producer.topic, p), timeout=5)[1] > offset
                   for p, offset in last.items())
    except KafkaException:   # no answer within the timeout (a loaded box): asked again by the caller's wait
        return False
    finally:
        consumer.close()


def produce_error(bootstrap: str, topic: str, partition: int, value: bytes):
    """The error (a KafkaError code) a single acks=all produce gets, None when acknowledged."""
    outcome = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, "acks": "all"})
    p.produce(topic, value=value, partition=partition, on_delivery=lambda err, _msg: outcome.append(err))
    p.flush(15)
    return outcome[0].code() if outcome and outcome[0] is not None else None


def admin_call(admin: AdminClient, call, what: str) -> None:
    """call(): the future of one Admin API request; made again while it is refused with NOT_CONTROLLER, after a
    metadata refresh (librdkafka sent it to a controller that resigned, and does not refresh by itself)."""
    def attempt() -> bool:
        try:
            call().result(30)
            return True
        except KafkaException as e:
            if e.args[0].code() != KafkaError.NOT_CONTROLLER:
                raise
            admin.list_topics(timeout=5)
            return False
    wait_until(attempt, 30, 0.5, what)


def controller_and_watches_resumed(c: Cluster, tag: str, existing: str) -> None:
    """Through the Admin API: a new topic gets leaders on every partition, a partition added to an `existing`
    topic (from before the fault) gets one, and a topic config change (max.message.bytes) reaches every leader
    of the new topic (they refuse a record above it)."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    topic = f"after-{tag}"

    def leaders(name: str, count: int) -> bool:
        meta = admin.list_topics(name, timeout=5).topics.get(name)
        return (meta is not None and meta.error is None and len(meta.partitions) == count
                and all(pm.leader >= 0 and pm.error is None for pm in meta.partitions.values()))
    admin_call(admin, lambda: admin.create_topics([NewTopic(topic, 3, 3)])[topic], f"creating {topic}")
    wait_until(lambda: leaders(topic, 3), 30, 0.2, f"leaders of {topic}")
    count = len(admin.list_topics(existing, timeout=5).topics[existing].partitions) + 1
    admin_call(admin, lambda: admin.create_partitions([NewPartitions(existing, count)])[existing],
               f"adding a partition to {existing}")
    wait_until(lambda: leaders(existing, count), 30, 0.2, f"a leader for the new partition of {existing}")
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    admin_call(admin, lambda: admin.incremental_alter_configs([resource])[resource], f"altering the config of {topic}")
    for p in range(3):
        wait_until(lambda p=p: produce_error(c.bootstrap, topic, p, b"x" * 5000) == KafkaError.MSG_SIZE_TOO_LARGE,
                   30, 0.5, f"max.message.bytes applied by the leader of {topic}-{p}")
    assert produce_error(c.bootstrap, topic, 0, b"small") is None


def test_brokers_serve_through_zookeeper_outages_and_sessions_come_back(zookeeper_of_our_own, tmp_path):
    zk_server = zookeeper_of_our_own
    relay = Relay(zk_server.port)
    # The brokers reach ZooKeeper through the relay; the test's own client goes straight to it.
    c = Cluster(f"127.0.0.1:{relay.port}", str(tmp_path))
    c.zk.close()
    c.zk = observer(zk_server)
    producers = []
    reader = None
    try:
        c.start_brokers(3, **{"replica.lag.time.max.ms": 10000, "unclean.leader.election.enable": "false"})
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        wait_until(lambda: all_in_sync(c.zk), message="topic online")

        acks_all = AckedProducer(c.bootstrap, TOPIC, PARTITIONS, prefix=b"all").start()
        acks_1 = AckedProducer(c.bootstrap, TOPIC, PARTITIONS, idempotent=False, prefix=b"one", acks=1).start()
        producers = [acks_all, acks_1]
        reader = HistoryReader(c.bootstrap, TOPIC, PARTITIONS).start()
        run = ChaosRun("zookeeper outages")
        wait_until(lambda: all(p.acked_count(q) for p in producers for q in range(PARTITIONS)), 30, 0.2,
                   "both producers acknowledged on every partition")
        epochs = broker_epochs(c.zk)
        controller = c.zk.exists(z.ControllerZNode.path)
        controller_epoch = c.zk.get_controller_epoch()[0]
        states = partition_states(c.zk, TOPIC, PARTITIONS)

        def served_meanwhile(acks_one: AckedProducer, since: float, until: float, what: str) -> None:
            """acks_all and acks_one got acknowledgements on every partition in (since, until]."""
            for name, producer in (("acks=all", acks_all), ("acks=1", acks_one)):
                counts = acked_between(producer, since, until)
                assert all(counts.values()), f"{name}: no acknowledgement on some partition {what}: {counts}"

        # 1. ZooKeeper stopped 30 s: the sessions live on (a restarted ZooKeeper renews them).
        run.fault("ZK down 30 s, sessions kept")
        down = time.monotonic()
        c.zk.close()
        zk_server.stop()
        seen_before = len(reader.seen)
        time.sleep(OUTAGE_S)
        served_meanwhile(acks_1, down + SESSION_TIMEOUT_MS / 1000 + 5, time.monotonic(), "late in the outage")
        assert len(reader.seen) > seen_before, "the reader read nothing during the outage"
        # No leader moved during the outage: every acks=1 record is replicated, with ZooKeeper still down (checked
        # at the end with the others). Stopped before ZooKeeper is back: on a loaded box a session may still expire
        # while the brokers reconnect, and what a deposed leader acknowledged with acks=1 then is lost, as in Kafka.
        acks_1.stop()
        wait_until(lambda: committed_up_to(c.bootstrap, acks_1), 20, 0.2, "the acks=1 records replicated")
        # The brokers' first reading of the config change notifications once reconnected (their watch went with
        # the connection) breaks the connection, as if it broke just then: they read them again once reconnected.
        relay.drop_next(3, ZK_GET_CHILDREN, "/config/changes")
        # Kept away while ZooKeeper starts (see observer(): a connection made then may never be answered, and the
        # broker waiting on it for its connect timeout, the session timeout, loses its reloaded session; seen in
        # CI), let through once it serves: they reconnect within a second, well inside the fresh timeout.
        relay.cut()
        zk_server.start()
        c.zk = observer(zk_server)
        relay.heal()
        assert all(b.alive() for b in c.brokers.values()), "a broker exited"
        wait_until(lambda: broker_epochs(c.zk) == epochs, 20, 0.2,
                   "the brokers' znodes back, from their sessions")
        assert c.zk.exists(z.ControllerZNode.path).czxid == controller.czxid, "the controller changed"
        assert partition_states(c.zk, TOPIC, PARTITIONS) == states, "leaders or ISRs changed"
        controller_and_watches_resumed(c, "outage", TOPIC)
        assert relay.left_to_drop == 0, "fewer readings of the config change notifications than expected"

        # 2. ZooKeeper stopped and started again, the brokers kept away until their sessions expired. The
        # controller elected first sees only the brokers registered by then and moves the leadership of the
        # others' partitions, as Kafka's does: what a deposed leader acknowledged with acks=1 meanwhile may be
        # lost (as in Kafka), so the acks=1 producer of this phase is only checked for being served.
        acks_1_cut = AckedProducer(c.bootstrap, TOPIC, PARTITIONS, idempotent=False, prefix=b"one-cut", acks=1).start()
        producers.append(acks_1_cut)
        wait_until(lambda: all(acks_1_cut.acked_count(q) for q in range(PARTITIONS)), 30, 0.2,
                   "the second acks=1 producer acknowledged on every partition")
        run.fault("ZK down past session expiry")
        relay.cut()
        down = time.monotonic()
        c.zk.close()
        zk_server.stop()
        zk_server.start()
        c.zk = observer(zk_server)
        wait_until(lambda: not c.zk.get_broker_ids(), 3 * SESSION_TIMEOUT_MS / 1000, 0.2,
                   "ZooKeeper expiring the brokers' sessions")
        served_meanwhile(acks_1_cut, down + 1, time.monotonic(), "while cut off from ZooKeeper")
        # Each broker's first multi request in its new session is its registration: the relay drops the
        # connection of the first three, as if it broke just then. They register once reconnected.
        relay.drop_next(3, ZK_MULTI)
        relay.heal()
        wait_until(lambda: sorted(broker_epochs(c.zk)) == [1, 2, 3], 20, 0.2, "the brokers registered again")
        assert relay.left_to_drop == 0, "fewer registrations than expected"
        new_epochs = broker_epochs(c.zk)
        assert all(new_epochs[b] != epochs[b] for b in epochs), f"broker epochs {epochs} -> {new_epochs}"
        wait_until(lambda: c.zk.exists(z.ControllerZNode.path), 20, 0.2, "a controller")
        assert c.zk.get_controller_epoch()[0] > controller_epoch, "no controller election after the expiry"
        assert all(b.alive() for b in c.brokers.values()), "a broker exited"
        controller_and_watches_resumed(c, "expiry", "after-outage")
        acks_1_cut.stop()
        wait_until(lambda: all_in_sync(c.zk), 20, 0.2, "the topic in sync")

        # 3. The controller moves leadership: kill -9 the leader of a partition.
        p = 0
        victim = c.zk.get_partition_state(TOPIC, p).leader
        run.fault("kill -9 after the outages")
        c.brokers[victim].kill9()
        wait_until(lambda: c.zk.get_partition_state(TOPIC, p).leader not in (victim, -1), 30, 0.2,
                   "leadership moved")
        wait_until(lambda: acks_all.acked_count(p) and acks_all.ack_times[p][-1] > time.monotonic() - 1, 30, 0.2,
                   "acknowledgements from the new leader")
        acks_all.stop()
        reader.stop()
        final = read_all(c.bootstrap, TOPIC, PARTITIONS)
        live = [b for b in c.brokers.values() if b.alive()]
        for b in live:
            assert b.terminate() == 0, b.log(40)
        lost = verify(acks_all, final, [reader], [os.path.join(b.dir, "data") for b in live]) + verify(acks_1, final)
        run.finish(acks_all, lost)
    finally:
        for producer in producers:
            producer.stop()
        if reader is not None:
            reader.stop()
        c.stop()
        relay.close()
