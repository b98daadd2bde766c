"""Topic commands (kafka-topics.sh): create, list, describe, delete, through ZooKeeper or the Admin APIs.

Each command builds one result object (a dataclass with render() for people and to_json() for --output json)
from either source, so both show the same thing for the same cluster state:

- ZooKeeper (`*_zk`, taking a started KafkaZkClient), as Kafka 2.8's `kafka-topics.sh --zookeeper` does it:
  creation is zk.admin's (shared with the broker), deletion only writes the /admin/delete_topics/<T> marker
  for the controller, descriptions read the topic, partition state and config znodes.
- the Admin APIs (`*_admin`, taking an AdminClient): CreateTopics / DeleteTopics to the controller, Metadata,
  DescribeConfigs (the DYNAMIC_TOPIC_CONFIG entries are the topic's overrides) and ListPartitionReassignments
  (the adding/removing replicas) for descriptions.

What only one source can see: ZooKeeper shows topics marked for deletion (the brokers forget them at once) and
partitions the controller has not initialised yet; through the brokers a partition whose leader is not alive
has no leader (ZooKeeper still names the dead one, marked offline).

Racks: kafka-topics.sh --describe shows none. describe-topic adds, as kadmin's own extra, each replica's broker.rack
(from the registrations in /brokers/ids, or the brokers Metadata lists): a last column Racks (rack of each replica
in replica order, 'none' for a broker without a rack or not alive) only when some replica's broker has a rack, so
scripts parsing the columns of a cluster without racks see no change, and "replica_racks" in every JSON partition.

The click commands `create-topic`, `list-topics`, `describe-topic` and `delete-topic` close the module:
they check the options, take the source the global options chose (admin_cli.context) and wait where asked.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import click

from zk import admin as zk_admin
from zk.assignment import parse_replica_assignment
from zk.client import KafkaZkClient
from kbroker.common.admin_errors import AdminError, InvalidTopicError, UnknownTopicError
from kbroker.common.internal_topics import INTERNAL_TOPICS

from .context import output, settings, source, wait_for, wait_timeout_option
from .kafka_client import TOPIC_RESOURCE, UNKNOWN_TOPIC_OR_PARTITION, AdminClient
from .output import Output, table


# ---- list ------------------------------------------------------------------------------------------------------

@dataclass
class TopicList:
    """JSON: {"topics": [{"name": "orders", "marked_for_deletion": false}, ...]} sorted by name."""
    topics: list[tuple[str, bool]]      # (name, marked for deletion)

    def render(self, out: Output) -> None:
        for name, marked in self.topics:
            out.line(f"{name} - marked for deletion" if marked else name)

    def to_json(self) -> dict:
        return {"topics": [{"name": n, "marked_for_deletion": m} for n, m in self.topics]}


def list_topics_zk(zk: KafkaZkClient) -> TopicList:
    marked = set(zk.get_topic_deletions())
    return TopicList([(t, t in marked) for t in zk.get_all_topics()])


def list_topics_admin(admin: AdminClient) -> TopicList:
    return TopicList([(t, False) for t in sorted(admin.topics().topics)])


# ---- describe --------------------------------------------------------------------------------------------------

@dataclass
class PartitionDescription:
    partition: int
    leader: int | None  # None: no state znode yet, or no leader
    replicas: list[int]
    isr: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    has_state: bool = True  # False until the controller created the partition's state znode
    leader_registered: bool = True  # the leader is a broker registered in /brokers/ids
    replica_racks: list[str | None] = field(default_factory=list)   # each replica's rack (None: none or not alive)

    @property
    def under_replicated(self) -> bool:
        """kafka-topics.sh's test: fewer in-sync replicas than the replication factor (the replicas not
        counting ones a reassignment is removing)."""
        return len(self.replicas) - len(self.removing) > len(self.isr)

    @property
    def unavailable(self) -> bool:
        """kafka-topics.sh's test: no leader, or a leader that is not a registered (live) broker."""
        return self.leader is None or not self.leader_registered

    @property
    def status(self) -> str:
        """The mark of the describe table: 'offline', 'under-replicated' or ''. Partitions the controller has
        not initialised yet (no state znode) show Leader none and no mark."""
        if not self.has_state:
            return ""
        if self.unavailable:
            return "offline"
        return "under-replicated" if self.under_replicated else ""

    def to_json(self) -> dict:
        return {"partition": self.partition, "leader": self.leader, "replicas": self.replicas, "isr": self.isr,
                "adding": self.adding, "removing": self.removing, "status": self.status or None,
                "replica_racks": self.replica_racks}


