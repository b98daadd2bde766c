"""DescribeTransactions (key 65), v0 (KIP-664, Kafka 3.0, served here as an extension): the coordinator's state
of each transactional id asked for.

Per id: its state name (Empty, Ongoing, PrepareCommit, ...), timeout, start time of the current transaction
(-1 when none started), producer id and epoch, and the partitions in the transaction. Errors per id:
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND.
Authorization: needs Describe on each transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); only the
partitions of topics the principal may Describe are listed.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse

from ..common.transaction_log import STATE_NAMES
from ..coordinator.transaction.views import describe
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 65
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = DescribeTransactionsRequest, DescribeTransactionsResponse
State = RESPONSE.TransactionState
TopicData = State.TopicData


def _state(transactional_id: str, error, m) -> State:
    if m is None:
        return State(error_code=error, transactional_id=transactional_id, transaction_state="",
                     transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                     topics=[])
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return State(error_code=error, transactional_id=transactional_id, transaction_state=STATE_NAMES[m.state],
                 transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
                 producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                 topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()])


def handle(request, ctx: RequestContext):
    coordinator = ctx.broker.txn_coordinator
    states = []
    for tid in request.transactional_ids or []:
        if not ctx.authorize("Describe", "TransactionalId", tid):
            states.append(_state(tid, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None))
            continue
        state = _state(tid, *describe(coordinator, tid))
        # Only the partitions of topics the principal may Describe (as Kafka's handleDescribeTransactionsRequest).
        allowed = ctx.authorized("Describe", "Topic", (t.topic for t in state.topics), log_if_denied=False)
        state.topics = [t for t in state.topics if t.topic in allowed]
        states.append(state)
    return RESPONSE(version=ctx.api_version, transaction_states=states)
