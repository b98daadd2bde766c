"""`kadmin groups ...`: consumer groups through the Kafka protocol, as Kafka 2.8's kafka-consumer-groups.sh.

Groups live in the brokers (the group coordinators and `__consumer_offsets`), not in ZooKeeper, so every
command talks to the cluster with the Admin APIs: ListGroups (every broker), FindCoordinator, DescribeGroups,
OffsetFetch, OffsetCommit (a simple commit, generation -1, as AdminClient.alterConsumerGroupOffsets),
DeleteGroups, ListOffsets (on each partition's leader) and Metadata.

The output is ConsumerGroupCommand's (2.8): the same columns and messages (as kadmin's rich tables, each
after a blank line as Kafka prints them), or JSON with --output json (see each result class); its notices ("has
no active members", "is rebalancing", warnings) go to stderr as Kafka's do, and its errors are kadmin's one-line
"Error: ..." on stderr with exit status 1.

The click group `groups` (list, describe, reset-offsets, delete) closes the module; with --zookeeper alone
it bootstraps from the brokers registered in /brokers/ids (admin_cli.context.admin_client).
"""
from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass

import click

from kbroker.protocol.client import (EARLIEST, LATEST, Errors, KafkaError, TimedOut, TopicPartition, Unreachable,
                                     error_name, error_text)

from .context import admin_client, output, print_error, timeout_option
from .errors import EXIT_REFUSED
from .kafka_client import UNKNOWN_OFFSET, AdminClient, GroupDescription, by_topic
from .output import Output, table

MISSING = "-"
CONSUMER_PROTOCOL_TYPES = ("consumer", "")   # what AdminClient.listConsumerGroups / describeConsumerGroups accept
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


def _tp_key(tp: TopicPartition):
    return tp.topic, tp.partition


# ---- list -----------------------------------------------------------------------------------------------------

def parse_states(text: str) -> set[str]:
    """'stable,Empty' -> {'Stable', 'Empty'} (case-insensitive, as ConsumerGroupState.parse); ValueError naming
    the valid states otherwise."""
    by_lower = {s.lower(): s for s in STATES}
    out = set()
    for item in text.split(","):
        state = by_lower.get(item.strip().lower())
        if state is None:
            raise ValueError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
        out.add(state)
    return out


def list_consumer_groups(admin: AdminClient) -> list[tuple[str, str | None]]:
    """(group id, state) of every consumer group (protocol type 'consumer', or '' for groups that only commit
    offsets), sorted by id."""
    return [(g, state) for g, ptype, state in admin.list_groups() if ptype in CONSUMER_PROTOCOL_TYPES]


@dataclass
class GroupList:
    """groups list. JSON: {"groups": [{"group", "state"}]} (state null unless asked for with --state)."""
    groups: list[tuple[str, str | None]]
    with_state: bool

    def render(self, out: Output) -> None:
        if not self.with_state:
            for g, _ in self.groups:
                out.line(g)
        elif self.groups:
            out.print(table(["GROUP", "STATE"], [[g, s] for g, s in self.groups]))

    def to_json(self) -> dict:
        return {"groups": [{"group": g, "state": s if self.with_state else None} for g, s in self.groups]}


# ---- describe -------------------------------------------------------------------------------------------------

@dataclass
class OffsetRow:
    group: str
    topic: str | None
    partition: int | None
    current: int | None
    log_end: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        if self.current is None or self.current == UNKNOWN_OFFSET or self.log_end is None:
            return None
        return self.log_end - self.current


def _cell(v) -> str:
    return MISSING if v is None else str(v)


def describe_consumer_group(admin: AdminClient, group: str) -> GroupDescription:
    """The group's description; KafkaError when it does not exist (state Dead) or is not a consumer
    group."""
    desc = admin.describe_group(group)
    if desc.state == "Dead":
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group '{group}' does not exist.")
    if desc.protocol_type not in CONSUMER_PROTOCOL_TYPES:
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                         f"Group '{group}' is not a consumer group (protocol type '{desc.protocol_type}').")
    return desc


