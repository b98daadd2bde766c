"""Preferred leader election over ZooKeeper, as Kafka 2.8's `kafka-preferred-replica-election.sh --zookeeper`
writes it, reported as `kafka-leader-election.sh` reports it.

kadmin creates /admin/preferred_replica_election = {"version":1,"partitions":[{"topic":T,"partition":P},...]}
(refused while one exists), waits until the controller has deleted it (it elects first, then deletes), and
then reads the partition state znodes: a partition whose preferred replica (the first assigned replica) leads
now was elected, one it already led before needed no election, any other failed (the preferred replica is
not alive or not in the ISR). Unclean election exists only as the ElectLeaders Admin API.

Through the Admin APIs (`--bootstrap-server`) ElectLeaders goes to the controller, which answers per partition
once it has elected (ELECTION_NOT_NEEDED: the wanted leader already leads), for preferred or unclean elections.
Both paths give one ElectionResult, rendered the same.

The click command `elect-leaders` closes the module.
"""
from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import click

from zk import znodes as z
from zk.client import KafkaZkClient, ZkNodeExists
from kbroker.common.admin_errors import AdminError, UnknownTopicError
from kbroker.protocol.client import error_name

from .context import Failure, output, read_text, settings, source, wait_timeout_option
from .errors import WaitTimedOut
from .kafka_client import PREFERRED, UNCLEAN, AdminClient
from .output import Output, progress
from .reassign import TopicPartition, _is_int, current_assignment, current_assignment_admin, tp_name

ELECTION_NOT_NEEDED = 84
# What a failed election is reported as (the error codes the ElectLeaders API answers with).
NOT_AVAILABLE = "PREFERRED_LEADER_NOT_AVAILABLE"
NO_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"


