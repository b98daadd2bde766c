"""Read-only views of the transaction coordinator's in-memory state for the KIP-664 admin APIs
(DescribeTransactions, ListTransactions), with Kafka 3.0's state names (common.transaction_log.STATE_NAMES) and
error codes."""
from __future__ import annotations

from ...common.transaction_log import STATE_NAMES
from ...protocol.errors import Errors


def describe(coordinator, transactional_id: str):
    """(error, metadata or None) of one id: COORDINATOR_NOT_AVAILABLE before the coordinator starts,
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for the producer APIs, TRANSACTIONAL_ID_NOT_FOUND for an
    id this coordinator does not know (TransactionCoordinator.handleDescribeTransactions)."""
    if coordinator is None or not coordinator.active:
        return Errors.COORDINATOR_NOT_AVAILABLE, None
    error, found = coordinator.manager.get_state(transactional_id)
    if error:
        return error, None
    if found[1] is None:
        return Errors.TRANSACTIONAL_ID_NOT_FOUND, None
    return Errors.NONE, found[1]


def list_states(coordinator, state_filters, producer_id_filters):
    """(error, unknown state filters, [metadata]) of the ids this broker coordinates, filtered by state names
    and producer ids (empty filters: all), as TransactionStateManager.listTransactionStates: any partition
    still loading is COORDINATOR_LOAD_IN_PROGRESS; state filters that name no state are answered back and, when
    every filter is unknown, nothing matches."""
    if coordinator is None or not coordinator.active:
        return Errors.COORDINATOR_NOT_AVAILABLE, [], []
    manager = coordinator.manager
    if manager.is_loading:
        return Errors.COORDINATOR_LOAD_IN_PROGRESS, [], []
    by_name = {name: state for state, name in STATE_NAMES.items()}
    unknown = [s for s in state_filters if s not in by_name]
    states = {by_name[s] for s in state_filters if s in by_name}
    if state_filters and not states:
        return Errors.NONE, unknown, []
    pids = set(producer_id_filters)
    found = [m for _, m in manager.all_transactions()
             if (not states or m.state in states) and (not pids or m.producer_id in pids)]
    return Errors.NONE, unknown, sorted(found, key=lambda m: m.transactional_id)
