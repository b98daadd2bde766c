"""One transactional id's state (Kafka 2.8's TransactionMetadata / TxnTransitMetadata), and the load of a
`__transaction_state` partition's batches into it. The records' bytes, the states and the id -> partition mapping
are kbroker.common.transaction_log's (kadmin reads the log with them too).

A change is first prepared (the transit is returned and the id is pending: other requests get
CONCURRENT_TRANSACTIONS), then written (Transit.log_value), then applied with complete(transit) once the append
succeeded. The last producer id/epoch (KIP-360 retries) live only in memory, as in 2.8's v0 value.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...common.transaction_log import TransactionLogValue, TxnState, replay
from ...records.batches import v2_records
from ...records.entries import CONTROL_MASK

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767
_DECOMPRESSION_LIMIT = 256 * 1024 * 1024


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: the producer id rotates at 32766."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class Transit:
    """A prepared state (TxnTransitMetadata): what is written and, once written, applied."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset
    start_ms: int
    update_ms: int

    def log_value(self) -> TransactionLogValue:
        """What the record of this transit says."""
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                                   self.partitions, self.update_ms, self.start_ms)


class TransactionMetadata:
    def __init__(self, transactional_id: str, producer_id: int, last_producer_id: int, producer_epoch: int,
                 last_producer_epoch: int, timeout_ms: int, state: TxnState, partitions, start_ms: int,
                 update_ms: int):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: set = set(partitions)
        self.start_ms = start_ms
        self.update_ms = update_ms
        self.pending: TxnState | None = None
        self.failed_epoch_fence = False

    @classmethod
    def loaded(cls, transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
        """The metadata a record describes (no last producer id/epoch: they are not written)."""
        return cls(transactional_id, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH,
                   v.timeout_ms, v.state, v.partitions, v.start_ms, v.update_ms)

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, state={self.state.name}, pending={self.pending and self.pending.name}, "
                f"partitions={sorted(self.partitions)})")

    @property
    def pending_in_progress(self) -> bool:
        return self.pending is not None

    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions, start_ms: int, update_ms: int) -> Transit:
        if self.pending is not None:
            raise RuntimeError(f"{self}: a transition to {self.pending.name} is already pending")
        self.pending = state
        return Transit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, frozenset(partitions),
                       start_ms, update_ms)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now: int):
        """Transit to Empty with the epoch bumped; None when the expected epoch is fenced (KIP-360 rules)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch   # a retry of a bump that succeeded
        else:
            return None
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, (), -1, now)

    def prepare_rotation(self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool) -> Transit:
        return self._prepare(TxnState.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH, timeout_ms, (), -1, now)

    def prepare_fence(self) -> Transit:
        """PrepareEpochFence (in memory only): the epoch bumped (once, even if a previous fence failed to write)
        before the ongoing transaction is aborted."""
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.timeout_ms, self.partitions, self.start_ms, self.update_ms)

    def prepare_add_partitions(self, added, now: int) -> Transit:
        start = now if self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT) \
            else self.start_ms
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | set(added), start, now)

    def prepare_abort_or_commit(self, state: TxnState, now: int) -> Transit:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions, self.start_ms, now)

    def prepare_complete(self, now: int) -> Transit:
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, (), self.start_ms, now)

    def prepare_dead(self) -> Transit:
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, (), self.start_ms, self.update_ms)

    def complete(self, t: Transit) -> None:
        """Apply a written transit (completeTransitionTo)."""
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.timeout_ms, self.state, self.partitions = t.timeout_ms, t.state, set(t.partitions)
        self.start_ms, self.update_ms = t.start_ms, t.update_ms
        self.pending = None
        self.failed_epoch_fence = False


# ---- load -------------------------------------------------------------------------------------------------

def transactions_from_log(batches) -> dict[str, TransactionMetadata]:
    """{transactional id: metadata} that a `__transaction_state` partition's batches describe, given as
    (buffer, Entry) pairs in log order: v2 batches only, control batches skipped, replayed as
    common.transaction_log.replay does (TransactionStateManager's load)."""
    records = ((record.key, record.value) for view, entry in batches
               if entry.magic == 2 and not entry.attributes & CONTROL_MASK
               for record in v2_records(view, entry.position, entry.size, _DECOMPRESSION_LIMIT))
    return {txn_id: TransactionMetadata.loaded(txn_id, v) for txn_id, v in replay(records).items()}
