"""Topics: the list, creation, deletion, configs, new partitions, and one topic's partitions and readers.

The list (Metadata, DescribeLogDirs on every live broker): partitions, replication factor, size (the leader
replicas' bytes), under-replicated and offline partitions, internal topics marked; the rate in is the growth of
the topic's end offsets (ListOffsets latest) in messages/s, sampled whenever the page or its JSON is read (the
page polls it) and kept by the console; the rate out is the growth of the brokers' BytesOutPerSec counters
(`kafka_server_brokertopicmetrics_bytesout_total{topic}` summed over the brokers' Prometheus endpoints, as
prometheus.py finds and reads them), shown only when one answers.

A topic's page: each partition's leader, replicas, ISR, log start and end offsets and size per replica; every
config with its value and source (an override is marked, with the value it replaced), editable with
IncrementalAlterConfigs (kadmin alter-config's checks); add partitions (CreatePartitions); delete (confirmed);
the consumer groups with committed offsets on the topic, per partition with the end offset and lag.

Bad input (a name Kafka refuses, 0 partitions, a replication factor above the live brokers, an unknown config)
is the cluster's or kadmin's own message on the page, flashed as an error; nothing is changed then.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from flask import Blueprint, request, url_for

from admin_cli.configs import Entity, alter_config_admin
from admin_cli.groups import list_consumer_groups
from admin_cli.kafka_client import TOPIC_RESOURCE
from admin_cli.topics import delete_topic_admin, leaders_admin, parse_config_args
from kbroker.common.admin_errors import AdminError
from kbroker.protocol.client import EARLIEST, LATEST, Broker, KafkaError, TopicPartition, Unreachable

from . import prometheus
from .web import as_json, client, console, done, form_text, page

blueprint = Blueprint("topics", __name__)
RATE_WINDOW = 30.0          # seconds of samples a rate is taken over


@dataclass
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    size: int | None = None              # None: no broker described the leaders' log dirs
    rate_in: float | None = None
    rate_out: float | None = None


@dataclass
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    start: int | None
    end: int | None
    sizes: dict[int, int] = field(default_factory=dict)     # broker id -> bytes of its replica

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    override: bool
    default: str | None            # with an override: the setting it replaced ("name=value", the next synonym)
    read_only: bool
    sensitive: bool


@dataclass
class ReaderRow:
    group: str
    state: str | None
    partition: int
    committed: int
    end: int | None

    @property
    def lag(self) -> int | None:
        return None if self.end is None or self.committed < 0 else max(0, self.end - self.committed)


def replica_sizes(brokers: dict[int, Broker]) -> tuple[dict[tuple[str, int, int], int], list[str]]:
    """{(topic, partition, broker): bytes} of the replicas in the brokers' log dirs (a replica moving
    between dirs counts once, its current copy), and a line per broker that could not be asked."""
    c = client()
    sizes, errors = {}, []
    deadline = c.deadline()
    for node_id, broker in sorted(brokers.items()):
        try:
            dirs = c.describe_log_dirs(broker, deadline)
        except KafkaError as e:
            errors.append(f"broker {node_id}: {e}")
            continue
        for d in dirs:
            for r in d.replicas:
                if not r.is_future:
                    sizes[(r.topic, r.partition, node_id)] = r.size
    return sizes, errors


def _rate(name: str) -> float | None:
    """Increase per second of a sampled total over the last RATE_WINDOW seconds (None before two samples a
    second apart)."""
    samples = [s for s in console().series(name).samples if s[0] >= time.time() - RATE_WINDOW]
    if len(samples) < 2 or samples[-1][0] - samples[0][0] < 1.0:
        return None
    (t0, v0), (t1, v1) = samples[0], samples[-1]
    return max(0.0, (v1 - v0) / (t1 - t0))


def sample_end_offsets(md) -> dict[str, int]:
    """One sample of each topic's summed end offsets (its partitions with a leader) into the console's series;
    returns the sums."""
    led = [TopicPartition(t, p) for t, info in md.topics.items() for p, part in info.partitions.items()
           if part.leader in md.brokers]
    ends = client().list_offsets({tp: LATEST for tp in led}) if led else {}
    totals: dict[str, int] = {t: 0 for t in md.topics}
    for tp, (code, offset) in ends.items():
        if not code and offset > 0:
            totals[tp.topic] += offset
    now = time.time()
    for t, total in totals.items():
        console().series(f"topic-end:{t}").add(now, total)
    return totals


def _rates(md) -> tuple[dict[str, float | None], dict[str, float | None] | None]:
    """Each topic's rate in (messages/s) and, when a broker's Prometheus endpoint answers, rate out (bytes/s summed
    over the brokers); None for the rates out when none answers."""
    sample_end_offsets(md)
    rates_in = {t: _rate(f"topic-end:{t}") for t in md.topics}
    endpoints = prometheus.discover_endpoints()
    prometheus.sample(endpoints)
    answering = [e for e in endpoints if e.url and not e.error]
    if not answering:
        return rates_in, None
    rates_out = {}
    for t in md.topics:
        rates = [r for e in answering if (r := _rate(prometheus.key(f"topic-out:{t}", e))) is not None]
        rates_out[t] = sum(rates) if rates else None
    return rates_in, rates_out


@blueprint.get("/topics")
def index():
    c = client()
    md = c.metadata(None)
    sizes, size_errors = replica_sizes(md.brokers)
    rates_in, rates_out = _rates(md)
    rows = []
    for name, info in sorted(md.topics.items()):
        parts = info.partitions.values()
        leader_sizes = [sizes.get((name, p, part.leader)) for p, part in info.partitions.items()]
        known = [s for s in leader_sizes if s is not None]
        rows.append(TopicRow(name, info.internal, len(info.partitions),
                             len(next(iter(parts)).replicas) if info.partitions else 0,
                             sum(1 for p in parts if len(p.isr) < len(p.replicas)),
                             sum(1 for p in parts if p.leader not in md.brokers),
                             sum(known) if known else None, rates_in.get(name),
                             None if rates_out is None else rates_out.get(name)))
    denied = sorted(md.topic_errors)
    return page("topics.html", topics=rows, size_errors=size_errors, with_out=rates_out is not None,
                brokers=len(md.brokers), denied=denied)


@blueprint.get("/topic-rates.json")
def rates():
    md = client().metadata(None)
    rates_in, rates_out = _rates(md)
    return as_json({"in": rates_in, "out": rates_out})


def _int_field(name: str, label: str, minimum: int, required: bool = True) -> int | None:
    text = form_text(name)
    if not text and not required:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{label} must be a whole number (got '{text}').") from None
    if value < minimum:
        raise ValueError(f"{label} must be at least {minimum} (got {value}).")
    return value


def _wait_for_leaders(name: str, timeout: float = 10.0) -> None:
    """Until every partition of a new topic has a leader (at most timeout s), so that its page shows them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, total = leaders_admin(client(), name)
        if total and done == total:
            return
        time.sleep(0.2)