def collect_offsets(admin: AdminClient, desc: GroupDescription) -> list[OffsetRow]:
    """ConsumerGroupCommand.collectGroupsOffsets: a row per partition assigned to a member (members with the
    most partitions first), then a row per partition with a committed offset but no member; the log end offset
    is the partition's high watermark (ListOffsets latest on its leader), '-' when it cannot be had."""
    committed = admin.committed_offsets(desc.group_id)
    rows, assigned = [], set()
    members = sorted((m for m in desc.members if m.assignment), key=lambda m: -len(m.assignment))
    for m in members:
        for tp in sorted(m.assignment, key=_tp_key):
            assigned.add(tp)
            rows.append(OffsetRow(desc.group_id, tp.topic, tp.partition, committed.get(tp), None, m.member_id,
                                  m.host, m.client_id))
    for tp in sorted(set(committed) - assigned, key=_tp_key):
        rows.append(OffsetRow(desc.group_id, tp.topic, tp.partition, committed[tp], None, MISSING, MISSING,
                              MISSING))
    if rows:
        ends = admin.list_offsets({TopicPartition(r.topic, r.partition): LATEST for r in rows})
        for r in rows:
            code, offset = ends.get(TopicPartition(r.topic, r.partition), (1, -1))
            r.log_end = offset if code == 0 and offset >= 0 else None
    return rows


def _members_json(desc: GroupDescription) -> list[dict]:
    return [{"consumer_id": m.member_id, "group_instance_id": m.group_instance_id, "host": m.host,
             "client_id": m.client_id, "partitions": len(m.assignment),
             "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment]}
            for m in desc.members]


@dataclass
class GroupView:
    """One group of groups describe, in one of its views: "offsets" (rows), "members" or "state".
    JSON (one object of {"groups": [...]}): {"group", "state"} and, by view, "offsets": [{"topic",
    "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host", "client_id"}] (null for
    '-'), "members": [{"consumer_id", "group_instance_id", "host", "client_id", "partitions", "assignment":
    [{"topic", "partition"}]}], or "coordinator": {"id", "host", "port"}, "assignment_strategy", "members"
    (a count)."""
    desc: GroupDescription
    view: str
    rows: list[OffsetRow] | None = None
    verbose: bool = False

    def render(self, out: Output) -> None:
        """ConsumerGroupCommand.printOffsets / printMembers / printStates: a blank line, then the table."""
        d = self.desc
        if self.view == "offsets":
            if self.rows:
                out.line()
                out.print(table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                 "CONSUMER-ID", "HOST", "CLIENT-ID"],
                                [[r.group, _cell(r.topic), _cell(r.partition), _cell(r.current), _cell(r.log_end),
                                  _cell(r.lag), r.consumer_id, r.host, r.client_id] for r in self.rows]))
        elif self.view == "members":
            if d.members:
                out.line()
                out.print(self._members_table())
        else:
            c = d.coordinator
            out.line()
            out.print(table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                            [[d.group_id, f"{c.host}:{c.port} ({c.node_id})", d.protocol, d.state,
                              len(d.members)]]))

    def _members_table(self):
        """GROUP-INSTANCE-ID only when a member has one; ASSIGNMENT with --verbose."""
        ms = self.desc.members
        with_instance = any(m.group_instance_id for m in ms)
        columns = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + \
            ["HOST", "CLIENT-ID", "#PARTITIONS"] + (["ASSIGNMENT"] if self.verbose else [])
        rows = []
        for m in ms:
            partitions = by_topic((tp.topic, tp.partition) for tp in m.assignment)
            assignment = ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in partitions.items()))
            rows.append([self.desc.group_id, m.member_id] + ([m.group_instance_id or ""] if with_instance else [])
                        + [m.host, m.client_id, len(m.assignment)] + ([assignment or MISSING] if self.verbose else []))
        return table(columns, rows)

    def to_json(self) -> dict:
        d = self.desc
        out = {"group": d.group_id, "state": d.state}
        if self.view == "offsets":
            out["offsets"] = [{"topic": r.topic, "partition": r.partition, "current_offset": r.current,
                               "log_end_offset": r.log_end, "lag": r.lag,
                               "consumer_id": None if r.consumer_id == MISSING else r.consumer_id,
                               "host": None if r.host == MISSING else r.host,
                               "client_id": None if r.client_id == MISSING else r.client_id}
                              for r in self.rows or []]
        elif self.view == "members":
            out["members"] = _members_json(d)
        else:
            c = d.coordinator
            out.update(coordinator={"id": c.node_id, "host": c.host, "port": c.port}, assignment_strategy=d.protocol,
                       members=len(d.members))
        return out


@dataclass
class GroupViews:
    """groups describe. JSON: {"groups": [GroupView's objects]}."""
    views: list[GroupView]

    def render(self, out: Output) -> None:
        for v in self.views:
            v.render(out)

    def to_json(self) -> dict:
        return {"groups": [v.to_json() for v in self.views]}


def state_notice(desc: GroupDescription) -> str | None:
    """What ConsumerGroupCommand prints on stderr before a group's table."""
    if desc.state == "Empty":
        return f"Consumer group '{desc.group_id}' has no active members."
    if desc.state in ("PreparingRebalance", "CompletingRebalance"):
        return f"Warning: Consumer group '{desc.group_id}' is rebalancing."
    return None


# ---- reset-offsets --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResetSpec:
    """How to compute the new offsets: kind is one of to-earliest, to-latest, to-offset, to-datetime,
    by-duration, shift-by, to-current; value is the offset, timestamp (ms) or shift."""
    kind: str
    value: int | None = None


_DATETIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})"
                       r"(Z|[+-]\d{2}(?::?\d{2})?)?$")


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: 'YYYY-MM-DDTHH:mm:SS.sss' with an optional zone (Z, +hh, +hhmm, +hh:mm);
    no zone means UTC. Milliseconds since the epoch; ValueError otherwise."""
    m = _DATETIME.match(text.strip())
    if not m:
        raise ValueError(f"'{text}' is not a datetime in the format YYYY-MM-DDTHH:mm:SS.sss[zone] "
                         "(e.g. 2021-03-01T12:00:00.000, 2021-03-01T12:00:00.000+02:00; no zone is UTC)")
    y, mo, d, h, mi, s, ms, zone = m.groups()
    tz = dt.timezone.utc
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            raise ValueError(f"'{text}': the zone offset {zone} is out of range")
        tz = dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))
    try:
        when = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int(ms) * 1000, tzinfo=tz)
    except ValueError as e:
        raise ValueError(f"'{text}' is not a valid datetime: {e}") from None
    return _epoch_ms(when)


def _epoch_ms(when: dt.datetime) -> int:
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000


_DURATION = re.compile(r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?$", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """java.time.Duration.parse's 'PnDTnHnMn.nS' (e.g. PT15M, P1DT2H, PT0.5S): milliseconds; ValueError
    otherwise."""
    t = text.strip()
    m = _DURATION.match(t)
    if not m or t.upper().endswith("T") or not any(m.group(i) for i in (2, 3, 4, 5)):
        raise ValueError(f"'{text}' is not a duration in the format PnDTnHnMnS (e.g. PT15M, P1DT2H)")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    ms = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    secs = int(seconds or 0)
    frac_ms = int(((fraction or "") + "000")[:3])
    ms += secs * 1000 + (-frac_ms if seconds and seconds.startswith("-") else frac_ms)
    return -ms if sign == "-" else ms


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """'t' -> ('t', None) (every partition); 't:0,2' -> ('t', [0, 2]); ValueError otherwise."""
    topic, sep, parts = arg.partition(":")
    if not topic:
        raise ValueError(f"'{arg}' does not name a topic")
    if not sep:
        return topic, None
    try:
        partitions = [int(p) for p in parts.split(",")]
    except ValueError:
        raise ValueError(f"'{arg}' is not TOPIC or TOPIC:PARTITION,PARTITION,...") from None
    if any(p < 0 for p in partitions):
        raise ValueError(f"'{arg}': partitions cannot be negative")
    return topic, partitions


def partitions_to_reset(admin: AdminClient, group: str, topic_args: list[str], all_topics: bool
                        ) -> list[TopicPartition]:
    """--all-topics: the partitions the group has committed offsets for; --topic: the named partitions, or every
    partition of the topic (KafkaError for an unknown topic)."""
    if all_topics:
        return sorted(admin.committed_offsets(group), key=_tp_key)
    parsed = [parse_topic_arg(a) for a in topic_args]
    whole = [t for t, ps in parsed if ps is None]
    known = admin.topic_partitions(whole) if whole else {}
    out: list[TopicPartition] = []
    for topic, ps in parsed:
        for p in (known[topic] if ps is None else ps):
            out.append(TopicPartition(topic, p))
    return sorted(dict.fromkeys(out), key=_tp_key)


def _offsets(admin: AdminClient, tps: list[TopicPartition], spec: int, what: str) -> dict[TopicPartition, int]:
    """ListOffsets for each partition; KafkaError when one cannot be had."""
    if not tps:
        return {}
    found = admin.list_offsets({tp: spec for tp in tps})
    out = {}
    for tp in tps:
        code, offset = found[tp]
        if code != 0:
            raise KafkaError(code, f"Error getting {what} offset of topic partition: {tp} ({error_name(code)})")
        out[tp] = offset
    return out


def _check_range(admin: AdminClient, requested: dict[TopicPartition, int], warn) -> dict[TopicPartition, int]:
    """ConsumerGroupCommand.checkOffsetsRange: clamp into [log start, log end], warning about each change."""
    tps = sorted(requested, key=_tp_key)
    starts = _offsets(admin, tps, EARLIEST, "starting")
    ends = _offsets(admin, tps, LATEST, "ending")
    out = {}
    for tp in tps:
        offset = requested[tp]
        if offset > ends[tp]:
            warn(f"New offset ({offset}) is higher than latest offset for topic partition {tp}. "
                 f"Value will be set to {ends[tp]}")
            offset = ends[tp]
        elif offset < starts[tp]:
            warn(f"New offset ({offset}) is lower than earliest offset for topic partition {tp}. "
                 f"Value will be set to {starts[tp]}")
            offset = starts[tp]
        out[tp] = offset
    return out


def _by_timestamp(admin: AdminClient, tps: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
    """The first offset at or after the timestamp; the log end offset where no record is that recent."""
    if not tps:
        return {}
    found = admin.list_offsets({tp: timestamp for tp in tps})
    out, none = {}, []
    for tp in tps:
        code, offset = found[tp]
        if code != 0:
            raise KafkaError(code, f"Error getting offset by timestamp of topic partition: {tp} "
                                   f"({error_name(code)})")
        if offset == UNKNOWN_OFFSET:
            none.append(tp)
        else:
            out[tp] = offset
    out.update(_offsets(admin, none, LATEST, "ending"))
    return out


def prepare_reset(admin: AdminClient, group: str, tps: list[TopicPartition], spec: ResetSpec, warn
                  ) -> dict[TopicPartition, int]:
    """ConsumerGroupCommand.prepareOffsetsToReset: the new offset of each partition."""
    if spec.kind == "to-offset":
        return _check_range(admin, {tp: spec.value for tp in tps}, warn)
    if spec.kind == "to-earliest":
        return _offsets(admin, tps, EARLIEST, "starting")
    if spec.kind == "to-latest":
        return _offsets(admin, tps, LATEST, "ending")
    if spec.kind == "to-datetime":
        return _by_timestamp(admin, tps, spec.value)
    if spec.kind == "by-duration":
        return _by_timestamp(admin, tps, int(time.time() * 1000) - spec.value)
    committed = admin.committed_offsets(group)
    if spec.kind == "shift-by":
        missing = [tp for tp in tps if tp not in committed]
        if missing:
            raise KafkaError(Errors.OFFSET_NOT_AVAILABLE, f"Cannot shift offset for partition {missing[0]} since "
                                                          "there is no current committed offset")
        return _check_range(admin, {tp: committed[tp] + spec.value for tp in tps}, warn)
    if spec.kind == "to-current":
        out = {tp: committed[tp] for tp in tps if tp in committed}
        out.update(_offsets(admin, [tp for tp in tps if tp not in committed], LATEST, "ending"))
        return out
    raise ValueError(f"unknown reset kind {spec.kind}")


@dataclass
class ResetPlans:
    """groups reset-offsets. JSON: {"executed": bool, "groups": [{"group", "offsets": [{"topic", "partition",
    "new_offset"}]}]}."""
    plans: dict[str, dict[TopicPartition, int]]
    executed: bool

    def render(self, out: Output) -> None:
        """ConsumerGroupCommand.printOffsetsToReset."""
        if self.plans:
            out.line()
            out.print(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                            [[g, tp.topic, tp.partition, plan[tp]] for g, plan in self.plans.items()
                             for tp in sorted(plan, key=_tp_key)]))

    def to_json(self) -> dict:
        return {"executed": self.executed, "groups": [
            {"group": g, "offsets": [{"topic": tp.topic, "partition": tp.partition, "new_offset": plan[tp]}
                                     for tp in sorted(plan, key=_tp_key)]} for g, plan in self.plans.items()]}


@dataclass
class GroupsDeleted:
    """groups delete. JSON: {"deleted": [group], "failed": [{"group", "error"}]} (error: Kafka's error name)."""
    results: dict[str, int]             # group -> error code (0: deleted)

    @property
    def deleted(self) -> list[str]:
        return [g for g, code in self.results.items() if code == 0]

    @property
    def failed(self) -> dict[str, int]:
        return {g: code for g, code in self.results.items() if code}

    def render(self, out: Output) -> None:
        names = ", ".join(f"'{g}'" for g in self.deleted)
        if not self.failed:
            out.line(f"Deletion of requested consumer groups ({names}) was successful.")
        elif self.deleted:
            out.line(f"These consumer groups were deleted successfully: {names}")

    def to_json(self) -> dict:
        return {"deleted": self.deleted,
                "failed": [{"group": g, "error": error_name(code)} for g, code in self.failed.items()]}


def commit_reset(admin: AdminClient, group: str, plan: dict[TopicPartition, int]) -> None:
    """Commit the new offsets; KafkaError naming the partitions the coordinator refused."""
    errors = admin.commit_offsets(group, plan)
    failed = {tp: code for tp, code in errors.items() if code}
    missing = [tp for tp in plan if tp not in errors]
    if failed:
        detail = ", ".join(f"{tp}: {error_name(failed[tp])}" for tp in sorted(failed, key=_tp_key))
        raise KafkaError(next(iter(failed.values())), f"Committing the new offsets of group '{group}' failed for "
                                                      f"{len(failed)} of {len(plan)} partition(s) ({detail}).")
    if missing:
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"The coordinator of group '{group}' did not answer for "
                                                      f"{', '.join(map(str, missing))}.")


