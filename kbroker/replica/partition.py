"""Partition: one topic-partition hosted by this broker, as leader or follower, with its log.

Leader: validates and appends produce data (records.validator assigns the offsets; the idempotent producer
state catches retries and sequence gaps before anything is written), tracks each follower's log end offset
from its fetches, advances the high watermark to the smallest log end offset among the in-sync replicas (and
replicas that caught up within replica.lag.time.max.ms, as Kafka 2.8), expands the ISR when a follower
reaches the high watermark and shrinks it when one falls replica.lag.time.max.ms behind. ISR changes are
written by the leader to the partition state znode with a zkVersion check, plus an /isr_change_notification
entry for the controller (Kafka 2.x's ZooKeeper path); a version conflict means the controller changed the
state meanwhile, and its LeaderAndIsr will follow.

Transactions: the leader appends the coordinator's markers (append_txn_marker: a control batch, after
Kafka's producer epoch and coordinator epoch checks); leader and followers alike apply transactional batches
and markers to the producer state (open transactions, the last stable offset) and index aborted transactions
in the log's `.txnindex`. Consumers reading READ_COMMITTED stop at the last stable offset.

Follower: appends what its fetcher copies from the leader (CRC-checked, offsets kept), takes the leader's
high watermark capped by its own log end offset (waking the consumers that read from it, KIP-392, when it
moves), and truncates where its log diverges from the leader's.

Moving between log dirs: the mover (log_dir_mover.py) copies into the partition's future log with
append_replicated, as a follower appends, and switches the partition to it with replace_log.

An append holds its log's append_lock from reading the log end offset (offset assignment, sequence checks) to
the producer state update: a large append's file write runs in the thread pool and yields the hub meanwhile,
so two producers to one partition queue there instead of interleaving; other partitions go on.
"""
from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType

from ..log.config import LogConfig
from ..log.errors import OffsetOutOfRange, RecordBatchTooLarge
from ..log.producer_state import ProducerEntry
from ..log.segment import EMPTY_SLICE
from ..protocol.errors import Errors, KafkaError
from ..records.builder import control_batch
from ..records.entries import CorruptEntry, iter_entries
from ..records.validator import CREATE_TIME, LOG_APPEND_TIME, RecordsConfig, magic_for_format_version, validate_and_assign

state_change = logging.getLogger("state-change")

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


# One RecordsConfig per distinct setting, shared by every partition with it (thousands of partitions, a few
# settings); weakly held, so a setting no partition uses any more goes.
_RECORDS_CONFIGS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def records_config(config: LogConfig) -> RecordsConfig:
    # keyed by the settings it derives from: a partition made by a LeaderAndIsr for 100 000 builds no config
    key = (config.message_format_version, config.message_timestamp_type, config.message_timestamp_difference_max_ms,
           config.compression_type, config.max_message_bytes, "compact" in config.cleanup_policy)
    found = _RECORDS_CONFIGS.get(key)
    if found is None:
        found = _RECORDS_CONFIGS.setdefault(key, RecordsConfig(
            magic=magic_for_format_version(config.message_format_version),
            timestamp_type=LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime" else CREATE_TIME,
            max_timestamp_difference_ms=config.message_timestamp_difference_max_ms,
            compression_type=config.compression_type,
            max_message_bytes=config.max_message_bytes,
            compacted=key[-1]))
    return found


# A follower's `remote`: one shared empty mapping (a leader gets a dict of its own).
_NO_REMOTES: Mapping[int, RemoteReplica] = MappingProxyType({})


def _ignore_high_watermark(tp) -> None:
    pass


@dataclass
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    record_count: int = 0       # records appended (0 for a retried duplicate)
    converted_count: int = 0    # of those, records converted to the log's message format


class FollowerRound:
    """When a follower's last fetch started (ReplicaManager.fetch): the time its session's quiet partitions were
    implicitly fetched at their end (replica.fetch_session leaves them out of the reads)."""
    __slots__ = ("last_ms",)

    def __init__(self, last_ms: int = 0):
        self.last_ms = last_ms


