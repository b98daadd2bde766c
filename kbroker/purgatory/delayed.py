"""Kafka's DelayedOperation and DelayedOperationPurgatory, for gevent.

A delayed operation (a produce waiting for acks, a fetch waiting for bytes, a join waiting for members)
completes exactly once: when `try_complete` finds it can, or when its timeout fires. The purgatory watches
operations under keys (e.g. a topic-partition); whoever changes the state behind a key calls
`check_and_complete(key)`.

Everything runs on one gevent hub, so there are no locks; what Kafka guards with them can still interleave
here when a `try_complete` or an `on_complete` yields or re-enters the purgatory, and the same guards
(completion flag, retry-if-busy flag, watch-then-check-again) cover it.
"""
from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable

import gevent

from kbroker.clock import Clock
from kbroker.purgatory.timing_wheel import Timer, TimerTask

log = logging.getLogger(__name__)


class DelayedOperation(TimerTask):
    """An operation that completes at most `delay_ms` from when it is put in purgatory.

    Subclasses define `try_complete` (check; if the operation can complete, return `self.force_complete()`),
    `on_complete` (the completion logic, called exactly once) and `on_expiration` (called once, after
    `on_complete`, when the timeout forced completion — Kafka's order).
    """

    def __init__(self, delay_ms: int):
        super().__init__(delay_ms)
        self._completed = False
        self._trying = False
        self._retry = False

    @property
    def is_completed(self) -> bool:
        return self._completed

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        raise NotImplementedError

    def force_complete(self) -> bool:
        """Complete now if nobody has yet: cancel the timeout and call `on_complete`. True iff this call did."""
        if self._completed:
            return False
        self._completed = True
        self.cancel()
        self.on_complete()
        return True

    def maybe_try_complete(self) -> bool:
        """`try_complete`, unless one is already running for this operation (it yielded, or we re-entered):
        then ask that one to check again and return False, so no trigger is lost (Kafka's tryCompletePending)."""
        if self._trying:
            self._retry = True
            return False
        self._trying = True
        try:
            while True:
                self._retry = False
                done = self.try_complete()
                if done or self._completed or not self._retry:
                    return done
        finally:
            self._trying = False

    def run(self) -> None:
        """The timeout fired."""
        if self.force_complete():
            self.on_expiration()


class DelayedOperationPurgatory:
    """Watches delayed operations by key and expires them with its own Timer.

    One Timer and one reaper greenlet per purgatory, as in Kafka: `delayed` must count this purgatory's
    pending operations, since the purge heuristic (estimated watched operations minus `delayed`) relies on
    it, and an idle reaper greenlet costs one sleeping greenlet that wakes every 200 ms or at the next
    expiration.
    """

    def __init__(self, name: str, clock: Clock, purge_interval: int = 1000):
        self.name = name
        self._timer = Timer(clock)
        self._purge_interval = purge_interval
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._estimated_total = 0
        self._reaper: gevent.Greenlet | None = None
        self.checks = 0   # check_and_complete calls so far: a caller compares two readings to know none came

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if it can; else watch it under every key and, if a last check still fails,
        start its timeout. True iff completed by this call."""
        keys = list(keys)
        assert keys, "the watch key list can't be empty"
        if op.maybe_try_complete():
            return True
        self._add_watchers(op, keys)
        if op.maybe_try_complete():
            return True
        if not op.is_completed:
            self._timer.add(op)
        return False

    def watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> None:
        """Watch `op` under every key and start its timeout, without checking it first: for a caller that has
        just found on this hub that it cannot complete, with no `check_and_complete` since (same `checks`),
        so checking again would find the same. At 10 000 idle partitions a fetch skips a pass over them."""
        self._add_watchers(op, keys)
        self._timer.add(op)

    def _add_watchers(self, op: DelayedOperation, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self._watchers.setdefault(key, {})[op] = None
        self._estimated_total += 1

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the operations watched under `key`; return how many this call completed."""
        return self.check_and_complete_all((key,))

    def check_and_complete_all(self, keys: Iterable[Hashable]) -> int:
        """check_and_complete of every key, trying each operation once though several of the keys watch it: a
        LeaderAndIsr changes thousands of partitions one waiting fetch watches, and each try reads them all."""
        self.checks += 1
        watched = [(key, ops) for key in keys if (ops := self._watchers.get(key)) is not None]
        if not watched:
            return 0
        found: dict[DelayedOperation, None] = {}
        for _, ops in watched:
            found.update(ops)
        completed = 0
        for op in found:
            if not op.is_completed and op.maybe_try_complete():
                completed += 1
        for key, ops in watched:
            for op in [op for op in ops if op.is_completed]:
                del ops[op]
            self._remove_key_if_empty(key, ops)
        return completed

    def watched(self, key: Hashable) -> int:
        """Operations in `key`'s watch list, including completed ones not yet purged."""
        ops = self._watchers.get(key)
        return 0 if ops is None else len(ops)

    @property
    def delayed(self) -> int:
        """Operations waiting for their timeout."""
        return self._timer.size

    def advance_clock(self, timeout_ms: int) -> bool:
        """One reaper round: expire what is due (waiting up to `timeout_ms`; 0 never blocks), then purge
        completed operations from watch lists when more than `purge_interval` may linger there."""
        expired = self._timer.advance_clock(timeout_ms)
        if self._estimated_total - self.delayed > self._purge_interval:
            self._estimated_total = self.delayed
            purged = 0
            for key, ops in list(self._watchers.items()):
                done = [op for op in ops if op.is_completed]
                for op in done:
                    del ops[op]
                purged += len(done)
                self._remove_key_if_empty(key, ops)
            log.debug("purgatory %s: purged %d completed operations from watch lists", self.name, purged)
        return expired

    def start(self) -> None:
        """Start the expiration reaper greenlet."""
        if self._reaper is None:
            self._reaper = gevent.spawn(self._reap)
            self._reaper.name = f"ExpirationReaper-{self.name}"

    def shutdown(self) -> None:
        """Stop the reaper; operations still pending are left as they are (the broker stops answering)."""
        if self._reaper is not None:
            self._reaper.kill()
            self._reaper = None

    def _reap(self) -> None:
        while True:
            self.advance_clock(200)

    def _remove_key_if_empty(self, key: Hashable, ops: dict[DelayedOperation, None]) -> None:
        if not ops and self._watchers.get(key) is ops:
            del self._watchers[key]
