"""What every page's view uses: the console's state, the current visitor, a cluster client acting as them, and
the one way a view answers (render, a redirect with a message, JSON).

A view calls `client()` for its cluster calls; the client is checked out of the pool once per request and given
back when the request ends (dropped when the request failed, so a broker that went away costs one page). A
KafkaError a view lets through becomes the error page (app.py): the layout with what failed, in the page's place.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from flask import current_app, flash, g, jsonify, redirect, render_template, request, url_for

from admin_cli.kafka_client import AdminClient
from kbroker.protocol.client import Broker
from kbroker.protocol.client.security import ClientSecurity

from .visitors import ClientPool, Visitor, Visitors


@dataclass
class ConsoleSettings:
    bootstrap: list[tuple[str, int]]
    security: ClientSecurity | None = None       # --command-config: how to reach the listener (and if it needs SASL)
    zookeeper: str | None = None                 # --zookeeper: optional, for what only ZooKeeper knows
    metrics_urls: list[str] = field(default_factory=list)   # --metrics-url: the brokers' Prometheus endpoints
    request_timeout: float = 10.0

    @property
    def login_required(self) -> bool:
        return self.security is not None and self.security.uses_sasl


@dataclass
class SeenBroker:
    broker: Broker
    last_seen: float          # time.time() of the last metadata that listed it


class Series:
    """(time, value) samples of one figure, the last max_age seconds of them: the history behind a chart, kept by
    the console so that a page opened (or reloaded) shows the recent past, not an empty chart."""

    def __init__(self, max_age: float = 600.0):
        self.max_age = max_age
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, when: float, value: float) -> None:
        self.samples.append((when, value))
        while self.samples and when - self.samples[0][0] > self.max_age:
            self.samples.popleft()

    def rates(self) -> list[tuple[float, float]]:
        """(time, increase per second since the sample before) of a growing total; never negative (a total
        that went down, e.g. a deleted topic's offsets, counts as no increase)."""
        pairs = list(self.samples)
        return [(t1, max(0.0, (v1 - v0) / (t1 - t0))) for (t0, v0), (t1, v1) in zip(pairs, pairs[1:]) if t1 > t0]


class Console:
    """The console's process-wide state, one per app (app.extensions["kbroker_console"])."""

    def __init__(self, settings: ConsoleSettings):
        self.settings = settings
        self.visitors = Visitors()
        self.pool = ClientPool(settings.bootstrap, settings.security, settings.request_timeout)
        self.seen_brokers: dict[int, SeenBroker] = {}
        self.cluster_id: str | None = None
        self._series: dict[str, Series] = {}
        self.request_types: set[str] = set()     # request types the brokers' metrics listed (the p99 chart's choice)

    def series(self, name: str, max_age: float = 600.0) -> Series:
        """The named history (made on first use), e.g. "lag:GROUP"."""
        s = self._series.get(name)
        if s is None:
            s = self._series[name] = Series(max_age)
        return s

    def saw(self, brokers: dict[int, Broker], cluster_id: str | None = None) -> None:
        """Remember the brokers a metadata answer listed: one missing later is shown as down, not forgotten."""
        now = time.time()
        if cluster_id:
            self.cluster_id = cluster_id
        for node_id, b in brokers.items():
            self.seen_brokers[node_id] = SeenBroker(b, now)

    def missing_brokers(self, live: dict[int, Broker]) -> list[SeenBroker]:
        return [s for node_id, s in sorted(self.seen_brokers.items()) if node_id not in live]


def console() -> Console:
    return current_app.extensions["kbroker_console"]


def visitor() -> Visitor | None:
    return g.get("visitor")


def client() -> AdminClient:
    """The cluster client of this request, acting as the visitor's principal."""
    if "client_cm" not in g:
        g.client_cm = console().pool.client(visitor())
        g.client = g.client_cm.__enter__()
    return g.client


def release_client(error: BaseException | None) -> None:
    cm = g.pop("client_cm", None)
    if cm is not None:
        if error is None:
            cm.__exit__(None, None, None)
        else:
            cm.__exit__(type(error), error, error.__traceback__)


def page(template: str, **context):
    return render_template(template, **context)


def done(message: str, endpoint: str, category: str = "ok", **values):
    """After a form: the message on the next page, and a redirect to it (POST, redirect, GET)."""
    flash(message, category)
    return redirect(url_for(endpoint, **values))


def as_json(data, status: int = 200):
    response = jsonify(data)
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    return response


def form_text(name: str, default: str = "") -> str:
    return (request.form.get(name) or default).strip()
