"""TransactionMarkerSender: writes a finished transaction's COMMIT/ABORT markers to the leaders of its
partitions, then writes the Complete* state (Kafka 2.8's TransactionMarkerChannelManager).

Partitions are grouped by their leader (from the metadata cache) into one queue per broker; each broker's
greenlet sends everything queued for it as one WriteTxnMarkers v1 (one marker per transaction) through a
protocol-client Connection on the inter-broker listener. Per partition answer:
- NONE: the partition is done;
- UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
  KAFKA_STORAGE_ERROR (and a lost connection: the whole request): queued again, to the leader known then;
- INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer producer or coordinator owns it; sending
  stops and the transaction stays pending here (the newer owner completes it).
A partition whose topic is gone is dropped; one whose leader is unknown waits until a leader is known. Once
every partition is done, the Complete* transit is appended (retried while COORDINATOR_NOT_AVAILABLE). Markers
of transactions whose `__transaction_state` partition moved away, or whose coordinator epoch changed, are
dropped unsent.
"""
from __future__ import annotations

import logging

import gevent
import gevent.event

from ...protocol.client import Connection, KafkaError
from ...protocol.errors import Errors
from ...protocol.interbroker import WriteTxnMarkersRequest as Request
from .state import TransactionMetadata, Transit

log = logging.getLogger("kbroker.coordinator.transaction")

WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1
_RETRIABLE = frozenset({Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS,
                        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT,
                        Errors.KAFKA_STORAGE_ERROR})
_FENCED = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})


class _PendingTxn:
    __slots__ = ("coordinator_epoch", "committed", "metadata", "transit")

    def __init__(self, coordinator_epoch: int, committed: bool, metadata: TransactionMetadata, transit: Transit):
        self.coordinator_epoch, self.committed = coordinator_epoch, committed
        self.metadata, self.transit = metadata, transit


class _BrokerQueue:
    """Markers waiting for one broker: {transactional id: set of partitions}, sent by one greenlet."""

    def __init__(self, sender: "TransactionMarkerSender", broker_id: int):
        self.sender = sender
        self.broker_id = broker_id
        self.waiting: dict[str, set] = {}
        self.ready = gevent.event.Event()
        self.connection: Connection | None = None
        self.greenlet = gevent.spawn(self._run)

    def add(self, transactional_id: str, tp) -> None:
        self.waiting.setdefault(transactional_id, set()).add(tp)
        self.ready.set()

    def connect(self) -> Connection | None:
        """The connection to the broker's inter-broker endpoint (a new one when the endpoint changed)."""
        endpoint = self.sender.endpoint(self.broker_id)
        if endpoint is None:
            return None
        if self.connection is None or (self.connection.host, self.connection.port) != endpoint:
            if self.connection is not None:
                self.connection.close()
            self.connection = Connection(endpoint[0], endpoint[1],
                                         f"txn-marker-sender-{self.sender.broker_id}-to-{self.broker_id}",
                                         self.sender.timeout_s, self.sender.security)
        return self.connection

    def _run(self) -> None:
        while True:
            self.ready.wait()
            self.ready.clear()
            batch, self.waiting = self.waiting, {}
            try:
                self.sender.send(self, batch)
            except Exception:
                log.exception("sending markers to broker %d failed; queuing them again", self.broker_id)
                gevent.sleep(RETRY_BACKOFF_S)
                self.sender.requeue(batch)

    def stop(self) -> None:
        self.greenlet.kill(block=False)
        if self.connection is not None:
            self.connection.close()


