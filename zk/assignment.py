"""Replica assignment for new topics: Kafka's rack-unaware and rack-aware algorithms, and explicit assignments.

assign_replicas follows AdminUtils.assignReplicasToBrokers: leaders go round-robin over the sorted broker ids
from a random start, and the followers of each round are offset by a shift that grows by one every time the
leaders wrap around, so replicas (not only leaders) spread evenly. When every broker has a rack, the brokers are
ordered rack by rack (one of each rack in turn) and a follower is skipped while its rack already holds a replica
of the partition and some rack holds none (assignReplicasToBrokersRackAware); when some broker has no rack,
racks are ignored (Kafka's RackAwareMode.Safe). Fixing start_index and shift makes the output deterministic
(Kafka's tests fix both to the same value).
"""
from __future__ import annotations

import random
from collections.abc import Mapping

from kbroker.common.admin_errors import (InvalidPartitionsError, InvalidReplicaAssignmentError,
                                        InvalidReplicationFactorError)

# A topic's assignment is one znode, and ZooKeeper refuses a write over jute.maxbuffer (1 MiB by default): a
# partition count whose assignment cannot fit is refused before the assignment is computed (a count in the
# millions would otherwise hold the broker for minutes, where Kafka's write would fail after the work).
ZNODE_MAX_BYTES = 0xFFFFF


def assign_replicas(brokers, partitions: int, rf: int, start_index: int | None = None,
                    shift: int | None = None, start_partition: int = 0) -> dict[int, list[int]]:
    """Partition -> replica list (the first replica is the preferred leader) over the given brokers (ids, or
    id -> rack or None), for partitions start_partition .. start_partition + partitions - 1 (new partitions of
    an existing topic). InvalidPartitionsError when the assignment could not be written to ZooKeeper."""
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if rf <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    racks = dict(brokers) if isinstance(brokers, Mapping) else dict.fromkeys(brokers)
    n = len(racks)
    if rf > n:
        raise InvalidReplicationFactorError(f"Replication factor: {rf} larger than available brokers: {n}.")
    last = start_partition + partitions - 1
    if partitions * (len(str(last)) + 4 + rf * (len(str(max(racks))) + 1)) > ZNODE_MAX_BYTES:
        raise InvalidPartitionsError(f"The assignment of {partitions} partitions with {rf} replicas each would "
                                     f"not fit in the topic's znode ({ZNODE_MAX_BYTES} bytes).")
    rack_aware = all(racks.values())
    ordered = rack_alternated(racks) if rack_aware else sorted(racks)
    if start_index is None:
        start_index = random.randrange(n)
    if shift is None:
        shift = random.randrange(n)
    out = {}
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start_index + p) % n
        if rack_aware:
            out[p] = _rack_aware_replicas(ordered, racks, first, shift, rf)
        else:
            out[p] = [ordered[first]] + [ordered[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(rf - 1)]
    return out


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """The broker ids taking one broker of each rack in turn (racks and each rack's brokers sorted), so that
    neighbours sit in different racks (AdminUtils.getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[i] for i in range(max(map(len, columns))) for column in columns if i < len(column)]


def _rack_aware_replicas(ordered: list[int], racks: dict[int, str], first: int, shift: int, rf: int) -> list[int]:
    """One partition's replicas: the leader at `first`, then the followers the rack-unaware walk would pick
    (with the shift scaled by the number of racks), skipping a broker whose rack already has a replica while
    some rack has none, and a broker that already has one."""
    n, rack_count = len(ordered), len(set(racks.values()))
    replicas = [ordered[first]]
    used = {racks[ordered[first]]}
    k = 0
    while len(replicas) < rf:
        broker = ordered[(first + 1 + (shift * rack_count + k) % (n - 1)) % n]
        k += 1
        if (racks[broker] not in used or len(used) == rack_count) and broker not in replicas:
            replicas.append(broker)
            used.add(racks[broker])
    return replicas


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """'1:2,2:3,3:1' -> {0: [1, 2], 1: [2, 3], 2: [3, 1]}: partitions separated by ',', replicas by ':'.
    Raises ValueError on anything that is not a list of broker ids."""
    out = {}
    for p, entry in enumerate(text.split(",")):
        replicas = []
        for item in entry.split(":"):
            item = item.strip()
            if not item.isascii() or not item.isdigit():
                raise ValueError(f"'{item}' in partition {p} ('{entry}') is not a broker id "
                                 "(expected a list like 1:2,2:3,3:1)")
            replicas.append(int(item))
        out[p] = replicas
    return out


def check_assignment(assignment: dict[int, list[int]]) -> None:
    """What Kafka checks of an explicit assignment: partitions 0..n-1, each with the same number of replicas,
    none repeated."""
    if not assignment:
        raise InvalidReplicaAssignmentError("The replica assignment has no partitions.")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError("Partitions should be a consecutive 0-based integer sequence.")
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Partition {p} has no replicas.")
        duplicates = sorted({b for b in replicas if replicas.count(b) > 1})
        if duplicates:
            raise InvalidReplicaAssignmentError(f"Partition replica lists may not contain duplicate entries: "
                             f"partition {p} repeats broker {','.join(map(str, duplicates))}.")
    rf = len(assignment[0])
    for p, replicas in sorted(assignment.items()):
        if len(replicas) != rf:
            raise InvalidReplicaAssignmentError(f"Partition {p} has a different replication factor ({len(replicas)}: "
                             f"{','.join(map(str, replicas))}) than partition 0 ({rf}).")
