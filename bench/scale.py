"""Scale (issue 28): what each partition, connection, group and topic costs on `make up`'s three brokers.

One dimension at a time, each on a fresh cluster (kbroker.cluster's launcher through bench._common.three_brokers:
the processes, settings and restarts `make up` and `kbroker cluster start-broker` use, so the figures are those of
the development cluster), grown step by step to the totals of --steps:

  partitions   one topic per step (RF 3) brings the total to the step: each broker holds that many replicas.
               Times: every partition has a leader and ISR of 3 in ZooKeeper (led), and every broker serves
               every one with its leader in Metadata (served); kill -9 of the non-controller broker leading most:
               its new leaders after its znode went (re-election), then its start-up (restart until it is back in
               every ISR: log recovery of its replicas and catch-up); kill -9 of the controller: a new controller
               after the kill (the session timeout, 6 s), and every partition it led has a new leader after that
               (failover). Both are then started again. --py-spy profiles the last step's start-up (the
               restarted broker from its process start until it is back in every ISR; attaching adds ≈ 0.5 s).
  connections  idle connections per broker (each asked ApiVersions once, then idle), held by one child
               process per broker. The fd limit is raised as a deployment's `ulimit -n` / systemd LimitNOFILE=
               would: this process sets RLIMIT_NOFILE (soft and hard, to --nofile) before the cluster starts,
               and the brokers and children inherit it.
  groups       groups that each commit one offset (OffsetCommit through FindCoordinator, a simple commit with
               generation -1, as kadmin and AdminClient.alterConsumerGroupOffsets send): the slope is of the
               three brokers' RSS together (a group lives on its coordinator).
  topics       topics of one partition (RF 3) created by CreateTopics at the controller (batches of 200). Times:
               Metadata for all topics (each broker three times, raw bytes, median), and the time from
               CreateTopics' answer (timeout 30 s, as Sarama's admin sends) until every broker lists a new
               topic with its leader (--visibility creations per step, each broker polled in turn).

Per step: RSS of each broker (/proc/<pid>/status VmRSS), the slope (KiB per unit between steps: per partition
replica, connection and topic the mean of the brokers; per group the sum; a partitions step measures before its
kills, and the next slope starts from the RSS after the restarts), the idle CPU of each broker over
--idle-seconds after --settle-seconds (% of one core), its open file descriptors, and an end-to-end check (one
record produced with acks=all to the check topic and fetched back). The check topic is made before step 0 with
three RF 3 partitions, one led by each broker: every step, step 0 included, has each broker fetching from the two
others. A dimension stops at the first step that fails or when the machine
has less than --min-free-gib of memory available; the table says at which step and what ran out.

    .venv/bin/python -m bench.scale                                  # every dimension, modest steps (~5 min)
    .venv/bin/python -m bench.scale --dimension partitions --steps 10000,50000,100000
    .venv/bin/python -m bench.scale --dimension connections --steps 1000,5000,20000
"""
from __future__ import annotations

import errno
import multiprocessing
import os
import re
import resource
import statistics
import sys
import time
import traceback

if __package__ in (None, ""):          # `python bench/scale.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from admin_cli.kafka_client import AdminClient
from bench._common import (PySpy, bench_parser, build_v2_batch, create_replicated_topic, log, print_table,
                           served, three_brokers, wait_new_leaders, wait_partitions)
from kbroker import cluster as dev_cluster
from kbroker.protocol.client import ClusterClient, Connection, TopicPartition
from kbroker.protocol.client.cluster import parse_bootstrap
from zk.admin import AdminZkClient
from zk.client import KafkaZkClient

DEFAULT_STEPS = {"partitions": "1000,3000", "connections": "1000,5000", "groups": "1000,3000",
                 "topics": "500,2000"}
UNIT = {"partitions": "replica", "connections": "connection", "groups": "group", "topics": "topic"}
CHECK = TopicPartition("scale-check", 0)
NOT_CONTROLLER = 41


class Stop(Exception):
    """A step that could not complete: the resource that ran out (or what failed)."""


# ---- measures every step takes --------------------------------------------------------------------------------
def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def mem_available_gib() -> float:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:")) / 1024 ** 2


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, its ended threads included (bench._common.CpuMeter's per-thread schedstat
    loses the threads that end during the interval, as the brokers' thread pools' do at idle)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pids: list[int], seconds: float, settle: float = 0.0) -> list[float]:
    """% of one core each process used over `seconds` (10 ms ticks: ±0.3 % over 3 s), after `settle` seconds."""
    time.sleep(settle)
    before, t0 = [cpu_seconds(p) for p in pids], time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    return [100 * (cpu_seconds(p) - b) / dt for p, b in zip(pids, before)]


def end_to_end(state: dict) -> str:
    """One record produced with acks=all to the RF 3 check topic and fetched back from its leader."""
    with ClusterClient(state["bootstrap"], "bench-scale", 60) as client:
        offset = client.produce(CHECK, build_v2_batch(1, 100), -1, 30000)
        answer = client.fetch(CHECK, offset, 1 << 20, max_wait_ms=0)
    if answer.error_code or answer.high_watermark <= offset or not answer.records:
        raise Stop(f"end-to-end check: error {answer.error_code}, high watermark {answer.high_watermark} at "
                   f"offset {offset}")
    return "ok"


