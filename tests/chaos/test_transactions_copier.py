"""Kafka's transactions system test (`transactions_test.py`) in a small run: an input topic (2 partitions) is
copied to an output topic (3 partitions) by one transactional copier per input partition — read_committed
consumer, offsets sent in the transaction, about a third of the transactions aborted at random and rewound to
the committed offsets — while a broker is hard-killed and restarted, another clean-bounced, and a copier is
replaced by a new one with the same transactional id (which fences the old). A concurrent read_committed
consumer reads the output meanwhile. Pass: the output read with read_committed holds every input value exactly
once, and the concurrent reader saw no duplicate.

librdkafka (2.x, confluentinc/librdkafka#5511 with #5456) can block in send_offsets_to_transaction forever after
the group coordinator's broker is bounced: a Metadata response that omits the broker while it is down (Kafka
lists only live brokers) decommissions librdkafka's handle for it, the handle stays cached as the group
coordinator, and the TxnOffsetCommit waits for that dead handle to connect; the call's timeout is never
checked. The copier gives up on the call a little after its timeout and replaces its producer, as an
application must: the new producer's init_transactions fences the stuck one and aborts its transaction."""
from __future__ import annotations

import random
import threading
import time
from collections import Counter

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.clients._util import create_topic
from tests.integration.conftest import SESSION_TIMEOUT_MS, wait_until
from tests.integration.test_group_coordinator import FAST, coordinator_of
from tests.integration.test_transactions import txn_coordinator

IN, OUT = "copy-in", "copy-out"
IN_PARTITIONS, OUT_PARTITIONS = 2, 3
RECORDS = 6000
BATCH = 50
GROUP = "copier-group"
DEADLINE_S = 75          # the copiers give up (and the test fails) after this long
TXN_TIMEOUT_S = 10       # transaction.timeout.ms; librdkafka caps its API timeouts at it


class Stuck(Exception):
    """send_offsets_to_transaction did not return well after its timeout (librdkafka #5511/#5456)."""


def send_offsets(producer: Producer, offsets: list, group) -> None:
    """producer.send_offsets_to_transaction, waited for until a few seconds past its timeout: Stuck after that
    (the call goes on in its own thread, which keeps the producer alive)."""
    failure: list = []
    done = threading.Event()

    def call():
        try:
            producer.send_offsets_to_transaction(offsets, group, TXN_TIMEOUT_S)
        except KafkaException as e:
            failure.append(e)
        done.set()
    threading.Thread(target=call, name="send-offsets", daemon=True).start()
    if not done.wait(TXN_TIMEOUT_S + 5):
        raise Stuck()
    if failure:
        raise failure[0]


