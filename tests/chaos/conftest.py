"""Fault tests use the integration tests' real ZooKeeper and broker processes. At the end of the session the
chaos figures (rows of tests/chaos/harness.py ChaosRun) are printed: per run and kind of fault, the faults
injected, records acknowledged, lost, and the worst per-partition unavailability in seconds. The rows travel
in each test's report (user_properties), so they are printed whichever process ran the test."""
import pytest

from tests.chaos.harness import FIGURES
from tests.integration.conftest import cluster_factory  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def chaos_figures(request):
    """Attach the rows a test's ChaosRuns produced to its report."""
    before = len(FIGURES)
    yield
    for row in FIGURES[before:]:
        request.node.user_properties.append(("chaos figure", row))


def pytest_terminal_summary(terminalreporter):
    rows = [value for reports in terminalreporter.stats.values() for report in reports
            if getattr(report, "when", None) == "teardown"
            for key, value in getattr(report, "user_properties", ()) if key == "chaos figure"]
    if not rows:
        return
    tr = terminalreporter
    tr.section("chaos figures")
    tr.write_line(f"{'run':<44} {'fault':<28} {'faults':>6} {'acked':>9} {'lost':>5} {'worst unavailable s':>20}")
    for row in rows:
        tr.write_line(f"{row['run']:<44} {row['fault']:<28} {row['faults']:>6} {row['acked']:>9} {row['lost']:>5} "
                      f"{row['worst_unavailable_s']:>20}")