def reset_offsets(admin: AdminClient, group: str, topic_args: list[str], all_topics: bool, spec: ResetSpec, warn,
                  execute: bool) -> dict[TopicPartition, int]:
    """ConsumerGroupCommand.resetOffsets for one group: the new offset of each partition (--topic arguments or
    --all-topics), committed when execute. KafkaError when the group is not a consumer group or has active members
    (NON_EMPTY_GROUP: only an Empty or Dead group may be reset); warn(message) for each offset moved into range."""
    desc = admin.describe_group(group)
    if desc.protocol_type not in CONSUMER_PROTOCOL_TYPES and desc.state != "Dead":
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL, f"Group '{group}' is not a consumer group "
                                                             f"(protocol type '{desc.protocol_type}').")
    if desc.state not in ("Empty", "Dead"):
        raise KafkaError(Errors.NON_EMPTY_GROUP, f"Assignments can only be reset if the group '{group}' "
                                                 f"is inactive, but the current state is {desc.state}.")
    plan = prepare_reset(admin, group, partitions_to_reset(admin, group, topic_args, all_topics), spec, warn)
    if execute:
        commit_reset(admin, group, plan)
    return plan


# ---- commands (click) -----------------------------------------------------------------------------------------

def _group_selection(groups, all_groups, admin) -> list[str]:
    """The groups named, or every consumer group with --all-groups."""
    if all_groups:
        return [g for g, _ in list_consumer_groups(admin)]
    return list(dict.fromkeys(groups))