class Copier:
    """Copies one input partition to the output topic in transactions; aborts about 1/3 of them (seeded) and
    rewinds to the group's committed offset; `restart` makes it drop its producer mid-transaction and start over
    with the same transactional id, as it does when librdkafka is stuck in send_offsets_to_transaction."""

    def __init__(self, bootstrap: str, partition: int, end: int, deadline: float):
        self.bootstrap, self.partition, self.end, self.deadline = bootstrap, partition, end, deadline
        self.tp = TopicPartition(IN, partition)
        self.rng = random.Random(1000 + partition)
        self.restart = threading.Event()
        self.done = False
        self.committed_txns = self.aborted_txns = self.restarts = self.stuck = 0
        self.position = 0            # the input offset committed with the last committed transaction
        self.errors: list[str] = []
        self.consumer = self.producer = None
        self.stage, self.stage_since = "starting", time.monotonic()   # what it is doing, for failure reports
        self.thread = threading.Thread(target=self._run, name=f"copier-{partition}", daemon=True)

    def _at(self, stage: str) -> None:
        self.stage, self.stage_since = stage, time.monotonic()

    # -- clients ------------------------------------------------------------------------------------------------

    def _open(self) -> None:
        """A new consumer and a new transactional producer (init_transactions fences any older one), positioned
        at the group's committed offset."""
        self.consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "isolation.level": "read_committed"})
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"copier-{self.partition}",
                                  "transaction.timeout.ms": TXN_TIMEOUT_S * 1000, "linger.ms": 5})
        self._at("init_transactions")
        self.producer.init_transactions(30)
        self._rewind()

    def _rewind(self) -> None:
        """Back to the offset the group committed (the last committed transaction's)."""
        self._at("fetching the committed offset")
        offset = self.consumer.committed([self.tp], timeout=20)[0].offset
        self.position = max(offset, 0)
        self.consumer.assign([TopicPartition(IN, self.partition, self.position)])

    def _drop(self, purge: bool = True) -> None:
        """Close the consumer; abandon the producer without ending its transaction (a zombie to be fenced). A
        producer stuck in a call is left alone (its calling thread keeps it alive)."""
        self.consumer.close()
        if purge:
            self.producer.purge()
        self.consumer = self.producer = None

    # -- the copy loop ------------------------------------------------------------------------------------------

    def _batch(self) -> list:
        self._at(f"consuming from {self.position}")
        msgs: list = []
        while len(msgs) < BATCH and self.position + len(msgs) < self.end and time.monotonic() < self.deadline:
            for m in self.consumer.consume(BATCH - len(msgs), 1.0):
                if m.error():
                    self.errors.append(f"consume: {m.error()}")
                else:
                    msgs.append(m)
        return msgs

    def _transaction(self) -> None:
        msgs = self._batch()
        if not msgs:
            return
        expected = self.position
        if msgs[0].offset() != expected:
            self.errors.append(f"p{self.partition}: batch starts at {msgs[0].offset()}, expected {expected}")
        self._at("producing")
        self.producer.begin_transaction()
        for m in msgs:
            self.producer.produce(OUT, value=m.value(), key=m.value())
        next_offset = msgs[-1].offset() + 1
        self._at("send_offsets_to_transaction")
        try:
            send_offsets(self.producer, [TopicPartition(IN, self.partition, next_offset)],
                         self.consumer.consumer_group_metadata())
        except Stuck:
            self.stuck += 1
            self.errors.append(f"p{self.partition}: send_offsets_to_transaction stuck; new producer")
            self._drop(purge=False)
            self._open()
            return
        if self.restart.is_set():
            self.restart.clear()
            self.restarts += 1
            self._drop()
            self._open()
        elif self.rng.random() < 1 / 3:
            self._at("abort_transaction")
            self.producer.abort_transaction(30)
            self.aborted_txns += 1
            self._rewind()
        else:
            self._at("commit_transaction")
            self.producer.commit_transaction(30)
            self.committed_txns += 1
            self.position = next_offset

    def _abort_if_open(self) -> None:
        """Abort the current transaction (after a retriable error too: its records must not reach a later
        commit); none being open is fine."""
        try:
            self.producer.abort_transaction(30)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._STATE:
                raise

    def _recover(self, err) -> None:
        """After a failed transaction: abort it and rewind, or (a fatal error, or when that failed) start over with
        new clients, a bounded number of times. Seen failing again: a librdkafka consumer whose committed() kept
        answering NOT_COORDINATOR after its group coordinator's bounce without sending a request, and aborts
        timing out one after another after a coordinator's kill -9."""
        for attempt in range(5):
            self.errors.append(f"p{self.partition}: {err}")
            self._at(f"recovering from {err.name()}")
            try:
                if err.fatal() or attempt:
                    self._drop()
                    self._open()
                else:
                    self._abort_if_open()
                    self._rewind()
                return
            except KafkaException as e:
                err = e.args[0]
        raise RuntimeError(f"p{self.partition}: could not recover: {err}")

    def _run(self) -> None:
        try:
            self._open()
            while self.position < self.end and time.monotonic() < self.deadline:
                try:
                    self._transaction()
                except KafkaException as e:
                    self._recover(e.args[0])
            self.done = self.position >= self.end
        except Exception as e:   # reported by the test
            self.errors.append(f"p{self.partition}: gave up: {e!r}")
        finally:
            if self.consumer is not None:
                self.consumer.close()


