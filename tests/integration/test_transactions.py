"""The transaction coordinator against real 3-broker clusters: `__transaction_state` creation on the first
FindCoordinator with key type 1, InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / EndTxn error codes by
version (raw protocol), and confluent-kafka, aiokafka and kafka-python transactional producers committing and
aborting (read_committed consumers), zombies fenced, timed-out transactions aborted by the coordinator, and a
coordinator killed mid-transaction."""
from __future__ import annotations

import asyncio
import functools
import time

import pytest
from admin_cli.main import cli
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from click.testing import CliRunner
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                     InitProducerIdRequest, ProduceRequest)
from kbroker.common.transaction_log import partition_for
from kbroker.protocol.client import Connection, KafkaError
from kbroker.protocol.errors import Errors
from tests.clients._util import create_topic, leaders_known, raw_metadata, raw_request, unique
from tests.integration.conftest import Cluster, set_znode_acl, wait_until

TXN_TOPIC = "__transaction_state"
call = functools.partial(raw_request, client_id="txn-test")


# ---- raw protocol -----------------------------------------------------------------------------------------------

def find_txn_coordinator(bootstrap: str, txn_id: str, version: int = 1):
    return call(bootstrap, FindCoordinatorRequest(version=version, key=txn_id, key_type=1))


def txn_coordinator(cluster: Cluster, txn_id: str, timeout: float = 40.0, not_at: str | None = None) -> str:
    """The bootstrap of the transactional id's coordinator, once some live broker names one (other than
    `not_at`)."""
    def found():
        for b in cluster.brokers.values():
            if b.alive():
                try:
                    r = find_txn_coordinator(b.bootstrap, txn_id)
                except KafkaError:
                    continue
                if r.error_code == 0 and f"{r.host}:{r.port}" != not_at:
                    return f"{r.host}:{r.port}"
        return None
    return wait_until(found, timeout, message=f"transaction coordinator of {txn_id}")


def init_pid(bootstrap, txn_id, version=0, timeout_ms=60000, pid=-1, epoch=-1):
    kw = {"producer_id": pid, "producer_epoch": epoch} if version >= 3 else {}
    return call(bootstrap, InitProducerIdRequest(version=version, transactional_id=txn_id,
                                                 transaction_timeout_ms=timeout_ms, **kw))


def init_until(bootstrap, txn_id, version=0, timeout=30.0, **kw):
    """InitProducerId retried while the coordinator answers retriable errors (loading, concurrent)."""
    def ok():
        r = init_pid(bootstrap, txn_id, version, **kw)
        return r if r.error_code not in (Errors.CONCURRENT_TRANSACTIONS, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                         Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE) else None
    return wait_until(ok, timeout, message=f"InitProducerId of {txn_id}")