def _each_group(groups, work, failed: list[str]):
    """(group, work(group)) for each group. A group the cluster refuses (KafkaError) is reported, added to
    failed and skipped, so the others go on; an unreachable cluster or a timeout ends the command."""
    for group in groups:
        try:
            result = work(group)
        except (Unreachable, TimedOut):
            raise
        except KafkaError as e:
            print_error(str(e))
            failed.append(group)
            continue
        yield group, result


def _require_groups(groups, all_groups):
    if not groups and not all_groups:
        raise click.UsageError("Give at least one GROUP (or --all-groups).")
    if groups and all_groups:
        raise click.UsageError("Give GROUP... or --all-groups, not both.")


@click.group("groups")
def groups():
    """Consumer groups (kafka-consumer-groups.sh), through the Kafka protocol: --bootstrap-server HOST:PORT, or
    --zookeeper to find the brokers."""


@groups.command("list")
@click.option("--state", "states", is_flag=False, flag_value="", default=None, metavar="[STATE,...]",
              help="Show each group's state; with a value, only groups in these states (e.g. stable,empty).")
@timeout_option
@click.pass_context
def groups_list(ctx, states, timeout):
    """List the consumer groups, one per line (ListGroups to every broker). JSON: {"groups": [{"group",
    "state"}]}."""
    wanted = None
    if states:
        try:
            wanted = parse_states(states)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--state") from None
    with admin_client(ctx, timeout) as admin:
        listed = list_consumer_groups(admin)
    if states is not None:
        listed = [(g, s or "Unknown") for g, s in listed if wanted is None or s in wanted]
    output(ctx).emit(GroupList(listed, states is not None))


