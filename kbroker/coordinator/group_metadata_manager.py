"""GroupMetadataManager: the groups and committed offsets of the `__consumer_offsets` partitions this broker
leads, kept in memory and written to those partitions (Kafka 2.8's GroupMetadataManager).

Ownership: becoming leader of offsets partition P schedules a load of P (its groups answer
COORDINATOR_LOAD_IN_PROGRESS meanwhile); the load reads P's log from the log start offset to the log end
offset (as Kafka: the new leader's log is the truth), the last value per key wins, tombstones delete, and
transactional offset commits (batches with the transactional bit) are held per producer id until that
producer's control batch: COMMIT applies them unless a later commit of the same partition was read, ABORT
drops them; those with no marker yet stay pending in their groups for the marker to come (the group
coordinator's complete_txn_offsets). Losing leadership (follower,
StopReplica) schedules an unload: P's groups become Dead and leave the cache, so their requests get
NOT_COORDINATOR. Loads and unloads run in order on one greenlet (Kafka's single-thread scheduler), and a load
is skipped when a newer leader epoch has been seen for P or the broker no longer leads P at that epoch (this
scheduling is CoordinatorPartitions', partition_loader.py, shared with the transaction coordinator).

Writes: group metadata (after a rebalance) and offset commits are v2 batches of keyed records (schemas.py;
TxnOffsetCommit's as a transactional batch of the producer's id and epoch, pending until its marker),
appended with acks = offsets.commit.required.acks (-1: the whole ISR) and offsets.commit.timeout.ms through
the replica manager's internal path; callers get the result by callback, mapped to the error codes Kafka
answers (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, REQUEST_TIMED_OUT, ...). Deleted and expired offsets and
dead groups are written as tombstones without waiting for acks (a lost tombstone is written again later).

Expiry: every offsets.retention.check.interval.ms, offsets are dropped as GroupMetadata.remove_expired_offsets
says (offsets.retention.minutes), and an Empty group left without offsets becomes Dead and is removed.
"""
from __future__ import annotations

import logging
import struct
import time
from typing import Callable

from ..protocol.errors import Errors
from ..records.batches import CREATE_TIME, legacy_records, v2_records
from ..records.builder import build_v2
from ..records.entries import CONTROL_MASK, TRANSACTIONAL_MASK, V2_HEADER
from .group import CommitRecordMetadataAndOffset, GroupMetadata, GroupState
from .partition_loader import CoordinatorPartitions
from ..common.internal_topics import GROUP_METADATA_TOPIC
from .schemas import (GroupMetadataKey, GroupRecord, MemberRecord, OffsetAndMetadata,
                      OffsetKey, group_metadata_key, group_metadata_value, offset_commit_key, offset_commit_value,
                      partition_for, read_group_value, read_key, read_offset_value)

log = logging.getLogger("kbroker.coordinator")

_DECOMPRESSION_LIMIT = 256 * 1024 * 1024


class _Record:
    """What build_v2 needs of a record."""
    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(self, offset: int, timestamp: int, key: bytes, value: bytes | None):
        self.offset, self.timestamp, self.key, self.value, self.headers = offset, timestamp, key, value, ()


