"""Client quotas as Kafka 2.8 enforces them: ClientQuotaManager (Produce and Fetch byte rates),
ClientRequestQuotaManager (request_percentage) and ControllerMutationQuotaManager (controller_mutation_rate,
KIP-599), and the broker's four of them (ClientQuotaManagers, Kafka's QuotaManagers).

Entities and precedence (KIP-55): a quota is set on /config/users/<user>[/clients/<client-id>] or
/config/clients/<client-id>, each name possibly <default>; users are named by their sanitized principal name
(kbroker.common.sanitizer), client ids unsanitized here. Each manager keeps its own quotas, so each type resolves
separately: a level applies only if its entity has that type's key. A request's (user, client id) picks its
sensor tags by the first of the eight levels that exists (users/u/clients/c, users/u/clients/<default>, users/u,
users/<default>/clients/c, users/<default>/clients/<default>, users/<default>, clients/c, clients/<default>; then
the static quota.producer.default / quota.consumer.default): tags (u, c), (u, c), (u, ""), (u, c), (u, c),
(u, ""), ("", c), ("", c). Equal tags share one sensor, so a default gives every user or client its own full
quota. While only one kind of entity was ever set (Kafka's QuotaTypes), the tags are fixed without a lookup.

Measurement: a sensor per tags records into a kbroker.quota.stats Rate of quota.window.num windows of
quota.window.size.seconds (the controller's own pair for mutations) and is checked against the bound of the first
level that has one (unlimited otherwise); the throttle is Kafka's round((rate - bound) / bound x window), capped at
one window for request_percentage. Nothing is recorded until a static default is set or any user or client
entity was processed (even one without a quota, as Kafka), so a broker without quotas pays one attribute read per
request. Sensors unused for an hour are dropped (expire()), as Kafka's metrics do; a new one gets the initial
burst again. A throttle given to a client is recorded in its throttle-time average and in the manager's queue of
throttles in force (queue-size), as Kafka's ThrottledChannelReaper counts muted channels.

Request time (request_percentage) is the time the request's greenlet ran on the broker's loop (the gevent hub)
while it was handled, as a percentage of one thread per second: a greenlet switch tracer (installed once request
quotas are enabled) adds up each timed greenlet's running stretches, so waits in a purgatory, for ZooKeeper or
for the socket count for nothing, as an I/O thread's blocking does not in Kafka's measurement of its own threads.
"""
from __future__ import annotations

import heapq
import logging
import math
import time

from greenlet import getcurrent, settrace
from prometheus_client.core import GaugeMetricFamily

from ..common.broker_config import DEFAULT_ENTITY
from ..common.config_def import parse_checked
from ..common.quota_config import CLIENT_QUOTA_CONFIGS
from ..common.sanitizer import desanitize, sanitize
from .stats import METRIC_WINDOW, Avg, QuotaWindow, Rate, TokenBucket, throttle_time_ms, token_throttle_time_ms

log = logging.getLogger("kbroker.quota")

PRODUCE, FETCH, REQUEST, CONTROLLER_MUTATION = "Produce", "Fetch", "Request", "ControllerMutation"
# Entity config key (common.quota_config's table: types and checks) -> the quota type it sets
QUOTA_TYPES = {"producer_byte_rate": PRODUCE, "consumer_byte_rate": FETCH, "request_percentage": REQUEST,
               "controller_mutation_rate": CONTROLLER_MUTATION}
UNLIMITED = math.inf
SENSOR_EXPIRY_MS = 3600 * 1000            # Kafka's InactiveSensorExpirationTimeSeconds
THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."

# Which kinds of entity were ever configured (Kafka's QuotaTypes): decides how sensor tags are found
_CLIENT_LEVEL, _USER_LEVEL, _USER_CLIENT_LEVEL = 1, 2, 4
_DEFAULT_CLIENT = object()   # the <default> client-id entity (a client may be named "<default>")