def add_partitions_request(txn_id, pid, epoch, partitions, version=0):
    by_topic: dict = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest(
        version=version, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


def add_partitions_errors(response) -> dict:
    return {(t.name, p.partition_index): p.partition_error_code for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def add_partitions(bootstrap, txn_id, pid, epoch, partitions, version=0):
    return add_partitions_errors(call(bootstrap, add_partitions_request(txn_id, pid, epoch, partitions, version)))


def end_txn(bootstrap, txn_id, pid, epoch, committed, version=0):
    return call(bootstrap, EndTxnRequest(version=version, transactional_id=txn_id, producer_id=pid,
                                         producer_epoch=epoch, committed=committed)).error_code


@pytest.fixture
def txn_cluster(cluster_factory):
    """3 brokers, coordinator timeouts checked every second."""
    return cluster_factory(3, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})


def test_find_coordinator_key_type_1_creates_transaction_state(txn_cluster):
    boot = txn_cluster.brokers[1].bootstrap
    first = find_txn_coordinator(boot, "tx-a")
    assert first.error_code == Errors.COORDINATOR_NOT_AVAILABLE
    coordinator = txn_coordinator(txn_cluster, "tx-a")
    assignment = txn_cluster.zk.get_topic_assignment(TXN_TOPIC)
    assert len(assignment.partitions) == 50
    assert all(len(r) == 3 for r in assignment.partitions.values())
    config = txn_cluster.zk.get_entity_config("topics", TXN_TOPIC)
    assert config["cleanup.policy"] == "compact" and config["min.insync.replicas"] == "2"
    assert config["segment.bytes"] == str(100 * 1024 * 1024)
    # The coordinator named by one broker may itself learn of the new topic a moment later.
    answer = wait_until(lambda: (r := find_txn_coordinator(coordinator, "tx-a")).error_code == 0 and r, 20,
                        message="the coordinator naming itself")
    partition = partition_for("tx-a", 50)

    def leader_served_by_boot():
        # The broker asked may learn of the new topic's partitions a moment after the coordinator does.
        md = raw_metadata(boot, [TXN_TOPIC])
        leaders = {p.partition_index: p.leader_id for p in md.topics[0].partitions}
        return leaders.get(partition, -1) >= 0 and leaders[partition]
    assert answer.node_id == wait_until(leader_served_by_boot, 20, message=f"{TXN_TOPIC}-{partition} in metadata")


def test_transaction_state_needs_replication_factor_brokers(cluster_factory):
    c = cluster_factory(1)
    boot = c.brokers[1].bootstrap
    for _ in range(5):
        assert find_txn_coordinator(boot, "tx-b").error_code == Errors.COORDINATOR_NOT_AVAILABLE
        time.sleep(0.3)
    assert c.zk.get_topic_assignment(TXN_TOPIC) is None or not c.zk.get_topic_assignment(TXN_TOPIC).partitions


def test_api_versions_advertise_the_transaction_apis_with_kafka_28_ranges(cluster1):
    r = call(cluster1.brokers[1].bootstrap, ApiVersionsRequest(version=0))
    ranges = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
    assert [ranges.get(k) for k in (22, 24, 25, 26, 27, 10)] == [(0, 4), (0, 3), (0, 3), (0, 3), (0, 1), (0, 3)]


def test_init_producer_id_when_zookeeper_refuses_the_producer_id_block(cluster1):
    """An idempotent producer's id comes from a block of ids claimed in ZooKeeper: a claim ZooKeeper refuses answers
    COORDINATOR_NOT_AVAILABLE (retriable), and the producer gets an id once ZooKeeper takes the claim."""
    c = cluster1
    boot = c.brokers[1].bootstrap
    set_znode_acl(c.zk_connect, "/latest_producer_id_block", "world:anyone:ra")   # read, admin
    assert init_pid(boot, None).error_code == Errors.COORDINATOR_NOT_AVAILABLE
    set_znode_acl(c.zk_connect, "/latest_producer_id_block", "world:anyone:cdrwa")
    r = init_pid(boot, None)
    assert (r.error_code, r.producer_epoch) == (Errors.NONE, 0)


def test_init_add_end_error_codes_by_version(txn_cluster):
    topic = create_topic(txn_cluster, unique("txcodes"), partitions=2, replication_factor=3)
    boot = txn_coordinator(txn_cluster, "tx-codes")
    assert init_pid(boot, "tx-codes", timeout_ms=0).error_code == Errors.INVALID_TRANSACTION_TIMEOUT
    assert init_pid(boot, "tx-codes", timeout_ms=900001).error_code == Errors.INVALID_TRANSACTION_TIMEOUT
    assert init_pid(boot, "", version=2).error_code == Errors.INVALID_REQUEST
    first = init_until(boot, "tx-codes")
    assert first.error_code == 0 and first.producer_epoch == 0
    again = init_until(boot, "tx-codes", version=2)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    pid = first.producer_id
    # EndTxn of a transaction without partitions: INVALID_TXN_STATE (clients depend on it).
    assert end_txn(boot, "tx-codes", pid, 1, True) == Errors.INVALID_TXN_STATE
    # Unknown topic: UNKNOWN_TOPIC_OR_PARTITION, the others not attempted.
    errors = add_partitions(boot, "tx-codes", pid, 1, [(topic, 0), ("no-such-topic", 0)])
    assert errors == {(topic, 0): Errors.OPERATION_NOT_ATTEMPTED,
                      ("no-such-topic", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(boot, "tx-codes", pid + 1000, 1, [(topic, 0)]) == \
        {(topic, 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(txn_coordinator(txn_cluster, "tx-unknown"), "tx-unknown", pid, 1, [(topic, 0)]) == \
        {(topic, 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    # A stale epoch: INVALID_PRODUCER_EPOCH before v2, PRODUCER_FENCED from v2.
    assert add_partitions(boot, "tx-codes", pid, 0, [(topic, 0)]) == {(topic, 0): Errors.INVALID_PRODUCER_EPOCH}
    assert add_partitions(boot, "tx-codes", pid, 0, [(topic, 0)], version=2) == {(topic, 0): Errors.PRODUCER_FENCED}
    assert add_partitions(boot, "tx-codes", pid, 1, [(topic, 0), (topic, 1)], version=3) == \
        {(topic, 0): Errors.NONE, (topic, 1): Errors.NONE}
    assert end_txn(boot, "tx-codes", pid, 0, True) == Errors.INVALID_PRODUCER_EPOCH
    assert end_txn(boot, "tx-codes", pid, 0, True, version=3) == Errors.PRODUCER_FENCED
    group_add = call(boot, AddOffsetsToTxnRequest(version=0, transactional_id="tx-codes", producer_id=pid,
                                                  producer_epoch=1, group_id="g1")).error_code
    assert group_add == Errors.NONE
    assert end_txn(boot, "tx-codes", pid, 1, True) == Errors.NONE
    # The retry of the same outcome: NONE (or CONCURRENT_TRANSACTIONS while the markers are out); the opposite
    # outcome: INVALID_TXN_STATE.
    assert end_txn(boot, "tx-codes", pid, 1, True) in (Errors.NONE, Errors.CONCURRENT_TRANSACTIONS)
    assert wait_until(lambda: end_txn(boot, "tx-codes", pid, 1, True) == Errors.NONE, 20)
    assert end_txn(boot, "tx-codes", pid, 1, False) == Errors.INVALID_TXN_STATE
    # KIP-360 (v3+): the current producer id and epoch bump the epoch; an unknown pair is fenced.
    bumped = init_until(boot, "tx-codes", version=3, pid=pid, epoch=1)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, 2)
    retried = init_until(boot, "tx-codes", version=3, pid=pid, epoch=1)
    assert (retried.error_code, retried.producer_epoch) == (0, 2)   # the retry of a bump that succeeded
    assert init_pid(boot, "tx-codes", version=3, pid=pid + 7, epoch=0).error_code == Errors.INVALID_PRODUCER_EPOCH
    assert init_pid(boot, "tx-codes", version=4, pid=pid + 7, epoch=0).error_code == Errors.PRODUCER_FENCED
    assert init_pid(boot, "tx-codes", version=4, pid=pid, epoch=-1).error_code == Errors.INVALID_REQUEST
    # Not the coordinator: NOT_COORDINATOR.
    other = next(b.bootstrap for b in txn_cluster.brokers.values() if b.bootstrap != boot)
    assert init_pid(other, "tx-codes").error_code == Errors.NOT_COORDINATOR


def test_ongoing_transaction_fenced_by_a_new_producer(txn_cluster):
    topic = create_topic(txn_cluster, unique("txfence"), partitions=1, replication_factor=3)
    boot = txn_coordinator(txn_cluster, "tx-fence")
    old = init_until(boot, "tx-fence")
    assert add_partitions(boot, "tx-fence", old.producer_id, 0, [(topic, 0)]) == {(topic, 0): 0}
    # The new producer's first InitProducerId fences and aborts the ongoing transaction.
    assert init_pid(boot, "tx-fence").error_code == Errors.CONCURRENT_TRANSACTIONS
    new = init_until(boot, "tx-fence")
    assert new.producer_id == old.producer_id and new.producer_epoch == 2
    assert end_txn(boot, "tx-fence", old.producer_id, 0, True) == Errors.INVALID_PRODUCER_EPOCH
    assert add_partitions(boot, "tx-fence", old.producer_id, 0, [(topic, 0)], version=2) == \
        {(topic, 0): Errors.PRODUCER_FENCED}


def test_next_transaction_is_held_until_the_markers_are_written_not_refused(txn_cluster):
    """AddPartitionsToTxn sent right behind EndTxn (pipelined on one connection, so the markers are surely still
    out) is answered NONE once the previous transaction completes, where Kafka answers CONCURRENT_TRANSACTIONS
    and the client retries after its backoff."""
    topic = create_topic(txn_cluster, unique("txhold"), partitions=3, replication_factor=3)
    boot = txn_coordinator(txn_cluster, "tx-hold")
    pid = init_until(boot, "tx-hold").producer_id
    tps = [(topic, p) for p in range(3)]
    host, port = boot.rsplit(":", 1)
    conn = Connection(host, int(port), "txn-test", 15)
    try:
        for round_ in range(3):
            assert set(add_partitions_errors(conn.send(add_partitions_request("tx-hold", pid, 0, tps))).values()) == {0}
            for p in range(3):
                send_txn_record(txn_cluster, topic, pid, 0, round_, f"r{round_}".encode(), partition=p)
            conn.submit(EndTxnRequest(version=0, transactional_id="tx-hold", producer_id=pid, producer_epoch=0,
                                      committed=True))
            conn.submit(add_partitions_request("tx-hold", pid, 0, tps))
            assert conn.receive().error_code == Errors.NONE
            assert set(add_partitions_errors(conn.receive()).values()) == {Errors.NONE}
            assert conn.send(EndTxnRequest(version=0, transactional_id="tx-hold", producer_id=pid, producer_epoch=0,
                                           committed=False)).error_code == Errors.NONE
    finally:
        conn.close()
    assert sorted(read_all(txn_cluster.bootstrap, topic, "read_committed", 9)) == sorted([b"r0", b"r1", b"r2"] * 3)


def test_held_request_answers_concurrent_transactions_when_the_markers_cannot_be_written(txn_cluster):
    """A marker that cannot be written (its only replica is down) keeps the transaction in PrepareCommit: the
    next AddPartitionsToTxn is held for a moment, then answered CONCURRENT_TRANSACTIONS as Kafka does."""
    topic = create_topic(txn_cluster, unique("txstuck"), partitions=3, replication_factor=1)
    boot = txn_coordinator(txn_cluster, "tx-stuck")
    coordinator_id = next(i for i, b in txn_cluster.brokers.items() if b.bootstrap == boot)
    md = raw_metadata(txn_cluster.bootstrap.split(",")[0], [topic])
    leaders = {p.partition_index: p.leader_id for p in md.topics[0].partitions}
    lonely = next(p for p, leader in leaders.items() if leader != coordinator_id)
    pid = init_until(boot, "tx-stuck").producer_id
    assert add_partitions(boot, "tx-stuck", pid, 0, [(topic, lonely)]) == {(topic, lonely): 0}
    txn_cluster.brokers[leaders[lonely]].kill9()
    wait_until(lambda: end_txn(boot, "tx-stuck", pid, 0, True) == Errors.NONE, 40, message="the PrepareCommit")
    assert add_partitions(boot, "tx-stuck", pid, 0, [(topic, lonely)]) == {(topic, lonely):
                                                                           Errors.CONCURRENT_TRANSACTIONS}


# ---- real clients ----------------------------------------------------------------------------------------------

def read_all(bootstrap: str, topic: str, isolation: str, expect: int, timeout: float = 20.0) -> list[bytes]:
    """Values read from the start of every partition of `topic` until `expect` are read (or the timeout); the
    partitions are assigned, not subscribed (no group: __consumer_offsets needs 3 live brokers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                  "isolation.level": isolation})
    partitions = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out: list[bytes] = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and len(out) < expect:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
        end = time.time() + 1.0       # anything beyond `expect` would show up now
        while time.time() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value())
    finally:
        c.close()
    return out


def rdkafka_producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    p.init_transactions(30)
    return p


def test_confluent_kafka_commit_and_abort(txn_cluster):
    topic = create_topic(txn_cluster, unique("txrd"), partitions=3, replication_factor=3)
    p = rdkafka_producer(txn_cluster.bootstrap, "tx-rdkafka")
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, key=str(i % 3).encode(), value=f"c{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"a{i}".encode())
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()          # an empty transaction: librdkafka skips EndTxn
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, key=b"0", value=b"last")
    p.commit_transaction(30)
    everything = read_all(txn_cluster.bootstrap, topic, "read_uncommitted", 41)
    assert sorted(everything) == sorted([f"c{i}".encode() for i in range(30)] + [f"a{i}".encode() for i in range(10)]
                                        + [b"last"])
    committed = read_all(txn_cluster.bootstrap, topic, "read_committed", 31)
    assert sorted(committed) == sorted([f"c{i}".encode() for i in range(30)] + [b"last"])


def test_aiokafka_transaction_commit_and_abort(txn_cluster):
    from aiokafka import AIOKafkaProducer
    topic = create_topic(txn_cluster, unique("txaio"), partitions=2, replication_factor=3)

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=txn_cluster.bootstrap, transactional_id="tx-aiokafka",
                             enable_idempotence=True, request_timeout_ms=30000)
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send(topic, f"k{i}".encode(), partition=i % 2)
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send_and_wait(topic, b"aborted", partition=0)
                    raise RuntimeError("abort this one")
            async with p.transaction():
                await p.send(topic, b"after", partition=1)
        finally:
            await p.stop()
    asyncio.run(run())
    everything = read_all(txn_cluster.bootstrap, topic, "read_uncommitted", 12)
    assert sorted(everything) == sorted([f"k{i}".encode() for i in range(10)] + [b"aborted", b"after"])
    committed = read_all(txn_cluster.bootstrap, topic, "read_committed", 11)
    assert sorted(committed) == sorted([f"k{i}".encode() for i in range(10)] + [b"after"])


def test_kafka_python_transactional_producer(txn_cluster):
    from kafka import KafkaProducer
    topic = create_topic(txn_cluster, unique("txkp"), partitions=1, replication_factor=3)
    p = KafkaProducer(bootstrap_servers=txn_cluster.bootstrap, transactional_id="tx-kafka-python")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(topic, f"v{i}".encode())
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"gone")
        p.flush()
        p.abort_transaction()
    finally:
        p.close(5)
    everything = read_all(txn_cluster.bootstrap, topic, "read_uncommitted", 6)
    assert everything == [f"v{i}".encode() for i in range(5)] + [b"gone"]
    assert read_all(txn_cluster.bootstrap, topic, "read_committed", 5) == [f"v{i}".encode() for i in range(5)]


# ---- coordinator-driven aborts and failover ---------------------------------------------------------------------

def leader_of(cluster: Cluster, topic: str, partition: int = 0):
    md = raw_metadata(cluster.bootstrap.split(",")[0], [topic])
    leader = {p.partition_index: p.leader_id for p in md.topics[0].partitions}[partition]
    return cluster.brokers[leader]


def end_offset(cluster: Cluster, topic: str, partition: int = 0) -> int:
    """The partition's high watermark (ListOffsets LATEST, read_uncommitted) from its leader."""
    R = ListOffsetsRequest
    r = call(leader_of(cluster, topic, partition).bootstrap, R(version=2, replica_id=-1, isolation_level=0, topics=[
        R.ListOffsetsTopic(name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, timestamp=-1)])]))
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def send_txn_record(cluster: Cluster, topic: str, pid: int, epoch: int, seq: int, value: bytes,
                    partition: int = 0) -> None:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    R = ProduceRequest
    r = call(leader_of(cluster, topic, partition).bootstrap, R(
        version=7, transactional_id="t", acks=-1, timeout_ms=10000, topic_data=[R.TopicProduceData(
            name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=partition,
                                                                                records=bytes(b.build()))])]))
    assert r.responses[0].partition_responses[0].error_code == 0


def test_transaction_past_its_timeout_is_aborted_by_the_coordinator(txn_cluster):
    topic = create_topic(txn_cluster, unique("txto"), partitions=1, replication_factor=3)
    boot = txn_coordinator(txn_cluster, "tx-timeout")
    r = init_until(boot, "tx-timeout", timeout_ms=1500)
    pid = r.producer_id
    assert add_partitions(boot, "tx-timeout", pid, 0, [(topic, 0)]) == {(topic, 0): 0}
    send_txn_record(txn_cluster, topic, pid, 0, 0, b"never committed")
    # The coordinator fences the producer (epoch 1) and writes the ABORT marker: the high watermark moves past it.
    wait_until(lambda: end_offset(txn_cluster, topic) == 2, 20, message="the abort marker")
    assert read_all(txn_cluster.bootstrap, topic, "read_committed", 0, timeout=3) == []
    assert end_txn(boot, "tx-timeout", pid, 0, True) == Errors.INVALID_PRODUCER_EPOCH
    assert end_txn(boot, "tx-timeout", pid, 1, False) == Errors.NONE        # the aborted outcome, retried
    r = init_until(boot, "tx-timeout")
    assert (r.producer_id, r.producer_epoch) == (pid, 2)


def _kill_coordinator(cluster: Cluster, bootstrap: str) -> None:
    victim = next(b for b in cluster.brokers.values() if b.bootstrap == bootstrap)
    victim.kill9()


def test_coordinator_killed_after_prepare_commit_completes_the_commit(txn_cluster):
    topic = create_topic(txn_cluster, unique("txkill"), partitions=1, replication_factor=3)
    boot = txn_coordinator(txn_cluster, "tx-kill")
    pid = init_until(boot, "tx-kill").producer_id
    assert add_partitions(boot, "tx-kill", pid, 0, [(topic, 0)]) == {(topic, 0): 0}
    send_txn_record(txn_cluster, topic, pid, 0, 0, b"committed")
    assert end_txn(boot, "tx-kill", pid, 0, True) == Errors.NONE
    _kill_coordinator(txn_cluster, boot)
    new = txn_coordinator(txn_cluster, "tx-kill", not_at=boot)
    # The new coordinator loaded PrepareCommit (or CompleteCommit) and finishes it: the retried commit is NONE.
    wait_until(lambda: end_txn(new, "tx-kill", pid, 0, True) == Errors.NONE, 40, message="the completed commit")
    assert end_txn(new, "tx-kill", pid, 0, False) == Errors.INVALID_TXN_STATE
    assert end_offset(txn_cluster, topic) >= 2      # the record and (at least one) COMMIT marker
    assert read_all(txn_cluster.bootstrap, topic, "read_committed", 1) == [b"committed"]
    r = init_until(new, "tx-kill")
    assert (r.producer_id, r.producer_epoch) == (pid, 1)


def test_coordinator_killed_mid_transaction_new_producer_aborts_it(txn_cluster):
    topic = create_topic(txn_cluster, unique("txkill2"), partitions=1, replication_factor=3)
    boot = txn_coordinator(txn_cluster, "tx-kill-ongoing")
    pid = init_until(boot, "tx-kill-ongoing").producer_id
    assert add_partitions(boot, "tx-kill-ongoing", pid, 0, [(topic, 0)]) == {(topic, 0): 0}
    send_txn_record(txn_cluster, topic, pid, 0, 0, b"in flight")
    _kill_coordinator(txn_cluster, boot)
    new = txn_coordinator(txn_cluster, "tx-kill-ongoing", not_at=boot)
    # The loaded Ongoing transaction is fenced and aborted by the next producer's InitProducerId.
    r = init_until(new, "tx-kill-ongoing")
    assert (r.producer_id, r.producer_epoch) == (pid, 2)
    assert end_txn(new, "tx-kill-ongoing", pid, 1, False) == Errors.INVALID_PRODUCER_EPOCH
    assert end_offset(txn_cluster, topic) == 2      # the record and the ABORT marker
    assert read_all(txn_cluster.bootstrap, topic, "read_committed", 0, timeout=3) == []
    assert read_all(txn_cluster.bootstrap, topic, "read_uncommitted", 1) == [b"in flight"]


def describe_txn(bootstrap: str, txn_id: str):
    """(state name, {(topic, partition)}) of DescribeTransactions."""
    from kafka.protocol.admin import DescribeTransactionsRequest
    [t] = call(bootstrap, DescribeTransactionsRequest(version=0, transactional_ids=[txn_id])).transaction_states
    assert t.error_code == 0, t
    return t.transaction_state, {(d.topic, p) for d in t.topics for p in d.partitions}


def txn_log_records(bootstrap: str, txn_id: str) -> list[tuple[str, set]]:
    """[(state name, partitions)] of the transactional id's records in its `__transaction_state` partition, read
    from that partition's leader."""
    from aiokafka.record.default_records import DefaultRecordBatch

    from kafka.protocol.consumer import FetchRequest
    from kbroker.common.transaction_log import STATE_NAMES, read_txn_key, read_txn_value
    F = FetchRequest
    req = F(version=11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=10 ** 7, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=TXN_TOPIC, partitions=[
                F.FetchTopic.FetchPartition(partition=partition_for(txn_id, 50), current_leader_epoch=-1,
                                            fetch_offset=0, log_start_offset=-1, partition_max_bytes=10 ** 7)])],
            forgotten_topics_data=[], rack_id="")
    data = call(bootstrap, req).responses[0].partitions[0].records or b""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big")
        for r in DefaultRecordBatch(data[pos:pos + 12 + size]):
            if read_txn_key(r.key) == txn_id and r.value is not None:
                m = read_txn_value(r.value)
                out.append((STATE_NAMES[m.state], m.partitions))
        pos += 12 + size
    return out


