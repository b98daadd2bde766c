"""Consumer groups: the list, one group's members, offsets and lag (and its lag over time), resetting its offsets
and deleting it, as kafka-consumer-groups.sh does them (admin_cli/groups.py's logic, the same refusals).

The list: every consumer group (ListGroups to every broker) with its state, members, assignment strategy, the
topics it has offsets for and its total lag (committed offset to high watermark, summed). A group's page: its
state, members and their assignments, a row per partition (committed, end offset, lag, member). Its lag over
time: the page polls lag.json, and each poll samples the group's total and per-topic lag into the console's
series ("lag:<group>", "topic-lag:<topic>:<group>"), so a reload shows the last ten minutes.
Resetting (to the earliest or latest offset, a timestamp or an offset; every topic or one) is previewed first,
then executed; the coordinator refuses it while the group has members (NON_EMPTY_GROUP), as Kafka's tool does.
Deleting is refused for a group with members, with Kafka's error shown.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from flask import Blueprint, abort, flash, request

from admin_cli.groups import (ResetSpec, collect_offsets, list_consumer_groups, parse_datetime, reset_offsets,
                              state_notice)
from admin_cli.kafka_client import GroupDescription
from kbroker.protocol.client import (LATEST, Errors, KafkaError, TimedOut, TopicPartition, Unreachable, error_name,
                                     error_text)

from .web import as_json, client, console, done, form_text, page

blueprint = Blueprint("groups", __name__)
MAX_TIMESTAMP = 2**63 - 1        # ms: a Java long, what ListOffsets carries
RESET_KINDS = {"earliest": "the earliest offset", "latest": "the latest offset",
               "timestamp": "the first offset at or after a time", "offset": "an offset"}


@dataclass
class GroupRow:
    group: str
    state: str
    members: int = 0
    protocol: str = ""
    topics: list[str] = field(default_factory=list)
    lag: int | None = None
    error: str | None = None


def end_offsets(tps) -> dict[TopicPartition, int | None]:
    """Each partition's high watermark (None where its leader did not give it)."""
    if not tps:
        return {}
    ends = client().list_offsets({tp: LATEST for tp in tps})
    return {tp: end if code == 0 and end >= 0 else None for tp, (code, end) in ends.items()}


def lag_of(committed: int, end: int | None) -> int | None:
    return None if end is None else max(0, end - committed)


def _total(values) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@blueprint.get("/groups")
def index():
    c = client()
    rows, described = [], []
    for group, state in list_consumer_groups(c):
        try:
            described.append((c.describe_group(group), c.committed_offsets(group)))
        except (Unreachable, TimedOut):
            raise
        except KafkaError as e:          # this group only (its coordinator loading, not authorized): say so
            rows.append(GroupRow(group, state or "Unknown", error=str(e)))
    ends = end_offsets(list({tp for _, committed in described for tp in committed}))   # one ListOffsets for all
    for desc, committed in described:
        topics = {tp.topic for tp in committed} | {tp.topic for m in desc.members for tp in m.assignment}
        rows.append(GroupRow(desc.group_id, desc.state, len(desc.members), desc.protocol, sorted(topics),
                             _total(lag_of(offset, ends.get(tp)) for tp, offset in committed.items())))
    return page("groups.html", groups=sorted(rows, key=lambda r: r.group))


def _describe(group: str) -> GroupDescription | None:
    """The group's description; None when it does not exist (Dead)."""
    desc = client().describe_group(group)
    return None if desc.state == "Dead" else desc


def _group_page(group: str, plan: dict | None = None, status: int = 200):
    c = client()
    desc = _describe(group)
    rows = collect_offsets(c, desc) if desc else []
    if desc is None:
        flash(f"Consumer group '{group}' does not exist: it has no members and no committed offsets.", "error")
        status = 404 if plan is None and request.method == "GET" else status
    elif desc.protocol_type not in ("consumer", ""):
        abort(400, description=f"Group '{group}' is not a consumer group (protocol type '{desc.protocol_type}').")
    topics = sorted({r.topic for r in rows})
    if plan is not None:
        current = {TopicPartition(r.topic, r.partition): r.current for r in rows}
        plan = [(tp.topic, tp.partition, current.get(tp), offset) for tp, offset in sorted(plan.items())]
    return page("group.html", group=group, desc=desc, rows=rows, topics=topics,
                notice=state_notice(desc) if desc else None, resettable=desc is None or desc.state == "Empty",
                lag=_total(r.lag for r in rows), plan=plan, form=request.form, kinds=RESET_KINDS), status


