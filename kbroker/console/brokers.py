"""Brokers: each broker's log directories and configs (the dynamic ones editable), and charts of its traffic read
from its Prometheus endpoint.

The list: every live broker (DescribeCluster) with its log directories (DescribeLogDirs: path, size, replicas,
offline). A broker's page: every config as DescribeConfigs answers it (value, source; a sensitive value is never
shown); one that is not read-only (Kafka's dynamic broker configs) may be set or its per-broker override removed
through IncrementalAlterConfigs, with kafka-configs.sh's checks (admin_cli/configs.py's alter_config_admin).

Charts: the console scrapes the brokers' Prometheus endpoints server-side (the browser never talks to brokers)
each time the page polls metrics.json, at most once a second: the endpoints given with --metrics-url, or found
from each broker's metrics.port (and metrics.host, its host when that is a wildcard). From kbroker's metrics
(kbroker/metrics.py): bytes in and out per second (the BrokerTopicMetrics counters summed over topics), requests
per second (RequestMetrics' counter summed over request types) and the request time's 99th percentile of one
request type, from the TotalTime histogram's bucket counts between two scrapes (interpolated within the bucket,
as Prometheus' histogram_quantile). Totals and percentiles are kept in the console's series so a reload shows
the last ten minutes. An endpoint that does not answer is reported on the page; the rest of it still shows.
"""
from __future__ import annotations

import math
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

import gevent
from flask import Blueprint, abort, current_app, request
from prometheus_client.parser import text_string_to_metric_families

from admin_cli.configs import Entity, alter_config_admin
from admin_cli.kafka_client import BROKER_RESOURCE, LogDir
from kbroker.common.admin_errors import AdminError
from kbroker.protocol.client import Broker, KafkaError, TimedOut, Unreachable

from .web import as_json, client, console, done, form_text, page

blueprint = Blueprint("brokers", __name__)
SCRAPE_TIMEOUT = 3.0
MIN_SAMPLE_GAP = 1.0          # seconds between two scrapes of one endpoint, however many pages poll
WILDCARDS = ("", "0.0.0.0", "::", "[::]")
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
REQUESTS = "kafka_network_requestmetrics_requests_total"
REQUEST_TIME = "kafka_network_requestmetrics_totaltime_seconds_bucket"
TOTALS = (("bytesin", BYTES_IN), ("bytesout", BYTES_OUT), ("requests", REQUESTS))


@dataclass
class Endpoint:
    label: str                  # "broker 1", or the URL's host:port for --metrics-url
    url: str
    error: str | None = None


@dataclass
class Scrape:
    """The figures of one scrape: totals by name, and per request type the time histogram's cumulative counts
    as [(upper bound in seconds, count)] in bound order."""
    totals: dict[str, float]
    buckets: dict[str, list[tuple[float, float]]]


