"""The cost of the connection limits (kbroker.quota.connection_quotas and the idle reaper).

In this process (the added work alone, timed over many calls):
  stamps   the activity stamps the idle reaper reads, taken around every request (network.server.stamping):
           ns per request;
  accept   ConnectionQuotas.inc + dec of one connection: with no limits set, and with a broker creation rate and
           a <default> IP rate so high they never throttle (the per-IP rate is then recorded too): µs each.
On brokers (three, one after the other, measured the same way):
  off      connections.max.idle.ms=-1: no stamps, no idle scans (accepts still record the broker's and the
           listener's creation rates, as Kafka always does);
  default  connections.max.idle.ms at its default (600000);
  quotas   the default, plus max.connection.creation.rate and /config/ips/<default> connection_creation_rate
           so high they never throttle;
each with small Produce requests (one 100 B record, acks=1; --connections connections, --depth in flight),
and --connections threads opening a connection, asking ApiVersions and closing it in a loop: requests/s and
connections/s, and the broker's CPU µs per request and per connection. --rounds repeats the three brokers in
alternating order (off, default, quotas, then quotas, default, off, ...); the best figures of each are kept.
The last table sets the in-process costs against the broker's CPU per request and per connection of `off`.

  .venv/bin/python -m bench.connections
  .venv/bin/python -m bench.connections --seconds 10 --rounds 3
"""
from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time

if __package__ in (None, ""):          # `python bench/connections.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import BenchCluster, CpuMeter, RawProducer, bench_parser, build_v2_batch, fmt_rate, log, print_table

NEVER = 1_000_000_000
CONFIGS = {
    "off": {"connections.max.idle.ms": "-1"},
    "default": {},
    "quotas": {"max.connection.creation.rate": str(NEVER)},
}
_API_VERSIONS = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
_FRAME = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS


# ---- in this process ------------------------------------------------------------------------------------------
def stamp_ns(calls: int = 1_000_000) -> float:
    """ns the activity stamps add to one request (a do-nothing dispatch timed with and without them)."""
    from kbroker.network.server import Session, stamping

    def dispatch(frame, session, times):
        return None
    session = Session("PLAINTEXT", "PLAINTEXT", ("127.0.0.1", 1))
    best = []
    for fn in (dispatch, stamping(dispatch)):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(b"", session, None)
        best.append(time.perf_counter() - t0)
    return (best[1] - best[0]) / calls * 1e9


def accept_us(quotas: bool, calls: int = 100_000) -> float:
    """µs of ConnectionQuotas.inc + dec for one connection."""
    from kbroker.clock import Clock
    from kbroker.config import BrokerConfig
    from kbroker.quota.connection_quotas import ConnectionQuotas
    settings = {"zookeeper.connect": "zk"}
    if quotas:
        settings["max.connection.creation.rate"] = str(NEVER)
    q = ConnectionQuotas(BrokerConfig(settings), Clock())
    if quotas:
        q.update_ip_entity("<default>", {"connection_creation_rate": str(NEVER)})
    t0 = time.perf_counter()
    for i in range(calls):
        ip = f"10.0.{i % 200}.1"
        q.inc("PLAINTEXT", ip)
        q.dec("PLAINTEXT", ip)
    return (time.perf_counter() - t0) / calls * 1e6


# ---- on brokers -----------------------------------------------------------------------------------------------
def produce_rate(cluster: BenchCluster, args) -> tuple[float, float]:
    """(requests/s, broker CPU µs per request)"""
    cluster.create_topic("small", args.connections)
    producer = RawProducer(cluster.port, "small", args.connections, build_v2_batch(1, 100), 1, args.connections,
                           args.depth)
    cpu = CpuMeter(cluster.pid)
    threading.Timer(1.0, cpu.start).start()
    requests, dt = producer.run(1.0, args.seconds)
    return requests / dt, cpu.seconds() / requests * 1e6


