"""Down-conversion cost: old consumers (Fetch v0-v3) reading a partition stored in record format v2.

1. Fill partitions with v2 batches (default 1 M records of 100 B, 1000 per batch): one per cold round, one per
   concurrency case.
2. One consumer, one request in flight, max_bytes 50 MiB, partition max 10 MiB: raw Fetch v11 (magic 2, zero
   copy: the limit); Fetch v3 (magic 1) and Fetch v1 (magic 0) each reading a partition nobody read before
   (the broker converts every batch: best of --rounds partitions) and then the last one again (served from the
   broker's conversion cache, `down.conversion.cache.bytes`, here --cache-mib): records/s, MB/s received,
   broker CPU, ratio to v11 and to the 2 M rec/s target.
3. 1, 3 and 10 concurrent 0.10-era consumers (raw Fetch v2, magic 1, each on its own connection and thread)
   reading the same fresh partition from offset 0 to the end: records/s delivered in all, broker CPU seconds
   for the case, and that CPU as a ratio to the one-consumer case (target: 10 consumers <= 1.5x one).
4. In process, over 10 MiB of 1000-record batches (ms per 1000 records): kbroker.records.convert.down_convert
   converting (a new cache each time) with Python's cyclic GC on (as in the broker) and off, the same read
   served from the cache, and a bare streaming aiokafka C-codec loop (the floor of a converter built on it).

  .venv/bin/python -m bench.downconvert
  .venv/bin/python -m bench.downconvert --records 2000000 --py-spy /tmp/downconvert.svg
"""
from __future__ import annotations

import importlib
import os
import sys
import threading
import time
import timeit

if __package__ in (None, ""):          # `python bench/downconvert.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (BenchCluster, Connection, CpuMeter, MiB, ProcessCpu, PySpy, RawProducer, bench_parser,
                           build_v2_batch, fetch_all, fmt_rate, high_watermark, log, print_table)

TARGET_RATE = 2e6          # records/s (issue 15)
TARGET_CPU_RATIO = 1.5     # broker CPU of 10 consumers / of one


