"""The group coordinator's delayed operations (Kafka's DelayedJoin, InitialDelayedJoin, DelayedSync and
DelayedHeartbeat) on the purgatory's timing wheel. Each only forwards to the coordinator, which holds the logic.

Watch keys: ("join", group) and ("sync", group) in the rebalance purgatory, ("member", group, member id) in the
heartbeat purgatory.
"""
from __future__ import annotations

from ..purgatory.delayed import DelayedOperation


def join_key(group_id: str):
    return ("join", group_id)


def sync_key(group_id: str):
    return ("sync", group_id)


def member_key(group_id: str, member_id: str):
    return ("member", group_id, member_id)


class DelayedJoin(DelayedOperation):
    """Completes when every known member has rejoined, or when the rebalance timeout runs out (members that did
    not rejoin are then removed)."""

    def __init__(self, coordinator, group, rebalance_timeout_ms: int):
        super().__init__(rebalance_timeout_ms)
        self.coordinator, self.group = coordinator, group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)

    def on_expiration(self) -> None:
        pass


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group waits group.initial.rebalance.delay.ms, and again (up to the
    rebalance timeout) each time a new member arrived meanwhile, so a starting fleet joins in one generation."""

    def __init__(self, coordinator, purgatory, group, configured_delay_ms: int, delay_ms: int, remaining_ms: int):
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms, self.remaining_ms = configured_delay_ms, remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, self.purgatory, group, self.configured_delay_ms, delay,
                                   remaining), [join_key(group.group_id)])
        else:
            super().on_complete()


class DelayedSync(DelayedOperation):
    """After a join completes, every member must send SyncGroup within the rebalance timeout; those that do not
    are removed and the group rebalances again."""

    def __init__(self, coordinator, group, generation_id: int, rebalance_timeout_ms: int):
        super().__init__(rebalance_timeout_ms)
        self.coordinator, self.group, self.generation_id = coordinator, group, generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)


class DelayedHeartbeat(DelayedOperation):
    """A member's session: completes when the member shows it is alive; expiring removes it (a pending member
    that never came back with its id is dropped from the pending set)."""

    def __init__(self, coordinator, group, member_id: str, is_pending: bool, timeout_ms: int):
        super().__init__(timeout_ms)
        self.coordinator, self.group, self.member_id, self.is_pending = coordinator, group, member_id, is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(self.group, self.member_id, self.is_pending,
                                                       self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)
