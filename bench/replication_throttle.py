"""What a throttled reassignment copies per second (issue 24 item 4): `kadmin reassign --throttle` as an operator
runs it, against the same move without a throttle in the same run.

ZooKeeper and three brokers (kbroker.cluster's launcher, free ports, a temp dir); two topics of one partition on
brokers [1, 2], each filled with `--mib` MiB of 1 KiB records in 16 KiB batches (the Java producer's default
batch.size; raw Produce to broker 1, then both replicas in sync). The batch size matters: a follower fetch of
replica.fetch.max.bytes ends with a partial batch the follower drops, and those bytes count against the throttle
as in Kafka (512 KiB batches in 1 MiB fetches copy half the throttle).

Each partition is then reassigned to [1, 3] with the kadmin command (`python -m admin_cli.main --zookeeper ...
reassign --no-wait`): first `free` without a throttle, then `throttled` with `--throttle BYTES`. The copy is watched
from broker 3's segment files (every 20 ms): its rate is the bytes copied between the first byte seen and the last
over that time, and the rate over the middle half (25 % to 75 % of the bytes, leaving out the start and the end).
The throttled rate is printed as a ratio to the throttle (target: about 1, within 25 %); the free one shows what
the machine does without it. Then `kadmin reassign --verify` runs until the reassignment is done, and the script
reads the five throttle keys back from /config/brokers/<id> and /config/topics/<topic>: none may be left. The
LeaderReplication / FollowerReplication byte-rate metrics of brokers 1 and 3 are sampled mid-copy.

    .venv/bin/python -m bench.replication_throttle [--mib 16] [--throttle 1048576]
"""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench._common import (MiB, RawProducer, bench_parser, build_v2_batch, fetch_partition, log,  # noqa: E402
                           print_table, three_brokers)
from bench.replication_idle import log_dirs  # noqa: E402
from kbroker.cluster import wait_until  # noqa: E402
from kbroker.protocol.client import Connection  # noqa: E402
from zk.admin import AdminZkClient  # noqa: E402
from zk.client import KafkaZkClient  # noqa: E402

RECORDS_PER_BATCH, RECORD_BYTES = 16, 1024
BROKER_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
               "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def kadmin(connect: str, *args) -> subprocess.CompletedProcess:
    """The kadmin command, as a user runs it (its own process)."""
    return subprocess.run([sys.executable, "-m", "admin_cli.main", "--zookeeper", connect, *map(str, args)],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}, capture_output=True, text=True,
                          timeout=120, check=False)


def leads(port: int, topic: str) -> bool:
    """Whether the broker serves the topic's partition 0 as its leader (it got the controller's LeaderAndIsr)."""
    conn = Connection("127.0.0.1", port, "kbroker-bench", 10.0)
    try:
        return fetch_partition(conn, 11, topic, 0, 0, 1, 1, max_wait_ms=0).error_code == 0
    finally:
        conn.close()


def segment_bytes(log_dir: str, topic: str) -> int:
    """Bytes of the partition's segment files in a log dir (0 before it exists)."""
    d = os.path.join(log_dir, f"{topic}-0")
    try:
        return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".log"))
    except FileNotFoundError:
        return 0


