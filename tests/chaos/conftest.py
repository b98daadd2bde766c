"""Fault tests use the integration tests' real ZooKeeper and broker processes. At the end of the session the
chaos figures (rows of tests/chaos/harness.py ChaosRun) are printed: per run and kind of fault, the faults
injected, records acknowledged, lost, and the worst per-partition unavailability in seconds. The rows travel
in each test's report (user_properties) to tests/conftest.py, which prints them: under pytest-xdist only the
top conftest is loaded by the process that prints the summary."""
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
