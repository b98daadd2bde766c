"""spark.read.format("kbroker") against a real 3-broker cluster: the schema and exact records of Spark's Kafka
source, offset and timestamp ranges, minPartitions, failOnDataLoss, the high watermark, and a leader change mid-read."""
from __future__ import annotations

import json
import signal
import time

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from kbroker.spark.arrow import Columns
from kbroker.spark.client import KafkaClient, TopicPartition
from kbroker.spark.options import source_options
from kbroker.spark.reader import OffsetRange, read_range
from tests.integration.conftest import wait_until
from tests.spark.conftest import make_topic, produce, rows_of, unique

T0 = (int(time.time()) - 3600) * 1000          # an hour ago: recent enough for the brokers' time retention


def records(n: int, partitions: int = 3):
    """Record i: partition i % partitions, timestamp T0 + i seconds; varied keys, values and headers (null key,
    null header value, several headers, none)."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"k{i}".encode()
        headers = [] if i % 5 == 0 else [("a", f"h{i}".encode()), ("b", None if i % 2 else b"")]
        out.append((i % partitions, key, f"value-{i}".encode() * (1 + i % 3), T0 + i * 1000, headers))
    return out


@pytest.fixture(scope="module")
def filled(kcluster):
    topic = make_topic(kcluster, unique("read"))
    return topic, produce(kcluster.bootstrap, topic, records(60))


def reader(spark, kcluster, **options):
    r = spark.read.format("kbroker").option("kafka.bootstrap.servers", kcluster.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_reads_every_record_exactly_with_one_spark_partition_per_kafka_partition(spark, kcluster, filled):
    topic, sent = filled
    df = reader(spark, kcluster, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int,"
                                        "headers:array<struct<key:string,value:binary>>>")
    assert df.rdd.getNumPartitions() == 3
    assert rows_of(df) == sent
    assert {(r.topic, r.timestampType) for r in df.select("topic", "timestampType").collect()} == {(topic, 0)}

    plain = reader(spark, kcluster, subscribe=topic)
    assert "headers" not in plain.columns
    assert [(s.partition, s.offset, s.key, s.value, s.timestamp) for s in rows_of(plain)] == \
        [(s.partition, s.offset, s.key, s.value, s.timestamp) for s in sent]


def task_executors(spark, action) -> list[str]:
    """The executor id of every task of the jobs `action` runs (from the driver's status store)."""
    sc = spark.sparkContext
    group = unique("jobs")
    sc.setJobGroup(group, group)
    try:
        action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    store, tracker = sc._jsc.sc().statusStore(), sc.statusTracker()
    out = []
    for job in tracker.getJobIdsForGroup(group):
        for stage in tracker.getJobInfo(job).stageIds:
            tasks = store.taskList(stage, 0, 1000)
            out += [tasks.apply(i).executorId() for i in range(tasks.size())]
    return out


def test_executors_not_the_driver_read_the_partitions(spark, kcluster, filled):
    """On the standalone cluster each Kafka partition is read by a task in an executor (their own JVMs and Python
    workers, started by the workers), never by the driver: the driver only plans the offset ranges."""
    topic, sent = filled
    got = []
    executors = task_executors(spark, lambda: got.extend(rows_of(reader(spark, kcluster, subscribe=topic,
                                                                         includeHeaders="true"))))
    assert got == sent
    assert len(executors) == 3 and "driver" not in executors
    status = spark.sparkContext._jsc.sc().statusStore().executorList(True)
    workers = {status.apply(i).id() for i in range(status.size())} - {"driver"}
    assert set(executors) <= workers and len(workers) == 2          # one executor in each worker


def test_offset_ranges_select_exactly_those_records(spark, kcluster, filled):
    topic, sent = filled
    starting = {topic: {"0": 3, "1": -2, "2": 10}}
    ending = {topic: {"0": 7, "1": 2, "2": -1}}
    df = reader(spark, kcluster, subscribe=topic, startingOffsets=json.dumps(starting),
                endingOffsets=json.dumps(ending))
    want = [s for s in sent if (s.partition == 0 and 3 <= s.offset < 7) or (s.partition == 1 and s.offset < 2)
            or (s.partition == 2 and s.offset >= 10)]
    assert [(s.partition, s.offset) for s in rows_of(df)] == [(s.partition, s.offset) for s in want]

    # assign reads only the named partitions; subscribePattern matches whole topic names
    df = reader(spark, kcluster, assign=json.dumps({topic: [1]}))
    assert {s.partition for s in rows_of(df)} == {1} and df.count() == 20
    assert reader(spark, kcluster, subscribePattern=topic[:-2] + ".*").count() == 60
    assert reader(spark, kcluster, subscribePattern=topic[:-2]).count() == 0


def test_timestamp_ranges_use_the_first_offset_at_or_after_the_timestamp(spark, kcluster, filled):
    topic, sent = filled
    lo, hi = T0 + 12_500, T0 + 40_000           # records 13..39 (record i has timestamp T0 + i s)
    df = reader(spark, kcluster, subscribe=topic, startingTimestamp=str(lo), endingTimestamp=str(hi),
                includeHeaders="true")
    assert rows_of(df) == [s for s in sent if lo <= s.timestamp < hi]

    by_partition = {topic: {"0": T0 + 30_000, "1": T0, "2": T0 + 50_000}}
    df = reader(spark, kcluster, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_partition),
                includeHeaders="true")
    want = [s for s in sent if s.timestamp >= {0: T0 + 30_000, 1: T0, 2: T0 + 50_000}[s.partition]]
    assert rows_of(df) == want

    # no record at or after the timestamp: an error by default, the end of the partition with strategy latest
    with pytest.raises(Exception, match="No offset matched"):
        reader(spark, kcluster, subscribe=topic, startingTimestamp=str(T0 + 10**9)).count()
    assert reader(spark, kcluster, subscribe=topic, startingTimestamp=str(T0 + 10**9),
                  startingOffsetsByTimestampStrategy="latest").count() == 0
    # an ending timestamp after every record ends at the high watermark
    assert reader(spark, kcluster, subscribe=topic, endingTimestamp=str(T0 + 10**9)).count() == 60


def test_min_partitions_splits_partitions_into_offset_ranges(spark, kcluster, filled):
    topic, sent = filled
    df = reader(spark, kcluster, subscribe=topic, minPartitions="6", includeHeaders="true")
    assert df.rdd.getNumPartitions() == 6
    assert rows_of(df) == sent
    assert reader(spark, kcluster, subscribe=topic, minPartitions="2").rdd.getNumPartitions() == 3


def test_batch_options_are_checked_like_sparks(spark, kcluster, filled):
    topic, _ = filled
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        reader(spark, kcluster, subscribe=topic, startingOffsets="latest").count()
    with pytest.raises(Exception, match="One of the following options must be specified"):
        reader(spark, kcluster).count()
    with pytest.raises(Exception, match="you must specify all TopicPartitions"):
        reader(spark, kcluster, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 1}})).count()
    with pytest.raises(Exception, match="auto.offset.reset' is not supported"):
        reader(spark, kcluster, subscribe=topic, **{"kafka.auto.offset.reset": "earliest"}).count()
    # an empty result still runs (Spark calls read() once even when there is no range)
    assert reader(spark, kcluster, subscribe=topic, startingOffsets="earliest",
                  endingOffsets=json.dumps({topic: {"0": 0, "1": 0, "2": 0}})).count() == 0


def test_deleted_records_fail_the_query_unless_fail_on_data_loss_is_false(spark, kcluster):
    topic = make_topic(kcluster, unique("lost"), partitions=1)
    produce(kcluster.bootstrap, topic, [(0, None, b"r%d" % i, T0 + i, []) for i in range(10)])
    admin = AdminClient({"bootstrap.servers": kcluster.bootstrap})
    deleted = admin.delete_records([CkTopicPartition(topic, 0, 4)])
    assert next(iter(deleted.values())).result(20).low_watermark == 4   # the log now starts at offset 4
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="Some data may have been lost"):
        reader(spark, kcluster, subscribe=topic, startingOffsets=from_zero).count()
    got = reader(spark, kcluster, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert [r.offset for r in got.select("offset").collect()] == list(range(4, 10))


def test_records_past_the_high_watermark_are_never_returned(spark, kcluster):
    """Broker 4 follows the topic but each of its fetches waits 8 s at the leader (min bytes never reached), so
    the high watermark lags the leader's log by up to 8 s: records produced with acks=1 right after it moves
    stay above it for that long (a warm Spark read takes 1-2 s; the check below fails the test if it did not
    fit)."""
    slow = kcluster.add(4, **{"replica.fetch.min.bytes": 100_000_000, "replica.fetch.wait.max.ms": 8000})
    try:
        kcluster.wait_ready([1, 2, 3, 4])
        topic = make_topic(kcluster, unique("hw"), partitions=1, replicas=(1, 4))
        tp = TopicPartition(topic, 0)
        with KafkaClient(kcluster.bootstrap) as client:
            def hw():
                return client.offsets({tp: -1})[tp]
            committed = produce(kcluster.bootstrap, topic, [(0, b"k", b"committed", T0, [])], acks="1")
            wait_until(lambda: hw() == 1, 30, message="the follower to fetch the first record")
            produce(kcluster.bootstrap, topic, [(0, b"k", b"uncommitted", T0, [])] * 5, acks="1")
            got = rows_of(reader(spark, kcluster, subscribe=topic, endingOffsets=json.dumps({topic: {"0": 6}})))
            fetched = Columns(False)
            fetched.add(bytes(client.fetch(tp, 0, 1 << 20).records[0]))
            assert hw() == 1, "the follower fetched again during the read: the test proves nothing"
        assert [(s.offset, s.value) for s in got] == [(0, b"committed")] == [(s.offset, s.value) for s in committed]
        assert fetched.offsets == [0]
    finally:
        slow.proc.kill()
        slow.proc.wait()
        del kcluster.brokers[4]


def test_a_leader_change_mid_read_is_followed(kcluster):
    """read_range with small fetches: the leader is shut down after the first one; the rest comes from the new
    leader, every record exactly once."""
    topic = make_topic(kcluster, unique("move"), partitions=1)
    sent = [s for i in range(10)       # ten batches of 30
            for s in produce(kcluster.bootstrap, topic, [(0, None, b"x" * 1000, T0 + i, []) for _ in range(30)])]
    options = source_options({"kafka.bootstrap.servers": kcluster.bootstrap, "subscribe": topic,
                              "kafka.max.partition.fetch.bytes": "20000"}, streaming=False)
    with KafkaClient(kcluster.bootstrap) as client:
        leader = client.metadata([topic]).topics[topic].partitions[0].leader
        batches = read_range(client, OffsetRange(topic, 0, 0, 300), options)
        offsets = next(batches).column("offset").to_pylist()
        assert 0 < len(offsets) < 300
        broker = kcluster.brokers[leader]
        broker.proc.send_signal(signal.SIGTERM)              # controlled shutdown: leadership moves away
        broker.proc.wait(30)
        for batch in batches:
            offsets += batch.column("offset").to_pylist()
        assert client.metadata([topic]).topics[topic].partitions[0].leader != leader
    broker.start()
    kcluster.wait_ready([1, 2, 3])
    assert offsets == [s.offset for s in sent] == list(range(300))
    wait_until(lambda: leaders_back(kcluster), 30, message="all three brokers serving again")


def leaders_back(kcluster) -> bool:
    with KafkaClient(kcluster.bootstrap) as client:
        return len(client.metadata(None).brokers) == 3
