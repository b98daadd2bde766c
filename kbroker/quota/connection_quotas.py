"""Connection limits and connection-creation rates in one place, as Kafka 2.8's ConnectionQuotas (SocketServer.scala;
KIP-402, KIP-612): whether a new connection is served, waits, or is closed unserved.

On accept (`inc`, the listener's acceptor calls it before the next accept), in Kafka's order:
1. The broker-wide `max.connection.creation.rate` and the listener's (`listener.name.<l>.max.connection.creation.rate`,
   else the broker-wide value) record the connection; the inter-broker listener, when there are several listeners,
   records only its own rate. Over either, the acceptor waits the throttle time (capped at one quota window), then
   also until the listener has a free slot: fewer connections than its `max.connections`
   (`listener.name.<l>.max.connections`, else the broker-wide value) and, except on the protected inter-broker
   listener, fewer than `max.connections` broker-wide. While it waits it accepts nothing: later connections stay in
   the kernel's accept queue, as with Kafka's blocked Acceptor thread.
2. The per-IP `connection_creation_rate` (`/config/ips/<ip>`, else `/config/ips/<default>`; unlimited when neither
   is set, and then nothing is recorded per IP). Over it, the connection is un-recorded everywhere and
   ConnectionThrottled tells the acceptor to close it once the throttle time is over, never served.
3. `max.connections.per.ip` (or its `max.connections.per.ip.overrides` entry): at the limit, TooManyConnections: the
   connection is closed at once.
`dec` on close frees the slot and wakes a waiting acceptor. The protected listener may take the broker over
`max.connections`, and the limit may be lowered live: `excess` says how many connections the socket server closes
then, the least recently active first, never on the protected listener (Kafka's closeExcessConnections).

Rates are quota.stats' Rate over quota.window.num windows of quota.window.size.seconds (11 x 1 s): a fresh rate lets
about ten windows' worth of connections through at once, and a throttle is the time the rate needs to come back to
its bound, at most one window. An IP's rate unused for an hour is dropped (Kafka's sensor expiry), so it starts
afresh. Settings are read again by `reconfigure` when a dynamic broker config changes; IP quotas arrive through
`update_ip_entity` (kbroker.dynamic_config). Host names (in the overrides, as /config/ips names) are resolved when
the setting is read, as Kafka's InetAddress.getByName does.

Metrics (Kafka's socket-server-metrics, named by kbroker.metrics' rule): connection-accept-rate per listener and per
throttled IP, broker-connection-accept-rate, connection-accept-throttle-time and ip-connection-accept-throttle-time
per listener (averages of the non-zero throttles over Kafka's metrics window, 2 x 30 s), connection-creation-total
and connection-close-total per listener, and kbroker's own count of the connections closed for idleness.

Gevent-aware only in `inc`'s wait; everything else is plain state on the broker's one hub, changed between switches.
"""
from __future__ import annotations

import ipaddress
import logging
import socket

import gevent.event
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..common.broker_config import DEFAULT_ENTITY, parse_ip_overrides
from ..common.config_def import MAX_INT, parse_checked
from ..common.quota_config import IP_QUOTA_CONFIGS
from ..common.sanitizer import desanitize
from .stats import METRIC_WINDOW, Avg, QuotaWindow, Rate, throttle_time_ms

log = logging.getLogger("kbroker.quota")

IP_CONNECTION_RATE = "connection_creation_rate"    # the key of /config/ips/<ip> (common.quota_config's table)
IP_RATE_EXPIRATION_MS = 3600 * 1000                # an IP's rate unused this long starts afresh
_PREFIX = "kafka_server_socketservermetrics_"


class TooManyConnections(Exception):
    """The address already has max.connections.per.ip connections: close the new one at once."""

    def __init__(self, ip: str, limit: int):
        super().__init__(f"Too many connections from {ip} (maximum = {limit})")


class ConnectionThrottled(Exception):
    """The address is over its connection_creation_rate: close the new connection after throttle_ms, unserved."""

    def __init__(self, ip: str, throttle_ms: int):
        super().__init__(f"{ip} throttled for {throttle_ms} ms")
        self.throttle_ms = throttle_ms


