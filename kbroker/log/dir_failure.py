"""LogDirFailureChannel (Kafka's): where an I/O error in a log dir is reported, once per dir.

Whatever touches a log dir's files (a Log, the LogManager's checkpoints and loading) reports an OSError here
with `maybe_add_offline_log_dir(dir, message, error)` and raises KafkaStorageError to its caller, so the
request concerned answers KAFKA_STORAGE_ERROR. The first report of a dir is handed to the listener (the
replica manager's log dir failure handler, run on its own greenlet); dirs reported before a listener is set
(while the logs load at start-up) are handed over when it is. A dir stays offline until the broker restarts.
"""
from __future__ import annotations

import logging
from typing import Callable

logger = logging.getLogger("kbroker.log")


class LogDirFailureChannel:
    def __init__(self):
        self._offline: set[str] = set()
        self._pending: list[str] = []
        self._listener: Callable[[str], None] | None = None

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, error: BaseException) -> None:
        """Log the error; the first time for this dir, hand it to the listener (or keep it for it)."""
        logger.error("%s: %r", message, error)
        if log_dir in self._offline:
            return
        self._offline.add(log_dir)
        if self._listener is None:
            self._pending.append(log_dir)
        else:
            self._listener(log_dir)

    def has_failed(self, log_dir: str) -> bool:
        """Whether an I/O error was reported in this dir (its logs must not be used any more)."""
        return log_dir in self._offline

    def set_listener(self, listener: Callable[[str], None]) -> None:
        """listener(dir) for each newly failed dir, starting with those reported so far; it must not block."""
        self._listener = listener
        pending, self._pending = self._pending, []
        for log_dir in pending:
            listener(log_dir)
