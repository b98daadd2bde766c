"""The browser fixture leaves the worker as it found it: a test that runs after a console module in the same
process may still call asyncio.run (aiokafka's tests do). With the browser kept for the whole session, Playwright's
loop stayed running and such tests failed with "asyncio.run() cannot be called from a running event loop"."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.console.conftest import ROOT


def test_asyncio_runs_in_a_later_module_of_the_same_worker(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.console.conftest import browser, page  # noqa: F401\n")
    (tmp_path / "test_a_browser.py").write_text(
        "def test_a_page(page):\n"
        "    page.set_content('<p id=x>hello</p>')\n"
        "    assert page.inner_text('#x') == 'hello'\n")
    (tmp_path / "test_b_asyncio.py").write_text(
        "import asyncio\n\n\n"
        "def test_asyncio_run():\n"
        "    async def answer():\n"
        "        return 42\n"
        "    assert asyncio.run(answer()) == 42\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "--rootdir", str(tmp_path), str(tmp_path / "test_a_browser.py"),
                          str(tmp_path / "test_b_asyncio.py")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout
