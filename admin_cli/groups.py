"""`kadmin groups ...`: consumer groups through the Kafka protocol, as Kafka 2.8's kafka-consumer-groups.sh.

Groups live in the brokers (the group coordinators and `__consumer_offsets`), not in ZooKeeper, so every
command talks to the cluster with the Admin APIs: ListGroups (every broker), FindCoordinator, DescribeGroups,
OffsetFetch, OffsetCommit (a simple commit, generation -1, as AdminClient.alterConsumerGroupOffsets),
DeleteGroups, ListOffsets (on each partition's leader) and Metadata.

The output is ConsumerGroupCommand's (2.8): the same columns, widths and messages, with trailing blanks
trimmed; its notices ("has no active members", "is rebalancing", warnings) go to stderr as Kafka's do, and its
errors are kadmin's one-line "Error: ..." on stderr with exit status 1.
"""
from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass

from .kafka_client import (EARLIEST, LATEST, UNKNOWN_OFFSET, AdminClient, GroupDescription, KafkaAdminError,
                           TopicPartition, error_name)

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


def format_group_states(groups: list[tuple[str, str]]) -> list[str]:
    width = max([15] + [len(g) for g, _ in groups])
    return [f"{'GROUP':<{width}} STATE"] + [f"{g:<{width}} {s}" for g, s in groups]


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
    """The group's description; KafkaAdminError when it does not exist (state Dead) or is not a consumer
    group."""
    desc = admin.describe_group(group)
    if desc.state == "Dead":
        raise KafkaAdminError(f"Consumer group '{group}' does not exist.")
    if desc.protocol_type not in CONSUMER_PROTOCOL_TYPES:
        raise KafkaAdminError(f"Group '{group}' is not a consumer group (protocol type '{desc.protocol_type}').")
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


def format_offsets(rows: list[OffsetRow]) -> list[str]:
    """ConsumerGroupCommand.printOffsets: a blank line, the header, the rows."""
    wg = max([15] + [len(r.group) for r in rows])
    wt = max([15] + [len(_cell(r.topic)) for r in rows])
    wc = max([15] + [len(r.consumer_id) for r in rows])
    wh = max([15] + [len(r.host) for r in rows])

    def line(*c):
        return (f"{c[0]:<{wg}} {c[1]:<{wt}} {c[2]:<10} {c[3]:<15} {c[4]:<15} {c[5]:<15} {c[6]:<{wc}} "
                f"{c[7]:<{wh}} {c[8]}").rstrip()
    out = ["", line("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                    "HOST", "CLIENT-ID")]
    for r in rows:
        out.append(line(r.group, _cell(r.topic), _cell(r.partition), _cell(r.current), _cell(r.log_end),
                        _cell(r.lag), r.consumer_id, r.host, r.client_id))
    return out


def format_members(desc: GroupDescription, verbose: bool) -> list[str]:
    """ConsumerGroupCommand.printMembers (GROUP-INSTANCE-ID only when a member has one; ASSIGNMENT with
    --verbose)."""
    g = desc.group_id
    ms = desc.members
    with_instance = any(m.group_instance_id for m in ms)
    wg = max([15, len(g)])
    wc = max([15] + [len(m.member_id) for m in ms])
    wi = max([17] + [len(m.group_instance_id or "") for m in ms])
    wh = max([15] + [len(m.host) for m in ms])
    wk = max([15] + [len(m.client_id) for m in ms])

    def line(group, cid, iid, host, client, parts, assignment):
        s = f"{group:<{wg}} {cid:<{wc}} "
        if with_instance:
            s += f"{iid:<{wi}} "
        s += f"{host:<{wh}} {client:<{wk}} {parts:<15} "
        if verbose:
            s += assignment
        return s.rstrip()

    out = ["", line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")]
    for m in ms:
        by_topic: dict[str, list[int]] = {}
        for tp in m.assignment:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        assignment = ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))
        out.append(line(g, m.member_id, m.group_instance_id or "", m.host, m.client_id, str(len(m.assignment)),
                        assignment or MISSING))
    return out


def format_state(desc: GroupDescription) -> list[str]:
    """ConsumerGroupCommand.printStates."""
    c = desc.coordinator
    coordinator = f"{c.host}:{c.port} ({c.node_id})"
    w = max(25, len(coordinator))

    def line(*v):
        return f"{v[0]:<{w}} {v[1]:<25} {v[2]:<20} {v[3]:<15} {v[4]}".rstrip()
    return ["", line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
            line(desc.group_id, coordinator, desc.protocol, desc.state, len(desc.members))]


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
    partition of the topic (KafkaAdminError for an unknown topic)."""
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
    """ListOffsets for each partition; KafkaAdminError when one cannot be had."""
    if not tps:
        return {}
    found = admin.list_offsets({tp: spec for tp in tps})
    out = {}
    for tp in tps:
        code, offset = found[tp]
        if code != 0:
            raise KafkaAdminError(f"Error getting {what} offset of topic partition: {tp} ({error_name(code)})")
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
            raise KafkaAdminError(f"Error getting offset by timestamp of topic partition: {tp} ({error_name(code)})")
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
            raise KafkaAdminError(f"Cannot shift offset for partition {missing[0]} since there is no current "
                                  "committed offset")
        return _check_range(admin, {tp: committed[tp] + spec.value for tp in tps}, warn)
    if spec.kind == "to-current":
        out = {tp: committed[tp] for tp in tps if tp in committed}
        out.update(_offsets(admin, [tp for tp in tps if tp not in committed], LATEST, "ending"))
        return out
    raise ValueError(f"unknown reset kind {spec.kind}")


def format_reset(plans: dict[str, dict[TopicPartition, int]]) -> list[str]:
    """ConsumerGroupCommand.printOffsetsToReset."""
    if not plans:
        return []
    out = ["", f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} NEW-OFFSET"]
    for group, plan in plans.items():
        for tp in sorted(plan, key=_tp_key):
            out.append(f"{group:<30} {tp.topic:<30} {tp.partition:<10} {plan[tp]}")
    return out


def commit_reset(admin: AdminClient, group: str, plan: dict[TopicPartition, int]) -> None:
    """Commit the new offsets; KafkaAdminError naming the partitions the coordinator refused."""
    errors = admin.commit_offsets(group, plan)
    failed = {tp: code for tp, code in errors.items() if code}
    missing = [tp for tp in plan if tp not in errors]
    if failed:
        detail = ", ".join(f"{tp}: {error_name(failed[tp])}" for tp in sorted(failed, key=_tp_key))
        raise KafkaAdminError(f"Committing the new offsets of group '{group}' failed for {len(failed)} of "
                              f"{len(plan)} partition(s) ({detail}).")
    if missing:
        raise KafkaAdminError(f"The coordinator of group '{group}' did not answer for "
                              f"{', '.join(map(str, missing))}.")
