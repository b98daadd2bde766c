"""Transactional produce and read_committed consumption (transactions issue), against three brokers.

Runs its own ZooKeeper and three broker processes (kbroker.cluster's launcher, free ports, temp dir), creates
one topic of `--partitions` (3) partitions with RF 3 and min.insync.replicas 2, and measures in the same run:

1. **idempotent producer**: confluent-kafka, acks=all, enable.idempotence, 100 B values, records spread over
   the partitions, `produce()` in a loop for `--seconds`, then `flush()`; records/s up to the end of the flush.
2. **idempotent producer, flush every `--per-txn`**: the same producer, `--per-txn` records then `flush()`,
   again and again: the transactional loop without the transaction (what a commit costs beyond waiting for
   the records' acks).
3. **transactional producer**: the same producer settings plus a transactional.id, `--per-txn` (100) records
   per transaction (begin, produce, commit) for `--seconds`; records/s and transactions/s up to the last
   commit. The ratio to (1) is the issue's figure (target ≥ 0.7); the ratio to (2) is the cost of the
   transaction protocol itself. Then `--producers` (4) such producers at once (distinct transactional ids, one
   thread each), their total records/s and transactions/s.
4. **consumers** of the transactional topic: read_uncommitted and read_committed, each `assign()` of every
   partition from offset 0 until all committed records are in (bounded by `--seconds` × 3); ratio
   read_committed ÷ read_uncommitted.

`--py-spy FILE.svg` profiles every broker during the transactional run into FILE-broker-N.svg.

    .venv/bin/python -m bench.transactions [--seconds 10] [--per-txn 100] [--producers 4] [--partitions 3]
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench._common import (PySpy, bench_parser, consume_count, create_replicated_topic, fmt_rate, log,  # noqa: E402
                           print_table, three_brokers)

VALUE = b"x" * 100


def producer_config(bootstrap: str) -> dict:
    """What both producers share: acks=all and idempotence, batching as bench.cluster's acks=all run."""
    return {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000}


def idempotent_rate(bootstrap: str, topic: str, partitions: int, seconds: float) -> tuple[int, float]:
    """(records delivered, seconds up to the end of the flush) of an idempotent producer run for `seconds`."""
    from confluent_kafka import Producer
    p = Producer(producer_config(bootstrap))
    failed = []
    start = time.perf_counter()
    end, i = start + seconds, 0
    while time.perf_counter() < end:
        for _ in range(1000):
            try:
                p.produce(topic, value=VALUE, partition=i % partitions,
                          on_delivery=lambda err, _m: err is not None and failed.append(err))
                i += 1
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    if p.flush(120) or failed:
        raise RuntimeError(f"idempotent producer: {len(failed)} failed deliveries {failed[:3]}")
    return i, time.perf_counter() - start


def flushed_rate(bootstrap: str, topic: str, partitions: int, seconds: float, per_flush: int) -> tuple[int, int, float]:
    """(records delivered, flushes, seconds) of an idempotent producer that flushes every `per_flush` records."""
    from confluent_kafka import Producer
    p = Producer(producer_config(bootstrap))
    failed = []
    start = time.perf_counter()
    end, i, flushes = start + seconds, 0, 0
    while time.perf_counter() < end:
        for _ in range(per_flush):
            p.produce(topic, value=VALUE, partition=i % partitions,
                      on_delivery=lambda err, _m: err is not None and failed.append(err))
            i += 1
        if p.flush(60) or failed:
            raise RuntimeError(f"idempotent producer: {len(failed)} failed deliveries {failed[:3]}")
        flushes += 1
    return i, flushes, time.perf_counter() - start


