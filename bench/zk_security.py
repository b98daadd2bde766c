"""What a secured ZooKeeper costs kbroker's ZooKeeper client: a session on the plain port (no login, open ACLs) against
one on the TLS port with the SASL (DIGEST-MD5) login and Kafka's secure ACLs on every create, the same ZooKeeper
(the `kbroker cluster up --secure-zookeeper` preset), in the same run.

Per round, plain then secured (alternated, --rounds times, best kept):
(a) session: connect (and log in), then close: ms;
(b) creates: --znodes znodes of 100 B, one after another (a broker's admin writes, each one round trip): ops/s;
(c) reads: the same znodes with get_many (multiRead, pipelined: how the controller reads state): znodes/s.
The ratio column divides the secured figure by the plain one.

  .venv/bin/python -m bench.zk_security                 # ~20 s
  .venv/bin/python -m bench.zk_security --znodes 5000 --rounds 5
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

if __package__ in (None, ""):          # `python bench/zk_security.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import bench_parser, log, print_table
from kbroker.cluster import free_port_range
from kbroker.security.zk_preset import SecureZooKeeper
from zk.client import KafkaZkClient
from zk.launcher import ZooKeeperServer


def _round(connect: str, security, root: str, znodes: int) -> dict[str, float]:
    start = time.perf_counter()
    KafkaZkClient(connect, 10000, security=security).start().close()
    session_ms = (time.perf_counter() - start) * 1000
    zk = KafkaZkClient(connect, 10000, security=security).start()
    try:
        paths = [f"{root}/n{i}" for i in range(znodes)]
        zk.ensure_path(root)
        start = time.perf_counter()
        for path in paths:
            zk.create_recursive(path, b"x" * 100)
        creates = znodes / (time.perf_counter() - start)
        start = time.perf_counter()
        assert all(data for data, _ in zk.get_many(paths))
        reads = znodes / (time.perf_counter() - start)
    finally:
        zk.close()
    return {"session": session_ms, "creates": creates, "reads": reads}


def main() -> None:
    parser = bench_parser("zk_security", __doc__)
    parser.add_argument("--znodes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp_dir, prefix="kbroker-bench-zksec-") as tmp:
        preset = SecureZooKeeper.init(os.path.join(tmp, "security"))
        port = free_port_range(2)
        server = ZooKeeperServer(port, os.path.join(tmp, "zookeeper"), security=preset.server_security(port + 1))
        server.start()
        try:
            best: dict[str, dict[str, float]] = {"plain": {}, "secured": {}}
            for n in range(args.rounds):
                for name, connect, security in (("plain", server.connect, None),
                                                ("secured", server.secure_connect, preset.client_security())):
                    got = _round(connect, security, f"/bench-{name}-{n}", args.znodes)
                    log(f"round {n + 1} {name}: " + ", ".join(f"{k} {v:,.1f}" for k, v in got.items()))
                    for key, value in got.items():
                        keep = min if key == "session" else max
                        best[name][key] = keep(best[name].get(key, value), value)
        finally:
            server.stop()
    load = os.getloadavg()[0]
    rows = [[what, f"{best['plain'][key]:,.1f}", f"{best['secured'][key]:,.1f}",
             f"{best['secured'][key] / best['plain'][key]:.2f}"]
            for key, what in (("session", "session start + close, ms"), ("creates", "creates one by one, ops/s"),
                              ("reads", "get_many (multiRead), znodes/s"))]
    print_table(f"ZooKeeper client, plain port vs TLS + SASL + secure ACLs ({args.znodes} znodes, best of "
                f"{args.rounds}; load {load:.2f})", ["", "plain", "secured", "secured / plain"], rows)


if __name__ == "__main__":
    main()
