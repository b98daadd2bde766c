"""Spark reading a topic through the `kbroker` data source, next to a librdkafka consumer reading the same
records in the same run.

1. Fill a topic of `--partitions` (3) partitions with `--records` (1 M) records of `--value-size` (100) B,
   the same number in each (pre-built v2 batches of 1000, raw Produce v8).
2. librdkafka consumer (confluent-kafka): assign() every partition from offset 0, consume(10000) until all
   records are in: the reference rate (its Python loop only counts the messages).
3. The fetch clients, in this process, one partition after another, each turning the records into the
   pyarrow batches the data source yields: kbroker.spark's own (Fetch v11, aiokafka's C record reader) and a
   librdkafka consumer feeding the same columns; best of `--rounds` (3). This is the measurement behind the
   choice of fetch client.
4. Spark, local[2] (the tuned session of the tests): `spark.read.format("kbroker")...load()` written to the
   `noop` sink (every row materialized, nothing stored) — best of `--rounds` (3) after one warm-up read —
   and an aggregation (`count`, `sum(length(value))`, `max(offset)`).

  .venv/bin/python -m bench.spark_read
  .venv/bin/python bench/spark_read.py --records 2000000 --partitions 6
"""
from __future__ import annotations

import os
import sys
import time

if __package__ in (None, ""):          # `python bench/spark_read.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (BenchCluster, Connection, CpuMeter, bench_parser, build_v2_batch, check_produced,
                           consume_count, fmt_rate, high_watermark, log, print_table, produce_request)

RECORDS_PER_BATCH = 1000


