"""Partition reassignment over ZooKeeper, as Kafka 2.8's `kafka-reassign-partitions.sh --zookeeper` does it.

The plan is Kafka's reassignment JSON, `{"version":1,"partitions":[{"topic":T,"partition":P,"replicas":[..],
"log_dirs":[..]}]}`. Executing it validates the whole plan first (nothing is written when any entry is wrong),
prints the current assignment of the planned partitions as a plan of its own (for rollback), then creates
/admin/reassign_partitions. The controller does the work: it lists adding/removing replicas in
the topic znode while data moves, drops finished partitions from the admin znode and deletes it when empty.

A partition's reassignment is finished when it is no longer in /admin/reassign_partitions and its topic znode
lists no adding or removing replicas for it; it succeeded when the topic znode then lists the target replicas
(the controller drops entries it refuses, e.g. a target broker that died, from the admin znode).

Through the Admin APIs (`--bootstrap-server`, as `kafka-reassign-partitions.sh --bootstrap-server`) the same
checks use Metadata (partitions, replicas, live brokers), AlterPartitionReassignments starts the plan on the
controller, and ListPartitionReassignments tells which partitions are still moving. Either way the result is
one Reassignment / ReassignmentStatus object, rendered the same.

"log_dirs" (optional, aligned with "replicas"; "any" = no preference) names the log dir each replica should live
in on its broker (JBOD). Those moves are sent to the brokers with AlterReplicaLogDirs (in both modes: with
--zookeeper, to the brokers registered there), once before the reassignment is started, so that a new replica's
broker remembers the dir and creates the log there (REPLICA_NOT_AVAILABLE until then), and again after, until
every broker accepted (as Kafka's ReassignPartitionsCommand.executeMoves). Any other refusal (LOG_DIR_NOT_FOUND,
KAFKA_STORAGE_ERROR) stops the command, before the reassignment when possible. Waiting and --verify also follow
the moves (DescribeLogDirs: each replica's current and future log dir), with Kafka's wording. Kafka 2.8's
`--zookeeper` mode refuses log_dirs; kadmin reaches the brokers through ZooKeeper instead.

The click command `reassign` closes the module: it validates, starts and waits, with progress on stderr.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass

import click

from zk import znodes as z
from zk.client import KafkaZkClient, ZkNodeExists
from kbroker.common.admin_errors import AdminError, InvalidReplicaAssignmentError, UnknownTopicError
from kbroker.protocol.client import Errors, error_name

from .context import (Failure, Source, output, read_text, registered_brokers, settings, source, wait_for,
                      wait_timeout_option)
from .errors import EXIT_REFUSED, WaitTimedOut
from .kafka_client import AdminClient
from .output import Output

TopicPartition = tuple[str, int]
Replica = tuple[str, int, int]       # topic, partition, broker id (Kafka's TopicPartitionReplica)

EXISTING_REASSIGNMENT = "There is an existing assignment running."
ANY_LOG_DIR = "any"


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def replica_name(r: Replica) -> str:
    """`t-0-2`, as Kafka's TopicPartitionReplica prints."""
    return f"{r[0]}-{r[1]}-{r[2]}"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_plan(text: str) -> tuple[dict[TopicPartition, list[int]], dict[Replica, str]]:
    """Kafka's reassignment JSON -> ({(topic, partition): replicas} in file order, {(topic, partition, broker):
    log dir} of the replicas whose "log_dirs" entry is not "any"). Checks the format only (Kafka's
    parseExecuteAssignmentArgs): a non-empty list, non-empty replica lists without duplicates, log_dirs as long as
    replicas, no partition twice. Raises AdminError with one line."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise AdminError(f"The reassignment plan is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise AdminError("The reassignment plan must be a JSON object with a \"partitions\" list.")
    version = obj.get("version", 1)
    if version != 1:
        raise AdminError(f"Not supported version field value {version}")
    entries = obj.get("partitions", [])
    if not isinstance(entries, list):
        raise AdminError("\"partitions\" in the reassignment plan must be a list.")
    if not entries:
        raise AdminError("Partition reassignment list cannot be empty")
    plan: dict[TopicPartition, list[int]] = {}
    log_dirs: dict[Replica, str] = {}
    duplicates: list[TopicPartition] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str) or not e["topic"] \
                or not _is_int(e.get("partition")) or not isinstance(e.get("replicas"), list) \
                or not all(_is_int(r) for r in e["replicas"]):
            raise AdminError(f"Entry {i} of the reassignment plan needs \"topic\" (a string), \"partition\" "
                             f"(an integer) and \"replicas\" (a list of broker ids): {json.dumps(e)}")
        tp = (e["topic"], e["partition"])
        if tp in plan:
            duplicates.append(tp)
        plan[tp] = list(e["replicas"])
        dirs = e.get("log_dirs", [ANY_LOG_DIR] * len(e["replicas"]))
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
            raise AdminError(f"\"log_dirs\" of entry {i} of the reassignment plan must be a list of strings: "
                             f"{json.dumps(e)}")
        if len(dirs) != len(e["replicas"]):
            raise AdminError(f"Size of replicas list {e['replicas']} is different from size of log dirs list "
                             f"{dirs} for partition {tp_name(tp)}")
        log_dirs.update({(*tp, b): d for b, d in zip(e["replicas"], dirs) if d != ANY_LOG_DIR})
    if duplicates:
        raise AdminError("Partition reassignment contains duplicate topic partitions: "
                         + ",".join(tp_name(tp) for tp in duplicates))
    empty = [tp for tp, r in plan.items() if not r]
    if empty:
        raise AdminError("Partition replica list cannot be empty: " + ",".join(tp_name(tp) for tp in empty))
    repeated = [(tp, sorted({b for b in r if r.count(b) > 1})) for tp, r in plan.items() if len(set(r)) != len(r)]
    if repeated:
        raise AdminError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{tp_name(tp)} contains multiple entries for {','.join(map(str, bs))}" for tp, bs in repeated))
    return plan, log_dirs


def current_assignment(zk: KafkaZkClient, partitions) -> dict[TopicPartition, list[int]]:
    """The topic znodes' replica lists of those partitions; missing partitions are left out."""
    out, cache = {}, {}
    for topic, p in partitions:
        if topic not in cache:
            cache[topic] = zk.get_topic_assignment(topic)
        a = cache[topic]
        if a is not None and p in a.partitions:
            out[(topic, p)] = list(a.partitions[p])
    return out


