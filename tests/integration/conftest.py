"""Real broker processes for integration tests (kbroker.cluster's BrokerProcess and wait_ready, as `make up` and
the benchmarks use): each test gets its own ZooKeeper chroot, free ports and log dirs; brokers are killed by pid.
`security="sasl_ssl"` (or ssl, sasl_plaintext) secures them with `kbroker cluster up --security`'s preset; the
admin's client settings are then `client_properties` (Java names) and `librdkafka_config`. `secure_zookeeper=True`
puts the cluster (a chroot) on a ZooKeeper with SASL and TLS, set up as `kbroker cluster up --secure-zookeeper`
sets it up: the brokers log in with KAFKA_OPTS's JAAS file and a certificate, zookeeper.set.acl=true."""
from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from kbroker.cluster import BrokerProcess, free_port_range, wait_ready, wait_until  # noqa: F401  (re-exported)
from kbroker.security.preset import SecurityPreset
from kbroker.security.zk_preset import SecureZooKeeper
from zk.client import KafkaZkClient
from zk.launcher import ZKCLI, ZooKeeperServer

SESSION_TIMEOUT_MS = 4000


class Cluster:
    def __init__(self, zk_connect: str, workdir: str, zk_preset: SecureZooKeeper | None = None):
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.zk_preset = zk_preset   # a secured ZooKeeper: zk_connect is its TLS port, the brokers log in
        self.brokers: dict[int, BrokerProcess] = {}
        self.processes: list[BrokerProcess] = []   # every process started, for cleanup (ids may repeat)
        self.zk = KafkaZkClient(zk_connect, 6000,
                                security=zk_preset.client_security() if zk_preset else None).start()
        self.security: SecurityPreset | None = None

    def secure(self, security: str) -> "Cluster":
        """Brokers added from now on use the preset (ssl, sasl_ssl, sasl_plaintext); the admin's SCRAM
        credentials are written first."""
        self.security = SecurityPreset.init(security, os.path.join(self.workdir, "security"))
        self.security.write_admin_credentials(self.zk)
        return self

    @property
    def client_properties(self) -> dict[str, str]:
        """The admin's Java client properties ({} on a plaintext cluster)."""
        return self.security.client_properties() if self.security else {}

    @property
    def librdkafka_config(self) -> dict[str, str]:
        """The admin's librdkafka settings (confluent-kafka, kcat), {} on a plaintext cluster."""
        return self.security.librdkafka_config() if self.security else {}

    def add(self, broker_id: int, start: bool = True, **extra) -> BrokerProcess:
        settings = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "controlled.shutdown.retry.backoff.ms": 200,
                    **(self.zk_preset.broker_settings() if self.zk_preset else {}), **extra}
        b = BrokerProcess.create(broker_id, os.path.join(self.workdir, f"broker-{broker_id}"), self.zk_connect,
                                 settings, security=self.security,
                                 environ={"KAFKA_OPTS": self.zk_preset.kafka_opts} if self.zk_preset else None)
        self.brokers[broker_id] = b
        self.processes.append(b)
        if start:
            b.start()
        return b

    def start_brokers(self, n: int, security: str | None = None, **extra) -> "Cluster":
        """Brokers 1..n, once ready (wait_ready); security: secured by that preset (see secure)."""
        if security:
            self.secure(security)
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


def fill_port(b: BrokerProcess) -> None:
    """Put the broker's own port where its written config says {port} (a listener list naming it beside others,
    for a broker made with start=False)."""
    with open(b.config_path) as f:
        text = f.read().replace("{port}", str(b.port))
    with open(b.config_path, "w") as f:
        f.write(text)


def set_znode_acl(zk_connect: str, path: str, acl: str) -> None:
    """Set a znode's ZooKeeper ACL as an operator would (`zkCli.sh setAcl`; zk_connect may carry a chroot), e.g.
    "world:anyone:r" to have ZooKeeper refuse the brokers' writes there."""
    server, _, chroot = zk_connect.partition("/")
    out = subprocess.run([ZKCLI, "-server", server, "setAcl", f"/{chroot}{path}" if chroot else path, acl],
                         capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0 and "Insufficient permission" not in out.stdout + out.stderr, out.stderr


@pytest.fixture(scope="session")
def secure_zookeeper(tmp_path_factory):
    """A ZooKeeper with SASL and TLS (`kbroker cluster up --secure-zookeeper`'s server and files: `.preset`)."""
    base = tmp_path_factory.mktemp("secure-zookeeper")
    preset = SecureZooKeeper.init(str(base / "security"))
    port = free_port_range(2)
    server = ZooKeeperServer(port, str(base / "data"), security=preset.server_security(port + 1))
    server.preset = preset
    server.start()
    yield server
    server.stop()


@pytest.fixture
def cluster_factory(zk_connect, tmp_path, request):
    clusters = []

    def make(n: int = 0, security: str | None = None, secure_zookeeper: bool = False, **extra) -> Cluster:
        if secure_zookeeper:
            server = request.getfixturevalue("secure_zookeeper")
            c = Cluster(f"{server.secure_connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path), server.preset)
        else:
            c = Cluster(zk_connect, str(tmp_path))
        clusters.append(c)
        return c.start_brokers(n, security, **extra)
    yield make
    for c in clusters:
        c.stop()


@pytest.fixture
def cluster3(cluster_factory):
    return cluster_factory(3)


@pytest.fixture
def cluster1(cluster_factory):
    return cluster_factory(1)