@blueprint.post("/topics/create")
def create():
    name = form_text("name")
    try:
        if not name:
            raise ValueError("Give the new topic a name.")
        partitions = _int_field("partitions", "Partitions", 1, required=False)
        rf = _int_field("replication_factor", "Replication factor", 1, required=False)
        configs = parse_config_args(line for line in form_text("configs").splitlines() if line.strip())
        count, factor = client().create_topic(name, partitions, rf, None, configs)
        _wait_for_leaders(name)
    except (ValueError, KafkaError) as e:
        if isinstance(e, Unreachable):
            raise
        return done(f"Topic '{name}' was not created: {e}", "topics.index", "error")
    return done(f"Created topic '{name}' ({count} partitions, replication factor {factor}).", "topics.detail",
                name=name)


@blueprint.post("/topics/<path:name>/delete")
def delete(name):
    try:
        delete_topic_admin(client(), name)
    except (AdminError, KafkaError) as e:
        if isinstance(e, Unreachable):
            raise
        return done(f"Topic '{name}' was not deleted: {e}", "topics.detail", "error", name=name)
    return done(f"Topic '{name}' is marked for deletion; the controller deletes it.", "topics.index")


@blueprint.post("/topics/<path:name>/partitions")
def add_partitions(name):
    try:
        count = _int_field("count", "The new partition count", 1)
        client().create_partitions(name, count)
    except (ValueError, KafkaError) as e:
        if isinstance(e, Unreachable):
            raise
        return done(f"No partitions were added to '{name}': {e}", "topics.detail", "error", name=name)
    return done(f"Topic '{name}' now has {count} partitions.", "topics.detail", name=name)