@groups.command("describe")
@click.argument("group_ids", metavar="[GROUP]...", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Every consumer group.")
@click.option("--offsets", "offsets_view", is_flag=True,
              help="Partitions with committed offsets, log end offsets and lag (the default).")
@click.option("--members", "members_view", is_flag=True, help="The members and how many partitions each has.")
@click.option("--state", "state_view", is_flag=True, help="Coordinator, assignment strategy, state, member count.")
@click.option("--verbose", is_flag=True, help="With --members: each member's assigned partitions.")
@timeout_option
@click.pass_context
def groups_describe(ctx, group_ids, all_groups, offsets_view, members_view, state_view, verbose, timeout):
    """Describe consumer groups: per partition the committed offset (CURRENT-OFFSET), the high watermark
    (LOG-END-OFFSET), the LAG between them and the member it is assigned to (kafka-consumer-groups.sh
    --describe). Exit 1 if a group does not exist. JSON: {"groups": [{"group", "state", and "offsets",
    "members" or "coordinator"/"assignment_strategy"/"members" by view}]}."""
    _require_groups(group_ids, all_groups)
    if sum((offsets_view, members_view, state_view)) > 1:
        raise click.UsageError("Give at most one of --offsets, --members, --state.")
    if verbose and not members_view:
        raise click.UsageError("--verbose goes with --members.")
    view = "members" if members_view else "state" if state_view else "offsets"
    out = output(ctx)
    views, failed = [], []
    with admin_client(ctx, timeout) as admin:
        def describe(group):
            desc = describe_consumer_group(admin, group)
            return desc, collect_offsets(admin, desc) if view == "offsets" else None

        for _, (desc, rows) in _each_group(_group_selection(group_ids, all_groups, admin), describe, failed):
            notice = state_notice(desc)
            if notice:
                click.echo(notice, err=True)
            v = GroupView(desc, view, rows, verbose)
            views.append(v)
            if not out.json:
                v.render(out)
    if out.json:
        out.emit(GroupViews(views))
    if failed:
        ctx.exit(EXIT_REFUSED)


_RESET_SCENARIOS = ("--to-earliest", "--to-latest", "--to-current", "--to-offset", "--shift-by", "--to-datetime",
                    "--by-duration")


@groups.command("reset-offsets")
@click.argument("group_ids", metavar="[GROUP]...", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Every consumer group.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P,...]",
              help="A topic (every partition) or some of its partitions; repeatable.")
