"""The brokers' Prometheus endpoints, as the console reads them for its charts (Brokers, Topics): which endpoints,
one scrape of each, the figures kept, and a percentile between two scrapes.

Endpoints are those given with --metrics-url, else each live broker's from its metrics.port (and metrics.host, its
host when that is a wildcard) read with DescribeConfigs. The console scrapes them server-side (the browser never
talks to brokers), all at once on the gevent loop, at most once a second each however many pages poll, and keeps
the totals in its series (console().series) so a reload shows the last ten minutes: bytes in and out (the
BrokerTopicMetrics counters, summed over topics, and bytes out per topic), requests (RequestMetrics' counter summed
over request types), and per request type the TotalTime histogram's cumulative bucket counts, from which the 99th
percentile between two scrapes is interpolated within its bucket as Prometheus' histogram_quantile does. An
endpoint that does not answer gets its error set, for the page to say so.
"""
from __future__ import annotations

import math
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import gevent
from prometheus_client.parser import text_string_to_metric_families

from admin_cli.kafka_client import BROKER_RESOURCE
from kbroker.protocol.client import KafkaError

from .web import client, console

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
    topic_bytes_out: dict[str, float] = field(default_factory=dict)


def parse_metrics(text: str) -> Scrape:
    """The figures the charts need from a Prometheus text exposition (ValueError if it does not parse)."""
    totals = {name: 0.0 for name, _ in TOTALS}
    wanted = {sample: name for name, sample in TOTALS}
    buckets: dict[str, dict[float, float]] = {}
    by_topic: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in wanted:
                totals[wanted[s.name]] += s.value
                if s.name == BYTES_OUT and "topic" in s.labels:
                    by_topic[s.labels["topic"]] = by_topic.get(s.labels["topic"], 0.0) + s.value
            elif s.name == REQUEST_TIME and "request" in s.labels and "le" in s.labels:
                by_bound = buckets.setdefault(s.labels["request"], {})
                bound = float(s.labels["le"])
                by_bound[bound] = by_bound.get(bound, 0.0) + s.value      # summed over versions
    return Scrape(totals, {r: sorted(b.items()) for r, b in buckets.items()}, by_topic)


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


def key(what: str, endpoint: Endpoint) -> str:
    """The name of an endpoint's series: "bytesin", "bytesout", "requests", "p99:<request>", "topic-out:<topic>"."""
    return f"metrics|{what}|{endpoint.url}"


def sample(endpoints: list[Endpoint]) -> None:
    """Scrape every endpoint at once (at most one scrape a second each) into the console's series."""
    state = console()
    now = time.time()
    due = []
    for e in endpoints:
        if not e.url or e.error:
            continue
        last = state.series(key("bytesin", e)).samples
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
            state.series(key(name, e)).add(now, value)
        for topic, value in result.topic_bytes_out.items():
            state.series(key(f"topic-out:{topic}", e)).add(now, value)
        seen = request_types()
        for req, counts in result.buckets.items():
            seen.add(req)
            # Each bucket's last cumulative count (one sample kept): the next scrape's percentile starts there.
            lasts = [state.series(key(f"bucket:{req}:{bound}", e), max_age=0) for bound, _ in counts]
            before = [(bound, s.samples[-1][1]) for (bound, _), s in zip(counts, lasts) if s.samples]
            p = quantile(0.99, before, counts)
            if p is not None:
                state.series(key(f"p99:{req}", e)).add(now, p * 1000)
            for (_, count), s in zip(counts, lasts):
                s.add(now, count)


def request_types() -> set[str]:
    """Every request type a scrape listed (the choices of the latency chart): only these have p99 series, so a
    request for any other name makes none."""
    return console().request_types
