"""Fetch throughput of one kbroker process (the zero-copy os.sendfile path), with the loopback limit measured
in the same run.

1. Fill one partition with 1 KiB records (pre-built v2 batches, raw Produce v8).
2. Limit: a trivial server os.sendfile's the partition's segment file(s) (10 MiB per call, like one fetch
   partition) to a loopback client that reads and discards the bytes.
3. kbroker: raw Fetch v11 requests (max_bytes 50 MiB, partition max 10 MiB, one request in flight on one
   connection) read the partition from offset 0 to the end; the client decodes each response without
   copying the records (the protocol client's zero-copy decoder) and walks only the batch headers to find
   the next offset. MB/s and the ratio to the limit.
4. A librdkafka consumer (confluent-kafka, assign() from offset 0, no group) reads the same partition, and a
   second partition of 100-byte records (the record size of anchors.md's consumer figures): records/s.

The data was just written, so it is read from the page cache (as a consumer keeping up with producers).

  .venv/bin/python -m bench.fetch
  .venv/bin/python -m bench.fetch --fill-mib 1024 --py-spy /tmp/fetch.svg
"""
from __future__ import annotations

import os
import sys
import time

if __package__ in (None, ""):          # `python bench/fetch.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (BenchCluster, Connection, CpuMeter, MiB, ProcessCpu, PySpy, RawProducer, bench_parser,
                           build_v2_batch, consume_count, fetch_all, fmt_rate, high_watermark, log, print_table,
                           sendfile_loopback_limit, sendfile_request_response_limit)


def fill(cluster: BenchCluster, topic: str, value_size: int, records_per_batch: int, mib: int) -> tuple[int, int]:
    """Fill partition 0 of a new topic with about `mib` MiB; returns (records, log bytes)."""
    cluster.create_topic(topic, 1)
    batch = build_v2_batch(records_per_batch, value_size)
    n = max(1, mib * MiB // len(batch))
    producer = RawProducer(cluster.port, topic, 1, batch, records_per_batch, connections=2, depth=4)
    dt = producer.fill(n)
    records = n * records_per_batch
    hw = high_watermark(cluster.port, topic, 0)
    if hw != records:
        raise RuntimeError(f"{topic}: high watermark {hw} after appending {records} records")
    log(f"filled {topic}: {records} records of {value_size} B, {n * len(batch) / MiB:.0f} MiB in {dt:.1f} s")
    return records, n * len(batch)


def confluent_consume(cluster: BenchCluster, topic: str, records: int, timeout: float):
    """(records consumed, seconds, broker CPU %, client CPU %) for a librdkafka consumer reading partition 0 from offset 0."""
    import gc
    from confluent_kafka import Consumer, TopicPartition
    # librdkafka's prefetch queue would stop fetching for fetch.queue.backoff.ms (1 s) whenever a 10 MiB
    # fetch overfills queued.min.messages (100000): raise the one, shorten the other
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kbroker-bench",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "fetch.max.bytes": 50 * MiB, "max.partition.fetch.bytes": 10 * MiB,
                  "queued.min.messages": 1000000, "queued.max.messages.kbytes": 1024 * 1024,
                  "fetch.queue.backoff.ms": 10, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, 0)])
    cpu, client_cpu = CpuMeter(cluster.pid).start(), ProcessCpu().start()
    t0 = time.perf_counter()
    n = consume_count(c, records, t0 + timeout)
    dt = time.perf_counter() - t0
    broker_cpu, bench_cpu = cpu.percent(), client_cpu.percent()
    c.close()
    del c
    gc.collect()
    if n < records:
        log(f"WARNING: librdkafka consumer read {n} of {records} records within {timeout:g} s")
    return n, dt, broker_cpu, bench_cpu