def current_assignment_admin(admin: AdminClient, partitions) -> dict[TopicPartition, list[int]]:
    """current_assignment from the brokers' metadata."""
    md = admin.metadata(sorted({t for t, _ in partitions}))
    return {(t, p): list(md.topics[t].partitions[p].replicas) for t, p in partitions
            if t in md.topics and p in md.topics[t].partitions}


def check_partitions_exist(current: dict[TopicPartition, list[int]], plan) -> dict[TopicPartition, list[int]]:
    """current (the assignment of the plan's partitions found); UnknownTopicError naming the missing ones."""
    missing = [tp for tp in plan if tp not in current]
    if missing:
        raise UnknownTopicError("The proposed assignment contains non-existent partitions: "
                                + ",".join(tp_name(tp) for tp in missing))
    return current


def check_brokers(plan, registered: set[int]) -> None:
    """Every replica of the plan is a registered (live) broker."""
    unknown = sorted({b for replicas in plan.values() for b in replicas} - registered)
    if unknown:
        raise InvalidReplicaAssignmentError(f"Unknown broker id{'s' if len(unknown) > 1 else ''} "
                                            f"{','.join(map(str, unknown))} (registered brokers: "
                                            f"{','.join(map(str, sorted(registered))) or 'none'})")


def validate_plan(zk: KafkaZkClient, plan) -> dict[TopicPartition, list[int]]:
    """Check the plan against the cluster (partitions exist, every replica is a registered broker); return
    the current assignment of its partitions."""
    current = check_partitions_exist(current_assignment(zk, plan), plan)
    check_brokers(plan, set(zk.get_broker_ids()))
    return current


def validate_plan_admin(admin: AdminClient, plan) -> dict[TopicPartition, list[int]]:
    """validate_plan through the brokers (Metadata's live brokers are the registered ones)."""
    current = check_partitions_exist(current_assignment_admin(admin, plan), plan)
    check_brokers(plan, set(admin.brokers()))
    return current