@dataclass(slots=True)
class RemoteReplica:
    """The leader's view of one follower. While it sits at the log end offset (idle_round set), each fetch of
    that follower counts as a fetch of this partition at the end, until the partition changes (settle)."""
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    log_start_offset: int = -1   # as its fetches last said (Fetch v5+); -1 unknown (KIP-392's replica choice)
    idle_round: FollowerRound | None = None

    def caught_up_ms(self) -> int:
        r = self.idle_round
        return self.last_caught_up_ms if r is None else max(self.last_caught_up_ms, r.last_ms)

    def settle(self) -> None:
        """Fold the fetches at the end counted by idle_round into the times (before the partition changes)."""
        r = self.idle_round
        if r is not None:
            self.idle_round = None
            self.last_caught_up_ms = max(self.last_caught_up_ms, r.last_ms)
            self.last_fetch_ms = max(self.last_fetch_ms, r.last_ms)


class Partition:
    __slots__ = ("topic", "index", "broker_id", "log", "clock", "isr_writer", "lag_max_ms", "leader", "leader_epoch",
                 "leader_epoch_start_offset", "controller_epoch", "isr", "replicas", "zk_version", "topic_id", "remote",
                 "on_high_watermark_moved", "producer_state", "_records_source", "_records_config",
                 "__weakref__")

    def __init__(self, topic: str, index: int, broker_id: int, log, clock, isr_writer, lag_max_ms: int):
        self.topic, self.index = topic, index
        self.broker_id = broker_id
        self.log = log
        self.clock = clock
        self.isr_writer = isr_writer   # (partition, new isr) -> bool: write the state znode as the leader
        self.lag_max_ms = lag_max_ms   # replica.lag.time.max.ms
        self.leader = -1
        self.leader_epoch = -1
        self.leader_epoch_start_offset = 0
        self.controller_epoch = 0
        self.isr: list[int] = []
        self.replicas: list[int] = []
        self.zk_version = 0
        self.topic_id: uuid.UUID | None = None
        self.remote: Mapping[int, RemoteReplica] = _NO_REMOTES
        # called with the partition's tp when its high watermark moved (the replica manager completes the
        # produce and fetch requests waiting on it)
        self.on_high_watermark_moved = _ignore_high_watermark
        self.producer_state = log.producer_state
        self._records_source, self._records_config = log.config, records_config(log.config)

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def records_config(self) -> RecordsConfig:
        """The validation settings of the log's current config (derived again when a dynamic change replaced it)."""
        if self._records_source is not self.log.config:
            self._records_source, self._records_config = self.log.config, records_config(self.log.config)
        return self._records_config

    def apply_state(self, leader: int, leader_epoch: int, isr, replicas, zk_version: int, controller_epoch: int,
                    topic_id: uuid.UUID | None) -> None:
        """Become leader or follower as the controller says (LeaderAndIsr). Under the append lock (Kafka's
        leaderIsrUpdateLock): an append still writing off the hub, as follower or leader, finishes first, so the
        new epoch starts after it."""
        with self._appending():
            self.leader, self.leader_epoch = leader, leader_epoch
            self.isr, self.replicas, self.zk_version = list(isr), list(replicas), zk_version
            self.controller_epoch = controller_epoch
            if topic_id is not None:
                self.topic_id = topic_id
            if self.is_leader:
                now = self.clock.now_ms()
                self.leader_epoch_start_offset = self.log.log_end_offset
                # This leadership's followers, caught up as of now (the previous ones made the ISR look out of sync).
                self.remote = {r: RemoteReplica(last_caught_up_ms=now if r in self.isr else 0)
                               for r in self.replicas if r != self.broker_id}
                # A new leader epoch starts at the current end of the log (its checkpoint is written before the
                # first append in it).
                self.log.assign_leader_epoch(leader_epoch, self.leader_epoch_start_offset)
                self.maybe_increment_high_watermark()
            else:
                self.remote = _NO_REMOTES

    # ---- leader appends -----------------------------------------------------------------------------------
    @contextmanager
    def _appending(self):
        """Hold the append lock of the partition's log (Kafka's leaderIsrUpdateLock read side and Log lock); the
        log a move swapped in while this waited, if it did. Yields the log."""
        while True:
            log = self.log
            log.append_lock.acquire()
            if log is self.log:
                break
            log.append_lock.release()
        try:
            yield log
        finally:
            log.append_lock.release()

    def append_as_leader(self, records, produce_version: int, acks: int) -> AppendResult:
        if records is None:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "null records")
        with self._appending() as log:   # leadership, offsets, sequences, the write, the producer state
            self._check_leader(acks)
            now = self.clock.now_ms()
            info = validate_and_assign(records, produce_version=produce_version, next_offset=log.log_end_offset,
                                       now_ms=now, config=self.records_config,
                                       partition_leader_epoch=self.leader_epoch)
            if info.first_offset < 0:   # nothing to append (an empty v0-v2 produce)
                return AppendResult(-1, -1, -1, log.log_start_offset)
            duplicate = self._check_producers(info, coordinator=produce_version is None)
            if duplicate is not None:
                return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, log.log_start_offset)
            try:
                log.append(info.records, info.first_offset, info.last_offset, info.max_timestamp,
                           info.offset_of_max_timestamp, info.record_count)
            except RecordBatchTooLarge as e:
                raise KafkaError(Errors.RECORD_LIST_TOO_LARGE, str(e)) from None
            for b in info.batches:
                if b.producer_id >= 0 and not b.is_control:
                    log.producer_state.update(b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence,
                                              b.first_offset, b.last_offset, now, b.is_transactional)
        self.maybe_increment_high_watermark()
        log.maybe_flush()
        converted = info.record_count if info.source_magic != self.records_config.magic else 0
        return AppendResult(info.first_offset, info.last_offset, info.log_append_time, log.log_start_offset,
                            info.record_count, converted)

    def _check_leader(self, acks: int) -> None:
        if not self.is_leader:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} is not the leader of "
                                                            f"{self.topic}-{self.index}")
        min_isr = self.log.config.min_insync_replicas
        if acks == -1 and len(self.isr) < min_isr:
            raise KafkaError(Errors.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr "
                             f"requirement of {min_isr} for partition {self.topic}-{self.index}")

    def append_txn_marker(self, producer_id: int, producer_epoch: int, committed: bool,
                          coordinator_epoch: int) -> int:
        """Append a COMMIT/ABORT control batch for the producer (the coordinator's WriteTxnMarkers, after
        Kafka's epoch and coordinator epoch checks); its offset."""
        with self._appending() as log:
            self._check_leader(-1)
            self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
            now = self.clock.now_ms()
            batch = control_batch(producer_id, producer_epoch, committed, coordinator_epoch, now)
            info = validate_and_assign(batch, produce_version=None, next_offset=log.log_end_offset, now_ms=now,
                                       config=self.records_config, partition_leader_epoch=self.leader_epoch)
            log.append(info.records, info.first_offset, info.last_offset, info.max_timestamp,
                       info.offset_of_max_timestamp, info.record_count)
            txn = self.producer_state.complete_txn(producer_id, producer_epoch, committed, coordinator_epoch,
                                                   info.first_offset)
            if txn is not None and txn.aborted:
                log.add_aborted_txn(txn)
        self.maybe_increment_high_watermark()
        log.maybe_flush()
        return info.first_offset

    def _check_producers(self, info, coordinator: bool = False):
        """Sequence checks for idempotent batches; the original metadata when the batch is a retry. A
        coordinator's batches written for a producer (TxnOffsetCommit) only get the epoch check: Kafka's
        AppendOrigin.Coordinator checks no sequences and finds no duplicates."""
        pending: dict[int, ProducerEntry] = {}
        for b in info.batches:
            if b.producer_id < 0 or b.is_control:
                continue
            if coordinator:
                entry = self.producer_state.producers.get(b.producer_id)
                if entry is not None and b.producer_epoch < entry.epoch:
                    raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                                     f"Epoch of producer {b.producer_id} is {b.producer_epoch}, which is smaller "
                                     f"than the last seen epoch {entry.epoch}")
                continue
            duplicate = self.producer_state.check(b.producer_id, b.producer_epoch, b.base_sequence,
                                                  b.last_sequence, b.is_transactional, pending)
            if duplicate is not None:
                return duplicate
        return None

    # ---- followers, seen from the leader ------------------------------------------------------------------
    def update_follower_fetch_state(self, follower: int, fetch_offset: int, leader_leo: int,
                                    follower_round: FollowerRound | None = None,
                                    expansions: list | None = None) -> bool:
        """A follower fetched from fetch_offset; True if the high watermark moved. At the end, its later fetches
        (follower_round) count as fetches of this partition at the end until it changes (settle_followers). An
        ISR expansion it allows is written at once, or added to `expansions` as (partition, new ISR) for the
        caller to write with the others of the same Fetch (ReplicaManager.write_isr_expansions)."""
        replica = self.remote.get(follower)
        if replica is None:
            return False
        now = self.clock.now_ms()
        if fetch_offset == leader_leo == replica.log_end_offset == self.log.high_watermark and follower in self.isr:
            # An idle partition (in-sync follower still at the end, HW there too): only the times move.
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, now)
            replica.last_fetch_leader_leo, replica.last_fetch_ms = leader_leo, now
            replica.idle_round = follower_round
            return False
        replica.settle()
        replica.idle_round = follower_round if fetch_offset >= leader_leo else None
        if fetch_offset >= leader_leo:
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, now)
        elif fetch_offset >= replica.last_fetch_leader_leo:
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, replica.last_fetch_ms)
        replica.log_end_offset = fetch_offset
        replica.last_fetch_leader_leo, replica.last_fetch_ms = leader_leo, now
        self._maybe_expand_isr(follower, replica, expansions)
        return self.maybe_increment_high_watermark()

    def settle_followers(self) -> None:
        """The partition is changing: followers at its end were so until now (RemoteReplica.settle)."""
        for replica in self.remote.values():
            if replica.idle_round is not None:
                replica.settle()

    def maybe_increment_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        log = self.log
        new_hw = log.log_end_offset
        now = self.clock.now_ms()
        lag = self.lag_max_ms
        for r, replica in self.remote.items():
            if r in self.isr or now - replica.caught_up_ms() <= lag:
                new_hw = min(new_hw, max(replica.log_end_offset, 0))
        if new_hw > log.high_watermark:
            log.update_high_watermark(new_hw)
            self.on_high_watermark_moved(self.tp)
            return True
        return False

    def _maybe_expand_isr(self, follower: int, replica: RemoteReplica, expansions: list | None) -> None:
        if follower in self.isr or follower not in self.replicas:
            return
        if replica.log_end_offset >= self.log.high_watermark and replica.log_end_offset >= self.leader_epoch_start_offset:
            if expansions is None:
                self._write_isr(self.isr + [follower], f"expanding ISR with broker {follower}")
            else:
                expansions.append((self, self.isr + [follower]))

    def isr_written(self, new_isr: list[int], why: str) -> None:
        """ZooKeeper holds new_isr (written by the caller, zk_version updated): take it."""
        state_change.info("partition %s-%d: %s: isr %s -> %s (zkVersion %d)", self.topic, self.index, why,
                          self.isr, new_isr, self.zk_version)
        self.isr = list(new_isr)

    def maybe_shrink_isr(self) -> bool:
        """Drop followers that have not caught up within replica.lag.time.max.ms; True if the ISR changed."""
        if not self.is_leader:
            return False
        now = self.clock.now_ms()
        lagging = [r for r in self.isr if r != self.broker_id and
                   now - self.remote.get(r, RemoteReplica()).caught_up_ms() > self.lag_max_ms]
        if not lagging:
            return False
        if self._write_isr([r for r in self.isr if r not in lagging], f"shrinking ISR, out of sync: {lagging}"):
            self.maybe_increment_high_watermark()
            return True
        return False

    def followers_quiet(self) -> bool:
        """Whether every in-sync follower sits at the end on a round fetched within replica.lag.time.max.ms:
        nothing but a change of the partition (which settles them) or a stalled round can put one out of sync."""
        now = self.clock.now_ms()
        for r in self.isr:
            if r != self.broker_id:
                replica = self.remote.get(r)
                if replica is None or replica.idle_round is None or now - replica.idle_round.last_ms > self.lag_max_ms:
                    return False
        return True

    def _write_isr(self, new_isr: list[int], why: str) -> bool:
        if self.isr_writer(self, new_isr):
            self.isr_written(new_isr, why)
            return True
        return False

    # ---- follower appends and truncation ------------------------------------------------------------------
    def append_as_follower(self, data, leader_hw: int) -> None:
        """Append what the fetcher copied from the leader (whole, CRC-valid entries; offsets kept)."""
        log = self.log
        self.append_replicated(log, data)
        previous = log.high_watermark
        if log.update_high_watermark(min(leader_hw, log.log_end_offset)) > previous:
            self.on_high_watermark_moved(self.tp)   # consumers reading from this follower (KIP-392) may be waiting

    @staticmethod
    def append_replicated(log, data) -> None:
        """Append copied entries to log (the partition's, or its future log): whole, CRC-valid entries, offsets
        kept, entries below its log end offset skipped; its producer state and aborted transactions follow."""
        view = memoryview(data)
        try:
            entries = list(iter_entries(view, check_crc=True))
        except CorruptEntry as e:
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"data from the leader is corrupt: {e}") from None
        with log.append_lock:
            entries = [e for e in entries if e.last_offset >= log.log_end_offset]
            if not entries:
                return
            start, end = entries[0].position, entries[-1].position + entries[-1].size
            first = entries[0].base_offset if entries[0].base_offset >= 0 else log.log_end_offset
            max_ts, max_ts_offset = -1, -1
            for e in entries:
                if e.max_timestamp > max_ts:
                    max_ts, max_ts_offset = e.max_timestamp, e.last_offset
            log.append(view[start:end], max(first, log.log_end_offset), entries[-1].last_offset, max_ts,
                       max_ts_offset, sum(e.record_count for e in entries))
            for txn in log.producer_state.update_from_entries(view, entries):
                if txn.aborted:
                    log.add_aborted_txn(txn)

    def replace_log(self, log) -> None:
        """Serve from `log` from now on (the future log that caught up with the current one; no yield)."""
        log.flush_observer = self.log.flush_observer
        self.log = log
        self.producer_state = log.producer_state

    def truncate_to(self, offset: int, reason: str) -> None:
        if offset < self.log.log_end_offset:
            state_change.info("partition %s-%d: truncating from %d to %d: %s", self.topic, self.index,
                              self.log.log_end_offset, offset, reason)
            self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        state_change.info("partition %s-%d: truncating fully, restarting at offset %d (the leader's log start)",
                          self.topic, self.index, offset)
        self.log.truncate_fully_and_start_at(offset)

    def truncate_for_leader_epoch(self, leader_epoch: int, end_offset: int) -> None:
        """Truncate by the leader's answer to OffsetForLeaderEpoch (Kafka's KIP-101/279 rule)."""
        log = self.log
        if end_offset < 0:
            # The leader knows no epoch at or below ours: Kafka falls back to the high watermark.
            self.truncate_to(log.high_watermark, "the leader has no epoch to compare with")
            return
        cache = log.leader_epoch_cache
        if cache.latest_epoch is not None and leader_epoch != cache.latest_epoch:
            _, our_end = log.end_offset_for_epoch(leader_epoch)
            target = min(end_offset, our_end if our_end >= 0 else end_offset, log.log_end_offset)
        else:
            target = min(end_offset, log.log_end_offset)
        self.truncate_to(target, f"leader epoch {leader_epoch} ends at {end_offset} on the leader")

    # ---- reads --------------------------------------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Fencing by the client's view of the leader epoch (Fetch v9+, ListOffsets v4+)."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(Errors.FENCED_LEADER_EPOCH, f"epoch {current_leader_epoch} < {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(Errors.UNKNOWN_LEADER_EPOCH, f"epoch {current_leader_epoch} > {self.leader_epoch}")

    def fetchable_end(self, isolation_level: int, follower: int = -1) -> int:
        """Where a read stops: the log end offset for followers, else the LSO (READ_COMMITTED) or the HW."""
        if follower >= 0:
            return self.log.log_end_offset
        return self.log.last_stable_offset if isolation_level == READ_COMMITTED else self.log.high_watermark

    def aborted_txns(self, start: int, end: int) -> list:
        """The aborted transactions (producer id, first offset) overlapping [start, end) for a READ_COMMITTED
        fetch, from the `.txnindex` files (an abort is indexed as its marker is appended)."""
        return [(t.producer_id, t.first_offset) for t in self.log.collect_aborted_txns(start, end)]

    def read(self, fetch_offset: int, max_bytes: int, isolation_level: int, min_one_message: bool,
             follower: int = -1, follower_round: FollowerRound | None = None, expansions: list | None = None):
        """(records as a file slice, high watermark, last stable offset, log start offset), as Kafka's
        Partition.readRecords. Consumers read up to the high watermark (READ_COMMITTED: the last stable offset); a
        follower reads up to the log end offset and its fetch offset updates its state (an ISR expansion goes to
        `expansions`, see update_follower_fetch_state). A fetcher already at the end reads nothing (the common case
        of an idle partition in a fetch session)."""
        log = self.log
        leo = log.log_end_offset
        limit = self.fetchable_end(isolation_level, follower)
        if fetch_offset == limit:
            records = EMPTY_SLICE
        else:
            try:
                records = log.read(fetch_offset, max_bytes, max_offset=limit, min_one_message=min_one_message).records
            except OffsetOutOfRange as e:
                raise KafkaError(Errors.OFFSET_OUT_OF_RANGE, str(e)) from None
        if follower >= 0:
            self.update_follower_fetch_state(follower, fetch_offset, leo, follower_round, expansions)
        hw = log.high_watermark
        state = self.producer_state   # with no transaction open or unreplicated the LSO is the HW: no call needed
        lso = log.last_stable_offset if state.ongoing or state.unreplicated else hw
        return records, hw, lso, log.log_start_offset

    def offset_for_timestamp(self, timestamp: int, isolation_level: int):
        """(offset, timestamp, leader epoch) for ListOffsets; latest is the high watermark for consumers (the
        last stable offset for READ_COMMITTED), and no offset at or beyond it is answered for a time."""
        log = self.log
        end = self.fetchable_end(isolation_level)
        if timestamp == -1:
            return end, -1, self.leader_epoch
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is None or found.offset >= end and timestamp != -2:
            return -1, -1, -1
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
        return found.offset, found.timestamp, epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= epoch, where it ends) in this leader's log."""
        return self.log.end_offset_for_epoch(epoch)

    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to offset (-1: the high watermark); the new low watermark."""
        log = self.log
        hw = log.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE, f"Cannot increment the log start offset to {target} of "
                                                         f"partition {self.topic}-{self.index} since it is larger "
                                                         f"than the high watermark {hw}")
        log.maybe_increment_log_start_offset(target)
        return log.log_start_offset
