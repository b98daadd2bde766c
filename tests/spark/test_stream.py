"""spark.readStream.format("kbroker") against a real 3-broker cluster: trigger(availableNow=True) into a file
sink, maxOffsetsPerTrigger, and a restart from the checkpoint that reads only the new records."""
from __future__ import annotations

import json
import os
import time

from tests.spark.conftest import make_topic, produce, unique

T0 = (int(time.time()) - 3600) * 1000


def run_available_now(spark, kcluster, topic, out, checkpoint, **options):
    """One availableNow run to parquet files; the numInputRows of each micro-batch."""
    r = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", kcluster.bootstrap)
         .option("subscribe", topic))
    for k, v in options.items():
        r = r.option(k, v)
    query = (r.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(60), "the availableNow query did not finish"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_available_now_resumes_from_its_checkpoint_without_duplicates_or_gaps(spark, kcluster, tmp_path):
    topic = make_topic(kcluster, unique("stream"))
    first = produce(kcluster.bootstrap, topic, [(i % 3, None, f"a{i}".encode(), T0 + i, []) for i in range(30)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    batches = run_available_now(spark, kcluster, topic, out, checkpoint, startingOffsets="earliest",
                                maxOffsetsPerTrigger="8")
    assert sum(batches) == 30 and max(batches) <= 9 and len(batches) >= 4      # capped micro-batches
    second = produce(kcluster.bootstrap, topic, [(i % 3, None, f"b{i}".encode(), T0 + i, []) for i in range(20)])
    batches = run_available_now(spark, kcluster, topic, out, checkpoint, startingOffsets="earliest")
    assert batches == [20]                                      # only the new records, in one micro-batch

    got = sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(out).collect())
    assert got == sorted((s.partition, s.offset, s.value.decode()) for s in first + second)

    # the checkpoint holds Spark's Kafka offsets JSON: the next offset to read per partition
    offsets_dir = os.path.join(checkpoint, "offsets")
    last = max(os.listdir(offsets_dir), key=lambda n: int(n) if n.isdigit() else -1)
    with open(os.path.join(offsets_dir, last)) as f:
        source_offsets = json.loads(f.read().splitlines()[-1])
    assert source_offsets == {topic: {"0": 17, "1": 17, "2": 16}}


def test_latest_is_the_default_start(spark, kcluster, tmp_path):
    topic = make_topic(kcluster, unique("latest"), partitions=1)
    produce(kcluster.bootstrap, topic, [(0, None, b"old", T0, [])])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    assert run_available_now(spark, kcluster, topic, out, checkpoint) == []
    produce(kcluster.bootstrap, topic, [(0, None, b"new", T0, [])])
    assert run_available_now(spark, kcluster, topic, out, checkpoint) == [1]
    assert [r.value for r in spark.read.parquet(out).collect()] == ["new"]