def dead_brokers(state: dict) -> str:
    """The brokers that died, each with the last error its log names (e.g. "Too many open files")."""
    dead = []
    for b in state["brokers"]:
        try:
            with open(f"/proc/{b['pid']}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] != "Z":
                    continue                                  # alive (a zombie is dead)
        except OSError:
            pass
        with open(os.path.join(state["data_dir"], "logs", f"broker-{b['id']}.log"), errors="replace") as f:
            errors = [line.strip() for line in f if re.search(r"Error|Exception|Too many open files", line)]
        dead.append(f"broker {b['id']} died: {errors[-1][-300:] if errors else 'no error in its log'}")
    return "; ".join(dead)


def resource_out(e: BaseException, state: dict, min_free: float) -> str:
    """What ran out, as well as it can be told from the failure."""
    if dead := dead_brokers(state):
        return f"{dead} ({e!r})"
    if mem_available_gib() < min_free:
        return f"memory ({mem_available_gib():.1f} GiB available): {e!r}"
    if isinstance(e, OSError) and e.errno in (errno.EMFILE, errno.ENFILE):
        return f"file descriptors: {e!r}"
    if isinstance(e, OSError) and e.errno == errno.EADDRNOTAVAIL:
        return f"ephemeral ports: {e!r}"
    if isinstance(e, TimeoutError):
        return f"time: {e}"
    return repr(e) if not isinstance(e, Stop) else str(e)


# ---- the dimensions: each a generator of (units, {column: figure}) per step ------------------------------------
def broker(state: dict, broker_id: int) -> dict:
    return next(b for b in state["brokers"] if b["id"] == broker_id)


def restart(state: dict, broker_id: int, zk, tps, timeout: float, profile: PySpy | None = None) -> float:
    """Start a killed broker again (kbroker.cluster.start_broker, once its znode is gone and the controller has
    taken it out of the ISR of every one of tps); seconds from its start until it is back in all those ISRs.
    profile: a PySpy (no pid yet) attached to the broker from its start until then."""
    wait_partitions(zk, tps, lambda s: s is not None and broker_id not in s.isr, timeout)
    t0 = time.monotonic()

    def started(pid: int) -> None:
        profile.pid = pid
        profile.__enter__()
    try:
        entry = dev_cluster.start_broker(state["data_dir"], broker_id, timeout, started if profile else None)
        broker(state, broker_id)["pid"] = entry["pid"]
        return wait_partitions(zk, tps, lambda s: s is not None and broker_id in s.isr, timeout) - t0
    finally:
        if profile is not None:
            profile.__exit__(None, None, None)


def kill9(state: dict, broker_id: int, zk) -> float:
    """kill -9 one broker; returns (time.monotonic) when its znode went."""
    dev_cluster.stop_broker(state["data_dir"], broker_id, kill=True)
    dev_cluster.wait_until(lambda: broker_id not in zk.get_broker_ids(), 60, 0.02)
    return time.monotonic()


def partitions(state: dict, zk, steps: list[int], args):
    tps: list[tuple[str, int]] = []
    timeout = args.timeout
    for n in steps:
        delta = n - len(tps)
        topic = f"p{n}"
        t0 = time.monotonic()
        AdminZkClient(zk).create_topic(topic, {}, partitions=delta, replication_factor=3)
        new = [(topic, p) for p in range(delta)]
        led = wait_partitions(zk, new, lambda s: s is not None and s.leader >= 0 and len(s.isr) == 3, timeout)

        def serves():
            return all(len(m := served(b["port"], topic)) == delta and all(lead >= 0 for lead, _ in m.values())
                       for b in state["brokers"])
        dev_cluster.wait_until(serves, timeout, 1.0, f"every broker to serve {topic}")
        t_served = time.monotonic() - t0
        tps += new
        yield n, {"led (s)": f"{led - t0:.1f}", "served (s)": f"{t_served:.1f}"}, None

        controller = zk.get_controller_id()
        leaders = {tp: s.leader for tp, s in zk.get_partition_states(tps).items()}
        victim = max((b["id"] for b in state["brokers"] if b["id"] != controller),
                     key=lambda i: sum(1 for lead in leaders.values() if lead == i))
        gone = kill9(state, victim, zk)
        reelect = wait_new_leaders(zk, [tp for tp, lead in leaders.items() if lead == victim], {victim}, timeout)
        profile = PySpy(0, args.py_spy, args.py_spy_format) if args.py_spy and n == steps[-1] else None
        startup = restart(state, victim, zk, tps, timeout, profile)

        leaders = {tp: s.leader for tp, s in zk.get_partition_states(tps).items()}
        dev_cluster.stop_broker(state["data_dir"], controller, kill=True)
        t_kill = time.monotonic()
        dev_cluster.wait_until(lambda: zk.get_controller_id() not in (None, controller), 120, 0.02,
                               "a new controller")
        elected = time.monotonic()
        led = [tp for tp, lead in leaders.items() if lead == controller]   # none when it came back in the step before
        failover = wait_new_leaders(zk, led, {controller}, timeout)
        restart(state, controller, zk, tps, timeout)
        yield n, {"re-elect (s)": f"{reelect - gone:.2f}", "start-up (s)": f"{startup:.1f}",
                  "new ctrl (s)": f"{elected - t_kill:.1f}",
                  "failover (s)": f"{failover - elected:.2f}" if led else "(led none)"}, "done"


def _hold(port: int, pipe) -> None:
    """A child process: idle connections to one broker (ApiVersions once each), as many as the parent asks."""
    conns = []
    while (want := pipe.recv()) is not None:
        try:
            while len(conns) < want:
                c = Connection("127.0.0.1", port, "bench-scale-idle", 30)
                c.send(ApiVersionsRequest(version=0))
                conns.append(c)
            pipe.send((len(conns), None))
        except Exception as e:   # reported by the parent as what ran out
            pipe.send((len(conns), e))
    for c in conns:
        c.close()


def connections(state: dict, zk, steps: list[int], args):
    ctx = multiprocessing.get_context("fork")
    holders = []
    for b in state["brokers"]:
        ours, theirs = ctx.Pipe()
        p = ctx.Process(target=_hold, args=(b["port"], theirs), daemon=True)
        p.start()
        holders.append((p, ours))
    try:
        for n in steps:
            t0 = time.monotonic()
            for _, pipe in holders:
                pipe.send(n)
            for _, pipe in holders:
                held, error = pipe.recv()
                if error is not None:
                    raise error
            yield n, {"opened/s": f"{3 * n / (time.monotonic() - t0):,.0f}"}, "done"
    finally:
        for p, pipe in holders:
            pipe.send(None)
            p.join(60)


def groups(state: dict, zk, steps: list[int], args):
    done = 0
    with AdminClient(parse_bootstrap(state["bootstrap"]), 60, "bench-scale") as admin:
        for n in steps:
            t0 = time.monotonic()
            for i in range(done, n):
                errors = admin.commit_offsets(f"scale-group-{i}", {CHECK: i})
                if any(errors.values()):
                    raise Stop(f"group {i}: OffsetCommit errors {errors}")
            yield n, {"commits/s": f"{(n - done) / (time.monotonic() - t0):,.0f}"}, "done"
            done = n


def create_topics(admin: AdminClient, names: list[str], timeout_ms: int) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    topics = [Topic(name=t, num_partitions=1, replication_factor=3, assignments=[], configs=[]) for t in names]

    def build(c):
        return CreateTopicsRequest(version=c.version_for(CreateTopicsRequest, 1), topics=topics,
                                   timeout_ms=timeout_ms, validate_only=False)
    r = admin.send_controller(build, lambda r: any(t.error_code == NOT_CONTROLLER for t in r.topics),
                              admin.deadline(), f"create {len(names)} topics")
    refused = [(t.name, t.error_code) for t in r.topics if t.error_code]
    if refused:
        raise Stop(f"CreateTopics refused {len(refused)} topics, first {refused[0]}")


def metadata_request(topics: list[str] | None):
    return MetadataRequest(version=4, allow_auto_topic_creation=False,
                           topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                               for t in topics])