def main(argv=None) -> None:
    parser = bench_parser("fetch", __doc__)
    parser.add_argument("--fill-mib", type=int, default=512, help="MiB of 1 KiB records to fetch (default 512)")
    parser.add_argument("--records-per-batch", type=int, default=512, help="1 KiB records per batch (default 512)")
    parser.add_argument("--max-bytes", type=int, default=50 * MiB, help="Fetch max_bytes (default 50 MiB)")
    parser.add_argument("--partition-max-bytes", type=int, default=10 * MiB,
                        help="Fetch partition_max_bytes (default 10 MiB)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="read the partition this many times with Fetch v11, report the best (default 3)")
    parser.add_argument("--small-records", type=int, default=2_000_000,
                        help="100 B records for the librdkafka consumer's second topic (0 to skip; default 2M)")
    parser.add_argument("--consumer-timeout", type=float, default=30.0, help="give up consuming after (s)")
    parser.add_argument("--no-librdkafka", action="store_true", help="skip the librdkafka consumer")
    args = parser.parse_args(argv)

    rows = []
    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop) as cluster:
        topic = "bench-fetch"
        records, nbytes = fill(cluster, topic, 1024, args.records_per_batch, args.fill_mib)
        segments = cluster.segment_files(topic, 0)
        sizes = [os.path.getsize(s) for s in segments]
        # the limit: the same segment bytes through a trivial sendfile server (best of the rounds)
        limit = rr_limit = 0.0
        for _ in range(args.rounds):
            total = sum(sizes)
            limit = max(limit, total / sum(size / sendfile_loopback_limit(path, size, args.partition_max_bytes)
                                            for path, size in zip(segments, sizes) if size))
            rr_limit = max(rr_limit, total / sum(
                size / sendfile_request_response_limit(path, size, args.partition_max_bytes)
                for path, size in zip(segments, sizes) if size))
        log(f"loopback sendfile limit: {limit / 1e6:.0f} MB/s streaming, {rr_limit / 1e6:.0f} MB/s with one "
            f"{args.partition_max_bytes / MiB:g} MiB request in flight; {len(segments)} segment(s), "
            f"{sum(sizes) / MiB:.0f} MiB")

        best = None
        conn = Connection("127.0.0.1", cluster.port, "bench-fetch", 60.0)
        for r in range(args.rounds):
            cpu, client_cpu = CpuMeter(cluster.pid).start(), ProcessCpu().start()
            with PySpy(cluster.pid, args.py_spy if r == 0 else None, args.py_spy_format):
                run = fetch_all(conn, 11, topic, 0, records, args.partition_max_bytes, args.max_bytes)
            broker_cpu, bench_cpu = cpu.percent(), client_cpu.percent()
            log(f"Fetch v11 round {r + 1}: {run.records} records, {run.nbytes / MiB:.0f} MiB in {run.seconds:.2f} s "
                f"({run.requests} requests; per response median {run.median_ms:.1f} ms, max {run.max_ms:.1f} ms, "
                f"{run.slow()} over 30 ms): {run.nbytes / run.seconds / 1e6:.0f} MB/s")
            if best is None or run.seconds < best[0].seconds:
                best = (run, broker_cpu, bench_cpu)
        conn.close()
        run, broker_cpu, bench_cpu = best
        bps = run.nbytes / run.seconds
        rows.append(["raw Fetch v11, 1 KiB records (sendfile path)", fmt_rate(run.records / run.seconds),
                     f"{bps / 1e6:.0f}", f"{bps / limit:.2f}", f"{run.median_ms:.1f} / {run.max_ms:.0f}",
                     f"{broker_cpu:.0f}%", f"{bench_cpu:.0f}%"])

        if not args.no_librdkafka:
            log(f"librdkafka consumer: {records} records of 1 KiB")
            n, dt, broker_cpu, bench_cpu = confluent_consume(cluster, topic, records, args.consumer_timeout)
            rows.append(["librdkafka consumer, 1 KiB records", fmt_rate(n / dt), f"{n / dt * nbytes / records / 1e6:.0f}",
                         f"{n / dt * nbytes / records / limit:.2f}", "-", f"{broker_cpu:.0f}%", f"{bench_cpu:.0f}%"])
            if args.small_records:
                small_topic = "bench-fetch-100"
                per_batch = 1000
                small_mib = max(1, args.small_records * 109 // MiB)
                small, small_bytes = fill(cluster, small_topic, 100, per_batch, small_mib)
                log(f"librdkafka consumer: {small} records of 100 B")
                n, dt, broker_cpu, bench_cpu = confluent_consume(cluster, small_topic, small,
                                                                 args.consumer_timeout)
                rows.append(["librdkafka consumer, 100 B records", fmt_rate(n / dt),
                             f"{n / dt * small_bytes / small / 1e6:.0f}", f"{n / dt * small_bytes / small / limit:.2f}",
                             "-", f"{broker_cpu:.0f}%", f"{bench_cpu:.0f}%"])
    rows.append(["loopback: trivial sendfile server, request/response", fmt_rate(rr_limit / (nbytes / records)),
                 f"{rr_limit / 1e6:.0f}", f"{rr_limit / limit:.2f}",
                 f"{args.partition_max_bytes / rr_limit * 1e3:.1f} / -", "-", "-"])
    rows.append(["loopback: trivial sendfile server, streaming (limit)", fmt_rate(limit / (nbytes / records)),
                 f"{limit / 1e6:.0f}", "1.00", "-", "-", "-"])
    print_table(f"kbroker fetch (one broker, one partition, {nbytes / MiB:.0f} MiB from the page cache; "
                f"load average {os.getloadavg()[0]:.1f})",
                ["scenario", "records/s", "MB/s", "ratio to loopback", "ms/response med / max", "broker CPU",
                 "client CPU"], rows)
    print("targets (anchors.md): fetch >= 1.2 GB/s from page cache (~0.75 of loopback, iperf3 1.6 GB/s); "
          "consumer peers with librdkafka, 100 B records: noida-db 250-540 K rec/s, Tansu 160-940 K rec/s; "
          "Kafka (2014, 6 cores): 940 K rec/s")


if __name__ == "__main__":
    main()