@click.option("--all-topics", is_flag=True, help="Every partition the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset (high watermark).")
@click.option("--to-current", is_flag=True, help="The committed offset (the log end where none).")
@click.option("--to-offset", type=int, metavar="N", help="Offset N (kept within the log's range).")
@click.option("--shift-by", type=int, metavar="N", help="The committed offset plus N (N may be negative).")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[ZONE]",
              help="The first offset with a timestamp at or after this time (no zone: UTC).")
@click.option("--by-duration", metavar="PnDTnHnMnS", help="As --to-datetime, for now minus this duration.")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@timeout_option
@click.pass_context
def groups_reset_offsets(ctx, group_ids, all_groups, topics, all_topics, to_earliest, to_latest, to_current,
                         to_offset, shift_by, to_datetime, by_duration, dry_run, execute, timeout):
    """Reset the committed offsets of inactive consumer groups (kafka-consumer-groups.sh --reset-offsets).

    Prints GROUP TOPIC PARTITION NEW-OFFSET; only with --execute are the offsets committed. A group with active
    members is refused (exit 1): stop its consumers first. JSON: {"executed", "groups": [{"group", "offsets":
    [{"topic", "partition", "new_offset"}]}]}.
    """
    _require_groups(group_ids, all_groups)
    if dry_run and execute:
        raise click.UsageError("Give only one of --execute and --dry-run.")
    if bool(topics) == bool(all_topics):
        raise click.UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    given = [(name, v) for name, v in (("--to-earliest", to_earliest or None), ("--to-latest", to_latest or None),
                                       ("--to-current", to_current or None), ("--to-offset", to_offset),
                                       ("--shift-by", shift_by), ("--to-datetime", to_datetime),
                                       ("--by-duration", by_duration)) if v is not None]
    if len(given) != 1:
        raise click.UsageError(f"Give exactly one of {', '.join(_RESET_SCENARIOS)}.")
    name, value = given[0]
    try:
        if name == "--to-datetime":
            spec = ResetSpec("to-datetime", parse_datetime(value))
        elif name == "--by-duration":
            spec = ResetSpec("by-duration", parse_duration(value))
        elif name in ("--to-offset", "--shift-by"):
            spec = ResetSpec(name[2:], value)
        else:
            spec = ResetSpec(name[2:])
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=name) from None
    for t in topics:
        try:
            parse_topic_arg(t)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--topic") from None
    if not dry_run and not execute:
        click.echo("WARN: No action will be performed as the --execute option is missing. In a future major "
                   "release, the default behavior of this command will be to prompt the user before executing the "
                   "reset rather than doing a dry run. You should add the --dry-run option explicitly if you are "
                   "scripting this command and want to keep the current default behavior without prompting.",
                   err=True)

    def warn(message):
        click.echo(f"WARN: {message}", err=True)
    plans, failed = {}, []
    with admin_client(ctx, timeout) as admin:
        def reset(group):
            return reset_offsets(admin, group, list(topics), all_topics, spec, warn, execute)

        plans.update(_each_group(_group_selection(group_ids, all_groups, admin), reset, failed))
    output(ctx).emit(ResetPlans(plans, execute))
    if failed:
        ctx.exit(EXIT_REFUSED)


@groups.command("delete")
@click.argument("group_ids", metavar="[GROUP]...", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Every consumer group.")
@timeout_option
@click.pass_context
def groups_delete(ctx, group_ids, all_groups, timeout):
    """Delete consumer groups and their committed offsets (DeleteGroups; only groups without active members).
    Exit 1 if any could not be deleted. JSON: {"deleted": [group], "failed": [{"group", "error"}]}."""
    _require_groups(group_ids, all_groups)
    with admin_client(ctx, timeout) as admin:
        selected = _group_selection(group_ids, all_groups, admin)
        result = GroupsDeleted(admin.delete_groups(selected) if selected else {})
    for g, code in result.failed.items():
        print_error(f"Group '{g}' could not be deleted due to: {error_text(code)}")
    output(ctx).emit(result)
    if result.failed:
        ctx.exit(EXIT_REFUSED)
