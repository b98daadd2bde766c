"""Replication throttles as Kafka 2.8 applies them (KIP-73: ReplicationQuotaManager, ConfigHandler's broker and
topic handlers): three managers per broker, each a SimpleRate of the bytes it recorded with an upper bound.

- LeaderReplication: the bound is `leader.replication.throttled.rate`; the throttled partitions are the entries of
  the topic config `leader.replication.throttled.replicas` naming this broker. The leader answers a fetch from a
  follower that is not in the ISR with no records for a throttled partition while the rate is over the bound,
  and records the bytes of throttled partitions it sends to any follower (ISR included): ReplicaManager.
- FollowerReplication: `follower.replication.throttled.rate` and `follower.replication.throttled.replicas`. The
  follower leaves a throttled partition with lag > 0 (behind the leader's high watermark at its last fetch) out
  of its fetch while the rate is over, and records what it gets for throttled partitions: replica/fetcher.py.
- AlterLogDirsReplication: `replica.alter.log.dirs.io.max.bytes.per.second`; every byte the log dir mover copies
  counts, and it copies nothing while the rate is over: replica/log_dir_mover.py.

An in-sync replica is never throttled out of the ISR: the leader never holds back an ISR member, and a follower
caught up with the high watermark (lag 0) is never left out. A rate is taken over the time since its oldest
bucket started, at least one window (replication.quota.window.num buckets of replication.quota.window.size.seconds;
alter.log.dirs.replication.quota.window.* for the mover), with no initial burst; over the bound means strictly
above it (Kafka's Quota.acceptable).

The rates take effect only from this broker's own /config/brokers/<id> (or, as kbroker also takes them, its
server.properties); a value under /config/brokers/<default> is stored and described but not applied, as in Kafka
2.8 (KAFKA-10190). Unset means Long.MAX_VALUE, unthrottled. A topic's lists are `*` (every partition of the
topic) or `partition:broker,...`, of which each broker keeps the partitions listed with its own id; an empty or
absent value removes the throttle. Both are applied at start-up and on each change (kbroker.dynamic_config).

Kafka drops a sensor idle for an hour and makes a new one; a SimpleRate whose buckets all expired after
window.num windows measures the same, so kbroker keeps one rate per manager.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily

from ..common.broker_config import DYNAMIC_BROKER_CONFIGS
from ..common.config_def import MAX_LONG, checked_value, parse_checked
from ..common.topic_config import TOPIC_CONFIGS
from .stats import QuotaWindow, SimpleRate

if TYPE_CHECKING:
    from ..clock import Clock
    from ..config import BrokerConfig

LEADER, FOLLOWER, ALTER_LOG_DIRS = "LeaderReplication", "FollowerReplication", "AlterLogDirsReplication"
UNBOUNDED = MAX_LONG
# The broker configs bounding each manager, and the topic configs naming their throttled partitions.
RATE_CONFIGS = {LEADER: "leader.replication.throttled.rate", FOLLOWER: "follower.replication.throttled.rate",
                ALTER_LOG_DIRS: "replica.alter.log.dirs.io.max.bytes.per.second"}
REPLICAS_CONFIGS = {LEADER: "leader.replication.throttled.replicas",
                    FOLLOWER: "follower.replication.throttled.replicas"}
_NONE: frozenset[int] = frozenset()


class ReplicationQuotaManager:
    """One kind of replication throttle: its bound in bytes/s, the rate recorded against it, and the partitions
    it throttles by topic (None: all of the topic's)."""
    __slots__ = ("kind", "bound", "throttled", "_rate", "_now_ms")

    def __init__(self, kind: str, window: QuotaWindow, now_ms: Callable[[], int]):
        self.kind = kind
        self.bound = UNBOUNDED
        self.throttled: dict[str, frozenset[int] | None] = {}
        self._rate = SimpleRate(window)
        self._now_ms = now_ms

    def update_bound(self, bytes_per_second: int) -> None:
        self.bound = bytes_per_second

    def is_throttled(self, tp: tuple[str, int]) -> bool:
        partitions = self.throttled.get(tp[0], _NONE)
        return partitions is None or tp[1] in partitions

    def is_quota_exceeded(self) -> bool:
        """Whether the rate is now above the bound (never while unbounded)."""
        return self.bound < UNBOUNDED and self._rate.measure(self._now_ms()) > self.bound

    def record(self, nbytes: int) -> None:
        """Count bytes replicated, whether or not the rate is over (Kafka records without checking)."""
        self._rate.record(nbytes, self._now_ms())

    def byte_rate(self) -> float:
        return self._rate.measure(self._now_ms())

    def mark_throttled(self, topic: str, partitions: frozenset[int] | None) -> None:
        self.throttled[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self.throttled.pop(topic, None)


def throttled_partitions(name: str, value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replicas topic config throttles on this broker (ConfigHandler's
    parseThrottledPartitions): None for `*`, else those listed as `partition:<broker_id>`. InvalidConfigValueError
    (kbroker.common.admin_errors) for a value that is neither."""
    items = checked_value(name, TOPIC_CONFIGS[name], value)
    if items == ["*"]:
        return None
    pairs = (item.split(":") for item in items if item)   # (Kafka fails on an empty item between commas)
    return frozenset(int(p) for p, b in pairs if int(b) == broker_id)


class ReplicationQuotas:
    """The broker's three replication quota managers (Kafka's QuotaManagers leader, follower, alterLogDirs),
    bounded from its config and throttling the partitions its topics' configs name."""

    def __init__(self, config: BrokerConfig, clock: Clock):
        self.broker_id = config.broker_id
        now_ms = clock.monotonic_ms
        replication = QuotaWindow(config["replication.quota.window.num"],
                                  config["replication.quota.window.size.seconds"] * 1000)
        alter_log_dirs = QuotaWindow(config["alter.log.dirs.replication.quota.window.num"],
                                     config["alter.log.dirs.replication.quota.window.size.seconds"] * 1000)
        self.leader = ReplicationQuotaManager(LEADER, replication, now_ms)
        self.follower = ReplicationQuotaManager(FOLLOWER, replication, now_ms)
        self.alter_log_dirs = ReplicationQuotaManager(ALTER_LOG_DIRS, alter_log_dirs, now_ms)
        self.managers = (self.leader, self.follower, self.alter_log_dirs)
        self.update_bounds(config)

    def update_bounds(self, config: BrokerConfig) -> None:
        """Bound each manager by this broker's own dynamic value, else its server.properties value (never the
        cluster default: KAFKA-10190). The dynamic values were validated when the config loaded them."""
        for manager in self.managers:
            name = RATE_CONFIGS[manager.kind]
            raw = config.dynamic_broker.get(name)
            manager.update_bound(config.static_values[name] if raw is None
                                 else parse_checked(DYNAMIC_BROKER_CONFIGS[name], raw))

    def update_topic(self, topic: str, config: dict[str, str]) -> None:
        """Apply a topic's throttled-replicas configs (its whole /config/topics entry). Both are parsed before
        either applies: InvalidConfigValueError for a malformed list leaves the topic's throttles as they were."""
        parsed = {}
        for manager in (self.leader, self.follower):
            name = REPLICAS_CONFIGS[manager.kind]
            value = config.get(name, "").strip()
            parsed[manager] = throttled_partitions(name, value, self.broker_id) if value else _NONE
        for manager, partitions in parsed.items():
            if partitions is not None and not partitions:   # unset, empty, or no entry for this broker
                manager.remove_throttle(topic)
            else:
                manager.mark_throttled(topic, partitions)

    def metric_families(self):
        """`byte-rate` of each manager (Kafka's metric group LeaderReplication, FollowerReplication,
        AlterLogDirsReplication): kafka_server_leaderreplication_byte_rate, ..."""
        for manager in self.managers:
            yield GaugeMetricFamily(f"kafka_server_{manager.kind.lower()}_byte_rate",
                                    f"Bytes per second of throttled replication recorded by the {manager.kind} "
                                    f"quota (byte-rate).", value=manager.byte_rate())