def test_prepare_commit_found_on_load_gets_its_markers_sent(txn_cluster):
    """The marker to one partition cannot be written (its only replica is down) when the coordinator dies after
    PrepareCommit. Meanwhile DescribeTransactions lists only that partition (the other's marker is written:
    Kafka's removePartition); the next coordinator loads PrepareCommit (both partitions: the removal is not
    written), sends both markers again and, once the partition is back, writes CompleteCommit with no
    partitions."""
    boot = txn_coordinator(txn_cluster, "tx-resend")
    coordinator_id = next(i for i, b in txn_cluster.brokers.items() if b.bootstrap == boot)
    holder = next(i for i in txn_cluster.brokers if i != coordinator_id)
    topic = unique("txresend")
    r = CliRunner().invoke(cli, ["--zookeeper", txn_cluster.zk_connect, "create-topic", topic,
                                 "--replica-assignment", str(holder)])
    assert r.exit_code == 0, r.output
    live = create_topic(txn_cluster, unique("txlive"), partitions=1, replication_factor=3)
    wait_until(lambda: leaders_known(txn_cluster, topic, 1), 20, message=f"leader of {topic}")
    pid = init_until(boot, "tx-resend").producer_id
    assert add_partitions(boot, "tx-resend", pid, 0, [(topic, 0), (live, 0)]) == {(topic, 0): 0, (live, 0): 0}
    send_txn_record(txn_cluster, topic, pid, 0, 0, b"committed late")
    send_txn_record(txn_cluster, live, pid, 0, 0, b"committed at once")
    txn_cluster.brokers[holder].kill9()
    # PrepareCommit needs the ISR of the transaction log partition: wait for the dead broker to leave it.
    wait_until(lambda: end_txn(boot, "tx-resend", pid, 0, True) == Errors.NONE, 30, message="PrepareCommit")
    wait_until(lambda: describe_txn(boot, "tx-resend") == ("PrepareCommit", {(topic, 0)}), 40,
               message="only the partition whose marker is pending listed")
    assert end_offset(txn_cluster, live) == 2                  # the record and its COMMIT marker
    assert end_txn(boot, "tx-resend", pid, 0, True) == Errors.CONCURRENT_TRANSACTIONS   # markers pending
    assert txn_log_records(boot, "tx-resend")[-1] == ("PrepareCommit", {(topic, 0), (live, 0)})
    _kill_coordinator(txn_cluster, boot)
    txn_cluster.brokers[holder].start()
    new = txn_coordinator(txn_cluster, "tx-resend", timeout=60, not_at=boot)
    wait_until(lambda: end_txn(new, "tx-resend", pid, 0, True) == Errors.NONE, 60, message="the completed commit")
    assert describe_txn(new, "tx-resend") == ("CompleteCommit", set())
    assert txn_log_records(new, "tx-resend")[-2:] == [("PrepareCommit", {(topic, 0), (live, 0)}),
                                                      ("CompleteCommit", set())]
    assert end_offset(txn_cluster, topic) == 2      # the record and one COMMIT marker
    assert end_offset(txn_cluster, live) == 3       # a second COMMIT marker: sent again from the loaded state
    assert read_all(txn_cluster.bootstrap, topic, "read_committed", 1) == [b"committed late"]
    assert read_all(txn_cluster.bootstrap, live, "read_committed", 1) == [b"committed at once"]


