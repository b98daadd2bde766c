"""Shared fixtures: one real ZooKeeper server per test session; each test gets its own chroot in it, so no
test sees another's znodes."""
import os
import sys
import uuid

import pytest

from kbroker.cluster import free_port
from zk.launcher import ZooKeeperServer

VENV_BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    server = ZooKeeperServer(free_port(), str(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    yield server
    server.stop()


def fresh_chroot(zookeeper) -> str:
    """A ZooKeeper connect string with a chroot no other test uses, e.g. 127.0.0.1:PORT/t-1a2b3c."""
    return f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def zk_connect(zookeeper):
    return fresh_chroot(zookeeper)


@pytest.fixture
def zk_client(zk_connect):
    from zk.client import KafkaZkClient
    client = KafkaZkClient(zk_connect, session_timeout_ms=6000).start()
    yield client
    client.close()