def parse_metrics(text: str) -> Scrape:
    """The figures the charts need from a Prometheus text exposition (ValueError if it does not parse)."""
    totals = {name: 0.0 for name, _ in TOTALS}
    wanted = {sample: name for name, sample in TOTALS}
    buckets: dict[str, dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in wanted:
                totals[wanted[s.name]] += s.value
            elif s.name == REQUEST_TIME and "request" in s.labels and "le" in s.labels:
                by_bound = buckets.setdefault(s.labels["request"], {})
                bound = float(s.labels["le"])
                by_bound[bound] = by_bound.get(bound, 0.0) + s.value      # summed over versions
    return Scrape(totals, {r: sorted(b.items()) for r, b in buckets.items()})


def quantile(q: float, before: list[tuple[float, float]], after: list[tuple[float, float]]) -> float | None:
    """The q-quantile (seconds) of the observations between two cumulative histograms of the same buckets,
    interpolated linearly within its bucket (Prometheus' histogram_quantile); None when there were none, or when
    the counters went back (a restarted broker)."""
    if len(before) != len(after) or any(b[0] != a[0] for b, a in zip(before, after)):
        return None
    deltas = [(bound, a - b) for (bound, b), (_, a) in zip(before, after)]
    if not deltas or deltas[-1][1] <= 0 or any(d < 0 for _, d in deltas):
        return None
    rank = q * deltas[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in deltas:
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below) if count > below else bound
        lower, below = bound, count
    return lower


def discover_endpoints() -> list[Endpoint]:
    """--metrics-url's endpoints, else each live broker's from its metrics.port and metrics.host configs."""
    urls = console().settings.metrics_urls
    if urls:
        return [Endpoint(urlsplit(u).netloc or u, u) for u in urls]
    c = client()
    out = []
    for node_id, broker in sorted(c.describe_cluster().brokers.items()):
        try:
            entries = c.describe_configs([(BROKER_RESOURCE, str(node_id))], include_synonyms=False)
        except KafkaError as e:
            out.append(Endpoint(f"broker {node_id}", "", f"its metrics.port could not be read: {e}"))
            continue
        values = {e.name: e.value for e in next(iter(entries.values()), [])}
        try:
            port = int(values.get("metrics.port") or -1)
        except ValueError:
            port = -1
        if port < 0:
            continue
        host = values.get("metrics.host") or ""
        host = broker.host if host in WILDCARDS else host
        host = f"[{host}]" if ":" in host else host
        out.append(Endpoint(f"broker {node_id}", f"http://{host}:{port}/metrics"))
    return out


def scrape(endpoint: Endpoint) -> Scrape | None:
    """The endpoint's figures; None (and endpoint.error set) when it does not answer or answers garbage."""
    try:
        with urllib.request.urlopen(endpoint.url, timeout=SCRAPE_TIMEOUT) as r:
            return parse_metrics(r.read().decode("utf-8", "replace"))
    except (OSError, ValueError) as e:
        endpoint.error = str(getattr(e, "reason", None) or e)
        return None


def _key(what: str, endpoint: Endpoint) -> str:
    return f"metrics|{what}|{endpoint.url}"


def sample(endpoints: list[Endpoint]) -> None:
    """Scrape every endpoint at once (at most one scrape a second each) into the console's series."""
    state = console()
    now = time.time()
    due = []
    for e in endpoints:
        if not e.url or e.error:
            continue
        last = state.series(_key("bytesin", e)).samples
        if not last or now - last[-1][0] >= MIN_SAMPLE_GAP:
            due.append(e)
    jobs = [gevent.spawn(scrape, e) for e in due]
    gevent.joinall(jobs, timeout=SCRAPE_TIMEOUT + 1)
    for e, job in zip(due, jobs):
        result = job.value if job.successful() else None
        if result is None:
            e.error = e.error or "no answer in time"
            continue
        for name, value in result.totals.items():
            state.series(_key(name, e)).add(now, value)
        seen = request_types()
        for req, counts in result.buckets.items():
            seen.add(req)
            # Each bucket's last cumulative count (one sample kept): the next scrape's percentile starts there.
            lasts = [state.series(_key(f"bucket:{req}:{bound}", e), max_age=0) for bound, _ in counts]
            before = [(bound, s.samples[-1][1]) for (bound, _), s in zip(counts, lasts) if s.samples]
            p = quantile(0.99, before, counts)
            if p is not None:
                state.series(_key(f"p99:{req}", e)).add(now, p * 1000)
            for (_, count), s in zip(counts, lasts):
                s.add(now, count)


def request_types() -> set[str]:
    """Every request type a scrape listed (the choices of the latency chart): only these have p99 series, so a
    request for any other name makes none."""
    return current_app.extensions.setdefault("kbroker_console_request_types", set())


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
            charts[name].append({"label": e.label, "points": _points(state.series(_key(name, e)).rates())})
        p99 = state.series(_key(f"p99:{wanted}", e)).samples if wanted in known else []
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
