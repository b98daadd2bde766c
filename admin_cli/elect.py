"""Preferred leader election over ZooKeeper, as Kafka 2.8's `kafka-preferred-replica-election.sh --zookeeper`
writes it, reported as `kafka-leader-election.sh` reports it.

kadmin creates /admin/preferred_replica_election = {"version":1,"partitions":[{"topic":T,"partition":P},...]}
(refused while one exists), waits until the controller has deleted it (it elects first, then deletes), and
then reads the partition state znodes: a partition whose preferred replica (the first assigned replica) leads
now was elected, one it already led before needed no election, any other failed (the preferred replica is
not alive or not in the ISR). Unclean election exists only as the ElectLeaders Admin API.

Plain functions taking a started KafkaZkClient, so tests can call them without the CLI.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from kazoo.exceptions import NodeExistsError

from zk import znodes as z
from zk.admin_errors import AdminError
from zk.client import KafkaZkClient

from .reassign import TopicPartition, _is_int, tp_name


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


def topic_partitions(zk: KafkaZkClient, topic: str, partition: int | None = None) -> list[TopicPartition]:
    a = zk.get_topic_assignment(topic)
    if a is None:
        raise AdminError(f"Topic '{topic}' does not exist.")
    if partition is None:
        return [(topic, p) for p in sorted(a.partitions)]
    if partition not in a.partitions:
        raise AdminError(f"Partition {tp_name((topic, partition))} does not exist "
                         f"(topic '{topic}' has {len(a.partitions)} partition(s)).")
    return [(topic, partition)]


@dataclass
class ElectionResult:
    elected: list[TopicPartition] = field(default_factory=list)  # the preferred replica leads now
    not_needed: list[TopicPartition] = field(default_factory=list)  # it already led before
    failed: dict[TopicPartition, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """kafka-leader-election.sh's report."""
        out = []
        if self.elected:
            out.append("Successfully completed leader election (PREFERRED) for partitions "
                       + ", ".join(tp_name(tp) for tp in self.elected))
        if self.not_needed:
            out.append("Valid replica already elected for partitions "
                       + ", ".join(tp_name(tp) for tp in self.not_needed))
        for tp, reason in self.failed.items():
            out.append(f"Error completing leader election (PREFERRED) for partition: {tp_name(tp)}: {reason}")
        return out


class ElectionTimeout(AdminError):
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
                    poll_interval: float = 0.1) -> ElectionResult:
    """Write the election znode for partitions (all must exist), wait until the controller deleted it, and
    report per partition. ElectionTimeout if it is still there after timeout seconds (it is left for the
    controller)."""
    before = _leaders(zk, partitions)
    preferred = _preferred(zk, partitions)
    try:
        zk.create_recursive(z.PreferredReplicaElectionZNode.path, z.PreferredReplicaElectionZNode.encode(partitions))
    except NodeExistsError:
        data, _ = zk.get(z.PreferredReplicaElectionZNode.path)
        pending = sorted(z.PreferredReplicaElectionZNode.decode(data)) if data else []
        raise AdminError("Preferred replica leader election currently in progress for "
                         f"{','.join(tp_name(tp) for tp in pending) or '(unreadable znode)'}. "
                         "Aborting operation") from None
    deadline = time.monotonic() + timeout
    while zk.exists(z.PreferredReplicaElectionZNode.path) is not None:
        if time.monotonic() >= deadline:
            raise ElectionTimeout(f"Timed out after {timeout:g}s waiting for the controller to process "
                                  f"{z.PreferredReplicaElectionZNode.path} (is a controller running?); the znode "
                                  "is left for the controller")
        time.sleep(poll_interval)
    after = _leaders(zk, partitions)
    registered = set(zk.get_broker_ids())
    result = ElectionResult()
    for tp in partitions:
        want, old, new = preferred[tp], before[tp], after[tp]
        if new is None or want is None:
            result.failed[tp] = "The partition has no leader and ISR state yet (the controller has not " \
                                "initialised it)."
        elif new.leader == want:
            (result.not_needed if old is not None and old.leader == want else result.elected).append(tp)
        elif want not in registered:
            result.failed[tp] = f"Preferred replica {want} is not alive (leader stays {_leader(new.leader)})."
        elif want not in new.isr:
            result.failed[tp] = (f"Preferred replica {want} is not in the ISR [{','.join(map(str, new.isr))}] "
                                 f"(leader stays {_leader(new.leader)}).")
        else:
            result.failed[tp] = (f"The controller did not elect preferred replica {want} "
                                 f"(leader is {_leader(new.leader)}); it may not have taken in the latest ISR "
                                 "change yet (leaders report those in batches), so try again.")
    return result


def _leader(leader: int) -> str:
    return "none" if leader < 0 else str(leader)
