"""Leader election rules of Kafka's controller (its PartitionLeaderElectionAlgorithms), as pure functions.

Each takes the assignment and the current leader and ISR and returns the new (leader, isr), or None when
the partition cannot (or need not) change:
- a new partition: leader = first live replica in assignment order, ISR = all live assigned replicas;
- an offline partition (no live leader): leader = first assigned replica that is live and in the ISR, new ISR
  = the live ISR members; with unclean election enabled and no such replica, the first live assigned replica
  becomes leader with ISR = [it]. Otherwise no leader;
- a reassigned partition: the leader stays if it is a live in-sync target replica, else the first such target
  replica leads; the replicas being removed leave the ISR (unless none would be left);
- a preferred election: the first assigned replica leads if it is eligible and in the ISR;
- controlled shutdown: the first eligible in-sync replica other than the broker leads, the broker leaves the
  ISR;
- a replica going offline leaves the ISR of the partitions it follows; the last ISR member is never removed
  (the ISR keeps the last replica known to be in sync, as Kafka does), and a leader going offline leaves the
  partition with leader -1.
"""
from __future__ import annotations

NO_LEADER = -1


def new_partition_leader(assignment: list[int], live: set[int]) -> tuple[int, list[int]] | None:
    live_replicas = [r for r in assignment if r in live]
    if not live_replicas:
        return None
    return live_replicas[0], live_replicas


def offline_partition_leader(assignment: list[int], isr: list[int], live: set[int],
                             unclean: bool) -> tuple[int, list[int], bool] | None:
    """(leader, isr, was_unclean) or None when no replica may lead."""
    live_isr = [r for r in isr if r in live]
    for r in assignment:
        if r in live_isr:
            return r, live_isr, False
    if unclean:
        for r in assignment:
            if r in live:
                return r, [r], True
    return None


def reassignment_leader(target: list[int], removing: list[int], leader: int, isr: list[int],
                        eligible: set[int]) -> tuple[int, list[int]] | None:
    isr = [r for r in isr if r not in removing] or list(isr)
    if leader not in target or leader not in eligible or leader not in isr:
        candidates = [r for r in target if r in isr and r in eligible]
        if not candidates:
            return None
        leader = candidates[0]
    return leader, isr


def preferred_replica_leader(assignment: list[int], leader: int, isr: list[int],
                             eligible: set[int]) -> tuple[int, list[int]] | None:
    preferred = assignment[0]
    if leader == preferred or preferred not in isr or preferred not in eligible:
        return None
    return preferred, list(isr)


def controlled_shutdown_leader(assignment: list[int], leader: int, isr: list[int], broker: int,
                               eligible: set[int]) -> tuple[int, list[int]] | None:
    """For a partition the shutting-down broker leads."""
    if leader != broker:
        return None
    candidates = [r for r in assignment if r in isr and r in eligible]
    if not candidates:
        return None
    return candidates[0], [r for r in isr if r != broker]


def remove_replica_from_isr(leader: int, isr: list[int], replica: int) -> tuple[int, list[int]]:
    """The partition's (leader, isr) once `replica` is offline."""
    new_leader = NO_LEADER if leader == replica else leader
    if replica in isr and len(isr) > 1:
        isr = [r for r in isr if r != replica]
    return new_leader, list(isr)
