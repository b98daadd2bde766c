"""ListTransactions (key 66), v0 (KIP-664, Kafka 3.0, served here as an extension): the transactional ids this
broker coordinates (clients ask every broker to list all), each with its producer id and state name.

Filters: StateFilters (state names; unknown ones are answered back in UnknownStateFilters) and
ProducerIdFilters; empty filters match everything. COORDINATOR_LOAD_IN_PROGRESS while any
`__transaction_state` partition is loading, COORDINATOR_NOT_AVAILABLE before the coordinator starts.
Authorization: lists only the transactional ids the principal may Describe.
"""
from __future__ import annotations

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from ..common.transaction_log import STATE_NAMES
from ..coordinator.transaction.views import list_states
from .context import RequestContext

API_KEY = 66
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = ListTransactionsRequest, ListTransactionsResponse
State = RESPONSE.TransactionState


def handle(request, ctx: RequestContext):
    error, unknown, found = list_states(ctx.broker.txn_coordinator, request.state_filters or [],
                                        request.producer_id_filters or [])
    allowed = ctx.authorized("Describe", "TransactionalId", (m.transactional_id for m in found), log_if_denied=False)
    found = [m for m in found if m.transactional_id in allowed]
    return RESPONSE(version=ctx.api_version, error_code=error, unknown_state_filters=unknown,
                    transaction_states=[State(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                              transaction_state=STATE_NAMES[m.state]) for m in found])
