"""Replica assignment for new topics: Kafka's rack-unaware algorithm, and explicit assignments.

assign_replicas follows AdminUtils.assignReplicasToBrokersRackUnaware: leaders go round-robin over the
sorted broker ids from a random start, and the followers of each round are offset by a shift that grows by
one every time the leaders wrap around, so replicas (not only leaders) spread evenly. Fixing start_index and
shift makes the output deterministic (Kafka's tests fix both to the same value).
"""
from __future__ import annotations

import random

from .admin_errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def assign_replicas(broker_ids, partitions: int, rf: int, start_index: int | None = None,
                    shift: int | None = None, start_partition: int = 0) -> dict[int, list[int]]:
    """Partition -> replica list (the first replica is the preferred leader) over the given brokers, for
    partitions start_partition .. start_partition + partitions - 1 (new partitions of an existing topic)."""
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if rf <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    brokers = sorted(broker_ids)
    n = len(brokers)
    if rf > n:
        raise InvalidReplicationFactorError(f"Replication factor: {rf} larger than available brokers: {n}.")
    if start_index is None:
        start_index = random.randrange(n)
    if shift is None:
        shift = random.randrange(n)
    out = {}
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start_index + p) % n
        replicas = [brokers[first]]
        for j in range(rf - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = replicas
    return out


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