def test_confluent_kafka_zombie_is_fenced(txn_cluster):
    topic = create_topic(txn_cluster, unique("txzombie"), partitions=1, replication_factor=3)
    zombie = rdkafka_producer(txn_cluster.bootstrap, "tx-zombie")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)
    fresh = rdkafka_producer(txn_cluster.bootstrap, "tx-zombie")   # fences the zombie, aborts its transaction
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh")
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower()
    assert sorted(read_all(txn_cluster.bootstrap, topic, "read_uncommitted", 2)) == [b"fresh", b"zombie"]
    assert read_all(txn_cluster.bootstrap, topic, "read_committed", 1) == [b"fresh"]


def test_idle_transactional_id_expires(cluster_factory):
    c = cluster_factory(3, **{"transactional.id.expiration.ms": 1000,
                              "transaction.remove.expired.transaction.cleanup.interval.ms": 500})
    topic = create_topic(c, unique("txexp"), partitions=1, replication_factor=3)
    boot = txn_coordinator(c, "tx-expire")
    first = init_until(boot, "tx-expire")
    assert end_txn(boot, "tx-expire", first.producer_id, 0, True) == Errors.INVALID_TXN_STATE
    # Once expired (a tombstone written) the id is unknown: its producer id no longer maps to it.
    wait_until(lambda: end_txn(boot, "tx-expire", first.producer_id, 0, True) == Errors.INVALID_PRODUCER_ID_MAPPING,
               20, message="the id to expire")
    assert add_partitions(boot, "tx-expire", first.producer_id, 0, [(topic, 0)]) == \
        {(topic, 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    again = init_until(boot, "tx-expire")
    assert again.producer_id != first.producer_id and again.producer_epoch == 0
