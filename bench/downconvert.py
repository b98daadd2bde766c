"""Down-conversion cost: old consumers (Fetch v0-v3) reading a partition stored in record format v2.

1. Fill one partition with v2 batches (default 100-byte records, 1000 per batch).
2. Read it whole with raw Fetch v11 (magic 2, zero copy: the limit), Fetch v3 (converted to magic 1) and
   Fetch v1 (converted to magic 0), max_bytes 50 MiB, partition max 10 MiB, one request in flight on one
   connection: records/s, MB/s of what the client received, and the ratio of records/s to the v11 path.
3. In process, over 10 MiB of 1000-record batches (ms per 1000 records): kbroker.records.convert.down_convert to
   magic 1 and to magic 0 with Python's cyclic GC on (as in the broker) and off; its two halves (decoding each
   batch's v2 records into a list, building the legacy message set from such a list); and a streaming
   aiokafka C-codec loop (each record appended as it is decoded, no list) doing the same conversion.

  .venv/bin/python -m bench.downconvert
  .venv/bin/python -m bench.downconvert --records 2000000 --py-spy /tmp/downconvert.svg
"""
from __future__ import annotations

import importlib
import os
import sys
import timeit

if __package__ in (None, ""):          # `python bench/downconvert.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (BenchCluster, Connection, CpuMeter, MiB, ProcessCpu, PySpy, RawProducer, bench_parser,
                           build_v2_batch, fetch_all, fmt_rate, high_watermark, log, print_table)


def in_process(records: int, value_size: int, repeat: int) -> list[list]:
    """ms per `records` records for down_convert (with the cyclic GC on, as in the broker, and off) and its
    parts, and a bare aiokafka loop (best of `repeat` timings). The broker's modules are imported first so
    the GC has a broker-sized heap to walk (a real broker's heap is larger still)."""
    import gc
    importlib.import_module("kbroker.server")   # imported for its heap only: the GC walks a broker-like heap
    from aiokafka.record._crecords import DefaultRecordBatch, LegacyRecordBatchBuilder
    from kbroker.records.batches import CREATE_TIME, v2_records
    from kbroker.records.builder import build_legacy
    from kbroker.records.convert import down_convert
    batch = build_v2_batch(records, value_size)
    # a fetch's worth of batches: the GC cost shows over many batches, not one
    source = batch * max(1, (10 * MiB) // len(batch))
    batches = len(source) // len(batch)
    decoded = v2_records(batch, 0, len(batch), 2 ** 31 - 1)

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
        def convert():
            for _ in down_convert(source, magic, fetch_offset=0, max_bytes=2 ** 31 - 1):
                pass
        total = best(convert, per=batches)
        no_gc = best(convert, gc_on=False, per=batches)
        def decode_all():
            for i in range(batches):
                v2_records(source, i * len(batch), len(batch), 2 ** 31 - 1)

        def build_all():
            for _ in range(batches):
                build_legacy(decoded, magic=magic, codec=0, timestamp_type=CREATE_TIME, log_append_time=-1)
        decode = best(decode_all, per=batches)
        build = best(build_all, per=batches)
        floor = best(bare(magic), per=batches)
        rows.append([f"v2 -> magic {magic}", f"{total:.3f}", f"{no_gc:.3f}", f"{decode:.3f}", f"{build:.3f}",
                     f"{floor:.3f}", fmt_rate(records / total * 1e3)])
    return rows


def main(argv=None) -> None:
    parser = bench_parser("downconvert", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the partition (default 1M)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per record value (default 100)")
    parser.add_argument("--records-per-batch", type=int, default=1000, help="records per v2 batch (default 1000)")
    parser.add_argument("--max-bytes", type=int, default=50 * MiB, help="Fetch max_bytes (v3+; default 50 MiB)")
    parser.add_argument("--partition-max-bytes", type=int, default=10 * MiB,
                        help="Fetch partition_max_bytes (default 10 MiB)")
    parser.add_argument("--rounds", type=int, default=3, help="reads per Fetch version, best reported (default 3)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timings per in-process figure, best reported (default 3)")
    parser.add_argument("--versions", default="11,3,1", help="Fetch versions to run (default 11,3,1)")
    args = parser.parse_args(argv)
    versions = [int(v) for v in args.versions.split(",")]

    log("in-process down_convert timings")
    micro = in_process(args.records_per_batch, args.value_size, args.repeat)

    rows = []
    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop) as cluster:
        topic = "bench-downconvert"
        cluster.create_topic(topic, 1)
        batch = build_v2_batch(args.records_per_batch, args.value_size)
        n_batches = max(1, args.records // args.records_per_batch)
        dt = RawProducer(cluster.port, topic, 1, batch, args.records_per_batch, 2, 4).fill(n_batches)
        records = n_batches * args.records_per_batch
        if high_watermark(cluster.port, topic, 0) != records:
            raise RuntimeError("the partition does not hold the records appended")
        log(f"filled {topic}: {records} records of {args.value_size} B, {n_batches * len(batch) / MiB:.0f} MiB "
            f"in {dt:.1f} s")
        results = {}
        conn = Connection("127.0.0.1", cluster.port, "bench-downconvert", 60.0)
        profiled = False
        for version in versions:
            magic = 2 if version >= 4 else 1 if version >= 2 else 0
            for r in range(args.rounds):
                profile = args.py_spy if args.py_spy and not profiled and version < 4 else None
                if profile:
                    root, ext = os.path.splitext(profile)
                    profile = f"{root}-v{version}{ext}"
                cpu, client_cpu = CpuMeter(cluster.pid).start(), ProcessCpu().start()
                with PySpy(cluster.pid, profile, args.py_spy_format):
                    run = fetch_all(conn, version, topic, 0, records, args.partition_max_bytes, args.max_bytes)
                res = (run.records / run.seconds, run.nbytes / run.seconds, run.median_ms, run.max_ms,
                       cpu.percent(), client_cpu.percent(), magic)
                log(f"Fetch v{version} (magic {magic}) round {r + 1}: {run.records} records, "
                    f"{run.nbytes / MiB:.0f} MiB in {run.seconds:.2f} s ({run.requests} requests, median "
                    f"{run.median_ms:.1f} ms): {res[0] / 1e6:.2f} M rec/s")
                if version not in results or res[0] > results[version][0]:
                    results[version] = res
            profiled = profiled or (args.py_spy and version < 4)
        conn.close()
    base = results.get(11)
    for version in versions:
        rps, bps, med_ms, max_ms, broker_cpu, bench_cpu, magic = results[version]
        what = "zero copy (limit)" if magic == 2 else f"down-converted to magic {magic}"
        rows.append([f"Fetch v{version}, {what}", fmt_rate(rps), f"{bps / 1e6:.0f}",
                     f"{rps / base[0]:.3f}" if base else "-", f"{med_ms:.1f} / {max_ms:.0f}", f"{broker_cpu:.0f}%",
                     f"{bench_cpu:.0f}%"])
    print_table(f"kbroker down-conversion over the wire ({records} records of {args.value_size} B in v2 batches "
                f"of {args.records_per_batch}; load average {os.getloadavg()[0]:.1f})",
                ["fetch", "records/s", "MB/s received", "ratio to v11", "ms/response med / max", "broker CPU",
                 "client CPU"], rows)
    print_table(f"in process, ms per {args.records_per_batch} records of {args.value_size} B, over 10 MiB of "
                f"batches (best of {args.repeat})",
                ["conversion", "down_convert", "same, GC off", "v2_records", "build_legacy",
                 "streaming aiokafka loop", "records/s"],
                micro)
    print("target (anchors.md): down-conversion >= 2 M rec/s; aiokafka.record measured ~0.47 ms per 1000 "
          "records v2 -> magic 1")


if __name__ == "__main__":
    main()
