"""`kadmin transactions ...`: transactions as Kafka's kafka-transactions.sh (3.0) shows and ends them.

The state lives in the brokers (the transaction coordinators and `__transaction_state`, the partitions'
producer state). With --bootstrap-server the coordinators answer: ListTransactions (every broker) and
DescribeTransactions (the coordinators), KIP-664 APIs kbroker serves as extensions. With --zookeeper the
coordinators' side is read from `__transaction_state` itself: each partition's leader is found in ZooKeeper,
its log fetched up to the high watermark and replayed as a coordinator loads it (common.transaction_log), so
what shows is what the log holds (a transition still being written may not show yet) and the coordinator is
the partition's leader. The partitions' side is always DescribeProducers and WriteTxnMarkers to their leaders
(with --zookeeper, through the brokers registered there).

- list: every transactional id with its coordinator, state, producer id/epoch, timeout and start time.
- describe: one id, with the partitions of its current transaction.
- find-hanging: open transactions older than their timeout. On the coordinator side an Ongoing transaction past
  its own timeout (the coordinator should have aborted it); on the partition side a producer with an open
  transaction (DescribeProducers) older than --max-transaction-timeout that no coordinator has Ongoing or
  Prepare* for that partition — what Kafka's find-hanging reports, and what `abort` ends.
- abort: an ABORT marker for a partition's open transaction, written by its leader (Kafka's abort).

The click group `transactions` (list, describe, find-hanging, abort) closes the module.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import click
from aiokafka.record._crecords import DefaultRecordBatch, MemoryRecords
from kafka.protocol.consumer import FetchRequest

from zk.client import KafkaZkClient
from kbroker.common.internal_topics import TRANSACTION_STATE_TOPIC
from kbroker.common.transaction_log import STATE_NAMES, partition_for, replay
from kbroker.protocol.client import (EARLIEST, Broker, ClusterClient, Errors, KafkaError, TopicPartition, Unreachable,
                                     error_name, error_text)
from kbroker.protocol.client.requests import fetch_request
from kbroker.protocol.hotpath import decode_fetch_response

from .context import (admin_client, endpoint_address, output, print_error, registered_brokers, settings,
                      timeout_option, zookeeper)
from .errors import EXIT_REFUSED
from .kafka_client import AdminClient, ProducerState, TransactionDescription
from .output import Output, table

STATES = tuple(STATE_NAMES.values())
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


# ---- list / describe from `__transaction_state` (--zookeeper) ---------------------------------------------------

_FETCH_BYTES = 4 * 1024 * 1024


def _log_records(client: ClusterClient, leader: Broker, partition: int, deadline: float):
    """(key, value) of every data record of a `__transaction_state` partition, fetched from its leader as a
    consumer does (so up to the high watermark the first answer gave) and read with aiokafka's record reader, as
    the Spark source reads: v2 batches only, control batches passed over, as the coordinator loads."""
    version = client.connection(leader.address, deadline).version_for(FetchRequest, 4)
    offset, end = _log_start(client, partition), None
    while end is None or offset < end:
        body = client.send(leader, lambda c: fetch_request(version, TRANSACTION_STATE_TOPIC, partition, offset,
                                                           _FETCH_BYTES, max_wait_ms=0), deadline, decode=False)
        fetched = decode_fetch_response(body, version).partition(TRANSACTION_STATE_TOPIC, partition)
        if fetched.error_code:
            raise KafkaError(fetched.error_code, f"Fetch {TRANSACTION_STATE_TOPIC}-{partition} at offset {offset} "
                                                 f"from broker {leader.node_id}: {error_name(fetched.error_code)}")
        end = fetched.high_watermark if end is None else end
        batches = MemoryRecords(bytes(fetched.records[0]) if fetched.records else b"")
        start = offset
        while (batch := batches.next_batch()) is not None:
            if batch.next_offset > offset:
                if isinstance(batch, DefaultRecordBatch) and not batch.is_control_batch:
                    yield from ((r.key, r.value) for r in batch)
                offset = batch.next_offset
        if offset == start:          # nothing left below the high watermark (compaction leaves gaps)
            return


def _log_start(client: ClusterClient, partition: int) -> int:
    """The partition's log start offset (ListOffsets EARLIEST to its leader)."""
    tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
    code, offset = client.list_offsets({tp: EARLIEST})[tp]
    if code:
        raise KafkaError(code, f"ListOffsets {tp}: {error_name(code)}")
    return offset


def _read_partition(zk: KafkaZkClient, client: ClusterClient, partition: int,
                    deadline: float) -> list[TransactionDescription]:
    """The ids one `__transaction_state` partition's log holds, with its leader (from ZooKeeper) as their
    coordinator; read again from the start, until the deadline, while the partition has no reachable leader or
    that leader moves."""
    tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)

    def attempt(deadline):
        state = zk.get_partition_state(*tp)
        info = None if state is None or state.leader < 0 else zk.get_broker(state.leader)
        if info is None:
            raise KafkaError(Errors.LEADER_NOT_AVAILABLE, f"no live leader of {tp} in ZooKeeper")
        protocol = client.security.protocol if client.security else "PLAINTEXT"
        address = endpoint_address(info, protocol)
        if address is None:
            raise Unreachable(f"the leader of {tp}, broker {info.id}, has no {protocol} listener")
        leader = Broker(info.id, *address)
        return [TransactionDescription(tid, leader.node_id, STATE_NAMES[m.state], m.producer_id, m.producer_epoch,
                                       m.timeout_ms, m.start_ms, sorted(TopicPartition(*x) for x in m.partitions))
                for tid, m in replay(_log_records(client, leader, partition, deadline)).items()]
    return client.retrying(f"reading {tp}", attempt, deadline)


