"""The console's browser tests: a real cluster (real ZooKeeper, `kbroker start` processes), a real `kbroker console`
process in front of it, and Debian's chromium, headless, driven by Playwright (its protocol driver only: the
browser is /usr/bin/chromium, never a downloaded one).

`console_factory(cluster, *options)` starts the console on a free port and returns a ConsoleProcess (its `url`);
`page` is a fresh browser tab (its own cookies); `shot(page, name)` writes a screenshot to screenshots/ at the
repository's root (or $KBROKER_SCREENSHOTS) for a person to look at.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kbroker.cluster import console_serves, free_port
from tests.clients.conftest import _start_cluster
from tests.integration.conftest import Cluster, cluster_factory  # noqa: F401  (cluster_factory: a fixture)

CHROMIUM = os.environ.get("KBROKER_CHROMIUM", "/usr/bin/chromium")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCREENSHOTS = os.environ.get("KBROKER_SCREENSHOTS", os.path.join(ROOT, "screenshots"))
# As the machine's probe starts it: no background connections (this machine's network is closed), no sandbox (root)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


class ConsoleProcess:
    def __init__(self, argv: list[str], port: int, log_path: str):
        self.argv, self.port, self.log_path = argv, port, log_path
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> "ConsoleProcess":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=ROOT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kbroker console exited {self.proc.returncode}:\n{self.log()}")
            if console_serves(self.port):
                return self
            time.sleep(0.2)
        raise RuntimeError(f"kbroker console did not serve within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def console_factory(tmp_path_factory):
    started = []

    def make(cluster: Cluster, *options: str, bootstrap: str | None = None) -> ConsoleProcess:
        port = free_port()
        log = str(tmp_path_factory.mktemp("console") / "console.log")
        argv = [sys.executable, "-m", "kbroker.cli", "console", "--bootstrap-server", bootstrap or cluster.bootstrap,
                "--port", str(port), "--request-timeout", "5", *options]
        c = ConsoleProcess(argv, port, log)
        started.append(c)
        return c.start()
    yield make
    for c in started:
        c.stop()


@pytest.fixture(scope="module")
def cluster2m(zookeeper, tmp_path_factory):
    """Two brokers, shared by every test of a module (consumer groups work: __consumer_offsets gets RF 2)."""
    c = _start_cluster(zookeeper, tmp_path_factory, 2, **{"offsets.topic.replication.factor": 2})
    yield c
    c.stop()


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module. Not for the session: Playwright's sync API keeps an asyncio loop running in
    the worker while it is started, and a later test of the same worker calling asyncio.run (aiokafka's) would
    fail with "asyncio.run() cannot be called from a running event loop"."""
    from playwright.sync_api import sync_playwright
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test-system-deps` installs Debian's chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    # bypass_csp: the tests evaluate script in the page, which the console's policy forbids; it also means an
    # escaping mistake would run injected script here instead of being stopped by the policy, so tests see it.
    context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
    context.set_default_timeout(15000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.script_errors = errors
    yield tab
    context.close()


def shot(page, name: str) -> str:
    """A full-page screenshot for a person to look at: screenshots/<name>.png."""
    os.makedirs(SCREENSHOTS, exist_ok=True)
    path = os.path.join(SCREENSHOTS, f"{name}.png")
    page.screenshot(path=path, full_page=True)
    return path
