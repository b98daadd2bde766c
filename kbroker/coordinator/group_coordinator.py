"""GroupCoordinator: group membership and offsets for the groups whose `__consumer_offsets` partition this broker
leads (Kafka 2.8's GroupCoordinator, ported to gevent: callbacks instead of locks, one hub).

Requests for a group are checked first (validate_group_status): an invalid group id is INVALID_GROUP_ID, a
coordinator not started COORDINATOR_NOT_AVAILABLE, a partition still loading COORDINATOR_LOAD_IN_PROGRESS, a
partition not led here NOT_COORDINATOR.

Membership, as Kafka:
- JoinGroup: a new dynamic member (v4+) first gets MEMBER_ID_REQUIRED with an id to come back with (it is
  pending meanwhile); a static member (group.instance.id) gets its id at once and, rejoining with an unknown
  id, replaces its old id (the old one is fenced: FENCED_INSTANCE_ID); a join moves the group to
  PreparingRebalance, and the join completes when all members have rejoined or at the rebalance timeout
  (DelayedJoin) — an Empty group's first rebalance waits group.initial.rebalance.delay.ms first
  (InitialDelayedJoin). Then the protocol all members support with the most votes is selected, the
  generation bumps, the leader (the first member, or any rejoined one if it did not) gets every member's
  metadata, and the group is CompletingRebalance.
- SyncGroup: the leader's assignment is written to the offsets partition (group metadata record), then each
  waiting member gets its part and the group is Stable; members that never sync within the rebalance timeout
  are removed (DelayedSync).
- Heartbeat keeps a member's session (DelayedHeartbeat of session.timeout.ms); an expired member is removed
  and the group rebalances. LeaveGroup removes members at once (v3+: a batch, by member or instance id).
- Offsets: OffsetCommit from a member of the current generation (or a simple commit with generation -1 to an
  Empty group), acknowledged once the offsets partition's ISR has it; TxnOffsetCommit writes a transactional
  batch of the producer, pending until the transaction's marker (complete_txn_offsets): COMMIT makes it
  visible, ABORT drops it; OffsetFetch from the cache (require_stable: UNSTABLE_OFFSET_COMMIT while pending);
  DeleteGroups (Empty groups only) and OffsetDelete write tombstones; offsets expire after
  offsets.retention.minutes (GroupMetadataManager).
"""
from __future__ import annotations

import logging

import gevent

from ..common.internal_topics import GROUP_METADATA_TOPIC
from ..protocol.errors import Errors
from ..purgatory.delayed import DelayedOperationPurgatory
from .delayed import (DelayedHeartbeat, DelayedJoin, DelayedSync, InitialDelayedJoin, join_key, member_key,
                      sync_key)
from .group import (UNKNOWN_MEMBER_ID, GroupMetadata, GroupState, JoinGroupResult, MemberMetadata,
                    SyncGroupResult)
from .group_metadata_manager import GroupMetadataManager
from .partition_loader import existing_partition_count
from .zk_offsets import ZkOffsetStore

