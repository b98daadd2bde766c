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

Throttles, as kafka-reassign-partitions.sh sets them (KIP-73): with `--throttle N` (bytes/s), before the
reassignment starts, each planned topic gets `leader.replication.throttled.replicas` = `partition:broker` for every
current replica of its planned partitions and `follower.replication.throttled.replicas` = `partition:broker` for
the replicas the plan adds (each list sorted as strings, as Kafka's TreeSet; empty when nothing is added), and
every broker among the current and target replicas gets `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` = N; `--replica-alter-log-dirs-throttle N` sets
`replica.alter.log.dirs.io.max.bytes.per.second` = N on the brokers of the "log_dirs" moves. Existing keys of
those entities are kept. Once every partition and log dir move of the plan is done, `--verify` (as Kafka's, whether
or not throttles were set) and the command's own wait after setting them (Kafka's does not wait) remove the three
broker keys from the live brokers and the plan's target brokers and both topic keys from the plan's topics, unless
`--preserve-throttles`. With --zookeeper the writes are zk.admin.AdminZkClient's (the entity znode, then its
/config/changes notification; only entities that had a key are rewritten); with --bootstrap-server,
IncrementalAlterConfigs SET / DELETE (on the live brokers only: a broker resource is sent to that broker).

The click command `reassign` closes the module: it validates, starts and waits, with progress on stderr.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass

import click

from zk import znodes as z
from zk.admin import AdminZkClient
from zk.client import KafkaZkClient, ZkNodeExists
from kbroker.common.admin_errors import AdminError, InvalidReplicaAssignmentError, UnknownTopicError
from kbroker.protocol.client import Errors, error_name

from .context import (Failure, Source, output, read_text, registered_brokers, settings, source, wait_for,
                      wait_timeout_option)
from .errors import EXIT_REFUSED, WaitTimedOut
from .kafka_client import BROKER_RESOURCE, TOPIC_RESOURCE, AdminClient
from .output import Output

TopicPartition = tuple[str, int]
Replica = tuple[str, int, int]       # topic, partition, broker id (Kafka's TopicPartitionReplica)

EXISTING_REASSIGNMENT = "There is an existing assignment running."
ANY_LOG_DIR = "any"
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                  "throttle is removed.")


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
class Throttles:
    """The configs a throttled reassignment sets: {topic: {key: value}} and {broker id: {key: value}}."""
    topics: dict[str, dict[str, str]]
    brokers: dict[int, dict[str, str]]
    rate: int | None
    log_dir_rate: int | None

    def render(self, out: Output) -> None:
        """Kafka's lines."""
        out.line(VERIFY_WARNING)
        if self.rate is not None:
            out.line(f"The inter-broker throttle limit was set to {self.rate} B/s")
        if self.log_dir_rate is not None:
            out.line(f"The replica-alter-dir throttle limit was set to {self.log_dir_rate} B/s")

    def to_json(self) -> dict:
        return {"topics": self.topics, "brokers": {str(b): c for b, c in sorted(self.brokers.items())}}


def reassignment_throttles(current: dict[TopicPartition, list[int]], plan: dict[TopicPartition, list[int]],
                           moves: dict[Replica, str], rate: int | None, log_dir_rate: int | None) -> Throttles:
    """What kafka-reassign-partitions.sh --throttle / --replica-alter-log-dirs-throttle set for the plan
    (calculateLeaderThrottles, calculateFollowerThrottles, calculateReassigningBrokers, calculateMovingBrokers)."""
    topics: dict[str, dict[str, str]] = {}
    brokers: dict[int, dict[str, str]] = {}
    if rate is not None:
        leaders: dict[str, set[str]] = {}
        followers: dict[str, set[str]] = {}
        for (topic, p), target in plan.items():
            sources = current[(topic, p)]
            leaders.setdefault(topic, set()).update(f"{p}:{b}" for b in sources)
            followers.setdefault(topic, set()).update(f"{p}:{b}" for b in target if b not in sources)
            for b in (*sources, *target):
                brokers.setdefault(b, {}).update({LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)})
        topics = {t: {LEADER_REPLICAS: ",".join(sorted(leaders[t])), FOLLOWER_REPLICAS: ",".join(sorted(followers[t]))}
                  for t in sorted(leaders)}
    if log_dir_rate is not None:
        for _, _, b in moves:
            brokers.setdefault(b, {})[LOG_DIR_RATE] = str(log_dir_rate)
    return Throttles(topics, brokers, rate, log_dir_rate)


