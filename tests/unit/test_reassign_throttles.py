"""kadmin reassign's throttles (admin_cli.reassign.reassignment_throttles): the configs kafka-reassign-partitions.sh
--throttle and --replica-alter-log-dirs-throttle write for a plan, computed as its ReassignPartitionsCommand does."""
from admin_cli.reassign import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, LOG_DIR_RATE,
                                reassignment_throttles)


def test_leader_lists_name_current_replicas_follower_lists_added_ones_rates_go_to_every_broker_involved():
    current = {("foo", 0): [1, 2, 3], ("foo", 10): [1, 2, 3], ("foo", 2): [4, 5, 6], ("bar", 0): [2, 3]}
    plan = {("foo", 0): [1, 2, 4], ("foo", 10): [1, 2, 3], ("foo", 2): [4, 5, 6], ("bar", 0): [7, 3]}
    t = reassignment_throttles(current, plan, {}, 1048576, None)
    # Each list sorted as strings (Kafka's TreeSet[String]): "10:1" before "2:4"; a topic adding nothing: "".
    assert t.topics == {
        "bar": {LEADER_REPLICAS: "0:2,0:3", FOLLOWER_REPLICAS: "0:7"},
        "foo": {LEADER_REPLICAS: "0:1,0:2,0:3,10:1,10:2,10:3,2:4,2:5,2:6", FOLLOWER_REPLICAS: "0:4"}}
    rate = {LEADER_RATE: "1048576", FOLLOWER_RATE: "1048576"}
    assert t.brokers == {b: rate for b in (1, 2, 3, 4, 5, 6, 7)}
    unchanged = reassignment_throttles({("t", 0): [1]}, {("t", 0): [1]}, {}, 0, None)
    assert unchanged.topics == {"t": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: ""}}


def test_log_dir_throttle_goes_to_the_brokers_of_the_moves_only():
    current, plan = {("t", 0): [1, 2]}, {("t", 0): [1, 3]}
    moves = {("t", 0, 3): "/d1", ("t", 0, 1): "/d2"}
    t = reassignment_throttles(current, plan, moves, None, 500)
    assert (t.topics, t.brokers) == ({}, {1: {LOG_DIR_RATE: "500"}, 3: {LOG_DIR_RATE: "500"}})
    both = reassignment_throttles(current, plan, moves, 100, 500)
    assert both.brokers == {1: {LEADER_RATE: "100", FOLLOWER_RATE: "100", LOG_DIR_RATE: "500"},
                            2: {LEADER_RATE: "100", FOLLOWER_RATE: "100"},
                            3: {LEADER_RATE: "100", FOLLOWER_RATE: "100", LOG_DIR_RATE: "500"}}
