"""`kadmin transactions list|describe|find-hanging|abort` against real brokers: transactions opened and
committed by confluent-kafka producers show with their coordinator's state (table and JSON), the filters
select, and a hanging partition-side transaction (transactional records produced raw, never ended) is found
and aborted, which moves the last stable offset so a read_committed confluent-kafka consumer gets past it.
Expected values come from the clients and the raw protocol (FindCoordinator, InitProducerId, ListOffsets),
never from kadmin itself. With --zookeeper (state replayed from `__transaction_state`, brokers found in
ZooKeeper) the same scenarios show the same ids, states, producer ids and coordinators."""
from __future__ import annotations

import json
import time

from click.testing import CliRunner
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from kafka.protocol.admin import DeleteRecordsRequest

from admin_cli import transactions as txn_ops
from admin_cli.main import cli
from kbroker.common.internal_topics import TRANSACTION_STATE_TOPIC as TXN_TOPIC
from kbroker.common.transaction_log import partition_for
from tests.clients._util import create_topic, raw_request, unique
from tests.integration.conftest import wait_until
from tests.integration.test_produce_fetch_bad_input import init_producer_id, v2_batch
from tests.integration.test_transactions import add_partitions, find_txn_coordinator, init_until, txn_coordinator
from tests.integration.test_txn_log import READ_COMMITTED, list_latest
from tests.txn_helpers import produce_txn, txn_batch

# The coordinators never abort timed-out transactions themselves here, so one past its timeout stays Ongoing.
TXN_CONFIG = {"transaction.state.log.num.partitions": 5,
              "transaction.abort.timed.out.transaction.cleanup.interval.ms": 3_600_000}


def coordinator_id(bootstrap: str, txn_id: str) -> int:
    """The coordinator's broker id as the coordinator itself names it, once it does: a broker that another one
    already names may answer COORDINATOR_NOT_AVAILABLE (node -1) until its metadata has the partition's leader."""
    def named():
        r = find_txn_coordinator(bootstrap, txn_id)
        return r.node_id if r.error_code == 0 else None
    return wait_until(named, 20, message=f"the coordinator of {txn_id} named by itself")

def kadmin(bootstrap, *args, output="table"):
    return CliRunner().invoke(cli, ["--bootstrap-server", bootstrap, "--output", output] + [str(a) for a in args],
                              catch_exceptions=False)


def kadmin_zk(cluster, *args, output="table"):
    return CliRunner().invoke(cli, ["--zookeeper", cluster.zk_connect, "--output", output] + [str(a) for a in args],
                              catch_exceptions=False)


def without_duration(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "duration_ms"}


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


def rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.strip()]


def producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 45000})
    p.init_transactions(30)
    return p


