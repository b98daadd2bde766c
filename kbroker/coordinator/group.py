"""One consumer group's state, as Kafka 2.8's GroupMetadata and MemberMetadata: members (dynamic and static),
pending members (told MEMBER_ID_REQUIRED and expected back), the protocol votes, the generation, the leader,
the committed offsets (and commits still being written, and transactional commits pending per producer id
until their transaction's marker) and the state machine:

    Empty ─────────────▶ PreparingRebalance   a member joins (or rejoins with new metadata, or leaves)
    PreparingRebalance ▶ CompletingRebalance  every member rejoined, or the rebalance timeout (generation + 1)
    PreparingRebalance ▶ Empty                nobody is left when the join completes (generation + 1)
    CompletingRebalance ▶ Stable              the leader's assignment is written
    Stable, CompletingRebalance ▶ PreparingRebalance   a member joins, changes, leaves or expires
    any state ─────────▶ Dead                 unloaded (leadership moved), deleted, or expired while Empty

No locks: the coordinator runs on one gevent hub, and every method here runs without yielding.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from ..protocol.errors import Errors
from .schemas import CONSUMER_PROTOCOL_TYPE, GroupRecord, OffsetAndMetadata, subscription_topics

log = logging.getLogger("kbroker.coordinator")

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
}


@dataclass
class JoinGroupResult:
    member_id: str
    error: int
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list = None    # [(member id, group instance id, metadata)] for the leader, else []


@dataclass
class SyncGroupResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class CommitRecordMetadataAndOffset:
    """A committed offset and the base offset of the batch that carried it (None until written)."""
    appended_batch_offset: int | None
    offset_and_metadata: OffsetAndMetadata

    def older_than(self, other: "CommitRecordMetadataAndOffset") -> bool:
        return self.appended_batch_offset < other.appended_batch_offset


class MemberMetadata:
    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 supported_protocols: list[tuple[str, bytes]], assignment: bytes = b""):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = list(supported_protocols)
        self.assignment = assignment
        self.awaiting_join_callback: Callable[[JoinGroupResult], None] | None = None
        self.awaiting_sync_callback: Callable[[SyncGroupResult], None] | None = None
        self.is_leaving = False
        self.is_new = False
        self.heartbeat_satisfied = False

    def __repr__(self) -> str:
        return (f"MemberMetadata(memberId={self.member_id}, groupInstanceId={self.group_instance_id}, "
                f"clientId={self.client_id}, clientHost={self.client_host}, "
                f"sessionTimeoutMs={self.session_timeout_ms}, rebalanceTimeoutMs={self.rebalance_timeout_ms}, "
                f"supportedProtocols={[p for p, _ in self.supported_protocols]})")

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise ValueError("Member does not support protocol")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return self.heartbeat_satisfied   # new members can expire while awaiting join
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.supported_protocols]

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError("Member does not support any of the candidate protocols")


class GroupMetadata:
    def __init__(self, group_id: str, initial_state: GroupState, now_ms: Callable[[], int]):
        self.group_id = group_id
        self.state = initial_state
        self._now_ms = now_ms
        self.current_state_timestamp: int | None = now_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}          # insertion-ordered, like Kafka's iteration
        self.static_members: dict[str, str] = {}              # group instance id -> member id
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.offsets: dict[tuple[str, int], CommitRecordMetadataAndOffset] = {}
        self.pending_offset_commits: dict[tuple[str, int], OffsetAndMetadata] = {}
        # producer id -> {tp: commit} of TxnOffsetCommits whose transaction has no marker yet (appended batch
        # offset None while the write is in flight)
        self.pending_txn_offset_commits: dict[int, dict[tuple[str, int], CommitRecordMetadataAndOffset]] = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    @classmethod
    def load(cls, group_id: str, record: GroupRecord, now_ms) -> "GroupMetadata":
        """The group as read from its last group metadata record (Kafka's GroupMetadata.loadGroup): Stable with
        its members, or Empty."""
        group = cls(group_id, GroupState.STABLE if record.members else GroupState.EMPTY, now_ms)
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        group.leader_id = record.leader
        group.current_state_timestamp = (None if record.current_state_timestamp == -1
                                         else record.current_state_timestamp)
        for m in record.members:
            member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.rebalance_timeout, m.session_timeout, record.protocol_type,
                                    [(record.protocol, m.subscription)], m.assignment)
            group.add(member)
            if member.is_static:
                group.static_members[member.group_instance_id] = member.member_id
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def __repr__(self) -> str:
        return (f"GroupMetadata(groupId={self.group_id}, generation={self.generation_id}, "
                f"protocolType={self.protocol_type}, currentState={self.state.value}, "
                f"members={list(self.members)})")

    # ---- state ----------------------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"Group {self.group_id} should be in the "
                               f"{','.join(s.value for s in _VALID_PREVIOUS[state])} states before moving to "
                               f"{state.value} state. Instead it is in {self.state.value} state")
        self.state = state
        self.current_state_timestamp = self._now_ms()

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ---- members --------------------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def add(self, member: MemberMetadata, callback=None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        for name, _ in member.supported_protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1
        member.awaiting_join_callback = callback
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            for name, _ in member.supported_protocols:
                self.supported_protocols[name] -= 1
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader did not rejoin, make any member that did the leader; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                log.info("Group leader [member.id: %s, group.instance.id: %s] failed to join before rebalance "
                         "timeout, while new leader %s was elected.", leader.member_id, leader.group_instance_id,
                         member_id)
                self.leader_id = member_id
                return True
        log.info("Group leader [member.id: %s, group.instance.id: %s] failed to join before rebalance timeout, "
                 "and the group couldn't proceed to next generation because no member joined.",
                 leader.member_id, leader.group_instance_id)
        return False

    def replace_group_instance(self, old_member_id: str, new_member_id: str, group_instance_id: str):
        old = self.members.pop(old_member_id)
        self.maybe_invoke_join_callback(old, JoinGroupResult(old_member_id, Errors.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(old, SyncGroupResult(Errors.FENCED_INSTANCE_ID))
        old.member_id = new_member_id
        self.members[new_member_id] = old
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return old

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members and not self.has(member_id)

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def get_static_member_id(self, group_instance_id: str) -> str:
        return self.static_members[group_instance_id]

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None, operation: str) -> bool:
        if self.has_static_member(group_instance_id) and self.static_members[group_instance_id] != member_id:
            log.error("given member.id %s is identified as a known static member %s, but not matching the expected "
                      "member.id %s during %s, will respond with instance fenced error", member_id,
                      group_instance_id, self.static_members[group_instance_id], operation)
            return True
        return False

    def add_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise RuntimeError(f"Attempt to add a pending sync for member {member_id} which is not a member of "
                               f"the group")
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise RuntimeError(f"Attempt to remove a pending sync for member {member_id} which is not a member "
                               f"of the group")
        self.pending_sync_members.discard(member_id)

    @property
    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    # ---- protocols ------------------------------------------------------------------------------------------
    def _candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Every member votes for its first protocol that all members support; the most votes wins (ties go
        to the protocol voted first, a stable stand-in for Kafka's unordered maxBy)."""
        if not self.members:
            raise RuntimeError("Cannot select protocol for empty group")
        candidates = self._candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            p = m.vote(candidates)
            votes[p] = votes.get(p, 0) + 1
        return max(votes, key=lambda p: votes[p])

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        n = len(self.members)
        return self.protocol_type == member_protocol_type and any(
            self.supported_protocols.get(p, 0) == n for p in member_protocols)

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        try:
            topics: set[str] = set()
            for m in self.members.values():
                topics |= subscription_topics(m.metadata(self.protocol_name))
            return topics
        except ValueError as e:
            log.warning("Failed to parse Consumer Protocol consumer:%s of group %s. Consumer group coordinator is "
                        "not aware of the subscribed topics: %s", self.protocol_name, self.group_id, e)
            return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def update_member(self, member: MemberMetadata, protocols, callback) -> None:
        for name, _ in member.supported_protocols:
            self.supported_protocols[name] -= 1
        for name, _ in protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1
        member.supported_protocols = list(protocols)
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join_callback = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        if member.is_awaiting_join:
            callback, member.awaiting_join_callback = member.awaiting_join_callback, None
            self.num_members_awaiting_join -= 1
            callback(result)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        if member.is_awaiting_sync:
            callback, member.awaiting_sync_callback = member.awaiting_sync_callback, None
            callback(result)
            return True
        return False

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise RuntimeError(f"Cannot obtain member metadata for group in state {self.state.value}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def summary(self):
        """(state, protocol type, protocol, [(member id, instance id, client id, client host, metadata,
        assignment)]); metadata and assignment only when Stable, as Kafka's GroupSummary."""
        if self.is_(GroupState.STABLE):
            protocol = self.protocol_name
            members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata(protocol),
                        m.assignment) for m in self.members.values()]
            return self.state.value, self.protocol_type or "", protocol, members
        members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                   for m in self.members.values()]
        return self.state.value, self.protocol_type or "", "", members

    # ---- offsets --------------------------------------------------------------------------------------------
    def initialize_offsets(self, offsets: dict, pending_txn_offsets: dict | None = None) -> None:
        self.offsets.update(offsets)
        for producer_id, commits in (pending_txn_offsets or {}).items():
            self.pending_txn_offset_commits.setdefault(producer_id, {}).update(commits)

    def on_offset_commit_append(self, tp, record: CommitRecordMetadataAndOffset) -> None:
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.older_than(record):
                self.offsets[tp] = record
        if self.pending_offset_commits.get(tp) == record.offset_and_metadata:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def prepare_offset_commit(self, offsets: dict) -> None:
        self.pending_offset_commits.update(offsets)

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict) -> None:
        commits = self.pending_txn_offset_commits.setdefault(producer_id, {})
        for tp, o in offsets.items():
            commits[tp] = CommitRecordMetadataAndOffset(None, o)

    def on_txn_offset_commit_append(self, producer_id: int, tp, record: CommitRecordMetadataAndOffset) -> None:
        """The transactional commit is in the log: remember where (its position decides on COMMIT)."""
        pending = self.pending_txn_offset_commits.get(producer_id, {}).get(tp)
        if pending is not None and pending.offset_and_metadata == record.offset_and_metadata:
            self.pending_txn_offset_commits[producer_id][tp] = record

    def fail_pending_txn_offset_commit(self, producer_id: int, tp) -> None:
        commits = self.pending_txn_offset_commits.get(producer_id)
        if commits is not None:
            commits.pop(tp, None)
            if not commits:
                del self.pending_txn_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction marker is written: on COMMIT its offsets become the committed ones unless
        a commit later in the offsets log is there (Kafka's completePendingTxnOffsetCommit); on ABORT they go."""
        commits = self.pending_txn_offset_commits.pop(producer_id, {})
        if not committed:
            return
        for tp, record in commits.items():
            if record.appended_batch_offset is None:
                raise RuntimeError(f"Trying to complete a transactional offset commit for producerId {producer_id} "
                                   f"and groupId {self.group_id} even though the offset commit record itself "
                                   f"hasn't been appended to the log.")
            current = self.offsets.get(tp)
            if current is None or current.older_than(record):
                self.offsets[tp] = record

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offset_commits

    def has_pending_offset_commits_for(self, tp) -> bool:
        return tp in self.pending_offset_commits or any(
            tp in commits for commits in self.pending_txn_offset_commits.values())

    def remove_all_offsets(self) -> dict:
        return self.remove_offsets(list(self.offsets))

    def remove_offsets(self, tps) -> dict:
        removed = {}
        for tp in tps:
            self.pending_offset_commits.pop(tp, None)
            for commits in self.pending_txn_offset_commits.values():
                commits.pop(tp, None)
            r = self.offsets.pop(tp, None)
            if r is not None:
                removed[tp] = r.offset_and_metadata
        return removed

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict:
        """Kafka's removeExpiredOffsets: an Empty group's offsets expire retention_ms after the group became
        Empty (or after their commit when that is unknown); a Stable consumer group's offsets of topics it no
        longer subscribes to expire retention_ms after their commit; a group with no protocol type (offsets
        only, no membership) expires by commit time; an explicit expire timestamp wins in every case."""
        def expired(base_of, subscribed=frozenset()):
            out = {}
            for tp, r in self.offsets.items():
                if tp[0] in subscribed or tp in self.pending_offset_commits:
                    continue
                o = r.offset_and_metadata
                if o.expire_timestamp is not None:
                    due = now_ms >= o.expire_timestamp
                else:
                    due = now_ms - base_of(r) >= retention_ms
                if due:
                    out[tp] = o
            return out

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            found = expired(lambda r: state_ts if state_ts is not None else r.offset_and_metadata.commit_timestamp)
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None \
                and self.is_(GroupState.STABLE):
            found = expired(lambda r: r.offset_and_metadata.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            found = expired(lambda r: r.offset_and_metadata.commit_timestamp)
        else:
            found = {}
        for tp in found:
            del self.offsets[tp]
        return found

    def offset(self, tp) -> OffsetAndMetadata | None:
        r = self.offsets.get(tp)
        return r.offset_and_metadata if r is not None else None

    def all_offsets(self) -> dict:
        return {tp: r.offset_and_metadata for tp, r in self.offsets.items()}

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or bool(self.pending_txn_offset_commits)