@dataclass
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: list[PartitionDescription]
    config: dict[str, str]
    marked_for_deletion: bool

    @property
    def replication_factor(self) -> int:
        """As Kafka reports it: the replicas of the first partition, not counting ones being removed."""
        if not self.partitions:
            return 0
        first = self.partitions[0]
        return len(first.replicas) - len(first.removing)

    def header(self) -> str:
        """kafka-topics.sh --describe's header line."""
        configs = ",".join(f"{k}={v}" for k, v in sorted(self.config.items()))
        header = (f"Topic: {self.name}\tTopicId: {self.topic_id or 'none'}\tPartitionCount: {len(self.partitions)}\t"
                  f"ReplicationFactor: {self.replication_factor}\tConfigs: {configs}")
        if self.marked_for_deletion:
            header += "\tMarkedForDeletion: true"
        return header.rstrip()

    def to_json(self, partitions: list[PartitionDescription] | None = None) -> dict:
        return {"name": self.name, "topic_id": self.topic_id, "partition_count": len(self.partitions),
                "replication_factor": self.replication_factor, "config": dict(sorted(self.config.items())),
                "marked_for_deletion": self.marked_for_deletion,
                "partitions": [p.to_json() for p in (self.partitions if partitions is None else partitions)]}


FILTERS = {"under-replicated": lambda p: p.under_replicated, "unavailable": lambda p: p.unavailable}


@dataclass
class TopicDescriptions:
    """describe-topic's result. JSON: {"topics": [{"name", "topic_id", "partition_count", "replication_factor",
    "config": {overrides}, "marked_for_deletion", "partitions": [{"partition", "leader", "replicas", "isr",
    "adding", "removing", "status": null | "offline" | "under-replicated", "replica_racks": [rack or null, one per
    replica]}]}]}; with a filter only the matching partitions, and only topics that have some."""
    topics: list[TopicDescription]
    only: str | None = None             # a FILTERS key

    def _selected(self):
        keep = FILTERS[self.only] if self.only else (lambda p: True)
        for d in self.topics:
            parts = [p for p in d.partitions if keep(p)]
            if parts or not self.only:
                yield d, parts

    def render(self, out: Output) -> None:
        """kafka-topics.sh --describe: per topic its header line, then one row per partition (Adding/Removing
        columns while a partition is reassigned, Status when one is offline or under-replicated, Racks last when
        brokers have racks). With a
        filter: one table of the matching partitions with their topic, no headers, nothing when none match."""
        if self.only:
            rows = [(d.name, p) for d, parts in self._selected() for p in parts]
            if rows:
                out.print(_partition_table(rows, with_topic=True, with_status=False))
            return
        for d, _ in self._selected():
            out.line(d.header())
            out.print(_partition_table([(d.name, p) for p in d.partitions], with_topic=False, with_status=True,
                                       indent=2))

    def to_json(self) -> dict:
        return {"topics": [d.to_json(parts) for d, parts in self._selected()]}


def _ids(xs) -> str:
    return ",".join(map(str, xs))


def _partition_table(rows, with_topic: bool, with_status: bool, indent: int = 0):
    reassigning = any(p.adding or p.removing for _, p in rows)
    marked = with_status and any(p.status for _, p in rows)
    racked = any(any(p.replica_racks) for _, p in rows)
    columns = (["Topic"] if with_topic else []) + ["Partition", "Leader", "Replicas", "Isr"] \
        + (["Adding", "Removing"] if reassigning else []) + (["Status"] if marked else []) \
        + (["Racks"] if racked else [])
    out = []
    for topic, p in rows:
        row = ([topic] if with_topic else []) + [p.partition, p.leader, _ids(p.replicas), _ids(p.isr)]
        row += [_ids(p.adding), _ids(p.removing)] if reassigning else []
        row += [p.status] if marked else []
        row += [",".join(r or "none" for r in p.replica_racks)] if racked else []
        out.append(row)
    return table(columns, out, indent=indent)


