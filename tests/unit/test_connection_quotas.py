"""ConnectionQuotas' decisions on a driven clock: the per-IP creation rate (with the initial burst of a fresh rate and
the throttle capped at one window), the per-IP counts, the slots an acceptor waits for, the excess over
max.connections, the /config/ips entities and the metrics."""
import math

import gevent
import pytest

from kbroker.clock import MockClock
from kbroker.config import BrokerConfig
from kbroker.quota.connection_quotas import ConnectionQuotas, ConnectionThrottled, TooManyConnections

TWO_LISTENERS = {"listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                 "inter.broker.listener.name": "INTERNAL"}


def quotas(**settings) -> tuple[ConnectionQuotas, MockClock]:
    clock = MockClock()
    config = BrokerConfig({"zookeeper.connect": "zk", **{k.replace("_", "."): str(v) for k, v in settings.items()}})
    return ConnectionQuotas(config, clock), clock


def admitted(q: ConnectionQuotas, ip: str, n: int, listener: str = "PLAINTEXT") -> int:
    """Connections admitted out of n from ip; stops at the first refused."""
    for i in range(n):
        try:
            q.inc(listener, ip)
        except (ConnectionThrottled, TooManyConnections):
            return i
    return n


def test_an_ip_over_its_creation_rate_is_throttled_after_the_initial_burst_and_others_are_not():
    q, clock = quotas()
    q.update_ip_entity("127.0.0.1", {"connection_creation_rate": "2"})
    # A fresh rate is taken over 10 windows: 20 connections at once are 2/s; the 21st is over.
    assert admitted(q, "127.0.0.1", 20) == 20
    with pytest.raises(ConnectionThrottled) as e:
        q.inc("PLAINTEXT", "127.0.0.1")
    assert e.value.throttle_ms == 500          # round((2.1 - 2) / 2 x 10000 ms)
    assert admitted(q, "127.0.0.2", 50) == 50   # no rate for this address
    # The throttled connection was taken back from every rate.
    assert q.broker_rate.total(clock.monotonic_ms()) == 70
    assert q.listeners["PLAINTEXT"].rate.total(clock.monotonic_ms()) == 70
    clock.advance(10500)                        # 21 over 10.5 s is 2/s: one more passes
    assert admitted(q, "127.0.0.1", 5) == 1


def test_the_throttle_of_a_connection_rate_is_capped_at_one_window():
    q, _ = quotas(quota_window_size_seconds=2)
    q.update_ip_entity("<default>", {"connection_creation_rate": "0"})
    with pytest.raises(ConnectionThrottled) as e:
        q.inc("PLAINTEXT", "10.0.0.1")
    assert e.value.throttle_ms == 2000


def test_the_default_ip_rate_applies_to_every_ip_without_its_own():
    q, _ = quotas()
    q.update_ip_entity("<default>", {"connection_creation_rate": "1"})
    q.update_ip_entity("10.0.0.2", {"connection_creation_rate": "5"})
    assert admitted(q, "10.0.0.1", 100) == 10
    assert admitted(q, "10.0.0.2", 100) == 50
    q.update_ip_entity("10.0.0.2", {})          # its own rate removed: the default again
    assert admitted(q, "10.0.0.2", 100) == 0
    q.update_ip_entity("<default>", {})
    assert admitted(q, "10.0.0.1", 100) == 100


def test_bad_ip_entities_change_nothing():
    q, _ = quotas()
    q.update_ip_entity("10.0.0.1", {"connection_creation_rate": "3"})
    for name, config in (("10.0.0.1", {"connection_creation_rate": "fast"}),
                         ("10.0.0.1", {"connection_creation_rate": "-1"}),
                         ("10.0.0.1", {"connection_creation_rate": "2.5"}),
                         ("not an address!", {"connection_creation_rate": "1"}),
                         ("", {"connection_creation_rate": "1"})):
        with pytest.raises(ValueError):
            q.update_ip_entity(name, config)
    assert q.ip_rate_quotas == {"10.0.0.1": 3}
    q.update_ip_entity("%3A%3A1", {"connection_creation_rate": "4"})   # sanitized by AlterClientQuotas
    q.update_ip_entity("0:0::2", {"connection_creation_rate": "4"})
    assert q.ip_rate_quotas == {"10.0.0.1": 3, "::1": 4, "::2": 4}


def test_connections_per_ip_with_overrides():
    q, _ = quotas(max_connections_per_ip=2, max_connections_per_ip_overrides="10.0.0.9:4")
    assert admitted(q, "10.0.0.1", 5) == 2
    assert admitted(q, "10.0.0.9", 5) == 4
    q.dec("PLAINTEXT", "10.0.0.1")
    assert admitted(q, "10.0.0.1", 5) == 1
    assert q.per_ip == {"10.0.0.1": 2, "10.0.0.9": 4} and q.total == 6


def test_an_acceptor_waits_for_a_free_slot_of_its_listener_and_the_protected_listener_may_go_over():
    q, _ = quotas(max_connections=2, **{"listener.name.plaintext.max.connections": 1}, **TWO_LISTENERS)
    q.inc("PLAINTEXT", "10.0.0.1")
    waiting = gevent.spawn(q.inc, "PLAINTEXT", "10.0.0.2")
    gevent.sleep(0.01)
    assert not waiting.dead                        # the listener is full
    q.inc("INTERNAL", "10.0.0.3")
    q.inc("INTERNAL", "10.0.0.4")                  # the inter-broker listener is not held by max.connections
    assert q.total == 3 and q.excess() == 1
    q.dec("PLAINTEXT", "10.0.0.1")                 # a slot of its listener, but the broker is still full
    gevent.sleep(0.01)
    assert not waiting.dead
    q.dec("INTERNAL", "10.0.0.3")
    waiting.join(1)
    assert waiting.successful() and q.per_ip == {"10.0.0.2": 1, "10.0.0.4": 1}


def test_an_acceptor_over_the_broker_rate_waits_its_throttle():
    q, clock = quotas(max_connection_creation_rate=1)
    assert admitted(q, "10.0.0.1", 10) == 10       # the burst of a fresh rate
    waiting = gevent.spawn(q.inc, "PLAINTEXT", "10.0.0.1")
    gevent.sleep(0.01)
    assert not waiting.dead
    assert q.listeners["PLAINTEXT"].throttle.measure(clock.monotonic_ms()) == 1000
    clock.advance(1000)
    q.reconfigure()                                # wakes the acceptor, which finds its throttle over
    waiting.join(1)
    assert waiting.successful() and q.total == 11


def test_a_raised_limit_wakes_the_waiting_acceptor():
    q, _ = quotas(max_connections=1)
    q.inc("PLAINTEXT", "10.0.0.1")
    waiting = gevent.spawn(q.inc, "PLAINTEXT", "10.0.0.2")
    gevent.sleep(0.01)
    q.config.apply_dynamic({}, {"max.connections": "2"})
    q.reconfigure()
    waiting.join(1)
    assert waiting.successful()


def test_metrics():
    q, _ = quotas(**TWO_LISTENERS)
    q.update_ip_entity("10.0.0.1", {"connection_creation_rate": "1"})
    admitted(q, "10.0.0.1", 11)
    q.inc("INTERNAL", "10.0.0.2")
    q.closing_idle("PLAINTEXT")
    q.dec("PLAINTEXT", "10.0.0.1")
    families = {f.name: {tuple(s.labels.values()) + (s.name,): s.value for s in f.samples}
                for f in q.metric_families()}
    prefix = "kafka_server_socketservermetrics_"
    assert families[f"{prefix}connection_accept_rate"] == {
        ("INTERNAL", "", f"{prefix}connection_accept_rate"): 0.1,
        ("PLAINTEXT", "", f"{prefix}connection_accept_rate"): 1.0,
        ("", "10.0.0.1", f"{prefix}connection_accept_rate"): 1.0}
    assert families[f"{prefix}broker_connection_accept_rate"] == {(f"{prefix}broker_connection_accept_rate",): 1.0}
    ip_throttle = families[f"{prefix}ip_connection_accept_throttle_time"]
    assert ip_throttle[("PLAINTEXT", f"{prefix}ip_connection_accept_throttle_time")] == 1000
    assert math.isnan(ip_throttle[("INTERNAL", f"{prefix}ip_connection_accept_throttle_time")])
    assert families[f"{prefix}connection_creation"][("PLAINTEXT", f"{prefix}connection_creation_total")] == 10
    assert families[f"{prefix}connection_close"][("PLAINTEXT", f"{prefix}connection_close_total")] == 1
    assert families["kbroker_idle_connections_closed"][("PLAINTEXT", "kbroker_idle_connections_closed_total")] == 1