def lists(conn: Connection, topic: str) -> bool:
    (t,) = conn.send(metadata_request([topic])).topics
    return t.error_code == 0 and bool(t.partitions) and all(p.leader_id >= 0 for p in t.partitions)


def topics(state: dict, zk, steps: list[int], args):
    conns = [Connection("127.0.0.1", b["port"], "bench-scale", 60) for b in state["brokers"]]
    created = 0
    with AdminClient(parse_bootstrap(state["bootstrap"]), 120, "bench-scale") as admin:
        for n in steps:
            t0 = time.monotonic()
            names = [f"t{i}" for i in range(created, n)]
            for i in range(0, len(names), 200):
                create_topics(admin, names[i:i + 200], 60000)
            last = names[-1]
            dev_cluster.wait_until(lambda: all(lists(c, last) for c in conns), args.timeout, 0.5,
                                   f"every broker to list {last}")
            t_created = time.monotonic() - t0
            created = n
            latencies = []
            for c in conns:
                for _ in range(3):
                    t = time.perf_counter()
                    c.send(metadata_request(None), decode=False)
                    latencies.append(time.perf_counter() - t)
            visible = []
            for i in range(args.visibility):
                name = f"vis-{n}-{i}"
                create_topics(admin, [name], 30000)
                t = time.perf_counter()
                pending = list(conns)
                while pending:
                    pending = [c for c in pending if not lists(c, name)]
                    time.sleep(0.001)
                visible.append(time.perf_counter() - t)
            yield n, {"created+served (s)": f"{t_created:.1f}",
                      "Metadata all p50/max (ms)": f"{statistics.median(latencies) * 1e3:.0f} / "
                                                   f"{max(latencies) * 1e3:.0f}",
                      "visible p50/max (ms)": f"{statistics.median(visible) * 1e3:.1f} / "
                                              f"{max(visible) * 1e3:.1f}"}, "done"
    for c in conns:
        c.close()


DIMENSIONS = {"partitions": partitions, "connections": connections, "groups": groups, "topics": topics}


