"""Produce throughput of one kbroker process, with the disk limit measured in the same run.

(a) Pre-built v2 batches (aiokafka's C builder, built once) sent as raw Produce v8 requests (acks=1) over
    several connections, each pipelining a few requests: appended records/s and MB/s of log bytes, and the
    ratio of MB/s to the sequential-write limit of the disk holding the log (N MiB written in 1 MiB blocks then
    fdatasync, like `dd bs=1M conv=fdatasync`). Run once with 100-byte and once with 1 KiB values.
(b) A librdkafka producer (confluent-kafka; linger.ms=5, batch.size ~1 MB, acks=1) sending 100-byte values to
    one partition: records/s.

The broker does not fsync on produce (Kafka's defaults: flush left to the OS), so a short run can beat the
disk; the ratio says how close the broker gets to what the disk could absorb durably. A second limit is measured
after each raw scenario: a pwrite loop appending the same bytes, in the same block size, to as many files, from
the same clean page-cache state ("ratio to page cache": 1.0 means the broker costs nothing beyond the writes).

  .venv/bin/python -m bench.produce            # defaults finish in well under a minute
  .venv/bin/python -m bench.produce --seconds 15 --connections 8 --py-spy /tmp/produce.svg
"""
from __future__ import annotations

import os
import sys
import threading
import time

if __package__ in (None, ""):          # `python bench/produce.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (BenchCluster, CpuMeter, MiB, ProcessCpu, PySpy, RawProducer, bench_parser, build_v2_batch,
                           disk_write_limit, fmt_rate, high_watermark, log, pagecache_write_limit, print_table)


def raw_scenario(cluster: BenchCluster, args, name: str, value_size: int, records_per_batch: int,
                 disk_bps: float, profile: str | None) -> tuple[list, list]:
    topic = f"bench-produce-{value_size}"
    cluster.create_topic(topic, args.partitions)
    batch = build_v2_batch(records_per_batch, value_size)
    log(f"{name}: {args.connections} connections x {args.depth} in flight, {args.partitions} partitions, "
        f"batches of {records_per_batch} x {value_size} B ({len(batch) / 1024:.0f} KiB), {args.seconds:g} s")
    os.sync()       # start with no dirty pages in flight (the page-cache limit below starts the same way)
    # Warm the memory the broker's appends will get: on this VM (virtio-balloon free page reporting) memory
    # freed for a few seconds goes back to the host, and writing into it again runs at 0.5-1 GB/s instead of
    # ~4 GB/s. Pages freed just now are handed out first, so the broker and the limit below both get warm ones.
    cold = pagecache_write_limit(cluster.log_dir, args.warm_mib * MiB, len(batch), args.partitions)
    log(f"{name}: warm-up pwrite of {args.warm_mib} MiB: {cold / 1e6:.0f} MB/s")
    producer = RawProducer(cluster.port, topic, args.partitions, batch, records_per_batch, args.connections,
                           args.depth)
    cpu, client_cpu = CpuMeter(cluster.pid), ProcessCpu()
    with PySpy(cluster.pid, profile, args.py_spy_format):
        def start_meters():
            cpu.start()
            client_cpu.start()
        threading.Timer(args.warmup, start_meters).start()
        batches, dt = producer.run(args.warmup, args.seconds)
        broker_cpu, bench_cpu = cpu.percent(), client_cpu.percent()
    log(f"{name}: batches acknowledged per connection (whole run): {producer.acked}")
    hw = sum(high_watermark(cluster.port, topic, p) for p in range(args.partitions))
    total_acked = sum(producer.acked) * records_per_batch
    if hw != total_acked:
        log(f"WARNING: {topic}: high watermarks sum to {hw} but {total_acked} records were acknowledged")
    cluster.delete_topic(topic)     # drop its dirty pages before the next measurement
    os.sync()
    # the limit: a pwrite loop doing the broker's appends again, flat out (same bytes, block size and number of
    # files), from the same clean state
    written = sum(producer.acked) * len(batch)
    pagecache = pagecache_write_limit(cluster.log_dir, written, len(batch), args.partitions)
    log(f"{name}: page-cache limit {pagecache / 1e6:.0f} MB/s ({written / 2 ** 20:.0f} MiB of "
        f"{len(batch) / 1024:.0f} KiB pwrites over {args.partitions} files)")
    os.sync()
    rps = batches * records_per_batch / dt
    bps = batches * len(batch) / dt
    cpu_us = broker_cpu / 100 * dt / max(1, batches) * 1e6
    return [name, fmt_rate(rps), f"{bps / 1e6:.1f}", f"{bps / disk_bps:.2f}", f"{bps / pagecache:.2f}",
            f"{broker_cpu:.0f}%", f"{cpu_us:.0f}", f"{bench_cpu:.0f}%"], \
        [f"page-cache pwrite, {len(batch) // 1024} KiB blocks, same bytes", "-", f"{pagecache / 1e6:.1f}",
         f"{pagecache / disk_bps:.2f}", "1.00", "-", "-", "-"]