def set_throttles_zk(zk: KafkaZkClient, throttles: Throttles) -> None:
    """The throttle keys over each entity's current config (modifyTopicThrottles, modifyBrokerThrottles)."""
    admin = AdminZkClient(zk)
    for topic, values in throttles.topics.items():
        admin.change_topic_config(topic, {**admin.fetch_entity_config("topics", topic), **values})
    for broker_id, values in sorted(throttles.brokers.items()):
        admin.change_broker_config(broker_id, {**admin.fetch_entity_config("brokers", str(broker_id)), **values})


def set_throttles_admin(admin: AdminClient, throttles: Throttles) -> None:
    """The throttle keys SET with IncrementalAlterConfigs."""
    for topic, values in throttles.topics.items():
        admin.incremental_alter_configs(TOPIC_RESOURCE, topic, values, [])
    for broker_id, values in sorted(throttles.brokers.items()):
        admin.incremental_alter_configs(BROKER_RESOURCE, str(broker_id), values, [])


@dataclass
class ClearedThrottles:
    """The brokers and topics whose throttle keys were removed (Kafka's clearAllThrottles)."""
    brokers: list[int]
    topics: list[str]

    def render(self, out: Output) -> None:
        out.line(f"Clearing broker-level throttles on broker{'' if len(self.brokers) == 1 else 's'} "
                 + ",".join(map(str, self.brokers)))
        out.line(f"Clearing topic-level throttles on topic{'' if len(self.topics) == 1 else 's'} "
                 + ",".join(self.topics))

    def to_json(self) -> dict:
        return {"brokers": self.brokers, "topics": self.topics}


def clear_throttles_zk(zk: KafkaZkClient, plan) -> ClearedThrottles:
    """Remove the throttle keys from the registered brokers and the plan's targets, and from the plan's topics;
    only the entities that had one are rewritten (and notified)."""
    admin = AdminZkClient(zk)
    cleared = ClearedThrottles(sorted(set(zk.get_broker_ids()) | {b for r in plan.values() for b in r}),
                               sorted({t for t, _ in plan}))
    for broker_id in cleared.brokers:
        config = admin.fetch_entity_config("brokers", str(broker_id))
        if any(k in config for k in BROKER_THROTTLES):
            admin.change_broker_config(broker_id, {k: v for k, v in config.items() if k not in BROKER_THROTTLES})
    for topic in cleared.topics:
        config = admin.fetch_entity_config("topics", topic)
        if any(k in config for k in TOPIC_THROTTLES):
            admin.change_topic_config(topic, {k: v for k, v in config.items() if k not in TOPIC_THROTTLES})
    return cleared


def clear_throttles_admin(admin: AdminClient, plan) -> ClearedThrottles:
    """The throttle keys DELETEd with IncrementalAlterConfigs on the live brokers and the plan's topics."""
    cleared = ClearedThrottles(sorted(admin.brokers()), sorted({t for t, _ in plan}))
    for broker_id in cleared.brokers:
        admin.incremental_alter_configs(BROKER_RESOURCE, str(broker_id), {}, list(BROKER_THROTTLES))
    for topic in cleared.topics:
        admin.incremental_alter_configs(TOPIC_RESOURCE, topic, {}, list(TOPIC_THROTTLES))
    return cleared


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


def finished(statuses: list[PartitionStatus], moves: list[LogDirStatus]) -> bool:
    """No partition of the plan is being reassigned and no log dir move is under way (when throttles go)."""
    return all(st.done for st in statuses) and not any(m.state in ("in-progress", "elsewhere") for m in moves)


@dataclass
class ReassignmentStatus:
    """reassign --verify. JSON: {"status": [{"topic", "partition", "target", "current", "state": "complete" |
    "in-progress" | "different" | "gone"}], "log_dirs": [{"topic", "partition", "broker", "target", "current",
    "future", "state": "complete" | "in-progress" | "missing" | "elsewhere" | "cancelled"}], "throttles_cleared":
    {"brokers": [ids], "topics": [names]} or null}."""
    statuses: list[PartitionStatus]
    moves: list[LogDirStatus]
    cleared: ClearedThrottles | None = None

    @property
    def succeeded(self) -> bool:
        return all(st.succeeded for st in self.statuses) and all(m.done for m in self.moves)

    def render(self, out: Output) -> None:
        _status_lines(out, self.statuses, self.moves)
        if self.cleared is not None:
            self.cleared.render(out)

    def to_json(self) -> dict:
        return {"status": [st.to_json() for st in self.statuses], "log_dirs": [m.to_json() for m in self.moves],
                "throttles_cleared": self.cleared.to_json() if self.cleared is not None else None}


