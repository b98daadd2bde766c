"""Overview: the cluster at a glance, and what an operator must act on.

Cluster id and controller (DescribeCluster); each broker with its host, rack, the partitions it leads and hosts,
and its log directories' usage (DescribeLogDirs); a broker that answered before and is gone now is listed as
down. Alarms: offline partitions (no live leader), under-replicated partitions (ISR smaller than the replica set)
and under-min-ISR partitions (ISR smaller than the topic's min.insync.replicas: acks=all produces fail there).
Throughput now: the sum of every partition's end offset, sampled by the page every few seconds (its JSON), gives
messages per second, kept for the last ten minutes so a reload shows the recent past.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from flask import Blueprint

from admin_cli.kafka_client import TOPIC_RESOURCE
from kbroker.protocol.client import KafkaError

from .topics import sample_end_offsets
from .web import as_json, client, console, page

blueprint = Blueprint("overview", __name__)


@dataclass
class BrokerRow:
    node_id: int
    host: str
    port: int
    rack: str | None
    controller: bool
    leaders: int = 0
    replicas: int = 0
    log_dirs: list[tuple[str, int, str | None]] = field(default_factory=list)   # (path, bytes, error)
    up: bool = True
    last_seen: float | None = None


@dataclass
class Alarm:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    min_isr: int | None = None


def min_insync(topics: list[str]) -> dict[str, int]:
    """Each topic's min.insync.replicas (its own config or the broker default)."""
    if not topics:
        return {}
    configs = client().describe_configs([(TOPIC_RESOURCE, t) for t in topics], include_synonyms=False,
                                        missing_ok=True)
    out = {}
    for (_, topic), entries in configs.items():
        for e in entries:
            if e.name == "min.insync.replicas" and e.value is not None:
                out[topic] = int(e.value)
    return out


@blueprint.get("/")
def index():
    c = client()
    state = console()
    described = c.describe_cluster()
    state.saw(described.brokers, described.cluster_id)
    md = c.metadata(None)
    rows = {b.node_id: BrokerRow(b.node_id, b.host, b.port, b.rack, b.node_id == described.controller_id)
            for b in described.brokers.values()}
    offline, under_replicated, under_min_isr = [], [], []
    minimums = min_insync(sorted(md.topics))
    for topic, info in sorted(md.topics.items()):
        for p, part in sorted(info.partitions.items()):
            for r in part.replicas:
                if r in rows:
                    rows[r].replicas += 1
            alarm = Alarm(topic, p, part.leader, part.replicas, part.isr, minimums.get(topic))
            if part.leader < 0 or part.leader not in described.brokers:
                offline.append(alarm)
                continue
            rows[part.leader].leaders += 1
            if len(part.isr) < len(part.replicas):
                under_replicated.append(alarm)
            if alarm.min_isr is not None and len(part.isr) < alarm.min_isr:
                under_min_isr.append(alarm)
    log_dir_errors = []
    for row in rows.values():
        try:
            dirs = c.describe_log_dirs(described.brokers[row.node_id])
        except KafkaError as e:
            log_dir_errors.append(f"broker {row.node_id}: {e}")
            continue
        row.log_dirs = [(d.path, sum(r.size for r in d.replicas), None if not d.error_code else "offline")
                        for d in dirs]
    for seen in state.missing_brokers(described.brokers):
        b = seen.broker
        rows[b.node_id] = BrokerRow(b.node_id, b.host, b.port, b.rack, False, up=False, last_seen=seen.last_seen)
    return page("overview.html", cluster_id=described.cluster_id, controller=described.controller_id,
                brokers=[rows[k] for k in sorted(rows)], topics=len(md.topics),
                partitions=sum(len(t.partitions) for t in md.topics.values()), offline=offline,
                under_replicated=under_replicated, under_min_isr=under_min_isr, log_dir_errors=log_dir_errors)


@blueprint.get("/overview/throughput.json")
def throughput():
    total = sum(sample_end_offsets(client().metadata(None)).values())
    history = console().series("throughput:end-offsets")
    history.add(time.time(), total)
    rates = history.rates()
    return as_json({"total": total, "rate": rates[-1][1] if rates else None,
                    "series": [{"t": int(t * 1000), "rate": round(r, 2)} for t, r in rates]})
