"""Shared fixtures: one real ZooKeeper server per test session (per worker when `make test` runs the suite in
parallel, pytest-xdist); each test gets its own chroot in it, so no test sees another's znodes.

Parallel workers: each picks ports from its own slice (kbroker.cluster.free_port, KBROKER_PORT_SLICE), and a
test module runs whole on one worker (its module fixtures are made once); the Spark tests share one worker (one
Spark session)."""
import os
import sys
import uuid

import pytest

if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["KBROKER_PORT_SLICE"] = (f"{int(os.environ['PYTEST_XDIST_WORKER'].removeprefix('gw'))}/"
                                        f"{os.environ['PYTEST_XDIST_WORKER_COUNT']}")

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


# The directories whose modules take longest come first, so that under `make test` (pytest-xdist's loadgroup,
# without its reordering by test count, which put the one-test chaos and compose modules last) no long module
# starts near the end while the other workers idle; the unit tests' thousands of short tests fill in last.
SLOWEST_FIRST = ("tests/docker/", "tests/chaos/", "tests/spark/", "tests/console/", "tests/integration/",
                 "tests/clients/")


def _rank(nodeid: str) -> int:
    return next((i for i, d in enumerate(SLOWEST_FIRST) if nodeid.startswith(d)), len(SLOWEST_FIRST))


@pytest.hookimpl(tryfirst=True)    # before pytest-xdist's own hook, which reads the groups
def pytest_collection_modifyitems(items):
    """Under pytest-xdist's --dist loadgroup: one group per module, one for all the Spark tests; the slowest
    directories first (a stable sort: each module's tests keep their order)."""
    items.sort(key=lambda item: _rank(item.nodeid))
    for item in items:
        module = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group("spark" if module.startswith("tests/spark/") else module))


def pytest_terminal_summary(terminalreporter):
    """The chaos figures (tests/chaos/conftest.py) of every test that ran, in one table."""
    rows = [value for reports in terminalreporter.stats.values() for report in reports
            if getattr(report, "when", None) == "teardown"
            for key, value in getattr(report, "user_properties", ()) if key == "chaos figure"]
    if not rows:
        return
    tr = terminalreporter
    tr.section("chaos figures")
    tr.write_line(f"{'run':<44} {'fault':<30} {'faults':>6} {'acked':>9} {'lost':>5} {'worst unavailable s':>20}")
    for row in rows:
        tr.write_line(f"{row['run']:<44} {row['fault']:<30} {row['faults']:>6} {row['acked']:>9} {row['lost']:>5} "
                      f"{row['worst_unavailable_s']:>20}")