def connect_rate(cluster: BenchCluster, args) -> tuple[float, float]:
    """(connections/s, broker CPU µs per connection)"""
    stop, counts, errors = threading.Event(), [0] * args.connections, []

    def churn(i: int) -> None:
        try:
            while not stop.is_set():
                with socket.create_connection(("127.0.0.1", cluster.port), timeout=10) as s:
                    s.sendall(_FRAME)
                    head = s.recv(4, socket.MSG_WAITALL)
                    s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                counts[i] += 1
        except OSError as e:
            errors.append(repr(e))
            stop.set()
    threads = [threading.Thread(target=churn, args=(i,), daemon=True) for i in range(args.connections)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    cpu = CpuMeter(cluster.pid).start()
    c0, t0 = sum(counts), time.perf_counter()
    stop.wait(args.seconds)
    c1, t1 = sum(counts), time.perf_counter()
    used = cpu.seconds()
    stop.set()
    for t in threads:
        t.join(30)
    if errors:
        raise RuntimeError("; ".join(errors))
    return (c1 - c0) / (t1 - t0), used / (c1 - c0) * 1e6


def measure(name: str, args) -> list[float]:
    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop, settings=CONFIGS[name]) as cluster:
        if name == "quotas":
            zk = cluster._zk_client
            zk.set_or_create_entity_config("ips", "<default>", {"connection_creation_rate": str(NEVER)})
            zk.create_config_change_notification("ips/<default>")
            time.sleep(1.0)     # applied by the broker's config change processing
        figures = [*produce_rate(cluster, args), *connect_rate(cluster, args)]
    log(f"{name}: {fmt_rate(figures[0])} produce requests/s ({figures[1]:.0f} µs CPU each), "
        f"{fmt_rate(figures[2])} connections/s ({figures[3]:.0f} µs CPU each); load {os.getloadavg()[0]:.2f}")
    return figures


def main() -> None:
    parser = bench_parser("connections", __doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="each broker measurement (default 5)")
    parser.add_argument("--connections", type=int, default=4, help="client connections / threads (default 4)")
    parser.add_argument("--depth", type=int, default=4, help="Produce requests in flight per connection (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="times each broker is measured (default 2)")
    args = parser.parse_args()
    stamps = min(stamp_ns() for _ in range(3))
    plain, quotas = min(accept_us(False) for _ in range(3)), min(accept_us(True) for _ in range(3))
    log(f"in process: stamps {stamps:.0f} ns per request; inc+dec {plain:.1f} µs per connection, "
        f"{quotas:.1f} µs with never-throttling rates")
    best: dict[str, list[float]] = {}
    order = list(CONFIGS)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else reversed(order):
            figures = measure(name, args)
            if name not in best:
                best[name] = figures
            else:   # the highest rates, the lowest CPU per operation
                best[name] = [max(best[name][0], figures[0]), min(best[name][1], figures[1]),
                              max(best[name][2], figures[2]), min(best[name][3], figures[3])]
    base = best["off"]
    print_table(f"Brokers (best of {args.rounds}; load average {os.getloadavg()[0]:.2f} at the end)",
                ["broker", "produce requests/s", "ratio", "CPU µs/request", "connections/s", "ratio",
                 "CPU µs/connection"],
                [[name, fmt_rate(f[0]), f"{f[0] / base[0]:.3f}", f"{f[1]:.0f}", fmt_rate(f[2]),
                  f"{f[2] / base[2]:.3f}", f"{f[3]:.0f}"] for name, f in best.items()])
    print_table("In-process cost against the broker's CPU (off)",
                ["work", "cost", "share of the broker's CPU"],
                [["stamps per request", f"{stamps:.0f} ns", f"{stamps / 1000 / base[1]:.2%}"],
                 ["inc+dec per connection, no limits", f"{plain:.1f} µs", f"{plain / base[3]:.2%}"],
                 ["inc+dec per connection, never-throttling rates", f"{quotas:.1f} µs", f"{quotas / base[3]:.2%}"]])


if __name__ == "__main__":
    main()