def confluent_scenario(cluster: BenchCluster, args) -> list:
    import gc
    from confluent_kafka import Producer
    topic = "bench-produce-librdkafka"
    cluster.create_topic(topic, 1)
    failed = [0]

    def on_delivery(err, msg):
        if err is not None:
            failed[0] += 1

    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "batch.size": 1000000,
                  "acks": 1, "enable.idempotence": False, "compression.type": "none",
                  "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576,
                  "delivery.report.only.error": True, "on_delivery": on_delivery})
    value = b"x" * 100
    p.produce(topic, value, partition=0)          # warm up: metadata, connection
    p.flush(30)
    log(f"librdkafka producer: 100 B values, one partition, {args.seconds:g} s of produce() then flush()")
    produce = p.produce
    n = 0
    cpu, client_cpu = CpuMeter(cluster.pid).start(), ProcessCpu().start()
    t0 = time.perf_counter()
    deadline = t0 + args.seconds
    while True:
        for _ in range(10000):
            try:
                produce(topic, value, partition=0)
            except BufferError:
                p.poll(0.001)
                continue
            n += 1
        p.poll(0)
        if time.perf_counter() >= deadline:
            break
    left = p.flush(60)
    dt = time.perf_counter() - t0
    broker_cpu, bench_cpu = cpu.percent(), client_cpu.percent()
    if hasattr(p, "close"):
        p.close()
    del p, produce
    gc.collect()
    if left or failed[0]:
        log(f"WARNING: librdkafka: {left} records not delivered, {failed[0]} failed")
    hw = high_watermark(cluster.port, topic, 0)
    if hw != n + 1:
        log(f"WARNING: {topic}: high watermark {hw}, expected {n + 1}")
    rps = (n - failed[0]) / dt
    return ["librdkafka producer, 100 B, linger 5 ms", fmt_rate(rps), f"{rps * 100 / 1e6:.1f}", "-", "-",
            f"{broker_cpu:.0f}%", "-", f"{bench_cpu:.0f}%"]


def main(argv=None) -> None:
    parser = bench_parser("produce", __doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per scenario (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured time before each raw scenario")
    parser.add_argument("--connections", type=int, default=4, help="raw producer connections (default 4)")
    parser.add_argument("--depth", type=int, default=4, help="requests in flight per connection (default 4)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the raw topics (default 4)")
    parser.add_argument("--small-batch", type=int, default=1000, help="100 B records per batch (default 1000)")
    parser.add_argument("--large-batch", type=int, default=512,
                        help="1 KiB records per batch (default 512 ≈ 0.5 MiB; max.message.bytes is ~1 MB)")
    parser.add_argument("--disk-mib", type=int, default=1024,
                        help="MiB written for the disk limit (default 1024; anchors.md's dd wrote 2048; small "
                             "runs are noisy on VMs whose host caches writes)")
    parser.add_argument("--warm-mib", type=int, default=2560,
                        help="MiB written and deleted just before each raw scenario so the broker writes into warm "
                             "memory (default 2560; should exceed what a scenario writes)")
    parser.add_argument("--only", choices=("small", "large", "librdkafka"), action="append",
                        help="run only these scenarios (repeatable)")
    args = parser.parse_args(argv)
    only = set(args.only or ("small", "large", "librdkafka"))

    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop) as cluster:
        log(f"disk limit: writing {args.disk_mib} MiB with fdatasync in {cluster.root}")
        disk = disk_write_limit(cluster.root, args.disk_mib)
        log(f"disk limit: {disk / 1e6:.0f} MB/s")
        rows, limits = [], []
        if "small" in only:
            row, limit = raw_scenario(cluster, args, f"raw Produce v8, 100 B x {args.small_batch}/batch", 100,
                                      args.small_batch, disk, args.py_spy)
            rows.append(row)
            limits.append(limit)
        if "large" in only:
            profile = args.py_spy
            if profile and "small" in only:
                root, ext = os.path.splitext(profile)
                profile = f"{root}-1k{ext}"
            row, limit = raw_scenario(cluster, args, f"raw Produce v8, 1 KiB x {args.large_batch}/batch", 1024,
                                      args.large_batch, disk, profile)
            rows.append(row)
            limits.append(limit)
        if "librdkafka" in only:
            rows.append(confluent_scenario(cluster, args))
    rows += limits
    rows.append(["disk: sequential write + fdatasync", "-", f"{disk / 1e6:.1f}", "1.00", "-", "-", "-", "-"])
    print_table(f"kbroker produce (one broker, acks=1; CPU in % of one core; load average "
                f"{os.getloadavg()[0]:.1f})",
                ["scenario", "records/s", "MB/s", "ratio to disk", "ratio to page cache", "broker CPU",
                 "broker CPU µs/req", "client CPU"], rows)
    print("targets (anchors.md): >= 1 M rec/s of 100 B records in batches; >= 250 MB/s of 1 KiB records "
          "(~0.8 of disk); peers with librdkafka: noida-db 450-705 K rec/s, Tansu 430-590 K rec/s")


if __name__ == "__main__":
    main()
