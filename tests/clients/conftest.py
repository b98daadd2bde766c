"""Shared fixtures for the real-client tests: module-scoped clusters of real `kbroker start` processes (one per
test module, each on its own ZooKeeper chroot). Helpers (topics, produce/consume, .log reader) live in _util.py.

Each test uses its own topic names, so tests in one module never see each other's records.
"""
from __future__ import annotations

import pytest

from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster, cluster_factory  # noqa: F401  (cluster_factory: a fixture)


def _start_cluster(zookeeper, tmp_path_factory, n: int, **extra) -> Cluster:
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("clients")))
    try:
        return c.start_brokers(n, **extra)
    except BaseException:
        c.stop()
        raise


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


@pytest.fixture
def old_lz4(monkeypatch):
    """Let kafka-python write and read magic 0 lz4 (its old-Kafka framing needs xxhash; use our pure-Python one)."""
    import kafka.codec
    from tests.clients._util import XXHashShim
    monkeypatch.setattr(kafka.codec, "xxhash", XXHashShim)