def format_plan(assignment: dict[TopicPartition, list[int]]) -> str:
    """A plan as Kafka's formatAsReassignmentJson writes it (compact JSON, log_dirs "any")."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def start_reassignment(zk: KafkaZkClient, plan) -> None:
    """Create /admin/reassign_partitions; refused if one exists (a reassignment is running)."""
    try:
        zk.create_recursive(z.ReassignPartitionsZNode.path, z.ReassignPartitionsZNode.encode(plan))
    except ZkNodeExists:
        raise AdminError(EXISTING_REASSIGNMENT) from None


def reassignment_in_progress(zk: KafkaZkClient) -> bool:
    return zk.exists(z.ReassignPartitionsZNode.path) is not None


def start_reassignment_admin(admin: AdminClient, plan) -> None:
    """Refused while any reassignment runs (as the ZooKeeper path, and kafka-reassign-partitions.sh without
    --additional); then AlterPartitionReassignments, AdminError naming each partition the controller refused."""
    if admin.list_reassignments():
        raise AdminError(EXISTING_REASSIGNMENT)
    results = admin.alter_reassignments(dict(plan))
    failed = [(tp, code, message) for tp, (code, message) in sorted(results.items()) if code]
    if failed:
        raise AdminError("Error reassigning partition(s): " + "; ".join(
            f"{tp_name(tp)}: {message or 'refused'} ({error_name(code)})" for tp, code, message in failed))


def alter_log_dirs(admin: AdminClient, moves: dict[Replica, str]) -> set[Replica]:
    """AlterReplicaLogDirs for the moves: the replicas whose brokers accepted (the others do not host the
    replica yet: REPLICA_NOT_AVAILABLE). AdminError on any other refusal (Kafka's alterReplicaLogDirs)."""
    results = admin.alter_replica_log_dirs(moves)
    failed = sorted((r, code) for r, code in results.items() if code not in (Errors.NONE,
                                                                             Errors.REPLICA_NOT_AVAILABLE))
    if failed:
        raise AdminError("; ".join(f"Failed to alter dir for {replica_name(r)} to {moves[r]} ({error_name(code)})"
                                   for r, code in failed))
    return {r for r, code in results.items() if code == Errors.NONE}


@dataclass
class LogDirStatus:
    """Where a replica named in log_dirs is: its current and future log dirs (None: not found)."""
    replica: Replica
    target: str
    current: str | None
    future: str | None

    @property
    def done(self) -> bool:
        return self.current == self.target and self.future is None

    @property
    def state(self) -> str:
        """'complete', 'in-progress' (moving to the target), 'missing' (no such replica on the broker),
        'elsewhere' (moving to another dir) or 'cancelled' (not moving to the target)."""
        if self.current is None:
            return "missing"
        if self.future is not None:
            return "in-progress" if self.future == self.target else "elsewhere"
        return "complete" if self.current == self.target else "cancelled"

    def to_json(self) -> dict:
        t, p, b = self.replica
        return {"topic": t, "partition": p, "broker": b, "target": self.target, "current": self.current,
                "future": self.future, "state": self.state}

    def describe(self) -> str:
        """Kafka's wording (ReassignPartitionsCommand.replicaMoveStatesToString)."""
        t, p, b = self.replica
        return {
            "missing": f"Partition {t}-{p} cannot be found in any live log directory on broker {b}.",
            "in-progress": f"Reassignment of replica {replica_name(self.replica)} is still in progress.",
            "elsewhere": f"Partition {t}-{p} on broker {b} is being moved to log dir {self.future} instead of "
                         f"{self.target}.",
            "cancelled": f"Partition {t}-{p} on broker {b} is not being moved from log dir {self.current} to "
                         f"{self.target}.",
            "complete": f"Reassignment of replica {replica_name(self.replica)} completed successfully.",
        }[self.state]


def log_dir_status(admin: AdminClient, moves: dict[Replica, str]) -> list[LogDirStatus]:
    """Each move's replica: where DescribeLogDirs to its broker finds it."""
    found = admin.replica_log_dirs(list(moves))
    return [LogDirStatus(r, target, *found.get(r, (None, None))) for r, target in sorted(moves.items())]


@dataclass
class PartitionStatus:
    tp: TopicPartition
    target: list[int]
    current: list[int] | None  # the topic znode's replicas; None if the partition is gone
    in_progress: bool

    @property
    def done(self) -> bool:
        return not self.in_progress

    @property
    def succeeded(self) -> bool:
        return not self.in_progress and self.current == self.target

    @property
    def state(self) -> str:
        """'in-progress', 'complete', 'gone' (the partition no longer exists) or 'different' (finished on other
        replicas than the target)."""
        if self.in_progress:
            return "in-progress"
        if self.current is None:
            return "gone"
        return "complete" if self.current == self.target else "different"

    def to_json(self) -> dict:
        return {"topic": self.tp[0], "partition": self.tp[1], "target": self.target, "current": self.current,
                "state": self.state}

    def describe(self) -> str:
        """Kafka's wording (ReassignPartitionsCommand.partitionReassignmentStatesToString)."""
        name = tp_name(self.tp)
        if self.in_progress:
            return f"Reassignment of partition {name} is still in progress."
        if self.current is None:
            return f"Partition {name} does not exist any more."
        if self.current == self.target:
            return f"Reassignment of partition {name} is complete."
        return (f"There is no active reassignment of partition {name}, but replica set is "
                f"{','.join(map(str, self.current))} rather than {','.join(map(str, self.target))}.")


def reassignment_status(zk: KafkaZkClient, plan) -> list[PartitionStatus]:
    """Per planned partition: still listed in /admin/reassign_partitions, or with adding/removing replicas in
    its topic znode (in progress), else its replicas now."""
    data, stat = zk.get(z.ReassignPartitionsZNode.path)
    pending = set(z.ReassignPartitionsZNode.decode(data)) if stat is not None and data else set()
    assignments = {}
    out = []
    for tp, target in sorted(plan.items()):
        topic, p = tp
        if topic not in assignments:
            assignments[topic] = zk.get_topic_assignment(topic)
        a = assignments[topic]
        current = list(a.partitions[p]) if a is not None and p in a.partitions else None
        moving = a is not None and bool(a.adding_replicas.get(p) or a.removing_replicas.get(p))
        out.append(PartitionStatus(tp, list(target), current, tp in pending or moving))
    return out


def reassignment_status_admin(admin: AdminClient, plan) -> list[PartitionStatus]:
    """reassignment_status through the brokers: ListPartitionReassignments (still moving), Metadata (replicas)."""
    moving = admin.list_reassignments(sorted(plan))
    current = current_assignment_admin(admin, plan)
    return [PartitionStatus(tp, list(target), current.get(tp), tp in moving) for tp, target in sorted(plan.items())]


def _status_lines(out: Output, statuses: list[PartitionStatus], moves: list[LogDirStatus]) -> None:
    out.line("Status of partition reassignment:")
    for st in statuses:
        out.line(st.describe())
    if moves:
        out.line("\nReassignment of replica log directories:")
        for m in moves:
            out.line(m.describe())


@dataclass
class ReassignmentStatus:
    """reassign --verify. JSON: {"status": [{"topic", "partition", "target", "current", "state": "complete" |
    "in-progress" | "different" | "gone"}], "log_dirs": [{"topic", "partition", "broker", "target", "current",
    "future", "state": "complete" | "in-progress" | "missing" | "elsewhere" | "cancelled"}]}."""
    statuses: list[PartitionStatus]
    moves: list[LogDirStatus]

    @property
    def succeeded(self) -> bool:
        return all(st.succeeded for st in self.statuses) and all(m.done for m in self.moves)

    def render(self, out: Output) -> None:
        _status_lines(out, self.statuses, self.moves)

    def to_json(self) -> dict:
        return {"status": [st.to_json() for st in self.statuses], "log_dirs": [m.to_json() for m in self.moves]}


@dataclass
class Reassignment:
    """reassign --execute. JSON: {"rollback": the current assignment as a plan, "started": ["t-0", ...],
    "log_dir_moves": ["t-0-2", ...] (replicas whose broker accepted their log dir), "status" and "log_dirs": [as
    --verify's] once waited for, null with --no-wait}. Text, as kafka-reassign-partitions.sh prints it as it goes:
    the rollback plan before starting, then the start, the log dir moves started, then (after waiting) the
    status."""
    rollback: dict[TopicPartition, list[int]]
    plan: dict[TopicPartition, list[int]]
    statuses: list[PartitionStatus] | None = None
    moved: set[Replica] | None = None
    moves: list[LogDirStatus] | None = None

    def render_rollback(self, out: Output) -> None:
        out.line("Current partition replica assignment\n")
        out.line(format_plan(self.rollback))
        out.line("\nSave this to use as the --reassignment-json-file option during rollback")

    def render_started(self, out: Output) -> None:
        out.line("Successfully started partition reassignments for "
                 + ",".join(tp_name(tp) for tp in sorted(self.plan)))

    def render_moves_started(self, out: Output, replicas: set[Replica]) -> None:
        if replicas:
            out.line(f"Successfully started log directory move{'s' if len(replicas) > 1 else ''} for: "
                     + ",".join(replica_name(r) for r in sorted(replicas)))

    def render_status(self, out: Output) -> None:
        if self.statuses is not None:
            _status_lines(out, self.statuses, self.moves or [])

    def render(self, out: Output) -> None:
        self.render_rollback(out)
        self.render_started(out)
        self.render_moves_started(out, self.moved or set())
        self.render_status(out)

    def to_json(self) -> dict:
        return {"rollback": json.loads(format_plan(self.rollback)),
                "started": [tp_name(tp) for tp in sorted(self.plan)],
                "log_dir_moves": [replica_name(r) for r in sorted(self.moved or ())],
                "status": None if self.statuses is None else [st.to_json() for st in self.statuses],
                "log_dirs": None if self.moves is None else [m.to_json() for m in self.moves]}


# ---- commands (click) -----------------------------------------------------------------------------------------

def _reassignment_poll(src: Source, plan, dirs_admin, moves):
    """poll() for _wait: (partitions and log dir moves done, finished) of the plan."""
    def poll():
        if src.zk is not None:
            statuses = reassignment_status(src.zk, plan)
            finished = all(st.done for st in statuses) and not reassignment_in_progress(src.zk)
        else:
            statuses = reassignment_status_admin(src.admin, plan)
            finished = all(st.done for st in statuses)
        moved = [m for m in log_dir_status(dirs_admin, moves) if m.done] if moves else []
        return sum(1 for st in statuses if st.done) + len(moved), finished and len(moved) == len(moves)
    return poll


@contextmanager
def _log_dir_admin(ctx: click.Context, src: Source, moves):
    """The AdminClient that sends AlterReplicaLogDirs and DescribeLogDirs for the plan's log_dirs: the command's
    own with --bootstrap-server, else one on the brokers registered in ZooKeeper; None without log_dirs."""
    if not moves or src.admin is not None:
        yield src.admin
        return
    s = settings(ctx)
    client = AdminClient(registered_brokers(ctx, src.zk), timeout=s.request_timeout, security=s.security)
    try:
        yield client
    finally:
        client.close()


@click.command("reassign")
@click.option("--reassignment-json-file", "plan_file", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help='The plan: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}.')
@click.option("--execute", is_flag=True, help="Start the reassignment (what reassign does anyway).")
@click.option("--verify", is_flag=True,
              help="Only report whether each partition of the plan has been reassigned (exit 1 if not all).")
@click.option("--no-wait", is_flag=True, help="Return once the reassignment is started.")
@wait_timeout_option(600.0, "the reassignment")
@click.pass_context
def reassign(ctx, plan_file, execute, verify, no_wait, timeout):
    """Move partitions to other brokers, and replicas to other log dirs (kafka-reassign-partitions.sh).

    Validates the plan (existing partitions, non-empty lists of distinct live brokers, each partition once;
    nothing is started otherwise; refused while another reassignment runs), prints the current assignment as a
    plan for rollback, starts the reassignment and waits until the controller has moved every partition. A
    "log_dirs" list beside "replicas" ("any" = no preference) moves each replica to that log dir of its broker
    (AlterReplicaLogDirs, sent to the brokers before and after the reassignment starts); waiting and --verify
    then also follow those moves.

    JSON: {"rollback": plan, "started": ["t-0", ...], "log_dir_moves": ["t-0-2", ...], "status": [{"topic",
    "partition", "target", "current", "state": "complete" | "in-progress" | "different" | "gone"}], "log_dirs":
    [{"topic", "partition", "broker", "target", "current", "future", "state": "complete" | "in-progress" |
    "missing" | "elsewhere" | "cancelled"}] (both null with --no-wait)}; with --verify {"status": [...],
    "log_dirs": [...]}.
    """
    if execute and verify:
        raise click.UsageError("--execute and --verify cannot be combined.")
    out = output(ctx)
    plan, moves = parse_plan(read_text(plan_file))
    if verify:
        with source(ctx) as src, _log_dir_admin(ctx, src, moves) as dirs_admin:
            check_partitions_exist(src.call(current_assignment, current_assignment_admin, plan), plan)
            statuses = src.call(reassignment_status, reassignment_status_admin, plan)
            verified = ReassignmentStatus(
                statuses, log_dir_status(dirs_admin, moves) if moves else [])
        out.emit(verified)
        ctx.exit(0 if verified.succeeded else EXIT_REFUSED)
    with source(ctx) as src, _log_dir_admin(ctx, src, moves) as dirs_admin:
        result = _start(out, src, dirs_admin, plan, moves, timeout)
        if no_wait:
            if out.json:
                out.emit(result)
            return
        timed_out = _wait_done(src, dirs_admin, result, moves, timeout)
    if out.json:
        out.emit(result)
    else:
        result.render_status(out)
    if timed_out is not None:
        raise timed_out
    failed = [st for st in result.statuses if not st.succeeded]
    if failed:
        raise Failure(f"{len(failed)} of {len(plan)} partition(s) did not reach their target replicas (the "
                      "controller refused or undid them; see its state-change log).")
    unmoved = [m for m in result.moves if not m.done]
    if unmoved:
        raise Failure(f"{len(unmoved)} of {len(moves)} replica(s) did not reach their target log dir.")


def _start(out: Output, src: Source, dirs_admin, plan, moves, timeout: float) -> Reassignment:
    """Validate the plan, print the rollback plan, move the log dirs of replicas their brokers already have,
    start the reassignment, then the log dir moves of the replicas it adds (as their brokers get them)."""
    if src.zk is not None:
        if reassignment_in_progress(src.zk):
            raise AdminError(EXISTING_REASSIGNMENT)
        current = validate_plan(src.zk, plan)
    else:
        current = validate_plan_admin(src.admin, plan)
    result = Reassignment(current, plan)
    if not out.json:
        result.render_rollback(out)
    # Before the reassignment: a replica the broker has not got yet gets its dir remembered there.
    result.moved = alter_log_dirs(dirs_admin, moves) if moves else set()
    src.call(start_reassignment, start_reassignment_admin, plan)
    if not out.json:
        result.render_started(out)
    pending = {r: d for r, d in moves.items() if r not in result.moved}
    if pending:
        def start_moves():
            accepted = alter_log_dirs(dirs_admin, pending)
            result.moved |= accepted
            for r in accepted:
                del pending[r]
            return len(moves) - len(pending), not pending
        wait_for(start_moves, "Starting log directory moves", timeout,
                 lambda done: f"log directory moves to start: {len(moves) - done} replica(s) not on their "
                              "broker yet.", len(moves), interval=0.1)
    if not out.json:
        result.render_moves_started(out, result.moved)
    return result


def _wait_done(src: Source, dirs_admin, result: Reassignment, moves, timeout: float) -> WaitTimedOut | None:
    """Wait until every partition and log dir move of the plan is done (or timeout), then put the final status
    in result; the WaitTimedOut, raised once that status is shown, or None."""
    plan = result.plan
    total = len(plan) + len(moves)
    what = "partition(s) and log dir move(s) still under way; they carry" if moves else \
        "partition(s) still being reassigned; the controller carries"
    try:
        wait_for(_reassignment_poll(src, plan, dirs_admin, moves), f"Reassigning {len(plan)} partition(s)",
                 timeout, lambda done: f"the reassignment: {total - done} of {total} {what} on (check with "
                                       "--verify).", total)
        timed_out = None
    except WaitTimedOut as e:
        timed_out = e
    result.statuses = src.call(reassignment_status, reassignment_status_admin, plan)
    result.moves = log_dir_status(dirs_admin, moves) if moves else []
    return timed_out
