"""Fault tests use the integration tests' real ZooKeeper and broker processes. At the end of the session the
chaos figures (tests/chaos/harness.py FIGURES) are printed: per run and kind of fault, the faults injected,
records acknowledged, lost, and the worst per-partition unavailability in seconds."""
from tests.chaos.harness import FIGURES
from tests.integration.conftest import cluster_factory  # noqa: F401  (fixture)


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    tr = terminalreporter
    tr.section("chaos figures")
    tr.write_line(f"{'run':<44} {'fault':<28} {'faults':>6} {'acked':>9} {'lost':>5} {'worst unavailable s':>20}")
    for row in FIGURES:
        tr.write_line(f"{row['run']:<44} {row['fault']:<28} {row['faults']:>6} {row['acked']:>9} {row['lost']:>5} "
                      f"{row['worst_unavailable_s']:>20}")
