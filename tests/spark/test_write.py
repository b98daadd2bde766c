"""df.write.format("kbroker") against a real 3-broker cluster: what is written reads back the same, with Spark's
Kafka sink columns (key, value, topic, partition, headers) and its checks."""
from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from kbroker.spark.arrow import HEADER_TYPE
from tests.spark.conftest import make_topic, rows_of, unique

INPUT = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                    StructField("partition", IntegerType()), StructField("headers", ArrayType(HEADER_TYPE)),
                    StructField("extra", StringType())])


def rows(n: int):
    return [Row(key=None if i % 4 == 0 else f"key-{i % 10}", value=f"value-{i}".encode(),
                partition=2 if i % 3 == 0 else None,
                headers=[Row(key="n", value=str(i).encode())] + ([Row(key="empty", value=None)] if i % 2 else []),
                extra="ignored") for i in range(n)]


def read_back(spark, kcluster, topic):
    return rows_of(spark.read.format("kbroker").option("kafka.bootstrap.servers", kcluster.bootstrap)
                   .option("subscribe", topic).option("includeHeaders", "true").load())


def test_written_rows_read_back_unchanged(spark, kcluster):
    topic = make_topic(kcluster, unique("write"))
    data = rows(500)
    (spark.createDataFrame(data, INPUT).repartition(2).write.format("kbroker")
     .option("kafka.bootstrap.servers", kcluster.bootstrap).option("topic", topic).mode("append").save())
    got = read_back(spark, kcluster, topic)

    want = {r.value: (None if r.key is None else r.key.encode(), tuple((h.key, h.value) for h in r.headers))
            for r in data}
    assert len(got) == len(data)
    assert {s.value: (s.key, s.headers) for s in got} == want
    # an explicit partition is kept; a key always lands on the same partition (Kafka's murmur2 partitioner)
    for s in got:
        i = int(s.value.split(b"-")[1])
        if i % 3 == 0:
            assert s.partition == 2
    keyed = {}
    for s in got:
        if s.key is not None and int(s.value.split(b"-")[1]) % 3:
            keyed.setdefault(s.key, set()).add(s.partition)
    assert keyed and all(len(ps) == 1 for ps in keyed.values())


def test_topic_column_and_checks(spark, kcluster):
    a, b = make_topic(kcluster, unique("wa"), partitions=1), make_topic(kcluster, unique("wb"), partitions=1)
    df = spark.createDataFrame([(a, "1"), (b, "2"), (a, "3")], "topic string, value string")
    df.write.format("kbroker").option("kafka.bootstrap.servers", kcluster.bootstrap).mode("append").save()
    # two executors write ("a", "1") and the other two rows from two concurrent tasks: no order between them.
    assert sorted(s.value for s in read_back(spark, kcluster, a)) == [b"1", b"3"]
    assert [s.value for s in read_back(spark, kcluster, b)] == [b"2"]

    def write(frame, mode="append", **options):
        w = frame.write.format("kbroker").option("kafka.bootstrap.servers", kcluster.bootstrap).mode(mode)
        for k, v in options.items():
            w = w.option(k, v)
        w.save()
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        write(spark.createDataFrame([("x",)], "key string"), topic=a)
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is present"):
        write(spark.createDataFrame([("x",)], "value string"))
    with pytest.raises(Exception, match="Save mode Overwrite not allowed"):
        write(spark.createDataFrame([("x",)], "value string"), mode="overwrite", topic=a)
    with pytest.raises(Exception, match="Partition 5 of topic .* does not exist"):
        write(spark.createDataFrame([("x", 5)], "value string, partition int"), topic=a)
    assert len(read_back(spark, kcluster, a)) == 2
