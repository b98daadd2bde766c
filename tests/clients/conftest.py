"""Shared fixtures for the real-client tests: module-scoped clusters of real `kbroker start` processes (one per
test module, on its own ZooKeeper chroot), and helpers to create topics with kadmin and wait for a leader.

Each test uses its own topic names, so tests in one module never see each other's records.
"""
from __future__ import annotations

import socket
import struct
import uuid

import pytest
from click.testing import CliRunner

from admin_cli.main import cli
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from tests.integration.conftest import Cluster, cluster_factory, wait_until  # noqa: F401  (re-exported)


def _start_cluster(zookeeper, tmp_path_factory, n: int, **extra) -> Cluster:
    c = Cluster(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path_factory.mktemp("clients")))
    try:
        for i in range(1, n + 1):
            c.add(i, **extra)
        c.wait_registered(range(1, n + 1))
    except BaseException:
        c.stop()
        raise
    return c


@pytest.fixture(scope="module")
def cluster1m(zookeeper, tmp_path_factory):
    """One broker, shared by every test of the module."""
    c = _start_cluster(zookeeper, tmp_path_factory, 1)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def cluster3m(zookeeper, tmp_path_factory):
    """Three brokers, shared by every test of the module (only where replication matters)."""
    c = _start_cluster(zookeeper, tmp_path_factory, 3)
    yield c
    c.stop()


def raw_metadata(bootstrap: str, topics=None, version: int = 1):
    host, port = bootstrap.rsplit(":", 1)
    request = MetadataRequest(version=version, topics=topics)
    request.with_header(correlation_id=1, client_id="clients-test-wait")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(bytes(request.encode(header=True, framed=True)))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
    return MetadataResponse.decode(buf[8:], version=version)


def leaders_known(cluster: Cluster, topic: str, partitions: int) -> bool:
    """Every live broker's metadata names a leader for each partition of the topic."""
    for b in cluster.brokers.values():
        if not b.alive():
            continue
        try:
            md = raw_metadata(b.bootstrap, [topic])
        except OSError:
            return False
        ts = {t.name: t for t in md.topics}
        t = ts.get(topic)
        if t is None or t.error_code != 0 or len(t.partitions) != partitions:
            return False
        if any(p.error_code != 0 or p.leader_id < 0 for p in t.partitions):
            return False
    return True


def create_topic(cluster: Cluster, name: str, partitions: int = 1, replication_factor: int = 1,
                 **configs) -> str:
    """kadmin create-topic through ZooKeeper, then wait until every broker knows the leaders.
    configs: Kafka topic config names with '_' for '.', e.g. message_format_version="0.10.0"."""
    args = ["--zookeeper", cluster.zk_connect, "create-topic", name, "--partitions", str(partitions),
            "--replication-factor", str(replication_factor)]
    for k, v in configs.items():
        args += ["--config", f"{k.replace('_', '.')}={v}"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    wait_until(lambda: leaders_known(cluster, name, partitions), 20, message=f"leaders of {name}")
    return name


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
