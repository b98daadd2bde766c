"""Real broker processes for integration tests (kbroker.cluster's BrokerProcess and wait_ready, as `make up` and
the benchmarks use): each test gets its own ZooKeeper chroot, free ports and log dirs; brokers are killed by pid."""
from __future__ import annotations

import os

import pytest

from kbroker.cluster import BrokerProcess, wait_ready, wait_until  # noqa: F401  (wait_until re-exported)
from zk.client import KafkaZkClient

SESSION_TIMEOUT_MS = 4000


class Cluster:
    def __init__(self, zk_connect: str, workdir: str):
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.brokers: dict[int, BrokerProcess] = {}
        self.processes: list[BrokerProcess] = []   # every process started, for cleanup (ids may repeat)
        self.zk = KafkaZkClient(zk_connect, 6000).start()

    def add(self, broker_id: int, start: bool = True, **extra) -> BrokerProcess:
        settings = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "controlled.shutdown.retry.backoff.ms": 200,
                    **extra}
        b = BrokerProcess.create(broker_id, os.path.join(self.workdir, f"broker-{broker_id}"), self.zk_connect,
                                 settings)
        self.brokers[broker_id] = b
        self.processes.append(b)
        if start:
            b.start()
        return b

    def start_brokers(self, n: int, **extra) -> "Cluster":
        """Brokers 1..n, once ready (wait_ready)."""
        for i in range(1, n + 1):
            self.add(i, **extra)
        self.wait_ready(range(1, n + 1))
        return self

    def wait_ready(self, ids, timeout: float = 20.0) -> None:
        """Until brokers `ids` each answer Metadata listing them all and a controller."""
        wait_ready([self.brokers[i] for i in ids], timeout)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    def stop(self) -> None:
        for b in self.processes:
            if b.alive():
                b.kill9()
        self.zk.close()


@pytest.fixture
def cluster_factory(zk_connect, tmp_path):
    clusters = []

    def make(n: int = 0, **extra) -> Cluster:
        c = Cluster(zk_connect, str(tmp_path))
        clusters.append(c)
        return c.start_brokers(n, **extra)
    yield make
    for c in clusters:
        c.stop()


@pytest.fixture
def cluster3(cluster_factory):
    return cluster_factory(3)


@pytest.fixture
def cluster1(cluster_factory):
    return cluster_factory(1)
