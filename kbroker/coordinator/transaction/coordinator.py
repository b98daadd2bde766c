"""TransactionCoordinator: InitProducerId with a transactional id, AddPartitionsToTxn / AddOffsetsToTxn and
EndTxn for the transactional ids whose `__transaction_state` partition this broker leads (Kafka 2.8's
TransactionCoordinator; the API modules downgrade PRODUCER_FENCED for old versions).

- InitProducerId: a new id gets a fresh producer id at epoch 0; Empty/Complete* bump the epoch (a new producer
  id once the epoch is exhausted); with a producer id and epoch (v3+, KIP-360) an unknown pair is
  PRODUCER_FENCED, a retry of a bump that succeeded gets the same epoch; Ongoing fences the producer (epoch+1,
  PrepareEpochFence, the transaction aborted) and answers CONCURRENT_TRANSACTIONS; Prepare* and any pending
  transition answer CONCURRENT_TRANSACTIONS. Timeout <= 0 or > transaction.max.timeout.ms:
  INVALID_TRANSACTION_TIMEOUT; an empty id INVALID_REQUEST.
- AddPartitions: unknown id / other producer id INVALID_PRODUCER_ID_MAPPING, other epoch PRODUCER_FENCED,
  pending or Prepare* CONCURRENT_TRANSACTIONS, partitions already in the Ongoing transaction NONE unwritten,
  else Ongoing with the partitions added, answered once written. Where Kafka answers CONCURRENT_TRANSACTIONS
  at once, the request is held here instead until the transition in flight settles (typically the previous
  transaction's markers and Complete* record, a few ms), for at most HOLD_CONCURRENT_S: a producer's next
  transaction starts as soon as it can rather than after the client's retry backoff (librdkafka's 20 ms,
  which made up most of a small transaction's time). The answer is the one Kafka gives to the retry.
- EndTxn: from Ongoing the Prepare* record is written (acks=-1) before NONE is answered, then the markers go
  out (markers.py) and Complete* is written; a retry of the finished outcome is NONE, of the one in progress
  CONCURRENT_TRANSACTIONS; the opposite outcome or an Empty transaction INVALID_TXN_STATE.
- Every transaction.abort.timed.out.transaction.cleanup.interval.ms, Ongoing transactions past their timeout
  are fenced and aborted; every transaction.remove.expired.transaction.cleanup.interval.ms, ids idle past
  transactional.id.expiration.ms are deleted (tombstones).
"""
from __future__ import annotations

import logging
import time

import gevent

from ...common.internal_topics import TRANSACTION_STATE_TOPIC
from ...common.transaction_log import TxnState
from ...protocol.errors import Errors
from .manager import TransactionStateManager
from .markers import TransactionMarkerSender
from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata, is_epoch_exhausted

log = logging.getLogger("kbroker.coordinator.transaction")

HOLD_CONCURRENT_S = 0.5


