"""Cluster benchmarks (replication issue): acks=all vs acks=1 with three replicas, and the controller's work
at scale (many partitions): leader re-election after kill -9, controlled shutdown, controller failover.

Runs its own ZooKeeper and three broker processes (`kbroker cluster up` in a temp dir, on free ports) and
prints a table. Figures are wall-clock on this machine; the anchors (Kafka 1.1 with 10K partitions: controlled
shutdown ≈3 s, failover ≈3 s) are printed beside them.

    .venv/bin/python -m bench.cluster [--partitions 10000] [--records 1000000] [--py-spy DIR]
                                      [--phases acks,visible,scale] [--visible-topics 20]

The "visible" phase creates topics one by one with CreateTopics (to the controller, as admin clients do) and
times from each answer until every broker lists the topic with a leader for each partition in Metadata, each
broker polled in turn on its own connection (Sarama asks a random broker right after creating).

Before each timed phase the cluster is let settle: every live broker serves (Metadata) the leaders and ISRs
ZooKeeper holds, so a phase does not pay for the brokers still applying the previous one. Each phase's leader
wait polls one partition (the controller writes its states in partition order) and then checks them all, so
the bench's own ZooKeeper reads stay light. With --py-spy, every broker that lives through a phase is profiled
during it (DIR/<phase>-broker-<id>.txt, collapsed stacks by default).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from kbroker import cluster as dev_cluster  # noqa: E402
from kbroker.cluster import BrokerProcess, free_port, free_port_range, wait_until  # noqa: E402
from zk import admin as zk_admin  # noqa: E402
from zk.client import KafkaZkClient  # noqa: E402

from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.metadata import MetadataRequest  # noqa: E402

from bench._common import PySpy, settle, states, wait_new_leaders  # noqa: E402
from kbroker.protocol.client import Connection  # noqa: E402


def produce_rate(bootstrap: str, topic: str, acks: str, records: int) -> float:
    """Records/s of one librdkafka producer (idempotent with acks=all), from its first delivered batch on: an
    idempotent producer's start waits for its producer id, ≈ 0.5 s when librdkafka's PID timer fires first
    ("Coordinator not up", client side), which would otherwise be half of a short acks=all run."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "enable.idempotence": acks == "all"})
    value = b"x" * 100
    for i in range(3):
        p.produce(topic, value=value, partition=i)
    p.flush(30)
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


def create_to_visible(brokers, controller: int, topics: int, prefix: str, partitions: int = 3) -> list[float]:
    """Seconds from each CreateTopics answer until every broker lists the topic with leaders in Metadata."""
    conns = {b["id"]: Connection("127.0.0.1", b["port"], "bench-cluster", 30) for b in brokers}
    T = CreateTopicsRequest.CreatableTopic
    lags = []
    try:
        for i in range(topics):
            name = f"visible-{prefix}-{i}"
            answer = conns[controller].send(CreateTopicsRequest(version=4, timeout_ms=30000, validate_only=False,
                                                                topics=[T(name=name, num_partitions=partitions,
                                                                          replication_factor=3, assignments=[],
                                                                          configs=[])]))
            if answer.topics[0].error_code:
                raise RuntimeError(f"CreateTopics {name}: error {answer.topics[0].error_code}")
            answered = time.monotonic()
            waiting = set(conns)
            while waiting:
                for b in sorted(waiting):
                    meta = conns[b].send(MetadataRequest(version=1, topics=[
                        MetadataRequest.MetadataRequestTopic(name=name)]))
                    t = meta.topics[0]
                    if t.error_code == 0 and len(t.partitions) == partitions and \
                            all(p.leader_id >= 0 for p in t.partitions):
                        waiting.discard(b)
            lags.append(time.monotonic() - answered)
    finally:
        for c in conns.values():
            c.close()
    return lags


def visible_row(rows: list, brokers, zk, topics: int, beside: str, prefix: str) -> None:
    lags = sorted(create_to_visible(brokers, zk.get_controller_id(), topics, prefix))
    rows.append((f"CreateTopics answered -> every broker lists it{beside}: p50 / max of {topics} (ms)",
                 f"{lags[len(lags) // 2] * 1000:.1f} / {lags[-1] * 1000:.1f}", "Kafka: a few ms"))


PROFILE_SUFFIX = {"raw": "txt", "speedscope": "json", "flamegraph": "svg"}