class Reader:
    """A read_committed consumer of the whole output topic, from the beginning, until stopped."""

    def __init__(self, bootstrap: str, group: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        self.consumer.assign([TopicPartition(OUT, p, 0) for p in range(OUT_PARTITIONS)])
        self.values: list[bytes] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def poll_once(self) -> int:
        n = 0
        for m in self.consumer.consume(500, 0.5):
            if m.error():
                self.errors.append(str(m.error()))
            else:
                self.values.append(m.value())
                n += 1
        return n

    def _run(self) -> None:
        while not self.stop.is_set():
            self.poll_once()
        self.consumer.close()


def read_all_committed(bootstrap: str, expected: int, timeout: float = 30.0) -> Reader:
    """A fresh read_committed read of the output until `expected` values came and 2 s passed without more."""
    r = Reader(bootstrap, "final-reader")
    deadline = time.monotonic() + timeout
    idle_since = time.monotonic()
    while time.monotonic() < deadline:
        if r.poll_once():
            idle_since = time.monotonic()
        elif len(r.values) >= expected and time.monotonic() - idle_since > 2:
            break
    r.consumer.close()
    return r


def exactly_once_report(values: list[bytes], inputs: set[bytes]) -> str:
    counts = Counter(values)
    dups = {v: n for v, n in counts.items() if n > 1}
    missing = inputs - set(counts)
    extra = set(counts) - inputs
    if not (dups or missing or extra):
        return ""
    return (f"{len(values)} values read: {len(missing)} missing (e.g. {sorted(missing)[:5]}), "
            f"{len(dups)} duplicated (e.g. {sorted(dups.items())[:5]}), {len(extra)} never produced")


def test_transactional_copiers_exactly_once_through_kills_bounces_and_copier_restarts(cluster_factory):
    c = cluster_factory(3, **{**FAST, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
                              "replica.lag.time.max.ms": 6000, "unclean.leader.election.enable": "false",
                              "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    create_topic(c, IN, IN_PARTITIONS, 3, {"min.insync.replicas": 2})
    create_topic(c, OUT, OUT_PARTITIONS, 3, {"min.insync.replicas": 2})
    bs = c.bootstrap

    # Seed the input: RECORDS unique values, round robin over its partitions.
    seed = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    inputs = {b"value-%06d" % i for i in range(RECORDS)}
    for i, v in enumerate(sorted(inputs)):
        seed.produce(IN, value=v, partition=i % IN_PARTITIONS)
    assert seed.flush(30) == 0, "seeding the input did not finish"
    ends = {p: len(range(p, RECORDS, IN_PARTITIONS)) for p in range(IN_PARTITIONS)}

    start = time.monotonic()
    deadline = start + DEADLINE_S
    reader = Reader(bs, "concurrent-reader")
    reader.thread.start()
    copiers = [Copier(bs, p, ends[p], deadline) for p in range(IN_PARTITIONS)]
    for cp in copiers:
        cp.thread.start()

    def progress() -> int:
        return sum(cp.position for cp in copiers)

    def after(fraction: float, of: list[Copier] = copiers) -> None:
        """Until the copiers `of` copied `fraction` of their input (or stopped)."""
        wait_until(lambda: sum(cp.position for cp in of) >= fraction * sum(cp.end for cp in of)
                   or all(not cp.thread.is_alive() for cp in of),
                   timeout=max(deadline - time.monotonic(), 1), interval=0.1, message=f"{fraction:.0%} copied")

    def broker_at(bootstrap: str):
        return next(b for b in c.brokers.values() if b.bootstrap == bootstrap)

    events: list[str] = []
    # (a) kill -9 copier 0's transaction coordinator mid-copy, and start it again.
    after(0.1)
    victim = broker_at(txn_coordinator(c, "copier-0"))
    victim.kill9()
    events.append(f"kill -9 broker {victim.id} at {progress()}")
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)
    victim.start()
    c.wait_ready([victim.id], timeout=30)
    # (b) a clean bounce of copier 1's transaction coordinator, or of the group's (after which librdkafka may stay
    # in send_offsets_to_transaction, see above), or of another broker.
    after(0.35)
    candidates = [broker_at(txn_coordinator(c, "copier-1")), coordinator_of(c, GROUP)]
    bounced = next((b for b in candidates if b.id != victim.id), c.brokers[victim.id % 3 + 1])
    assert bounced.terminate(30) == 0, bounced.log(30)
    events.append(f"SIGTERM broker {bounced.id} at {progress()}")
    bounced.start()
    c.wait_ready([bounced.id], timeout=30)
    # (c) a copier replaced mid-transaction by a new one with the same transactional id.
    after(0.6, copiers[:1])
    copiers[0].restart.set()
    events.append(f"restart copier 0 at {progress()}")

    for cp in copiers:
        cp.thread.join(max(deadline - time.monotonic(), 0) + 10)
    copy_s = time.monotonic() - start
    reader.stop.set()
    reader.thread.join(20)

    summary = (f"events {events}; copy {copy_s:.1f}s; " + "; ".join(
        f"copier {cp.partition}: done={cp.done} position={cp.position}/{cp.end} committed={cp.committed_txns} "
        f"aborted={cp.aborted_txns} restarts={cp.restarts} stuck={cp.stuck} last stage {cp.stage!r} for "
        f"{time.monotonic() - cp.stage_since:.0f}s, errors={cp.errors[:8]}" for cp in copiers))
    print(summary)
    final = read_all_committed(c.bootstrap, RECORDS, timeout=30 if all(cp.done for cp in copiers) else 10)
    # Duplicates first: what was committed must be exactly once even when a copier did not finish.
    concurrent_dups = {v: n for v, n in Counter(reader.values).items() if n > 1}
    assert not concurrent_dups, (f"the concurrent read_committed reader saw {len(concurrent_dups)} duplicates "
                                 f"(e.g. {sorted(concurrent_dups.items())[:5]}) in {len(reader.values)}; {summary}")
    final_dups = {v: n for v, n in Counter(final.values).items() if n > 1}
    assert not final_dups, f"duplicates in the output: {sorted(final_dups.items())[:5]}; {summary}"
    assert all(cp.done for cp in copiers), f"the copiers did not finish: {summary}"
    assert all(cp.aborted_txns for cp in copiers) and copiers[0].restarts == 1, f"no aborts or restart: {summary}"
    problem = exactly_once_report(final.values, inputs)
    assert not problem, f"output read with read_committed after the copy: {problem}; {summary}"
    assert set(reader.values) <= inputs


def test_a_producer_left_in_send_offsets_after_its_group_coordinator_bounced_is_fenced_by_its_replacement(
        cluster_factory):
    """The copier's way out of librdkafka #5511: the producer's group coordinator is clean-bounced and the producer
    refreshes its metadata while that broker is down (librdkafka then sits in send_offsets_to_transaction); a new
    producer with the same transactional id fences it. What the stuck producer wrote and the offsets it sent never
    become visible; the new producer's transaction commits."""
    c = cluster_factory(3, **{**FAST, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3})
    create_topic(c, IN, 1, 3)
    create_topic(c, OUT, OUT_PARTITIONS, 3)
    group_member = Consumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    group = group_member.consumer_group_metadata()
    group_member.close()
    config = {"bootstrap.servers": c.bootstrap, "transactional.id": "copier", "transaction.timeout.ms": 60000}
    stuck = Producer(config)
    stuck.init_transactions(30)
    stuck.begin_transaction()
    stuck.produce(OUT, b"committed")
    send_offsets(stuck, [TopicPartition(IN, 0, 1)], group)
    stuck.commit_transaction(30)
    stuck.begin_transaction()
    stuck.produce(OUT, b"fenced")
    assert stuck.flush(30) == 0
    coordinator = coordinator_of(c, GROUP)
    assert coordinator.terminate(30) == 0, coordinator.log(30)
    wait_until(lambda: coordinator.id not in stuck.list_topics(timeout=10).brokers, 20, 0.2,
               "a Metadata response without the stopped broker")
    coordinator.start()
    c.wait_ready([coordinator.id], timeout=30)
    try:   # librdkafka 2.16 stays in the call; whatever it does, the replacement fences its transaction
        send_offsets(stuck, [TopicPartition(IN, 0, 2)], group)
    except (Stuck, KafkaException):
        pass

    replacement = Producer(config)
    replacement.init_transactions(30)
    replacement.begin_transaction()
    replacement.produce(OUT, b"replacement")
    send_offsets(replacement, [TopicPartition(IN, 0, 3)], group)
    replacement.commit_transaction(30)
    reader = Consumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    assert reader.committed([TopicPartition(IN, 0)], timeout=20)[0].offset == 3
    reader.close()
    assert sorted(read_all_committed(c.bootstrap, 2).values) == [b"committed", b"replacement"]
