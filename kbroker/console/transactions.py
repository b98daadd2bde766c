"""Transactions: every transactional id with its coordinator, state and producer (ListTransactions to every broker,
DescribeTransactions to the coordinators), the hanging ones, and the abort of one, as `kadmin transactions list`,
`find-hanging` and `abort` do (their functions, through the visitor's client).

Hanging, as kafka-transactions.sh find-hanging: an Ongoing transaction past its own timeout (the coordinator's
side), or an open transaction on a partition (DescribeProducers) that no coordinator has and whose producer has
been silent longer than the threshold (?max_minutes=, default 15, the brokers' transaction.max.timeout.ms). A
partition-side one has an Abort button (confirmed): its leader writes an ABORT marker for the producer whose open
transaction starts at that offset, so read_committed consumers get past it. A coordinator-side one is the
coordinator's to abort; it is listed for the operator to see.
"""
from __future__ import annotations

import time

from flask import Blueprint, request

from admin_cli import transactions as txn_ops
from kbroker.protocol.client import KafkaError, TopicPartition, error_text

from .web import client, done, page

blueprint = Blueprint("transactions", __name__)
DEFAULT_MAX_MINUTES = 15.0


def _minutes(text: str | None) -> tuple[float, str | None]:
    """The hanging threshold in minutes, and a message when the text is not one."""
    if not text:
        return DEFAULT_MAX_MINUTES, None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 10 ** 6:
        return DEFAULT_MAX_MINUTES, f"'{text}' is not a number of minutes: the default {DEFAULT_MAX_MINUTES:g} is used."
    return value, None


def _utc(ms: int) -> str:
    return "–" if ms < 0 else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


@blueprint.get("/transactions")
def index():
    c = client()
    max_minutes, problem = _minutes(request.args.get("max_minutes"))
    described = txn_ops.describe_all(c, [], [])
    now_ms = int(time.time() * 1000)
    hanging, errors = txn_ops.find_hanging(c, described, None, int(max_minutes * 60_000), now_ms)
    views = [(txn_ops.TransactionView(d, now_ms), _utc(d.start_time_ms)) for d in described]
    return page("transactions.html", transactions=views,
                hanging=hanging, errors=[f"{tp}: {error_text(code)}" for tp, code in errors.items()],
                max_minutes=max_minutes, problem=problem, open_states=txn_ops.OPEN_STATES)


@blueprint.post("/transactions/abort")
def abort():
    back = {"max_minutes": request.form.get("max_minutes") or None}
    topic = (request.form.get("topic") or "").strip()
    try:
        partition, start_offset = int(request.form.get("partition", "")), int(request.form.get("start_offset", ""))
    except ValueError:
        return done("Give the partition and the start offset of the transaction to abort.", "transactions.index",
                    "error", **back)
    if not topic or partition < 0 or start_offset < 0:
        return done("Give the topic, partition and start offset of the transaction to abort.", "transactions.index",
                    "error", **back)
    try:
        result = txn_ops.abort_at(client(), TopicPartition(topic, partition), start_offset)
    except KafkaError as e:
        return done(f"Not aborted: {e}", "transactions.index", "error", **back)
    return done(f"Aborted the transaction of producer {result.producer_id} (epoch {result.producer_epoch}) on "
                f"{result.tp} from offset {start_offset}.", "transactions.index", **back)
