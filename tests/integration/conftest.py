"""Real broker processes for integration tests: each test gets its own ZooKeeper chroot, ports and log dirs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import free_port
from zk.client import KafkaZkClient

SESSION_TIMEOUT_MS = 4000


class BrokerProcess:
    def __init__(self, broker_id: int, zk_connect: str, workdir: str, extra: dict | None = None):
        self.id = broker_id
        self.port = free_port()
        self.dir = os.path.join(workdir, f"broker-{broker_id}")
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(self.dir, "broker.log")
        self.config_path = os.path.join(self.dir, "server.properties")
        props = {
            "broker.id": broker_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": os.path.join(self.dir, "data"),
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
            "controlled.shutdown.retry.backoff.ms": 200,
            **(extra or {}),
        }
        with open(self.config_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *args: str) -> "BrokerProcess":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "kbroker.cli", "start", self.config_path, *args],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout: float = 15) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout)

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


class Cluster:
    def __init__(self, zk_connect: str, workdir: str):
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.brokers: dict[int, BrokerProcess] = {}
        self.processes: list[BrokerProcess] = []   # every process started, for cleanup (ids may repeat)
        self.zk = KafkaZkClient(zk_connect, 6000).start()

    def add(self, broker_id: int, start: bool = True, **extra) -> BrokerProcess:
        b = BrokerProcess(broker_id, self.zk_connect, self.workdir, extra)
        self.brokers[broker_id] = b
        self.processes.append(b)
        if start:
            b.start()
        return b

    def wait_registered(self, ids, timeout: float = 20.0) -> None:
        wait_until(lambda: set(ids) <= set(self.zk.get_broker_ids()) and self.zk.get_controller_id() is not None,
                   timeout, message=f"brokers {sorted(ids)} registered and a controller elected")

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    def stop(self) -> None:
        for b in self.processes:
            if b.alive():
                b.proc.kill()
                b.proc.wait()
        self.zk.close()


@pytest.fixture
def cluster_factory(zk_connect, tmp_path):
    clusters = []

    def make(n: int = 0, **extra) -> Cluster:
        c = Cluster(zk_connect, str(tmp_path))
        clusters.append(c)
        for i in range(1, n + 1):
            c.add(i, **extra)
        if n:
            c.wait_registered(range(1, n + 1))
        return c
    yield make
    for c in clusters:
        c.stop()


@pytest.fixture
def cluster3(cluster_factory):
    return cluster_factory(3)


@pytest.fixture
def cluster1(cluster_factory):
    return cluster_factory(1)
