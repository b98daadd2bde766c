"""Hierarchical timing wheel: Kafka's TimerTask / TimerTaskList / TimingWheel / SystemTimer, for gevent.

A wheel of `wheel_size` buckets, each `tick_ms` wide, covers `tick_ms * wheel_size`; a later expiration goes to
an overflow wheel (created on first need) whose tick is the whole interval of the wheel below. Inserting is
O(number of wheels) and cancelling is O(1). Buckets, not tasks, sit in a heap ordered by their expiration
(Kafka's DelayQueue), so advancing jumps straight to the next non-empty bucket. When an overflow bucket
expires its tasks are re-inserted and fall into finer wheels, or run if already due.

A bucket is a dict used as an insertion-ordered set of entries: the same O(1) add/remove as Kafka's
doubly-linked TimerTaskList, but much cheaper in CPython than linked nodes.

Not thread-safe: use from greenlets of one hub only. Time comes from the broker's Clock (`monotonic_ms`).
"""
from __future__ import annotations

import heapq
import itertools
import logging

from gevent.event import Event

from kbroker.clock import Clock

log = logging.getLogger(__name__)


class TimerTask:
    """Something to run after `delay_ms`; subclasses define `run()`. Adding a task again reschedules it."""

    __slots__ = ("delay_ms", "_entry")

    def __init__(self, delay_ms: int):
        self.delay_ms = delay_ms
        self._entry: _Entry | None = None

    def run(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        """Remove the task from its timer, if it is still waiting there."""
        entry = self._entry
        if entry is not None:
            entry.remove()
            self._entry = None

    def _set_entry(self, entry: _Entry) -> None:
        old = self._entry
        if old is not None and old is not entry:
            old.remove()
        self._entry = entry


class _Entry:
    """One scheduling of a task (Kafka's TimerTaskEntry); stale once the task is cancelled or re-added."""

    __slots__ = ("task", "expiration_ms", "bucket")

    def __init__(self, task: TimerTask, expiration_ms: int):
        self.task = task
        self.expiration_ms = expiration_ms
        self.bucket: _Bucket | None = None
        task._set_entry(self)

    @property
    def cancelled(self) -> bool:
        return self.task._entry is not self

    def remove(self) -> None:
        bucket = self.bucket
        if bucket is not None:
            bucket.remove(self)


class _Bucket:
    """Kafka's TimerTaskList: the entries of one wheel slot and the slot's current expiration (-1: none)."""

    __slots__ = ("entries", "expiration_ms", "timer")

    def __init__(self, timer: Timer):
        self.entries: dict[_Entry, None] = {}
        self.expiration_ms = -1
        self.timer = timer

    def add(self, entry: _Entry) -> None:
        self.entries[entry] = None
        entry.bucket = self
        self.timer._size += 1

    def remove(self, entry: _Entry) -> None:
        del self.entries[entry]
        entry.bucket = None
        self.timer._size -= 1

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the slot's expiration; True if it changed, i.e. the bucket must be (re)queued."""
        changed = self.expiration_ms != expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def flush(self) -> list[_Entry]:
        """Empty the bucket and return what it held."""
        entries = list(self.entries)
        self.entries = {}
        self.expiration_ms = -1
        for entry in entries:
            entry.bucket = None
        self.timer._size -= len(entries)
        return entries


class TimingWheel:
    """One level of the hierarchy; `add` returns False when the entry is already due (or cancelled)."""

    __slots__ = ("tick_ms", "wheel_size", "interval", "buckets", "current_time", "overflow", "timer")

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int, timer: Timer):
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self.buckets = [_Bucket(timer) for _ in range(wheel_size)]
        self.current_time = start_ms - start_ms % tick_ms
        self.overflow: TimingWheel | None = None
        self.timer = timer

    def add(self, entry: _Entry) -> bool:
        expiration = entry.expiration_ms
        if entry.cancelled or expiration < self.current_time + self.tick_ms:
            return False
        if expiration < self.current_time + self.interval:
            virtual_id = expiration // self.tick_ms
            bucket = self.buckets[virtual_id % self.wheel_size]
            bucket.add(entry)
            if bucket.set_expiration(virtual_id * self.tick_ms):
                self.timer._offer(bucket)
            return True
        if self.overflow is None:
            self.overflow = TimingWheel(self.interval, self.wheel_size, self.current_time, self.timer)
        return self.overflow.add(entry)

    def advance_clock(self, time_ms: int) -> None:
        if time_ms >= self.current_time + self.tick_ms:
            self.current_time = time_ms - time_ms % self.tick_ms
            if self.overflow is not None:
                self.overflow.advance_clock(self.current_time)


class Timer:
    """Kafka's SystemTimer: a timing wheel (1 ms x 20 by default) plus the heap of bucket expirations.

    Due tasks run inline, in the greenlet calling `add` or `advance_clock` (the reaper's), in expiration
    order at tick granularity; an exception from a task is logged and does not stop the others.
    """

    def __init__(self, clock: Clock, tick_ms: int = 1, wheel_size: int = 20):
        self._clock = clock
        self._size = 0
        self._queue: list[tuple[int, int, _Bucket]] = []
        self._seq = itertools.count()
        self._wakeup = Event()
        self._wheel = TimingWheel(tick_ms, wheel_size, clock.monotonic_ms(), self)

    @property
    def size(self) -> int:
        """Tasks waiting in the wheels."""
        return self._size

    def add(self, task: TimerTask) -> None:
        """Schedule `task` to run `task.delay_ms` from now (at once if that is not in the future)."""
        self._add_entry(_Entry(task, self._clock.monotonic_ms() + task.delay_ms))

    def advance_clock(self, timeout_ms: int) -> bool:
        """Run what is due; if nothing was, wait until the next bucket is due but at most `timeout_ms`
        (re-aiming when `add` queues an earlier bucket) and run what is due then. True if a bucket expired.

        `advance_clock(0)` never blocks: tests drive the timer that way from a MockClock."""
        if self._expire_due():
            return True
        now = self._clock.monotonic_ms()
        deadline = now + timeout_ms
        while now < deadline:
            wait_ms = deadline - now
            if self._queue:
                wait_ms = min(wait_ms, self._queue[0][0] - now)
            self._wakeup.clear()
            woken = self._wakeup.wait(max(wait_ms, 0) / 1000)
            if self._expire_due():
                return True
            if not woken:
                return False
            now = self._clock.monotonic_ms()
        return False

    def _offer(self, bucket: _Bucket) -> None:
        heapq.heappush(self._queue, (bucket.expiration_ms, next(self._seq), bucket))
        if self._queue[0][2] is bucket:
            self._wakeup.set()

    def _add_entry(self, entry: _Entry) -> None:
        if not self._wheel.add(entry) and not entry.cancelled:
            task = entry.task
            task._entry = None
            try:
                task.run()
            except Exception:
                log.exception("timer task %r failed", task)

    def _expire_due(self) -> bool:
        queue = self._queue
        now = self._clock.monotonic_ms()
        if not queue or queue[0][0] > now:
            return False
        while queue and queue[0][0] <= now:
            expiration, _, bucket = heapq.heappop(queue)
            self._wheel.advance_clock(expiration)
            for entry in bucket.flush():
                self._add_entry(entry)
        return True
