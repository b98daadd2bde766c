"""`kadmin transactions ...`: transactions through the Kafka protocol, as Kafka's kafka-transactions.sh (3.0).

The state lives in the brokers (the transaction coordinators and `__transaction_state`, the partitions'
producer state), so every command talks to the cluster: ListTransactions (every broker) and
DescribeTransactions (the coordinators) — KIP-664 APIs kbroker serves as extensions — DescribeProducers and
WriteTxnMarkers (the partition leaders).

- list: every transactional id with its coordinator, state, producer id/epoch, timeout and start time.
- describe: one id, with the partitions of its current transaction.
- find-hanging: open transactions older than their timeout. On the coordinator side an Ongoing transaction past
  its own timeout (the coordinator should have aborted it); on the partition side a producer with an open
  transaction (DescribeProducers) older than --max-transaction-timeout that no coordinator has Ongoing or
  Prepare* for that partition — what Kafka's find-hanging reports, and what `abort` ends.
- abort: an ABORT marker for a partition's open transaction, written by its leader (Kafka's abort).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from kbroker.protocol.client import Errors, KafkaError, TopicPartition, error_text

from .kafka_client import AdminClient, ProducerState, TransactionDescription
from .output import Output, table

STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
          "PrepareEpochFence")
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def parse_states(text: str) -> list[str]:
    """'ongoing,Empty' -> ['Ongoing', 'Empty'] (case-insensitive); ValueError naming the valid states."""
    by_lower = {s.lower(): s for s in STATES}
    out = []
    for item in text.split(","):
        state = by_lower.get(item.strip().lower())
        if state is None:
            raise ValueError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
        out.append(state)
    return list(dict.fromkeys(out))


def _time(ms: int) -> str:
    return "-" if ms < 0 else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _tx_json(d: TransactionDescription) -> dict:
    return {"transactional_id": d.transactional_id, "coordinator": d.coordinator, "state": d.state,
            "producer_id": d.producer_id, "producer_epoch": d.producer_epoch, "timeout_ms": d.timeout_ms,
            "start_time_ms": d.start_time_ms}


# ---- list / describe ------------------------------------------------------------------------------------------

def describe_all(admin: AdminClient, states: list[str], producer_ids: list[int]) -> list[TransactionDescription]:
    """Every transactional id matching the filters, described by the broker that listed it (one request per
    broker; an id whose coordinator moved meanwhile is asked of its new one), sorted by id. An id that expired
    between listing and describing is left out."""
    listed, _ = admin.list_transactions(states, producer_ids)
    by_broker: dict[int, list[str]] = {}
    for tid, broker_id in listed.items():
        by_broker.setdefault(broker_id, []).append(tid)
    found: dict[str, TransactionDescription] = {}
    for broker_id, ids in sorted(by_broker.items()):
        for tid, answer in admin.describe_transactions_at(broker_id, sorted(ids)).items():
            if isinstance(answer, TransactionDescription):
                found[tid] = answer
                continue
            try:
                found[tid] = admin.describe_transaction(tid)
            except KafkaError as e:
                if e.code != Errors.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
    return [found[t] for t in sorted(found)]


@dataclass
class TransactionList:
    """transactions list. JSON: {"transactions": [{"transactional_id", "coordinator", "state", "producer_id",
    "producer_epoch", "timeout_ms", "start_time_ms"}]} (start -1: no transaction started)."""
    transactions: list[TransactionDescription]

    def render(self, out: Output) -> None:
        if self.transactions:
            out.print(table(["TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "PRODUCER-EPOCH",
                             "TIMEOUT-MS", "START-TIME"],
                            [[d.transactional_id, d.coordinator, d.state, d.producer_id, d.producer_epoch,
                              d.timeout_ms, _time(d.start_time_ms)] for d in self.transactions]))

    def to_json(self) -> dict:
        return {"transactions": [_tx_json(d) for d in self.transactions]}


@dataclass
class TransactionView:
    """transactions describe. JSON: the list's fields plus "duration_ms" (null when no transaction is open) and
    "partitions": [{"topic", "partition"}]."""
    desc: TransactionDescription
    now_ms: int

    @property
    def duration_ms(self) -> int | None:
        d = self.desc
        return self.now_ms - d.start_time_ms if d.state in OPEN_STATES and d.start_time_ms >= 0 else None

    def render(self, out: Output) -> None:
        d = self.desc
        out.print(table(["TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "PRODUCER-EPOCH", "TIMEOUT-MS",
                         "START-TIME", "DURATION-MS", "PARTITIONS"],
                        [[d.transactional_id, d.coordinator, d.state, d.producer_id, d.producer_epoch, d.timeout_ms,
                          _time(d.start_time_ms), "-" if self.duration_ms is None else self.duration_ms,
                          ",".join(str(tp) for tp in d.partitions) or "-"]]))

    def to_json(self) -> dict:
        return {**_tx_json(self.desc), "duration_ms": self.duration_ms,
                "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in self.desc.partitions]}


# ---- hanging transactions ---------------------------------------------------------------------------------------

@dataclass
class Hanging:
    source: str                     # "coordinator" (Ongoing past its timeout) or "partition" (no coordinator)
    transactional_id: str | None
    topic: str | None
    partition: int | None
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int | None
    start_offset: int | None
    start_time_ms: int | None       # coordinator: start of the transaction; partition: the producer's last write
    duration_ms: int


def find_hanging(admin: AdminClient, topics: list[str] | None, max_timeout_ms: int,
                 now_ms: int) -> tuple[list[Hanging], dict[TopicPartition, int]]:
    """(hanging transactions, {partition: error code} of partitions that could not be described); topics None:
    every topic."""
    described = describe_all(admin, [], [])
    hanging = [Hanging("coordinator", d.transactional_id, None, None, d.producer_id, d.producer_epoch, None, None,
                       d.start_time_ms, now_ms - d.start_time_ms)
               for d in described
               if d.state == "Ongoing" and d.start_time_ms >= 0 and now_ms - d.start_time_ms > d.timeout_ms]
    open_on_coordinator = {(d.producer_id, tp) for d in described if d.state in OPEN_STATES for tp in d.partitions}
    md = admin.metadata(topics)
    tps = [TopicPartition(t, p) for t, info in md.topics.items() for p in info.partitions]
    errors = {}
    for tp, (code, producers) in sorted(admin.describe_producers(tps).items()):
        if code:
            errors[tp] = code
            continue
        for s in producers:
            if s.txn_start_offset < 0 or (s.producer_id, tp) in open_on_coordinator:
                continue
            age = now_ms - s.last_timestamp
            if age > max_timeout_ms:
                hanging.append(Hanging("partition", None, tp.topic, tp.partition, s.producer_id, s.producer_epoch,
                                       s.coordinator_epoch, s.txn_start_offset, s.last_timestamp, age))
    return hanging, errors


@dataclass
class HangingList:
    """transactions find-hanging. JSON: {"hanging": [{"source", "transactional_id", "topic", "partition",
    "producer_id", "producer_epoch", "coordinator_epoch", "start_offset", "start_time_ms", "duration_ms"}]}
    (source "coordinator": an Ongoing transaction past its timeout; "partition": an open transaction on a
    partition that no coordinator has)."""
    hanging: list[Hanging]

    def render(self, out: Output) -> None:
        if not self.hanging:
            out.line("No hanging transactions found.")
            return
        out.print(table(["SOURCE", "TRANSACTIONAL-ID", "TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH",
                         "COORDINATOR-EPOCH", "START-OFFSET", "DURATION-MS"],
                        [[h.source, h.transactional_id or "-", h.topic or "-", "-" if h.partition is None
                          else h.partition, h.producer_id, h.producer_epoch,
                          "-" if h.coordinator_epoch is None else h.coordinator_epoch,
                          "-" if h.start_offset is None else h.start_offset, h.duration_ms] for h in self.hanging]))

    def to_json(self) -> dict:
        return {"hanging": [asdict(h) for h in self.hanging]}


# ---- abort ------------------------------------------------------------------------------------------------------

def producer_at(admin: AdminClient, tp: TopicPartition, start_offset: int) -> ProducerState:
    """The producer whose open transaction on tp starts at start_offset (KafkaError if none)."""
    code, producers = admin.describe_producers([tp])[tp]
    if code:
        raise KafkaError(code, f"Cannot describe the producers of {tp}: {error_text(code)}")
    for s in producers:
        if s.txn_start_offset == start_offset:
            return s
    raise KafkaError(Errors.INVALID_REQUEST, f"No open transaction on {tp} starts at offset {start_offset}.")


@dataclass
class AbortResult:
    """transactions abort. JSON: {"topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch",
    "aborted": true}."""
    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def render(self, out: Output) -> None:
        out.line(f"Aborted the transaction of producer {self.producer_id} (epoch {self.producer_epoch}) on "
                 f"{self.tp}.")

    def to_json(self) -> dict:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "coordinator_epoch": self.coordinator_epoch, "aborted": True}
