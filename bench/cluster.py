"""Cluster benchmarks (replication issue): acks=all vs acks=1 with three replicas, and the controller's work
at scale (many partitions): leader re-election after kill -9, controlled shutdown, controller failover.

Runs its own ZooKeeper and three broker processes (`kbroker cluster up` in a temp dir, on free ports) and
prints a table. Figures are wall-clock on this machine; the anchors (Kafka 1.1 with 10K partitions: controlled
shutdown ≈3 s, failover ≈3 s) are printed beside them.

    .venv/bin/python -m bench.cluster [--partitions 10000] [--records 200000]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from kbroker import cluster as dev_cluster  # noqa: E402
from zk import admin as zk_admin  # noqa: E402
from zk.client import KafkaZkClient  # noqa: E402

from bench._common import free_port  # noqa: E402


def consecutive_ports(n: int) -> int:
    """A base port with the n ports from it free (bound and released together)."""
    while True:
        base = free_port()
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()


def wait(predicate, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not reached")


def produce_rate(bootstrap: str, topic: str, acks: str, records: int) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "enable.idempotence": acks == "all"})
    value = b"x" * 100
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % 3)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(300)
    return records / (time.perf_counter() - start)


def states(zk, topic, partitions):
    return zk.get_partition_states([(topic, p) for p in range(partitions)])


def log_time(path: str, pattern: str) -> float | None:
    """Time (epoch seconds) of the last log line matching pattern."""
    found = None
    with open(path, errors="replace") as f:
        for line in f:
            if re.search(pattern, line):
                m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]", line)
                if m:
                    found = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10000, help="partitions of the scale test (RF 2)")
    parser.add_argument("--records", type=int, default=200000, help="records per acks run (100 bytes each)")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's temp directory")
    args = parser.parse_args()

    data = tempfile.mkdtemp(prefix="kbroker-bench-cluster-")
    zk_port, base = free_port(), consecutive_ports(3)
    rows = []
    try:
        state = dev_cluster.up(data, 3, zk_port, base, timeout=120)
        bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])
        zk = KafkaZkClient(state["zookeeper"]["connect"], 30000).start()

        # 1. acks=all vs acks=1, three replicas.
        zk_admin.create_topic(zk, "acks", 3, 3, {"min.insync.replicas": "2"})
        wait(lambda: all(s and len(s.isr) == 3 for s in states(zk, "acks", 3).values()), 60)
        r1 = produce_rate(bootstrap, "acks", "1", args.records)
        rall = produce_rate(bootstrap, "acks", "all", args.records)
        rows.append(("produce acks=1, RF 3 (records/s)", f"{r1:,.0f}", ""))
        rows.append(("produce acks=all, RF 3 (records/s)", f"{rall:,.0f}", f"{rall / r1:.0%} of acks=1 (target ≥ 50%)"))

        # 2. Many partitions: create, then kill -9 the broker leading a third of them.
        n = args.partitions
        t0 = time.monotonic()
        zk_admin.create_topic(zk, "scale", n, 2)
        wait(lambda: len(zk.children("/brokers/topics/scale/partitions")) >= n, 600, 0.2)
        t_states = time.monotonic() - t0
        wait(lambda: all(s and s.leader >= 0 and len(s.isr) == 2 for s in states(zk, "scale", n).values()), 900, 1)
        t_online = time.monotonic() - t0
        rows.append((f"create {n} partitions: state znodes written (s)", f"{t_states:.2f}", ""))
        rows.append((f"create {n} partitions: every one has a leader (s)", f"{t_online:.1f}", ""))

        controller = zk.get_controller_id()
        victim = next(b for b in state["brokers"] if b["id"] != controller)
        led = [p for p, s in states(zk, "scale", n).items() if s.leader == victim["id"]]
        os.kill(victim["pid"], signal.SIGKILL)
        t_kill = time.monotonic()
        wait(lambda: victim["id"] not in zk.get_broker_ids(), 60, 0.02)
        t_gone = time.monotonic() - t_kill
        wait(lambda: all(s.leader not in (victim["id"], -1)
                         for s in zk.get_partition_states(led).values()), 600, 0.05)
        t_reelect = time.monotonic() - t_kill
        rows.append((f"kill -9 of a broker leading {len(led)}: its znode gone (s)", f"{t_gone:.2f}",
                     "session timeout 6 s"))
        rows.append((f"kill -9: all {len(led)} have new leaders (s)", f"{t_reelect:.2f}",
                     f"{t_reelect - t_gone:.2f} s after the znode went (target: timeout + 1 s)"))

        # Restart it, let it catch up and take back its preferred leaderships.
        log_dir = os.path.join(data, "logs")
        with open(os.path.join(log_dir, f"broker-{victim['id']}.log"), "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "kbroker.cli", "start", victim["config"]], stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        victim["pid"] = proc.pid
        wait(lambda: all(len(s.isr) == 2 for s in states(zk, "scale", n).values()), 900, 1)
        zk.create_recursive("/admin/preferred_replica_election",
                            b'{"version":1,"partitions":[' + b",".join(
                                b'{"topic":"scale","partition":%d}' % p for p in range(n)) + b"]}")
        wait(lambda: zk.exists("/admin/preferred_replica_election") is None, 600, 0.2)
        led = [p for p, s in states(zk, "scale", n).items() if s.leader == victim["id"]]

        # 3. Controlled shutdown of that broker (SIGTERM → leaders moved → process exits).
        t0 = time.time()
        os.kill(victim["pid"], signal.SIGTERM)
        proc.wait(600)
        t_exit = time.time() - t0
        moved = log_time(os.path.join(log_dir, f"broker-{victim['id']}.log"), "controlled shutdown succeeded")
        rows.append((f"controlled shutdown of a broker leading {len(led)}: leaders moved (s)",
                     f"{moved - t0:.2f}" if moved else "failed", "Kafka 1.1: ≈3 s for 10K leaders"))
        rows.append(("  ... and the process exited (s)", f"{t_exit:.2f}", "includes flushing every log"))

        # 4. Controller failover: kill -9 the controller, time until the new one has loaded its context.
        controller = zk.get_controller_id()
        ctrl = next(b for b in state["brokers"] if b["id"] == controller)
        os.kill(ctrl["pid"], signal.SIGKILL)
        t0 = time.time()
        new = wait(lambda: (c := zk.get_controller_id()) not in (None, controller) and c, 120, 0.02)
        path = os.path.join(log_dir, f"broker-{new}.log")
        ready = wait(lambda: (t := log_time(path, rf"controller {new} ready")) and t > t0 and t, 600, 0.2)
        elected = log_time(path, rf"broker {new} elected controller")
        rows.append((f"controller failover with {n + 3} partitions: context load (s)", f"{ready - elected:.2f}",
                     "Kafka 1.1 halved its ≈(O(partitions)) load; anchor 3 s"))
        zk.close()
    finally:
        dev_cluster.down(data)
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'figure':>12}  note")
    for name, figure, note in rows:
        print(f"{name:<{width}}  {figure:>12}  {note}")


if __name__ == "__main__":
    main()