def java_string_length(s: str) -> int:
    """String.length() in Java: UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _store_group_error(error: Errors) -> Errors:
    """How a failed group metadata append is reported (Kafka's storeGroup callback)."""
    if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS,
                 Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error == Errors.REQUEST_TIMED_OUT:
        return Errors.REBALANCE_IN_PROGRESS
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.UNKNOWN_SERVER_ERROR
    return error


def _store_offsets_error(error: Errors) -> Errors:
    """How a failed offset commit append is reported (Kafka's storeOffsets callback)."""
    if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS,
                 Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return error


class GroupMetadataManager(CoordinatorPartitions):
    topic = GROUP_METADATA_TOPIC

    def __init__(self, broker_id: int, config, replica_manager, clock):
        super().__init__(replica_manager, clock, config["offsets.topic.num.partitions"])
        self.broker_id = broker_id
        self.config = config
        self.groups: dict[str, GroupMetadata] = {}
        self.codec = config["offsets.topic.compression.codec"]
        self.max_metadata_size = config["offset.metadata.max.bytes"]
        self.load_buffer_size = config["offsets.load.buffer.size"]
        self.producer_groups: dict[int, set[str]] = {}   # producer id -> groups with its pending txn offsets
        self.commit_timeout_ms = config["offsets.commit.timeout.ms"]
        self.commit_required_acks = config["offsets.commit.required.acks"]
        self.retention_ms = config["offsets.retention.minutes"] * 60_000
        # partition loads completed here: count, total and longest wall time in ms (the metrics' partition-load-time)
        self.loads = 0
        self.load_ms_total = self.load_ms_max = 0.0

    def now_ms(self) -> int:
        return self.clock.now_ms()

    # ---- ownership ------------------------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count)

    def is_group_local(self, group_id: str) -> bool:
        return self.is_local(group_id)

    def is_group_loading(self, group_id: str) -> bool:
        return self.is_loading_key(group_id)

    def group_not_exists(self, group_id: str) -> bool:
        """True iff this broker owns the group's partition and has no live group by that id."""
        group = self.groups.get(group_id)
        return self.is_group_local(group_id) and (group is None or group.is_(GroupState.DEAD))

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self.now_ms)
        return group

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    def group_counts(self) -> tuple[dict[str, int], int]:
        """({state name: groups in it}, committed offsets of all groups): Kafka's NumGroups* and NumOffsets."""
        by_state: dict[str, int] = {}
        offsets = 0
        for group in self.groups.values():
            by_state[group.state.value] = by_state.get(group.state.value, 0) + 1
            offsets += len(group.offsets)
        return by_state, offsets

    # ---- load / unload (scheduled by CoordinatorPartitions) ------------------------------------------------
    def _do_load(self, partition, epoch: int, on_group_loaded: Callable) -> None:
        started = time.monotonic()
        loaded_offsets: dict[tuple[str, str, int], CommitRecordMetadataAndOffset] = {}
        pending: dict[int, dict[tuple[str, str, int], CommitRecordMetadataAndOffset]] = {}
        loaded_groups: dict[str, GroupRecord] = {}
        removed_groups: set[str] = set()
        for view, entry in self.read_log(partition, epoch, self.load_buffer_size):
            self._load_entry(view, entry, loaded_offsets, pending, loaded_groups, removed_groups)
        if not self.still_leader(partition, epoch):
            return

        by_group: dict[str, dict] = {}
        for (g, t, p), r in loaded_offsets.items():
            by_group.setdefault(g, {})[(t, p)] = r
        # Transactional commits with no marker yet stay pending, per group and producer, for the marker to come.
        pending_by_group: dict[str, dict[int, dict]] = {}
        for producer_id, commits in pending.items():
            for (g, t, p), r in commits.items():
                pending_by_group.setdefault(g, {}).setdefault(producer_id, {})[(t, p)] = r
        loaded = []
        for group_id, record in loaded_groups.items():
            group = GroupMetadata.load(group_id, record, self.now_ms)
            group.initialize_offsets(by_group.get(group_id, {}), pending_by_group.get(group_id))
            loaded.append(group)
        for group_id in dict.fromkeys([*by_group, *pending_by_group]):
            if group_id not in loaded_groups:
                group = GroupMetadata(group_id, GroupState.EMPTY, self.now_ms)
                group.initialize_offsets(by_group.get(group_id, {}), pending_by_group.get(group_id))
                loaded.append(group)
        for group in loaded:
            current = self.add_group(group)
            if current is not group:
                log.debug("Attempt to load group %s from log with generation %d failed because there is already "
                          "a cached group with generation %d", group.group_id, group.generation_id,
                          current.generation_id)
                continue
            for producer_id in group.pending_txn_offset_commits:
                self.producer_groups.setdefault(producer_id, set()).add(group.group_id)
            on_group_loaded(group)
        load_ms = (time.monotonic() - started) * 1000.0
        self.loads += 1
        self.load_ms_total += load_ms
        self.load_ms_max = max(self.load_ms_max, load_ms)

    def _load_entry(self, view, entry, loaded_offsets, pending, loaded_groups, removed_groups) -> None:
        transactional, producer_id = False, -1
        if entry.magic == 2:
            (*_, producer_id, _, _, _) = V2_HEADER.unpack_from(view, entry.position)
            transactional = bool(entry.attributes & TRANSACTIONAL_MASK)
            records = v2_records(view, entry.position, entry.size, _DECOMPRESSION_LIMIT)
            if entry.attributes & CONTROL_MASK:
                if records:
                    key = records[0].key
                    kind = struct.unpack_from(">h", key, 2)[0] if key is not None and len(key) >= 4 else -1
                    if kind == 1:  # COMMIT
                        for k, r in pending.get(producer_id, {}).items():
                            current = loaded_offsets.get(k)
                            if current is None or current.older_than(r):
                                loaded_offsets[k] = r
                    pending.pop(producer_id, None)
                return
        else:
            records = legacy_records(view, entry.position, entry.size, _DECOMPRESSION_LIMIT)
        batch_base = None
        for record in records:
            if record.key is None:
                raise ValueError("Group metadata/offset entry key should not be null")
            if batch_base is None:
                batch_base = record.offset
            key = read_key(record.key)
            if isinstance(key, OffsetKey):
                k = (key.group, key.topic, key.partition)
                target = pending.setdefault(producer_id, {}) if transactional else loaded_offsets
                if record.value is None:
                    target.pop(k, None)
                else:
                    target[k] = CommitRecordMetadataAndOffset(batch_base, read_offset_value(record.value))
            elif isinstance(key, GroupMetadataKey):
                value = read_group_value(record.value)
                if value is not None:
                    removed_groups.discard(key.group)
                    loaded_groups[key.group] = value
                else:
                    loaded_groups.pop(key.group, None)
                    removed_groups.add(key.group)

    def _do_unload(self, partition: int, epoch: int | None, on_group_unloaded: Callable) -> None:
        groups = offsets = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) == partition:
                on_group_unloaded(group)
                if self.groups.get(group.group_id) is group:
                    del self.groups[group.group_id]
                    self._remove_group_from_producers(group.group_id)
                groups += 1
                offsets += len(group.offsets)
        log.info("Finished unloading %s-%d for coordinator epoch %s. Removed %d cached offsets and %d cached "
                 "groups.", GROUP_METADATA_TOPIC, partition, epoch, offsets, groups)

    # ---- writes ---------------------------------------------------------------------------------------------
    def _offsets_tp(self, group_id: str) -> tuple[str, int]:
        return GROUP_METADATA_TOPIC, self.partition_for(group_id)

    def _hosted(self, tp) -> bool:
        """Kafka's getMagic(partition).isDefined: the offsets partition's log is on this broker."""
        return tp in self.replica_manager.partitions

    def _batch(self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1,
               producer_epoch: int = -1) -> bytearray:
        """A batch of keyed records; with a producer id, a transactional batch of that producer (base sequence
        0, as Kafka's coordinator writes it: the log does not check a coordinator's sequences)."""
        now = self.now_ms()
        txn = producer_id >= 0
        return build_v2([_Record(i, now, k, v) for i, (k, v) in enumerate(records)], first_offset=0,
                        codec=self.codec, timestamp_type=CREATE_TIME, log_append_time=-1, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=0 if txn else -1, transactional=txn)

    def _append(self, tp, batch, acks: int, callback) -> None:
        """Append now; callback(error, base offset) when acks are satisfied."""
        def done(results):
            error, base, *_ = results[tp]
            callback(Errors(error), base)
        self.replica_manager.append_records(acks, self.commit_timeout_ms, {tp: batch}, None, internal=True,
                                            callback=done)

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes],
                    callback: Callable[[Errors], None]) -> None:
        """Write the group's metadata record (the members with their assignments); callback(error)."""
        tp = self._offsets_tp(group.group_id)
        if not self._hosted(tp):
            callback(Errors.NOT_COORDINATOR)
            return
        record = GroupRecord(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=(group.current_state_timestamp if group.current_state_timestamp is not None
                                     else -1),
            members=[MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(group.protocol_name),
                                  assignment[m.member_id]) for m in group.members.values()])
        batch = self._batch([(group_metadata_key(group.group_id), group_metadata_value(record))])
        generation = group.generation_id

        def appended(error: Errors, _base: int) -> None:
            if error:
                log.debug("Metadata from group %s with generation %d failed when appending to log due to %s",
                          group.group_id, generation, error.name)
                error = _store_group_error(error)
            callback(error)
        self._append(tp, batch, self.commit_required_acks, appended)

    def valid_metadata(self, metadata: str | None) -> bool:
        return metadata is None or java_string_length(metadata) <= self.max_metadata_size

    def store_offsets(self, group: GroupMetadata, member_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata],
                      callback: Callable[[dict], None], producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Write offset commits; callback({tp: error}) once the ISR has them (or they failed). With a producer
        id (TxnOffsetCommit) they are written in a transactional batch of that producer and stay pending in the
        group until the transaction's marker (complete_txn_offsets)."""
        valid = {tp: o for tp, o in offsets.items() if self.valid_metadata(o.metadata)}
        if not valid:
            callback({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in offsets})
            return
        tp_log = self._offsets_tp(group.group_id)
        if not self._hosted(tp_log):
            callback({tp: Errors.NOT_COORDINATOR for tp in offsets})
            return
        txn = producer_id >= 0
        batch = self._batch([(offset_commit_key(group.group_id, t, p), offset_commit_value(o))
                             for (t, p), o in valid.items()], producer_id, producer_epoch)
        if txn:
            self.producer_groups.setdefault(producer_id, set()).add(group.group_id)
            group.prepare_txn_offset_commit(producer_id, valid)
        else:
            group.prepare_offset_commit(valid)

        def appended(error: Errors, base: int) -> None:
            if not error:
                if not group.is_(GroupState.DEAD):
                    for tp, o in valid.items():
                        record = CommitRecordMetadataAndOffset(base, o)
                        if txn:
                            group.on_txn_offset_commit_append(producer_id, tp, record)
                        else:
                            group.on_offset_commit_append(tp, record)
            else:
                if not group.is_(GroupState.DEAD):
                    for tp, o in valid.items():
                        if txn:
                            group.fail_pending_txn_offset_commit(producer_id, tp)
                        else:
                            group.fail_pending_offset_write(tp, o)
                    if txn and not group.has_pending_offset_commits_from_producer(producer_id):
                        self._remove_producer_group(producer_id, group.group_id)
                log.debug("Offset commit %s from group %s, consumer %s with generation %d failed when appending "
                          "to log due to %s", valid, group.group_id, member_id, group.generation_id, error.name)
                error = _store_offsets_error(error)
            callback({tp: error if tp in valid else Errors.OFFSET_METADATA_TOO_LARGE for tp in offsets})
        self._append(tp_log, batch, self.commit_required_acks, appended)

    # ---- transactional offset commits ---------------------------------------------------------------------
    def handle_txn_completion(self, producer_id: int, partition: int, committed: bool) -> None:
        """The producer's marker is written on offsets partition `partition`: complete its pending offsets in
        the groups of that partition (Kafka's handleTxnCompletion)."""
        for group_id in [g for g in self.producer_groups.get(producer_id, ()) if self.partition_for(g) == partition]:
            group = self.groups.get(group_id)
            if group is None:
                log.info("Group %s has moved away from %d after transaction marker was written but before the "
                         "cache was updated. The cached content will be updated by appropriate coordinator after "
                         "the partition is loaded", group_id, self.broker_id)
            elif not group.is_(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, committed)
                self._remove_producer_group(producer_id, group_id)

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self.producer_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.producer_groups[producer_id]

    def _remove_group_from_producers(self, group_id: str) -> None:
        for producer_id in [p for p, groups in self.producer_groups.items() if group_id in groups]:
            self._remove_producer_group(producer_id, group_id)

    def get_offsets(self, group_id: str, tps: list[tuple[str, int]] | None, require_stable: bool = False):
        """{tp: (offset, leader epoch, metadata, error)}; -1 offsets for partitions without a commit; all
        committed partitions when tps is None."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return {tp: (-1, -1, "", Errors.NONE) for tp in (tps or [])}
        out = {}
        for tp in (tps if tps is not None else list(group.offsets)):
            if require_stable and group.has_pending_offset_commits_for(tp):
                out[tp] = (-1, -1, "", Errors.UNSTABLE_OFFSET_COMMIT)
                continue
            o = group.offset(tp)
            out[tp] = (-1, -1, "", Errors.NONE) if o is None else (o.offset, o.leader_epoch, o.metadata, Errors.NONE)
        return out

    # ---- deletion and expiry --------------------------------------------------------------------------------
    def cleanup_group_metadata(self, groups, selector: Callable[[GroupMetadata], dict]) -> int:
        """Remove offsets chosen by selector(group); an Empty group left without offsets becomes Dead and leaves
        the cache. Tombstones go to the group's offsets partition (not waiting for acks). Offsets removed."""
        removed_total = 0
        for group in list(groups):
            group_id = group.group_id
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets:
                log.info("Group %s transitioned to Dead in generation %d", group_id, group.generation_id)
                group.transition_to(GroupState.DEAD)
            dead, generation = group.is_(GroupState.DEAD), group.generation_id
            tp = self._offsets_tp(group_id)
            if not self._hosted(tp):
                log.info("Broker %d is no longer a coordinator for the group %s. Proceeding cleanup for other "
                         "alive groups", self.broker_id, group_id)
                continue
            tombstones = [(offset_commit_key(group_id, t, p), None) for (t, p) in removed]
            if dead and self.groups.get(group_id) is group:
                del self.groups[group_id]
                # A generation-0 group only ever stored offsets: it has no metadata record to delete.
                if generation > 0:
                    tombstones.append((group_metadata_key(group_id), None))
            if tombstones:
                def appended(error: Errors, _base: int, n=len(tombstones), g=group_id, tp=tp) -> None:
                    if error:
                        log.error("Failed to append %d tombstones to %s-%d for expired/deleted offsets and/or "
                                  "metadata for group %s: %s", n, tp[0], tp[1], g, error.name)
                try:
                    self._append(tp, self._batch(tombstones), 1, appended)
                    removed_total += len(removed)
                except Exception:
                    log.exception("Failed to append %d tombstones to %s-%d for group %s", len(tombstones), tp[0],
                                  tp[1], group_id)
        return removed_total

    def expire_offsets(self) -> int:
        now = self.now_ms()
        removed = self.cleanup_group_metadata(self.current_groups(),
                                              lambda g: g.remove_expired_offsets(now, self.retention_ms))
        if removed:
            log.info("Removed %d expired offsets in %d milliseconds.", removed, self.now_ms() - now)
        return removed