@dataclass
class Reassignment:
    """reassign --execute. JSON: {"rollback": the current assignment as a plan, "throttles": {"topics": {topic:
    {key: value}}, "brokers": {id: {key: value}}} (the configs set; null without --throttle or
    --replica-alter-log-dirs-throttle), "started": ["t-0", ...], "log_dir_moves": ["t-0-2", ...] (replicas whose
    broker accepted their log dir), "status" and "log_dirs": [as --verify's] once waited for, null with --no-wait,
    "throttles_cleared": as --verify's}. Text, as kafka-reassign-partitions.sh prints it as it goes: the rollback
    plan before starting, the throttles set, then the start, the log dir moves started, then (after waiting) the
    status and the throttles cleared."""
    rollback: dict[TopicPartition, list[int]]
    plan: dict[TopicPartition, list[int]]
    statuses: list[PartitionStatus] | None = None
    moved: set[Replica] | None = None
    moves: list[LogDirStatus] | None = None
    throttles: Throttles | None = None
    cleared: ClearedThrottles | None = None

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
        if self.cleared is not None:
            self.cleared.render(out)

    def render(self, out: Output) -> None:
        self.render_rollback(out)
        if self.throttles is not None:
            self.throttles.render(out)
        self.render_started(out)
        self.render_moves_started(out, self.moved or set())
        self.render_status(out)

    def to_json(self) -> dict:
        return {"rollback": json.loads(format_plan(self.rollback)),
                "throttles": self.throttles.to_json() if self.throttles is not None else None,
                "started": [tp_name(tp) for tp in sorted(self.plan)],
                "log_dir_moves": [replica_name(r) for r in sorted(self.moved or ())],
                "status": None if self.statuses is None else [st.to_json() for st in self.statuses],
                "log_dirs": None if self.moves is None else [m.to_json() for m in self.moves],
                "throttles_cleared": self.cleared.to_json() if self.cleared is not None else None}


# ---- commands (click) -----------------------------------------------------------------------------------------

METADATA_SETTLE_S = 5.0   # how long a partition the controller no longer moves may show other replicas in Metadata


def _reassignment_poll(src: Source, plan, dirs_admin, moves):
    """poll() for _wait: (partitions and log dir moves done, finished) of the plan. Through the brokers, a
    partition the controller no longer lists as moving is finished once the brokers' Metadata shows its target
    replicas (their UpdateMetadata may come a moment after ListPartitionReassignments stops naming it), or after
    METADATA_SETTLE_S showing others (the controller refused or undid it)."""
    settled_by: dict[TopicPartition, float] = {}

    def poll():
        if src.zk is not None:
            statuses = reassignment_status(src.zk, plan)
            finished = all(st.done for st in statuses) and not reassignment_in_progress(src.zk)
        else:
            statuses = reassignment_status_admin(src.admin, plan)
            now = time.monotonic()
            finished = all([st.done and (st.current in (None, st.target)
                                         or now >= settled_by.setdefault(st.tp, now + METADATA_SETTLE_S))
                            for st in statuses])
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
@click.option("--throttle", type=click.IntRange(min=0), metavar="BYTES",
              help="Throttle the data moving between brokers to BYTES per second (leader and follower rates on "
                   "the brokers involved, the moving replicas on the topics), until the reassignment is done.")
@click.option("--replica-alter-log-dirs-throttle", "log_dir_throttle", type=click.IntRange(min=0), metavar="BYTES",
              help="Throttle the log dir moves of the plan's \"log_dirs\" to BYTES per second on their brokers.")
@click.option("--preserve-throttles", is_flag=True,
              help="Leave the throttles in place when the reassignment is done (waiting or --verify).")
