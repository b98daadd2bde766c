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
5. Spark on a standalone cluster (kbroker.spark.standalone: a master and workers of one core from the pyspark
   package's deploy classes, started with the broker): the same noop read with one worker, then with two (the
   second worker joins while the application runs and gets its executor), best of `--rounds` after a warm-up
   read each; printed as the scale-out ratio. The CPU of the broker, the driver and the executors (each with
   its Python workers) and of the whole machine is printed beside each Spark read: on a 2-core machine the
   broker, the driver and both executors share the same two cores, which bounds the ratio.

  .venv/bin/python -m bench.spark_read
  .venv/bin/python bench/spark_read.py --records 2000000 --partitions 6
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

if __package__ in (None, ""):          # `python bench/spark_read.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (BenchCluster, Connection, CpuMeter, MachineCpu, bench_parser, build_v2_batch,
                           check_produced, consume_count, descendants, fmt_rate, high_watermark, log, print_table,
                           produce_request)
from kbroker.cluster import wait_until
from kbroker.spark.standalone import StandaloneCluster

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


def spark_session(master: str):
    """The tuned session of the tests on `master`: local[2], or a standalone cluster's spark:// URL (executors of
    one core and 512 MB, one per worker)."""
    from pyspark.sql import SparkSession

    from kbroker.spark import register
    t0 = time.perf_counter()
    spark = (SparkSession.builder.master(master).appName("kbroker-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "512m")
             .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.executor.extraJavaOptions", "-XX:+UseSerialGC")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    log(f"SparkSession {master} up in {time.perf_counter() - t0:.1f} s")
    return spark


def executors(spark) -> int:
    """Executors registered with the driver (local mode: none besides the driver)."""
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1


def driver(spark) -> Callable[[], list[int]]:
    """The driver's processes: this Python process (not its children: broker, ZooKeeper, Spark daemons) and the
    JVM it started, with that JVM's children (local mode: the Python workers running the tasks)."""
    jvm = spark.sparkContext._gateway.proc.pid
    return lambda: [os.getpid(), *descendants(jvm)]


@dataclass
class Read:
    seconds: float
    cpu: dict[str, float]                      # % of one core, per group of processes, and the machine's


def noop_reads(df, total: int, rounds: int, label: str, groups: dict[str, Callable[[], list[int]]]) -> Read:
    """One warm-up read to the noop sink (executors' Python workers, JIT), then the best of `rounds` timed
    ones, with the CPU of each group of processes (its pids found at the start of the read) and of the whole
    machine during it."""
    best = None
    for r in range(rounds + 1):
        meters = {name: CpuMeter(*pids()).start() for name, pids in groups.items()}
        machine = MachineCpu().start()
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        dt = time.perf_counter() - t0
        log(f"Spark {label} noop round {r}: {total} rows in {dt:.2f} s ({fmt_rate(total / dt)} rows/s)")
        if r and (best is None or dt < best.seconds):
            best = Read(dt, {**{name: m.percent() for name, m in meters.items()}, "machine": machine.percent()})
    return best


def spark_cores(read: Read) -> float:
    """Cores busy in Spark's processes (the driver and, on a cluster, the executors) during the read."""
    return sum(pct for name, pct in read.cpu.items() if name not in ("broker", "machine")) / 100


def cpu_cell(read: Read) -> str:
    return ", ".join(f"{name} {pct:.0f}%" for name, pct in read.cpu.items())


def main(argv=None) -> None:
    parser = bench_parser("spark_read", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="records to read (default 1000000)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (default 100)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed reads of each kind (Spark's after one warm-up read); the best is reported "
                             "(default 3)")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    rows = []
    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop) as cluster, \
            StandaloneCluster(1, os.path.join(cluster.root, "spark")) as standalone:
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

        spark = spark_session("local[2]")
        df = (spark.read.format("kbroker").option("kafka.bootstrap.servers", cluster.bootstrap)
              .option("subscribe", topic).load())
        tasks = df.rdd.getNumPartitions()
        def broker() -> list[int]:
            return [cluster.pid]
        local = noop_reads(df, total, args.rounds, "local[2]", {"broker": broker, "driver+tasks": driver(spark)})
        rows.append([f"Spark local[2] read -> noop sink ({tasks} tasks)", total, f"{local.seconds:.2f}",
                     fmt_rate(total / local.seconds), f"{total / local.seconds / reference:.2f}",
                     f"{local.cpu['broker']:.0f}%"])

        t0 = time.perf_counter()
        got = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes", "max(offset) AS last").collect()[0]
        dt = time.perf_counter() - t0
        if got.n != total:
            raise RuntimeError(f"Spark counted {got.n} of {total} rows")
        rows.append(["Spark local[2] count/sum(length(value))/max(offset)", total, f"{dt:.2f}", fmt_rate(total / dt),
                     f"{total / dt / reference:.2f}", "-"])
        spark.stop()

        # The same read on a Spark standalone cluster: one worker (one executor of one core), then a second
        # worker joins and the running application gets an executor there too.
        spark = spark_session(standalone.url)
        wait_until(lambda: executors(spark) == 1, 60, message="the first worker's executor")
        df = (spark.read.format("kbroker").option("kafka.bootstrap.servers", cluster.bootstrap)
              .option("subscribe", topic).load())
        groups = {"broker": broker, "driver": driver(spark),
                  "executors": lambda: descendants(*standalone.pids("worker-"))}
        reads = [noop_reads(df, total, args.rounds, "standalone, 1 worker", groups)]
        standalone.add_worker()
        wait_until(lambda: executors(spark) == 2, 60, message="an executor in the second worker")
        reads.append(noop_reads(df, total, args.rounds, "standalone, 2 workers", groups))
        spark.stop()
        for n, read in enumerate(reads, 1):
            rows.append([f"Spark standalone, {n} worker{'s' * (n > 1)} of 1 core -> noop sink ({tasks} tasks)", total,
                         f"{read.seconds:.2f}", fmt_rate(total / read.seconds),
                         f"{total / read.seconds / reference:.2f}", f"{read.cpu['broker']:.0f}%"])

    print_table(f"Reading {total} records of {args.value_size} B from {args.partitions} partitions "
                "(ratio: records/s over the librdkafka consumer's in this run)",
                ["what", "records", "seconds", "records/s", "ratio", "broker CPU"], rows)
    print_table(f"CPU during the best Spark read to the noop sink (% of one core; {os.cpu_count()} cores, processes "
                "with their children: Python workers, executors; rows/CPU-s: rows per CPU second of Spark's "
                "processes, driver's and executors')", ["Spark", "seconds", "CPU", "rows/CPU-s"],
                [[name, f"{r.seconds:.2f}", cpu_cell(r), fmt_rate(total / r.seconds / spark_cores(r))]
                 for name, r in [("local[2]", local)] + [(f"standalone, {n} worker{'s' * (n > 1)}", r)
                                                          for n, r in enumerate(reads, 1)]])
    print(f"\nscale-out: two workers read {reads[0].seconds / reads[1].seconds:.2f}x the rows/s of one; their "
          f"executors had {reads[1].cpu['executors'] / reads[0].cpu['executors']:.2f}x the CPU")


if __name__ == "__main__":
    main()