def byte_rate(port: int, kind: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(f"kafka_server_{kind}replication_byte_rate "):
                return float(line.split()[1])
    return float("nan")


def watch_copy(target_dir: str, topic: str, total: int, timeout: float, on_half, samples: list) -> None:
    """Append (time, bytes) samples of the copy into target_dir to `samples`, from before it starts until it holds
    `total` bytes; on_half() is called once half is copied."""
    deadline, halfway = time.monotonic() + timeout, False
    while True:
        n = segment_bytes(target_dir, topic)
        samples.append((time.monotonic(), n))
        if not halfway and n >= total / 2:
            halfway = True
            on_half()
        if n >= total:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: {n} of {total} bytes copied after {timeout:g}s")
        time.sleep(0.02)


def rates(samples: list[tuple[float, int]], total: int) -> tuple[float, float, float]:
    """(seconds from the first byte to the last, MiB/s over them, MiB/s from 25 % to 75 % of total)."""
    first = next(i for i, (_, n) in enumerate(samples) if n > 0)
    t0, b0 = samples[first - 1] if first else samples[0]   # the last sample with nothing: the copy began after it
    t1, b1 = samples[-1]

    def at(fraction: float) -> float:
        """When the copy passed fraction x total bytes (interpolated between samples)."""
        goal = fraction * total
        for (ta, na), (tb, nb) in itertools.pairwise(samples):
            if na < goal <= nb:
                return ta + (tb - ta) * (goal - na) / (nb - na)
        return t1
    middle = at(0.75) - at(0.25)
    return t1 - t0, (b1 - b0) / MiB / (t1 - t0), 0.5 * total / MiB / middle if middle > 0 else float("inf")


def main() -> None:
    parser = bench_parser("replication_throttle", __doc__)
    parser.add_argument("--mib", type=int, default=16, help="MiB of records in each topic")
    parser.add_argument("--throttle", type=int, default=MiB, help="kadmin reassign --throttle, bytes per second")
    args = parser.parse_args()
    with three_brokers(args.tmp_dir, args.keep, args.broker_prop, prefix="kbroker-bench-throttle-",
                       metrics=True) as state:
        connect = state["zookeeper"]["connect"]
        brokers = {b["id"]: b for b in state["brokers"]}
        zk = KafkaZkClient(connect, 30000).start()
        try:
            admin = AdminZkClient(zk)
            batch = build_v2_batch(RECORDS_PER_BATCH, RECORD_BYTES)
            for topic in ("free", "throttled"):
                admin.create_topic(topic, {}, assignment={0: [1, 2]})
                wait_until(lambda t=topic: leads(brokers[1]["port"], t), 60, 0.1)
                RawProducer(brokers[1]["port"], topic, 1, batch, RECORDS_PER_BATCH, 1, 8).fill(
                    args.mib * MiB // (RECORDS_PER_BATCH * RECORD_BYTES))
            source = log_dirs(brokers[1]["config"])[0]
            total = segment_bytes(source, "free")
            wait_until(lambda: all(sorted(zk.get_partition_state(t, 0).isr) == [1, 2] for t in ("free", "throttled")),
                       120, 0.2)
            target = log_dirs(brokers[3]["config"])[0]
            rows, measured, mid = [], {}, {}
            for topic, throttle in (("free", None), ("throttled", args.throttle)):
                plan = os.path.join(os.path.dirname(source), f"plan-{topic}.json")
                with open(plan, "w") as f:
                    f.write(f'{{"version":1,"partitions":[{{"topic":"{topic}","partition":0,"replicas":[1,3]}}]}}')
                log(f"reassigning {topic} ({total / MiB:.1f} MiB) to [1, 3]"
                    + (f" with --throttle {throttle}" if throttle else ""))

                def sample_metrics(topic=topic):
                    mid[topic] = (byte_rate(brokers[1]["metrics_port"], "leader"),
                                  byte_rate(brokers[3]["metrics_port"], "follower"))
                samples: list = []
                watcher = threading.Thread(target=watch_copy, args=(target, topic, total, 600, sample_metrics, samples))
                watcher.start()
                extra = ["--throttle", throttle] if throttle else []
                started = kadmin(connect, "reassign", "--reassignment-json-file", plan, "--no-wait", *extra)
                if started.returncode:
                    raise RuntimeError(f"kadmin reassign failed: {started.stderr}")
                watcher.join()
                seconds, overall, middle = rates(samples, total)
                measured[topic] = middle
                verified = wait_until(lambda p=plan: (r := kadmin(connect, "reassign", "--reassignment-json-file", p,
                                                                  "--verify")).returncode == 0 and r, 120, 0.5)
                left = [f"brokers/{b} {k}" for b in brokers for k in BROKER_KEYS
                        if k in zk.get_entity_config("brokers", str(b))]
                left += [f"topics/{topic} {k}" for k in TOPIC_KEYS if k in zk.get_entity_config("topics", topic)]
                log(verified.stdout.strip().replace("\n", " | "))
                leader_rate, follower_rate = mid.get(topic, (float("nan"),) * 2)
                rows.append([topic, f"{throttle / MiB:.2f}" if throttle else "-", f"{total / MiB:.1f}",
                             f"{seconds:.1f}", f"{overall:.2f}", f"{middle:.2f}",
                             f"{middle * MiB / throttle:.2f}" if throttle else "-",
                             f"{leader_rate / MiB:.2f} / {follower_rate / MiB:.2f}",
                             ", ".join(left) or "none"])
        finally:
            zk.close()
    print_table(f"Reassigning one replica of {args.mib} MiB (1 KiB records) from broker 2 to broker 3, "
                f"kadmin reassign --throttle {args.throttle} B/s vs none; load {os.getloadavg()[0]:.2f}",
                ["topic", "throttle MiB/s", "MiB", "copy s", "MiB/s", "MiB/s 25-75 %", "ratio to throttle",
                 "mid-copy byte-rate MiB/s leader / follower", "throttle keys after --verify"], rows)
    if measured.get("throttled"):
        print(f"\nfree ÷ throttled copy rate: {measured['free'] / measured['throttled']:.1f}")


if __name__ == "__main__":
    main()
