"""Brokers: each broker's log directories and configs (the dynamic ones editable), and charts of its traffic read
from its Prometheus endpoint.

The list: every live broker (DescribeCluster) with its log directories (DescribeLogDirs: path, size, replicas,
offline). A broker's page: every config as DescribeConfigs answers it (value, source; a sensitive value is never
shown); one that is not read-only (Kafka's dynamic broker configs) may be set or its per-broker override removed
through IncrementalAlterConfigs, with kafka-configs.sh's checks (admin_cli/configs.py's alter_config_admin).

Charts (kbroker/console/prometheus.py reads the brokers' Prometheus endpoints): bytes in and out per second,
requests per second, and one request type's 99th percentile request time, per broker, over the last ten minutes.
An endpoint that does not answer is reported on the page; the rest of it still shows.
"""
from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, abort, request

from admin_cli.configs import Entity, alter_config_admin
from admin_cli.kafka_client import BROKER_RESOURCE, LogDir
from kbroker.common.admin_errors import AdminError
from kbroker.protocol.client import Broker, KafkaError, TimedOut, Unreachable

from .prometheus import TOTALS, discover_endpoints, key, request_types, sample
from .web import as_json, client, console, done, form_text, page

blueprint = Blueprint("brokers", __name__)
def _points(pairs) -> list[dict]:
    return [{"t": int(t * 1000), "y": round(v, 3)} for t, v in pairs]


@blueprint.get("/brokers/metrics.json")
def metrics():
    """The charts' data: per endpoint, bytes in/out and requests per second and one request type's p99 (ms,
    ?request=, Produce by default), and the request types the scrapes listed (for the page's choice)."""
    wanted = request.args.get("request", "Produce")
    endpoints = discover_endpoints()
    sample(endpoints)
    state = console()
    charts = {"bytesin": [], "bytesout": [], "requests": [], "p99": []}
    known = request_types()
    for e in endpoints:
        if not e.url:
            continue
        for name, _ in TOTALS:
            charts[name].append({"label": e.label, "points": _points(state.series(key(name, e)).rates())})
        p99 = state.series(key(f"p99:{wanted}", e)).samples if wanted in known else []
        charts["p99"].append({"label": e.label, "points": _points(p99)})
    return as_json({"endpoints": [{"label": e.label, "url": e.url, "error": e.error} for e in endpoints],
                    "reachable": any(e.url and not e.error for e in endpoints), "request": wanted,
                    "requests": sorted(known | {"Produce"}), "charts": charts})


@dataclass
class BrokerRow:
    broker: Broker
    controller: bool
    log_dirs: list[LogDir] | None = None      # None: DescribeLogDirs failed (error says why) or the broker is down
    error: str | None = None
    last_seen: float | None = None            # a broker seen before and missing now: when it was last listed


def _brokers() -> tuple[list[BrokerRow], dict]:
    c = client()
    described = c.describe_cluster()
    console().saw(described.brokers, described.cluster_id)
    rows = []
    for node_id, b in sorted(described.brokers.items()):
        row = BrokerRow(b, node_id == described.controller_id)
        try:
            row.log_dirs = c.describe_log_dirs(b)
        except KafkaError as e:
            row.error = str(e)
        rows.append(row)
    for seen in console().missing_brokers(described.brokers):
        rows.append(BrokerRow(seen.broker, False, error="down: not in the cluster's metadata",
                              last_seen=seen.last_seen))
    return rows, described.brokers


@blueprint.get("/brokers")
def index():
    rows, _ = _brokers()
    return page("brokers.html", brokers=rows, metrics_urls=console().settings.metrics_urls)


@blueprint.get("/brokers/<int:broker_id>")
def detail(broker_id):
    rows, live = _brokers()
    row = next((r for r in rows if r.broker.node_id == broker_id and r.last_seen is None), None)
    if row is None:
        abort(404, description=f"Broker {broker_id} is not a live broker of the cluster "
                               f"(live brokers: {', '.join(map(str, sorted(live))) or 'none'}).")
    resource = (BROKER_RESOURCE, str(broker_id))
    configs = sorted(client().describe_configs([resource], include_synonyms=False)[resource], key=lambda e: e.name)
    return page("broker.html", row=row, configs=configs)


@blueprint.post("/brokers/<int:broker_id>/config")
def alter(broker_id):
    """Set a dynamic config of the broker (action=set), or remove its per-broker override (action=delete)."""
    name, value, action = form_text("name"), form_text("value"), form_text("action", "set")
    if not name:
        return done("Give the config's name.", "brokers.detail", "error", broker_id=broker_id)
    if action == "set" and value == "":
        return done(f"Give a value for {name} (or remove the override to go back to the default).",
                    "brokers.detail", "error", broker_id=broker_id)
    to_add, to_delete = ({name: value}, []) if action == "set" else ({}, [name])
    try:
        alter_config_admin(client(), Entity("broker", str(broker_id)), to_add, to_delete)
    except (Unreachable, TimedOut):
        raise
    except (KafkaError, AdminError) as e:
        return done(f"{name}: {e}", "brokers.detail", "error", broker_id=broker_id, _anchor=f"config-{name}")
    what = f"set to {value}" if action == "set" else "override removed"
    return done(f"Broker {broker_id}: {name} {what}.", "brokers.detail", broker_id=broker_id,
                _anchor=f"config-{name}")