def in_process(records: int, value_size: int, repeat: int) -> list[list]:
    """ms per `records` records for down_convert converting (with the cyclic GC on, as in the broker, and off),
    from its cache, and a bare aiokafka loop (best of `repeat` timings). The broker's modules are imported
    first so the GC has a broker-sized heap to walk (a real broker's heap is larger still)."""
    import gc
    importlib.import_module("kbroker.server")   # imported for its heap only: the GC walks a broker-like heap
    from aiokafka.record._crecords import DefaultRecordBatch, LegacyRecordBatchBuilder
    from kbroker.records.convert import ConversionCache, down_convert
    batch = build_v2_batch(records, value_size)
    # a fetch's worth of batches: the GC cost shows over many batches, not one
    source = batch * max(1, (10 * MiB) // len(batch))
    batches = len(source) // len(batch)

    def read(position, length):
        return source[position:position + length]

    def best(fn, gc_on: bool = True, per: int = 1) -> float:
        # timeit turns the GC off by default: turn it back on, as it is in the broker
        t = timeit.Timer(fn, setup="import gc; gc.enable()" if gc_on else "import gc; gc.disable()")
        n = max(1, int(0.1 / max(t.timeit(1), 1e-6)))     # ~0.1 s per timing
        try:
            return min(t.repeat(repeat, n)) / n / per * 1e3
        finally:
            gc.enable()

    def bare(magic):
        def run():
            view = memoryview(source)
            for i in range(batches):
                b = LegacyRecordBatchBuilder(magic, 0, 2 ** 31 - 1)
                append = b.append
                for r in DefaultRecordBatch(view[i * len(batch):(i + 1) * len(batch)]):
                    append(r.offset, r.timestamp, r.key, r.value)
                b.build()
        return run

    rows = []
    for magic in (1, 0):
        def convert(cache=None):
            down_convert(read, 1, 0, len(source), magic, fetch_offset=0, max_bytes=2 ** 31 - 1,
                         cache=ConversionCache(0) if cache is None else cache)
        warm = ConversionCache(1 << 30)
        convert(warm)
        total = best(convert, per=batches)
        no_gc = best(convert, gc_on=False, per=batches)
        cached = best(lambda: convert(warm), per=batches)
        floor = best(bare(magic), per=batches)
        rows.append([f"v2 -> magic {magic}", f"{total:.3f}", f"{no_gc:.3f}", f"{cached * 1e3:.1f} µs", f"{floor:.3f}",
                     fmt_rate(records / total * 1e3), f"{records / total * 1e3 / TARGET_RATE:.2f}"])
    return rows


def fill(cluster, topic: str, batch: bytes, per_batch: int, n_batches: int) -> None:
    cluster.create_topic(topic, 1)
    dt = RawProducer(cluster.port, topic, 1, batch, per_batch, 2, 4).fill(n_batches)
    if high_watermark(cluster.port, topic, 0) != n_batches * per_batch:
        raise RuntimeError(f"{topic} does not hold the records appended")
    log(f"filled {topic}: {n_batches * per_batch} records, {n_batches * len(batch) / MiB:.0f} MiB in {dt:.1f} s")


def read_once(cluster, conn, version: int, topic: str, records: int, args, profile: str | None):
    """One consumer reading topic whole: (records/s, MB/s, median ms, max ms, broker CPU %, bench CPU %, records
    per broker CPU second)."""
    cpu, client_cpu = CpuMeter(cluster.pid).start(), ProcessCpu().start()
    with PySpy(cluster.pid, profile, args.py_spy_format):
        run = fetch_all(conn, version, topic, 0, records, args.partition_max_bytes, args.max_bytes)
    if run.records != records:
        raise RuntimeError(f"Fetch v{version} of {topic}: {run.records} records, not {records}")
    return (run.records / run.seconds, run.nbytes / run.seconds, run.median_ms, run.max_ms, cpu.percent(),
            client_cpu.percent(), run.records / max(cpu.seconds(), 0.01))


def concurrent(cluster, topic: str, records: int, consumers: int, version: int, args):
    """`consumers` threads, each with its own connection, reading topic whole at once: (records/s delivered in
    all, wall seconds, broker CPU seconds)."""
    conns = [Connection("127.0.0.1", cluster.port, f"bench-old-consumer-{i}", 120.0) for i in range(consumers)]
    errors: list[str] = []
    start = threading.Barrier(consumers + 1)

    def consume(conn):
        start.wait()
        try:
            run = fetch_all(conn, version, topic, 0, records, args.partition_max_bytes, args.max_bytes)
            if run.records != records:
                errors.append(f"{run.records} records, not {records}")
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=consume, args=(c,), daemon=True) for c in conns]
    for t in threads:
        t.start()
    cpu = CpuMeter(cluster.pid)
    start.wait()
    cpu.start()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    used = cpu.seconds()
    for c in conns:
        c.close()
    if errors:
        raise RuntimeError(f"{consumers} consumers of {topic}: {errors[0]}")
    return consumers * records / seconds, seconds, used


