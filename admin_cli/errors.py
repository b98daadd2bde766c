"""kadmin's exit statuses, and how a failure becomes one line on stderr.

0 done; 1 refused or failed (the cluster or kadmin's checks refused it: unknown topic, invalid config, topic
exists, an election or reassignment that did not succeed); 2 usage error (bad options or arguments); 3 the
cluster could not be reached or did not finish in time (ZooKeeper or brokers unreachable, a request or a wait
timed out).

A refusal that has a Kafka error code names it at the end of the line, e.g. "Error: Topic 'nope' does not
exist. (UNKNOWN_TOPIC_OR_PARTITION)", the same whichever way kadmin reached the cluster.
"""
from __future__ import annotations

from zk.client import ZkBadVersion, ZkConnectionLoss, ZkError, ZkNodeExists, ZkNoNode, ZkSessionExpired
from kbroker.common.admin_errors import AdminError

from kbroker.protocol.client import KafkaError, TimedOut, Unreachable, error_name

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

_ZK_UNREACHABLE = (ZkConnectionLoss, ZkSessionExpired)
# A ZooKeeper request's own failure, as opposed to a refusal by kbroker's checks (TopicExistsError, ...).
_ZK_REQUEST_FAILED = _ZK_UNREACHABLE + (ZkNodeExists, ZkNoNode, ZkBadVersion)


class WaitTimedOut(AdminError):
    """A wait for the cluster (the controller, a reassignment, leaders, a deletion) outlasted --timeout."""


def describe_failure(e: Exception, zookeeper: str | None = None) -> tuple[str, int] | None:
    """(message, exit status) for the errors kadmin reports in one line; None for anything else (a bug)."""
    if isinstance(e, WaitTimedOut):
        return str(e), EXIT_UNREACHABLE
    if isinstance(e, _ZK_REQUEST_FAILED):
        status = EXIT_UNREACHABLE if isinstance(e, _ZK_UNREACHABLE) else EXIT_REFUSED
        return f"ZooKeeper request to {zookeeper} failed: {e}", status
    if isinstance(e, (AdminError, ZkError)):
        code = getattr(e, "code", -1)
        return (f"{e} ({error_name(code)})" if code > 0 else str(e)), EXIT_REFUSED
    if isinstance(e, (Unreachable, TimedOut)):
        return str(e), EXIT_UNREACHABLE
    if isinstance(e, KafkaError):
        return str(e), EXIT_REFUSED
    return None
