"""The measurements quotas are enforced on, as Kafka 2.8's metrics library computes them (org.apache.kafka.common.
metrics.stats: SampledStat, Rate, SimpleRate, TokenBucket, Avg) and the throttle time Kafka's quota managers derive.

A Rate keeps at most `samples` buckets of `window_ms` each (quota.window.num=11, quota.window.size.seconds=1 by
default): a record goes to the current bucket, or starts a new one once the current is a window old, reusing
the oldest when all exist; buckets older than samples x window are emptied when read. The rate is the buckets'
sum over the window size: the time since the oldest bucket started, padded to at least samples - 1 full
windows, so a fresh sensor allows an initial burst of about (samples - 1) x window x quota before its rate
exceeds the quota. SimpleRate (the replication throttles') pads only to one window. A TokenBucket (controller
mutations, KIP-599) holds at most samples x window x quota tokens, starts full, refills at quota per second and
goes negative when a record overdraws it.

Hand-written: these are a few dozen lines whose exact arithmetic (the padding, the bucket reuse, the rounding of
the throttle time) decides what clients see; no Python metrics library has Kafka's semantics. Times are
milliseconds on the broker's monotonic clock; nothing here reads a clock itself, so tests drive it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuotaWindow:
    """How a rate is sampled: quota.window.num buckets of quota.window.size.seconds (Kafka's MetricConfig)."""
    samples: int = 11
    window_ms: int = 1000


# Kafka's default MetricConfig (metrics.num.samples=2, metrics.sample.window.ms=30000): the window of the quota
# managers' own metrics (throttle-time averages, mutation-rate, exempt-request-time, connection throttles)
METRIC_WINDOW = QuotaWindow(2, 30_000)

class _Bucket:
    __slots__ = ("start_ms", "value")

    def __init__(self, start_ms: int):
        self.start_ms = start_ms
        self.value = 0.0


class Rate:
    """Kafka's Rate over a SampledTotal: per-second rate of what was recorded in the last buckets."""
    __slots__ = ("window", "_buckets", "_current")

    def __init__(self, window: QuotaWindow = QuotaWindow()):
        self.window = window
        self._buckets: list[_Bucket] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add value (negative to take back what was recorded: Kafka's unrecord) to the current bucket."""
        buckets = self._buckets
        if not buckets:
            buckets.append(_Bucket(now_ms))
        bucket = buckets[self._current]
        if now_ms - bucket.start_ms >= self.window.window_ms:
            self._current = (self._current + 1) % self.window.samples
            if self._current >= len(buckets):
                bucket = _Bucket(now_ms)
                buckets.append(bucket)
            else:
                bucket = buckets[self._current]
                bucket.start_ms, bucket.value = now_ms, 0.0
        bucket.value += value

    def _purge(self, now_ms: int) -> None:
        """Empty the buckets that started samples x window ago or earlier (SampledStat.purgeObsoleteSamples)."""
        expire = self.window.samples * self.window.window_ms
        for bucket in self._buckets:
            if now_ms - bucket.start_ms >= expire:
                bucket.start_ms, bucket.value = now_ms, 0.0

    def _window_size(self, elapsed: int) -> int:
        """The time the rate is taken over, `elapsed` ms after the oldest bucket started: at least samples - 1
        full windows plus the current partial one (Rate.windowSize)."""
        window_ms = self.window.window_ms
        full, least = elapsed // window_ms, self.window.samples - 1
        if full < least:
            elapsed += (least - full) * window_ms
        return elapsed

    def measure_window(self, now_ms: int) -> tuple[float, int]:
        """(the rate per second at now_ms, the window in ms it is taken over), in one pass over the buckets (the
        quota managers check the one and scale a throttle by the other on every request)."""
        expire = self.window.samples * self.window.window_ms
        total, oldest = 0.0, now_ms
        for bucket in self._buckets:
            start = bucket.start_ms
            if now_ms - start >= expire:
                bucket.start_ms, bucket.value = now_ms, 0.0     # as _purge
            else:
                total += bucket.value
                if start < oldest:
                    oldest = start
        size = self._window_size(now_ms - oldest)
        return (total * 1000.0 / size if size > 0 else 0.0), size

    def window_size_ms(self, now_ms: int) -> int:
        return self.measure_window(now_ms)[1]

    def total(self, now_ms: int) -> float:
        """What the live buckets hold."""
        self._purge(now_ms)
        return sum(b.value for b in self._buckets)

    def measure(self, now_ms: int) -> float:
        """The rate per second at now_ms."""
        return self.measure_window(now_ms)[0]

    def idle_since_ms(self) -> int | None:
        """When the newest bucket started (None before the first record): sensors unused for long expire."""
        return max((b.start_ms for b in self._buckets), default=None)


class SimpleRate(Rate):
    """Kafka's SimpleRate (the replication quotas'): the window is the time since the oldest bucket started, at
    least one window, with no padding to samples - 1 windows (so no initial burst)."""
    __slots__ = ()

    def _window_size(self, elapsed: int) -> int:
        return max(elapsed, self.window.window_ms)


class Avg:
    """Kafka's Avg: the mean of the values recorded in the live buckets, NaN when there are none (the
    throttle-time metrics). Sum and count are two Rates recorded together, so their buckets roll as one."""
    __slots__ = ("_count", "_sum")

    def __init__(self, window: QuotaWindow = QuotaWindow()):
        self._sum, self._count = Rate(window), Rate(window)

    def record(self, value: float, now_ms: int) -> None:
        self._sum.record(value, now_ms)
        self._count.record(1, now_ms)

    def measure(self, now_ms: int) -> float:
        count = self._count.total(now_ms)
        return self._sum.total(now_ms) / count if count else float("nan")


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): burst = samples x window seconds x quota tokens, full at first, refilled
    at quota per second; a record takes its value out, possibly below zero."""
    __slots__ = ("window", "_tokens", "_updated_ms")

    def __init__(self, window: QuotaWindow = QuotaWindow()):
        self.window = window
        self._tokens: float | None = None    # None: full (Kafka starts at 0 tokens at time 0, refilled at once)
        self._updated_ms = 0

    def _burst(self, quota: float) -> float:
        return self.window.samples * self.window.window_ms / 1000.0 * quota

    def _refill(self, quota: float, now_ms: int) -> float:
        burst = self._burst(quota)
        if self._tokens is None:
            self._tokens = burst
        else:
            self._tokens = min(burst, self._tokens + quota * (now_ms - self._updated_ms) / 1000.0)
        self._updated_ms = now_ms
        return burst

    def tokens(self, quota: float, now_ms: int) -> float:
        self._refill(quota, now_ms)
        return self._tokens

    def record(self, value: float, quota: float, now_ms: int) -> None:
        burst = self._refill(quota, now_ms)
        self._tokens = min(burst, self._tokens - value)


def throttle_time_ms(measured: float, bound: float, window_size_ms: int) -> int:
    """How long a client over its quota is held back (ClientQuotaManager.throttleTime): long enough that what it
    sent, spread over the window, is within the bound: round((measured - bound) / bound x window). 0 within the
    bound; a whole window for a bound of 0 (Kafka's division by zero would make it unbounded)."""
    if measured <= bound:
        return 0
    if bound <= 0:
        return window_size_ms
    return round((measured - bound) / bound * window_size_ms)


def token_throttle_time_ms(tokens: float, quota: float) -> int:
    """How long until an overdrawn token bucket is back to zero (ControllerMutationQuotaManager.throttleTime):
    round(-tokens / quota x 1000); 0 while tokens are left."""
    if tokens >= 0:
        return 0
    if quota <= 0:
        return 2 ** 31 - 1
    return round(-tokens / quota * 1000)
