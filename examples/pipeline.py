"""An example pipeline on a kbroker cluster: an application produces click events, a Spark batch job counts
them per user per minute and writes the counts to another topic, and the counts are read back.

    make up                     # ZooKeeper + 3 brokers on localhost:9092-9094
    make pipeline               # the Spark extra, then this script (or: .venv/bin/python examples/pipeline.py)
    .venv/bin/spark-submit --master spark://127.0.0.1:7077 examples/pipeline.py     # on a Spark cluster (README)

Run by Python the job runs in a local Spark (local[*]); run by spark-submit, on the master it is given.

1. Topics `events` (3 partitions) and `event-counts` (1 partition), replication factor 3, created through the
   Admin API if missing.
2. `--events` (20 000) events from a confluent-kafka producer: key = user, value = JSON {user, page}, the
   record timestamp spread over the last five minutes.
3. Spark reads exactly the offsets just produced (`startingOffsets` / `endingOffsets` as JSON), counts per user
   and minute of the record timestamp, and appends the counts to `event-counts` as JSON values keyed by user.
4. Spark reads back the counts written since the job started (`startingTimestamp`: the sink stamps records
   with the time they are written); their sum must equal the events produced.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

USERS = ["ada", "grace", "linus", "ken", "barbara", "edsger", "margaret", "dennis"]
PAGES = ["/", "/search", "/cart", "/checkout", "/help"]


def ensure_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, n, 3) for t, n in topics.items() if t not in existing]
    for topic, future in admin.create_topics(new).items() if new else ():
        future.result(30)
        print(f"created topic {topic}")
    deadline = time.monotonic() + 30                    # wait until every partition has a leader
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10).topics
        if all(t in md and len(md[t].partitions) == n and all(p.leader >= 0 for p in md[t].partitions.values())
               for t, n in topics.items()):
            return
        time.sleep(0.2)
    raise SystemExit(f"topics {list(topics)} have no leaders after 30 s")


def produce_events(bootstrap: str, topic: str, n: int) -> dict[int, tuple[int, int]]:
    """Produce n events; the [first, last + 1) offsets written to each partition."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    written: dict[int, tuple[int, int]] = {}
    failed = []

    def delivered(err, msg):
        if err is not None:
            failed.append(err)
            return
        lo, hi = written.get(msg.partition(), (msg.offset(), msg.offset() + 1))
        written[msg.partition()] = (min(lo, msg.offset()), max(hi, msg.offset() + 1))
    now = int(time.time() * 1000)
    rng = random.Random(7)
    for _ in range(n):
        user = rng.choice(USERS)
        event = {"user": user, "page": rng.choice(PAGES)}
        producer.produce(topic, key=user, value=json.dumps(event), timestamp=now - rng.randrange(300_000),
                         on_delivery=delivered)
        producer.poll(0)
    producer.flush(60)
    if failed or sum(hi - lo for lo, hi in written.values()) != n:
        raise SystemExit(f"producing failed: {failed[:3]}")
    return written


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092,localhost:9093,localhost:9094")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--events-topic", default="events")
    parser.add_argument("--counts-topic", default="event-counts")
    args = parser.parse_args(argv)

    ensure_topics(args.bootstrap, {args.events_topic: 3, args.counts_topic: 1})
    t0 = time.perf_counter()
    produced = produce_events(args.bootstrap, args.events_topic, args.events)
    print(f"produced {args.events} events to {args.events_topic} in {time.perf_counter() - t0:.1f} s "
          f"(offsets {produced})")

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kbroker.spark import register
    spark = (SparkSession.builder.appName("kbroker-pipeline")                 # the master: spark-submit's, or local[*]
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "512m").config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    t0 = time.perf_counter()
    job_start_ms = int(time.time() * 1000)
    starting = json.dumps({args.events_topic: {str(p): lo for p, (lo, _) in produced.items()}})
    ending = json.dumps({args.events_topic: {str(p): hi for p, (_, hi) in produced.items()}})
    events = (spark.read.format("kbroker")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.events_topic)
              .option("startingOffsets", starting)
              .option("endingOffsets", ending)
              .load())
    counts = (events
              .select(F.col("key").cast("string").alias("user"),
                      F.window("timestamp", "1 minute").start.alias("minute"))
              .groupBy("user", "minute").count())
    (counts.select(F.col("user").alias("key"),
                   F.to_json(F.struct(F.col("user"), F.date_format("minute", "yyyy-MM-dd'T'HH:mm'Z'").alias("minute"),
                                      F.col("count"))).alias("value"))
     .write.format("kbroker").option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.counts_topic)
     .mode("append").save())
    print(f"Spark counted events per user per minute and wrote them to {args.counts_topic} in "
          f"{time.perf_counter() - t0:.1f} s")

    schema = "user string, minute string, count long"
    back = (spark.read.format("kbroker").option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.counts_topic)
            .option("startingTimestamp", str(job_start_ms)).load()          # only what this run appended
            .select(F.from_json(F.col("value").cast("string"), schema).alias("c")).select("c.*"))
    rows = back.orderBy("minute", "user").collect()
    total = sum(r["count"] for r in rows)
    print(f"\n{len(rows)} counts read back from {args.counts_topic} (first 10):")
    for r in rows[:10]:
        print(f"  {r['minute']}  {r['user']:<10} {r['count']:>6}")
    spark.stop()
    if total != args.events:
        raise SystemExit(f"the counts add up to {total}, not {args.events}")
    print(f"\nthe counts add up to the {total} events produced")


if __name__ == "__main__":
    main()
