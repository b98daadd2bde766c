"""The client quota managers (kbroker.quota.client_quotas) on a driven clock: Kafka's eight levels of precedence,
the sensors they share, the throttle and cap arithmetic, controller mutations strict and permissive, and the
entity configs they accept."""
import math
import random

import pytest

from kbroker.clock import MockClock
from kbroker.quota.client_quotas import ClientQuotaManagers, ThrottlingQuotaExceeded
from kbroker.quota.stats import QuotaWindow, Rate, throttle_time_ms

SETTINGS = {"quota.window.num": 11, "quota.window.size.seconds": 1, "controller.quota.window.num": 11,
            "controller.quota.window.size.seconds": 1, "quota.producer.default": 2 ** 63 - 1,
            "quota.consumer.default": 2 ** 63 - 1}
D = "<default>"


def managers(**settings) -> tuple[ClientQuotaManagers, MockClock]:
    clock = MockClock()
    return ClientQuotaManagers({**SETTINGS, **settings}, clock), clock


# (user entity, client entity) as their znodes name them -> the level (1-8) of KIP-55
LEVELS = {("u", "c"): 1, ("u", D): 2, ("u", None): 3, (D, "c"): 4, (D, D): 5, (D, None): 6, (None, "c"): 7,
          (None, D): 8}


@pytest.mark.parametrize("present", [sorted(LEVELS.items(), key=lambda kv: kv[1])[i:] for i in range(8)])
def test_the_first_existing_level_of_eight_gives_the_quota(present):
    q, _ = managers()
    for (user, client), level in present:
        q.update(user, client, {"producer_byte_rate": str(level * 1000)})
    best = present[0][1]
    assert q.produce.quota("u", "c") == best * 1000
    # tags: a user-only level shares one sensor per user, a client-only level one per client id
    expected = {3: ("u", ""), 6: ("u", ""), 7: ("", "c"), 8: ("", "c")}.get(best, ("u", "c"))
    assert q.produce.tags("u", "c") == expected


def test_the_static_default_is_the_ninth_level_and_applies_to_client_ids_only():
    q, _ = managers(**{"quota.producer.default": 5000})
    assert q.produce.enabled and q.produce.quota("anyone", "c") == 5000
    assert q.fetch.quota("anyone", "c") == math.inf and not q.fetch.enabled
    q.update("u", None, {"producer_byte_rate": "7000"})
    assert q.produce.quota("u", "c") == 7000
    assert q.produce.quota("other", "c") == 5000


def test_each_quota_type_resolves_separately():
    q, _ = managers()
    q.update(None, "c", {"producer_byte_rate": "100"})
    q.update("u", None, {"consumer_byte_rate": "200", "request_percentage": "12.5"})
    assert (q.produce.quota("u", "c"), q.fetch.quota("u", "c"), q.request.quota("u", "c")) == (100, 200, 12.5)
    assert q.controller_mutation.quota("u", "c") == math.inf


def test_nothing_is_recorded_until_an_entity_is_processed_even_one_without_quotas():
    q, _ = managers()
    assert not q.produce.enabled and q.produce.record("u", "c", 10 ** 9) == 0 and not q.produce.sensors
    q.update("someone", None, {"SCRAM-SHA-256": "salt=..."})
    assert q.produce.enabled and q.request.enabled
    q.produce.record("u", "c", 10)
    assert list(q.produce.sensors) == [("u", "")]


def test_a_default_gives_every_client_its_own_sensor_and_full_quota():
    q, _ = managers()
    q.update(None, D, {"producer_byte_rate": "1000"})
    assert q.produce.record("u", "a", 10_000) == 0          # the initial burst: 10 x q at once
    assert q.produce.record("u", "b", 10_000) == 0          # another client: another sensor
    assert q.produce.record("u", "a", 10_000) == 10_000      # (20 000 / 10 s - 1000) / 1000 x 10 s
    assert set(q.produce.sensors) == {("", "a"), ("", "b")}


def test_a_throttled_fetch_takes_its_bytes_back_and_max_bytes_is_capped_by_the_window():
    q, clock = managers()
    q.update(None, "c", {"consumer_byte_rate": "1000"})
    assert q.fetch.max_value_in_window("u", "c") == 10_000
    assert q.fetch.max_value_in_window("u", "other") == math.inf
    assert q.fetch.record("u", "c", 12_000) > 0
    q.fetch.unrecord("u", "c", 12_000)
    assert q.fetch.record("u", "c", 5_000) == 0


def test_quota_changes_apply_to_live_sensors_and_removal_ends_throttling():
    q, _ = managers()
    q.update(None, "c", {"producer_byte_rate": "1000"})
    assert q.produce.record("u", "c", 30_000) > 0
    q.update(None, "c", {})
    assert q.produce.record("u", "c", 30_000) == 0


