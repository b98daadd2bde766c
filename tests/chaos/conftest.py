"""Fault tests use the integration tests' real ZooKeeper and broker processes."""
from tests.integration.conftest import cluster_factory  # noqa: F401  (fixture)