def transactional_rate(bootstrap: str, topic: str, partitions: int, seconds: float, per_txn: int,
                       producers: int = 1) -> tuple[int, int, float]:
    """(records committed, transactions committed, seconds up to the last commit) of `producers` transactional
    producers (one thread each: librdkafka's blocking calls release the GIL) committing `per_txn` records per
    transaction for `seconds`. init_transactions is not timed."""
    from confluent_kafka import Producer
    clients = [Producer({**producer_config(bootstrap), "transactional.id": f"bench-txn-{producers}-{n}"})
               for n in range(producers)]
    for p in clients:
        p.init_transactions(60)
    results: list[tuple[int, int, float]] = []
    start = time.perf_counter()
    threads = [threading.Thread(target=lambda p=p: results.append(
        _commit_loop(p, topic, partitions, start + seconds, per_txn))) for p in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(results) != producers:
        raise RuntimeError("a transactional producer failed (see its traceback above)")
    return sum(r[0] for r in results), sum(r[1] for r in results), max(r[2] for r in results) - start


def _commit_loop(p, topic: str, partitions: int, end: float, per_txn: int) -> tuple[int, int, float]:
    """(records, transactions, time.perf_counter() after the last commit) of one producer until `end`."""
    txns = i = 0
    while time.perf_counter() < end:
        p.begin_transaction()
        for _ in range(per_txn):
            p.produce(topic, value=VALUE, partition=i % partitions)
            i += 1
        p.commit_transaction(60)
        txns += 1
    return i, txns, time.perf_counter()


def consume_rate(bootstrap: str, topic: str, partitions: int, isolation: str, records: int,
                 timeout: float) -> tuple[int, float]:
    """(records read, seconds) of a consumer assigned every partition from offset 0 until `records` are in."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        start = time.perf_counter()
        n = consume_count(c, records, start + timeout)
        return n, time.perf_counter() - start
    finally:
        c.close()


def main() -> None:
    parser = bench_parser("transactions", __doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each producer run")
    parser.add_argument("--per-txn", type=int, default=100, help="records per transaction")
    parser.add_argument("--producers", type=int, default=4,
                        help="transactional producers of the second transactional run (one thread each)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of each topic (RF 3, min ISR 2)")
    args = parser.parse_args()

    rows = []
    with three_brokers(args.tmp_dir, args.keep, args.broker_prop, "kbroker-bench-txn-") as state:
        bootstrap = state["bootstrap"]
        for topic in ("idempotent", "transactional"):
            create_replicated_topic(state, topic, args.partitions, {"min.insync.replicas": "2"})
        load = os.getloadavg()[0]

        log(f"idempotent producer for {args.seconds:g} s")
        n_idem, t_idem = idempotent_rate(bootstrap, "idempotent", args.partitions, args.seconds)
        log(f"idempotent producer for {args.seconds:g} s, flush() every {args.per_txn} records")
        n_flush, flushes, t_flush = flushed_rate(bootstrap, "idempotent", args.partitions, args.seconds,
                                                 args.per_txn)
        log(f"transactional producer for {args.seconds:g} s, {args.per_txn} records per transaction")
        with contextlib.ExitStack() as profiles:
            if args.py_spy:     # every broker, during the transactional run: FILE-broker-N.svg
                root, ext = os.path.splitext(args.py_spy)
                for b in state["brokers"]:
                    profiles.enter_context(PySpy(b["pid"], f"{root}-broker-{b['id']}{ext}", args.py_spy_format))
            n_txn, txns, t_txn = transactional_rate(bootstrap, "transactional", args.partitions, args.seconds,
                                                    args.per_txn)
        log(f"{args.producers} transactional producers for {args.seconds:g} s")
        n_many, txns_many, t_many = transactional_rate(bootstrap, "transactional", args.partitions, args.seconds,
                                                       args.per_txn, args.producers)
        r_idem, r_flush, r_txn = n_idem / t_idem, n_flush / t_flush, n_txn / t_txn
        rows.append(["idempotent producer, acks=all", f"{n_idem:,}", f"{t_idem:.1f}", fmt_rate(r_idem), "", "1.00",
                     ""])
        rows.append([f"idempotent, flush() every {args.per_txn}", f"{n_flush:,}", f"{t_flush:.1f}",
                     fmt_rate(r_flush), f"({flushes / t_flush:,.1f})", f"{r_flush / r_idem:.2f}", "1.00"])
        rows.append([f"transactional producer, {args.per_txn}/txn", f"{n_txn:,}", f"{t_txn:.1f}", fmt_rate(r_txn),
                     f"{txns / t_txn:,.1f}", f"{r_txn / r_idem:.2f} (target ≥ 0.7)", f"{r_txn / r_flush:.2f}"])
        rows.append([f"{args.producers} transactional producers, {args.per_txn}/txn", f"{n_many:,}", f"{t_many:.1f}",
                     fmt_rate(n_many / t_many), f"{txns_many / t_many:,.1f}", f"{n_many / t_many / r_idem:.2f}",
                     f"{n_many / t_many / r_flush:.2f}"])
        committed = n_txn + n_many

        reads = {}
        for isolation in ("read_uncommitted", "read_committed"):
            log(f"{isolation} consumer over the {committed:,} committed records")
            reads[isolation] = consume_rate(bootstrap, "transactional", args.partitions, isolation, committed,
                                            args.seconds * 3)
        base_rate = reads["read_uncommitted"][0] / reads["read_uncommitted"][1]
        for isolation, (n, t) in reads.items():
            note = "" if n == committed else f" (only {n:,} of {committed:,})"
            rows.append([f"consumer {isolation}{note}", f"{n:,}", f"{t:.1f}", fmt_rate(n / t), "",
                         f"{n / t / base_rate:.2f}", ""])
    print_table(f"Transactions, 3 brokers, RF 3, min ISR 2, {args.partitions} partitions, 100 B values "
                f"(load average {load:.2f} at start)",
                ["scenario", "records", "seconds", "records/s", "txn/s", "ratio", "ratio to flush"], rows)


if __name__ == "__main__":
    main()