def describe_topic_zk(zk: KafkaZkClient, name: str, racks: dict[int, str | None] | None = None
                      ) -> TopicDescription:
    """Topic NAME from its znodes; racks = the brokers registered in /brokers/ids, id -> rack (read if not given)."""
    assignment = zk.get_topic_assignment(name)
    if assignment is None:
        raise UnknownTopicError(f"Topic '{name}' does not exist.")
    if racks is None:
        racks = _registered_racks(zk)
    partitions = []
    for p, replicas in sorted(assignment.partitions.items()):
        state = zk.get_partition_state(name, p)
        leader = state.leader if state is not None and state.leader >= 0 else None
        partitions.append(PartitionDescription(p, leader, replicas, state.isr if state else [],
                                               assignment.adding_replicas.get(p, []),
                                               assignment.removing_replicas.get(p, []),
                                               has_state=state is not None,
                                               leader_registered=leader in racks,
                                               replica_racks=[racks.get(b) for b in replicas]))
    return TopicDescription(name, assignment.topic_id, partitions, zk.get_entity_config("topics", name),
                            name in zk.get_topic_deletions())


def _registered_racks(zk: KafkaZkClient) -> dict[int, str | None]:
    """The brokers registered in /brokers/ids: id -> its broker.rack (None without one)."""
    return {broker_id: info.rack for broker_id, info in zk.get_all_brokers().items()}


def describe_topics_zk(zk: KafkaZkClient, name: str | None = None, only: str | None = None) -> TopicDescriptions:
    """Topic NAME, or every topic (sorted by name) when NAME is None; topics deleted meanwhile are skipped."""
    racks = _registered_racks(zk)
    if name is not None:
        return TopicDescriptions([describe_topic_zk(zk, name, racks)], only)
    out = []
    for topic in zk.get_all_topics():
        try:
            out.append(describe_topic_zk(zk, topic, racks))
        except AdminError:
            pass
    return TopicDescriptions(out, only)


def describe_topics_admin(admin: AdminClient, name: str | None = None, only: str | None = None
                          ) -> TopicDescriptions:
    """Topic NAME, or every topic, from Metadata, DescribeConfigs and ListPartitionReassignments."""
    md = admin.topics(None if name is None else [name])
    names = [name] if name is not None else sorted(md.topics)
    configs = admin.describe_configs([(TOPIC_RESOURCE, n) for n in names], missing_ok=name is None)
    moving = admin.list_reassignments() if names else {}
    out = []
    for n in names:
        if (TOPIC_RESOURCE, n) not in configs:        # deleted meanwhile
            continue
        info = md.topics[n]
        partitions = []
        for p, part in sorted(info.partitions.items()):
            _, adding, removing = moving.get((n, p), (None, [], []))
            partitions.append(PartitionDescription(p, part.leader if part.leader >= 0 else None, part.replicas,
                                                   part.isr, adding, removing,
                                                   replica_racks=[md.brokers[b].rack if b in md.brokers else None
                                                                  for b in part.replicas]))
        overrides = {e.name: e.value for e in configs[(TOPIC_RESOURCE, n)] if e.source == "DYNAMIC_TOPIC_CONFIG"}
        out.append(TopicDescription(n, info.topic_id, partitions, overrides, False))
    return TopicDescriptions(out, only)


# ---- create ----------------------------------------------------------------------------------------------------

@dataclass
class TopicCreated:
    """JSON: {"topic", "partitions", "replication_factor", "config": {overrides given}}."""
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str]

    def render(self, out: Output) -> None:
        out.line(f"Created topic {self.name}.")

    def to_json(self) -> dict:
        return {"topic": self.name, "partitions": self.partitions, "replication_factor": self.replication_factor,
                "config": dict(sorted(self.config.items()))}


def create_topic_zk(zk: KafkaZkClient, name: str, partitions: int | None, replication_factor: int | None,
                    assignment: dict[int, list[int]] | None, config: dict[str, str]) -> TopicCreated:
    """AdminZkClient.createTopic / createTopicWithAssignment: validate, then the config and topic znodes."""
    written = zk_admin.AdminZkClient(zk).create_topic(name, config, assignment=assignment, partitions=partitions,
                                                      replication_factor=replication_factor)
    return TopicCreated(name, len(written), len(written[0]), config)


def create_topic_admin(admin: AdminClient, name: str, partitions: int | None, replication_factor: int | None,
                       assignment: dict[int, list[int]] | None, config: dict[str, str]) -> TopicCreated:
    """CreateTopics to the controller (which validates exactly as the ZooKeeper path does)."""
    count, rf = admin.create_topic(name, partitions, replication_factor, assignment, config)
    return TopicCreated(name, count, rf, config)