def fill(cluster: BenchCluster, topic: str, partitions: int, records: int, value_size: int) -> list[int]:
    """records // partitions records in each partition (the first ones take the remainder), in batches of 1000
    (raw Produce v8, acks=1, 8 in flight); the high watermark of each partition."""
    cluster.create_topic(topic, partitions)
    batches: dict[int, bytes] = {}
    want = [records // partitions + (p < records % partitions) for p in range(partitions)]
    t0 = time.perf_counter()
    conn = Connection("127.0.0.1", cluster.port, "bench-fill", 60.0)
    for p, n in enumerate(want):
        sizes = [RECORDS_PER_BATCH] * (n // RECORDS_PER_BATCH) + [n % RECORDS_PER_BATCH] * bool(n % RECORDS_PER_BATCH)
        for size in set(sizes) - set(batches):
            batches[size] = build_v2_batch(size, value_size, key=b"some-key")
        requests = {size: produce_request(8, topic, p, batches[size], 1, 30000) for size in set(sizes)}
        bodies = {size: r.encode(version=8) for size, r in requests.items()}
        sent = acked = 0
        while acked < len(sizes):
            while sent < len(sizes) and sent - acked < 8:
                conn.submit(requests[sizes[sent]], bodies[sizes[sent]])
                sent += 1
            check_produced(conn.receive())
            acked += 1
    conn.close()
    ends = [high_watermark(cluster.port, topic, p) for p in range(partitions)]
    if ends != want:
        raise RuntimeError(f"high watermarks {ends} after appending {want} records")
    log(f"filled {topic}: {sum(ends)} records of {value_size} B in {partitions} partitions, "
        f"{time.perf_counter() - t0:.1f} s")
    return ends


def librdkafka_consumer(cluster: BenchCluster, topic: str, ends: list[int]) -> tuple[int, float, float]:
    """(records, seconds, broker CPU %) for a librdkafka consumer reading every partition from offset 0."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kbroker-bench", "enable.auto.commit": False,
                  "queued.min.messages": 1000000, "fetch.queue.backoff.ms": 10, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(len(ends))])
    cpu = CpuMeter(cluster.pid).start()
    t0 = time.perf_counter()
    n = consume_count(c, sum(ends), t0 + 120)
    dt = time.perf_counter() - t0
    broker_cpu = cpu.percent()
    c.close()
    return n, dt, broker_cpu


def kbroker_to_arrow(cluster: BenchCluster, topic: str, ends: list[int]) -> tuple[int, float]:
    from kbroker.spark.client import KafkaClient
    from kbroker.spark.options import source_options
    from kbroker.spark.reader import OffsetRange, read_range
    options = source_options({"kafka.bootstrap.servers": cluster.bootstrap, "subscribe": topic}, streaming=False)
    n = 0
    t0 = time.perf_counter()
    with KafkaClient(cluster.bootstrap) as client:
        for p, end in enumerate(ends):
            for batch in read_range(client, OffsetRange(topic, p, 0, end), options):
                n += batch.num_rows
    return n, time.perf_counter() - t0


def librdkafka_to_arrow(cluster: BenchCluster, topic: str, ends: list[int]) -> tuple[int, float]:
    """The alternative fetch client: one librdkafka consumer per partition, messages into the same columns."""
    from confluent_kafka import Consumer, TopicPartition

    from kbroker.spark.arrow import Columns
    n = 0
    t0 = time.perf_counter()
    for p, end in enumerate(ends):
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kbroker-bench", "enable.auto.commit": False,
                      "queued.min.messages": 1000000, "fetch.queue.backoff.ms": 10, "enable.partition.eof": False,
                      "max.partition.fetch.bytes": 8 * 1024 * 1024})     # as kbroker.spark's default
        c.assign([TopicPartition(topic, p, 0)])
        offset = 0
        while offset < end:
            msgs = c.consume(num_messages=10000, timeout=1.0)
            cols = Columns(False)
            ka, va, oa, ta = cols.keys.append, cols.values.append, cols.offsets.append, cols.timestamps.append
            for m in msgs:
                ka(m.key())
                va(m.value())
                oa(m.offset())
                kind, ts = m.timestamp()
                ta(ts)
                cols.types.append(kind - 1)               # librdkafka: 1 create time, 2 log append time
            if msgs:
                batch = cols.to_arrow(topic, p, offset, end)
                n += batch.num_rows
                offset = msgs[-1].offset() + 1
        c.close()
    return n, time.perf_counter() - t0


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from kbroker.spark import register
    t0 = time.perf_counter()
    spark = (SparkSession.builder.master("local[2]").appName("kbroker-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "512m")
             .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    log(f"SparkSession local[2] up in {time.perf_counter() - t0:.1f} s")
    return spark


def main(argv=None) -> None:
    parser = bench_parser("spark_read", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="records to read (default 1000000)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (default 100)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed reads of each kind (Spark's after one warm-up read); the best is reported "
                             "(default 3)")
    args = parser.parse_args(argv)

    rows = []
    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop) as cluster:
        topic = "bench-spark"
        ends = fill(cluster, topic, args.partitions, args.records, args.value_size)
        total = sum(ends)

        n, dt, broker_cpu = librdkafka_consumer(cluster, topic, ends)
        reference = n / dt
        log(f"librdkafka consumer: {n} records in {dt:.2f} s")
        rows.append(["librdkafka consumer (count only)", n, f"{dt:.2f}", fmt_rate(reference), "1.00",
                     f"{broker_cpu:.0f}%"])

        for name, fn in (("fetch to arrow: kbroker.spark client", kbroker_to_arrow),
                         ("fetch to arrow: librdkafka consumer", librdkafka_to_arrow)):
            best = None
            for _ in range(args.rounds):
                cpu = CpuMeter(cluster.pid).start()
                n, dt = fn(cluster, topic, ends)
                log(f"{name}: {n} records in {dt:.2f} s")
                if n != total:
                    raise RuntimeError(f"{name} read {n} of {total} records")
                if best is None or dt < best[0]:
                    best = (dt, cpu.percent())
            dt, broker_cpu = best
            rows.append([name + " (1 process)", total, f"{dt:.2f}", fmt_rate(total / dt),
                         f"{total / dt / reference:.2f}", f"{broker_cpu:.0f}%"])

        spark = spark_session()
        df = (spark.read.format("kbroker").option("kafka.bootstrap.servers", cluster.bootstrap)
              .option("subscribe", topic).load())
        best = None
        for r in range(args.rounds + 1):                           # round 0 warms up (workers, JIT): not counted
            cpu = CpuMeter(cluster.pid).start()
            t0 = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            dt = time.perf_counter() - t0
            log(f"Spark noop round {r}: {total} rows in {dt:.2f} s ({fmt_rate(total / dt)} rows/s)")
            if r and (best is None or dt < best[0]):
                best = (dt, cpu.percent())
        dt, broker_cpu = best
        rows.append([f"Spark local[2] read -> noop sink ({df.rdd.getNumPartitions()} tasks)", total, f"{dt:.2f}",
                     fmt_rate(total / dt), f"{total / dt / reference:.2f}", f"{broker_cpu:.0f}%"])

        t0 = time.perf_counter()
        got = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes", "max(offset) AS last").collect()[0]
        dt = time.perf_counter() - t0
        if got.n != total:
            raise RuntimeError(f"Spark counted {got.n} of {total} rows")
        rows.append(["Spark local[2] count/sum(length(value))/max(offset)", total, f"{dt:.2f}", fmt_rate(total / dt),
                     f"{total / dt / reference:.2f}", "-"])
        spark.stop()

    print_table(f"Reading {total} records of {args.value_size} B from {args.partitions} partitions "
                "(ratio: records/s over the librdkafka consumer's in this run)",
                ["what", "records", "seconds", "records/s", "ratio", "broker CPU"], rows)


if __name__ == "__main__":
    main()
