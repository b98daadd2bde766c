"""The local development cluster behind `kbroker cluster up|down|status` (and `make up`).

Layout under the data dir: zookeeper/ (its data), broker-N/ (server.properties and log dir), logs/ (one log
per process) and cluster.json (pids and ports, read by status and down). Processes run in their own sessions
so they outlive the command that started them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from zk.client import KafkaZkClient, ZkError
from zk.launcher import ZooKeeperNotInstalled, ZooKeeperServer, is_serving, stop_pid

STATE_FILE = "cluster.json"


class ClusterError(RuntimeError):
    pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def _read_state(data_dir: str) -> dict | None:
    path = os.path.join(data_dir, STATE_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _write_state(data_dir: str, state: dict) -> None:
    with open(os.path.join(data_dir, STATE_FILE), "w") as f:
        json.dump(state, f, indent=2)


def broker_properties(broker_id: int, port: int, log_dir: str, zk_connect: str, brokers: int) -> str:
    rf = min(3, brokers)
    return "\n".join([
        f"broker.id={broker_id}",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        f"log.dirs={log_dir}",
        f"zookeeper.connect={zk_connect}",
        "zookeeper.session.timeout.ms=6000",
        f"default.replication.factor={rf}",
        f"offsets.topic.replication.factor={rf}",
        f"transaction.state.log.replication.factor={rf}",
        f"transaction.state.log.min.isr={min(2, rf)}",
        "group.initial.rebalance.delay.ms=0",
        "controlled.shutdown.retry.backoff.ms=500",
        "",
    ])


def up(data_dir: str, brokers: int, zk_port: int, base_port: int, timeout: float = 60.0,
       overrides: tuple[str, ...] = (), metrics_port: int | None = None) -> dict:
    """ZooKeeper and `brokers` brokers in the background. overrides: KEY=VALUE settings for every broker;
    metrics_port: broker N serves Prometheus metrics on metrics_port + N - 1."""
    data_dir = os.path.abspath(data_dir)
    state = _read_state(data_dir)
    if state is not None and any(_alive(p["pid"]) for p in [state["zookeeper"], *state["brokers"]]):
        raise ClusterError(f"a cluster is already running from {data_dir} (kbroker cluster down --data-dir "
                           f"{data_dir} stops it)")
    logs = os.path.join(data_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    if is_serving("127.0.0.1", zk_port):
        raise ClusterError(f"port {zk_port} already serves a ZooKeeper; stop it or pass --zk-port")
    zk = ZooKeeperServer(zk_port, os.path.join(data_dir, "zookeeper"), os.path.join(logs, "zookeeper.log"))
    try:
        zk_pid = zk.start(detach=True)
    except (ZooKeeperNotInstalled, RuntimeError) as e:
        raise ClusterError(str(e)) from None
    state = {"zookeeper": {"pid": zk_pid, "port": zk_port, "connect": zk.connect}, "brokers": []}
    for n in range(1, brokers + 1):
        port = base_port + n - 1
        broker_dir = os.path.join(data_dir, f"broker-{n}")
        os.makedirs(broker_dir, exist_ok=True)
        props = os.path.join(broker_dir, "server.properties")
        extra = list(overrides) + ([f"metrics.port={metrics_port + n - 1}"] if metrics_port is not None else [])
        with open(props, "w") as f:
            f.write(broker_properties(n, port, os.path.join(broker_dir, "data"), zk.connect, brokers))
            f.writelines(f"{item.strip()}\n" for item in extra)   # later lines win, as in Kafka's file
        with open(os.path.join(logs, f"broker-{n}.log"), "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "kbroker.cli", "start", props], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        state["brokers"].append({"id": n, "pid": proc.pid, "port": port, "config": props,
                                 "metrics_port": None if metrics_port is None else metrics_port + n - 1})
    _write_state(data_dir, state)
    _wait_ready(zk.connect, brokers, state, logs, timeout)
    return state


def _wait_ready(connect: str, brokers: int, state: dict, logs: str, timeout: float) -> None:
    client = KafkaZkClient(connect, 6000).start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for b in state["brokers"]:
                if not _alive(b["pid"]):
                    raise ClusterError(f"broker {b['id']} exited during startup; see {logs}/broker-{b['id']}.log")
            if len(client.get_broker_ids()) >= brokers and client.get_controller_id() is not None:
                return
            time.sleep(0.1)
        raise ClusterError(f"the cluster was not up within {timeout:g}s; see {logs}")
    finally:
        client.close()


def down(data_dir: str) -> list[str]:
    state = _read_state(os.path.abspath(data_dir))
    if state is None:
        return []
    stopped = []
    for b in state["brokers"]:
        if stop_pid(b["pid"], timeout=15):
            stopped.append(f"broker {b['id']} (pid {b['pid']})")
    if stop_pid(state["zookeeper"]["pid"]):
        stopped.append(f"zookeeper (pid {state['zookeeper']['pid']})")
    return stopped


def status(data_dir: str) -> list[str] | None:
    state = _read_state(os.path.abspath(data_dir))
    if state is None:
        return None
    zk = state["zookeeper"]
    rows = [f"zookeeper  pid {zk['pid']:<7} {zk['connect']:<16} "
            f"{'serving' if is_serving('127.0.0.1', zk['port']) else 'DOWN'}"]
    controller, registered = None, set()
    try:
        client = KafkaZkClient(zk["connect"], 6000, 3000).start()
        try:
            controller, registered = client.get_controller_id(), set(client.get_broker_ids())
        finally:
            client.close()
    except ZkError:
        pass
    for b in state["brokers"]:
        alive = _alive(b["pid"])
        role = " controller" if controller == b["id"] else ""
        reg = "registered" if b["id"] in registered else "not registered"
        rows.append(f"broker {b['id']}   pid {b['pid']:<7} 127.0.0.1:{b['port']:<6} "
                    f"{'running' if alive else 'DOWN'}, {reg}{role}")
    return rows