def _log_partitions(zk: KafkaZkClient) -> list[int]:
    assignment = zk.get_topic_assignment(TRANSACTION_STATE_TOPIC)
    return sorted(assignment.partitions) if assignment else []


def describe_all_from_log(zk: KafkaZkClient, client: ClusterClient, states: list[str],
                          producer_ids: list[int]) -> list[TransactionDescription]:
    """describe_all from `__transaction_state` (see the module docstring): every partition read, filtered,
    sorted by id."""
    deadline = client.deadline()
    found = [d for p in _log_partitions(zk) for d in _read_partition(zk, client, p, deadline)
             if (not states or d.state in states) and (not producer_ids or d.producer_id in producer_ids)]
    return sorted(found, key=lambda d: d.transactional_id)


def describe_from_log(zk: KafkaZkClient, client: ClusterClient, transactional_id: str) -> TransactionDescription:
    """One id from its `__transaction_state` partition's log; KafkaError TRANSACTIONAL_ID_NOT_FOUND if the log
    holds none (or the topic does not exist yet)."""
    partitions = _log_partitions(zk)
    if partitions:
        p = partition_for(transactional_id, len(partitions))
        for d in _read_partition(zk, client, p, client.deadline()):
            if d.transactional_id == transactional_id:
                return d
    code = Errors.TRANSACTIONAL_ID_NOT_FOUND
    raise KafkaError(code, f"Cannot describe transactional id '{transactional_id}': {error_text(code)}")


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


def find_hanging(admin: AdminClient, described: list[TransactionDescription], topics: list[str] | None,
                 max_timeout_ms: int, now_ms: int) -> tuple[list[Hanging], dict[TopicPartition, int]]:
    """(hanging transactions, {partition: error code} of partitions that could not be described), given every
    transactional id as described (describe_all, or describe_all_from_log); topics None: every topic."""
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


def abort(admin: AdminClient, tp: TopicPartition, producer_id: int, producer_epoch: int,
          coordinator_epoch: int) -> AbortResult:
    """The producer's open transaction on tp aborted by its leader; KafkaError when the leader refuses."""
    code = admin.abort_transaction(tp, producer_id, producer_epoch, coordinator_epoch)
    if code:
        raise KafkaError(code, f"Cannot abort the transaction of producer {producer_id} on {tp}: "
                               f"{error_text(code)}")
    return AbortResult(tp, producer_id, producer_epoch, coordinator_epoch)


def abort_at(admin: AdminClient, tp: TopicPartition, start_offset: int) -> AbortResult:
    """The open transaction on tp that starts at start_offset aborted (its producer looked up first)."""
    found = producer_at(admin, tp, start_offset)
    return abort(admin, tp, found.producer_id, found.producer_epoch, max(found.coordinator_epoch, 0))


# ---- commands (click) -----------------------------------------------------------------------------------------

@contextmanager
def _txn_cluster(ctx: click.Context, timeout: float):
    """(AdminClient, KafkaZkClient or None) for list/describe/find-hanging: with --zookeeper, ZooKeeper too (the
    `__transaction_state` partitions' leaders are read there) and the client bootstraps from the brokers
    registered in it (as groups do)."""
    s = settings(ctx)
    if s.bootstrap_server or not s.zookeeper:
        with admin_client(ctx, timeout) as admin:
            yield admin, None
        return
    with zookeeper(ctx) as zk:
        client = AdminClient(registered_brokers(ctx, zk), timeout=timeout, security=s.security)
        try:
            yield client, zk
        finally:
            client.close()


@click.group("transactions")
def transactions():
    """Transactions (kafka-transactions.sh). With --bootstrap-server HOST:PORT the transaction coordinators
    answer (ListTransactions, DescribeTransactions). With --zookeeper, list, describe and find-hanging read the
    coordinators' state from the `__transaction_state` log itself (each partition from its leader found in
    ZooKeeper, up to the high watermark): what the log holds, so a transition still being written may not show
    yet, and the coordinator shown is the partition's leader; the partitions' side (DescribeProducers, abort's
    marker) goes to the brokers registered in ZooKeeper."""


@transactions.command("list")
@click.option("--state", "states", metavar="STATE[,STATE...]",
              help="Only transactional ids in these states (e.g. ongoing,empty).")
@click.option("--producer-id", "producer_ids", type=int, multiple=True, metavar="ID",
              help="Only the transactional id of this producer id; repeatable.")
