"""The Brokers page's reading of a broker's Prometheus exposition: the totals it charts and the request time's
percentile between two scrapes (as Prometheus' histogram_quantile interpolates it), from kbroker's own metrics."""
from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from kbroker.console.brokers import parse_metrics, quantile
from kbroker.metrics import BrokerMetrics


def scrape(m: BrokerMetrics):
    return parse_metrics(generate_latest(m.registry).decode())


def test_totals_are_summed_over_topics_and_request_types():
    m = BrokerMetrics()
    m.topic("a").bytes_in, m.topic("b").bytes_in, m.topic("a").bytes_out = 100, 50, 7
    m.request_done("Produce", 9, 0.002)
    m.request_done("Produce", 8, 0.002)
    m.request_done("Metadata", 11, 0.0001)
    s = scrape(m)
    assert s.totals == {"bytesin": 150, "bytesout": 7, "requests": 3}
    assert sorted(s.buckets) == ["Metadata", "Produce"]
    assert dict(s.buckets["Produce"])[0.0025] == 2          # both versions, cumulative
    assert s.buckets["Produce"][-1] == (float("inf"), 2)


def test_p99_of_the_requests_between_two_scrapes():
    m = BrokerMetrics()
    for _ in range(1000):
        m.request_done("Produce", 9, 0.0001)                  # before the first scrape: not counted
    before = scrape(m).buckets["Produce"]
    for _ in range(98):
        m.request_done("Produce", 9, 0.0002)                  # bucket (0, 0.0005]
    for _ in range(2):
        m.request_done("Produce", 9, 0.2)                     # bucket (0.1, 0.25]
    after = scrape(m).buckets["Produce"]
    # rank 99 of 100: the first of the 2 slow ones, halfway into (0.1, 0.25].
    assert quantile(0.99, before, after) == pytest.approx(0.175)
    assert quantile(0.5, before, after) == pytest.approx(0.0005 * 50 / 98)


def test_no_percentile_without_requests_or_after_a_restart():
    m = BrokerMetrics()
    m.request_done("Produce", 9, 0.01)
    first = scrape(m).buckets["Produce"]
    assert quantile(0.99, first, first) is None               # nothing in between
    restarted = BrokerMetrics()
    restarted.request_done("Produce", 9, 0.01)
    m.request_done("Produce", 9, 0.01)
    assert quantile(0.99, scrape(m).buckets["Produce"], scrape(restarted).buckets["Produce"]) is None
    assert quantile(0.99, [], first) is None                  # no earlier scrape


def test_requests_slower_than_every_bound_give_the_highest_bound():
    m = BrokerMetrics()
    m.request_done("Produce", 9, 100.0)
    after = scrape(m).buckets["Produce"]
    before = [(b, 0.0) for b, _ in after]
    assert quantile(0.99, before, after) == 30.0


def test_garbage_is_a_value_error():
    with pytest.raises(ValueError):
        parse_metrics("kafka_server_brokertopicmetrics_bytesin_total{topic=\"a\" 1\n")
