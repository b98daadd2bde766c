"""The client's failures: every call that fails raises KafkaError (kbroker.protocol.errors), carrying the
Kafka error code the cluster answered, or one standing for what went wrong on the way.

Unreachable (no broker answers; a lost connection is its subclass ConnectionLost, worth another try) and
TimedOut (the deadline passed) are the two kinds callers tell apart: kadmin turns them into exit status 3.
RETRIABLE is the one set of error codes after which a request is tried again (after a metadata refresh, and
for the coordinator ones after a coordinator lookup) until the call's deadline.
"""
from __future__ import annotations

import kafka.errors as kerrors

from ..errors import Errors, KafkaError, error_name


class Unreachable(KafkaError):
    """No broker could be reached."""

    def __init__(self, message: str, code: int = Errors.NETWORK_EXCEPTION):
        super().__init__(code, message)


class ConnectionLost(Unreachable):
    """A broker could not be reached or stopped answering: the connection is closed; try again (elsewhere)."""


class TimedOut(KafkaError):
    """The deadline passed (waiting for an answer, or retrying)."""

    def __init__(self, message: str, code: int = Errors.REQUEST_TIMED_OUT):
        super().__init__(code, message)


# Errors after which the group's (or transaction's) coordinator must be looked up again, or waited for.
COORDINATOR_MOVED = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})
COORDINATOR_ERRORS = COORDINATOR_MOVED | {Errors.COORDINATOR_LOAD_IN_PROGRESS}

# Errors that a later attempt may not get: leadership or metadata moving, a broker or replica briefly short.
RETRIABLE = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.REQUEST_TIMED_OUT, Errors.BROKER_NOT_AVAILABLE,
    Errors.REPLICA_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION, Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.KAFKA_STORAGE_ERROR, Errors.NOT_CONTROLLER,
    Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH, Errors.OFFSET_NOT_AVAILABLE,
}) | COORDINATOR_ERRORS


def error_text(code: int) -> str:
    """'NON_EMPTY_GROUP (The group is not empty.)': the name and kafka-python's description of the code."""
    desc = getattr(kerrors.for_code(code), "description", "") if code != -1 else \
        "The server experienced an unexpected error when processing the request."
    return f"{error_name(code)} ({desc.rstrip('.')}.)" if desc else error_name(code)