@blueprint.post("/topics/<path:name>/configs")
def alter_configs(name):
    """Set one config (config_name, config_value) or remove an override (reset=NAME)."""
    reset = form_text("reset")
    to_set = {} if reset else {form_text("config_name"): request.form.get("config_value", "")}
    try:
        if not reset and not form_text("config_name"):
            raise ValueError("Name the config to set.")
        alter_config_admin(client(), Entity("topic", name), to_set, [reset] if reset else [])
    except (ValueError, AdminError, KafkaError) as e:
        if isinstance(e, Unreachable):
            raise
        return done(f"The configs of '{name}' were not changed: {e}", "topics.detail", "error", name=name)
    what = f"Removed the override of {reset}" if reset else \
        "Set " + ", ".join(f"{k}={v}" for k, v in to_set.items())
    return done(f"{what} on topic '{name}'.", "topics.detail", name=name)


def _configs(name: str) -> list[ConfigRow]:
    entries = client().describe_configs([(TOPIC_RESOURCE, name)])[(TOPIC_RESOURCE, name)]
    rows = []
    for e in entries:
        override = e.source == "DYNAMIC_TOPIC_CONFIG"
        below = next((f"{n}={v}" for n, v, s in e.synonyms if s != "DYNAMIC_TOPIC_CONFIG" and v is not None), None)
        rows.append(ConfigRow(e.name, e.value, e.source, override, below if override else None, e.read_only,
                              e.sensitive))
    return sorted(rows, key=lambda r: (not r.override, r.name))


def _readers(name: str, partitions: list[int], ends: dict[TopicPartition, tuple[int, int]]
             ) -> tuple[list[ReaderRow], list[str]]:
    """The consumer groups with a committed offset on topic NAME, a row per partition they committed."""
    c = client()
    rows, errors = [], []
    for group, state in list_consumer_groups(c):
        try:
            committed = c.committed_offsets(group)
        except KafkaError as e:
            if isinstance(e, Unreachable):
                raise
            errors.append(f"group {group}: {e}")
            continue
        for tp, offset in sorted(committed.items()):
            if tp.topic == name and tp.partition in partitions:
                code, end = ends.get(tp, (1, -1))
                rows.append(ReaderRow(group, state, tp.partition, offset, end if not code and end >= 0 else None))
    return rows, errors


@blueprint.get("/topics/<path:name>")
def detail(name):
    c = client()
    md = c.topics([name])
    info = md.topics[name]
    tps = [TopicPartition(name, p) for p in sorted(info.partitions)]
    led = [tp for tp in tps if info.partitions[tp.partition].leader in md.brokers]
    starts = c.list_offsets({tp: EARLIEST for tp in led}) if led else {}
    ends = c.list_offsets({tp: LATEST for tp in led}) if led else {}
    holders = {b for part in info.partitions.values() for b in part.replicas if b in md.brokers}
    sizes, size_errors = replica_sizes({b: md.brokers[b] for b in holders})

    def offset(found, tp):
        code, value = found.get(tp, (1, -1))
        return value if not code and value >= 0 else None
    partitions = []
    for tp in tps:
        part = info.partitions[tp.partition]
        partitions.append(PartitionRow(tp.partition, part.leader, part.replicas, part.isr, offset(starts, tp),
                                       offset(ends, tp), {b: sizes[(name, tp.partition, b)] for b in part.replicas
                                                          if (name, tp.partition, b) in sizes}))
    readers, reader_errors = _readers(name, [tp.partition for tp in tps], ends)
    return page("topic.html", name=name, info=info, partitions=partitions, live=set(md.brokers),
                configs=_configs(name), readers=readers, reader_errors=reader_errors, size_errors=size_errors,
                messages_url=url_for("messages.index", topic=name))
