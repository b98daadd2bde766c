"""kafka.isolation.level=read_committed against a real 3-broker cluster, batch and streaming, as Spark's Kafka
source reads: committed records exactly once, aborted ones never, an open transaction holds the end of a read at
the last stable offset, and the offsets of markers and aborted records are passed over without counting as data
loss. The test plays the transaction coordinator (tests/txn_helpers.py); read_uncommitted sees every record."""
from __future__ import annotations

import json
import os

import pytest

from kbroker.spark.client import KafkaClient
from kbroker.spark.options import source_options
from kbroker.spark.reader import plan, read_range, source_client
from tests.integration.test_produce_fetch_bad_input import NONE, init_producer_id, v2_batch
from tests.spark.conftest import make_topic, unique
from tests.spark.test_batch_read import reader
from tests.spark.test_stream import run_available_now
from tests.txn_helpers import produce_txn, txn_batch, write_markers

COMMITTED = {"kafka.isolation.level": "read_committed", "failOnDataLoss": "true"}


class Txns:
    """One partition's leader, with the test as the coordinator of a few producer ids."""

    def __init__(self, kcluster, topic: str):
        with KafkaClient(kcluster.bootstrap) as client:
            leader = client.metadata([topic]).topics[topic].partitions[0].leader
        self.broker, self.topic, self.seq = kcluster.brokers[leader], topic, {}

    def producer(self) -> tuple[int, int]:
        pid, epoch = init_producer_id(self.broker)
        self.seq[pid] = 0
        return pid, epoch

    def send(self, producer, *values: bytes) -> None:
        pid, epoch = producer
        assert produce_txn(self.broker, self.topic, txn_batch(values, pid, epoch, self.seq[pid])).error_code == NONE
        self.seq[pid] += len(values)

    def plain(self, value: bytes) -> None:
        assert produce_txn(self.broker, self.topic, v2_batch([value]), transactional_id=None).error_code == NONE

    def end(self, producer, committed: bool) -> None:
        pid, epoch = producer
        assert write_markers(self.broker, [(pid, epoch, committed, 0, self.topic, [0])]) == [{(self.topic, 0): NONE}]


def planned_and_read(kcluster, topic: str, **options) -> tuple[list[tuple[int, int]], list[tuple[int, bytes]]]:
    """The ranges a read_committed batch read plans, and the (offset, value) its tasks read."""
    o = source_options({"kafka.bootstrap.servers": kcluster.bootstrap, "subscribe": topic, **options, **COMMITTED},
                       streaming=False)
    ranges = plan(o)
    with source_client(o) as client:
        got = [(offset, value) for r in ranges for b in read_range(client, r, o)
               for offset, value in zip(b.column("offset").to_pylist(), b.column("value").to_pylist())]
    return [(r.start, r.end) for r in ranges], got


def values(df) -> list[tuple[int, bytes]]:
    return sorted((r.offset, bytes(r.value)) for r in df.select("offset", "value").collect())


def test_batch_reads_see_committed_records_once_and_stop_at_the_last_stable_offset(spark, kcluster):
    topic = make_topic(kcluster, unique("rc"), partitions=1)
    t = Txns(kcluster, topic)
    p1, p2, p3 = t.producer(), t.producer(), t.producer()
    t.send(p1, b"c1", b"c2")        # 0-1 committed
    t.send(p2, b"a1")               # 2   aborted
    t.plain(b"p1")                  # 3
    t.end(p1, True)                 # 4   COMMIT p1
    t.send(p1, b"a2")               # 5   aborted (p1's second transaction)
    t.send(p2, b"a3")               # 6   aborted
    t.end(p2, False)                # 7   ABORT p2
    t.end(p1, False)                # 8   ABORT p1
    t.send(p1, b"c3")               # 9   committed (the ABORT marker ended p1's aborted transaction)
    t.end(p1, True)                 # 10  COMMIT p1
    t.send(p3, b"o1")               # 11  open: the last stable offset
    t.plain(b"p2")                  # 12

    committed = [(0, b"c1"), (1, b"c2"), (3, b"p1"), (9, b"c3")]
    assert values(reader(spark, kcluster, subscribe=topic, **COMMITTED)) == committed
    # What Spark's planner and tasks run, in-process (faster than a Spark job each): -1 in endingOffsets is the
    # last stable offset too; minPartitions cuts ranges that start, end or lie wholly in markers and aborted
    # records: each completes, failOnDataLoss does not fire
    assert planned_and_read(kcluster, topic, endingOffsets=json.dumps({topic: {"0": -1}})) == ([(0, 11)], committed)
    ranges, got = planned_and_read(kcluster, topic, minPartitions="5")
    assert len(ranges) == 5 and got == committed
    assert planned_and_read(kcluster, topic, startingOffsets=json.dumps({topic: {"0": 4}}))[1] == [(9, b"c3")]
    assert planned_and_read(kcluster, topic, startingOffsets=json.dumps({topic: {"0": 5}}),
                            endingOffsets=json.dumps({topic: {"0": 9}})) == ([(5, 9)], [])

    # read_uncommitted (the default) sees every record, aborted and open ones included
    everything = [(0, b"c1"), (1, b"c2"), (2, b"a1"), (3, b"p1"), (5, b"a2"), (6, b"a3"), (9, b"c3"), (11, b"o1"),
                  (12, b"p2")]
    assert values(reader(spark, kcluster, subscribe=topic)) == everything

    t.end(p3, True)                 # 13: the open transaction commits; the end moves past it
    assert values(reader(spark, kcluster, subscribe=topic, **COMMITTED)) == committed + [(11, b"o1"), (12, b"p2")]


def test_isolation_level_values_are_kafkas(spark, kcluster):
    with pytest.raises(Exception, match="Invalid value READ_COMMITTED for configuration isolation.level"):
        reader(spark, kcluster, subscribe="any", **{"kafka.isolation.level": "READ_COMMITTED"}).count()


def test_available_now_read_committed_reads_a_transaction_once_it_commits(spark, kcluster, tmp_path):
    topic = make_topic(kcluster, unique("rcs"), partitions=1)
    t = Txns(kcluster, topic)
    p1, p2 = t.producer(), t.producer()
    t.send(p1, b"a", b"b")          # 0-1, open
    t.plain(b"x")                   # 2, behind the open transaction
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    options = {"startingOffsets": "earliest", **COMMITTED}
    assert run_available_now(spark, kcluster, topic, out, checkpoint, **options) == []

    t.end(p1, True)                 # 3   COMMIT
    t.send(p2, b"gone")             # 4
    t.end(p2, False)                # 5   ABORT: the end is past the marker, with no record after it
    assert run_available_now(spark, kcluster, topic, out, checkpoint, **options) == [3]
    assert sorted((r.offset, r.value) for r in spark.read.parquet(out).collect()) == [(0, "a"), (1, "b"), (2, "x")]
    offsets_dir = os.path.join(checkpoint, "offsets")
    last = max(os.listdir(offsets_dir), key=lambda n: int(n) if n.isdigit() else -1)
    with open(os.path.join(offsets_dir, last)) as f:
        assert json.loads(f.read().splitlines()[-1]) == {topic: {"0": 6}}