def main(argv=None) -> None:
    parser = bench_parser("downconvert", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per partition (default 1M)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per record value (default 100)")
    parser.add_argument("--records-per-batch", type=int, default=1000, help="records per v2 batch (default 1000)")
    parser.add_argument("--max-bytes", type=int, default=50 * MiB, help="Fetch max_bytes (v3+; default 50 MiB)")
    parser.add_argument("--partition-max-bytes", type=int, default=10 * MiB,
                        help="Fetch partition_max_bytes (default 10 MiB)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="reads per Fetch version, each converting a partition not read before; best "
                             "reported (default 3)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timings per in-process figure, best reported (default 3)")
    parser.add_argument("--versions", default="11,3,1", help="Fetch versions to run (default 11,3,1)")
    parser.add_argument("--consumers", default="1,3,10", help="concurrent consumer counts (default 1,3,10)")
    parser.add_argument("--consumer-version", type=int, default=2,
                        help="Fetch version of the concurrent consumers (default 2: kafka-python (0, 10))")
    parser.add_argument("--cache-mib", type=int, default=256,
                        help="the broker's down.conversion.cache.bytes in MiB (default 256: one converted "
                             "partition fits; 0 turns the cache off)")
    args = parser.parse_args(argv)
    versions = [int(v) for v in args.versions.split(",")]
    counts = [int(n) for n in args.consumers.split(",") if n]

    log("in-process down_convert timings")
    micro = in_process(args.records_per_batch, args.value_size, args.repeat)

    rows, crows = [], []
    props = [f"down.conversion.cache.bytes={args.cache_mib * MiB}", *args.broker_prop]
    with BenchCluster(args.tmp_dir, args.keep, props) as cluster:
        batch = build_v2_batch(args.records_per_batch, args.value_size)
        n_batches = max(1, args.records // args.records_per_batch)
        records = n_batches * args.records_per_batch
        cold = [f"bench-downconvert-{r}" for r in range(args.rounds)]
        shared = {n: f"bench-downconvert-x{n}" for n in counts}
        for topic in cold + list(shared.values()):
            fill(cluster, topic, batch, args.records_per_batch, n_batches)
        conn = Connection("127.0.0.1", cluster.port, "bench-downconvert", 120.0)
        results = {}
        for version in versions:
            magic = 2 if version >= 4 else 1 if version >= 2 else 0
            profile = None
            if args.py_spy and version < 4:
                root, ext = os.path.splitext(args.py_spy)
                profile = f"{root}-v{version}{ext}"
            for kind in ("read", "cached") if magic < 2 else ("read",):
                topics = cold if kind == "read" else [cold[-1]] * args.rounds
                for r, topic in enumerate(topics):
                    res = read_once(cluster, conn, version, topic, records, args,
                                    profile if r == 0 and kind == "read" else None)
                    log(f"Fetch v{version} (magic {magic}) {kind} {topic}: {res[0] / 1e6:.2f} M rec/s, median "
                        f"{res[2]:.1f} ms, broker CPU {res[4]:.0f}%")
                    if (version, kind) not in results or res[0] > results[version, kind][0]:
                        results[version, kind] = res
        conn.close()
        base = results.get((11, "read"))
        for (version, kind), (rps, bps, med_ms, max_ms, broker_cpu, bench_cpu, per_cpu) in results.items():
            magic = 2 if version >= 4 else 1 if version >= 2 else 0
            what = ("zero copy (limit)" if magic == 2 else f"to magic {magic}, converting" if kind == "read"
                    else f"to magic {magic}, from the cache")
            rows.append([f"Fetch v{version}, {what}", fmt_rate(rps), f"{bps / 1e6:.0f}",
                         f"{rps / base[0]:.3f}" if base else "-",
                         f"{rps / TARGET_RATE:.2f}" if magic < 2 else "-", fmt_rate(per_cpu),
                         f"{per_cpu / TARGET_RATE:.2f}" if magic < 2 else "-",
                         f"{med_ms:.1f} / {max_ms:.0f}", f"{broker_cpu:.0f}%", f"{bench_cpu:.0f}%"])

        one = None
        for n in counts:
            rps, seconds, used = concurrent(cluster, shared[n], records, n, args.consumer_version, args)
            log(f"{n} concurrent Fetch v{args.consumer_version} consumers: {rps / 1e6:.2f} M rec/s in all, "
                f"{seconds:.2f} s, broker CPU {used:.2f} s")
            one = used if n == 1 else one
            ratio = used / one if one else None
            crows.append([str(n), fmt_rate(rps), fmt_rate(rps / n), f"{seconds:.2f}", f"{used:.2f}",
                          f"{used / (n * records) * 1e9:.0f}", f"{ratio:.2f}" if ratio else "-",
                          f"{ratio / TARGET_CPU_RATIO:.2f}" if ratio and n == 10 else "-"])

    load = os.getloadavg()[0]
    print_table(f"kbroker down-conversion over the wire, one consumer ({records} records of {args.value_size} B "
                f"in v2 batches of {args.records_per_batch}; cache {args.cache_mib} MiB; load average {load:.1f})",
                ["fetch", "records/s", "MB/s received", "ratio to v11", "ratio to 2 M/s", "records per broker CPU s",
                 "its ratio to 2 M", "ms/response med / max", "broker CPU", "client CPU"], rows)
    print_table(f"concurrent 0.10-era consumers (raw Fetch v{args.consumer_version}) of one partition of "
                f"{records} records, from offset 0 (load average {os.getloadavg()[0]:.1f})",
                ["consumers", "records/s in all", "per consumer", "seconds", "broker CPU s",
                 "broker CPU ns/record delivered", "CPU ratio to 1", "ratio to the 1.5 target"], crows)
    print_table(f"in process, ms per {args.records_per_batch} records of {args.value_size} B, over 10 MiB of "
                f"batches (best of {args.repeat})",
                ["conversion", "down_convert", "same, GC off", "from the cache", "streaming aiokafka loop",
                 "records/s converting", "ratio to 2 M/s"], micro)
    print(f"targets (issue 15): down-conversion >= 2 M rec/s; 10 concurrent old consumers cost <= "
          f"{TARGET_CPU_RATIO}x the broker CPU of one")


if __name__ == "__main__":
    main()