def ip_address(host: str) -> str:
    """An address as connections are compared with it: an IP in its canonical text form, a host name resolved
    (Kafka's InetAddress.getByName); ValueError if it is neither."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return str(ipaddress.ip_address(socket.getaddrinfo(host, None)[0][4][0]))
    except (OSError, UnicodeError, ValueError, IndexError):
        raise ValueError(f"Unable to resolve address {host}") from None


class _Listener:
    """One listener's connection limits and figures (Kafka's ListenerConnectionQuota and its sensors)."""

    def __init__(self, window: QuotaWindow):
        self.max_connections = self.rate_quota = MAX_INT
        self.count = self.created = self.closed = self.closed_idle = 0
        self.rate = Rate(window)
        self.throttle, self.ip_throttle = Avg(METRIC_WINDOW), Avg(METRIC_WINDOW)


class ConnectionQuotas:
    def __init__(self, config, clock):
        """config: the broker's live BrokerConfig; clock: kbroker.clock.Clock (its monotonic milliseconds)."""
        self.config, self.clock = config, clock
        names = [listener.name for listener in config.listeners]
        # Kafka's protectedListener: the inter-broker listener, unless it is the only one, is never held back by
        # the broker-wide rate and count
        self.protected = config.inter_broker_listener if len(names) > 1 else None
        self.window = QuotaWindow(config["quota.window.num"], config["quota.window.size.seconds"] * 1000)
        self.listeners = {name: _Listener(self.window) for name in names}
        self.broker_rate = Rate(self.window)
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.ip_rates: dict[str, Rate] = {}           # only of the IPs with a connection_creation_rate
        self.ip_rate_quotas: dict[str, int] = {}      # from /config/ips/<ip>
        self.ip_rate_default = MAX_INT                # from /config/ips/<default>
        self._next_expiry_ms = 0
        self._waiting = 0
        self._changed = gevent.event.Event()
        self.reconfigure()

    # ---- settings -----------------------------------------------------------------------------------------
    def reconfigure(self) -> None:
        """Read the connection settings again (a dynamic broker config changed) and wake a waiting acceptor."""
        cfg = self.config
        self.max_connections = cfg["max.connections"]
        self.broker_rate_quota = cfg["max.connection.creation.rate"]
        self.max_per_ip = cfg["max.connections.per.ip"]
        overrides = {}
        for host, count in parse_ip_overrides(cfg["max.connections.per.ip.overrides"] or ""):
            try:
                overrides[ip_address(host)] = count
            except ValueError as e:
                log.error("max.connections.per.ip.overrides: %s; its entry is ignored", e)
        self.max_per_ip_overrides = overrides
        for name, listener in self.listeners.items():
            listener.max_connections = cfg.listener_value(name, "max.connections")
            listener.rate_quota = cfg.listener_value(name, "max.connection.creation.rate")
        self._notify()

    def update_ip_entity(self, name: str, config: dict[str, str]) -> None:
        """Apply /config/ips/<name> (its connection_creation_rate; none: the default applies again, or for
        <default> no limit). ValueError, changing nothing, for a name that is no address or a bad value."""
        raw = config.get(IP_CONNECTION_RATE)
        try:
            rate = None if raw is None else parse_checked(IP_QUOTA_CONFIGS[IP_CONNECTION_RATE], raw)
        except ValueError as e:
            raise ValueError(f"Invalid value {raw} for {IP_CONNECTION_RATE} of ip {name}: {e}") from None
        if name == DEFAULT_ENTITY:
            self.ip_rate_default = MAX_INT if rate is None else rate
            log.info("default connection creation rate per IP: %s", raw or "unlimited")
            return
        ip = ip_address(desanitize(name))
        if rate is None:
            self.ip_rate_quotas.pop(ip, None)
        else:
            self.ip_rate_quotas[ip] = rate
        log.info("connection creation rate of ip %s: %s", ip, raw or "the default")

    # ---- accept and close ---------------------------------------------------------------------------------
    def inc(self, listener: str, ip: str) -> None:
        """Admit a new connection from ip on listener, waiting while the broker or the listener is over its
        creation rate or has no free slot. ConnectionThrottled or TooManyConnections: it is not admitted."""
        self._wait_for_slot(listener)
        self._record_ip(listener, ip)
        count = self.per_ip.get(ip, 0)
        limit = self.max_per_ip_overrides.get(ip, self.max_per_ip)
        if count >= limit:
            raise TooManyConnections(ip, limit)
        self.per_ip[ip] = count + 1
        self.total += 1
        stats = self.listeners[listener]
        stats.count += 1
        stats.created += 1

    def dec(self, listener: str, ip: str) -> None:
        """An admitted connection closed."""
        count = self.per_ip.pop(ip, 0) - 1
        if count > 0:
            self.per_ip[ip] = count
        self.total -= 1
        stats = self.listeners[listener]
        stats.count -= 1
        stats.closed += 1
        if self._waiting:
            self._notify()

    def closing_idle(self, listener: str) -> None:
        """Count a connection the socket server closes for idleness (its dec follows)."""
        self.listeners[listener].closed_idle += 1

    def excess(self) -> int:
        """How many connections the broker holds over max.connections (its protected listener can take it there,
        or the limit was lowered): the socket server closes that many of the other listeners'."""
        return max(0, self.total - self.max_connections)

    def _slot_available(self, listener: str) -> bool:
        stats = self.listeners[listener]
        if stats.count >= stats.max_connections:
            return False
        return listener == self.protected or self.total < self.max_connections

    def _wait_for_slot(self, listener: str) -> None:
        """Kafka's waitForConnectionSlot: record the connection in the broker and listener rates, then wait out
        their throttle and until a slot is free."""
        start = self.clock.monotonic_ms()
        throttle = self._record_accept(listener, start)
        if throttle <= 0 and self._slot_available(listener):
            return
        log.debug("acceptor of %s waits (%d ms throttle, %d connections)", listener, throttle, self.total)
        end = start + throttle
        self._waiting += 1
        try:
            while True:
                remaining = end - self.clock.monotonic_ms()
                if remaining <= 0 and self._slot_available(listener):
                    return
                self._changed.wait(remaining / 1000 if remaining > 0 else None)
        finally:
            self._waiting -= 1

    def _notify(self) -> None:
        changed, self._changed = self._changed, gevent.event.Event()
        changed.set()

    # ---- rates --------------------------------------------------------------------------------------------
    def _throttle_ms(self, rate: Rate, quota: int, now_ms: int) -> int:
        """Record one connection; the time its rate needs to come back to quota, at most one window. No rate of
        connections reaches the default, unlimited, quota: it is not measured against it."""
        rate.record(1, now_ms)
        if quota >= MAX_INT:
            return 0
        measured = rate.measure(now_ms)
        if measured <= quota:
            return 0
        return min(throttle_time_ms(measured, quota, rate.window_size_ms(now_ms)), self.window.window_ms)

    def _record_accept(self, listener: str, now_ms: int) -> int:
        stats = self.listeners[listener]
        throttle = 0 if listener == self.protected else self._throttle_ms(self.broker_rate, self.broker_rate_quota,
                                                                          now_ms)
        throttle = max(throttle, self._throttle_ms(stats.rate, stats.rate_quota, now_ms))
        if throttle > 0:
            stats.throttle.record(throttle, now_ms)
        return throttle

    def _record_ip(self, listener: str, ip: str) -> None:
        """Kafka's recordIpConnectionMaybeThrottle: over the IP's rate, take the connection back from every rate
        and raise ConnectionThrottled."""
        quota = self.ip_rate_quotas.get(ip, self.ip_rate_default)
        if quota == MAX_INT:
            return
        now = self.clock.monotonic_ms()
        self._expire_ip_rates(now)
        rate = self.ip_rates.get(ip)
        if rate is None:
            rate = self.ip_rates[ip] = Rate(self.window)
        throttle = self._throttle_ms(rate, quota, now)
        if throttle > 0:
            stats = self.listeners[listener]
            for taken in (rate, stats.rate) if listener == self.protected else (rate, stats.rate, self.broker_rate):
                taken.record(-1, now)
            stats.ip_throttle.record(throttle, now)
            raise ConnectionThrottled(ip, throttle)

    def _expire_ip_rates(self, now_ms: int) -> None:
        """Drop the IP rates unused for IP_RATE_EXPIRATION_MS, looking at most once a minute."""
        if now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + 60000
        for ip in [ip for ip, rate in self.ip_rates.items() if now_ms - rate.idle_since_ms() >= IP_RATE_EXPIRATION_MS]:
            del self.ip_rates[ip]

    # ---- metrics ------------------------------------------------------------------------------------------
    def metric_families(self):
        now = self.clock.monotonic_ms()
        listeners = sorted(self.listeners.items())
        rates = GaugeMetricFamily(f"{_PREFIX}connection_accept_rate", "New connections per second, per listener and "
                                  "per IP with a connection_creation_rate (connection-accept-rate).",
                                  labels=["listener", "ip"])
        for name, stats in listeners:
            rates.add_metric([name, ""], stats.rate.measure(now))
        for ip, rate in sorted(self.ip_rates.items()):
            rates.add_metric(["", ip], rate.measure(now))
        yield rates
        yield GaugeMetricFamily(f"{_PREFIX}broker_connection_accept_rate", "New connections per second on the "
                                "listeners max.connection.creation.rate bounds (broker-connection-accept-rate).",
                                value=self.broker_rate.measure(now))
        for metric, attr, doc in (
                ("connection_accept_throttle_time", "throttle", "the broker's or the listener's connection rate"),
                ("ip_connection_accept_throttle_time", "ip_throttle", "an IP's connection_creation_rate")):
            family = GaugeMetricFamily(f"{_PREFIX}{metric}", f"Average of the non-zero throttles, in ms, of new "
                                       f"connections over {doc} in the last minute ({metric.replace('_', '-')}).",
                                       labels=["listener"])
            for name, stats in listeners:
                family.add_metric([name], getattr(stats, attr).measure(now))
            yield family
        for metric, attr, doc in (
                (f"{_PREFIX}connection_creation", "created", "Connections admitted (connection-creation-total)."),
                (f"{_PREFIX}connection_close", "closed", "Admitted connections closed (connection-close-total)."),
                ("kbroker_idle_connections_closed", "closed_idle",
                 "Connections closed after connections.max.idle.ms without a request or an answer.")):
            family = CounterMetricFamily(metric, doc, labels=["listener"])
            for name, stats in listeners:
                family.add_metric([name], getattr(stats, attr))
            yield family