def profiled(args, phase: str, brokers) -> contextlib.ExitStack:
    """py-spy on each broker during a phase (nothing without --py-spy)."""
    stack = contextlib.ExitStack()
    if args.py_spy:
        for b in brokers:
            out = os.path.join(args.py_spy, f"{phase}-broker-{b['id']}.{PROFILE_SUFFIX[args.py_spy_format]}")
            stack.enter_context(PySpy(b["pid"], out, args.py_spy_format, rate=100))
    return stack


def log_time(path: str, pattern: str, since: int = 0) -> float | None:
    """Time (epoch seconds) of the last log line matching pattern, from byte offset `since` on (broker logs grow
    large: polling them whole would load the box during the phase being timed)."""
    found = None
    with open(path, errors="replace") as f:
        f.seek(since)
        for line in f:
            if re.search(pattern, line):
                m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]", line)
                if m:
                    found = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
    return found


def scale_phases(args, zk, state: dict, data: str, rows: list) -> None:
    """Many partitions: create them, kill -9 a broker, controlled shutdown, controller failover."""

    # 2. Many partitions: create, then kill -9 the broker leading a third of them.
    n = args.partitions
    with profiled(args, "create", state["brokers"]):
        t0 = time.monotonic()
        zk_admin.AdminZkClient(zk).create_topic("scale", partitions=n, replication_factor=2)
        wait_until(lambda: len(zk.children("/brokers/topics/scale/partitions")) >= n, 600, 0.2)
        t_states = time.monotonic() - t0
        wait_until(lambda: all(s and s.leader >= 0 and len(s.isr) == 2 for s in states(zk, "scale", n).values()),
                   900, 1)
        t_online = time.monotonic() - t0
        t_served = settle(zk, state["brokers"], "scale", n) - t0
    rows.append((f"create {n} partitions: state znodes written (s)", f"{t_states:.2f}", ""))
    rows.append((f"create {n} partitions: every one has a leader (s)", f"{t_online:.1f}", ""))
    rows.append((f"create {n} partitions: every broker serves them (s)", f"{t_served:.1f}", ""))
    if "visible" in args.phases:
        visible_row(rows, state["brokers"], zk, args.visible_topics, f" beside {n} partitions", "scale")

    controller = zk.get_controller_id()
    victim = next(b for b in state["brokers"] if b["id"] != controller)
    led = [p for p, s in states(zk, "scale", n).items() if s.leader == victim["id"]]
    survivors = [b for b in state["brokers"] if b is not victim]
    with profiled(args, "kill", survivors):
        os.kill(victim["pid"], signal.SIGKILL)
        t_kill = time.monotonic()
        wait_until(lambda: victim["id"] not in zk.get_broker_ids(), 60, 0.02)
        t_gone = time.monotonic() - t_kill
        t_reelect = wait_new_leaders(zk, led, {victim["id"]}, 600) - t_kill
        t_served = settle(zk, survivors, "scale", n) - t_kill
    rows.append((f"kill -9 of a broker leading {len(led)}: its znode gone (s)", f"{t_gone:.2f}",
                 "session timeout 6 s"))
    rows.append((f"kill -9: all {len(led)} have new leaders (s)", f"{t_reelect:.2f}",
                 f"{t_reelect - t_gone:.2f} s after the znode went (target: timeout + 1 s)"))
    rows.append(("  ... and the survivors serve the new leaders and ISRs (s)", f"{t_served:.2f}",
                 f"{t_served - t_gone:.2f} s after the znode went"))

    # Restart it, let it catch up and take back its preferred leaderships.
    log_dir = os.path.join(data, "logs")
    restarted = BrokerProcess(victim["id"], victim["config"], victim["port"],
                              os.path.join(log_dir, f"broker-{victim['id']}.log"), detach=True).start()
    victim["pid"] = restarted.pid
    wait_until(lambda: all(len(s.isr) == 2 for s in states(zk, "scale", n).values()), 900, 1)
    zk.create_recursive("/admin/preferred_replica_election",
                        b'{"version":1,"partitions":[' + b",".join(
                            b'{"topic":"scale","partition":%d}' % p for p in range(n)) + b"]}")
    wait_until(lambda: zk.exists("/admin/preferred_replica_election") is None, 600, 0.2)
    led = [p for p, s in states(zk, "scale", n).items() if s.leader == victim["id"]]
    settle(zk, state["brokers"], "scale", n)

    # 3. Controlled shutdown of that broker (SIGTERM → leaders moved → process exits).
    victim_log = os.path.join(log_dir, f"broker-{victim['id']}.log")
    since = os.path.getsize(victim_log)
    with profiled(args, "shutdown", state["brokers"]):
        t0 = time.time()
        os.kill(victim["pid"], signal.SIGTERM)
        restarted.proc.wait(600)
        t_exit = time.time() - t0
    moved = log_time(victim_log, "controlled shutdown succeeded", since)
    rows.append((f"controlled shutdown of a broker leading {len(led)}: leaders moved (s)",
                 f"{moved - t0:.2f}" if moved else "failed", "Kafka 1.1: ≈3 s for 10K leaders"))
    rows.append(("  ... and the process exited (s)", f"{t_exit:.2f}", "includes flushing every log"))

    # 4. Controller failover: kill -9 the controller, time until the new one has loaded its context.
    settle(zk, survivors, "scale", n)
    controller = zk.get_controller_id()
    ctrl = next(b for b in state["brokers"] if b["id"] == controller)
    sizes = {b["id"]: os.path.getsize(os.path.join(log_dir, f"broker-{b['id']}.log")) for b in survivors}
    with profiled(args, "failover", [b for b in survivors if b is not ctrl]):
        os.kill(ctrl["pid"], signal.SIGKILL)
        t0 = time.time()
        new = wait_until(lambda: (c := zk.get_controller_id()) not in (None, controller) and c, 120, 0.02)
        path = os.path.join(log_dir, f"broker-{new}.log")
        ready = wait_until(lambda: log_time(path, rf"controller {new} ready", sizes[new]), 600, 0.2)
    elected = log_time(path, rf"broker {new} elected controller", sizes[new])
    rows.append((f"controller failover with {n + 3} partitions: context load (s)", f"{ready - elected:.2f}",
                 "Kafka 1.1 halved its ≈(O(partitions)) load; anchor 3 s"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10000, help="partitions of the scale test (RF 2)")
    parser.add_argument("--records", type=int, default=1000000, help="records per acks run (100 bytes each)")
    parser.add_argument("--phases", default="acks,visible,scale",
                        help="comma-separated: acks (acks=all vs 1), visible (create-to-visible), scale (the rest)")
    parser.add_argument("--visible-topics", type=int, default=20, help="topics created by the visible phase")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's temp directory")
    parser.add_argument("--py-spy", metavar="DIR", default=None,
                        help="profile the brokers during each phase into DIR (py-spy in the venv)")
    parser.add_argument("--py-spy-format", default="raw", choices=sorted(PROFILE_SUFFIX),
                        help="raw: collapsed stacks; speedscope keeps the samples' order (a timeline)")
    args = parser.parse_args()
    if args.py_spy:
        os.makedirs(args.py_spy, exist_ok=True)

    data = tempfile.mkdtemp(prefix="kbroker-bench-cluster-")
    zk_port, base = free_port(), free_port_range(3)
    rows = []
    try:
        state = dev_cluster.up(data, 3, zk_port, base, timeout=120, console=False)
        bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])
        zk = KafkaZkClient(state["zookeeper"]["connect"], 30000).start()

        phases = set(args.phases.split(","))
        # 1. acks=all vs acks=1, three replicas.
        if "acks" in phases:
            zk_admin.AdminZkClient(zk).create_topic("acks", {"min.insync.replicas": "2"}, partitions=3,
                                                replication_factor=3)
            wait_until(lambda: all(s and len(s.isr) == 3 for s in states(zk, "acks", 3).values()), 60)
            r1 = produce_rate(bootstrap, "acks", "1", args.records)
            rall = produce_rate(bootstrap, "acks", "all", args.records)
            rows.append(("produce acks=1, RF 3 (records/s)", f"{r1:,.0f}", ""))
            rows.append(("produce acks=all, RF 3 (records/s)", f"{rall:,.0f}",
                         f"{rall / r1:.0%} of acks=1 (target ≥ 60%)"))

        if "visible" in phases:
            visible_row(rows, state["brokers"], zk, args.visible_topics, "", "small")
        if "scale" in phases:
            scale_phases(args, zk, state, data, rows)
        zk.close()
    finally:
        dev_cluster.down(data)
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)
    rows.append(("load average (1, 5, 15 min) at the end", "", ", ".join(f"{x:.1f}" for x in os.getloadavg())))
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'figure':>12}  note")
    for name, figure, note in rows:
        print(f"{name:<{width}}  {figure:>12}  {note}")


if __name__ == "__main__":
    main()