def test_checks_skipped_within_a_sensors_headroom_change_no_answer():
    rng = random.Random(7)
    q, clock = managers()
    q.update(None, "c", {"producer_byte_rate": "1000"})
    reference = Rate(QuotaWindow(11, 1000))
    throttles = 0
    for _ in range(3000):
        clock.advance(rng.choice((0, 1, 50, 400, 1500, 12000)))
        value = rng.choice((1, 100, 2000, 9000))
        now = clock.monotonic_ms()
        reference.record(value, now)
        rate, window = reference.measure_window(now)
        expected = throttle_time_ms(rate, 1000, window)
        assert q.produce.record("u", "c", value) == expected
        throttles += expected > 0
    assert 100 < throttles < 2900


def test_request_throttles_are_capped_at_one_window():
    q, clock = managers()
    q.update(None, "c", {"request_percentage": "1"})
    assert q.request.record("u", "c", 10_000) == 1000


def test_throttles_show_in_the_metrics_until_they_end():
    q, clock = managers()
    q.update(None, "c", {"producer_byte_rate": "1000"})
    q.produce.record("u", "c", 1000)
    q.produce.throttled("u", "c", 400)
    families = {f.name: f for f in q.metric_families()}
    throttle = families["kafka_server_produce_throttle_time"].samples
    assert [(s.labels, s.value) for s in throttle] == [({"user": "", "client_id": "c"}, 400.0)]
    assert families["kafka_server_produce_queue_size"].samples[0].value == 1
    clock.advance(400)
    assert {f.name: f for f in q.metric_families()}["kafka_server_produce_queue_size"].samples[0].value == 0


def test_sensors_idle_for_an_hour_expire():
    q, clock = managers()
    q.update(None, "c", {"producer_byte_rate": "1000"})
    q.produce.record("u", "c", 1)
    clock.advance(3600 * 1000)
    q.expire()
    assert q.produce.sensors
    clock.advance(1)
    q.expire()
    assert not q.produce.sensors


def test_a_strict_mutation_quota_refuses_once_the_bucket_is_below_zero():
    q, clock = managers()
    q.update("u", None, {"controller_mutation_rate": "2"})
    quota = q.controller_mutation.new_quota("u", "c", strict=True)
    quota.record(20)                     # a burst of 22 tokens
    quota.record(10)                     # 2 tokens left: allowed, the bucket goes to -8
    assert quota.throttle_time_ms() == 0
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        quota.record(1)
    assert refused.value.throttle_ms == 4000 == quota.throttle_time_ms()   # 8 tokens at 2 per second
    clock.advance(1500)
    assert quota.throttle_time_ms() == 2500


def test_a_permissive_mutation_quota_records_and_throttles():
    q, _ = managers()
    q.update("u", None, {"controller_mutation_rate": "2"})
    quota = q.controller_mutation.new_quota("u", "c", strict=False)
    quota.record(30)
    assert quota.throttle_time_ms() == 4000
    assert q.controller_mutation.new_quota("v", "c", strict=True).throttle_time_ms() == 0   # unlimited for v


@pytest.mark.parametrize("config", [{"producer_byte_rate": "abc"}, {"producer_byte_rate": "1.5"},
                                    {"consumer_byte_rate": "-1"}, {"request_percentage": "nan"},
                                    {"controller_mutation_rate": "inf"}])
def test_a_malformed_quota_value_changes_nothing(config):
    q, _ = managers()
    q.update(None, "c", {"producer_byte_rate": "1000"})
    with pytest.raises(ValueError):
        q.update(None, "c", {**{"producer_byte_rate": "5"}, **config})
    assert q.produce.quota("u", "c") == 1000


def test_client_ids_are_desanitized_and_users_are_compared_sanitized():
    q, _ = managers()
    q.update("CN%3Da%2CO%3Db", "my%20app", {"producer_byte_rate": "300"})
    user = q.user("User:CN=a,O=b")
    assert user == "CN%3Da%2CO%3Db"
    assert q.produce.quota(user, "my app") == 300
    q.update(None, "%3Cdefault%3E", {"producer_byte_rate": "9"})    # a client named "<default>" is not the default
    assert q.produce.quota("x", "other") == math.inf
    assert q.produce.quota("x", "<default>") == 9


def test_requests_are_timed_only_while_some_entity_has_a_request_percentage():
    import gevent
    import greenlet
    q, _ = managers()
    q.update(None, D, {"producer_byte_rate": "1000"})
    assert q.request.start_timer() is None            # byte rates alone: no request timing, no switch tracer
    assert greenlet.gettrace() is None
    q.update(None, D, {"producer_byte_rate": "1000", "request_percentage": "50"})
    timer = q.request.start_timer()
    assert timer is not None and greenlet.gettrace() is not None
    gevent.sleep(0.02)                                # waiting is left out of the loop time
    assert 0 <= q.request.stop_timer(timer) < 1.0     # percent of one thread-second: under 10 ms of running
    q.update(None, D, {"producer_byte_rate": "1000"})
    assert q.request.start_timer() is None and greenlet.gettrace() is None