class Sensor:
    """One (user, client-id) tag pair of a manager: what it recorded (a Rate, or a TokenBucket for mutations), its
    bound, when it was last used, and the average of the throttles it got. headroom: how much more may be recorded
    before the rate could pass the bound, so the check is not needed until then (a rate is taken over at least
    samples - 1 windows, and what expires only lowers it); 0 forces the next check."""
    __slots__ = ("bound", "headroom", "last_ms", "rate", "stat", "throttles")

    def __init__(self, stat, bound: float, now_ms: int):
        self.stat, self.bound, self.last_ms = stat, bound, now_ms
        self.headroom = 0.0
        self.throttles: Avg | None = None
        self.rate: Rate | None = None            # ControllerMutation's mutation-rate beside its token bucket


class ClientQuotaManager:
    """Kafka's ClientQuotaManager of one quota type (Produce or Fetch: byte-rate)."""
    metric = "byte-rate"

    def __init__(self, kind: str, window: QuotaWindow, clock, static_default: float | None = None):
        """static_default: quota.producer.default / quota.consumer.default (None: Long.MaxValue, unset)."""
        self.kind, self.window, self.clock = kind, window, clock
        self.static_default = static_default
        self._levels = 0 if static_default is None else _CLIENT_LEVEL
        self.enabled = static_default is not None      # Kafka's quotasEnabled
        self._quotas: dict[tuple, float] = {}           # (user, client) entity -> bound; None for a missing part
        self.sensors: dict[tuple[str, str], Sensor] = {}
        self._throttled: list[int] = []                 # heap of when the throttles in force end (queue-size)

    # ---- configuration ----------------------------------------------------------------------------------------
    def update_quota(self, user: str | None, client_id, quota: float | None) -> None:
        """Set (or with None remove) the quota of an entity: user is the sanitized user or <default> (None for a
        client-id entity), client_id the client id or _DEFAULT_CLIENT (None for a user entity). Live sensors take
        their new bound at once (Kafka's updateQuotaMetricConfigs)."""
        if user is None:
            self._levels |= _CLIENT_LEVEL
        else:
            self._levels |= _USER_LEVEL if client_id is None else _USER_CLIENT_LEVEL
        self.enabled = True
        if quota is None:
            self._quotas.pop((user, client_id), None)
        else:
            self._quotas[(user, client_id)] = quota
        for tags, sensor in self.sensors.items():
            sensor.bound, sensor.headroom = self._bound(tags), 0.0

    def tags(self, user: str, client_id: str | None) -> tuple[str, str]:
        """The (user, client-id) tags of a request's sensor: by the first of the eight levels that exists
        (Kafka's DefaultQuotaCallback.quotaMetricTags)."""
        client_id = client_id or ""
        levels = self._levels
        if levels <= _CLIENT_LEVEL:
            return "", client_id
        if levels == _USER_LEVEL:
            return user, ""
        if levels == _USER_CLIENT_LEVEL:
            return user, client_id
        quotas = self._quotas
        if (user, client_id) in quotas or (user, _DEFAULT_CLIENT) in quotas:
            return user, client_id
        if (user, None) in quotas:
            return user, ""
        if (DEFAULT_ENTITY, client_id) in quotas or (DEFAULT_ENTITY, _DEFAULT_CLIENT) in quotas:
            return user, client_id
        if (DEFAULT_ENTITY, None) in quotas:
            return user, ""
        return "", client_id

    def _limit(self, user_tag: str, client_tag: str) -> float | None:
        """The bound of a sensor's tags: the first level of its kind that has one (Kafka's quotaLimit), None if
        none does."""
        static = None
        if user_tag and client_tag:
            keys = ((user_tag, client_tag), (user_tag, _DEFAULT_CLIENT), (DEFAULT_ENTITY, client_tag),
                    (DEFAULT_ENTITY, _DEFAULT_CLIENT))
        elif user_tag:
            keys = ((user_tag, None), (DEFAULT_ENTITY, None))
        elif client_tag:
            keys, static = ((None, client_tag), (None, _DEFAULT_CLIENT)), self.static_default
        else:
            return None
        for key in keys:
            quota = self._quotas.get(key)
            if quota is not None:
                return quota
        return static

    def _bound(self, tags: tuple[str, str]) -> float:
        limit = self._limit(*tags)
        return UNLIMITED if limit is None else limit

    def quota(self, user: str, client_id: str | None) -> float:
        """The bound that applies to a user and client id (UNLIMITED when no level has one)."""
        return self._bound(self.tags(user, client_id))

    # ---- recording --------------------------------------------------------------------------------------------
    def _new_stat(self):
        return Rate(self.window)

    def _sensor(self, user: str, client_id: str | None, now_ms: int) -> Sensor:
        tags = self.tags(user, client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = Sensor(self._new_stat(), self._bound(tags), now_ms)
        return sensor

    def record(self, user: str, client_id: str | None, value: float) -> int:
        """Record value for the user and client id, then check the quota: the throttle time in ms, 0 within it or
        while quotas are not enabled (Kafka's maybeRecordAndGetThrottleTimeMs)."""
        if not self.enabled:
            return 0
        now = self.clock.monotonic_ms()
        sensor = self.sensors.get(self.tags(user, client_id)) or self._sensor(user, client_id, now)
        sensor.last_ms = now
        rate = sensor.stat
        rate.record(value, now)
        sensor.headroom -= value
        if sensor.headroom > 0:       # (the common case, kept short: this runs for every request)
            return 0
        bound = sensor.bound
        measured, size = rate.measure_window(now)
        if measured > bound:
            return self._throttle_time(measured, bound, size)
        # measured x size is what the window holds; it could pass the bound only over the shortest window
        sensor.headroom = bound * (self.window.samples - 1) * self.window.window_ms / 1000.0 - measured * size / 1000.0
        return 0

    def _throttle_time(self, measured: float, bound: float, window_size_ms: int) -> int:
        return throttle_time_ms(measured, bound, window_size_ms)

    def unrecord(self, user: str, client_id: str | None, value: float) -> None:
        """Take back what record() added (a throttled Fetch sends no data)."""
        if self.enabled:
            now = self.clock.monotonic_ms()
            sensor = self._sensor(user, client_id, now)
            sensor.stat.record(-value, now)
            sensor.headroom = 0.0     # the bound on what expiry can do assumes nothing negative was recorded

    def max_value_in_window(self, user: str, client_id: str | None) -> float:
        """The most a client may get at once within its quota: bound x (samples - 1) x window seconds (Kafka's
        getMaxValueInQuotaWindow, the cap of a consumer's Fetch max_bytes); UNLIMITED without a bound."""
        if not self.enabled:
            return UNLIMITED
        bound = self._sensor(user, client_id, self.clock.monotonic_ms()).bound
        return bound * (self.window.samples - 1) * self.window.window_ms / 1000.0

    def throttled(self, user: str, client_id: str | None, ms: int) -> None:
        """A response of this client carries this throttle and its connection stays muted meanwhile (Kafka's
        throttle(): the throttle-time average and the queue of throttled channels)."""
        now = self.clock.monotonic_ms()
        sensor = self._sensor(user, client_id, now)
        if sensor.throttles is None:
            sensor.throttles = Avg(METRIC_WINDOW)
        sensor.throttles.record(ms, now)
        self._in_force(now)
        heapq.heappush(self._throttled, now + ms)

    def _in_force(self, now_ms: int) -> int:
        """How many throttles are still in force (the ended ones leave the queue)."""
        queue = self._throttled
        while queue and queue[0] <= now_ms:
            heapq.heappop(queue)
        return len(queue)

    def expire(self) -> None:
        """Drop the sensors unused for an hour (Kafka's ExpireSensorTask)."""
        now = self.clock.monotonic_ms()
        for tags in [t for t, s in self.sensors.items() if now - s.last_ms > SENSOR_EXPIRY_MS]:
            del self.sensors[tags]

    # ---- metrics ----------------------------------------------------------------------------------------------
    def _family(self, metric: str, doc: str, labelled: bool = True) -> GaugeMetricFamily:
        """A gauge named after Kafka's metric kafka.server:type=<kind>,user=..,client-id=.. <metric>."""
        name = f"kafka_server_{self.kind.lower()}_{metric.replace('-', '_')}"
        return GaugeMetricFamily(name, doc, labels=["user", "client_id"] if labelled else None)

    def metric_families(self):
        """The Prometheus families of this manager's sensors: the measured value of each, its throttle-time
        average (ms, NaN without a throttle in the last minute), and the throttles in force (queue-size)."""
        now = self.clock.monotonic_ms()
        value = self._family(self.metric, f"{self.kind} quota measure per user and client id ({self.metric}).")
        throttle = self._family("throttle-time", f"Average {self.kind} throttle time in ms given in the last "
                                                 f"minute per user and client id (throttle-time).")
        for (user, client_id), sensor in sorted(self.sensors.items()):
            labels = [user, client_id]
            value.add_metric(labels, self._measure(sensor, now))
            throttle.add_metric(labels, sensor.throttles.measure(now) if sensor.throttles else math.nan)
        yield value
        yield throttle
        yield GaugeMetricFamily(f"kafka_server_{self.kind.lower()}_queue_size", f"Connections muted by a {self.kind} "
                                f"throttle now (queue-size).", value=self._in_force(now))
        yield from self._more_metrics(now)

    def _measure(self, sensor: Sensor, now_ms: int) -> float:
        return sensor.stat.measure(now_ms)

    def _more_metrics(self, now_ms: int):
        return ()


class LoopTime:
    """The time greenlets run on the loop while timed: a greenlet switch tracer adds up each timed greenlet's
    running stretches (timing a greenlet again starts it afresh)."""

    def __init__(self):
        self._timed: dict = {}        # greenlet -> [seconds run before the current stretch, current stretch start]
        self._previous = None
        self._installed = False

    def _trace(self, event, args) -> None:
        origin, target = args            # "switch" and "throw" events alike
        timed = self._timed
        if origin in timed or target in timed:      # (most switches are between untimed greenlets)
            now = time.perf_counter()
            stretch = timed.get(origin)
            if stretch is not None:
                stretch[0] += now - stretch[1]
            stretch = timed.get(target)
            if stretch is not None:
                stretch[1] = now
        if self._previous is not None:
            self._previous(event, args)

    def start(self):
        """Time the current greenlet from now on; the token to stop()."""
        if not self._installed:
            self._previous = settrace(self._trace)
            self._installed = True
        current = getcurrent()
        self._timed[current] = [0.0, time.perf_counter()]
        return current

    def stop(self, token) -> float:
        """Seconds the greenlet ran since start() (it is running now)."""
        stretch = self._timed.pop(token, None)
        return 0.0 if stretch is None else stretch[0] + time.perf_counter() - stretch[1]

    def uninstall(self) -> None:
        """Take the tracer off every greenlet switch (no request is timed any more)."""
        if self._installed:
            settrace(self._previous)
            self._previous, self._installed = None, False
            self._timed.clear()


class ClientRequestQuotaManager(ClientQuotaManager):
    """Kafka's ClientRequestQuotaManager: request_percentage, the time spent on a client's requests as a
    percentage of one thread (the loop) per second; throttles are capped at one window. Exempt requests
    (cluster actions, follower fetches, acks=0 produces) are only counted in exempt-request-time."""
    metric = "request-time"

    def __init__(self, window: QuotaWindow, clock):
        super().__init__(REQUEST, window, clock)
        self.loop_time = LoopTime()
        self.exempt = Rate(METRIC_WINDOW)

    def start_timer(self):
        """Start timing the current greenlet's request (a token for stop_timer); None while no entity has a
        request_percentage. Kafka times every request once any client quota exists; here the switch tracer that
        times them costs the whole broker about 5 % of its CPU per small request, so byte-rate quotas alone do not
        pay it (the request-time metrics then stay empty)."""
        return self.loop_time.start() if self._quotas else None

    def update_quota(self, user: str | None, client_id, quota: float | None) -> None:
        super().update_quota(user, client_id, quota)
        if not self._quotas:
            self.loop_time.uninstall()

    def stop_timer(self, timer) -> float:
        """The loop time of a timed request in Kafka's unit: percent of one thread-second."""
        return self.loop_time.stop(timer) * 100.0

    def record_exempt(self, timer) -> None:
        self.exempt.record(self.stop_timer(timer), self.clock.monotonic_ms())

    def _throttle_time(self, measured: float, bound: float, window_size_ms: int) -> int:
        return min(throttle_time_ms(measured, bound, window_size_ms), self.window.window_ms)

    def _more_metrics(self, now_ms: int):
        yield GaugeMetricFamily("kafka_server_request_exempt_request_time", "Loop time of requests exempt from "
                                "request quotas, in percent of one thread (exempt-request-time).",
                                value=self.exempt.measure(now_ms))


class ThrottlingQuotaExceeded(Exception):
    """A strict controller mutation quota refused a topic (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, throttle_ms: int):
        super().__init__(THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        self.throttle_ms = throttle_ms


class ControllerMutationQuota:
    """One request's controller mutation quota (Kafka's Strict- and PermissiveControllerMutationQuota). record()
    takes a topic's partitions out of the client's token bucket: a strict quota first refuses when the bucket is
    below zero (ThrottlingQuotaExceeded; one topic may overdraw it), a permissive one always records and notes
    the throttle when the bucket went below zero. throttle_time_ms() is that throttle less the time since."""

    def __init__(self, manager: ControllerMutationQuotaManager, sensor: Sensor | None, strict: bool):
        self.manager, self.sensor, self.strict = manager, sensor, strict
        self._throttle_ms = self._recorded_ms = 0

    def record(self, permits: float) -> None:
        sensor = self.sensor
        if sensor is None:
            return
        now = self.manager.clock.monotonic_ms()
        sensor.last_ms = now
        bound = sensor.bound
        if self.strict and bound != UNLIMITED:
            tokens = sensor.stat.tokens(bound, now)
            if tokens < 0:
                self._throttle_ms, self._recorded_ms = token_throttle_time_ms(tokens, bound), now
                raise ThrottlingQuotaExceeded(self._throttle_ms)
        sensor.rate.record(permits, now)
        if bound == UNLIMITED:
            return
        sensor.stat.record(permits, bound, now)
        tokens = sensor.stat.tokens(bound, now)
        if not self.strict and tokens < 0:
            self._throttle_ms, self._recorded_ms = token_throttle_time_ms(tokens, bound), now

    def throttle_time_ms(self) -> int:
        elapsed = self.manager.clock.monotonic_ms() - self._recorded_ms
        return max(0, self._throttle_ms - elapsed)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """Kafka's ControllerMutationQuotaManager (KIP-599): controller_mutation_rate, partitions created, added or
    deleted per second, in a token bucket per sensor (burst: samples x window x rate)."""
    metric = "tokens"

    def __init__(self, window: QuotaWindow, clock):
        super().__init__(CONTROLLER_MUTATION, window, clock)

    def _new_stat(self):
        return TokenBucket(self.window)

    def new_quota(self, user: str, client_id: str | None, strict: bool) -> ControllerMutationQuota:
        """The quota of one CreateTopics, DeleteTopics or CreatePartitions request (strict from the versions that
        know THROTTLING_QUOTA_EXCEEDED); unbounded while quotas are not enabled."""
        if not self.enabled:
            return ControllerMutationQuota(self, None, strict)
        sensor = self._sensor(user, client_id, self.clock.monotonic_ms())
        if sensor.rate is None:
            sensor.rate = Rate(METRIC_WINDOW)
        return ControllerMutationQuota(self, sensor, strict)

    def _measure(self, sensor: Sensor, now_ms: int) -> float:
        return sensor.stat.tokens(sensor.bound, now_ms) if sensor.bound != UNLIMITED else UNLIMITED

    def _more_metrics(self, now_ms: int):
        rate = self._family("mutation-rate", "Partitions created, added or deleted per second per user and client "
                                             "id (mutation-rate).")
        for (user, client_id), sensor in sorted(self.sensors.items()):
            rate.add_metric([user, client_id], sensor.rate.measure(now_ms) if sensor.rate else 0.0)
        yield rate


class ClientQuotaManagers:
    """A broker's client quota managers (the client half of Kafka's QuotaManagers), from its settings:
    quota.window.num and quota.window.size.seconds (controller.quota.window.* for mutations) and the deprecated
    static defaults quota.producer.default and quota.consumer.default."""

    def __init__(self, config, clock):
        """config: the broker's settings (config[name]); clock: monotonic_ms() for the windows."""
        window = QuotaWindow(config["quota.window.num"], config["quota.window.size.seconds"] * 1000)

        def static(name: str) -> float | None:
            value = config[name]
            return None if value >= 2 ** 63 - 1 else float(value)
        self.produce = ClientQuotaManager(PRODUCE, window, clock, static("quota.producer.default"))
        self.fetch = ClientQuotaManager(FETCH, window, clock, static("quota.consumer.default"))
        self.request = ClientRequestQuotaManager(window, clock)
        self.controller_mutation = ControllerMutationQuotaManager(
            QuotaWindow(config["controller.quota.window.num"], config["controller.quota.window.size.seconds"] * 1000),
            clock)
        self._by_type = {PRODUCE: self.produce, FETCH: self.fetch, REQUEST: self.request,
                         CONTROLLER_MUTATION: self.controller_mutation}
        self._users: dict[str, str] = {}

    def user(self, principal: str) -> str:
        """The quota user of a principal ("User:<name>"): its sanitized name, as Kafka's session.sanitizedUser."""
        user = self._users.get(principal)
        if user is None:
            if len(self._users) >= 10_000:
                self._users.clear()
            user = self._users[principal] = sanitize(principal.partition(":")[2])
        return user

    def update(self, user: str | None, client: str | None, config: dict[str, str]) -> dict[str, float]:
        """Apply the config of one entity, named as its znode path is: user the sanitized user or <default> (None
        for /config/clients/..), client the sanitized client id or <default> (None for /config/users/<u>). Every
        quota type the config has no key for is removed from that entity (Kafka's QuotaConfigHandler). ValueError,
        changing nothing, when a quota value is not a non-negative number of its type. Returns the quotas set."""
        quotas = {}
        for key, kind in QUOTA_TYPES.items():
            raw = config.get(key)
            if raw is None:
                continue
            try:
                quotas[kind] = float(parse_checked(CLIENT_QUOTA_CONFIGS[key], str(raw)))
            except ValueError as e:
                raise ValueError(f"{key}={raw!r}: {e}") from None
        client_id = None if client is None else _DEFAULT_CLIENT if client == DEFAULT_ENTITY else desanitize(client)
        for kind, manager in self._by_type.items():
            manager.update_quota(user, client_id, quotas.get(kind))
        return quotas

    def expire(self) -> None:
        for manager in self._by_type.values():
            manager.expire()

    def metric_families(self):
        for manager in self._by_type.values():
            yield from manager.metric_families()
