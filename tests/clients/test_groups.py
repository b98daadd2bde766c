"""Consumer groups with real clients on a real 3-broker cluster: kafka-python and confluent-kafka groups of three
dividing a 6-partition topic (every partition owned by exactly one member, rebalancing when a member leaves or
joins, every record consumed exactly once with synchronous commits), a kill -9 of the coordinator (committed
offsets survive, the new coordinator loads them, consumers resume where they committed), kafka-python's old
offset APIs (OffsetCommit v0 into ZooKeeper, v1 into __consumer_offsets), and an aiokafka group."""
from __future__ import annotations

import logging
import threading
import time

import pytest

from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kbroker.protocol.errors import Errors
from tests.clients._util import create_topic, unique
from tests.clients.conftest import _start_cluster
from tests.integration.conftest import wait_until
from tests.integration.test_group_coordinator import call, coordinator_of, zkcli_get

PARTITIONS = 6
BROKER_CONFIG = {"offsets.topic.num.partitions": 6, "group.initial.rebalance.delay.ms": 0,
                 "group.min.session.timeout.ms": 1000}
ALL = set(range(PARTITIONS))

log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = _start_cluster(zookeeper, tmp_path_factory, 3, **BROKER_CONFIG)
    yield c
    c.stop()


def produce(bootstrap: str, topic: str, tag: str, per_partition: int) -> set[bytes]:
    """per_partition records to each partition (acks=all); their values."""
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=15000)
    values = set()
    try:
        futures = []
        for partition in range(PARTITIONS):
            for i in range(per_partition):
                value = f"{tag}-{partition}-{i}".encode()
                values.add(value)
                futures.append(p.send(topic, value=value, partition=partition))
        p.flush(30)
        for f in futures:
            f.get(10)
    finally:
        p.close(5)
    return values


