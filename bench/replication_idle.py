"""What idle replication costs (issue 15 item 2): the brokers' CPU while followers keep `--partitions`
partitions (RF 3) in sync and nothing is produced, with incremental fetch sessions (KIP-227, the default) and
without them (`max.incremental.fetch.session.cache.slots=0`: every fetch round names every partition, as before
sessions), in the same run.

For each mode: ZooKeeper and three brokers (kbroker.cluster's launcher, free ports, a temp dir), one topic of
`--partitions` partitions with RF 3, a wait until every broker has created all its logs (counted in its log dirs:
the ISR in ZooKeeper is complete from the start, so it says nothing) and the brokers' CPU is steady (two
consecutive `--settle`-second windows within 10 %), then the brokers' user + system CPU time (from /proc) over
`--seconds`. The
ratio is with sessions ÷ without; the anchor is the issue's "idle followers of 10 K partitions must not burn a
third of a core".

    .venv/bin/python -m bench.replication_idle [--partitions 10000] [--seconds 10]
"""
from __future__ import annotations

import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench._common import CpuMeter, bench_parser, create_replicated_topic, log, print_table, three_brokers  # noqa: E402
from kbroker.cluster import wait_until  # noqa: E402


def idle_cpu(tmp_dir: str | None, partitions: int, settle: float, seconds: float,
             props: tuple[str, ...]) -> tuple[list[float], float]:
    """(each broker's CPU cores used while idle, seconds from the topic's creation until the CPU was steady)."""
    with three_brokers(tmp_dir, overrides=props, prefix="kbroker-bench-idle-") as state:
        started = time.monotonic()
        create_replicated_topic(state, "idle", partitions, timeout=1200, interval=1.0)
        pids = [b["pid"] for b in state["brokers"]]
        dirs = [d for b in state["brokers"] for d in log_dirs(b["config"])]
        wait_until(lambda: all(logs_in(d, "idle") >= partitions for d in dirs), 1200, 1.0)
        steady_by, last = time.monotonic() + 600, None
        while time.monotonic() < steady_by:   # the brokers are still applying LeaderAndIsr, creating logs...
            now = sum(usage(pids, settle))
            if last is not None and abs(now - last) <= 0.1 * max(last, 0.01):
                break
            last = now
        steady = time.monotonic() - started
        return usage(pids, seconds), steady


def log_dirs(config_path: str) -> list[str]:
    """A broker's log.dirs, from its server.properties."""
    with open(config_path) as f:
        props = dict(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))
    return props.get("log.dirs", props.get("log.dir", "")).split(",")


def logs_in(log_dir: str, topic: str) -> int:
    """How many partition logs of `topic` the dir holds."""
    try:
        return sum(1 for name in os.listdir(log_dir) if name.rpartition("-")[0] == topic)
    except FileNotFoundError:
        return 0


def usage(pids: list[int], seconds: float) -> list[float]:
    """Each process's CPU cores used over the next `seconds`."""
    meters = [CpuMeter(p).start() for p in pids]
    time.sleep(seconds)
    return [m.percent() / 100 for m in meters]


def main() -> None:
    parser = bench_parser("replication_idle", __doc__)
    parser.add_argument("--partitions", type=int, default=2000, help="partitions of the idle topic (RF 3)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the idle CPU is measured")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="window of the steadiness check after every replica is in sync")
    args = parser.parse_args()
    rows, total = [], {}
    for mode, props in (("fetch sessions (default)", ()),
                        ("no sessions (cache slots 0)", ("max.incremental.fetch.session.cache.slots=0",))):
        log(f"{mode}: {args.partitions} partitions, RF 3")
        cores, steady = idle_cpu(args.tmp_dir, args.partitions, args.settle, args.seconds,
                                  tuple(args.broker_prop) + props)
        total[mode] = sum(cores)
        rows.append([mode, f"{steady:.1f}", " / ".join(f"{c:.3f}" for c in cores), f"{sum(cores):.3f}"])
    with_s, without = total.values()
    rows.append(["with ÷ without", "", "", f"{with_s / without:.2f}" if without else "-"])
    print_table(f"Idle replication, 3 brokers, {args.partitions} partitions RF 3, CPU over {args.seconds:g} s "
                f"(anchor: idle followers of 10 K partitions must not burn 1/3 of a core)",
                ["mode", "steady after (s)", "cores per broker", "cores, all brokers"], rows)


if __name__ == "__main__":
    main()
