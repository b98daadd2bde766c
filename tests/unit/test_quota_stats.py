"""Kafka's quota arithmetic (kbroker.quota.stats) on the figures of Kafka 2.8's own examples."""
import pytest

from kbroker.quota.stats import QuotaWindow, Rate, SimpleRate, TokenBucket, throttle_time_ms, token_throttle_time_ms


def test_a_fresh_rate_is_taken_over_ten_windows_so_the_first_burst_passes():
    r = Rate(QuotaWindow(11, 1000))
    r.record(20_000, 5_000)
    assert r.window_size_ms(5_000) == 10_000
    assert r.measure(5_000) == 2_000.0
    # quota 1000 B/s: 20 000 bytes at once are twice the bound over the padded window -> 10 s (quotas.md's example)
    assert throttle_time_ms(r.measure(5_000), 1000, r.window_size_ms(5_000)) == 10_000
    fresh = Rate(QuotaWindow(11, 1000))
    fresh.record(10_000, 0)
    assert throttle_time_ms(fresh.measure(0), 1000, fresh.window_size_ms(0)) == 0   # 10 x q: the initial burst


def test_buckets_roll_every_window_and_expire_after_samples_windows():
    r = Rate(QuotaWindow(3, 1000))
    for t in (0, 500, 1000, 2000, 2999):
        r.record(100, t)
    assert r.total(2999) == 500
    assert r.window_size_ms(2999) == 2999            # more than samples - 1 = 2 full windows: no padding
    r.record(100, 3000)                             # a fourth window reuses the oldest bucket
    assert r.total(3000) == 400
    assert r.total(6000) == 0                        # every bucket started 3 windows ago or more
    assert r.measure(6000) == 0


def test_unrecording_takes_back_what_was_recorded():
    r = Rate()
    r.record(5_000, 100)
    r.record(-5_000, 150)
    assert r.measure(150) == 0


def test_simple_rate_is_not_padded():
    r = SimpleRate(QuotaWindow(11, 1000))
    r.record(3_000, 0)
    assert r.window_size_ms(0) == 1000
    assert r.measure(0) == 3000.0
    r.record(3_000, 2500)
    assert r.measure(2500) == pytest.approx(6000 / 2.5)


def test_token_bucket_starts_full_and_refills_at_the_quota():
    b = TokenBucket(QuotaWindow(11, 1000))
    assert b.tokens(2.0, 10_000) == 22.0             # burst: 11 windows x 1 s x 2 per second
    b.record(30, 2.0, 10_000)
    assert b.tokens(2.0, 10_000) == -8.0
    assert token_throttle_time_ms(b.tokens(2.0, 10_000), 2.0) == 4000
    assert b.tokens(2.0, 12_000) == -4.0
    assert b.tokens(2.0, 100_000) == 22.0            # never above the burst
    assert token_throttle_time_ms(22.0, 2.0) == 0


def test_throttle_time_within_and_over_the_bound():
    assert throttle_time_ms(999.0, 1000, 10_000) == 0
    assert throttle_time_ms(1500.0, 1000, 11_000) == 5500
    assert throttle_time_ms(10.0, 0, 11_000) == 11_000