def parse_election_file(text: str) -> list[TopicPartition]:
    """kafka-leader-election.sh's --path-to-json-file: {"partitions":[{"topic":T,"partition":P},...]}."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise AdminError(f"The election file is not valid JSON: {e}") from None
    entries = obj.get("partitions") if isinstance(obj, dict) else None
    if not isinstance(entries, list):
        raise AdminError("The election file must be a JSON object with a \"partitions\" list.")
    out: list[TopicPartition] = []
    duplicates = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str) or not _is_int(e.get("partition")):
            raise AdminError(f"Entry {i} of the election file needs \"topic\" (a string) and \"partition\" "
                             f"(an integer): {json.dumps(e)}")
        tp = (e["topic"], e["partition"])
        (duplicates if tp in out else out).append(tp)
    if duplicates:
        raise AdminError("Replica election data contains duplicate partitions: "
                         + ",".join(tp_name(tp) for tp in duplicates))
    if not out:
        raise AdminError("The election file lists no partitions.")
    return out


def all_partitions(zk: KafkaZkClient) -> list[TopicPartition]:
    """Every partition of every topic not marked for deletion."""
    deleting = set(zk.get_topic_deletions())
    out = []
    for topic in zk.get_all_topics():
        if topic in deleting:
            continue
        a = zk.get_topic_assignment(topic)
        if a is not None:
            out.extend((topic, p) for p in sorted(a.partitions))
    return out


def all_partitions_admin(admin: AdminClient) -> list[TopicPartition]:
    """Every partition of every topic the brokers know."""
    md = admin.topics()
    return [(t, p) for t in sorted(md.topics) for p in sorted(md.topics[t].partitions)]


def _pick(topic: str, partitions, partition: int | None) -> list[TopicPartition]:
    if partition is None:
        return [(topic, p) for p in sorted(partitions)]
    if partition not in partitions:
        raise UnknownTopicError(f"Partition {tp_name((topic, partition))} does not exist "
                                f"(topic '{topic}' has {len(partitions)} partition(s)).")
    return [(topic, partition)]


def topic_partitions(zk: KafkaZkClient, topic: str, partition: int | None = None) -> list[TopicPartition]:
    a = zk.get_topic_assignment(topic)
    if a is None:
        raise UnknownTopicError(f"Topic '{topic}' does not exist.")
    return _pick(topic, a.partitions, partition)


def topic_partitions_admin(admin: AdminClient, topic: str, partition: int | None = None) -> list[TopicPartition]:
    md = admin.metadata([topic])
    if topic not in md.topics:
        raise UnknownTopicError(f"Topic '{topic}' does not exist.")
    return _pick(topic, md.topics[topic].partitions, partition)


@dataclass
class ElectionResult:
    """JSON: {"election_type": "preferred" | "unclean", "elected": [{"topic", "partition"}], "not_needed": [...],
    "failed": [{"topic", "partition", "error": Kafka's error name, "message"}]}."""
    elected: list[TopicPartition] = field(default_factory=list)  # the wanted replica leads now
    not_needed: list[TopicPartition] = field(default_factory=list)  # it already led before
    failed: dict[TopicPartition, tuple[str, str]] = field(default_factory=dict)   # (error name, reason)
    election_type: str = "preferred"

    def lines(self) -> list[str]:
        """kafka-leader-election.sh's report."""
        kind = self.election_type.upper()
        out = []
        if self.elected:
            out.append(f"Successfully completed leader election ({kind}) for partitions "
                       + ", ".join(tp_name(tp) for tp in self.elected))
        if self.not_needed:
            out.append("Valid replica already elected for partitions "
                       + ", ".join(tp_name(tp) for tp in self.not_needed))
        for tp, (_, reason) in self.failed.items():
            out.append(f"Error completing leader election ({kind}) for partition: {tp_name(tp)}: {reason}")
        return out

    def render(self, out: Output) -> None:
        if not (self.elected or self.not_needed or self.failed):
            out.line("There are no partitions to elect leaders for.")
        for line in self.lines():
            out.line(line)

    def to_json(self) -> dict:
        def tps(xs):
            return [{"topic": t, "partition": p} for t, p in xs]
        return {"election_type": self.election_type, "elected": tps(self.elected),
                "not_needed": tps(self.not_needed),
                "failed": [{"topic": t, "partition": p, "error": e, "message": m}
                           for (t, p), (e, m) in self.failed.items()]}


def elect_admin(admin: AdminClient, election_type: int, partitions: list[TopicPartition]) -> ElectionResult:
    """ElectLeaders for partitions (all must exist), reported per partition in the order given."""
    result = ElectionResult(election_type="preferred" if election_type == PREFERRED else "unclean")
    if not partitions:
        return result
    answers = admin.elect_leaders(election_type, partitions)
    for tp in partitions:
        code, message = answers.get(tp, (-1, "The controller did not answer for this partition."))
        if code == 0:
            result.elected.append(tp)
        elif code == ELECTION_NOT_NEEDED:
            result.not_needed.append(tp)
        else:
            result.failed[tp] = (error_name(code), message or error_name(code))
    return result


class ElectionTimeout(WaitTimedOut):
    pass


def _leaders(zk: KafkaZkClient, partitions) -> dict[TopicPartition, z.LeaderAndIsr | None]:
    return {tp: zk.get_partition_state(*tp) for tp in partitions}


def _preferred(zk: KafkaZkClient, partitions) -> dict[TopicPartition, int | None]:
    cache, out = {}, {}
    for topic, p in partitions:
        if topic not in cache:
            cache[topic] = zk.get_topic_assignment(topic)
        a = cache[topic]
        replicas = a.partitions.get(p) if a is not None else None
        out[(topic, p)] = replicas[0] if replicas else None
    return out


def elect_preferred(zk: KafkaZkClient, partitions: list[TopicPartition], timeout: float,
                    poll_interval: float = 0.1, waiting=nullcontext) -> ElectionResult:
    """Write the election znode for partitions (all must exist), wait (inside the context waiting()) until the
    controller deleted it, and report per partition. ElectionTimeout if it is still there after timeout seconds
    (it is left for the controller)."""
    before = _leaders(zk, partitions)
    preferred = _preferred(zk, partitions)
    try:
        zk.create_recursive(z.PreferredReplicaElectionZNode.path, z.PreferredReplicaElectionZNode.encode(partitions))
    except ZkNodeExists:
        data, _ = zk.get(z.PreferredReplicaElectionZNode.path)
        pending = sorted(z.PreferredReplicaElectionZNode.decode(data)) if data else []
        raise AdminError("Preferred replica leader election currently in progress for "
                         f"{','.join(tp_name(tp) for tp in pending) or '(unreadable znode)'}. "
                         "Aborting operation") from None
    deadline = time.monotonic() + timeout
    with waiting():
        while zk.exists(z.PreferredReplicaElectionZNode.path) is not None:
            if time.monotonic() >= deadline:
                raise ElectionTimeout(f"Timed out after {timeout:g}s waiting for the controller to process "
                                      f"{z.PreferredReplicaElectionZNode.path} (is a controller running?); the "
                                      "znode is left for the controller")
            time.sleep(poll_interval)
    after = _leaders(zk, partitions)
    registered = set(zk.get_broker_ids())
    deleting = set(zk.get_topic_deletions())
    result = ElectionResult()
    for tp in partitions:
        want, old, new = preferred[tp], before[tp], after[tp]
        if tp[0] in deleting:   # the controller skips them, as the ElectLeaders API answers
            result.failed[tp] = (error_name(17), "The topic is being deleted")
        elif new is None or want is None:
            result.failed[tp] = (NOT_AVAILABLE, "The partition has no leader and ISR state yet (the controller "
                                                "has not initialised it).")
        elif new.leader == want:
            (result.not_needed if old is not None and old.leader == want else result.elected).append(tp)
        elif want not in registered:
            result.failed[tp] = (NOT_AVAILABLE, f"Preferred replica {want} is not alive (leader stays "
                                                f"{_leader(new.leader)}).")
        elif want not in new.isr:
            result.failed[tp] = (NOT_AVAILABLE, f"Preferred replica {want} is not in the ISR "
                                                f"[{','.join(map(str, new.isr))}] (leader stays "
                                                f"{_leader(new.leader)}).")
        else:
            result.failed[tp] = (NOT_AVAILABLE, f"The controller did not elect preferred replica {want} "
                                                f"(leader is {_leader(new.leader)}); it may not have taken in the "
                                                "latest ISR change yet (leaders report those in batches), so try "
                                                "again.")
    return result


def _leader(leader: int) -> str:
    return "none" if leader < 0 else str(leader)


# ---- commands (click) -----------------------------------------------------------------------------------------

@click.command("elect-leaders")
@click.option("--preferred", is_flag=True, help="Elect each partition's preferred (first assigned) replica.")
@click.option("--unclean", is_flag=True,
              help="Elect any live replica, even out of the ISR, where there is no leader (--bootstrap-server "
                   "only: the ElectLeaders API).")
@click.option("--election-type", type=click.Choice(["preferred", "unclean"], case_sensitive=False),
              help="As kafka-leader-election.sh: the same as --preferred or --unclean.")
@click.option("--topic", metavar="TOPIC", help="The partitions of this topic (all of them, or --partition).")
@click.option("--partition", type=click.IntRange(min=0), metavar="P", help="Only this partition of --topic.")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
@click.option("--path-to-json-file", "json_file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help='The partitions: {"partitions":[{"topic":"t","partition":0}]}.')
@wait_timeout_option(60.0, "the controller")
@click.pass_context
def elect_leaders(ctx, preferred, unclean, election_type, topic, partition, all_topic_partitions, json_file,
                  timeout):
    """Elect partition leaders (kafka-leader-election.sh): move leadership back to preferred replicas, or
    (unclean) give leaderless partitions any live replica.

    With --zookeeper, writes /admin/preferred_replica_election and waits until the controller has processed it;
    with --bootstrap-server, sends ElectLeaders to the controller. Reports per partition; exit 1 if any could
    not be elected. JSON: {"election_type", "elected": [{"topic", "partition"}], "not_needed": [...],
    "failed": [{"topic", "partition", "error", "message"}]}.
    """
    kinds = {k for k, on in (("preferred", preferred), ("unclean", unclean)) if on}
    if election_type:
        kinds.add(election_type.lower())
    if len(kinds) != 1:
        raise click.UsageError("Give exactly one election type: --preferred or --unclean.")
    if kinds == {"unclean"} and not settings(ctx).bootstrap_server:
        raise click.UsageError("Unclean leader election is only possible through the Admin API (ElectLeaders): "
                               "give --bootstrap-server instead of --zookeeper.")
    if sum(bool(x) for x in (topic, all_topic_partitions, json_file)) != 1:
        raise click.UsageError("One and only one of the following options is required: --all-topic-partitions, "
                               "--topic, --path-to-json-file")
    if partition is not None and not topic:
        raise click.UsageError("--partition needs --topic.")
    requested = parse_election_file(read_text(json_file)) if json_file else None
    with source(ctx, timeout) as src:
        unknown = []
        if all_topic_partitions:
            partitions = src.call(all_partitions, all_partitions_admin)
        elif topic:
            partitions = src.call(topic_partitions, topic_partitions_admin, topic, partition)
        else:
            existing = set(src.call(current_assignment, current_assignment_admin, requested))
            partitions = [tp for tp in requested if tp in existing]
            unknown = [tp for tp in requested if tp not in existing]
            if not partitions:
                raise AdminError("None of the partitions in the election file exists: "
                                 + ",".join(tp_name(tp) for tp in unknown))
        if partitions:
            def waiting():
                return progress(f"Waiting for the controller to elect the leaders of {len(partitions)} "
                                "partition(s)")
            if src.zk is not None:
                result = elect_preferred(src.zk, partitions, timeout, waiting=waiting)
            else:
                with waiting():
                    result = elect_admin(src.admin, UNCLEAN if kinds == {"unclean"} else PREFERRED, partitions)
        else:
            result = ElectionResult(election_type=kinds.pop())
    for tp in unknown:
        result.failed[tp] = (NO_PARTITION, "This partition does not exist.")
    output(ctx).emit(result)
    if result.failed:
        raise Failure(f"{len(result.failed)} replica(s) could not be elected")