def test_list_and_describe_open_committed_and_empty_transactions(cluster_factory, monkeypatch):
    cluster = cluster_factory(3, **TXN_CONFIG)
    bs = cluster.bootstrap
    topic = create_topic(cluster, unique("txa"), partitions=2, replication_factor=3)
    open_id, done_id, empty_id = unique("open"), unique("done"), unique("empty")
    coordinators = {t: txn_coordinator(cluster, t) for t in (open_id, done_id, empty_id)}
    node_of = {t: coordinator_id(b, t) for t, b in coordinators.items()}

    p_open = producer(bs, open_id)
    p_open.begin_transaction()
    p_open.produce(topic, value=b"x", partition=1)
    p_open.flush(10)
    p_done = producer(bs, done_id)
    p_done.begin_transaction()
    p_done.produce(topic, value=b"y", partition=0)
    p_done.commit_transaction(30)
    p_empty = producer(bs, empty_id)

    def listed():
        doc = json.loads(ok(kadmin(bs, "transactions", "list", output="json")))
        return {t["transactional_id"]: t for t in doc["transactions"]}
    wait_until(lambda: listed().get(done_id, {}).get("state") == "CompleteCommit", timeout=20)
    ours = {t: v for t, v in listed().items() if t in node_of}
    assert {t: (v["state"], v["coordinator"], v["timeout_ms"]) for t, v in ours.items()} == {
        open_id: ("Ongoing", node_of[open_id], 45000), done_id: ("CompleteCommit", node_of[done_id], 45000),
        empty_id: ("Empty", node_of[empty_id], 45000)}
    assert ours[open_id]["start_time_ms"] > 0 and ours[empty_id]["start_time_ms"] == -1
    assert all(v["producer_id"] >= 0 and v["producer_epoch"] >= 0 for v in ours.values())
    open_pid = ours[open_id]["producer_id"]

    table = rows(ok(kadmin(bs, "transactions", "list")))
    assert table[0] == ["TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "PRODUCER-EPOCH", "TIMEOUT-MS",
                        "START-TIME"]
    by_id = {r[0]: r for r in table[1:]}
    assert by_id[open_id][1:6] == [str(node_of[open_id]), "Ongoing", str(open_pid),
                                   str(ours[open_id]["producer_epoch"]), "45000"]
    assert by_id[empty_id][2] == "Empty" and by_id[empty_id][6] == "-"

    # Filters: by state (case-insensitive, several), by producer id.
    doc = json.loads(ok(kadmin(bs, "transactions", "list", "--state", "ongoing", output="json")))
    assert [t["transactional_id"] for t in doc["transactions"]] == [open_id]
    doc = json.loads(ok(kadmin(bs, "transactions", "list", "--state", "Empty,completecommit", output="json")))
    assert sorted(t["transactional_id"] for t in doc["transactions"]) == sorted([done_id, empty_id])
    doc = json.loads(ok(kadmin(bs, "transactions", "list", "--producer-id", open_pid, output="json")))
    assert [t["transactional_id"] for t in doc["transactions"]] == [open_id]
    bad = kadmin(bs, "transactions", "list", "--state", "running")
    assert bad.exit_code == 2 and "Valid states are" in bad.stderr

    # describe: the open transaction's partition, in JSON and as a table.
    doc = json.loads(ok(kadmin(bs, "transactions", "describe", open_id, output="json")))
    assert (doc["state"], doc["coordinator"], doc["producer_id"]) == ("Ongoing", node_of[open_id], open_pid)
    assert doc["partitions"] == [{"topic": topic, "partition": 1}] and doc["duration_ms"] >= 0
    table = rows(ok(kadmin(bs, "transactions", "describe", open_id)))
    assert table[0][-1] == "PARTITIONS" and table[1][0] == open_id and table[1][2] == "Ongoing"
    assert table[1][-1] == f"{topic}-1"

    # --zookeeper: the same list (JSON and table; the coordinator is the __transaction_state partition's
    # leader), filters and descriptions, replayed from the log.
    assert json.loads(ok(kadmin_zk(cluster, "transactions", "list", output="json"))) == \
        json.loads(ok(kadmin(bs, "transactions", "list", output="json")))
    assert rows(ok(kadmin_zk(cluster, "transactions", "list"))) == rows(ok(kadmin(bs, "transactions", "list")))
    with monkeypatch.context() as m:     # one batch per Fetch (a broker answers a whole first batch): the same
        m.setattr(txn_ops, "_FETCH_BYTES", 1)
        assert json.loads(ok(kadmin_zk(cluster, "transactions", "list", output="json"))) == \
            json.loads(ok(kadmin(bs, "transactions", "list", output="json")))
    doc = json.loads(ok(kadmin_zk(cluster, "transactions", "list", "--state", "ongoing", output="json")))
    assert [t["transactional_id"] for t in doc["transactions"]] == [open_id]
    doc = json.loads(ok(kadmin_zk(cluster, "transactions", "list", "--state", "Empty,completecommit",
                                  output="json")))
    assert sorted(t["transactional_id"] for t in doc["transactions"]) == sorted([done_id, empty_id])
    doc = json.loads(ok(kadmin_zk(cluster, "transactions", "list", "--producer-id", open_pid, output="json")))
    assert [t["transactional_id"] for t in doc["transactions"]] == [open_id]
    for t in (open_id, done_id, empty_id):
        by_zk = json.loads(ok(kadmin_zk(cluster, "transactions", "describe", t, output="json")))
        assert without_duration(by_zk) == \
            without_duration(json.loads(ok(kadmin(bs, "transactions", "describe", t, output="json"))))
        assert (by_zk["duration_ms"] is None) == (t != open_id)
    table = rows(ok(kadmin_zk(cluster, "transactions", "describe", open_id)))
    assert table[0][-1] == "PARTITIONS" and table[1][:3] == [open_id, str(node_of[open_id]), "Ongoing"]
    assert table[1][-1] == f"{topic}-1"

    # find-hanging: an Ongoing transaction past its 1 s timeout (raw protocol: AddPartitionsToTxn, nothing
    # produced) is hanging on the coordinator side; the confluent one (45 s, its partition known to its
    # coordinator) is not, even with --max-transaction-timeout 0.
    slow_id = unique("slow")
    slow_coordinator = txn_coordinator(cluster, slow_id)
    r = init_until(slow_coordinator, slow_id, timeout_ms=1000)
    assert add_partitions(slow_coordinator, slow_id, r.producer_id, r.producer_epoch, [(topic, 0)]) == \
        {(topic, 0): 0}
    time.sleep(1.5)
    doc = json.loads(ok(kadmin(bs, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout",
                               0, output="json")))
    assert [(h["source"], h["transactional_id"], h["producer_id"], h["producer_epoch"]) for h in doc["hanging"]] \
        == [("coordinator", slow_id, r.producer_id, r.producer_epoch)]
    assert doc["hanging"][0]["duration_ms"] > 1000
    by_zk = json.loads(ok(kadmin_zk(cluster, "transactions", "find-hanging", "--topic", topic,
                                    "--max-transaction-timeout", 0, output="json")))
    assert [(h["source"], h["transactional_id"], h["producer_id"], h["producer_epoch"], h["start_time_ms"])
            for h in by_zk["hanging"]] == \
        [("coordinator", slow_id, r.producer_id, r.producer_epoch, doc["hanging"][0]["start_time_ms"])]

    p_open.commit_transaction(30)
    wait_until(lambda: json.loads(ok(kadmin(bs, "transactions", "describe", open_id, output="json")))["state"]
               == "CompleteCommit", timeout=20)
    doc = json.loads(ok(kadmin(bs, "transactions", "describe", open_id, output="json")))
    assert doc["partitions"] == [] and doc["duration_ms"] is None
    by_zk = json.loads(ok(kadmin_zk(cluster, "transactions", "describe", open_id, output="json")))
    assert by_zk == doc

    for run in (lambda *a: kadmin(bs, *a), lambda *a: kadmin_zk(cluster, *a)):
        missing = run("transactions", "describe", "no-such-id")
        assert (missing.exit_code, missing.stdout) == (1, "")
        assert "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr

    # --zookeeper reads a partition from its log start offset: records deleted below empty_id's newest one
    # (its epoch bumped by a raw InitProducerId: the last record of its partition) leave it described the same.
    bumped = init_until(coordinators[empty_id], empty_id)
    partition = partition_for(empty_id, TXN_CONFIG["transaction.state.log.num.partitions"])
    leader = next(b for b in cluster.brokers.values() if b.bootstrap == coordinators[empty_id])
    newest = list_latest(leader, TXN_TOPIC, 0, partition) - 1
    assert newest > 0
    R = DeleteRecordsRequest
    deleted = raw_request(leader.bootstrap, R(version=0, timeout_ms=10000, topics=[R.DeleteRecordsTopic(
        name=TXN_TOPIC, partitions=[R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=partition,
                                                                                offset=newest)])]))
    assert deleted.topics[0].partitions[0].error_code == 0
    by_zk = json.loads(ok(kadmin_zk(cluster, "transactions", "describe", empty_id, output="json")))
    assert (by_zk["producer_id"], by_zk["producer_epoch"]) == (bumped.producer_id, bumped.producer_epoch)
    assert by_zk == json.loads(ok(kadmin(bs, "transactions", "describe", empty_id, output="json")))
    del p_open, p_done, p_empty           # librdkafka's producers go before the cluster does