class TransactionCoordinator:
    def __init__(self, broker_id: int, config, replica_manager, metadata_cache, producer_ids, clock,
                 admin_manager):
        self.broker_id = broker_id
        self.config = config
        self.replica_manager = replica_manager
        self.producer_ids = producer_ids
        self.clock = clock
        self.admin_manager = admin_manager
        self.manager = TransactionStateManager(config, replica_manager, clock)
        self.markers = TransactionMarkerSender(broker_id, metadata_cache, self.manager, config.inter_broker_listener,
                                               config["request.timeout.ms"], config.inter_broker_security)
        self._tasks: list = []
        self.active = False
        self._held: dict[str, list] = {}    # transactional id -> [retry] waiting for its transition to settle
        self.manager.on_settled = self._settled

    # ---- lifecycle ------------------------------------------------------------------------------------------
    def startup(self, partition_count: int) -> None:
        self.manager.startup(partition_count)
        self.replica_manager.leadership_listeners.append(self.on_leadership_change)
        self._tasks = [gevent.spawn(self._every, "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                                    self.abort_timed_out),
                       gevent.spawn(self._every, "transaction.remove.expired.transaction.cleanup.interval.ms",
                                    self.remove_expired)]
        self.active = True

    def shutdown(self) -> None:
        self.active = False
        for t in self._tasks:
            t.kill()
        for txn_id in list(self._held):
            self._settled(txn_id)
        self.markers.shutdown()
        self.manager.shutdown()
        listeners = self.replica_manager.leadership_listeners
        if self.on_leadership_change in listeners:
            listeners.remove(self.on_leadership_change)

    def _every(self, key: str, fn) -> None:
        while True:
            gevent.sleep(self.config[key] / 1000.0)
            try:
                fn()
            except Exception:
                log.exception("%s failed", fn.__name__)

    def on_leadership_change(self, leaders, followers, stopped) -> None:
        for (topic, partition), epoch in leaders:
            if topic == TRANSACTION_STATE_TOPIC:
                log.info("Elected as the txn coordinator for partition %d at epoch %d", partition, epoch)
                self.manager.schedule_load(partition, epoch, self._complete_loaded)
        for (topic, partition), epoch in list(followers) + list(stopped):
            if topic == TRANSACTION_STATE_TOPIC:
                log.info("Resigned as the txn coordinator for partition %d at epoch %s", partition, epoch)
                self.manager.schedule_unload(partition, epoch, self.markers.remove_partition)

    def _complete_loaded(self, coordinator_epoch: int, metadata: TransactionMetadata, transit) -> None:
        """A Prepare* transaction found on load: its markers are sent (again), then Complete* is written."""
        self.markers.add(coordinator_epoch, transit.state is TxnState.COMPLETE_COMMIT, metadata, transit)

    def topic_configs(self) -> dict[str, str]:
        """Kafka's TransactionStateManager.transactionTopicConfigs."""
        return {"cleanup.policy": "compact", "compression.type": "uncompressed",
                "min.insync.replicas": str(self.config["transaction.state.log.min.isr"]),
                "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                "unclean.leader.election.enable": "false"}

    def create_topic(self) -> None:
        """Have the admin manager create __transaction_state (on the first FindCoordinator for a transaction)."""
        cfg = self.config
        self.admin_manager.create_internal_topic(TRANSACTION_STATE_TOPIC, cfg["transaction.state.log.num.partitions"],
                                                 cfg["transaction.state.log.replication.factor"],
                                                 self.topic_configs())

    def partition_for(self, transactional_id: str) -> int:
        return self.manager.partition_for(transactional_id)

    # ---- InitProducerId -------------------------------------------------------------------------------------
    def handle_init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None,
                                callback) -> None:
        """callback(error, producer id, epoch); expected = (producer id, epoch) from v3+ requests, or None."""
        def fail(error: Errors) -> None:
            callback(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if not transactional_id:
            return fail(Errors.INVALID_REQUEST)
        if not self.manager.valid_timeout(timeout_ms):
            return fail(Errors.INVALID_TRANSACTION_TIMEOUT)
        if not self.active:
            return fail(Errors.COORDINATOR_NOT_AVAILABLE)
        error, found = self.manager.get_state(transactional_id)
        if error:
            return fail(error)
        epoch, metadata = found
        if metadata is None:
            try:
                pid = self.producer_ids.generate()
            except Exception:
                log.exception("generating a producer id failed")
                return fail(Errors.COORDINATOR_NOT_AVAILABLE)
            created = TransactionMetadata(transactional_id, pid, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                                          timeout_ms, TxnState.EMPTY, (), -1, self.clock.now_ms())
            error, found = self.manager.get_state(transactional_id, create=created)
            if error:
                return fail(error)
            epoch, metadata = found
        result = self._prepare_init(metadata, timeout_ms, expected)
        if isinstance(result, Errors):
            return fail(result)
        if result.state is TxnState.PREPARE_EPOCH_FENCE:
            def fenced(error: Errors) -> None:
                fail(error or Errors.CONCURRENT_TRANSACTIONS)
            self._end_transaction(transactional_id, result.producer_id, result.producer_epoch, False, False, fenced)
            return

        def written(error: Errors) -> None:
            if error:
                fail(error)
            else:
                callback(Errors.NONE, result.producer_id, result.producer_epoch)
        self.manager.append(transactional_id, epoch, result, written)

    def _prepare_init(self, m: TransactionMetadata, timeout_ms: int, expected):
        if m.pending_in_progress:
            return Errors.CONCURRENT_TRANSACTIONS
        if expected is not None and not (m.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == m.producer_id or
                                         (expected[0] == m.last_producer_id and is_epoch_exhausted(expected[1]))):
            return Errors.PRODUCER_FENCED
        now = self.clock.now_ms()
        if m.state in (TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
            return Errors.CONCURRENT_TRANSACTIONS
        if m.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT):
            if is_epoch_exhausted(m.producer_epoch) and (expected is None or expected[1] == m.producer_epoch):
                try:
                    pid = self.producer_ids.generate()
                except Exception:
                    log.exception("generating a producer id failed")
                    return Errors.COORDINATOR_NOT_AVAILABLE
                return m.prepare_rotation(pid, timeout_ms, now, expected is not None)
            transit = m.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
            return Errors.PRODUCER_FENCED if transit is None else transit
        if m.state is TxnState.ONGOING:
            return m.prepare_fence()
        log.error("InitProducerId for %s in unexpected state %s", m.transactional_id, m.state.name)
        return Errors.UNKNOWN_SERVER_ERROR

    # ---- requests held while a transition is in flight --------------------------------------------------------
    def _hold(self, transactional_id: str, deadline: float, retry, callback) -> None:
        """Call retry() once `transactional_id`'s pending transition settles, or callback(CONCURRENT_TRANSACTIONS)
        at `deadline` (time.monotonic()), whichever comes first."""
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self.active:
            return callback(Errors.CONCURRENT_TRANSACTIONS)
        held = self._held.setdefault(transactional_id, [])

        def expire() -> None:
            if entry in held:
                held.remove(entry)
                callback(Errors.CONCURRENT_TRANSACTIONS)
        entry = (retry, gevent.spawn_later(remaining, expire))
        held.append(entry)

    def _settled(self, transactional_id: str) -> None:
        for retry, timer in self._held.pop(transactional_id, ()):
            timer.kill(block=False)
            retry()

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------------
    def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions,
                              callback, deadline: float | None = None) -> None:
        """callback(error) for all the partitions; `deadline` of a held request (see _hold)."""
        if not transactional_id:
            return callback(Errors.INVALID_REQUEST)
        error, found = self.manager.get_state(transactional_id)
        if error:
            return callback(error)
        epoch, m = found
        if m is None or m.producer_id != producer_id:
            return callback(Errors.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != producer_epoch:
            return callback(Errors.PRODUCER_FENCED)
        if m.pending_in_progress or m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            deadline = time.monotonic() + HOLD_CONCURRENT_S if deadline is None else deadline
            return self._hold(transactional_id, deadline, lambda: self.handle_add_partitions(
                transactional_id, producer_id, producer_epoch, partitions, callback, deadline), callback)
        if m.state is TxnState.ONGOING and set(partitions) <= m.partitions:
            return callback(Errors.NONE)
        self.manager.append(transactional_id, epoch, m.prepare_add_partitions(partitions, self.clock.now_ms()),
                            callback)

    # ---- EndTxn ---------------------------------------------------------------------------------------------
    def handle_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                       callback) -> None:
        self._end_transaction(transactional_id, producer_id, producer_epoch, committed, True, callback)

    def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                         from_client: bool, callback) -> None:
        if not transactional_id:
            return callback(Errors.INVALID_REQUEST)
        error, found = self.manager.get_state(transactional_id)
        if error:
            return callback(error)
        coordinator_epoch, m = found
        if m is None or m.producer_id != producer_id:
            return callback(Errors.INVALID_PRODUCER_ID_MAPPING)
        if (from_client and producer_epoch != m.producer_epoch) or producer_epoch < m.producer_epoch:
            return callback(Errors.PRODUCER_FENCED)
        if m.pending_in_progress and m.pending is not TxnState.PREPARE_EPOCH_FENCE:
            return callback(Errors.CONCURRENT_TRANSACTIONS)
        state = m.state
        finished = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        in_progress = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        if state is finished:
            return callback(Errors.NONE)
        if state is in_progress:
            return callback(Errors.CONCURRENT_TRANSACTIONS)
        if state is not TxnState.ONGOING:
            log.debug("EndTxn(%s) of %s in state %s", "commit" if committed else "abort", transactional_id,
                      state.name)
            return callback(Errors.INVALID_TXN_STATE)
        epoch_fence = False
        if not committed and m.pending is TxnState.PREPARE_EPOCH_FENCE:
            epoch_fence = True
            m.pending = None
            m.producer_epoch, m.last_producer_epoch = producer_epoch, NO_PRODUCER_EPOCH
        transit = m.prepare_abort_or_commit(in_progress, self.clock.now_ms())

        def prepared(error: Errors) -> None:
            if error:
                if epoch_fence:
                    m.failed_epoch_fence = True
                log.info("Writing %s of %s failed: %s", in_progress.name, transactional_id, error.name)
                return callback(error)
            error, found = self.manager.get_state(transactional_id)
            if error or found[0] != coordinator_epoch or found[1] is not m:
                return callback(error or Errors.NOT_COORDINATOR)
            if m.producer_id != producer_id:
                return callback(Errors.INVALID_PRODUCER_ID_MAPPING)
            if m.producer_epoch != producer_epoch:
                return callback(Errors.PRODUCER_FENCED)
            if m.pending_in_progress:
                return callback(Errors.CONCURRENT_TRANSACTIONS)
            if m.state is not in_progress:
                return callback(Errors.INVALID_TXN_STATE)
            complete = m.prepare_complete(self.clock.now_ms())
            callback(Errors.NONE)   # Prepare* is durable: the outcome is decided
            self.markers.add(coordinator_epoch, committed, m, complete)
        self.manager.append(transactional_id, coordinator_epoch, transit, prepared)

    # ---- timeouts and expiry ----------------------------------------------------------------------------------
    def abort_timed_out(self) -> None:
        for _epoch, m in self.manager.timed_out(self.clock.now_ms()):
            if m.pending_in_progress:
                continue
            log.info("Aborting the transaction of %s (producer id %d): past its timeout of %d ms",
                     m.transactional_id, m.producer_id, m.timeout_ms)
            fence = m.prepare_fence()

            def done(error: Errors, txn_id=m.transactional_id) -> None:
                if error:
                    log.info("Aborting the timed-out transaction of %s failed: %s", txn_id, error.name)
            self._end_transaction(m.transactional_id, fence.producer_id, fence.producer_epoch, False, False, done)

    def remove_expired(self) -> None:
        for epoch, m in self.manager.expirable(self.clock.now_ms()):
            log.info("Removing transactional id %s: idle past transactional.id.expiration.ms", m.transactional_id)

            def done(error: Errors, m=m) -> None:
                if error:
                    log.info("Removing transactional id %s failed: %s", m.transactional_id, error.name)
            self.manager.append(m.transactional_id, epoch, m.prepare_dead(), done)