log = logging.getLogger("kbroker.coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
EMPTY_GROUP_SUMMARY = ("", "", "", [])
DEAD_GROUP_SUMMARY = ("Dead", "", "", [])

# APIs whose group id may be empty (Kafka's isValidGroupId): the offset APIs, DescribeGroups and DeleteGroups.
EMPTY_GROUP_ID_ALLOWED = frozenset({"OffsetCommit", "OffsetFetch", "DescribeGroups", "DeleteGroups"})


class GroupCoordinator:
    def __init__(self, broker_id: int, config, replica_manager, zk, clock, admin_manager=None):
        self.broker_id = broker_id
        self.admin_manager = admin_manager   # creates __consumer_offsets
        self.config = config
        self.zk = zk
        self.clock = clock
        self.min_session_timeout_ms = config["group.min.session.timeout.ms"]
        self.max_session_timeout_ms = config["group.max.session.timeout.ms"]
        self.max_size = config["group.max.size"]
        self.initial_rebalance_delay_ms = config["group.initial.rebalance.delay.ms"]
        self.manager = GroupMetadataManager(broker_id, config, replica_manager, clock)
        self.heartbeat_purgatory = DelayedOperationPurgatory("Heartbeat", clock)
        self.rebalance_purgatory = DelayedOperationPurgatory("Rebalance", clock)
        self.replica_manager = replica_manager
        self.zk_offsets = ZkOffsetStore(zk)
        self.active = False
        self._tasks: list = []

    # ---- lifecycle ------------------------------------------------------------------------------------------
    def offsets_topic_partition_count(self) -> int:
        return existing_partition_count(self.zk, GROUP_METADATA_TOPIC, self.config["offsets.topic.num.partitions"])

    def startup(self, enable_expiration: bool = True) -> None:
        log.info("[GroupCoordinator %d]: Starting up.", self.broker_id)
        self.manager.startup(self.offsets_topic_partition_count())
        self.heartbeat_purgatory.start()
        self.rebalance_purgatory.start()
        self.replica_manager.leadership_listeners.append(self.on_leadership_change)
        if enable_expiration:
            self._tasks.append(gevent.spawn(self._expiration_loop))
        self.active = True
        log.info("[GroupCoordinator %d]: Startup complete.", self.broker_id)

    def shutdown(self) -> None:
        log.info("[GroupCoordinator %d]: Shutting down.", self.broker_id)
        self.active = False
        for t in self._tasks:
            t.kill()
        self.manager.shutdown()
        self.heartbeat_purgatory.shutdown()
        self.rebalance_purgatory.shutdown()
        listeners = self.replica_manager.leadership_listeners
        if self.on_leadership_change in listeners:
            listeners.remove(self.on_leadership_change)
        log.info("[GroupCoordinator %d]: Shutdown complete.", self.broker_id)

    def _expiration_loop(self) -> None:
        interval = self.config["offsets.retention.check.interval.ms"] / 1000.0
        while True:
            gevent.sleep(interval)
            try:
                self.manager.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")

    def on_leadership_change(self, leaders, followers, stopped) -> None:
        """Replica manager hook: load the offsets partitions now led here, unload the others."""
        for (topic, partition), epoch in leaders:
            if topic == GROUP_METADATA_TOPIC:
                self.on_election(partition, epoch)
        for (topic, partition), epoch in list(followers) + list(stopped):
            if topic == GROUP_METADATA_TOPIC:
                self.on_resignation(partition, epoch)

    def on_election(self, partition: int, epoch: int) -> None:
        log.info("Elected as the group coordinator for partition %d in epoch %d", partition, epoch)
        self.manager.schedule_load(partition, epoch, self._on_group_loaded)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        log.info("Resigned as the group coordinator for partition %d in epoch %s", partition, epoch)
        self.manager.schedule_unload(partition, epoch, self._on_group_unloaded)

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def offsets_topic_configs(self) -> dict[str, str]:
        """Kafka's GroupCoordinator.offsetsTopicConfigs."""
        return {"cleanup.policy": "compact", "compression.type": "producer",
                "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}

    def create_offsets_topic(self) -> None:
        """Have the admin manager create __consumer_offsets (offsets.topic.num.partitions,
        offsets.topic.replication.factor, compacted), as Kafka's auto topic creation does on the first
        FindCoordinator."""
        cfg = self.config
        self.admin_manager.create_internal_topic(GROUP_METADATA_TOPIC, cfg["offsets.topic.num.partitions"],
                                                 cfg["offsets.topic.replication.factor"], self.offsets_topic_configs())

    # ---- checks ---------------------------------------------------------------------------------------------
    def validate_group_status(self, group_id: str | None, api: str) -> Errors | None:
        if group_id is None or (not group_id and api not in EMPTY_GROUP_ID_ALLOWED):
            return Errors.INVALID_GROUP_ID
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_group_local(group_id):
            return Errors.NOT_COORDINATOR
        return None

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        state = group.state
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or \
                group.num_members_awaiting_join < self.max_size
        return group.has(member_id) or group.size < self.max_size

    # ---- JoinGroup ------------------------------------------------------------------------------------------
    def handle_join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                          require_known_member_id: bool, client_id: str, client_host: str,
                          rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                          protocols: list[tuple[str, bytes]], callback) -> None:
        error = self.validate_group_status(group_id, "JoinGroup")
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            callback(JoinGroupResult(member_id, Errors.INVALID_SESSION_TIMEOUT))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_or_maybe_create_group(group_id, is_unknown)
        if group is None:
            callback(JoinGroupResult(member_id, Errors.UNKNOWN_MEMBER_ID))
            return
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, Errors.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._do_unknown_join_group(group, group_instance_id, require_known_member_id, client_id,
                                        client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                        protocols, callback)
        else:
            self._do_join_group(group, member_id, group_instance_id, client_id, client_host,
                                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, callback)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _do_unknown_join_group(self, group, group_instance_id, require_known_member_id, client_id, client_host,
                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, callback):
        if group.is_(GroupState.DEAD):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, Errors.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(protocol_type, {p for p, _ in protocols}):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, Errors.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_member_id = group.generate_member_id(client_id, group_instance_id)
            if group.has_static_member(group_instance_id):
                self._update_static_member_and_rebalance(group, new_member_id, group_instance_id, protocols,
                                                         callback)
            elif require_known_member_id:
                log.debug("Dynamic member with unknown member id joins group %s in %s state. Created a new member "
                          "id %s and request the member to rejoin with this id.", group.group_id,
                          group.state.value, new_member_id)
                group.pending_members.add(new_member_id)
                self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
                callback(JoinGroupResult(new_member_id, Errors.MEMBER_ID_REQUIRED))
            else:
                log.info("%s member with unknown member id joins group %s in %s state. Created a new member id %s "
                         "for this member and add to the group.",
                         "Static" if group_instance_id is not None else "Dynamic", group.group_id,
                         group.state.value, new_member_id)
                self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id,
                                               group_instance_id, client_id, client_host, protocol_type, protocols,
                                               group, callback)

    def _do_join_group(self, group, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                       session_timeout_ms, protocol_type, protocols, callback):
        if group.is_(GroupState.DEAD):
            callback(JoinGroupResult(member_id, Errors.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(protocol_type, {p for p, _ in protocols}):
            callback(JoinGroupResult(member_id, Errors.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_pending_member(member_id):
            if group_instance_id is not None:
                raise RuntimeError(f"the static member {group_instance_id} was not expected to be assigned into "
                                   f"pending member bucket with member id {member_id}")
            log.debug("Dynamic Member with specific member id %s joins group %s in %s state. Adding to the group "
                      "now.", member_id, group.group_id, group.state.value)
            self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, member_id, group_instance_id,
                                           client_id, client_host, protocol_type, protocols, group, callback)
        else:
            instance_not_found = group_instance_id is not None and not group.has_static_member(group_instance_id)
            if group.is_static_member_fenced(member_id, group_instance_id, "join-group"):
                callback(JoinGroupResult(member_id, Errors.FENCED_INSTANCE_ID))
            elif not group.has(member_id) or instance_not_found:
                callback(JoinGroupResult(member_id, Errors.UNKNOWN_MEMBER_ID))
            else:
                member = group.get(member_id)
                state = group.state
                if state is GroupState.PREPARING_REBALANCE:
                    self._update_member_and_rebalance(group, member, protocols, callback,
                                                      f"Member {member_id} joining group during {state.value}")
                elif state is GroupState.COMPLETING_REBALANCE:
                    if member.matches(protocols):
                        callback(self._join_result(group, member_id, group.is_leader(member_id)))
                    else:
                        self._update_member_and_rebalance(group, member, protocols, callback,
                                                          f"Updating metadata for member {member_id} during "
                                                          f"{state.value}")
                elif state is GroupState.STABLE:
                    if group.is_leader(member_id):
                        self._update_member_and_rebalance(group, member, protocols, callback,
                                                          f"leader {member_id} re-joining group during "
                                                          f"{state.value}")
                    elif not member.matches(protocols):
                        self._update_member_and_rebalance(group, member, protocols, callback,
                                                          f"Updating metadata for member {member_id} during "
                                                          f"{state.value}")
                    else:
                        callback(self._join_result(group, member_id, False))
                else:
                    log.warning("Attempt to add rejoining member %s of group %s in unexpected group state %s",
                                member_id, group.group_id, state.value)
                    callback(JoinGroupResult(member_id, Errors.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _join_result(group: GroupMetadata, member_id: str, with_members: bool) -> JoinGroupResult:
        return JoinGroupResult(member_id=member_id, error=Errors.NONE, generation_id=group.generation_id,
                               protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                               leader_id=group.leader_id or "",
                               members=group.current_member_metadata() if with_members else [])

    def _add_member_and_rebalance(self, rebalance_timeout_ms, session_timeout_ms, member_id, group_instance_id,
                                  client_id, client_host, protocol_type, protocols, group, callback):
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member cannot heartbeat until it has its id; time its JoinGroup out instead (Kafka: 5 minutes).
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if member.is_static:
            log.info("Adding new static member %s to group %s with member id %s.", group_instance_id,
                     group.group_id, member_id)
            group.static_members[group_instance_id] = member_id
        else:
            group.pending_members.discard(member_id)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id} with group instance id "
                                             f"{group_instance_id}")

    def _update_static_member_and_rebalance(self, group, new_member_id, group_instance_id, protocols, callback):
        old_member_id = group.get_static_member_id(group_instance_id)
        log.info("Static member %s of group %s with unknown member id rejoins, assigning new member id %s, while "
                 "old member id %s will be removed.", group_instance_id, group.group_id, new_member_id,
                 old_member_id)
        current_leader = group.leader_id
        member = group.replace_group_instance(old_member_id, new_member_id, group_instance_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        old_protocols = list(member.supported_protocols)
        group.update_member(member, protocols, callback)
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                log.info("Static member which joins during Stable stage and doesn't affect selectProtocol will not "
                         "trigger rebalance.")
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def stored(error: Errors) -> None:
                    if error:
                        log.warning("Failed to persist metadata for group %s: %s", group.group_id, error.name)
                        group.update_member(member, old_protocols, None)
                        old = group.replace_group_instance(new_member_id, old_member_id, group_instance_id)
                        self._complete_and_schedule_next_heartbeat_expiration(group, old)
                        callback(JoinGroupResult(UNKNOWN_MEMBER_ID, error, group.generation_id,
                                                 group.protocol_type, group.protocol_name, current_leader or "",
                                                 []))
                    else:
                        group.maybe_invoke_join_callback(member, JoinGroupResult(
                            new_member_id, Errors.NONE, group.generation_id, group.protocol_type,
                            group.protocol_name, current_leader or "", []))
                self.manager.store_group(group, assignment, stored)
            else:
                self._maybe_prepare_rebalance(group, f"Group's selectedProtocol will change because static member "
                                                     f"{member.member_id} with instance id {group_instance_id} "
                                                     f"joined with change of protocol")
        elif state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, f"Updating metadata for static member {member.member_id} with instance "
                                           f"id {group_instance_id}")
        elif state in (GroupState.EMPTY, GroupState.DEAD):
            raise RuntimeError(f"Group {group.group_id} was not supposed to be in the state {state.value} when the "
                               f"unknown static member {group_instance_id} rejoins.")

    def _update_member_and_rebalance(self, group, member, protocols, callback, reason: str) -> None:
        group.update_member(member, protocols, callback)
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        if group.is_(GroupState.EMPTY):
            delay = self.initial_rebalance_delay_ms
            op = InitialDelayedJoin(self, self.rebalance_purgatory, group, delay, delay,
                                    max(group.rebalance_timeout_ms - delay, 0))
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info("Preparing to rebalance group %s in state %s with old generation %d (%s-%d) (reason: %s)",
                 group.group_id, group.state.value, group.generation_id, GROUP_METADATA_TOPIC,
                 self.partition_for(group.group_id), reason)
        self.rebalance_purgatory.try_complete_else_watch(op, [join_key(group.group_id)])

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A member removed while its JoinGroup waits gets UNKNOWN_MEMBER_ID, so it can rejoin if still alive.
        group.maybe_invoke_join_callback(member, JoinGroupResult(UNKNOWN_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def try_complete_join(self, group: GroupMetadata, force_complete) -> bool:
        if group.has_all_members_joined:
            return force_complete()
        return False

    def on_complete_join(self, group: GroupMetadata) -> None:
        not_rejoined = [m for m in group.not_yet_rejoined_members() if not m.is_static]
        if not_rejoined:
            log.info("Group %s removed dynamic members who haven't joined: %s", group.group_id,
                     [m.member_id for m in not_rejoined])
            for m in not_rejoined:
                self._remove_heartbeat_for_leaving_member(group, m)
                group.remove(m.member_id)
        if group.is_(GroupState.DEAD):
            log.info("Group %s is dead, skipping rebalance stage", group.group_id)
        elif not group.maybe_elect_new_joined_leader() and group.members:
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(DelayedJoin(self, group, group.rebalance_timeout_ms),
                                                             [join_key(group.group_id)])
        else:
            group.init_next_generation()
            if group.is_(GroupState.EMPTY):
                log.info("Group %s with generation %d is now empty (%s-%d)", group.group_id, group.generation_id,
                         GROUP_METADATA_TOPIC, self.partition_for(group.group_id))

                def stored(error: Errors) -> None:
                    if error:
                        log.warning("Failed to write empty metadata for group %s: %s", group.group_id, error.name)
                self.manager.store_group(group, {}, stored)
            else:
                log.info("Stabilized group %s generation %d (%s-%d) with %d members", group.group_id,
                         group.generation_id, GROUP_METADATA_TOPIC, self.partition_for(group.group_id), group.size)
                for member in list(group.members.values()):
                    group.maybe_invoke_join_callback(member, self._join_result(group, member.member_id,
                                                                               group.is_leader(member.member_id)))
                    self._complete_and_schedule_next_heartbeat_expiration(group, member)
                    member.is_new = False
                    group.add_pending_sync_member(member.member_id)
                self._schedule_pending_sync(group)

    # ---- SyncGroup ------------------------------------------------------------------------------------------
    def handle_sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                          protocol_name: str | None, group_instance_id: str | None, assignment: dict[str, bytes],
                          callback) -> None:
        error = self.validate_group_status(group_id, "SyncGroup")
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state is lost while loading: have the member rejoin (older clients do not expect
            # COORDINATOR_LOAD_IN_PROGRESS here).
            callback(SyncGroupResult(Errors.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncGroupResult(error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncGroupResult(Errors.UNKNOWN_MEMBER_ID))
            return
        if group.is_(GroupState.DEAD):
            callback(SyncGroupResult(Errors.COORDINATOR_NOT_AVAILABLE))
        elif group.is_static_member_fenced(member_id, group_instance_id, "sync-group"):
            callback(SyncGroupResult(Errors.FENCED_INSTANCE_ID))
        elif not group.has(member_id):
            callback(SyncGroupResult(Errors.UNKNOWN_MEMBER_ID))
        elif generation_id != group.generation_id:
            callback(SyncGroupResult(Errors.ILLEGAL_GENERATION))
        elif protocol_type is not None and group.protocol_type != protocol_type:
            callback(SyncGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL))
        elif protocol_name is not None and group.protocol_name != protocol_name:
            callback(SyncGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_(GroupState.EMPTY):
            callback(SyncGroupResult(Errors.UNKNOWN_MEMBER_ID))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            callback(SyncGroupResult(Errors.REBALANCE_IN_PROGRESS))
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            group.get(member_id).awaiting_sync_callback = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader for group %s for generation %d. The group has %d members, "
                         "%d of which are static.", group.group_id, group.generation_id, group.size,
                         len(group.static_members))
                full = {m: assignment.get(m, b"") for m in group.members}
                missing = [m for m in group.members if m not in assignment]
                if missing:
                    log.warning("Setting empty assignments for members %s of %s for generation %d", missing,
                                group.group_id, group.generation_id)

                def stored(error: Errors) -> None:
                    # Another member may have joined meanwhile: act only if this generation is still completing.
                    if group.is_(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                        if error:
                            self._reset_and_propagate_assignment_error(group, error)
                            self._maybe_prepare_rebalance(group, f"error when storing group assignment during "
                                                                 f"SyncGroup (member: {member_id})")
                        else:
                            for m in group.members.values():
                                m.assignment = full.get(m.member_id, b"")
                            self._propagate_assignment(group, Errors.NONE)
                            group.transition_to(GroupState.STABLE)
                self.manager.store_group(group, full, stored)
        else:  # Stable
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncGroupResult(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: Errors) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: Errors) -> None:
        ptype, pname = (group.protocol_type, group.protocol_name) if error == Errors.NONE else (None, None)
        for member in list(group.members.values()):
            if not member.assignment and error == Errors.NONE:
                log.warning("Sending empty assignment to member %s of %s for generation %d with no errors",
                            member.member_id, group.group_id, group.generation_id)
            if group.maybe_invoke_sync_callback(member, SyncGroupResult(error, ptype, pname, member.assignment)):
                # Sessions that ran out while waiting for the assignment are honoured again from now.
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms), [sync_key(group.group_id)])

    def try_complete_pending_sync(self, group: GroupMetadata, generation_id: int, force_complete) -> bool:
        if generation_id != group.generation_id or group.state in (
                GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            return force_complete()
        if group.has_received_sync_from_all_members:
            return force_complete()
        return False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id:
            log.error("Received unexpected notification of sync expiration for %s with an old generation %d while "
                      "the group has %d.", group.group_id, generation_id, group.generation_id)
        elif group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            log.error("Received unexpected notification of sync expiration after group %s already transitioned to "
                      "the %s state.", group.group_id, group.state.value)
        elif not group.has_received_sync_from_all_members:
            pending = sorted(group.pending_sync_members)
            for member_id in pending:
                member = group.get(member_id)
                self._remove_heartbeat_for_leaving_member(group, member)
                group.remove(member_id)
            log.debug("Group %s removed members who haven't sent their sync request: %s", group.group_id, pending)
            self._prepare_rebalance(group, f"Removing {pending} on pending sync request expiration")

    # ---- LeaveGroup -----------------------------------------------------------------------------------------
    def handle_leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]):
        """(top-level error, [(member id, group instance id, error)])."""
        error = self.validate_group_status(group_id, "LeaveGroup")
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return Errors.NONE, [(m, i, Errors.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.is_(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            if member_id != UNKNOWN_MEMBER_ID and group.is_static_member_fenced(member_id, instance_id,
                                                                                "leave-group"):
                results.append((member_id, instance_id, Errors.FENCED_INSTANCE_ID))
            elif group.is_pending_member(member_id):
                if instance_id is not None:
                    raise RuntimeError(f"the static member {instance_id} was not expected to be leaving from "
                                       f"pending member bucket with member id {member_id}")
                log.info("Pending member %s is leaving group %s.", member_id, group_id)
                self._remove_pending_member_and_update_group(group, member_id)
                self.heartbeat_purgatory.check_and_complete(member_key(group_id, member_id))
                results.append((member_id, instance_id, Errors.NONE))
            elif not group.has(member_id) and not group.has_static_member(instance_id):
                results.append((member_id, instance_id, Errors.UNKNOWN_MEMBER_ID))
            else:
                member = group.get(group.get_static_member_id(instance_id) if group.has_static_member(instance_id)
                                   else member_id)
                self._remove_heartbeat_for_leaving_member(group, member)
                log.info("Member[group.instance.id %s, member.id %s] in group %s has left, removing it from the "
                         "group", member.group_instance_id, member.member_id, group_id)
                self._remove_member_and_update_group(group, member, f"removing member {member_id} on LeaveGroup")
                results.append((member_id, instance_id, Errors.NONE))
        return Errors.NONE, results

    # ---- Heartbeat ------------------------------------------------------------------------------------------
    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int) -> Errors:
        error = self.validate_group_status(group_id, "Heartbeat")
        if error is not None:
            # While loading, answer blindly: the member's state will be known soon.
            return Errors.NONE if error == Errors.COORDINATOR_LOAD_IN_PROGRESS else error
        group = self.manager.get_group(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id, "heartbeat"):
            return Errors.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return Errors.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def _complete_and_schedule_next_heartbeat_expiration(self, group, member) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group, member, timeout_ms: int) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key])

    def _add_pending_member_expiration(self, group, member_id: str, timeout_ms: int) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(DelayedHeartbeat(self, group, member_id, True, timeout_ms),
                                                         [member_key(group.group_id, member_id)])

    def _remove_heartbeat_for_leaving_member(self, group, member) -> None:
        member.is_leaving = True
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member.member_id))

    def try_complete_heartbeat(self, group, member_id: str, is_pending: bool, force_complete) -> bool:
        if group.is_(GroupState.DEAD):
            return force_complete()
        if is_pending:
            return force_complete() if group.has(member_id) else False
        if not group.has(member_id):
            return force_complete()
        member = group.get(member_id)
        if member.has_satisfied_heartbeat() or member.is_leaving:
            return force_complete()
        return False

    def on_expire_heartbeat(self, group, member_id: str, is_pending: bool) -> None:
        if group.is_(GroupState.DEAD):
            log.info("Received notification of heartbeat expiration for member %s after group %s had already "
                     "been unloaded or deleted.", member_id, group.group_id)
        elif is_pending:
            log.info("Pending member %s in group %s has been removed after session timeout expiration.",
                     member_id, group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)
        elif not group.has(member_id):
            log.debug("Member %s has already been removed from the group.", member_id)
        else:
            member = group.get(member_id)
            if not member.has_satisfied_heartbeat():
                log.info("Member %s in group %s has failed, removing it from the group", member_id,
                         group.group_id)
                self._remove_member_and_update_group(group, member,
                                                     f"removing member {member_id} on heartbeat expiration")

    # ---- offsets --------------------------------------------------------------------------------------------
    def handle_commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                              generation_id: int, offsets: dict, callback) -> None:
        error = self.validate_group_status(group_id, "OffsetCommit")
        if error is not None:
            callback({tp: error for tp in offsets})
            return
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id < 0:
                # Offsets-only use of Kafka (no group management): allow the commit.
                group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.manager.now_ms))
            else:
                callback({tp: Errors.ILLEGAL_GENERATION for tp in offsets})
                return
        if group.is_(GroupState.DEAD):
            callback({tp: Errors.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        elif group.is_static_member_fenced(member_id, group_instance_id, "commit-offsets"):
            callback({tp: Errors.FENCED_INSTANCE_ID for tp in offsets})
        elif generation_id < 0 and group.is_(GroupState.EMPTY):
            self.manager.store_offsets(group, member_id, offsets, callback)
        elif not group.has(member_id):
            callback({tp: Errors.UNKNOWN_MEMBER_ID for tp in offsets})
        elif generation_id != group.generation_id:
            callback({tp: Errors.ILLEGAL_GENERATION for tp in offsets})
        elif group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # During PreparingRebalance commits are still allowed; the heartbeat tells the member to rejoin.
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
            self.manager.store_offsets(group, member_id, offsets, callback)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            callback({tp: Errors.REBALANCE_IN_PROGRESS for tp in offsets})
        else:
            raise RuntimeError(f"Logic error: unexpected group state {group.state.value}")

    def handle_txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                  group_instance_id: str | None, generation_id: int, offsets: dict,
                                  callback) -> None:
        """TxnOffsetCommit: the offsets written in the producer's transaction, pending until its marker. The
        member and generation are checked only when given (KIP-447; a producer outside a group sends neither)."""
        error = self.validate_group_status(group_id, "TxnOffsetCommit")
        if error is not None:
            callback({tp: error for tp in offsets})
            return
        group = self.manager.get_group(group_id) or self.manager.add_group(
            GroupMetadata(group_id, GroupState.EMPTY, self.manager.now_ms))
        if group.is_(GroupState.DEAD):
            callback({tp: Errors.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        elif group.is_static_member_fenced(member_id, group_instance_id, "txn-commit-offsets"):
            callback({tp: Errors.FENCED_INSTANCE_ID for tp in offsets})
        elif member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
            callback({tp: Errors.UNKNOWN_MEMBER_ID for tp in offsets})
        elif generation_id >= 0 and generation_id != group.generation_id:
            callback({tp: Errors.ILLEGAL_GENERATION for tp in offsets})
        else:
            self.manager.store_offsets(group, member_id, offsets, callback, producer_id, producer_epoch)

    def complete_txn_offsets(self, producer_id: int, offsets_partition: int, committed: bool) -> None:
        """The replica manager's hook once a transaction marker is replicated on `__consumer_offsets`
        partition `offsets_partition`: the producer's pending offsets of that partition's groups become visible
        (COMMIT) or are dropped (ABORT)."""
        self.manager.handle_txn_completion(producer_id, offsets_partition, committed)

    def handle_fetch_offsets(self, group_id: str, partitions: list | None, require_stable: bool = False):
        """(error, {tp: (offset, leader epoch, metadata, error)}); all committed partitions when None."""
        error = self.validate_group_status(group_id, "OffsetFetch")
        if error is not None:
            return error, {}
        return Errors.NONE, self.manager.get_offsets(group_id, partitions, require_stable)

    def handle_list_groups(self, states: set[str]):
        """(error, [(group id, protocol type, state)]) for the groups this coordinator holds."""
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading else Errors.NONE
        groups = [(g.group_id, g.protocol_type or "", g.state.value) for g in self.manager.current_groups()
                  if not states or g.state.value in states]
        return error, groups

    def handle_describe_group(self, group_id: str):
        """(error, (state, protocol type, protocol, members))."""
        error = self.validate_group_status(group_id, "DescribeGroups")
        if error is not None:
            return error, EMPTY_GROUP_SUMMARY
        group = self.manager.get_group(group_id)
        if group is None:
            return Errors.NONE, DEAD_GROUP_SUMMARY
        return Errors.NONE, group.summary()

    def handle_delete_groups(self, group_ids) -> dict:
        errors: dict = {}
        eligible = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, "DeleteGroups")
            if error is not None:
                errors[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(GroupState.DEAD):
                errors[group_id] = (Errors.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id)
                                    else Errors.NOT_COORDINATOR)
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD)
                eligible.append(group)
            else:
                errors[group_id] = Errors.NON_EMPTY_GROUP
        if eligible:
            removed = self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
            for g in eligible:
                errors[g.group_id] = Errors.NONE
            log.info("The following groups were deleted: %s. A total of %d offsets were removed.",
                     ", ".join(g.group_id for g in eligible), removed)
        return errors

    def handle_deleted_partitions(self, partitions: list) -> None:
        """Partitions of deleted topics (UpdateMetadata marked them): every group loaded here forgets its offsets
        for them, tombstones included, as Kafka's GroupCoordinator.handleDeletedPartitions does."""
        removed = self.manager.cleanup_group_metadata(self.manager.current_groups(),
                                                      lambda g: g.remove_offsets(partitions))
        if removed:
            log.info("Removed %d offsets associated with deleted partitions: %s.", removed,
                     ", ".join(f"{t}-{p}" for t, p in partitions))

    def handle_delete_offsets(self, group_id: str, partitions: list):
        """(group error, {tp: error})."""
        error = self.validate_group_status(group_id, "OffsetDelete")
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return (Errors.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id)
                    else Errors.NOT_COORDINATOR), {}
        partition_errors: dict = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            partition_errors = {tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions
                                if group.is_subscribed_to_topic(tp[0])}
        else:
            return Errors.NON_EMPTY_GROUP, {}
        if eligible:
            removed = self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            partition_errors.update({tp: Errors.NONE for tp in eligible})
            log.info("The following offsets of the group %s were deleted: %s. A total of %d offsets were removed.",
                     group_id, eligible, removed)
        return Errors.NONE, partition_errors

    # ---- load / unload --------------------------------------------------------------------------------------
    def _on_group_loaded(self, group: GroupMetadata) -> None:
        log.info("Loading group metadata for %s with generation %d", group.group_id, group.generation_id)
        if group.size > self.max_size:
            self._prepare_rebalance(group, f"Freshly-loaded group is over capacity ({self.max_size}). Rebalancing "
                                           f"in order to give a chance for consumers to commit offsets")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        log.info("Unloading group metadata for %s with generation %d", group.group_id, group.generation_id)
        previous = group.state
        group.transition_to(GroupState.DEAD)
        if previous is GroupState.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinGroupResult(member.member_id, Errors.NOT_COORDINATOR))
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncGroupResult(Errors.NOT_COORDINATOR))
                self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member.member_id))
        self._remove_sync_expiration(group)

