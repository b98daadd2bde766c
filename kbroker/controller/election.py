"""Leader election rules of Kafka's controller, as pure functions.

- A new partition: leader = first live replica in assignment order, ISR = all live assigned replicas.
- An offline partition (no live leader): leader = first assigned replica that is live and in the ISR, new ISR =
  the live ISR members; with unclean election enabled and no such replica, the first live assigned replica
  becomes leader with ISR = [it]. Otherwise no leader.
- A replica going offline leaves the ISR of the partitions it follows; the last ISR member is never removed
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


def remove_replica_from_isr(leader: int, isr: list[int], replica: int) -> tuple[int, list[int]]:
    """The partition's (leader, isr) once `replica` is offline."""
    new_leader = NO_LEADER if leader == replica else leader
    if replica in isr and len(isr) > 1:
        isr = [r for r in isr if r != replica]
    return new_leader, list(isr)