@timeout_option
@click.pass_context
def transactions_list(ctx, states, producer_ids, timeout):
    """List the transactional ids (ListTransactions to every broker, DescribeTransactions to each
    coordinator; with --zookeeper, replayed from `__transaction_state`: what its log holds): coordinator, state,
    producer id and epoch, timeout, start of the current transaction.
    JSON: {"transactions": [{"transactional_id", "coordinator", "state", "producer_id", "producer_epoch",
    "timeout_ms", "start_time_ms"}]}."""
    wanted = []
    if states:
        try:
            wanted = parse_states(states)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--state") from None
    with _txn_cluster(ctx, timeout) as (admin, zk):
        if zk is None:
            listed = describe_all(admin, wanted, list(producer_ids))
        else:
            listed = describe_all_from_log(zk, admin, wanted, list(producer_ids))
    # a transaction may change state between the list and the describe: the filter holds for what is shown
    listed = [d for d in listed if not wanted or d.state in wanted]
    output(ctx).emit(TransactionList(listed))


@transactions.command("describe")
@click.argument("transactional_id")
@timeout_option
@click.pass_context
def transactions_describe(ctx, transactional_id, timeout):
    """Describe a transactional id as its coordinator knows it (with --zookeeper: as its `__transaction_state`
    partition's log holds it), with the partitions of its current transaction. Exit 1 if the id is unknown.
    JSON: as list's entries, plus "duration_ms" and "partitions": [{"topic", "partition"}]."""
    with _txn_cluster(ctx, timeout) as (admin, zk):
        if zk is None:
            desc = admin.describe_transaction(transactional_id)
        else:
            desc = describe_from_log(zk, admin, transactional_id)
    output(ctx).emit(TransactionView(desc, int(time.time() * 1000)))


@transactions.command("find-hanging")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC",
              help="Only these topics' partitions (default: every topic); repeatable.")
@click.option("--max-transaction-timeout", type=click.FloatRange(min=0), default=15.0, show_default=True,
              metavar="MINUTES",
              help="A partition's open transaction unknown to the coordinators counts as hanging once its "
                   "producer has been silent this long (the brokers' transaction.max.timeout.ms).")
@timeout_option
@click.pass_context
def transactions_find_hanging(ctx, topics, max_transaction_timeout, timeout):
    """Find hanging transactions: Ongoing transactions past their timeout (the coordinators', or with --zookeeper
    `__transaction_state`'s), and open transactions on partitions (DescribeProducers) that no coordinator has.
    Exit 1 if a partition could not be examined. JSON: {"hanging": [{"source", "transactional_id", "topic",
    "partition", "producer_id", "producer_epoch", "coordinator_epoch", "start_offset", "start_time_ms",
    "duration_ms"}]}."""
    with _txn_cluster(ctx, timeout) as (admin, zk):
        if topics:
            admin.topics(list(topics))
        described = describe_all(admin, [], []) if zk is None else \
            describe_all_from_log(zk, admin, [], [])
        hanging, errors = find_hanging(admin, described, list(topics) or None,
                                       int(max_transaction_timeout * 60_000), int(time.time() * 1000))
    for tp, code in errors.items():
        print_error(f"Cannot describe the producers of {tp}: {error_text(code)}")
    output(ctx).emit(HangingList(hanging))
    if errors:
        ctx.exit(EXIT_REFUSED)


@transactions.command("abort")
@click.option("--topic", required=True, help="The partition's topic.")
@click.option("--partition", type=click.IntRange(min=0), required=True, help="The partition.")
@click.option("--start-offset", type=click.IntRange(min=0), metavar="OFFSET",
              help="The first offset of the open transaction (its producer is looked up).")
@click.option("--producer-id", type=int, help="The producer of the open transaction (instead of --start-offset).")
@click.option("--producer-epoch", type=int, help="Its producer epoch (with --producer-id).")
@click.option("--coordinator-epoch", type=int, help="The coordinator epoch of the marker (with --producer-id).")
@timeout_option
@click.pass_context
def transactions_abort(ctx, topic, partition, start_offset, producer_id, producer_epoch, coordinator_epoch,
                       timeout):
    """Abort an open transaction on one partition: its leader writes an ABORT marker (WriteTxnMarkers), which
    unblocks read_committed consumers of a hanging transaction (with --zookeeper, through the brokers registered
    there). Exit 1 if the leader refuses. JSON: {"topic", "partition", "producer_id", "producer_epoch",
    "coordinator_epoch", "aborted"}."""
    explicit = (producer_id, producer_epoch, coordinator_epoch)
    if start_offset is None and None in explicit:
        raise click.UsageError("Give --start-offset, or all of --producer-id, --producer-epoch and "
                               "--coordinator-epoch.")
    if start_offset is not None and explicit != (None, None, None):
        raise click.UsageError("Give --start-offset or --producer-id/--producer-epoch/--coordinator-epoch, "
                               "not both.")
    with admin_client(ctx, timeout) as admin:
        if start_offset is not None:
            result = abort_at(admin, TopicPartition(topic, partition), start_offset)
        else:
            result = abort(admin, TopicPartition(topic, partition), producer_id, producer_epoch, coordinator_epoch)
    output(ctx).emit(result)
