"""The one clock of a broker: wall time for timestamps, monotonic time for timeouts.

Everything that needs time asks a Clock, so tests can drive a MockClock instead of waiting.
"""
from __future__ import annotations

import time


class Clock:
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention by time)."""
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never goes back (timeouts, delays, the timing wheel)."""
        return time.monotonic_ns() // 1_000_000


class MockClock(Clock):
    """A clock that moves only when told to."""

    def __init__(self, now_ms: int = 1_700_000_000_000, monotonic_ms: int = 0):
        self._now = now_ms
        self._mono = monotonic_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._mono

    def advance(self, ms: int) -> None:
        self._now += ms
        self._mono += ms