# ---- one dimension on a fresh cluster -------------------------------------------------------------------------
def run_dimension(name: str, steps: list[int], args) -> None:
    rows, columns, stopped = [], [], "no: every step done"
    with three_brokers(args.tmp_dir, args.keep, args.broker_prop, prefix=f"kbroker-bench-scale-{name}-") as state:
        # Three partitions, one led by each broker: every broker fetches from every other from the start, so the
        # step-0 idle CPU holds the replica fetchers' empty rounds (a cost per pair of brokers, not per unit).
        create_replicated_topic(state, CHECK.topic, 3)
        if name == "groups":    # __consumer_offsets (50 partitions, RF 3) exists before the first step's figures
            with AdminClient(parse_bootstrap(state["bootstrap"]), 60, "bench-scale") as admin:
                admin.commit_offsets("scale-warm-up", {CHECK: 0})
        zk = KafkaZkClient(state["zookeeper"]["connect"], 30000).start()
        try:
            pids = [b["pid"] for b in state["brokers"]]
            prev_units, prev_rss, load0 = 0, [rss_kib(p) for p in pids], os.getloadavg()[0]
            rows.append(["0 (started)", " / ".join(f"{r / 1024:.0f}" for r in prev_rss), "",
                         " / ".join(f"{c:.1f}" for c in idle_cpu(pids, args.idle_seconds, args.settle_seconds)),
                         " / ".join(str(open_fds(p)) for p in pids), end_to_end(state)])
            figures: dict[str, str] = {}
            steps_of = DIMENSIONS[name](state, zk, steps, args)
            while True:
                if mem_available_gib() < args.min_free_gib:
                    raise Stop(f"memory: {mem_available_gib():.1f} GiB available")
                try:
                    units, more, phase = next(steps_of)
                except StopIteration:
                    break
                figures.update(more)
                if phase is None:      # a step's figures before its kills: measure the idle cluster here
                    pids = [b["pid"] for b in state["brokers"]]
                    rss, fds = [rss_kib(p) for p in pids], [open_fds(p) for p in pids]
                    cpu = idle_cpu(pids, args.idle_seconds, args.settle_seconds)
                    continue
                if name != "partitions":
                    time.sleep(1.0)
                    pids = [b["pid"] for b in state["brokers"]]
                    rss, fds = [rss_kib(p) for p in pids], [open_fds(p) for p in pids]
                    cpu = idle_cpu(pids, args.idle_seconds, args.settle_seconds)
                delta = [r - p for r, p in zip(rss, prev_rss)]
                slope = (sum(delta) if name == "groups" else statistics.mean(delta)) / (units - prev_units)
                columns += [k for k in figures if k not in columns]
                check = end_to_end(state)
                rows.append([f"{units:,}", " / ".join(f"{r / 1024:.0f}" for r in rss), f"{slope:.1f}",
                             " / ".join(f"{c:.1f}" for c in cpu), " / ".join(map(str, fds)), check,
                             *[figures.get(k, "") for k in columns], f"{os.getloadavg()[0]:.1f}"])
                log(f"{name} {units}: {rows[-1]}")
                # The partitions' kills restarted two brokers: the next slope starts from their RSS after that.
                prev_units, prev_rss, figures = units, [rss_kib(b["pid"]) for b in state["brokers"]], {}
        except Exception as e:   # the step that failed ends the dimension: say what ran out
            stopped = f"at the step after {prev_units:,}: {resource_out(e, state, args.min_free_gib)}"
            where = traceback.extract_tb(e.__traceback__)[-3:]
            log(f"{name} stopped {stopped} (in {' < '.join(f'{f.name} {f.filename}:{f.lineno}' for f in where[::-1])})")
        finally:
            zk.close()
    slope_name = "KiB/group (3 brokers)" if name == "groups" else f"KiB/{UNIT[name]} (per broker)"
    header = ["step", "RSS MiB b1/b2/b3", slope_name, "idle CPU % b1/b2/b3", "fds b1/b2/b3", "e2e", *columns, "load1"]
    rows[0] += [""] * (len(header) - len(rows[0]) - 1) + [f"{load0:.1f}"]
    print_table(f"bench.scale {name} (stopped: {stopped})", header, rows)


def raise_nofile(limit: int) -> int:
    """RLIMIT_NOFILE of this process (inherited by the brokers and children) raised to limit, hard limit too when
    allowed (root; else up to the hard limit): the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, max(limit, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main() -> None:
    parser = bench_parser("scale", __doc__)
    parser.add_argument("--dimension", choices=sorted(DIMENSIONS), action="append",
                        help="the dimension to grow (repeatable; default all, in the order partitions, "
                             "connections, groups, topics)")
    parser.add_argument("--steps", default=None,
                        help="totals of the steps, comma-separated (default per dimension: "
                             + "; ".join(f"{k} {v}" for k, v in DEFAULT_STEPS.items()) + ")")
    parser.add_argument("--idle-seconds", type=float, default=3.0,
                        help="idle CPU measured over this long (300 averages out the periodic work; a minute varies)")
    parser.add_argument("--settle-seconds", type=float, default=0.0,
                        help="wait this long after a step before measuring idle CPU (a step that made 10 000 "
                             "topics leaves a minute or two of after-work: the first checkpoint and ISR passes "
                             "over them, the garbage collector's full passes over the grown heap)")
    parser.add_argument("--visibility", type=int, default=20, help="topic creations timed per topics step")
    parser.add_argument("--nofile", type=int, default=65536, help="RLIMIT_NOFILE for the brokers and this process")
    parser.add_argument("--min-free-gib", type=float, default=2.0,
                        help="stop a dimension when the machine has less memory available")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds any one wait of a step may take")
    args = parser.parse_args()
    nofile = raise_nofile(args.nofile)
    log(f"RLIMIT_NOFILE {nofile} for this process and the brokers it starts")
    for name in args.dimension or list(DIMENSIONS):
        steps = [int(s) for s in (args.steps or DEFAULT_STEPS[name]).split(",")]
        run_dimension(name, steps, args)
    print(f"\nload average (1, 5, 15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
