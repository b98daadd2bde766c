"""The metrics' pure parts: histogram buckets, the exposition of one broker's registry, and `kbroker start`'s
--logger parsing."""
from __future__ import annotations

import ast
import logging
from pathlib import Path

import click
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kbroker.cli import parse_logger_levels
from kbroker.controller import controller
from kbroker.metrics import CONTROLLER_STATE_TIMERS, BrokerMetrics, Histogram
from kbroker.network.server import RequestTimes


def samples(metrics: BrokerMetrics) -> dict:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_histogram_buckets_are_cumulative_and_inclusive():
    h = Histogram((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 1.0, 7.0):
        h.observe(v)
    assert h.buckets() == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]   # le: value <= bound
    assert h.count == 5 and h.sum == pytest.approx(8.65)


def answered(name: str, version: int, total: float, remote: float = 0.0, throttle_ms: int = 0) -> RequestTimes:
    """A request's times: read at 0, handled at 10 % of total for 40 % (remote of it waited inside), ready at 70 %,
    sent from 80 % to total."""
    t = RequestTimes(0.0)
    t.dequeued, t.local_done, t.ready, t.send_start, t.end = (total * f for f in (0.1, 0.5, 0.7, 0.8, 1.0))
    t.name, t.version, t.remote, t.throttle_ms = name, version, remote, throttle_ms
    return t


def test_exposition_of_a_broker_registry():
    m = BrokerMetrics()
    stats = m.topic("orders")
    stats.messages_in += 3
    stats.bytes_in += 120
    m.request_done(answered("Produce", 9, 0.002))
    m.request_done(answered("Produce", 9, 0.5, remote=0.1, throttle_ms=30))
    m.request_done(answered("FetchConsumer", 11, 0.0001))
    m.isr_shrinks += 1
    s = samples(m)
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "orders"),))] == 3
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "orders"),))] == 120
    produce = (("request", "Produce"), ("version", "9"))
    assert s[("kafka_network_requestmetrics_requests_total", produce)] == 2
    assert s[("kafka_network_requestmetrics_totaltime_seconds_count", produce)] == 2
    assert s[("kafka_network_requestmetrics_totaltime_seconds_sum", produce)] == pytest.approx(0.502)
    assert s[("kafka_network_requestmetrics_totaltime_seconds_bucket", (("le", "0.0025"), *produce))] == 1
    # the phases of the two Produce requests add up to their total times (throttle time apart)
    phases = {p: s[(f"kafka_network_requestmetrics_{p}_seconds_sum", produce)] for p in (
        "requestqueuetime", "localtime", "remotetime", "responsequeuetime", "responsesendtime", "throttletime")}
    assert phases["localtime"] == pytest.approx(0.4 * 0.002 + 0.4 * 0.5 - 0.1)
    assert phases["remotetime"] == pytest.approx(0.2 * 0.002 + 0.2 * 0.5 + 0.1)
    assert phases.pop("throttletime") == pytest.approx(0.03)
    assert sum(phases.values()) == pytest.approx(0.502)
    assert all(s[(f"kafka_network_requestmetrics_{p}_seconds_count", produce)] == 2 for p in phases)
    assert s[("kafka_server_replicamanager_isrshrinks_total", ())] == 1
    # Without a server the state gauges read zero rather than failing the scrape.
    assert s[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
    assert s[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    m.remove_topic("orders")
    assert not any(labels == (("topic", "orders"),) for _, labels in samples(m))


def test_registries_are_per_broker():
    a, b = BrokerMetrics(), BrokerMetrics()
    a.topic("t").messages_in += 1
    assert ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),)) not in samples(b)


def test_logger_levels():
    assert parse_logger_levels(["kafka.request.logger=DEBUG,state-change=WARN", "", "kbroker.replica=trace"]) == {
        "kafka.request.logger": logging.DEBUG, "state-change": logging.WARNING, "kbroker.replica": logging.DEBUG}
    for bad in ("kafka.request.logger", "x=LOUD", "=DEBUG"):
        with pytest.raises(click.BadParameter):
            parse_logger_levels([bad])


def test_every_controller_event_has_a_timed_controller_state():
    """Each function the controller queues (enqueue(self.X, ...), _ask(self.X or self.reassignments.X, ...)) maps to
    one of Kafka's timed ControllerStates: an event left out would stop the controller's loop."""
    tree = ast.parse(Path(controller.__file__).read_text())
    queued = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("enqueue", "_ask") and isinstance(node.args[0], ast.Attribute):
            target = node.args[0]
            owner = "Reassignments" if isinstance(target.value, ast.Attribute) else "KafkaController"
            queued.add(f"{owner}.{target.attr}")
    assert {"KafkaController._process_broker_change", "Reassignments.start"} <= queued
    queued -= {"KafkaController._process_ask"}   # its state is its function's
    assert queued <= set(controller.EVENT_STATES), queued - set(controller.EVENT_STATES)
    assert set(controller.EVENT_STATES.values()) <= set(CONTROLLER_STATE_TIMERS)
    assert controller.event_state(controller.KafkaController._process_unclean_enabled, ("t",)) == \
        "TopicUncleanLeaderElectionEnable"