@blueprint.get("/groups/<path:group>/lag.json")
def lag(group):
    """Now: the group's state, lag and committed and end offsets per partition; and its sampled lag history,
    total and per topic, for the chart."""
    c = client()
    desc = c.describe_group(group)
    committed = c.committed_offsets(group)
    ends = end_offsets(list(committed))
    partitions = [{"topic": tp.topic, "partition": tp.partition, "committed": offset, "end": ends.get(tp),
                   "lag": lag_of(offset, ends.get(tp))} for tp, offset in sorted(committed.items())]
    per_topic: dict[str, int] = {}
    for p in partitions:
        if p["lag"] is not None:
            per_topic[p["topic"]] = per_topic.get(p["topic"], 0) + p["lag"]
    total = _total(p["lag"] for p in partitions)
    if desc.state == "Dead":             # no such group: no history kept for it (only real groups get series)
        return as_json({"state": desc.state, "members": 0, "lag": total, "partitions": partitions,
                        "datasets": [{"label": "total lag", "points": []}]})
    now = time.time()
    state = console()
    history = state.series(f"lag:{group}")
    if total is not None:
        history.add(now, total)
    datasets = [{"label": "total lag", "points": _points(history)}]
    for topic in sorted(per_topic):
        s = state.series(f"topic-lag:{topic}:{group}")
        s.add(now, per_topic[topic])
        datasets.append({"label": topic, "points": _points(s)})
    return as_json({"state": desc.state, "members": len(desc.members), "lag": total, "datasets": datasets,
                    "partitions": partitions})


def _points(series) -> list[dict]:
    return [{"t": int(t * 1000), "y": v} for t, v in series.samples]


@blueprint.get("/groups/<path:group>")
def detail(group):
    return _group_page(group)


def reset_spec(kind: str, value: str) -> ResetSpec:
    """The form's reset choice as admin_cli's ResetSpec; ValueError saying what is wrong with the value."""
    if kind == "earliest":
        return ResetSpec("to-earliest")
    if kind == "latest":
        return ResetSpec("to-latest")
    if kind == "offset":
        if not value.lstrip("-").isdigit():
            raise ValueError(f"'{value}' is not an offset: give a whole number, 0 or more.")
        if int(value) < 0:
            raise ValueError(f"The offset cannot be negative ({value}).")
        return ResetSpec("to-offset", int(value))
    if kind == "timestamp":
        ms = int(value) if value.isdigit() else parse_datetime(value)
        if not 0 <= ms <= MAX_TIMESTAMP:
            raise ValueError(f"'{value}' is outside the timestamps Kafka keeps (1970 to year 292278994).")
        return ResetSpec("to-datetime", ms)
    raise ValueError(f"Choose what to reset to: {', '.join(RESET_KINDS)}.")


@blueprint.post("/groups/<path:group>/reset")
def reset(group):
    """Preview (action=preview) or execute (action=execute) a reset of the group's committed offsets."""
    execute = form_text("action") == "execute"
    topic = form_text("topic")
    try:
        spec = reset_spec(form_text("kind"), form_text("value"))
    except ValueError as e:
        flash(str(e), "error")
        return _group_page(group, status=400)
    warnings = []
    try:
        plan = reset_offsets(client(), group, [topic] if topic else [], not topic, spec, warnings.append, execute)
    except (Unreachable, TimedOut):
        raise
    except (KafkaError, ValueError) as e:
        flash(str(e), "error")
        refused_while_active = isinstance(e, KafkaError) and e.code == Errors.NON_EMPTY_GROUP
        return _group_page(group, status=409 if refused_while_active else 400)
    for w in warnings:
        flash(w, "warn")
    if not plan:
        flash("Nothing to reset: the group has no committed offsets" + (f" for topic '{topic}'." if topic else ".")
              + " Name a topic to set its offsets.", "warn")
    if execute and plan:
        return done(f"The offsets of group '{group}' were reset on {len(plan)} partition(s).", "groups.detail",
                    group=group)
    return _group_page(group, plan=plan)


@blueprint.post("/groups/<path:group>/delete")
def delete(group):
    code = client().delete_groups([group])[group]
    if code:
        return done(f"Group '{group}' could not be deleted due to: {error_text(code)} ({error_name(code)})",
                    "groups.detail", "error", group=group)
    return done(f"Consumer group '{group}' was deleted.", "groups.index")