def read_committed(bootstrap: str, topic: str, expect: int, timeout: float = 15.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rc"), "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([CTopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[bytes] = []
    try:
        wait_until(lambda: _poll_into(c, out) and len(out) >= expect, timeout=timeout)
        _poll_into(c, out, 1.0)
    finally:
        c.close()
    return out


def _poll_into(c: Consumer, out: list, seconds: float = 0.5) -> bool:
    m = c.poll(seconds)
    if m is not None and not m.error():
        out.append(m.value())
    return True


def test_find_and_abort_hanging_partition_transactions(cluster1):
    b = cluster1.brokers[1]
    bs = cluster1.bootstrap
    topic = create_topic(cluster1, unique("hang"))
    pid1, epoch1 = init_producer_id(b)
    pid2, epoch2 = init_producer_id(b)
    assert produce_txn(b, topic, v2_batch([b"plain"])).error_code == 0                       # 0
    assert produce_txn(b, topic, txn_batch([b"h1-a", b"h1-b"], pid1, epoch1, 0)).error_code == 0  # 1-2
    assert produce_txn(b, topic, txn_batch([b"h2"], pid2, epoch2, 0)).error_code == 0           # 3
    assert produce_txn(b, topic, v2_batch([b"after"])).error_code == 0                       # 4
    assert list_latest(b, topic, READ_COMMITTED) == 1
    assert read_committed(bs, topic, 1) == [b"plain"]

    # Found hanging: open on the partition, no coordinator knows them (the producers are silent "0 minutes").
    doc = json.loads(ok(kadmin(bs, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout",
                               0, output="json")))
    found = {h["producer_id"]: h for h in doc["hanging"]}
    assert set(found) == {pid1, pid2}
    assert (found[pid1]["source"], found[pid1]["topic"], found[pid1]["partition"], found[pid1]["start_offset"],
            found[pid1]["producer_epoch"]) == ("partition", topic, 0, 1, epoch1)
    assert found[pid2]["start_offset"] == 3
    # --zookeeper: the same (brokers found in ZooKeeper; no __transaction_state exists here).
    by_zk = json.loads(ok(kadmin_zk(cluster1, "transactions", "find-hanging", "--topic", topic,
                                    "--max-transaction-timeout", 0, output="json")))
    assert {h["producer_id"]: without_duration(h) for h in by_zk["hanging"]} == \
        {p: without_duration(h) for p, h in found.items()}
    # With the default 15 minutes they are too young to count.
    assert ok(kadmin(bs, "transactions", "find-hanging", "--topic", topic)).strip() == \
        "No hanging transactions found."

    # Abort the first by its start offset, through ZooKeeper's brokers: the LSO moves to the second's first
    # offset.
    out = ok(kadmin_zk(cluster1, "transactions", "abort", "--topic", topic, "--partition", 0, "--start-offset", 1))
    assert f"producer {pid1}" in out
    assert list_latest(b, topic, READ_COMMITTED) == 3
    # A stale epoch is refused by the leader (INVALID_PRODUCER_EPOCH), exit 1.
    stale = kadmin(bs, "transactions", "abort", "--topic", topic, "--partition", 0, "--producer-id", pid2,
                   "--producer-epoch", epoch2 - 1, "--coordinator-epoch", 0)
    assert stale.exit_code == 1 and "INVALID_PRODUCER_EPOCH" in stale.stderr
    # The second with explicit producer id/epoch/coordinator epoch, JSON answer.
    doc = json.loads(ok(kadmin(bs, "transactions", "abort", "--topic", topic, "--partition", 0, "--producer-id",
                               pid2, "--producer-epoch", epoch2, "--coordinator-epoch", 0, output="json")))
    assert doc == {"topic": topic, "partition": 0, "producer_id": pid2, "producer_epoch": epoch2,
                   "coordinator_epoch": 0, "aborted": True}
    assert list_latest(b, topic, READ_COMMITTED) == list_latest(b, topic, 0)
    assert read_committed(bs, topic, 2) == [b"plain", b"after"]
    assert ok(kadmin(bs, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", 0)
              ).strip() == "No hanging transactions found."
    assert ok(kadmin_zk(cluster1, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout",
                        0)).strip() == "No hanging transactions found."
    # Nothing open at that offset any more.
    gone = kadmin(bs, "transactions", "abort", "--topic", topic, "--partition", 0, "--start-offset", 1)
    assert gone.exit_code == 1 and "No open transaction" in gone.stderr
    usage = kadmin(bs, "transactions", "abort", "--topic", topic, "--partition", 0, "--producer-id", pid1)
    assert usage.exit_code == 2


def test_kip664_apis_advertised_and_bad_input_gets_error_codes(cluster1):
    from kafka.protocol.admin import (DescribeProducersRequest, DescribeTransactionsRequest,
                                      ListTransactionsRequest)
    from kafka.protocol.metadata import ApiVersionsRequest

    from tests.clients._util import raw_request
    bs = cluster1.brokers[1].bootstrap
    r = raw_request(bs, ApiVersionsRequest(version=0))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert [ranges.get(k) for k in (61, 65, 66)] == [(0, 0), (0, 0), (0, 0)]
    r = raw_request(bs, ListTransactionsRequest(version=0, state_filters=["Ongoing", "Running"],
                                                producer_id_filters=[]))
    assert (r.error_code, r.unknown_state_filters, r.transaction_states) == (0, ["Running"], [])
    r = raw_request(bs, DescribeTransactionsRequest(version=0, transactional_ids=["nobody", ""]))
    # no __transaction_state partition is led here (none exists yet): NOT_COORDINATOR, as for InitProducerId
    assert [(t.transactional_id, t.error_code) for t in r.transaction_states] == [("nobody", 16), ("", 16)]
    r = raw_request(bs, DescribeProducersRequest(version=0, topics=[
        DescribeProducersRequest.TopicRequest(name="no-such-topic", partition_indexes=[0])]))
    assert [(p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == [(0, 3)]
