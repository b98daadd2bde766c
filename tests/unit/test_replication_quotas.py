"""kbroker.quota.replication_quotas: Kafka 2.8's replication throttles (KIP-73) on a driven clock: the bound, the
throttled partitions parsed from the topic configs, the rates bound from this broker's own dynamic config only."""
import re

import pytest

from kbroker.clock import MockClock
from kbroker.common.admin_errors import InvalidConfigValueError
from kbroker.config import BrokerConfig
from kbroker.quota.replication_quotas import UNBOUNDED, ReplicationQuotas, throttled_partitions

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


def broker(broker_id: int = 1, **static) -> BrokerConfig:
    return BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(broker_id),
                         **{k.replace("_", "."): str(v) for k, v in static.items()}})


def test_each_broker_keeps_the_partitions_listed_with_its_own_id():
    assert throttled_partitions(LEADER_REPLICAS, "*", 1) is None
    assert throttled_partitions(LEADER_REPLICAS, " 0:1, 1:2,2:1 ,10:1", 1) == {0, 2, 10}
    assert throttled_partitions(FOLLOWER_REPLICAS, "0:2,1:3", 1) == frozenset()
    assert throttled_partitions(FOLLOWER_REPLICAS, "0:1,,1:1", 1) == {0, 1}
    for bad in ("0-1", "*,0:1", "x:1", "0:1:2"):
        message = f"Invalid value {bad} for configuration {LEADER_REPLICAS}: must be the literal '*'"
        with pytest.raises(InvalidConfigValueError, match=re.escape(message)):
            throttled_partitions(LEADER_REPLICAS, bad, 1)


def test_the_rate_is_over_only_strictly_above_the_bound_and_never_while_unbounded():
    clock = MockClock(monotonic_ms=50_000)
    quotas = ReplicationQuotas(broker(), clock)
    leader = quotas.leader
    assert leader.bound == UNBOUNDED
    leader.record(10 ** 12)
    assert not leader.is_quota_exceeded()
    quotas = ReplicationQuotas(broker(), clock)
    leader = quotas.leader
    leader.update_bound(1000)
    leader.record(1000)                       # 1000 B over the one-window minimum: at the bound
    assert not leader.is_quota_exceeded() and leader.byte_rate() == 1000.0
    leader.record(1)
    assert leader.is_quota_exceeded()
    clock.advance(2000)                       # 1001 B over 2 s: no initial burst, no padding
    assert leader.byte_rate() == pytest.approx(500.5) and not leader.is_quota_exceeded()
    clock.advance(11_000)                     # every bucket older than 11 windows: nothing left
    assert leader.byte_rate() == 0.0


def test_rates_come_from_the_broker_own_entity_else_server_properties_never_the_default():
    config = broker(**{LEADER_RATE: 5000})
    quotas = ReplicationQuotas(config, MockClock())
    assert (quotas.leader.bound, quotas.follower.bound, quotas.alter_log_dirs.bound) == (5000, UNBOUNDED, UNBOUNDED)
    config.apply_dynamic({LEADER_RATE: "10", FOLLOWER_RATE: "20", LOG_DIRS_RATE: "30"}, {FOLLOWER_RATE: "200"})
    quotas.update_bounds(config)              # KAFKA-10190: <default> is described but not applied
    assert (quotas.leader.bound, quotas.follower.bound, quotas.alter_log_dirs.bound) == (5000, 200, UNBOUNDED)
    config.apply_dynamic({}, {LEADER_RATE: "1", LOG_DIRS_RATE: "3"})
    quotas.update_bounds(config)
    assert (quotas.leader.bound, quotas.follower.bound, quotas.alter_log_dirs.bound) == (1, UNBOUNDED, 3)


def test_topic_configs_mark_remove_and_a_malformed_list_changes_nothing():
    quotas = ReplicationQuotas(broker(2), MockClock())
    leader, follower = quotas.leader, quotas.follower
    quotas.update_topic("t", {LEADER_REPLICAS: "0:1,0:2,1:2", FOLLOWER_REPLICAS: "*", "retention.ms": "5"})
    assert [leader.is_throttled(("t", p)) for p in range(3)] == [True, True, False]
    assert follower.is_throttled(("t", 7)) and not follower.is_throttled(("u", 0))
    with pytest.raises(InvalidConfigValueError):
        quotas.update_topic("t", {LEADER_REPLICAS: "", FOLLOWER_REPLICAS: "0-1"})
    assert leader.is_throttled(("t", 0)) and follower.is_throttled(("t", 7))
    quotas.update_topic("t", {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: " "})   # none here; empty removes
    assert leader.throttled == {} and follower.throttled == {}


def test_each_manager_exposes_its_byte_rate_under_kafka_names():
    quotas = ReplicationQuotas(broker(), MockClock())
    quotas.follower.record(3000)
    families = {f.name: f.samples[0].value for f in quotas.metric_families()}
    assert families == {"kafka_server_leaderreplication_byte_rate": 0.0,
                        "kafka_server_followerreplication_byte_rate": 3000.0,
                        "kafka_server_alterlogdirsreplication_byte_rate": 0.0}
