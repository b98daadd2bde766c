"""TransactionStateManager: the transactional ids of the `__transaction_state` partitions this broker leads
(Kafka 2.8's TransactionStateManager).

Ownership and loading are CoordinatorPartitions' (shared with the group coordinator): leading partition P
loads it (ids of P answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), the last record per id wins, tombstones
delete, and transactions found in PrepareCommit/PrepareAbort are handed to the marker sender at once; losing P
drops its ids (NOT_COORDINATOR). The coordinator epoch of P's ids is P's leader epoch.

Writes: one uncompressed record per state change, appended acks=-1 through the replica manager's internal
path; once the ISR has it the prepared transit is applied, else the pending state is cleared (unless the caller
retries) and the error is mapped as Kafka does: UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR;
anything else UNKNOWN_SERVER_ERROR; a coordinator epoch changed meanwhile -> NOT_COORDINATOR.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from ...protocol.errors import Errors
from ...records.batches import CREATE_TIME
from ...records.builder import build_v2
from ..partition_loader import CoordinatorPartitions
from ...common.internal_topics import TRANSACTION_STATE_TOPIC
from ...common.transaction_log import TxnState, partition_for, txn_key, txn_value
from .state import TransactionMetadata, Transit, transactions_from_log

log = logging.getLogger("kbroker.coordinator.transaction")

_COMPLETE_OR_EMPTY = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


class _Record:
    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(self, timestamp: int, key: bytes, value: bytes | None):
        self.offset, self.timestamp, self.key, self.value, self.headers = 0, timestamp, key, value, ()


def _append_error(error: Errors) -> Errors:
    if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS,
                 Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    return Errors.UNKNOWN_SERVER_ERROR


class TransactionStateManager(CoordinatorPartitions):
    topic = TRANSACTION_STATE_TOPIC

    def __init__(self, config, replica_manager, clock):
        super().__init__(replica_manager, clock, config["transaction.state.log.num.partitions"])
        self.config = config
        self.load_buffer_size = config["transaction.state.log.load.buffer.size"]
        # partition -> (coordinator epoch, {transactional id: metadata})
        self.cache: dict[int, tuple[int, dict[str, TransactionMetadata]]] = {}
        # partition loads completed here: count, total and longest wall time in ms (the metrics' partition-load-time)
        self.loads = 0
        self.load_ms_total = self.load_ms_max = 0.0
        # called with a transactional id whose pending transition was applied or dropped, or which was unloaded
        self.on_settled: Callable[[str], None] = lambda transactional_id: None

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count)

    def valid_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config["transaction.max.timeout.ms"]

    def get_state(self, transactional_id: str, create: TransactionMetadata | None = None):
        """(error, None) or (NONE, (coordinator epoch, metadata or None)); `create` is added if the id is new."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, None
        entry = self.cache.get(partition)
        if entry is None or partition not in self.owned_partitions:
            return Errors.NOT_COORDINATOR, None
        epoch, ids = entry
        metadata = ids.get(transactional_id)
        if metadata is None and create is not None:
            metadata = ids[transactional_id] = create
        return Errors.NONE, (epoch, metadata)

    def all_transactions(self):
        """(coordinator epoch, metadata) of every id loaded here."""
        for partition, (epoch, ids) in list(self.cache.items()):
            if partition in self.owned_partitions:
                for metadata in list(ids.values()):
                    yield epoch, metadata

    # ---- writes -------------------------------------------------------------------------------------------
    def append(self, transactional_id: str, coordinator_epoch: int, transit: Transit,
               callback: Callable[[Errors], None], retry_on_error: Callable[[Errors], bool] = lambda e: False) -> None:
        """Write the transit (a tombstone for Dead) with acks=-1, then apply it (see the module docstring);
        callback(error)."""
        error, found = self.get_state(transactional_id)
        if error:
            callback(error)
            return
        if found[1] is None or found[0] != coordinator_epoch:
            callback(Errors.NOT_COORDINATOR)
            return
        tp = (self.topic, self.partition_for(transactional_id))
        value = None if transit.state is TxnState.DEAD else txn_value(transit.log_value())
        batch = build_v2([_Record(transit.update_ms, txn_key(transactional_id), value)], first_offset=0, codec=0,
                         timestamp_type=CREATE_TIME, log_append_time=-1)

        def appended(results) -> None:
            error = Errors(results[tp][0])
            if error:
                log.debug("Appending %s's transition to %s failed: %s", transactional_id, transit.state.name,
                          error.name)
                error = _append_error(error)
            state_error, found = self.get_state(transactional_id)
            if state_error:
                error = error or state_error
            elif found[1] is None or found[0] != coordinator_epoch:
                error = error or Errors.NOT_COORDINATOR
            elif not error:
                found[1].complete(transit)
                if transit.state is TxnState.DEAD:
                    self.cache[self.partition_for(transactional_id)][1].pop(transactional_id, None)
            elif not retry_on_error(error):
                found[1].pending = None
            callback(error)
            self.on_settled(transactional_id)
        self.replica_manager.append_records(-1, transit.timeout_ms, {tp: batch}, None, internal=True,
                                            callback=appended)

    # ---- load / unload --------------------------------------------------------------------------------------
    def _do_load(self, partition, epoch: int, send_markers: Callable) -> None:
        started = time.monotonic()
        loaded = transactions_from_log(self.read_log(partition, epoch, self.load_buffer_size))
        if not self.still_leader(partition, epoch):
            return
        self.cache[partition.index] = (epoch, loaded)
        load_ms = (time.monotonic() - started) * 1000.0
        self.loads += 1
        self.load_ms_total += load_ms
        self.load_ms_max = max(self.load_ms_max, load_ms)
        now = self.clock.now_ms()
        for metadata in loaded.values():
            if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info("Completing %s of %s found on load", metadata.state.name, metadata.transactional_id)
                send_markers(epoch, metadata, metadata.prepare_complete(now))
        log.info("Loaded %d transactional ids from %s-%d in coordinator epoch %d", len(loaded), self.topic,
                 partition.index, epoch)

    def _do_unload(self, partition: int, epoch: int | None, on_unloaded: Callable) -> None:
        entry = self.cache.pop(partition, None)
        on_unloaded(partition)
        for transactional_id in entry[1] if entry else ():
            self.on_settled(transactional_id)
        log.info("Unloaded %d transactional ids of %s-%d (epoch %s)", len(entry[1]) if entry else 0, self.topic,
                 partition, epoch)

    # ---- timeouts and expiry ---------------------------------------------------------------------------------
    def timed_out(self, now: int):
        """(coordinator epoch, metadata) of Ongoing transactions past their timeout, not pending."""
        return [(e, m) for e, m in self.all_transactions()
                if m.state is TxnState.ONGOING and not m.pending_in_progress and m.start_ms + m.timeout_ms < now]

    def expirable(self, now: int):
        """(coordinator epoch, metadata) of ids idle past transactional.id.expiration.ms."""
        limit = now - self.config["transactional.id.expiration.ms"]
        return [(e, m) for e, m in self.all_transactions()
                if m.state in _COMPLETE_OR_EMPTY and not m.pending_in_progress and m.update_ms <= limit]