def committed_offsets(cluster, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, from its coordinator (OffsetFetch v7, all partitions); waits while the
    coordinator moves or loads."""
    def fetched():
        bs = coordinator_of(cluster, group).bootstrap
        try:
            r = call(bs, OffsetFetchRequest(version=7, group_id=group, topics=None, require_stable=True))
        except OSError:
            return None
        if r.error_code in (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR):
            return None
        assert r.error_code == 0, Errors(r.error_code)
        return r
    r = wait_until(fetched, 30, 0.1, f"the offsets of {group}")
    return {p.partition_index: p.committed_offset for t in r.topics if t.name == topic for p in t.partitions}


def describe(cluster, group: str):
    bs = coordinator_of(cluster, group).bootstrap
    (g,) = call(bs, DescribeGroupsRequest(version=5, groups=[group])).groups
    return g


class Member(threading.Thread):
    """One consumer polling in its own thread: records what it consumed, commits synchronously after each
    batch, and publishes its current assignment."""

    def __init__(self, name: str, seen: list, lock: threading.Lock):
        super().__init__(name=name, daemon=True)
        self.seen, self.lock = seen, lock
        self.stop = threading.Event()
        self.assignment: set[int] = set()
        self.commit_failures = 0
        self.error: BaseException | None = None

    def run(self):
        try:
            self.open()
            while not self.stop.is_set():
                records = self.poll()
                if records:
                    with self.lock:
                        self.seen.extend((self.name, p, o, v) for p, o, v in records)
                    try:
                        self.commit()
                    except Exception as e:   # counted: a failed commit may cause redelivery
                        self.commit_failures += 1
                        log.warning("%s: commit failed: %r", self.name, e)
                self.assignment = self.current_assignment()
            self.close()
        except BaseException as e:
            self.error = e
            raise


class KafkaPythonMember(Member):
    def __init__(self, bootstrap, topic, group, name, seen, lock):
        super().__init__(name, seen, lock)
        self.args = (bootstrap, topic, group)

    def open(self):
        from kafka import KafkaConsumer
        bootstrap, topic, group = self.args
        self.c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=self.name,
                               enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                               heartbeat_interval_ms=300, max_poll_interval_ms=30000, request_timeout_ms=20000,
                               retry_backoff_ms=100, metadata_max_age_ms=2000)

    def poll(self):
        return [(tp.partition, r.offset, r.value) for tp, rs in self.c.poll(timeout_ms=200).items() for r in rs]

    def commit(self):
        self.c.commit()

    def current_assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def close(self):
        self.c.close()


class ConfluentMember(Member):
    def __init__(self, bootstrap, topic, group, name, seen, lock):
        super().__init__(name, seen, lock)
        self.args = (bootstrap, topic, group)

    def open(self):
        from confluent_kafka import Consumer
        bootstrap, topic, group = self.args
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": self.name,
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                           "max.poll.interval.ms": 30000, "topic.metadata.refresh.interval.ms": 2000,
                           "reconnect.backoff.max.ms": 300})
        self.c.subscribe([topic])

    def poll(self):
        out = []
        for m in self.c.consume(num_messages=500, timeout=0.2):
            if m.error():
                log.info("%s: %s", self.name, m.error())
                continue
            out.append((m.partition(), m.offset(), m.value()))
        return out

    def commit(self):
        self.c.commit(asynchronous=False)

    def current_assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def close(self):
        self.c.close()


class Group:
    def __init__(self, kind, cluster, topic, group):
        self.kind, self.cluster, self.topic, self.group = kind, cluster, topic, group
        self.seen: list = []
        self.lock = threading.Lock()
        self.members: list[Member] = []

    def add(self):
        m = self.kind(self.cluster.bootstrap, self.topic, self.group, f"{self.group}-m{len(self.members)}",
                      self.seen, self.lock)
        self.members.append(m)
        m.start()
        return m

    def remove(self, m):
        m.stop.set()
        m.join(30)
        assert not m.is_alive() and m.error is None, m.error
        self.members.remove(m)

    def check_alive(self):
        for m in self.members:
            assert m.error is None, f"{m.name} failed: {m.error!r}"

    def wait_balanced(self, timeout=60):
        """Every live member owns a non-empty, disjoint share; together they own every partition; and the
        coordinator agrees (Stable, same member count)."""
        def balanced():
            self.check_alive()
            shares = [m.assignment for m in self.members]
            if not all(shares) or set().union(*shares) != ALL or sum(map(len, shares)) != PARTITIONS:
                return False
            g = describe(self.cluster, self.group)
            return g.group_state == "Stable" and len(g.members) == len(self.members)
        wait_until(balanced, timeout, 0.2, f"{len(self.members)} members of {self.group} sharing {PARTITIONS} "
                                           f"partitions")
        return [m.assignment for m in self.members]

    def wait_consumed(self, expected_values: set[bytes], timeout=60):
        def done():
            self.check_alive()
            with self.lock:
                got = {v for *_, v in self.seen}
            return expected_values <= got
        wait_until(done, timeout, 0.2, f"{len(expected_values)} records consumed by {self.group}")

    def assert_exactly_once(self, produced: set[bytes]):
        with self.lock:
            seen = list(self.seen)
        values = [v for *_, v in seen]
        assert len(values) == len(set(values)), "some records were consumed twice"
        assert set(values) == produced
        # Each record was consumed by one member and its (partition, offset) only once.
        assert len({(p, o) for _, p, o, _ in seen}) == len(seen)

    def stop_all(self):
        for m in list(self.members):
            self.remove(m)


def run_group_lifecycle(cluster, kind):
    topic = create_topic(cluster, unique("grp"), PARTITIONS, 3)
    group = unique(f"{kind.__name__.lower()}-group")
    g = Group(kind, cluster, topic, group)
    try:
        for _ in range(3):
            g.add()
        shares = g.wait_balanced()
        assert all(len(s) == 2 for s in shares)               # 6 partitions over 3 members
        produced = produce(cluster.bootstrap, topic, "a", 50)
        g.wait_consumed(produced)
        # A member leaves (LeaveGroup on close): the other two take over its partitions.
        g.remove(g.members[0])
        shares = g.wait_balanced()
        assert sorted(map(len, shares)) == [3, 3]
        produced |= produce(cluster.bootstrap, topic, "b", 50)
        g.wait_consumed(produced)
        # A member joins: three again.
        g.add()
        g.wait_balanced()
        produced |= produce(cluster.bootstrap, topic, "c", 50)
        g.wait_consumed(produced)
        wait_until(lambda: committed_offsets(cluster, group, topic) == {p: 150 for p in ALL}, 20, 0.2,
                   "every partition committed to its end")
        g.assert_exactly_once(produced)
        assert sum(m.commit_failures for m in g.members) == 0
    finally:
        g.stop_all()
    assert describe(cluster, group).group_state == "Empty"


def test_kafka_python_group_of_three(cluster):
    run_group_lifecycle(cluster, KafkaPythonMember)


def test_confluent_kafka_group_of_three(cluster):
    run_group_lifecycle(cluster, ConfluentMember)


def test_kill9_of_the_coordinator_keeps_committed_offsets(cluster_factory):
    c = cluster_factory(3, **BROKER_CONFIG)
    topic = create_topic(c, unique("failover"), PARTITIONS, 3)
    group = unique("failover-group")
    g = Group(KafkaPythonMember, c, topic, group)
    try:
        for _ in range(3):
            g.add()
        g.wait_balanced()
        produced = produce(c.bootstrap, topic, "before", 40)
        g.wait_consumed(produced)
        wait_until(lambda: committed_offsets(c, group, topic) == {p: 40 for p in ALL}, 20, 0.2, "commits")
        old = coordinator_of(c, group)
        old.kill9()
        # Another broker leads the group's offsets partition now and loaded the commits.
        new = wait_until(lambda: (lambda b: b if b is not old else None)(coordinator_of(c, group)), 40, 0.2,
                         "a new coordinator")
        assert new.id != old.id
        assert committed_offsets(c, group, topic) == {p: 40 for p in ALL}
        produced |= produce(c.bootstrap, topic, "after", 40)
        g.wait_consumed(produced, timeout=90)
        wait_until(lambda: committed_offsets(c, group, topic) == {p: 80 for p in ALL}, 30, 0.2,
                   "commits to the new coordinator")
        g.assert_exactly_once(produced)                   # nothing before the last commit came again
        # The consumers kept their generation: the loaded group stayed Stable with the same members.
        desc = describe(c, group)
        assert desc.group_state == "Stable" and len(desc.members) == 3
    finally:
        g.stop_all()
    # A brand-new member of the group starts from the committed offsets: nothing left to read.
    from kafka import KafkaConsumer
    late = KafkaConsumer(topic, bootstrap_servers=c.bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=300)
    try:
        deadline = time.monotonic() + 20
        extra, assigned_at = [], None
        while time.monotonic() < deadline:
            for rs in late.poll(timeout_ms=300).values():
                extra.extend(rs)
            if late.assignment() and assigned_at is None:
                assigned_at = time.monotonic()
            if assigned_at is not None and time.monotonic() - assigned_at > 2:
                break
        assert {tp.partition for tp in late.assignment()} == ALL and extra == []
        assert {tp.partition: late.position(tp) for tp in late.assignment()} == {p: 80 for p in ALL}
    finally:
        late.close()


def test_kafka_python_old_offset_apis(cluster):
    """api_version (0, 8, 1) commits with OffsetCommit v0: ZooKeeper's /consumers/<g>/offsets/<t>/<p>, as Kafka
    stores v0 commits. (0, 8, 2) uses OffsetCommit v1, which Kafka stores in __consumer_offsets."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    topic = create_topic(cluster, unique("old"), 1, 3)
    tp = TopicPartition(topic, 0)
    groups = {}
    for api_version in ((0, 8, 1), (0, 8, 2)):
        group = unique("old-%d%d%d" % api_version)
        groups[api_version] = group
        c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, api_version=api_version,
                          enable_auto_commit=False, request_timeout_ms=15000)
        try:
            c.assign([tp])
            c.commit({tp: OffsetAndMetadata(17, "", -1)})
            assert c.committed(tp) == 17
        finally:
            c.close()
    z081 = f"/consumers/{groups[(0, 8, 1)]}/offsets/{topic}/0"
    assert zkcli_get(cluster.zk_connect, z081) == "17"
    assert cluster.zk.get(f"/consumers/{groups[(0, 8, 2)]}/offsets/{topic}/0") == (None, None)
    assert committed_offsets(cluster, groups[(0, 8, 2)], topic) == {0: 17}
    assert committed_offsets(cluster, groups[(0, 8, 1)], topic) == {}


def test_aiokafka_group(cluster):
    import asyncio
    from aiokafka import AIOKafkaConsumer
    topic = create_topic(cluster, unique("aio"), PARTITIONS, 3)
    group = unique("aio-group")
    produced = produce(cluster.bootstrap, topic, "aio", 10)

    async def run():
        c = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=300)
        await c.start()
        got = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < len(produced) and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=300)
                for rs in batches.values():
                    got.extend(r.value for r in rs)
                if batches:
                    await c.commit()
            assignment = {tp.partition for tp in c.assignment()}
        finally:
            await c.stop()
        return got, assignment
    got, assignment = asyncio.run(run())
    assert assignment == ALL
    assert sorted(got) == sorted(produced)
    assert committed_offsets(cluster, group, topic) == {p: 10 for p in ALL}
    assert describe(cluster, group).group_state == "Empty"
