"""zk.assignment: Kafka's rack-unaware and rack-aware replica assignment, pinned to hand-computed tables, plus the
properties it must keep for any start index and shift; and explicit --replica-assignment parsing/checks."""
import itertools
from collections import Counter

import pytest

from zk.assignment import assign_replicas, check_assignment, parse_replica_assignment, rack_alternated
from kbroker.common.admin_errors import AdminError


def test_five_brokers_ten_partitions_rf3_start0_shift0():
    # By hand: leader of p = brokers[p % 5]; shift 0 for p0..p4, 1 for p5..p9;
    # follower j of p at (leader_index + 1 + (shift + j) % 4) % 5.
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, shift=0) == expected


def test_unsorted_sparse_ids_start2_shift1():
    # Brokers are sorted first: [10, 20, 30, 40]. Leaders from index 2; shift 1 for p0..p3, 2 for p4, p5.
    expected = {
        0: [30, 10, 20],
        1: [40, 20, 30],
        2: [10, 30, 40],
        3: [20, 40, 10],
        4: [30, 20, 40],
        5: [40, 30, 10],
    }
    assert assign_replicas([40, 10, 30, 20], 6, 3, start_index=2, shift=1) == expected


def test_shift_wraps_modulo_n_minus_1():
    # 3 brokers, shift 5: (5 + 0) % 2 = 1 -> follower two after the leader.
    assert assign_replicas([1, 2, 3], 3, 2, start_index=0, shift=5) == {0: [1, 3], 1: [2, 1], 2: [3, 2]}


def test_single_broker_rf1():
    assert assign_replicas([7], 3, 1) == {0: [7], 1: [7], 2: [7]}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("rf", [1, 2, 3])
@pytest.mark.parametrize("partitions", [1, 4, 12, 30])
def test_properties_for_every_start_and_shift(n, rf, partitions):
    if rf > n:
        return
    brokers = list(range(100, 100 + n))
    for start in range(n):
        for shift in range(n):
            a = assign_replicas(brokers, partitions, rf, start_index=start, shift=shift)
            assert sorted(a) == list(range(partitions))
            for replicas in a.values():
                assert len(replicas) == rf and len(set(replicas)) == rf
                assert set(replicas) <= set(brokers)
            leaders = Counter(r[0] for r in a.values())
            counts = [leaders.get(b, 0) for b in brokers]
            assert max(counts) - min(counts) <= 1
            if partitions % n == 0:
                # Each full round of n partitions puts exactly rf replicas on every broker.
                load = Counter(b for r in a.values() for b in r)
                assert all(load[b] == partitions * rf // n for b in brokers)


def test_random_defaults_keep_the_properties():
    for _ in range(50):
        a = assign_replicas([1, 2, 3, 4], 8, 3)
        assert all(len(set(r)) == 3 for r in a.values())
        assert Counter(r[0] for r in a.values()) == {1: 2, 2: 2, 3: 2, 4: 2}


def test_random_defaults_vary():
    seen = {tuple(map(tuple, assign_replicas([1, 2, 3, 4, 5], 5, 3).values())) for _ in range(200)}
    assert len(seen) > 1


def test_rf_larger_than_brokers():
    with pytest.raises(AdminError, match=r"^Replication factor: 3 larger than available brokers: 1\.$"):
        assign_replicas([1], 1, 3)
    with pytest.raises(AdminError, match="larger than available brokers: 0"):
        assign_replicas([], 1, 1)


@pytest.mark.parametrize("partitions, rf, message", [(0, 1, "partitions"), (-1, 1, "partitions"),
                                                     (1, 0, "Replication factor"), (1, -2, "Replication factor")])
def test_non_positive_counts(partitions, rf, message):
    with pytest.raises(AdminError, match=message):
        assign_replicas([1, 2], partitions, rf)


def test_a_count_whose_assignment_cannot_fit_in_a_znode_is_refused_at_once():
    """A CreatePartitions count with a bit flipped (2**24 + 3) held the broker for minutes computing an
    assignment ZooKeeper could never store; it is INVALID_PARTITIONS now, a count that fits still passes."""
    with pytest.raises(AdminError, match="would not fit in the topic's znode") as refused:
        assign_replicas([1, 2, 3], 2 ** 24 + 3, 3, start_partition=3)
    assert refused.value.code == 37
    assert len(assign_replicas([1, 2, 3], 20000, 3)) == 20000


def test_parse_replica_assignment():
    assert parse_replica_assignment("1:2,2:3,3:1") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert parse_replica_assignment(" 5 : 6 , 6:5") == {0: [5, 6], 1: [6, 5]}
    assert parse_replica_assignment("4") == {0: [4]}


@pytest.mark.parametrize("text", ["", "1:2,,3:4", "a:b", "1:-2", "1;2", "1:2:", "١:2"])
def test_parse_replica_assignment_rejects(text):
    with pytest.raises(ValueError):
        parse_replica_assignment(text)


def test_check_assignment():
    check_assignment({0: [1, 2], 1: [2, 3]})
    with pytest.raises(AdminError, match="duplicate"):
        check_assignment({0: [1, 1]})
    with pytest.raises(AdminError, match="different replication factor"):
        check_assignment({0: [1, 2], 1: [3]})
    with pytest.raises(AdminError, match="consecutive"):
        check_assignment({0: [1], 2: [2]})
    with pytest.raises(AdminError):
        check_assignment({})


def test_rack_alternated_broker_list():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({1: "a", 2: "a", 3: "a", 4: "b"}) == [1, 4, 2, 3]


def test_rack_aware_kafkas_documented_example():
    # AdminUtils' scaladoc (Kafka 2.8): the rack alternated list 0, 3, 1, 5, 4, 2, six partitions of RF 3
    # round-robin over it, then partition 6 with the followers shifted (0,4,2 instead of repeating 0,3,1).
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas(racks, 7, 3, start_index=0, shift=0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}


def test_rack_aware_by_hand():
    # Ordered rack by rack: [0, 2, 1, 3]; the follower is the next broker, which sits in the other rack.
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    assert assign_replicas(racks, 4, 2, start_index=0, shift=0) == {0: [0, 2], 1: [2, 1], 2: [1, 3], 3: [3, 0]}
    # Without a rack for every broker, racks are ignored (Kafka's RackAwareMode.Safe).
    assert assign_replicas({**racks, 3: None}, 4, 2, start_index=0, shift=0) == \
        assign_replicas([0, 1, 2, 3], 4, 2, start_index=0, shift=0)


@pytest.mark.parametrize("racks, rf", [
    ({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}, 3),
    ({1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}, 2),
    ({1: "a", 2: "a", 3: "a", 4: "b"}, 3),
    ({1: "a", 2: "b"}, 2),
])
def test_rack_aware_replicas_span_as_many_racks_as_they_can(racks, rf):
    rack_count = len(set(racks.values()))
    for start, shift in itertools.product(range(len(racks)), repeat=2):
        a = assign_replicas(racks, 12, rf, start_index=start, shift=shift)
        for replicas in a.values():
            assert len(set(replicas)) == rf
            assert len({racks[b] for b in replicas}) == min(rf, rack_count)
        leaders = Counter(r[0] for r in a.values())
        assert max(leaders.values()) - min(leaders.values()) <= 1 and len(leaders) == len(racks)
