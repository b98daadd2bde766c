"""Partition: one topic-partition hosted by this broker, as leader or follower, with its log.

The leader validates and appends produce data (records.validator assigns the offsets; the idempotent
producer state catches duplicates and sequence gaps before anything is written), serves reads up to the high
watermark, answers offsets by timestamp and moves the log start offset (DeleteRecords).

Appends run without yielding to other greenlets between reading the log end offset and writing (file
writes and validation do not yield), so two producers to one partition cannot interleave.

High watermark: until follower replication arrives, the leader's high watermark follows its log end offset
on every append (every acknowledged record is readable at once, as with a single replica).
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from ..log.config import LogConfig
from ..log.errors import OffsetOutOfRange, RecordBatchTooLarge
from ..log.producer_state import ProducerEntry, ProducerStateManager
from ..protocol.errors import Errors, KafkaError
from ..records.validator import CREATE_TIME, LOG_APPEND_TIME, RecordsConfig, magic_for_format_version, validate_and_assign

state_change = logging.getLogger("state-change")

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def records_config(config: LogConfig) -> RecordsConfig:
    return RecordsConfig(
        magic=magic_for_format_version(config.message_format_version),
        timestamp_type=LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime" else CREATE_TIME,
        max_timestamp_difference_ms=config.message_timestamp_difference_max_ms,
        compression_type=config.compression_type,
        max_message_bytes=config.max_message_bytes,
        compacted="compact" in config.cleanup_policy)


@dataclass
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int


class Partition:
    def __init__(self, topic: str, index: int, broker_id: int, log, clock):
        self.topic, self.index = topic, index
        self.broker_id = broker_id
        self.log = log
        self.clock = clock
        self.leader = -1
        self.leader_epoch = -1
        self.isr: list[int] = []
        self.replicas: list[int] = []
        self.zk_version = 0
        self.topic_id: uuid.UUID | None = None
        self.producer_state = ProducerStateManager(log.dir)
        self.producer_state.rebuild_from_log(log)
        self._records_config = records_config(log.config)

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    def update_config(self, config: LogConfig) -> None:
        self.log.update_config(config)
        self._records_config = records_config(config)

    def apply_state(self, leader: int, leader_epoch: int, isr, replicas, zk_version: int,
                    topic_id: uuid.UUID | None) -> None:
        """Become leader or follower as the controller says (LeaderAndIsr)."""
        self.leader, self.leader_epoch = leader, leader_epoch
        self.isr, self.replicas, self.zk_version = list(isr), list(replicas), zk_version
        if topic_id is not None:
            self.topic_id = topic_id
        if self.is_leader:
            # A new leader epoch starts at the current end of the log.
            self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
            self.log.update_high_watermark(self.log.log_end_offset)

    # ---- leader appends -----------------------------------------------------------------------------------
    def append_as_leader(self, records, produce_version: int, acks: int) -> AppendResult:
        if not self.is_leader:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} is not the leader of "
                                                            f"{self.topic}-{self.index}")
        if records is None:
            raise KafkaError(Errors.CORRUPT_MESSAGE, "null records")
        min_isr = self.log.config.min_insync_replicas
        if acks == -1 and len(self.isr) < min_isr:
            raise KafkaError(Errors.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr "
                             f"requirement of {min_isr} for partition {self.topic}-{self.index}")
        log = self.log
        now = self.clock.now_ms()
        info = validate_and_assign(records, produce_version=produce_version, next_offset=log.log_end_offset,
                                   now_ms=now, config=self._records_config, partition_leader_epoch=self.leader_epoch)
        if info.first_offset < 0:   # nothing to append (an empty v0-v2 produce)
            return AppendResult(-1, -1, -1, log.log_start_offset)
        duplicate = self._check_producers(info)
        if duplicate is not None:
            return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, log.log_start_offset)
        try:
            log.append(info.records, info.first_offset, info.last_offset, info.max_timestamp,
                       info.offset_of_max_timestamp, info.record_count)
        except RecordBatchTooLarge as e:
            raise KafkaError(Errors.RECORD_LIST_TOO_LARGE, str(e)) from None
        for b in info.batches:
            if b.producer_id >= 0 and not b.is_control:
                self.producer_state.update(b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence,
                                           b.first_offset, b.last_offset, now)
        log.update_high_watermark(log.log_end_offset)
        log.maybe_flush()
        return AppendResult(info.first_offset, info.last_offset, info.log_append_time, log.log_start_offset)

    def _check_producers(self, info):
        """Sequence checks for idempotent batches; the original metadata when the batch is a retry."""
        pending: dict[int, ProducerEntry] = {}
        for b in info.batches:
            if b.producer_id < 0 or b.is_control:
                continue
            duplicate = self.producer_state.check(b.producer_id, b.producer_epoch, b.base_sequence,
                                                  b.last_sequence, pending)
            if duplicate is not None:
                return duplicate
        return None

    # ---- reads --------------------------------------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Fencing by the client's view of the leader epoch (Fetch v9+, ListOffsets v4+)."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(Errors.FENCED_LEADER_EPOCH, f"epoch {current_leader_epoch} < {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(Errors.UNKNOWN_LEADER_EPOCH, f"epoch {current_leader_epoch} > {self.leader_epoch}")

    def read(self, fetch_offset: int, max_bytes: int, isolation_level: int, min_one_message: bool):
        """(FetchDataInfo, high watermark, last stable offset, log start offset) for a consumer fetch."""
        log = self.log
        hw = log.high_watermark
        try:
            info = log.read(fetch_offset, max_bytes, max_offset=hw, min_one_message=min_one_message)
        except OffsetOutOfRange as e:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE, str(e)) from None
        return info, hw, hw, log.log_start_offset

    def offset_for_timestamp(self, timestamp: int, isolation_level: int):
        """(offset, timestamp, leader epoch) for ListOffsets; latest is the high watermark for consumers."""
        log = self.log
        if timestamp == -1:
            return log.high_watermark, -1, self.leader_epoch
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is None or found.offset >= log.high_watermark and timestamp != -2:
            return -1, -1, -1
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
        return found.offset, found.timestamp, epoch

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