@wait_timeout_option(600.0, "the reassignment")
@click.pass_context
def reassign(ctx, plan_file, execute, verify, no_wait, throttle, log_dir_throttle, preserve_throttles, timeout):
    """Move partitions to other brokers, and replicas to other log dirs (kafka-reassign-partitions.sh).

    Validates the plan (existing partitions, non-empty lists of distinct live brokers, each partition once;
    nothing is started otherwise; refused while another reassignment runs), prints the current assignment as a
    plan for rollback, starts the reassignment and waits until the controller has moved every partition. A
    "log_dirs" list beside "replicas" ("any" = no preference) moves each replica to that log dir of its broker
    (AlterReplicaLogDirs, sent to the brokers before and after the reassignment starts); waiting and --verify
    then also follow those moves.

    --throttle BYTES sets the replication throttles kafka-reassign-partitions.sh sets (the leader and follower
    rates on every broker involved, the current replicas as leader-throttled and the added ones as
    follower-throttled on each topic); --replica-alter-log-dirs-throttle BYTES the log dir move rate on the
    brokers of the "log_dirs" moves. Once everything is done, waiting or --verify removes every throttle key from
    the brokers and the plan's topics, unless --preserve-throttles.

    JSON: {"rollback": plan, "throttles": {"topics": {t: {key: value}}, "brokers": {id: {key: value}}} or null,
    "started": ["t-0", ...], "log_dir_moves": ["t-0-2", ...], "status": [{"topic", "partition", "target",
    "current", "state": "complete" | "in-progress" | "different" | "gone"}], "log_dirs": [{"topic", "partition",
    "broker", "target", "current", "future", "state": "complete" | "in-progress" | "missing" | "elsewhere" |
    "cancelled"}] (both null with --no-wait), "throttles_cleared": {"brokers": [ids], "topics": [names]} or
    null}; with --verify {"status": [...], "log_dirs": [...], "throttles_cleared": ...}.
    """
    if execute and verify:
        raise click.UsageError("--execute and --verify cannot be combined.")
    if verify and (throttle is not None or log_dir_throttle is not None):
        raise click.UsageError("--throttle and --replica-alter-log-dirs-throttle go with --execute, not --verify.")
    out = output(ctx)
    plan, moves = parse_plan(read_text(plan_file))
    if verify:
        with source(ctx) as src, _log_dir_admin(ctx, src, moves) as dirs_admin:
            check_partitions_exist(src.call(current_assignment, current_assignment_admin, plan), plan)
            statuses = src.call(reassignment_status, reassignment_status_admin, plan)
            verified = ReassignmentStatus(
                statuses, log_dir_status(dirs_admin, moves) if moves else [])
            if not preserve_throttles and finished(verified.statuses, verified.moves):
                verified.cleared = src.call(clear_throttles_zk, clear_throttles_admin, plan)
        out.emit(verified)
        ctx.exit(0 if verified.succeeded else EXIT_REFUSED)
    with source(ctx) as src, _log_dir_admin(ctx, src, moves) as dirs_admin:
        result = _start(out, src, dirs_admin, plan, moves, timeout, throttle, log_dir_throttle)
        if no_wait:
            if out.json:
                out.emit(result)
            return
        timed_out = _wait_done(src, dirs_admin, result, moves, timeout)
        if result.throttles is not None and timed_out is None and not preserve_throttles \
                and finished(result.statuses, result.moves):
            result.cleared = src.call(clear_throttles_zk, clear_throttles_admin, plan)
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


def _start(out: Output, src: Source, dirs_admin, plan, moves, timeout: float, throttle: int | None,
           log_dir_throttle: int | None) -> Reassignment:
    """Validate the plan, print the rollback plan, set the throttles asked for, move the log dirs of replicas their
    brokers already have, start the reassignment, then the log dir moves of the replicas it adds (as their
    brokers get them)."""
    if src.zk is not None:
        if reassignment_in_progress(src.zk):
            raise AdminError(EXISTING_REASSIGNMENT)
        current = validate_plan(src.zk, plan)
    else:
        current = validate_plan_admin(src.admin, plan)
    result = Reassignment(current, plan)
    if not out.json:
        result.render_rollback(out)
    if throttle is not None or log_dir_throttle is not None:
        result.throttles = reassignment_throttles(current, plan, moves, throttle, log_dir_throttle)
        src.call(set_throttles_zk, set_throttles_admin, result.throttles)
        if not out.json:
            result.throttles.render(out)
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