class TransactionMarkerSender:
    def __init__(self, broker_id: int, metadata_cache, state_manager, listener: str, timeout_ms: int,
                 security=None):
        """security: the broker's inter-broker ClientSecurity (None on a PLAINTEXT inter-broker listener)."""
        self.security = security
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.state_manager = state_manager
        self.listener = listener
        self.timeout_s = timeout_ms / 1000.0
        self.pending: dict[str, _PendingTxn] = {}
        self.queues: dict[int, _BrokerQueue] = {}
        self.no_leader: dict[str, set] = {}
        self.completion_retries = 0     # Complete* appends waiting to be retried (LogAppendRetryQueueSize)
        self._retry = gevent.spawn(self._retry_no_leader)

    def shutdown(self) -> None:
        self._retry.kill(block=False)
        for q in self.queues.values():
            q.stop()

    def endpoint(self, broker_id: int):
        broker = self.metadata_cache.brokers.get(broker_id)
        ep = broker.endpoints.get(self.listener) if broker is not None else None
        return None if ep is None else (ep[0], ep[1])

    # ---- queueing ---------------------------------------------------------------------------------------------
    def add(self, coordinator_epoch: int, committed: bool, metadata: TransactionMetadata, transit: Transit) -> None:
        """Send the markers of `metadata`'s partitions, then append `transit` (Complete*)."""
        txn_id = metadata.transactional_id
        self.pending[txn_id] = _PendingTxn(coordinator_epoch, committed, metadata, transit)
        self._enqueue(txn_id, set(metadata.partitions))
        self._maybe_complete(txn_id)

    def _enqueue(self, txn_id: str, partitions) -> None:
        pending = self.pending.get(txn_id)
        if pending is None:
            return
        for tp in partitions:
            state = self.metadata_cache.partition(*tp)
            if state is None:
                log.info("Dropping the marker of %s for %s-%d: the partition no longer exists", txn_id, *tp)
                pending.metadata.partitions.discard(tp)
            elif state.leader < 0 or self.endpoint(state.leader) is None:
                self.no_leader.setdefault(txn_id, set()).add(tp)
            else:
                q = self.queues.get(state.leader)
                if q is None:
                    q = self.queues[state.leader] = _BrokerQueue(self, state.leader)
                q.add(txn_id, tp)

    def requeue(self, batch: dict[str, set]) -> None:
        for txn_id, partitions in batch.items():
            if self._still_valid(txn_id):
                self._enqueue(txn_id, partitions)

    def _retry_no_leader(self) -> None:
        while True:
            gevent.sleep(RETRY_BACKOFF_S)
            if self.no_leader:
                waiting, self.no_leader = self.no_leader, {}
                self.requeue(waiting)
                for txn_id in waiting:
                    self._maybe_complete(txn_id)

    def remove_partition(self, partition: int) -> None:
        """The `__transaction_state` partition moved away: forget its transactions' markers."""
        for txn_id in [t for t in self.pending if self.state_manager.partition_for(t) == partition]:
            del self.pending[txn_id]

    def _still_valid(self, txn_id: str) -> bool:
        """Still ours to complete: loaded here in the same coordinator epoch (else dropped)."""
        pending = self.pending.get(txn_id)
        if pending is None:
            return False
        error, found = self.state_manager.get_state(txn_id)
        if error or found[1] is not pending.metadata or found[0] != pending.coordinator_epoch:
            log.info("Dropping the markers of %s: %s", txn_id, error.name if error else "coordinator epoch changed")
            self.pending.pop(txn_id, None)
            return False
        return True

    # ---- sending --------------------------------------------------------------------------------------------
    def send(self, queue: _BrokerQueue, batch: dict[str, set]) -> None:
        order = [t for t in batch if self._still_valid(t)]
        if not order:
            return
        markers = []
        for txn_id in order:
            p = self.pending[txn_id]
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(batch[txn_id]):
                by_topic.setdefault(topic, []).append(partition)
            markers.append(Request.WritableTxnMarker(
                producer_id=p.metadata.producer_id, producer_epoch=p.metadata.producer_epoch,
                transaction_result=p.committed, coordinator_epoch=p.coordinator_epoch,
                topics=[Request.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()]))
        request = Request(version=WRITE_TXN_MARKERS_VERSION, markers=markers)
        connection = queue.connect()
        try:
            if connection is None:
                raise KafkaError(Errors.BROKER_NOT_AVAILABLE, f"broker {queue.broker_id} has no endpoint")
            response = connection.send(request)
        except KafkaError as e:
            log.info("WriteTxnMarkers to broker %d failed (%s); queuing again", queue.broker_id, e)
            gevent.sleep(RETRY_BACKOFF_S)
            self.requeue({t: batch[t] for t in order})
            return
        for txn_id, result in zip(order, response.markers):
            self._on_result(txn_id, result)

    def _on_result(self, txn_id: str, result) -> None:
        if not self._still_valid(txn_id):
            return
        pending = self.pending[txn_id]
        retry = set()
        for topic in result.topics:
            for p in topic.partitions:
                tp, error = (topic.name, p.partition_index), Errors(p.error_code)
                if error == Errors.NONE:
                    pending.metadata.partitions.discard(tp)
                elif error in _FENCED:
                    log.info("Stopping the markers of %s: %s on %s-%d", txn_id, error.name, *tp)
                    self.pending.pop(txn_id, None)
                    return
                elif error in _RETRIABLE:
                    retry.add(tp)
                else:
                    log.error("Unexpected %s writing the marker of %s to %s-%d; retrying", error.name, txn_id, *tp)
                    retry.add(tp)
        if retry:
            gevent.sleep(RETRY_BACKOFF_S)
            self.requeue({txn_id: retry})
        else:
            self._maybe_complete(txn_id)

    def _maybe_complete(self, txn_id: str) -> None:
        """All markers written: append the Complete* transit."""
        pending = self.pending.get(txn_id)
        if pending is None or pending.metadata.partitions or txn_id in self.no_leader:
            return
        del self.pending[txn_id]
        self._write_completion(txn_id, pending)

    def _retry_completion(self, txn_id: str, pending: _PendingTxn) -> None:
        self.completion_retries -= 1
        self._write_completion(txn_id, pending)

    def _write_completion(self, txn_id: str, pending: _PendingTxn) -> None:
        def done(error: Errors) -> None:
            if error == Errors.COORDINATOR_NOT_AVAILABLE:
                self.completion_retries += 1
                gevent.spawn_later(RETRY_BACKOFF_S, self._retry_completion, txn_id, pending)
            elif error:
                log.info("Writing the completion of %s failed: %s", txn_id, error.name)
            else:
                log.debug("Completed the transaction of %s: %s", txn_id, pending.transit.state.name)
        self.state_manager.append(txn_id, pending.coordinator_epoch, pending.transit, done,
                                  retry_on_error=lambda e: e == Errors.COORDINATOR_NOT_AVAILABLE)