def leaders_zk(zk: KafkaZkClient, name: str) -> tuple[int, int]:
    """(partitions with a live leader in their state znode, partitions) of topic NAME."""
    assignment = zk.get_topic_assignment(name)
    if assignment is None:
        return 0, 0
    registered = set(zk.get_broker_ids())
    states = [zk.get_partition_state(name, p) for p in assignment.partitions]
    return sum(1 for s in states if s is not None and s.leader in registered), len(states)


def leaders_admin(admin: AdminClient, name: str) -> tuple[int, int]:
    """(partitions with a leader, partitions) of topic NAME in the brokers' metadata ((0, 0) while unknown)."""
    md = admin.metadata([name])
    info = md.topics.get(name)
    if info is None:
        return 0, 0
    return sum(1 for p in info.partitions.values() if p.leader >= 0), len(info.partitions)


# ---- delete ----------------------------------------------------------------------------------------------------

@dataclass
class TopicDeleted:
    """JSON: {"topic", "marked_for_deletion": true, "deleted": true once gone (with --wait), else false}."""
    name: str
    deleted: bool = False

    def render(self, out: Output) -> None:
        out.line(f"Topic {self.name} is marked for deletion.")
        if self.deleted:
            out.line(f"Topic {self.name} is deleted.")

    def to_json(self) -> dict:
        return {"topic": self.name, "marked_for_deletion": True, "deleted": self.deleted}


def check_deletable(name: str) -> None:
    """kadmin refuses Kafka's internal topics in both modes (kafka-topics.sh --zookeeper does; the Admin API
    would let them go)."""
    if name in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Topic {name} is a Kafka internal topic and is not allowed to be marked for "
                                "deletion.")


def delete_topic_zk(zk: KafkaZkClient, name: str) -> TopicDeleted:
    """Write the /admin/delete_topics/<T> marker (AdminZkClient.deleteTopic); the controller deletes."""
    check_deletable(name)
    zk_admin.AdminZkClient(zk).delete_topic(name)
    return TopicDeleted(name)


def delete_topic_admin(admin: AdminClient, name: str) -> TopicDeleted:
    """DeleteTopics to the controller."""
    check_deletable(name)
    admin.delete_topic(name)
    return TopicDeleted(name)


def gone_zk(zk: KafkaZkClient, name: str) -> bool:
    """The controller has deleted the topic's znodes."""
    return not zk.topic_exists(name)


def gone_admin(admin: AdminClient, name: str) -> bool:
    """The brokers no longer know the topic, and the controller has removed its znodes (it would create the
    name again: what ZooKeeper shows as the topic gone)."""
    md = admin.metadata([name])
    if name in md.topics or md.topic_errors.get(name) != UNKNOWN_TOPIC_OR_PARTITION:
        return False
    return not admin.name_taken(name)


# ---- commands (click) -----------------------------------------------------------------------------------------

def parse_config_args(pairs) -> dict[str, str]:
    """['retention.ms=1000', ...] -> {'retention.ms': '1000'}; later settings of a name win.
    Raises ValueError for an item that is not exactly one key=value."""
    config = {}
    for pair in pairs:
        parts = re.split(r"\s*=\s*", pair.strip())
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"'{pair}' is not in the form key=value")
        config[parts[0]] = parts[1]
    return config


def _config_option(f):
    return click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
                        help="A topic config override (repeatable), e.g. retention.ms=86400000.")(f)


@click.command("create-topic")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(min=1),
              help="Number of partitions (through --bootstrap-server: num.partitions when omitted).")
@click.option("--replication-factor", type=click.IntRange(1, 32767),
              help="Replicas per partition (through --bootstrap-server: default.replication.factor when omitted).")
@click.option("--replica-assignment", metavar="B:B,B:B,...",
              help="Explicit replicas: partitions separated by ',', broker ids by ':' (first = preferred "
                   "leader). Replaces --partitions and --replication-factor.")
@_config_option
@click.option("--wait", is_flag=True, help="Return only once every partition has a leader.")
@wait_timeout_option(30.0, "the leaders (with --wait)")
@click.pass_context
def create_topic(ctx, name, partitions, replication_factor, replica_assignment, configs, wait, timeout):
    """Create topic NAME (kafka-topics.sh --create).

    Nothing is written if the name, the configs, the partition count, the replication factor (at most the live
    brokers) or the assignment is refused. JSON: {"topic", "partitions", "replication_factor", "config"}.
    """
    try:
        config = parse_config_args(configs)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    assignment = None
    if replica_assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise click.UsageError("--replica-assignment cannot be combined with --partitions or "
                                   "--replication-factor.")
        try:
            assignment = parse_replica_assignment(replica_assignment)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--replica-assignment") from None
    elif (partitions is None or replication_factor is None) and not settings(ctx).bootstrap_server:
        raise click.UsageError("--partitions and --replication-factor are required with --zookeeper (unless "
                               "--replica-assignment is given); through --bootstrap-server they default to the "
                               "brokers' num.partitions and default.replication.factor.")
    if zk_admin.has_collision_chars(name):
        click.echo("WARNING: topics with a period ('.') or underscore ('_') could collide in metric names. "
                   "To avoid issues it is best to use either, but not both.", err=True)
    with source(ctx) as src:
        result = src.call(create_topic_zk, create_topic_admin, name, partitions, replication_factor, assignment,
                          config)
        if wait:
            def poll():
                done, total = src.call(leaders_zk, leaders_admin, name)
                return done, total > 0 and done == total
            wait_for(poll, f"Waiting for the leaders of topic {name}", timeout,
                     lambda done: f"the leaders of topic '{name}' (created; {done} of {result.partitions} "
                                  "partition(s) have one).", result.partitions)
    output(ctx).emit(result)


@click.command("list-topics")
@click.pass_context
def list_topics(ctx):
    """List topics, one per line (kafka-topics.sh --list). JSON: {"topics": [{"name", "marked_for_deletion"}]}."""
    with source(ctx) as src:
        result = src.call(list_topics_zk, list_topics_admin)
    output(ctx).emit(result)


@click.command("describe-topic")
@click.argument("name", required=False)
@click.option("--under-replicated-partitions", "under_replicated", is_flag=True,
              help="Only partitions with fewer in-sync replicas than replicas (kafka-topics.sh's option).")
@click.option("--unavailable-partitions", "unavailable", is_flag=True,
              help="Only partitions without a leader or whose leader is not a live broker.")
@click.pass_context
def describe_topic(ctx, name, under_replicated, unavailable):
    """Show topic NAME's partitions, leaders, replicas and ISR (kafka-topics.sh --describe); every topic when
    NAME is omitted.

    Rows of offline and under-replicated partitions are marked in a Status column, and Adding/Removing
    columns appear while a partition is being reassigned. With --under-replicated-partitions or
    --unavailable-partitions only the matching partitions are printed, one row each with its topic and no
    topic header, and nothing at all when none matches (as kafka-topics.sh). When brokers have racks (broker.rack),
    a last column Racks (kadmin's own; kafka-topics.sh has none) gives each replica's rack in replica order.

    JSON: {"topics": [{"name", "topic_id", "partition_count", "replication_factor", "config",
    "marked_for_deletion", "partitions": [{"partition", "leader", "replicas", "isr", "adding", "removing",
    "status", "replica_racks"}]}]}.
    """
    if under_replicated and unavailable:
        raise click.UsageError("--under-replicated-partitions and --unavailable-partitions cannot be combined.")
    only = "under-replicated" if under_replicated else "unavailable" if unavailable else None
    with source(ctx) as src:
        result = src.call(describe_topics_zk, describe_topics_admin, name, only)
    output(ctx).emit(result)


@click.command("delete-topic")
@click.argument("name")
@click.option("--wait", is_flag=True, help="Return only once the controller has deleted the topic.")
@wait_timeout_option(60.0, "the deletion (with --wait)")
@click.pass_context
def delete_topic(ctx, name, wait, timeout):
    """Mark topic NAME for deletion; the controller deletes it (kafka-topics.sh --delete).

    JSON: {"topic", "marked_for_deletion": true, "deleted": true only after --wait}.
    """
    with source(ctx) as src:
        result = src.call(delete_topic_zk, delete_topic_admin, name)
        if src.zk is not None and not wait:
            click.echo("Note: This will have no impact if delete.topic.enable is not set to true.", err=True)
        if wait:
            wait_for(lambda: (0, src.call(gone_zk, gone_admin, name)),
                     f"Waiting for the controller to delete topic {name}", timeout,
                     lambda _: f"the controller to delete topic '{name}' (it is marked for deletion; is "
                               "delete.topic.enable true?).")
            result.deleted = True
    output(ctx).emit(result)
